"""Repeatable sessions: a clean browser profile at every start, no form history even without a
reset, and POST /sessions/{id}/reset back to a fresh session on the same display."""

from __future__ import annotations

import io
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.answers import ok

pytestmark = pytest.mark.x11

SID = "formflow"
# A one-field form at a fixed place on a white page, with plenty of white below the field: where
# Chromium's autofill dropdown would open.
FORM = b"""<!doctype html><html><head><title>form</title></head>
<body style="margin:0;background:#fff">
<form action="/done" method="get" autocomplete="on">
<input id="name" name="name" style="position:absolute;left:100px;top:100px;width:300px;height:30px;
 font-size:20px;border:1px solid #000;outline:none;caret-color:transparent">
<button style="position:absolute;left:450px;top:100px">Send</button>
</form></body></html>"""
DONE = b"<!doctype html><html><head><title>done</title></head><body>thanks</body></html>"
BELOW_FIELD = (100, 140, 400, 400)  # CSS px: x0, y0, x1, y1 under the field


class FormSite:
    """The form, and the submissions it received."""

    def __init__(self):
        self.submitted: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.startswith("/done"):
                    site.submitted.append(self.path)
                body = DONE if self.path.startswith("/done") else FORM
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/"

    def wait_submitted(self, count: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while len(self.submitted) < count:
            assert time.monotonic() < deadline, f"the form was not submitted ({self.submitted})"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def site():
    site = FormSite()
    yield site
    site.server.shutdown()


@pytest.fixture(scope="module")
def formflow(manager, desk):
    session = manager.create(SID)
    yield session
    manager.delete(SID)


def screen(api) -> np.ndarray:
    response = api.get(f"/api/v1/sessions/{SID}/desktop/screenshot")
    assert response.status_code == 200
    return np.asarray(Image.open(io.BytesIO(response.content)).convert("RGB"))


def fill_and_submit(api, site, viewport, text: str) -> np.ndarray:
    """One run of the flow: open the form, click the field, type, and look under the field before
    submitting with Enter. Returns what was under the field."""
    ok(api.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": site.url}))
    x, y = viewport[0] + 250, viewport[1] + 115
    ok(api.post(f"/api/v1/sessions/{SID}/desktop/click", json={"x": x, "y": y}))
    ok(api.post(f"/api/v1/sessions/{SID}/desktop/type", json={"text": text}))
    time.sleep(0.5)  # a dropdown opens a moment after the keystroke; give it the chance to
    x0, y0, x1, y1 = BELOW_FIELD
    below = screen(api)[viewport[1] + y0:viewport[1] + y1, viewport[0] + x0:viewport[0] + x1]
    count = len(site.submitted)
    ok(api.post(f"/api/v1/sessions/{SID}/desktop/key", json={"keys": ["Escape"]}))
    ok(api.post(f"/api/v1/sessions/{SID}/desktop/key", json={"keys": ["Return"]}))
    site.wait_submitted(count + 1)
    return below


def test_a_second_run_of_a_form_flow_sees_no_autofill(api, formflow, site, viewport):
    """The first run submits "alice"; the second types "a" into the same field. A profile that
    kept form history would open a dropdown offering "alice" under the field."""
    first = fill_and_submit(api, site, viewport, "alice")
    assert (first == 255).all(), "the page under the field is white on the first run"
    assert site.submitted[-1].endswith("name=alice")
    second = fill_and_submit(api, site, viewport, "a")
    assert (second == 255).all(), "something (an autofill dropdown) covers the page under the field"
    # ... and after a reset as well
    ok(api.post(f"/api/v1/sessions/{SID}/reset"))
    third = fill_and_submit(api, site, viewport, "a")
    assert (third == 255).all()


def test_reset_ends_programs_and_restarts_the_browser_clean_on_the_same_display(api, formflow, site):
    stack = formflow.stack
    xvfb, old_browser = stack.children["xvfb"].popen.pid, stack.children["chromium"].popen.pid
    restarts = ok(api.get(f"/api/v1/sessions/{SID}"))["restarts"]
    ok(api.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": site.url}))
    launched = ok(api.post(f"/api/v1/sessions/{SID}/desktop/launch",
                           json={"command": "xmessage", "args": ["left over"]}))["result"]["pid"]
    deadline = time.monotonic() + 10
    while not any(w.wm_class.startswith("xmessage") for w in formflow.windows.list()):
        assert time.monotonic() < deadline, "xmessage never showed"
        time.sleep(0.1)
    (stack.profile / "Default" / "marker").write_text("from before the reset")
    from desktop.network.policy import Refusal
    stack.proxy.blocked.record(host="denied.test", port=80, refusal=Refusal("denied", "before the reset"))

    info = ok(api.post(f"/api/v1/sessions/{SID}/reset"))

    assert info["status"] == "ready" and info["display"] == stack.display
    assert info["restarts"] == restarts, "a reset that was asked for is not a crash"
    assert any("reset" in event for event in info["events"])
    assert stack.children["xvfb"].popen.pid == xvfb and stack.children["xvfb"].alive
    assert stack.children["chromium"].popen.pid != old_browser and stack.children["chromium"].alive
    assert not Path(f"/proc/{launched}").exists() or "Z" in Path(f"/proc/{launched}/stat").read_text().split(")")[1][:3]
    assert not any(w.wm_class.startswith("xmessage") for w in formflow.windows.list())
    assert not (stack.profile / "Default" / "marker").exists()
    assert formflow.page_url() == "about:blank"
    assert ok(api.get(f"/api/v1/sessions/{SID}/network-policy/blocked")) == [], "a fresh session has blocked nothing"
    # The desktop still works: the session's panel and its browser window are where they were.
    classes = {w.wm_class.split(".")[0].lower() for w in formflow.windows.list()}
    assert {"xfce4-panel", "chromium"} <= {c.split(" ")[0] for c in classes}


def test_reset_is_refused_while_a_person_has_taken_over(api, formflow):
    browser = formflow.stack.children["chromium"].popen.pid
    ok(api.post(f"/api/v1/sessions/{SID}/takeover", json={"on": True}))
    try:
        response = api.post(f"/api/v1/sessions/{SID}/reset")
        assert response.status_code == 409 and response.json()["error"]["code"] == "operator_in_control"
    finally:
        ok(api.post(f"/api/v1/sessions/{SID}/takeover", json={"on": False}))
    assert formflow.stack.children["chromium"].popen.pid == browser  # nothing ran


def test_reset_of_an_unknown_session_is_404(api):
    response = api.post("/api/v1/sessions/nosuchsession/reset")
    assert response.status_code == 404 and response.json()["error"]["code"] == "session_not_found"


def test_a_vision_run_can_ask_for_a_reset_first(vision_api, formflow, site):
    ok(vision_api.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": site.url}))
    assert formflow.page_url() == site.url
    browser = formflow.stack.children["chromium"].popen.pid
    body = ok(vision_api.post(f"/api/v1/sessions/{SID}/vision/act", json={
        "instruction": "look", "model": "scripted", "reset": True,
        "script": [{"action": "wait", "duration_ms": 10}, {"action": "done", "answer": "looked"}]}))
    assert body["status"] == "done"
    assert body["steps"][0]["url"] == "about:blank", "the run began on the fresh browser"
    assert formflow.stack.children["chromium"].popen.pid != browser


def test_reset_without_an_instruction_is_refused_and_nothing_runs(vision_api, formflow, site):
    ok(vision_api.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": site.url}))
    browser = formflow.stack.children["chromium"].popen.pid
    response = vision_api.post(f"/api/v1/sessions/{SID}/vision/act", json={"reset": True})
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
    assert "reset" in response.json()["error"]["message"]
    assert formflow.stack.children["chromium"].popen.pid == browser and formflow.page_url() == site.url
