"""The warm pool on the Docker backend (`glassdesk up --backend docker --warm N`) for real: a
create claims a container started before it was asked for (its handle, name and label are the
pool's), the network policy given at create holds on the claimed session, the pool refills, and a
shutdown leaves no container of this control plane. The process backend's counterpart, which
`make test` runs, is tests/integration/test_remote_warm_pool.py."""

from __future__ import annotations

import tempfile
import time

import httpx2
import pytest

from desktop.remote.backends.base import LABEL_OWNER, LABEL_SESSION
from desktop.remote.backends.docker import DockerBackend
from desktop.remote.backends.manager import WARM_ID_PREFIX, BackendSessions
from desktop.session.stack import free_port
from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def plane(docker_client, glassdesk_image):
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    port = free_port()
    owner = f"glassdesk-docker-warm-{port}"
    backend = DockerBackend(image=glassdesk_image, client=docker_client, protected_ports={port}, owner=owner)
    manager = BackendSessions(backend, max_sessions=2, memory_mb=1536, supervise_every_s=0.5)
    glassdesk = Glassdesk.build(manager, data_dir=tempfile.mkdtemp(prefix="glassdesk-dwarm-"), config=VisionConfig())
    manager.keep_warm(1)
    try:
        with LiveServer(create_app(manager, Settings(token=None, port=port), glassdesk), port=port) as server:
            with httpx2.Client(base_url=server.url, timeout=180) as client:
                yield client, manager, owner
    finally:
        manager.close()


def _wait(condition, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.25)


def test_a_create_claims_a_pooled_container_and_its_policy_holds(plane, docker_client):
    client, manager, _ = plane
    _wait(lambda: manager.warm_ready == 1)
    pooled = manager.pool.ready[0].item
    container = docker_client.containers.get(pooled.handle)
    assert container.labels[LABEL_SESSION] == pooled.spec.session_id and \
        pooled.spec.session_id.startswith(WARM_ID_PREFIX)

    asked = time.monotonic()
    r = client.post("/api/v1/sessions", json={"id": "dw1", "network": {"allow": ["allowed.test"]}})
    claim_s = time.monotonic() - asked
    assert r.status_code == 201, r.text
    print(f"\ndocker backend: create claiming a pooled container {claim_s * 1000:.0f} ms")
    assert manager.get("dw1").handle == pooled.handle and r.json()["display"] == f"docker:{pooled.handle}"
    assert r.json()["events"] == []
    policy = client.get("/api/v1/sessions/dw1/network-policy").json()
    assert policy == {"session_id": "dw1", "allow": ["allowed.test"], "deny": []}
    refused = client.post("/api/v1/sessions/dw1/desktop/open", json={"url": "http://elsewhere.test/"})
    assert refused.status_code == 422 and "network policy" in refused.json()["error"]["message"]
    assert client.get("/api/v1/sessions/dw1/page").json()["url"] == "about:blank"
    _wait(lambda: manager.warm_ready == 1 and manager.pool.ready[0].item.handle != pooled.handle)


def test_a_shutdown_leaves_no_container_of_the_pool(plane, docker_client):
    _, manager, owner = plane
    _wait(lambda: manager.warm_ready == 1)
    manager.close()
    assert docker_client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={owner}"}) == []
