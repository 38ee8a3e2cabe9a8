"""The Docker session backend for real: a control plane (API, loop, traces, page layer, QA) whose
sessions are containers of glassdesk's image on the test daemon (`make docker-test`).

Two container sessions acted on at once, a scripted vision run on one and page calls and a QA verb
on the other; a container killed under a run, reported and replaced; delete leaving no container,
volume or process.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest

from desktop.remote.backends.base import LABEL_SESSION
from desktop.remote.backends.docker import DockerBackend
from desktop.remote.backends.manager import BackendSessions
from desktop.session.stack import free_port
from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def plane(docker_client, glassdesk_image):
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    port = free_port()
    backend = DockerBackend(image=glassdesk_image, client=docker_client, protected_ports={port},
                            owner=f"glassdesk-docker-test-{port}")
    manager = BackendSessions(backend, max_sessions=3, memory_mb=1536, supervise_every_s=0.5)
    glassdesk = Glassdesk.build(manager, data_dir=tempfile.mkdtemp(prefix="glassdesk-dtest-"), config=VisionConfig())
    with LiveServer(create_app(manager, Settings(token=None, port=port), glassdesk), port=port) as server:
        with httpx2.Client(base_url=server.url, timeout=180) as client:
            client.port = port  # for the live-view test's websocket
            yield client, glassdesk, manager
    manager.close()


def _wait(condition, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.25)


def _create(client, session_id: str) -> None:
    r = client.post("/api/v1/sessions", json={"id": session_id})
    assert r.status_code == 201, r.text
    assert r.json()["display"].startswith("docker:glassdesk-")


def _data_url(html: str) -> str:
    """A page the container's browser can open without reaching anything: the session's network
    namespace does not see this machine's loopback, where the tests' own page servers listen."""
    return "data:text/html," + quote(html)


# A field over the whole page that puts what is typed into the title, and a button that does too.
FIELD = _data_url("<title>empty</title><input id=f oninput='document.title=this.value' "
                  "style='position:fixed;inset:0;width:100%;height:100%;font-size:40px'>")
BUTTON = _data_url("<title>ready</title><button id=b onclick=\"document.title='clicked'\" "
                   "style='position:fixed;inset:0;width:100%;height:100%'>go</button>")


def test_two_container_sessions_acted_on_in_parallel(plane, docker_client):
    client, glassdesk, manager = plane
    _create(client, "d1")
    _create(client, "d2")
    for sid in ("d1", "d2"):
        container = docker_client.containers.get(manager.get(sid).handle)
        assert container.labels[LABEL_SESSION] == sid
        assert container.attrs["HostConfig"]["Memory"] == 1536 * 2**20
    assert manager.get("d1").client.endpoint.base_url != manager.get("d2").client.endpoint.base_url
    assert client.post("/api/v1/sessions/d1/page/navigate", json={"url": FIELD}).status_code == 200
    results: dict[str, httpx2.Response] = {}

    def run() -> None:  # a scripted vision run on d1: click into the field, type
        script = [{"action": "click", "x": 960, "y": 500}, {"action": "type", "text": "in a container"},
                  {"action": "done", "answer": "typed"}]
        results["run"] = client.post("/api/v1/sessions/d1/vision/act",
                                     json={"instruction": "type", "model": "scripted", "script": script})

    def page_and_qa() -> None:  # meanwhile on d2: page calls and a QA verb
        results["navigate"] = client.post("/api/v1/sessions/d2/page/navigate", json={"url": BUTTON})
        results["click"] = client.post("/api/v1/sessions/d2/page/click", json={"selector": "#b"})
        results["qa"] = client.post("/api/v1/sessions/d2/qa/verify_element_exists", json={"selector": "#b"})

    threads = [threading.Thread(target=run), threading.Thread(target=page_and_qa)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert results["run"].status_code == 200 and results["run"].json()["status"] == "done", results["run"].text
    assert glassdesk.store.verify(results["run"].json()["trace_id"]).ok
    assert client.get("/api/v1/sessions/d1/page").json()["title"] == "in a container"  # typed for real on d1
    for name in ("navigate", "click", "qa"):
        assert results[name].status_code == 200, results[name].text
    assert results["click"].json()["page"]["title"] == "clicked"  # the real click landed on d2's button
    qa = results["qa"].json()
    assert qa["success"] and qa["found_by"] == "dom", qa
    assert client.get("/api/v1/sessions/d2/page").json()["title"] == "clicked"


def test_the_live_view_of_a_container_session_is_relayed_by_the_control_plane(plane):
    from tests.fakes.rfb import RFBClient

    client, _, _ = plane
    view = client.get("/api/v1/sessions/d1/live").json()
    viewer = RFBClient(type("Server", (), {"port": client.port}), view["token"], session="d1")
    try:
        assert viewer.handshake() == (1920, 1080)  # the container's x11vnc, through its server's relay
        viewer.sync()
    finally:
        viewer.close()


def test_a_container_killed_mid_run_is_reported_and_replaced(plane, docker_client):
    import docker

    client, glassdesk, manager = plane
    session = manager.get("d1")
    first = session.handle
    seen = glassdesk.bus.recent()[-1]["seq"] if glassdesk.bus.recent() else 0
    results: dict[str, httpx2.Response] = {}
    script = [{"action": "wait", "duration_ms": 1000}] * 20 + [{"action": "done", "answer": "waited"}]
    runner = threading.Thread(target=lambda: results.setdefault("run", client.post(
        "/api/v1/sessions/d1/vision/act", json={"instruction": "wait", "model": "scripted", "script": script,
                                                 "max_steps": 30})))
    runner.start()
    _wait(lambda: glassdesk.active("d1"))
    docker_client.containers.get(first).kill()
    _wait(lambda: any(e["kind"] == "session_died" and e["session_id"] == "d1" and e["seq"] > seen
                      for e in glassdesk.bus.recent()))
    runner.join(300)
    _wait(lambda: client.get("/api/v1/sessions/d1").json()["status"] == "ready")
    info = client.get("/api/v1/sessions/d1").json()
    assert info["restarts"] == 1 and any("dead" in e for e in info["events"]), info
    assert session.handle != first
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(first)  # the dead one is gone, not left stopped
    # The run that met the dead desktop waited for the replacement and went on there, saying so (as
    # after a local heal: done_after_heal, a desktop_healed step), or ended saying the session was
    # unavailable; either way it ended, with a trace.
    run = results["run"].json()
    assert run["status"] == "done_after_heal" or (run["error"] or {}).get("code") == "session_unavailable", run
    assert glassdesk.store.verify(run["trace_id"]).ok
    assert client.post("/api/v1/sessions/d1/desktop/click", json={"x": 5, "y": 5}).status_code == 200


def test_delete_leaves_nothing_behind(plane, docker_client):
    client, _, manager = plane
    handle = manager.get("d2").handle
    container = docker_client.containers.get(handle)
    pid = container.attrs["State"]["Pid"]
    volumes = {m.get("Name") for m in container.attrs["Mounts"] if m.get("Name")}
    assert pid and Path(f"/proc/{pid}").exists()
    assert client.delete("/api/v1/sessions/d2").status_code == 204
    assert docker_client.containers.list(all=True, filters={"label": f"{LABEL_SESSION}=d2"}) == []
    assert not Path(f"/proc/{pid}").exists()
    assert not ({v.name for v in docker_client.volumes.list()} & volumes)
    assert client.get("/api/v1/sessions/d2").status_code == 404
