"""The warm pool on a remote backend (`glassdesk up --backend process --warm N`;
desktop.remote.backends.manager.BackendSessions.keep_warm) with REAL session servers: a create
claims a server started before it was asked for (its handle is the pooled one: no timing is
asserted; the claim and cold times are printed), the network policy given at create holds on the
claimed session, the claimed session starts at a blank page, the pool refills and shows in
/metrics, a pooled server that dies is replaced, and a shutdown leaves no server running.

One control plane (3 sessions at most, 1 kept warm) for the tests that leave it as they found it, and one
of its own for the test that shuts it down: six session servers in all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest

from desktop.remote.backends.manager import WARM_ID_PREFIX, BackendSessions
from desktop.remote.backends.process import ProcessBackend
from desktop.session.stack import free_port
from tests.conftest import LiveServer

pytestmark = pytest.mark.x11


def wait_for(predicate, timeout: float = 120, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


class Counting:
    """A host the policy denies: counts every request that reaches it."""

    def __init__(self):
        self.hits = 0
        counting = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                counting.hits += 1
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/"


@pytest.fixture(scope="module")
def counting():
    served = Counting()
    yield served
    served.server.shutdown()


@contextlib.contextmanager
def control_plane():
    """A control plane on the process backend (3 sessions at most, 1 kept warm), over HTTP."""
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    backend = ProcessBackend()
    manager = BackendSessions(backend, max_sessions=3, supervise_every_s=0.3)
    glassdesk = Glassdesk.build(manager, data_dir=tempfile.mkdtemp(prefix="glassdesk-rwarm-"), config=VisionConfig())
    port = free_port()
    manager.keep_warm(1)
    try:
        with LiveServer(create_app(manager, Settings(token=None, port=port), glassdesk), port=port) as server:
            with httpx2.Client(base_url=server.url, timeout=120) as client:
                yield client, glassdesk, manager, backend
    finally:
        manager.close()


@pytest.fixture(scope="module")
def plane():
    """Shared by the tests that leave it as they found it: a pool kept warm, no session but 'w1'."""
    with control_plane() as made:
        yield made


def metric(glassdesk, name: str) -> float:
    for line in glassdesk.metrics.render().decode().splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def ok(response):
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


def test_a_create_claims_a_pooled_server_and_its_network_policy_holds(plane, page_server, counting):
    client, glassdesk, manager, backend = plane
    wait_for(lambda: manager.warm_ready == 1, what="the pool to fill")
    pooled = manager.pool.ready[0].item
    assert pooled.spec.session_id.startswith(WARM_ID_PREFIX) and manager.list() == [], "a pooled server is nobody's"
    assert metric(glassdesk, "glassdesk_sessions_warm") == 1
    allowed = f"127.0.0.1:{page_server.port}"

    asked = time.monotonic()
    info = ok(client.post("/api/v1/sessions", json={"id": "w1", "network": {"allow": [allowed]}}))
    claim_s = time.monotonic() - asked

    session = manager.get("w1")
    assert session.handle == pooled.handle and backend.servers.get(pooled.handle) is not None, \
        "the create took the server started before it was asked for"
    assert info["id"] == "w1" and info["status"] == "ready" and info["events"] == [] and info["restarts"] == 0
    assert info["display"] == f"process:{pooled.handle}", "the handle names the session's server"
    print(f"\nprocess backend: create claiming a pooled server {claim_s * 1000:.0f} ms")
    # A fresh desktop: nothing of the pool's wait, the policy set at claim (the server's proxy).
    assert ok(client.get("/api/v1/sessions/w1/page"))["url"] == "about:blank"
    assert ok(client.get("/api/v1/sessions/w1/network-policy")) == {"session_id": "w1", "allow": [allowed],
                                                                    "deny": []}
    page_server.clear()
    ok(client.post("/api/v1/sessions/w1/desktop/open", json={"url": page_server.url}))
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    refused = client.post("/api/v1/sessions/w1/desktop/open", json={"url": counting.url})
    assert refused.status_code == 422 and "network policy" in refused.json()["error"]["message"]
    refused = client.post("/api/v1/sessions/w1/page/navigate", json={"url": counting.url})
    assert refused.status_code >= 400
    assert counting.hits == 0, "the denied host never saw a request"
    # The pool refills behind it, and the claimed session is listed, the pooled one not.
    wait_for(lambda: manager.warm_ready == 1 and manager.pool.ready[0].item.handle != pooled.handle,
             what="the pool to refill")
    assert metric(glassdesk, "glassdesk_sessions_warm") == 1
    assert [s["id"] for s in ok(client.get("/api/v1/sessions"))] == ["w1"]


def test_without_a_pooled_server_a_create_starts_one_cold(plane):
    client, _, manager, _ = plane
    wait_for(lambda: manager.warm_ready == 1, what="the pool to refill")
    manager.keep_warm(0)
    try:
        assert manager.warm_ready == 0
        asked = time.monotonic()
        ok(client.post("/api/v1/sessions", json={"id": "cold"}))
        cold_s = time.monotonic() - asked
        assert manager.get("cold").handle.startswith("glassdesk-cold-")
        print(f"\nprocess backend: cold create {cold_s * 1000:.0f} ms")
        assert client.delete("/api/v1/sessions/cold").status_code == 204
    finally:
        manager.keep_warm(1)


def test_a_pooled_server_that_dies_is_replaced_and_a_shutdown_stops_the_pool():
    with control_plane() as (client, _, manager, backend):  # its own: the test shuts it down
        ok(client.post("/api/v1/sessions", json={"id": "w1"}))
        wait_for(lambda: manager.warm_ready == 1, what="the pool to fill")
        pooled = manager.pool.ready[0].item.handle
        process = backend.servers[pooled].process
        os.killpg(process.pid, signal.SIGKILL)
        wait_for(lambda: manager.warm_ready == 1 and manager.pool.ready[0].item.handle != pooled,
                 what="the dead pooled server to be replaced")
        assert pooled not in backend.servers
        replacement = backend.servers[manager.pool.ready[0].item.handle].process
        claimed = backend.servers[manager.get("w1").handle].process
        manager.close()
        assert backend.servers == {} and replacement.poll() is not None and claimed.poll() is not None
        assert manager.warm_ready == 0 and not manager.pool._filler.is_alive()
