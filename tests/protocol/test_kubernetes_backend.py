"""The Kubernetes backend through the REAL `kubernetes` client against a local fake API server
(tests/fakes/kube_api.py) that speaks the Kubernetes REST protocol: create, watch until Ready,
reach the session server at the Endpoint returned, delete; the ways a pod fails to start; the
objects as they went over the wire validated against Kubernetes' schemas; leases and the orphan
sweep; and the backend under BackendSessions (a dead pod reported and replaced).

No cluster: the client is pointed at 127.0.0.1 and never loads a kubeconfig. The "session server"
here is a small HTTP server answering /healthz and a token-checked route; the real single-session
glassdesk behind a pod is what tests/integration/test_remote.py drives through the process backend.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import kubernetes.client
import kubernetes_validate
import pytest

from desktop.errors import InvalidRequest, SessionUnavailable
from desktop.remote.backends.base import LABEL_OWNER, BackendState, SessionSpec, labels
from desktop.remote.backends.kubernetes import EXPIRES_AT, KubernetesBackend, KubeSettings, OwnerRef, rfc3339
from desktop.remote.backends.manager import BackendSessions
from tests.fakes.kube_api import K8S_VERSION, FakeKubeApi, failing_kubelet, ready_kubelet

TOKEN = "k8s-session-token-5d1e"


def until(condition, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


class SessionServer:
    """Stands in for the session server a Ready pod runs: /healthz open, /whoami behind the token."""

    def __init__(self, token: str = TOKEN):
        self.hits: list[tuple[str, str | None]] = []
        self.puts: list[tuple[str, dict, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.hits.append((self.path, self.headers.get("authorization")))
                if self.path == "/healthz":
                    code, body = 200, {"ok": True}
                elif self.headers.get("authorization") == f"Bearer {token}":
                    code, body = 200, {"session": "default"}
                else:
                    code, body = 401, {"error": {"code": "unauthorized", "message": "token"}}
                payload = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_PUT(self):  # the network policy a claim of a warm pod sets in its proxy
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                server.puts.append((self.path, body, self.headers.get("authorization")))
                payload = json.dumps({"session_id": "default", **body}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def session_server():
    server = SessionServer()
    yield server
    server.close()


@pytest.fixture
def api():
    fake = FakeKubeApi(ready_kubelet(after_watch=True)).start()
    yield fake
    fake.close()


def make_backend(api: FakeKubeApi, port: int, **settings) -> KubernetesBackend:
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url))
    return KubernetesBackend(settings=KubeSettings(**{"owner": "cp-test", "port": port, **settings}), api_client=client)


@pytest.fixture
def backend(api, session_server):
    backend = make_backend(api, session_server.port)
    yield backend
    backend.close()


def test_create_watch_ready_reach_and_delete(api, backend, session_server, caplog):
    caplog.set_level(logging.DEBUG)
    handle = backend.start(SessionSpec("s1", TOKEN, 1024, 1.0, ("*.example.com",)))
    assert backend.state(handle) is BackendState.starting  # created, not yet Running

    endpoint = backend.wait_ready(handle, timeout_s=30)
    assert endpoint.base_url == f"http://127.0.0.1:{session_server.port}" and endpoint.token == TOKEN
    # Ready came by the watch, from the version the list left off at (the fake turns the pod Ready
    # only once a watch is open).
    watches = [c for c in api.calls if c.method == "GET" and c.query.get("watch") in ("true", "True")
               and c.query.get("fieldSelector") == f"metadata.name={handle}"]
    assert watches
    assert watches[0].query.get("resourceVersion")
    assert backend.state(handle) is BackendState.running

    # The Endpoint reaches the session server, with the session's token.
    with httpx2.Client(base_url=endpoint.base_url, trust_env=False) as http:
        assert http.get("/healthz").status_code == 200
        assert http.get("/whoami",
                        headers={"authorization": f"Bearer {endpoint.token}"}).json() == {"session": "default"}
        assert http.get("/whoami").status_code == 401

    assert api.names("pods") == api.names("secrets") == api.names("networkpolicies") == [handle]
    assert api.get("pods", handle)["metadata"]["labels"] == labels("s1", "cp-test")
    assert backend.owned() == [handle]

    backend.stop(handle)
    assert api.names("pods") == api.names("secrets") == api.names("networkpolicies") == []
    assert backend.state(handle) is BackendState.gone
    backend.stop(handle)  # idempotent
    assert [(c.method, c.path.rsplit("/", 2)[-2]) for c in api.calls if c.method == "DELETE"][:3] == [
        ("DELETE", "pods"), ("DELETE", "networkpolicies"), ("DELETE", "secrets")]

    # The token went over the wire once, in the Secret, and into no log.
    encoded = base64.b64encode(TOKEN.encode()).decode()
    carrying = [(c.method, c.path) for c in api.calls if TOKEN in json.dumps(c.body) or encoded in json.dumps(c.body)]
    assert carrying == [("POST", "/api/v1/namespaces/default/secrets")]
    assert TOKEN not in caplog.text and encoded not in caplog.text


def test_the_objects_sent_validate_against_the_pinned_schemas(api, backend):
    handle = backend.start(SessionSpec("s1", TOKEN, 2048, 2.0, ("93.184.216.34",), ("8.8.8.8",)))
    created = [c.body for c in api.calls if c.method == "POST"]
    assert [o["kind"] for o in created] == ["Secret", "NetworkPolicy", "Pod"]
    for obj in created:
        assert kubernetes_validate.validate(obj, K8S_VERSION, strict=True) == K8S_VERSION
    backend.stop(handle)


@pytest.mark.parametrize("how, said", [
    ("ImagePullBackOff", "ImagePullBackOff: Back-off pulling image"),
    ("CrashLoopBackOff", "CrashLoopBackOff: Back-off pulling image"),
    ("Failed", "the pod failed (Error, exit code 1, Back-off pulling image)"),
])
def test_a_pod_that_cannot_start_is_reported_with_its_reason(api, backend, how, said):
    api.kubelet = failing_kubelet(how, "Back-off pulling image")
    handle = backend.start(SessionSpec("s1", TOKEN, 1024, 1.0))
    with pytest.raises(SessionUnavailable) as caught:
        backend.wait_ready(handle, timeout_s=30)
    assert caught.value.message == f"pod {handle} did not start: {said}"
    assert backend.state(handle) is BackendState.dead
    backend.stop(handle)
    assert api.names("pods") == []


def test_a_pod_never_scheduled_times_out_saying_why(api, backend):
    api.kubelet = failing_kubelet("Unschedulable", "0/1 nodes are available: 1 Insufficient memory.")
    handle = backend.start(SessionSpec("s1", TOKEN, 1024, 1.0))
    with pytest.raises(SessionUnavailable, match=r"was not ready within 1 s \(Unschedulable: 0/1 nodes are "
                                                 r"available: 1 Insufficient memory\.\)"):
        backend.wait_ready(handle, timeout_s=1)
    backend.stop(handle)


def test_a_pod_deleted_while_it_starts(api, backend):
    api.kubelet = failing_kubelet("Unschedulable", "waiting")
    handle = backend.start(SessionSpec("s1", TOKEN, 1024, 1.0))
    deleter = threading.Thread(target=lambda: (api.wait_for_watch(handle),
                                               api.handle("DELETE", "pods", "default", handle, {}, None)))
    deleter.start()
    with pytest.raises(SessionUnavailable, match="deleted while it started"):
        backend.wait_ready(handle, timeout_s=30)
    deleter.join()
    assert backend.state(handle) is BackendState.gone
    backend.stop(handle)  # what is left (the Secret, the NetworkPolicy) goes too
    assert api.names("secrets") == api.names("networkpolicies") == []


def test_a_refused_create_leaves_nothing_behind(api, backend):
    api.refuse[("POST", "pods")] = (403, "Forbidden", 'pods is forbidden: exceeded quota: sessions, requested: '
                                                      'limits.memory=1Gi')
    with pytest.raises(SessionUnavailable, match="Kubernetes refused the session's objects in namespace default: "
                                                 "pods is forbidden: exceeded quota"):
        backend.start(SessionSpec("s1", TOKEN, 1024, 1.0))
    assert api.names("secrets") == api.names("networkpolicies") == api.names("pods") == []


def test_a_session_id_that_is_no_label_value_is_refused(api, backend):
    with pytest.raises(InvalidRequest, match="must end with a letter or digit"):
        backend.start(SessionSpec("s1-", TOKEN, 1024, 1.0))
    assert [c for c in api.calls if c.method != "GET"] == []  # nothing created (the GETs: the pod watch)


def test_supervising_reads_the_pod_watch_not_the_api_each_time(api, backend):
    handle = backend.start(SessionSpec("s1", TOKEN, 1024, 1.0))
    backend.wait_ready(handle, timeout_s=30)
    until(lambda: (backend.pods.get(handle) or {}).get("status", {}).get("phase") == "Running")
    reads = lambda: sum(1 for c in api.calls if c.method == "GET" and c.path.endswith(f"/pods/{handle}"))  # noqa: E731
    before = reads()
    assert all(backend.state(handle) is BackendState.running for _ in range(50))
    assert reads() == before  # fifty looks, no request
    # Deleted behind the backend's back: gone, once the watch has it (or by asking, before).
    api.handle("DELETE", "pods", "default", handle, {}, None)
    until(lambda: backend.pods.get(handle) is None)
    assert backend.state(handle) is BackendState.gone
    backend.stop(handle)


def test_the_owning_deployment_is_looked_up_and_referenced(api, session_server, caplog):
    api.put("deployments", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "glassdesk", "uid": "6a1f-deployment-uid"}, "spec": {  # the client parses a valid one only
            "selector": {"matchLabels": {"app": "gd"}},
            "template": {"metadata": {"labels": {"app": "gd"}}, "spec": {"containers": [{"name": "gd"}]}}}})
    backend = make_backend(api, session_server.port, owner_ref=OwnerRef("Deployment", "glassdesk", ""))
    try:
        handle = backend.start(SessionSpec("s1", TOKEN, 1024, 1.0))
        for kind in ("pods", "secrets", "networkpolicies"):
            assert api.get(kind, handle)["metadata"]["ownerReferences"] == [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "glassdesk", "uid": "6a1f-deployment-uid"}]
        backend.stop(handle)
    finally:
        backend.close()
    # An owner that cannot be read: said, and no reference rather than a wrong one.
    caplog.set_level(logging.WARNING)
    backend = make_backend(api, session_server.port, owner_ref=OwnerRef("Deployment", "missing", ""))
    try:
        assert backend.settings.owner_ref is None
        assert "the owner Deployment missing could not be read" in caplog.text
        handle = backend.start(SessionSpec("s2", TOKEN, 1024, 1.0))
        assert "ownerReferences" not in api.get("pods", handle)["metadata"]
        backend.stop(handle)
    finally:
        backend.close()


def test_the_lease_is_renewed_while_supervised(api, session_server):
    clock = [datetime(2026, 11, 23, 12, 0, tzinfo=UTC)]
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url))
    backend = KubernetesBackend(settings=KubeSettings(owner="cp", port=session_server.port, lease_s=60),
                                api_client=client, clock=lambda: clock[0])
    handle = backend.start(SessionSpec("s1", TOKEN, 1024, 1.0))
    assert api.get("pods", handle)["metadata"]["annotations"][EXPIRES_AT] == "2026-11-23T12:01:00Z"
    backend.wait_ready(handle, timeout_s=30)
    backend._renewed[handle] -= 21  # a third of the lease has passed since the last push
    clock[0] += timedelta(seconds=21)
    assert backend.state(handle) is BackendState.running
    assert api.get("pods", handle)["metadata"]["annotations"][EXPIRES_AT] == "2026-11-23T12:01:21Z"
    patches = [c for c in api.calls if c.method == "PATCH"]
    assert len(patches) == 1
    backend.state(handle)  # soon after: no second push
    assert len([c for c in api.calls if c.method == "PATCH"]) == 1
    backend.stop(handle)
    backend.close()


def _leftover(api: FakeKubeApi, name: str, owner: str, expires: datetime) -> None:
    meta = {"name": name, "labels": {**labels("old", owner)}, "annotations": {EXPIRES_AT: rfc3339(expires)}}
    api.put("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": dict(meta), "spec": {"containers": []},
                     "status": {"phase": "Running"}})
    api.put("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": dict(meta), "data": {}})


def test_owned_is_this_owners_objects_and_anyones_expired_ones(api, backend):
    now = datetime.now(UTC)
    _leftover(api, "glassdesk-mine-000001", "cp-test", now + timedelta(hours=1))
    _leftover(api, "glassdesk-dead-000002", "cp-gone", now - timedelta(minutes=1))
    _leftover(api, "glassdesk-alive-000003", "cp-other", now + timedelta(hours=1))
    # A Secret whose pod is gone is judged by its own lease.
    api.put("secrets", {"apiVersion": "v1", "kind": "Secret", "data": {}, "metadata": {
        "name": "glassdesk-lost-000004", "labels": labels("lost", "cp-gone"),
        "annotations": {EXPIRES_AT: rfc3339(now - timedelta(seconds=5))}}})
    assert backend.owned() == ["glassdesk-dead-000002", "glassdesk-lost-000004", "glassdesk-mine-000001"]

    # A control plane starting on this backend removes them, and leaves the living one's alone.
    manager = BackendSessions(backend, supervise_every_s=3600)
    try:
        assert manager.orphans_removed == ["glassdesk-dead-000002", "glassdesk-lost-000004", "glassdesk-mine-000001"]
        assert api.names("pods") == api.names("secrets") == ["glassdesk-alive-000003"]
    finally:
        manager.close()


def test_under_backend_sessions_a_dead_pod_is_reported_and_replaced(api, backend):
    manager = BackendSessions(backend, supervise_every_s=3600)  # the test calls check() itself
    died = []
    manager.listeners.append(lambda what, session_id: died.append((what, session_id)))
    try:
        session = manager.create("k1")
        first = session.handle
        assert session.status == "ready" and api.names("pods") == [first]
        assert api.get("pods", first)["metadata"]["labels"][LABEL_OWNER] == "cp-test"

        api.set_status(first, {"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."})
        until(lambda: backend.state(first) is BackendState.dead)  # the pod watch brings the news
        assert manager.check(session) is True
        assert session.status == "ready" and session.handle != first and session.restarts == 1
        assert ("died", "k1") in died and ("restarted", "k1") in died
        assert any("is dead; replacing it" in e for e in session.events)
        assert api.names("pods") == [session.handle]  # the dead pod removed, its replacement running

        manager.delete("k1")
        assert api.names("pods") == api.names("secrets") == api.names("networkpolicies") == []
    finally:
        manager.close()


def test_a_warm_pods_claim_patches_its_network_policy_and_a_refused_patch_starts_cold(api, backend, session_server):
    """A pooled pod's NetworkPolicy was rendered from an empty policy; a claim with allow/deny
    patches its egress (the CNI applies it to the running pod) and sets the in-pod proxy, before
    the session is handed out. Where the patch is refused, that create starts cold, and says so."""
    from desktop.network.policy import NetworkPolicy
    from desktop.remote.backends.base import LABEL_SESSION
    from desktop.remote.backends.kubernetes import egress_rules
    from desktop.remote.backends.manager import WARM_ID_PREFIX

    manager = BackendSessions(backend, max_sessions=3, supervise_every_s=3600)
    try:
        manager.keep_warm(1)
        until(lambda: manager.warm_ready == 1)
        pooled = manager.pool.ready[0].item
        assert pooled.handle.startswith("glassdesk-warm-"), "a DNS name: the id's '.' is not in it"
        pod = api.get("pods", pooled.handle)
        assert pod["metadata"]["labels"][LABEL_SESSION] == pooled.spec.session_id
        assert pooled.spec.session_id.startswith(WARM_ID_PREFIX)
        fence = api.get("networkpolicies", pooled.handle)
        assert fence["spec"]["egress"] == egress_rules((), (), backend.settings.egress_ports)

        allow = ("93.184.216.34:443",)  # an IP literal: the fence can say exactly this
        session = manager.create("k1", network=NetworkPolicy.parse(allow=allow))
        assert session.handle == pooled.handle and session.events == []
        patched = api.get("networkpolicies", pooled.handle)
        assert patched["spec"]["egress"] == egress_rules(allow, (), backend.settings.egress_ports) \
            == [{"to": [{"ipBlock": {"cidr": "93.184.216.34/32"}}], "ports": [{"protocol": "TCP", "port": 443}]}]
        assert patched["spec"]["podSelector"] == fence["spec"]["podSelector"], "it still selects its pod"
        assert [c.method for c in api.calls if c.path.endswith(f"/networkpolicies/{pooled.handle}")] == ["PATCH"]
        assert session_server.puts == [("/api/v1/sessions/default/network-policy",
                                        {"allow": list(allow), "deny": []}, f"Bearer {pooled.spec.token}")]

        until(lambda: manager.warm_ready == 1)
        second = manager.pool.ready[0].item.handle
        api.refuse[("PATCH", "networkpolicies")] = (403, "Forbidden", "cannot patch networkpolicies")
        cold = manager.create("k2", network=NetworkPolicy.parse(deny=["10.9.9.9"]))
        assert cold.handle.startswith("glassdesk-k2-") and second not in api.names("pods")
        [event] = cold.events
        assert "could not take the network policy" in event and "cannot patch networkpolicies" in event
        assert api.get("networkpolicies", cold.handle)["spec"]["egress"] == \
            egress_rules((), ("10.9.9.9",), backend.settings.egress_ports)
    finally:
        manager.close()
    assert api.names("pods") == api.names("secrets") == api.names("networkpolicies") == []


def test_glassdesk_up_backend_kubernetes_without_a_cluster_says_so(tmp_path):
    """The CLI reaches the backend through create_backend; with no kubeconfig and not in a pod it
    stops with a sentence (and reaches nothing)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBECONFIG")}
    env.update(KUBECONFIG=str(tmp_path / "no-kubeconfig"), HOME=str(tmp_path),
               GLASSDESK_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run([sys.executable, "-m", "vision.cli", "up", "--backend", "kubernetes", "--port", "0"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "backend kubernetes: no cluster to talk to" in " ".join((done.stdout + done.stderr).split())
