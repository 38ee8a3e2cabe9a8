"""The remote path end to end: a control plane (API, loop, traces, page layer, QA) driving real
single-session glassdesk servers started as local processes (desktop.remote.backends.process).

The same seam the Docker and Kubernetes backends use, without a daemon: a click sent to the control
plane lands on the test page in the session server's Chromium, a vision run drives it through
RemoteDesktop, page and QA calls are forwarded, a killed server is reported and replaced, and a
deleted one leaves no process behind.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import httpx2
import pytest

from desktop.remote.backends.manager import BackendSessions
from desktop.remote.backends.process import ProcessBackend
from desktop.session.stack import free_port
from tests.conftest import LiveServer

pytestmark = pytest.mark.x11

S = "/api/v1/sessions/r1"


@pytest.fixture(scope="module")
def plane():
    """A control plane on the process backend, its API served, with one remote session ``r1``."""
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    manager = BackendSessions(ProcessBackend(), max_sessions=3, supervise_every_s=0.3)
    glassdesk = Glassdesk.build(manager, data_dir=tempfile.mkdtemp(prefix="glassdesk-remote-"), config=VisionConfig())
    port = free_port()
    with LiveServer(create_app(manager, Settings(token=None, port=port), glassdesk), port=port) as server:
        with httpx2.Client(base_url=server.url, timeout=120) as client:
            r = client.post("/api/v1/sessions", json={"id": "r1"})
            assert r.status_code == 201, r.text
            client.port = port  # for the live-view tests' websocket
            yield client, glassdesk, manager
    manager.close()


def _page_origin(client, page_server) -> tuple[int, int]:
    """Load the test page through the control plane and measure where its (0,0) is on the display."""
    page_server.clear()
    r = client.post(f"{S}/desktop/open", json={"url": page_server.url})
    assert r.status_code == 200, r.text
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    r = client.post(f"{S}/desktop/click", json={"x": 960, "y": 700})
    assert r.status_code == 200, r.text
    event = page_server.wait_for(lambda e: e.get("type") == "click")
    return event["screenX"] - event["clientX"], event["screenY"] - event["clientY"]


def test_a_click_through_the_control_plane_lands_on_the_remote_page(plane, page_server):
    client, _, _ = plane
    ox, oy = _page_origin(client, page_server)
    page_server.clear()
    r = client.post(f"{S}/desktop/click", json={"x": ox + 1260, "y": oy + 145}, params={"screenshot": "true"})
    assert r.status_code == 200, r.text
    body = r.json()
    click = page_server.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (click["screenX"], click["screenY"]) == (ox + 1260, oy + 145)
    assert body["executed"][-1][0] == "xdotool" and body["screenshot"]
    assert body["page"]["url"] == page_server.url  # the page summary rides along, as locally
    shot = client.get(f"{S}/desktop/screenshot")
    assert shot.headers["content-type"] == "image/png" and shot.content.startswith(b"\x89PNG")
    assert client.get(f"{S}/desktop/cursor").json() == {"x": ox + 1260, "y": oy + 145}


@pytest.mark.serial("the click's answer must come while the page's 5 s of repaints still run")
def test_a_screen_still_changing_is_answered_unsettled_through_the_control_plane(plane, page_server):
    client, _, _ = plane
    ox, oy = _page_origin(client, page_server)
    page_server.clear()
    r = client.post(f"{S}/desktop/click", json={"x": ox + 1300, "y": oy + 535})  # #spin: 5 s of repaints
    assert r.status_code == 200, r.text
    page_server.wait_for(lambda e: e["type"] == "click" and e["target"] == "spin")
    assert r.json()["settled"] is False  # the session server's verdict, not the control plane's default
    page_server.wait_for(lambda e: e.get("type") == "spin-stopped", timeout=15)


def test_a_vision_run_drives_the_remote_desktop_and_traces_in_the_control_plane(plane, page_server):
    client, glassdesk, _ = plane
    ox, oy = _page_origin(client, page_server)
    page_server.clear()
    script = [{"action": "click", "x": ox + 300, "y": oy + 280}, {"action": "type", "text": "remote {{w}}"},
              {"action": "done", "answer": "typed"}]
    r = client.post(f"{S}/vision/act", json={"instruction": "type", "model": "scripted", "script": script,
                                             "secrets": {"w": "w0rd"}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done", body
    page_server.wait_for(lambda e: e["type"] == "input" and e["field"] == "remote w0rd")
    assert glassdesk.store.verify(body["trace_id"]).ok  # the trace is the control plane's
    trace = client.get(f"/api/v1/traces/{body['trace_id']}").json()
    assert len(trace["steps"]) == 3 and trace["steps"][0]["url"] == page_server.url


def test_a_run_observing_with_marks_reads_them_from_the_session_server(plane, page_server):
    """The loop's set-of-marks (vision/act ``marks``) through RemoteDesktop: the session server
    numbers its controls, the control plane's run sees them in display pixels."""
    client, _, manager = plane
    _page_origin(client, page_server)
    marks = manager.sessions["r1"].marks(200, False)
    (sign_in,) = [m for m in marks.marks if m.name == "Sign in"]
    assert sign_in.source == "page" and sign_in.role == "button" and marks.image is None
    r = client.post(f"{S}/vision/act", json={"instruction": "look", "model": "scripted", "marks": True,
                                             "script": [{"action": "done", "answer": "seen"}]})
    assert r.status_code == 200 and r.json()["status"] == "done", r.text


def test_page_calls_are_forwarded_with_their_typed_errors(plane, page_server):
    client, _, _ = plane
    page_server.clear()
    r = client.post(f"{S}/page/navigate", json={"url": page_server.url})
    assert r.status_code == 200, r.text
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    page_server.clear()
    r = client.post(f"{S}/page/click", json={"selector": "#signin"})
    assert r.status_code == 200, r.text
    page_server.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    state = client.get(f"{S}/page").json()
    assert state["title"] == "glassdesk test page"
    missing = client.post(f"{S}/page/click", json={"selector": "#nope", "timeout_ms": 300})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "element_not_found"
    policy = client.get(f"{S}/page/dialog-policy").json()
    assert policy == {"session_id": "r1", "mode": "manual"}  # the control plane's name, not the server's


def test_a_qa_verb_runs_on_the_remote_session(plane, page_server):
    client, _, _ = plane
    r = client.post(f"{S}/qa/verify_element_exists", json={"url": page_server.url, "selector": "#signin"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True and body["exists"] and body["found_by"] == "dom", body
    run = client.get(f"/api/v1/qa/runs/{body['test_run_id']}/verify").json()
    assert run["ok"] is True


def test_the_session_server_refuses_other_sessions_and_strangers(plane):
    _, _, manager = plane
    endpoint = manager.get("r1").client.endpoint
    with httpx2.Client(base_url=endpoint.base_url, timeout=30, trust_env=False) as raw:
        assert raw.get("/api/v1/sessions").status_code == 401  # no token
        auth = {"authorization": f"Bearer {endpoint.token}"}
        r = raw.post("/api/v1/sessions", json={"id": "other"}, headers=auth)
        assert r.status_code == 409 and r.json()["error"]["code"] == "single_session"
        r = raw.delete("/api/v1/sessions/default", headers=auth)
        assert r.status_code == 409 and r.json()["error"]["code"] == "single_session"
        r = raw.post("/api/v1/sessions/default/call/pages/download_path", json={"args": {"name": "x"}}, headers=auth)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"


def _descendants(pid: int) -> set[int]:
    """``pid`` and every process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, pending = set(), [pid]
    while pending:
        p = pending.pop()
        found.add(p)
        pending += children.get(p, [])
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _wait(condition, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_killed_server_is_reported_then_replaced_and_delete_leaves_nothing(plane):
    client, glassdesk, manager = plane
    r = client.post("/api/v1/sessions", json={"id": "r2"})
    assert r.status_code == 201, r.text
    session = manager.get("r2")
    first = session.handle
    seen = glassdesk.bus.recent()[-1]["seq"] if glassdesk.bus.recent() else 0
    os.kill(manager.backend.pid(first), 9)
    # Reported: the bus says it died, and the session's events say so.
    _wait(lambda: any(e["kind"] == "session_died" and e["session_id"] == "r2" and e["seq"] > seen
                      for e in glassdesk.bus.recent()))
    _wait(lambda: client.get("/api/v1/sessions/r2").json()["status"] == "ready" and session.handle != first)
    info = client.get("/api/v1/sessions/r2").json()
    assert info["restarts"] == 1 and any("dead" in e for e in info["events"]), info
    assert client.post("/api/v1/sessions/r2/desktop/click", json={"x": 5, "y": 5}).status_code == 200

    server = manager.backend.servers[session.handle]
    pids = _descendants(server.process.pid)
    assert len(pids) > 5  # the server and its desktop: Xvfb, XFCE, Chromium, x11vnc...
    assert client.delete("/api/v1/sessions/r2").status_code == 204
    _wait(lambda: not _alive(pids), timeout=30)
    assert not server.workdir.exists() and session.handle not in manager.backend.servers
    assert client.get("/api/v1/sessions/r2").status_code == 404


def test_the_live_view_is_relayed_from_the_session_server_view_only_or_in_control(plane):
    """One public port: the control plane's relay opens the session server's own live view with a
    token of the same mode, so a view link cannot move the remote pointer and a control link can."""
    from tests.fakes.rfb import RFBClient

    client, _, _ = plane
    server = type("Server", (), {"port": client.port})
    assert client.post(f"{S}/desktop/move", json={"x": 10, "y": 10}).status_code == 200
    view = client.get(f"{S}/live").json()
    assert view["websocket"] == "/api/v1/sessions/r1/vnc"
    viewer = RFBClient(server, view["token"], session="r1")
    try:
        assert viewer.handshake() == (1920, 1080)
        viewer.pointer(900, 500)
        viewer.sync()  # the event reached the remote x11vnc, which dropped it (view-only login)
        assert client.get(f"{S}/desktop/cursor").json() == {"x": 10, "y": 10}
    finally:
        viewer.close()
    control = client.post(f"{S}/takeover", json={"on": True}).json()
    controller = RFBClient(server, control["token"], session="r1")
    try:
        controller.handshake()
        controller.pointer(901, 501)
        controller.sync()
        _wait(lambda: client.get(f"{S}/desktop/cursor").json() == {"x": 901, "y": 501}, timeout=10)
    finally:
        controller.close()
        assert client.post(f"{S}/takeover", json={"on": False}).status_code == 200
