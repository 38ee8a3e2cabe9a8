"""The HTTP door's edges on the real app, served by uvicorn on loopback (no X: no session is started):
413 whatever the transfer encoding, bounded error bodies, a true Allow on 405, and the Origin
policy (the server's own origin and the configured ones, not any loopback port)."""

from __future__ import annotations

import json
import re

import httpx2
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from desktop.errors import MAX_LISTED, MAX_PART_CHARS
from desktop.session.manager import SessionManager
from desktop.session.stack import free_port
from tests.conftest import LiveServer
from vision.http.app import Settings, create_app
from vision.http.limits import MAX_BODY_BYTES

CLICK = "/api/v1/sessions/nope/desktop/click"  # a body FastAPI parses; no session, so nothing can run
OTHER_ORIGIN = "https://tools.example.com"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("edges")
    (root / "sessions").mkdir()
    port = free_port()
    manager = SessionManager(root=root / "sessions", max_sessions=1)
    app = create_app(manager, Settings(token=None, port=port, data_dir=str(root / "data"),
                                       allowed_origins=(OTHER_ORIGIN,)))
    with LiveServer(app, port=port) as live:
        live.app = app
        yield live
    manager.close()


@pytest.fixture(scope="module")
def client(server):
    with httpx2.Client(base_url=server.url, timeout=30) as http:
        yield http


def error(reply: httpx2.Response, status: int) -> dict:
    assert reply.status_code == status, reply.text[:500]
    return reply.json()["error"]


# ------------------------------------------------------------------------------------------ 413


def test_a_chunked_body_over_the_cap_is_413_like_a_declared_one(client):
    """Without Content-Length the cap is found while FastAPI reads the body; it used to answer
    422 invalid_json ("could not be read as JSON (BodyTooLarge)")."""
    def chunks():
        for _ in range(MAX_BODY_BYTES // 4096 + 2):
            yield b" " * 4096

    streamed = client.post(CLICK, content=chunks(), headers={"content-type": "application/json"})
    assert error(streamed, 413)["code"] == "body_too_large"
    declared = client.post(CLICK, content=b" " * (MAX_BODY_BYTES + 1), headers={"content-type": "application/json"})
    assert error(declared, 413) == error(streamed, 413)
    # Under the cap, the same route still reads the body: a bad one is the route's own 422.
    assert error(client.post(CLICK, json={"x": 1}), 422)["code"] == "invalid_action"


# ------------------------------------------------------------------------------ bounded errors


def test_a_body_of_many_unknown_keys_gets_a_short_error_that_counts_them(client):
    """980 kB of 70,000 unknown keys was answered with a 2.9 MB message, one part per key."""
    body = json.dumps({f"k{i:06d}": 1 for i in range(70_000)}).encode()
    assert len(body) < MAX_BODY_BYTES
    reply = client.post(CLICK, content=body, headers={"content-type": "application/json"})
    message = error(reply, 422)["message"]
    assert len(reply.content) < 8_000
    assert message.count("Extra inputs are not permitted") == MAX_LISTED
    assert "k000000: " in message and f"k{MAX_LISTED - 1:06d}: " in message  # the first ones, in order
    assert "and 69,980 more problems (70,000 in all" in message


def test_a_long_echo_is_clipped_and_every_problem_of_a_small_body_is_still_listed(client):
    key = "k" * 200_000
    reply = client.post(CLICK, json={key: 1, "x": -1, "y": 5000, "button": "thumb"})
    message = error(reply, 422)["message"]
    assert len(message) < 2_000
    assert f"{'k' * MAX_PART_CHARS}… (" in message and "more characters)" in message
    for problem in ("x: Input should be greater than or equal to 0", "y: Input should be less than or equal to 1079",
                    "button: Input should be"):
        assert problem in message
    assert "more problems" not in message


# ------------------------------------------------------------------------------------- Allow


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def test_a_path_no_route_has_names_the_routes_beside_it(client):
    said = error(client.post("/api/v1/sessions/x1/desktop/clickk", json={}), 404)
    assert said["code"] == "not_found"
    assert said["message"].startswith("no route /api/v1/sessions/x1/desktop/clickk; did you mean 'click'? Beside it: ")
    assert all(f" {action}," in said["message"] for action in ("double_click", "drag", "key", "scroll"))
    assert error(client.get("/nowhere/at/all"), 404)["message"] == "no route /nowhere/at/all"


def test_405_allows_every_method_of_the_path(server, client):
    """Starlette named only the first route's methods: GET for /sessions/{id}, which DELETE also takes."""
    reply = client.request("PATCH", "/api/v1/sessions")
    assert error(reply, 405)["code"] == "method_not_allowed"
    assert reply.headers["allow"] == "GET, POST"
    assert client.put("/api/v1/sessions/x1").headers["allow"] == "DELETE, GET"
    # Every path of the schema: its 405 names exactly the methods the schema gives it.
    documented: dict[str, set[str]] = {}
    for path, operations in server.app.openapi()["paths"].items():
        documented.setdefault(_concrete(path), set()).update(m.upper() for m in operations)
    checked = 0
    for path, methods in documented.items():
        unused = next(m for m in ("PATCH", "PUT", "DELETE", "POST", "GET") if m not in methods)
        reply = client.request(unused, path)
        if reply.status_code != 405:  # another route's path pattern also matches this spelling
            continue
        assert set(reply.headers["allow"].split(", ")) >= methods, (path, reply.headers["allow"])
        checked += 1
    assert checked > 50
    # A mounted app's own 405 keeps its Allow.
    assert client.put("/console/assets/console.js").headers["allow"] == "GET, HEAD"


# ------------------------------------------------------------------------------------ Origin


@pytest.mark.parametrize("origin, refused", [
    ("{own}", False),
    ("http://127.0.0.1:{other}", True),   # another local server's page: another origin
    ("http://localhost:{port}", True),    # the same port by another name: another origin too
    ("http://127.0.0.1", True),
    ("null", True),
    (OTHER_ORIGIN, False),                # configured (--allowed-origins)
    ("https://tools.example.com:8443", True),
])
def test_only_the_servers_own_origin_and_the_configured_ones_may_change_anything(server, client, origin, refused):
    origin = origin.format(own=server.url, port=server.port, other=server.port + 1)
    reply = client.post(CLICK, json={"x": 1, "y": 1}, headers={"origin": origin})
    if refused:
        assert error(reply, 403)["code"] == "forbidden_origin"
    else:
        assert error(reply, 404)["code"] == "session_not_found"  # past the Origin check


def test_the_origin_is_the_one_the_host_names(server, client):
    """A page served as localhost:<port> posts to localhost:<port>: its own origin by that name."""
    headers = {"origin": f"http://localhost:{server.port}", "host": f"localhost:{server.port}"}
    assert error(client.post(CLICK, json={"x": 1, "y": 1}, headers=headers), 404)["code"] == "session_not_found"
    assert client.get("/healthz", headers={"origin": "http://127.0.0.1:1"}).status_code == 200  # a read is not checked


def test_the_live_views_websocket_takes_only_the_servers_own_origin(server):
    url = f"ws://127.0.0.1:{server.port}/api/v1/sessions/nope/vnc"
    for origin, code in ((f"http://127.0.0.1:{server.port + 1}", "forbidden_origin"),
                         (server.url, "session_not_found")):
        with pytest.raises(InvalidStatus) as refused, \
                connect(url, origin=origin, subprotocols=["binary", "glassdesk.token.x"], open_timeout=10):
            pass
        assert json.loads(bytes(refused.value.response.body))["error"]["code"] == code
