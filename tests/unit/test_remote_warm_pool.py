"""The warm pool of a remote registry (desktop.remote.backends.manager.BackendSessions.keep_warm,
`glassdesk up --backend docker|kubernetes|process --warm N`) without servers: a fake backend whose
starts wait for the test, and one small HTTP server standing in for every session server (it
records the requests each token made), so the claim, the refill, the limit, a death, the shutdown
and the network policy applied at claim can be watched step by step. Real session servers are
tests/integration/test_remote_warm_pool.py's; the Kubernetes NetworkPolicy patched at claim is
tests/protocol/test_kubernetes_backend.py's."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from desktop.errors import InvalidAction, SessionLimit, SessionUnavailable
from desktop.network.policy import NetworkPolicy
from desktop.remote.backends.base import BackendState, Endpoint
from desktop.remote.backends.manager import WARM_ID_PREFIX, BackendSessions
from desktop.session.manager import SESSION_ID


class Servers:
    """Every fake session server at once: /healthz, and PUT .../network-policy recorded by token."""

    def __init__(self):
        self.puts: list[tuple[str, str, dict]] = []  # (token, path, body)
        servers = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, code: int, body: dict) -> None:
                payload = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                self._answer(200, {"ok": True})

            def do_PUT(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                token = self.headers.get("authorization", "").removeprefix("Bearer ")
                servers.puts.append((token, self.path, body))
                self._answer(200, {"session_id": "default", **body})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class GatedBackend:
    """Starts nothing: a server is 'running' once started, ready once ``gate`` is set; counts how
    many wait for readiness at once; ``stop`` forgets it."""

    name = "fake"

    def __init__(self, servers: Servers):
        self.servers = servers
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()
        self.specs: dict[str, object] = {}  # handle -> the spec it started from
        self.states: dict[str, BackendState] = {}
        self.started: list[str] = []
        self.stopped: list[str] = []
        self.policies: list[tuple[str, tuple, tuple]] = []  # apply_network_policy's calls
        self.refuse_policy = False
        self.waiting = self.most_waiting = 0

    def start(self, spec) -> str:
        with self.lock:
            handle = f"glassdesk-{spec.session_id}-{len(self.started):06x}"
            self.started.append(handle)
            self.specs[handle] = spec
            self.states[handle] = BackendState.starting
        return handle

    def wait_ready(self, handle: str, timeout_s: float) -> Endpoint:
        with self.lock:
            self.waiting += 1
            self.most_waiting = max(self.most_waiting, self.waiting)
        try:
            deadline = time.monotonic() + 10
            while not self.gate.wait(0.02):
                assert time.monotonic() < deadline, "the test never let the start finish"
                if handle not in self.states:
                    raise SessionUnavailable(f"{handle} was stopped while it started")
            if handle not in self.states:
                raise SessionUnavailable(f"{handle} was stopped while it started")
            self.states[handle] = BackendState.running
            return Endpoint(self.servers.url, self.specs[handle].token)
        finally:
            with self.lock:
                self.waiting -= 1

    def state(self, handle: str) -> BackendState:
        return self.states.get(handle, BackendState.gone)

    def apply_network_policy(self, handle: str, spec) -> None:
        if self.refuse_policy:
            raise SessionUnavailable("the fence refused the patch")
        self.policies.append((handle, spec.allow, spec.deny))

    def stop(self, handle: str) -> None:
        if self.states.pop(handle, None) is not None:
            self.stopped.append(handle)

    def owned(self) -> list[str]:
        return []

    def close(self) -> None:
        pass

    def running(self) -> list[str]:
        return [h for h, s in self.states.items() if s is not BackendState.gone]


@pytest.fixture
def servers():
    made = Servers()
    yield made
    made.close()


@pytest.fixture
def backend(servers):
    return GatedBackend(servers)


@pytest.fixture
def manager(backend):
    made = BackendSessions(backend, max_sessions=3, supervise_every_s=3600)
    yield made
    backend.gate.set()
    made.close()


def wait_for(predicate, timeout: float = 5):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def pooled_handles(manager) -> list[str]:
    return [p.item.handle for p in manager.pool.ready]


def test_a_pooled_servers_id_is_no_session_id():
    assert not SESSION_ID.match(f"{WARM_ID_PREFIX}0123456789ab")


def test_the_pool_fills_one_at_a_time_within_the_limit_and_a_claim_takes_its_server(manager, backend, servers):
    manager.create("a")
    backend.gate.clear()
    manager.keep_warm(2)
    wait_for(lambda: manager.pool.starting is not None and manager.pool.starting.handle)
    first = manager.pool.starting
    time.sleep(0.2)
    assert backend.waiting == 1, "one start at a time"
    backend.gate.set()
    wait_for(lambda: manager.warm_ready == 2)
    assert backend.most_waiting == 1 and manager.pool.starting is None
    assert [s.id for s in manager.list()] == ["a"], "1 + 2 of 3: full, and the pooled servers are not listed"
    assert first.spec.session_id.startswith(WARM_ID_PREFIX) and WARM_ID_PREFIX in first.handle

    started = len(backend.started)
    b = manager.create("b", network=NetworkPolicy.parse(deny=["x.test"]))

    assert b.handle == first.handle and b.status == "ready" and b.events == [] and b.restarts == 0
    assert b.client.endpoint.token == first.spec.token and b.client.session_id == "b"
    assert b.info().display == f"fake:{first.handle}", "the handle names the session's server"
    # The policy, applied at the claim: the backend's fence and the server's own proxy, by its token.
    assert backend.policies == [(first.handle, (), ("x.test",))]
    assert servers.puts == [(first.spec.token, "/api/v1/sessions/default/network-policy",
                             {"allow": [], "deny": ["x.test"]})]
    # Recorded under the public id: a replacement starts under it with the same policy.
    assert manager.specs["b"].session_id == "b" and manager.specs["b"].deny == ("x.test",)
    time.sleep(0.2)
    assert len(backend.started) == started, "a + b + one pooled: no place to start another"
    assert manager.warm_ready == 1

    manager.create("c")  # claims the last pooled server
    with pytest.raises(SessionLimit):
        manager.create("d")
    assert len(backend.started) == started, "no cold start beyond the limit"
    manager.delete("b")
    assert first.handle in backend.stopped, "a deleted session's server is stopped, never put back"
    wait_for(lambda: manager.warm_ready == 1)  # b's place went back to the pool
    assert first.handle not in pooled_handles(manager)


def test_a_claim_without_a_policy_touches_no_fence(manager, backend, servers):
    manager.keep_warm(1)
    wait_for(lambda: manager.warm_ready == 1)
    s = manager.create("s")
    assert WARM_ID_PREFIX in s.handle and backend.policies == [] and servers.puts == []


def test_a_create_waits_for_the_pooled_server_that_holds_the_last_place(manager, backend):
    manager.max_sessions = 2
    manager.create("a")
    backend.gate.clear()
    manager.keep_warm(1)
    wait_for(lambda: manager.pool.starting is not None and manager.pool.starting.handle)
    starting = manager.pool.starting
    got: list = []
    creator = threading.Thread(target=lambda: got.append(manager.create("b")))
    creator.start()
    time.sleep(0.3)
    assert creator.is_alive() and not got, "neither refused nor started cold: it waits"
    backend.gate.set()
    creator.join(5)
    assert got and got[0].handle == starting.handle and got[0].id == "b"


def test_a_pooled_server_that_died_is_replaced_not_handed_out(manager, backend):
    manager.keep_warm(1)
    wait_for(lambda: manager.warm_ready == 1)
    dead = pooled_handles(manager)[0]
    backend.states[dead] = BackendState.dead
    manager.pool.check()  # the supervisor's look
    assert dead in backend.stopped
    wait_for(lambda: manager.warm_ready == 1 and pooled_handles(manager)[0] != dead)
    gone = pooled_handles(manager)[0]
    backend.states[gone] = BackendState.dead  # died since the supervisor's last look
    fresh = manager.create("a")
    assert fresh.handle not in (dead, gone) and backend.state(fresh.handle) is BackendState.running
    wait_for(lambda: gone in backend.stopped)


def test_a_claimed_session_whose_server_dies_is_replaced_under_its_own_id(manager, backend):
    manager.keep_warm(1)
    wait_for(lambda: manager.warm_ready == 1)
    s = manager.create("s", network=NetworkPolicy.parse(allow=["ok.test"]))
    claimed = s.handle
    backend.states[claimed] = BackendState.dead
    assert manager.check(s) is True
    assert s.status == "ready" and s.handle != claimed and s.restarts == 1
    replacement = backend.specs[s.handle]
    assert replacement.session_id == "s" and replacement.allow == ("ok.test",)
    assert s.handle.startswith("glassdesk-s-")


def test_a_policy_the_pooled_server_cannot_take_starts_the_session_cold(manager, backend):
    manager.keep_warm(1)
    wait_for(lambda: manager.warm_ready == 1)
    pooled = pooled_handles(manager)[0]
    backend.refuse_policy = True
    s = manager.create("s", network=NetworkPolicy.parse(deny=["x.test"]))
    assert s.status == "ready" and s.handle.startswith("glassdesk-s-") and pooled in backend.stopped
    [event] = s.events
    assert "could not take the network policy" in event and "started one cold" in event
    assert backend.specs[s.handle].deny == ("x.test",)


def test_the_pool_counts_toward_the_limit_and_a_refused_size_changes_nothing(manager, backend):
    manager.keep_warm(1)
    with pytest.raises(InvalidAction, match="0 or more"):
        manager.keep_warm(-1)
    with pytest.raises(InvalidAction, match="at most 2"):
        manager.keep_warm(3)
    assert manager.warm == 1
    wait_for(lambda: manager.warm_ready == 1)
    manager.create("a")
    manager.create("b")  # claims the pooled one: a, b and the refill would be 3 of 3
    wait_for(lambda: manager.warm_ready == 1)
    with pytest.raises(SessionLimit, match="1 of them started ahead"):
        manager._claim(None, held=manager._pooled())
    manager.keep_warm(0)
    assert manager.warm_ready == 0 and len(backend.running()) == 2


def test_a_shutdown_stops_the_pool_and_the_start_under_way(manager, backend):
    manager.keep_warm(1)
    wait_for(lambda: manager.warm_ready == 1)
    backend.gate.clear()
    manager.keep_warm(2)
    wait_for(lambda: manager.pool.starting is not None and manager.pool.starting.handle)
    assert len(backend.running()) == 2
    manager.close()  # the gate stays shut: the start under way is ended, not waited for
    assert backend.running() == [], "nothing of the pool is left running"
    assert manager.warm_ready == 0 and not manager.pool._filler.is_alive()


def test_a_backend_that_cannot_say_how_a_pooled_server_is_does_not_fail_a_create(manager, backend):
    manager.keep_warm(1)
    wait_for(lambda: manager.warm_ready == 1)
    pooled = pooled_handles(manager)[0]

    def unreachable(handle):
        raise OSError("the API is away")

    backend.state = unreachable
    manager.pool.check()  # no verdict: kept
    assert pooled_handles(manager) == [pooled]
    assert manager.create("s").handle == pooled
