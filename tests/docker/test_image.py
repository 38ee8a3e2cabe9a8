"""glassdesk's image, built by `make docker-test`, run as the README says and checked for real:
health, the display, a click on a page served to the container, the token, who runs what, and a
stop that leaves no process behind."""

from __future__ import annotations

import io
import os
from pathlib import Path

from PIL import Image

from tests.docker.conftest import netns, run_glassdesk
from tests.fakes import testpage

SID = "default"


def test_healthz_answers_without_a_token(glassdesk_container):
    with glassdesk_container.client(token=None) as http:
        response = http.get("/healthz")
    assert response.status_code == 200, response.text


def test_the_token_is_enforced(glassdesk_container):
    with glassdesk_container.client(token=None) as http:
        refused = http.get("/api/v1/sessions")
    with glassdesk_container.client(token="not-" + glassdesk_container.token) as http:
        wrong = http.get("/api/v1/sessions")
    with glassdesk_container.client() as http:
        allowed = http.get("/api/v1/sessions")
    assert refused.status_code == 401, refused.text
    assert wrong.status_code == 401, wrong.text
    assert allowed.status_code == 200, allowed.text


def test_screenshot_is_the_full_1920x1080_display(glassdesk_container):
    with glassdesk_container.client() as http:
        response = http.get(f"/api/v1/sessions/{SID}/desktop/screenshot")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    assert image.size == (1920, 1080)
    # A desktop was drawn (panel, browser), not an empty frame buffer.
    assert len(image.convert("RGB").getcolors(maxcolors=1 << 24)) > 16


def test_a_click_lands_on_a_page_served_to_the_container(glassdesk_container):
    # The page server listens on the container's loopback (its socket made in the container's
    # network namespace), so the container's Chromium reaches it as a local site.
    with netns(glassdesk_container.pid):
        page = testpage.TestPage()
    try:
        with glassdesk_container.client() as http:
            opened = http.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": page.url})
            assert opened.status_code == 200, opened.text
            page.wait_for(lambda e: e.get("type") == "loaded", timeout=30)
            page.clear()
            clicked = http.post(f"/api/v1/sessions/{SID}/desktop/click", json={"x": 960, "y": 700})
            assert clicked.status_code == 200, clicked.text
        event = page.wait_for(lambda e: e.get("type") == "click", timeout=30)
    finally:
        page.close()
    # Pixel-exact: the browser window is maximised at (0,0), so screen coordinates are display pixels.
    assert (event["screenX"], event["screenY"]) == (960, 700), event
    assert event["target"] == "pad" and event["button"] == 0, event


def _processes(container) -> list[dict]:
    """The container's processes as this host sees them: pid, uid and command line, split on NULs
    and spaces (Chromium rewrites its command line as one space-separated string)."""
    found = []
    for row in container.top(ps_args="-o pid")["Processes"]:
        pid = int(row[0])
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
        except FileNotFoundError:  # ended between the listing and the look
            continue
        found.append({"pid": pid, "uid": uid, "argv": [a.decode(errors="replace") for a in argv]})
    return found


def test_runs_as_uid_1000_and_chromium_keeps_its_sandbox(glassdesk_container):
    processes = _processes(glassdesk_container.container)
    # docker-init (--init) is PID 1 and runs as the container's user too.
    assert processes and {p["uid"] for p in processes} == {1000}, processes
    chromium = [p for p in processes if p["argv"] and "chromium" in Path(p["argv"][0]).name]
    assert chromium, [p["argv"][:1] for p in processes]
    assert not [p for p in chromium if "--no-sandbox" in p["argv"]]
    # The renderers run sandboxed: in a user namespace of their own, not the container's.
    renderers = [p for p in chromium if "--type=renderer" in p["argv"]]
    assert renderers
    container_userns = os.readlink(f"/proc/{glassdesk_container.pid}/ns/user")
    assert all(os.readlink(f"/proc/{p['pid']}/ns/user") != container_userns for p in renderers)


def test_docker_stop_leaves_no_process(docker_client, glassdesk_image):
    running = run_glassdesk(docker_client, glassdesk_image, name_prefix="glassdesk-stop")
    try:
        running.wait_healthy()
        pids = [p["pid"] for p in _processes(running.container)]
        assert len(pids) > 10  # the whole desktop was up: Xvfb, XFCE, Chromium, x11vnc, the server
        running.container.stop(timeout=30)
        running.container.reload()
        state = running.container.attrs["State"]
        assert state["Status"] == "exited", state
        # glassdesk shut down in order on SIGTERM within the grace: uvicorn re-raises the signal after
        # its shutdown, so 143 (128 + SIGTERM); docker's SIGKILL after the grace would be 137.
        assert state["ExitCode"] in (0, 143), (state, running.logs())
        assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    finally:
        running.container.remove(force=True)
