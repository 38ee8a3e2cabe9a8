"""The operator console in a real browser (Playwright driving /usr/bin/chromium) against the real
API server, the real desktop session and, for safety checks, the real OpenAI SDK talking to a fake.

Nothing here asserts a duration: every wait is for a state the page reaches. Screenshots of the
console go to the artifacts directory (console-*.png).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LiveServer
from tests.fakes import openai_fake as oa
from tests.fakes.server import FakeServer
from vision.http.app import Settings, create_app

pytestmark = pytest.mark.x11

SESSION = "itest"
ARTIFACTS = Path(os.environ.get("GLASSDESK_ARTIFACTS") or "artifacts")
TOKEN = "console-test-token-5f1c"
WAIT_MS = 30_000


@pytest.fixture(scope="module")
def server(manager, desk, services):
    with LiveServer(create_app(manager, Settings(token=None), services)) as live:
        yield live


@pytest.fixture(scope="module")
def locked_server(manager, desk, services):
    with LiveServer(create_app(manager, Settings(token=TOKEN), services)) as live:
        yield live


class Console:
    """One browser page on the console, collecting console errors and page errors."""

    def __init__(self, browser, url: str):
        self.context = browser.new_context(viewport={"width": 1920, "height": 1080})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console",
                     lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.set_default_timeout(WAIT_MS)
        self.url = url

    def open(self) -> Console:
        self.page.goto(f"{self.url}/#session={SESSION}")
        return self

    def wait_live_view(self) -> None:
        """Until the noVNC canvas shows a desktop: many distinct colours, not a blank frame."""
        self.page.wait_for_function("""() => {
            const c = document.querySelector('#screen canvas');
            if (!c || c.width < 1000 || c.getBoundingClientRect().width < 800) return false;
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            const seen = new Set();
            for (let i = 0; i < d.length; i += 4 * 499) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
            return seen.size > 12;
        }""", polling=200)

    def status(self) -> str:
        return self.page.locator("#run-status").inner_text()

    def wait_status(self, *texts: str) -> None:
        self.page.wait_for_function("(texts) => texts.includes(document.querySelector('#run-status').textContent)",
                                    arg=list(texts), polling=100)

    def trace_id(self) -> str:
        """The run the timeline shows."""
        return self.page.locator("#timeline").get_attribute("data-trace") or ""

    def start(self, instruction: str, model: str, *, script: list | None = None, max_steps: int = 10) -> str:
        """Start a run from the form; return its trace id once the console has switched to it."""
        p = self.page
        p.wait_for_function("() => !document.querySelector('#start').disabled")
        p.wait_for_function("() => document.querySelector('#conn').textContent === 'live'")
        previous = self.trace_id()
        p.fill("#instruction", instruction)
        p.fill("#model", model)
        p.fill("#max-steps", str(max_steps))
        if script is not None:
            p.locator("#script").wait_for(state="visible")
            p.fill("#script", json.dumps(script))
        else:
            assert p.locator("#script-field").is_hidden()
        p.click("#start")
        # The timeline first shows the session's previous run: wait for the console to follow the new one.
        p.wait_for_function("(old) => { const t = document.querySelector('#timeline').dataset.trace; "
                            "return t && t !== old; }",
                            arg=previous)
        return self.trace_id()

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"console-{name}.png"))

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def console(browser, server):
    c = Console(browser, server.url)
    yield c
    errors = list(c.errors)
    c.close()
    assert not errors, "the console logged errors:\n" + "\n".join(errors)


def _trace(services, trace_id: str):
    return services.store.load(trace_id)


def _shown_trace_id(console: Console) -> str:
    return console.page.locator("#runs-table tbody tr.selected").get_attribute("data-trace")


# ------------------------------------------------------------------------------------------ tests


def test_console_loads_and_shows_the_live_desktop_with_the_pointer(console, page, desk):
    console.open()
    console.wait_live_view()
    # The page itself carries no secret: live-view tokens only come from authenticated API calls,
    # and the VNC passwords never leave the server (its relay logs in to x11vnc).
    html = httpx2.get(console.url + "/").text
    assert desk.stack.view_password not in html and desk.stack.vnc_password not in html
    live = httpx2.get(f"{console.url}/api/v1/sessions/{SESSION}/live").json()
    assert live["view_only"] and live["websocket"] == f"/api/v1/sessions/{SESSION}/vnc"
    assert desk.stack.view_password not in str(live) and desk.stack.vnc_password not in str(live)
    # The live view is large: most of the centre column.
    box = console.page.locator("#screen canvas").bounding_box()
    assert box["width"] > 900 and box["height"] > 500
    # The agent's pointer is drawn into the live view (x11vnc -nocursorshape): put it on the test
    # page's blank area and wait for dark pixels there.
    desk.executor._run(["xdotool", "mousemove", "1000", "800"])
    console.page.wait_for_function("""() => {
        const c = document.querySelector('#screen canvas');
        const d = c.getContext('2d').getImageData(995, 795, 20, 25).data;
        for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] < 120) return true;
        return false;
    }""", polling=200)
    assert console.page.locator("#conn").inner_text() == "live"
    console.shot("live")


def test_scripted_run_from_the_form_shows_its_steps_live(console, services, page):
    console.open()
    console.wait_live_view()
    # Record (steps shown, status) whenever the timeline changes: proves steps appeared mid-run.
    console.page.evaluate("""() => {
        window.__seen = [];
        const note = () => window.__seen.push([document.querySelectorAll('#timeline li.step').length,
                                               document.querySelector('#run-status').textContent]);
        new MutationObserver(note).observe(document.querySelector('#timeline'), {childList: true});
    }""")
    script = [
        {"action": "move", "x": 700, "y": 500},
        {"action": "click", "x": 1000, "y": 700},
        {"action": "wait", "duration_ms": 1500},
        {"action": "move", "x": 1200, "y": 600},
        {"action": "wait", "duration_ms": 1500},
        {"action": "done", "answer": "the console watched it all"},
    ]
    trace_id = console.start("watch a scripted run", "scripted", script=script)
    console.page.locator("#timeline li.step[data-index='1']").wait_for()
    console.wait_status("done")
    seen = console.page.evaluate("window.__seen")
    assert any(steps >= 1 and status == "running" for steps, status in seen), seen
    # "done" arrives with the run_finished event; the timeline's last refresh may still be in flight.
    console.page.wait_for_function("() => document.querySelectorAll('#timeline li.step').length === 6")
    steps = console.page.locator("#timeline li.step")
    assert steps.count() == 6
    assert "click at (1000, 700)" in steps.nth(1).inner_text()
    # Every timeline screenshot has loaded (fetched with the auth header, shown from blob: URLs).
    console.page.wait_for_function("""() => [...document.querySelectorAll('#timeline img')]
        .every(img => img.complete && img.naturalWidth > 0)""", polling=200)
    widths = console.page.eval_on_selector_all("#timeline img", "imgs => imgs.map(i => i.naturalWidth)")
    assert widths and all(w == 1920 for w in widths)
    # The marker of the click sits where the click landed, over its screenshot.
    shot = steps.nth(1).locator(".shot").bounding_box()
    mark = steps.nth(1).locator(".mark").first.bounding_box()
    centre = (mark["x"] + mark["width"] / 2, mark["y"] + mark["height"] / 2)
    assert centre[0] == pytest.approx(shot["x"] + 1000 / 1920 * shot["width"], abs=2)
    assert centre[1] == pytest.approx(shot["y"] + 700 / 1080 * shot["height"], abs=2)
    assert console.trace_id() == trace_id and _shown_trace_id(console) == trace_id
    assert _trace(services, trace_id).meta.status == "done"
    assert console.page.locator("#trace-outcome").inner_text() == "Answer: the console watched it all"
    # The runs table and the per-model statistics follow the finished run.
    console.page.locator(f"#runs-table tr[data-trace='{trace_id}']").wait_for()
    console.page.click(".tab[data-tab='models']")
    console.page.locator("#stats-table tr[data-model='scripted']").wait_for()
    console.page.click(".tab[data-tab='runs']")
    console.shot("run")
    # The run viewer opens in a new tab with every screenshot (fetched with the token if any).
    with console.page.expect_popup() as popup:
        console.page.click("#open-report")
    report = popup.value
    report_errors: list[str] = []
    report.on("console", lambda m: report_errors.append(m.text) if m.type == "error" else None)
    report.wait_for_url(lambda url: url.endswith(f"/runs/{trace_id}"))
    report.wait_for_function("() => document.images.length === 12 && [...document.images]"
                             ".every(i => i.complete && i.naturalWidth === 1920 && i.src.startsWith('blob:'))",
                             polling=200)
    assert "watch a scripted run" in report.locator("#run-head h1").inner_text()
    assert report.evaluate("getComputedStyle(document.querySelector('.step')).borderRadius") == "8px"  # styled
    report.screenshot(path=str(ARTIFACTS / "console-report.png"))
    report.close()
    assert not report_errors, report_errors


def test_stop_cancels_a_running_act(console, services, page):
    console.open()
    console.wait_live_view()
    script = [{"action": "wait", "duration_ms": 1500}] * 6 + [{"action": "done"}]
    trace_id = console.start("wait, then be stopped", "scripted", script=script)
    console.page.locator("#timeline li.step[data-index='1']").wait_for()
    console.wait_status("running")
    console.page.locator("#stop").click()
    console.wait_status("cancelled")
    meta = _trace(services, trace_id).meta
    assert meta.status == "cancelled" and meta.steps < 7
    assert console.page.locator("#stop").is_disabled()


def test_pause_and_resume_from_the_console(console, services, page):
    console.open()
    console.wait_live_view()
    script = [{"action": "wait", "duration_ms": 1500}] * 3 + [{"action": "done", "answer": "resumed fine"}]
    trace_id = console.start("pause me", "scripted", script=script)
    console.page.locator("#timeline li.step[data-index='1']").wait_for()
    console.page.click("#pause")
    console.wait_status("paused")
    assert services.runner(SESSION).pause_reason is not None
    console.page.click("#resume")
    console.wait_status("done")
    assert _trace(services, trace_id).meta.answer == "resumed fine"


def test_take_over_pauses_the_agent_and_hands_over_control(console, services, page):
    console.open()
    console.wait_live_view()
    runner = services.runner(SESSION)
    console.page.click("label.switch:has(#takeover)")
    console.wait_status("operator has control")
    console.page.locator("#control-banner").wait_for()
    assert runner.pause_reason == "operator took over"
    console.wait_live_view()
    assert console.page.evaluate("() => !!document.querySelector('#screen canvas')")
    # The operator's mouse now reaches the desktop through the server's relay (a control token).
    desk = services.desktops.existing(SESSION)
    desk.executor._run(["xdotool", "mousemove", "10", "10"])
    box = console.page.locator("#screen canvas").bounding_box()
    deadline = time.monotonic() + 15
    while desk.executor.cursor() == (10, 10):
        assert time.monotonic() < deadline, "the operator's mouse never reached the desktop"
        for dx in (0.5, 0.52):
            console.page.mouse.move(box["x"] + box["width"] * dx, box["y"] + box["height"] * 0.5)
            time.sleep(0.1)
    console.shot("takeover")
    console.page.click("label.switch:has(#takeover)")
    console.page.locator("#control-banner").wait_for(state="hidden")
    console.page.wait_for_function("() => document.querySelector('#run-status').textContent !== 'operator has control'")
    assert runner.pause_reason is None


def test_safety_check_from_a_fake_openai_server_is_approved_in_the_console(console, services, page, monkeypatch):
    with FakeServer() as fake:
        fake.queue(
            oa.ok(oa.computer_call({"type": "click", "button": "left", "x": 640, "y": 520}, call_id="call_sc",
                                   safety_checks=[oa.safety_check("sc_console", "malicious_instructions",
                                                                  "The page asks for something the user did not.")])),
            oa.ok(oa.message("All done: the click went through after approval.")),
        )
        monkeypatch.setitem(services.config.models, "openai/computer-use-preview",
                            {"base_url": fake.url + "/v1", "api_key": "sk-test-console-0123456789abcdef"})
        console.open()
        console.wait_live_view()
        trace_id = console.start("click in the page", "openai/computer-use-preview")
        safety = console.page.locator("#safety")
        safety.wait_for()
        assert "malicious_instructions" in safety.inner_text()
        assert "The page asks for something the user did not." in safety.inner_text()
        console.wait_status("needs approval")
        # The banner names the held action, and the live view marks where it would land.
        safety.locator("li.held").wait_for()
        assert "It wants to: click at (960, 780)" in safety.inner_text()
        console.page.locator("#live-wrap .held-marker").wait_for()
        console.shot("safety")
        console.page.click("#approve")
        console.wait_status("done")
        safety.wait_for(state="hidden")
        console.page.locator("#trace-outcome", has_text="All done").wait_for()  # rendered by the last refresh
        assert _trace(services, trace_id).meta.status == "done"
        # The approval reached the model: the next request acknowledged exactly that check.
        [output] = oa.input_items(fake.requests[1], "computer_call_output")
        assert [c["id"] for c in output["acknowledged_safety_checks"]] == ["sc_console"]


def test_deny_ends_a_run_held_for_a_safety_check(console, services, page, monkeypatch):
    with FakeServer() as fake:
        fake.queue(oa.ok(oa.computer_call({"type": "click", "button": "left", "x": 640, "y": 520}, call_id="call_d",
                                          safety_checks=[oa.safety_check("sc_deny")])))
        monkeypatch.setitem(services.config.models, "openai/computer-use-preview",
                            {"base_url": fake.url + "/v1", "api_key": "sk-test-console-0123456789abcdef"})
        console.open()
        console.wait_live_view()
        trace_id = console.start("click, but be denied", "openai/computer-use-preview")
        console.page.locator("#safety").wait_for()
        console.page.click("#deny")
        console.wait_status("cancelled")
        assert _trace(services, trace_id).meta.status == "cancelled"
        assert len(fake.requests) == 1  # the held click never ran and the model was not asked again


def test_token_protected_console_asks_for_the_token(browser, locked_server, desk):
    c = Console(browser, locked_server.url)
    try:
        # The page and its code load without the token; the API, events and metrics do not.
        with httpx2.Client(base_url=locked_server.url) as http:
            assert http.get("/").status_code == 200
            assert http.get("/console/assets/console.js").status_code == 200
            assert http.get("/console/novnc/core/rfb.js").status_code == 200
            for path in ("/api/v1/console/sessions", f"/api/v1/sessions/{SESSION}/live", "/api/v1/events",
                         "/api/v1/stats", "/metrics"):
                assert http.get(path).status_code == 401, path
            assert http.post(f"/api/v1/sessions/{SESSION}/takeover", json={"on": True}).status_code == 401
            live = http.get(f"/api/v1/sessions/{SESSION}/live", headers={"authorization": f"Bearer {TOKEN}"}).json()
            assert live["view_only"] is True and live["mode"] == "view" and live["token"].startswith(f"{SESSION}.view.")
        c.open()
        c.page.locator("#login").wait_for()
        assert c.page.locator("#app").is_hidden()
        c.shot("login")
        c.page.fill("#token-input", "not-the-token")
        c.page.click("#login-form button[type=submit]")
        c.page.locator("#login-error").wait_for()
        assert "not accepted" in c.page.locator("#login-error").inner_text()
        c.page.fill("#token-input", TOKEN)
        c.page.click("#login-form button[type=submit]")
        c.page.locator("#app").wait_for()
        c.wait_live_view()
        assert c.page.locator("#conn").inner_text() == "live"
        assert c.page.evaluate("sessionStorage.getItem('glassdesk.token')") == TOKEN
        # Unauthorised fetches before the login are expected 401s; nothing else went wrong.
        assert not [e for e in c.errors if "401" not in e], c.errors
    finally:
        c.close()


def test_metrics_after_a_run(server, services, page):
    script = [{"action": "click", "x": 900, "y": 700}, {"action": "done", "answer": "counted"}]
    with httpx2.Client(base_url=server.url, timeout=60) as http:
        before = _metric_values(http.get("/metrics").text)
        r = http.post(f"/api/v1/sessions/{SESSION}/vision/act",
                      json={"instruction": "be counted", "model": "scripted", "script": script})
        assert r.status_code == 200 and r.json()["status"] == "done", r.text
        response = http.get("/metrics")
        assert response.headers["content-type"].startswith("text/plain")
        after = _metric_values(response.text)
        stats = http.get("/api/v1/stats").json()

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert delta("glassdesk_runs_total", model="scripted", status="done") == 1
    assert delta("glassdesk_runs_started_total", model="scripted") == 1
    assert delta("glassdesk_steps_total", model="scripted") == 2
    assert delta("glassdesk_actions_total", model="scripted", action="click") == 1
    assert delta("glassdesk_step_latency_seconds_count", model="scripted", phase="exec") == 2
    assert delta("glassdesk_step_latency_seconds_count", model="scripted", phase="settle") == 2
    assert after[("glassdesk_sessions", (("status", "ready"),))] >= 1
    assert ("glassdesk_runs_active", ()) in after
    scripted = next(m for m in stats["models"] if m["model"] == "scripted")
    assert scripted["runs"] >= 1 and scripted["done"] >= 1 and scripted["mean_step_ms"] is not None


def _metric_values(text: str) -> dict[tuple, float]:
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def test_event_stream_replays_recent_events_and_lets_go_of_a_closed_client(server, services):
    import time

    bus = services.bus
    baseline = len(bus._subscribers)
    first = bus.publish("console_probe", session_id="nobody", n=1)
    bus.publish("console_probe", session_id="nobody", n=2)
    with httpx2.Client(base_url=server.url, timeout=30) as http:
        with http.stream("GET", f"/api/v1/events?after={first['seq'] - 1}&session_id=nobody") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            frames, block = [], []
            for line in stream.iter_lines():
                if line:
                    block.append(line)
                elif block:
                    if not block[0].startswith(":"):
                        frames.append(block)
                    block = []
                if len(frames) == 2:
                    break
    ids = [int(f[0].removeprefix("id: ")) for f in frames]
    assert ids == [first["seq"], first["seq"] + 1]
    assert frames[0][1] == "event: console_probe" and json.loads(frames[1][2].removeprefix("data: "))["n"] == 2
    deadline = time.monotonic() + 20
    while len(bus._subscribers) > baseline:  # the server noticed the client left and unsubscribed
        assert time.monotonic() < deadline, "the event stream kept its subscription after the client left"
        time.sleep(0.05)


def test_record_films_the_session_from_the_console(console, services, page):
    from desktop.actions import Click

    console.open()
    console.wait_live_view()
    console.page.click("label.switch:has(#record)")
    console.page.locator("#recording b", has_text="Recording").wait_for()
    assert services.recordings.recording_status(SESSION).status == "recording"
    services.desktops.perform(SESSION, Click(x=960, y=700))
    console.page.click("label.switch:has(#record)")
    console.page.locator("#recording b", has_text="Recorded").wait_for()
    text = console.page.locator("#recording").inner_text()
    assert "video (" in text and "1 chapter)" in text and "sha256" in text, text
    assert services.recordings.recording_status(SESSION) is None
    console.shot("recorded")
