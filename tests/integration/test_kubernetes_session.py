"""A control plane on the Kubernetes backend driving a REAL single-session glassdesk server behind
a pod: the real `kubernetes` client against the local fake API server (tests/fakes/kube_api.py),
whose ProcessKubelet runs the pod's container as a local process exactly as the backend rendered
it (its command line, the token read from the pod's Secret, the pod IP as 127.0.0.1).

What this shows that the protocol tests do not: the rendered pod's command and environment start a
working session server, the token travels only through the Secret yet the server enforces it, the
Endpoint from the watch carries a click that lands on a page in that server's Chromium, and deleting
the session ends the pod's process. No cluster: the fake API server and the process stand in for it.
"""

from __future__ import annotations

import tempfile

import httpx2
import kubernetes.client
import pytest

from desktop.remote.backends.kubernetes import KubernetesBackend, KubeSettings
from desktop.remote.backends.manager import BackendSessions
from desktop.session.stack import free_port
from tests.conftest import LiveServer
from tests.fakes.kube_api import FakeKubeApi, ProcessKubelet

pytestmark = pytest.mark.x11

S = "/api/v1/sessions/k1"


@pytest.fixture(scope="module")
def cluster():
    kubelet = ProcessKubelet(tempfile.mkdtemp(prefix="glassdesk-k8s-"))
    api = FakeKubeApi(kubelet).start()
    yield api, kubelet
    api.close()


@pytest.fixture(scope="module")
def plane(cluster):
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    api, _ = cluster
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url))
    # One pod at a time here: every pod's server listens on this port of 127.0.0.1 (its "pod IP").
    backend = KubernetesBackend(settings=KubeSettings(owner="cp-it", port=free_port()), api_client=client)
    manager = BackendSessions(backend, max_sessions=1, supervise_every_s=0.5)
    glassdesk = Glassdesk.build(manager, data_dir=tempfile.mkdtemp(prefix="glassdesk-k8s-plane-"),
                                config=VisionConfig())
    port = free_port()
    with LiveServer(create_app(manager, Settings(token=None, port=port), glassdesk), port=port) as server:
        with httpx2.Client(base_url=server.url, timeout=120) as http:
            yield http, manager
    manager.close()


@pytest.fixture
def k1(plane):
    """The plane with its session k1 in a pod: made again when a test before this one deleted it."""
    http, manager = plane
    if "k1" not in manager.sessions:
        r = http.post("/api/v1/sessions", json={"id": "k1"})
        assert r.status_code == 201, r.text
    return plane


def test_a_click_through_the_control_plane_lands_in_the_pods_session(k1, page_server):
    http, _ = k1
    page_server.clear()
    assert http.post(f"{S}/desktop/open", json={"url": page_server.url}).status_code == 200
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    r = http.post(f"{S}/desktop/click", json={"x": 960, "y": 700})
    assert r.status_code == 200, r.text
    click = page_server.wait_for(lambda e: e.get("type") == "click")
    assert (click["screenX"], click["screenY"]) == (960, 700)
    shot = http.get(f"{S}/desktop/screenshot")
    assert shot.headers["content-type"] == "image/png" and shot.content.startswith(b"\x89PNG")
    assert int.from_bytes(shot.content[16:20], "big") == 1920 and int.from_bytes(shot.content[20:24], "big") == 1080


def test_the_pods_server_holds_the_token_from_the_secret(k1, cluster):
    _, manager = k1
    api, _ = cluster
    session = manager.get("k1")
    endpoint = session.client.endpoint
    pod = api.get("pods", session.handle)
    assert endpoint.token not in str(pod)  # not in the pod spec: only in its Secret
    with httpx2.Client(base_url=endpoint.base_url, timeout=30, trust_env=False) as raw:
        assert raw.get("/api/v1/sessions").status_code == 401
        assert raw.get("/api/v1/sessions", headers={"authorization": f"Bearer {endpoint.token}"}).status_code == 200


def test_deleting_the_session_removes_its_objects_and_ends_the_pods_process(k1, cluster):
    http, manager = k1
    api, kubelet = cluster
    handle = manager.get("k1").handle
    process = kubelet.processes[handle]
    assert http.delete(S).status_code == 204
    assert api.names("pods") == api.names("secrets") == api.names("networkpolicies") == []
    assert process.wait(60) is not None  # the kubelet's SIGTERM on the pod's deletion ended the server
