"""Pure parts of the operator console and the viewer: pointer glide, the status strip, wording, stats,
metrics, auth."""

from __future__ import annotations

import math
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from desktop.actions import Click, Drag, Key, Move, Point, Scroll, Type
from desktop.x11.input import GLIDE_MS, MULTI_CLICK_S, Executor, glide_argv, glide_ms_from, pointer_target
from vision.app.metrics import Metrics
from vision.evidence.report import describe_action
from vision.http.auth import FailureLimit, host_allowed, is_open, origin_allowed
from vision.http.console import model_stats
from vision.run.observers import Narrator, action_points, strip_enabled

# ------------------------------------------------------------------------------------ glide


def test_glide_goes_most_of_the_way_in_small_eased_steps():
    argv = glide_argv((100, 100), (1100, 600), 150)
    assert argv[0] == "xdotool"
    moves = [(int(argv[i + 1]), int(argv[i + 2])) for i, word in enumerate(argv) if word == "mousemove"]
    assert len(moves) == 150 // 15 - 1
    # Monotone towards the target, never reaching it: the action's own argv makes the final move.
    xs = [x for x, _ in moves]
    assert xs == sorted(xs) and moves[-1] != (1100, 600)
    assert math.dist(moves[-1], (1100, 600)) < math.dist(moves[0], (1100, 600))
    # Eased: the middle steps are longer than the first and last.
    gaps = [math.dist(a, b) for a, b in zip([(100, 100), *moves], moves)]
    assert gaps[len(gaps) // 2] > gaps[0] and gaps[len(gaps) // 2] > gaps[-1]
    assert all(argv[i + 1] == "0.015" for i, word in enumerate(argv) if word == "sleep")


@pytest.mark.parametrize("start,end,ms", [((10, 10), (12, 13), 150), ((0, 0), (900, 900), 0), ((0, 0), (900, 900), 20)])
def test_no_glide_when_close_or_off(start, end, ms):
    assert glide_argv(start, end, ms) is None


def test_glide_setting_from_the_environment():
    assert glide_ms_from({}) == GLIDE_MS
    assert glide_ms_from({"GLASSDESK_POINTER_GLIDE_MS": "0"}) == 0
    assert glide_ms_from({"GLASSDESK_POINTER_GLIDE_MS": "300"}) == 300
    assert glide_ms_from({"GLASSDESK_POINTER_GLIDE_MS": "99999"}) == 2000
    assert glide_ms_from({"GLASSDESK_POINTER_GLIDE_MS": "fast"}) == GLIDE_MS


class RecordingExecutor(Executor):
    """The real Executor's order of things, its commands recorded instead of run."""

    def __init__(self, glide_ms: int):
        super().__init__({"DISPLAY": ":99"})
        self.glide_ms, self.log = glide_ms, []

    def _run(self, argv):
        self.log.append(argv[1] if argv[1] != "getmouselocation" else "cursor")
        return "X=100 Y=100 SCREEN=0 WINDOW=1" if argv[1] == "getmouselocation" else ""


@pytest.mark.parametrize("glide_ms,expected", [
    (150, ["cursor", "mousemove", "before", "mousemove"]),  # the reads wait for the glide, the press for them
    (0, ["before", "mousemove"]),
])
def test_what_must_precede_the_press_runs_after_the_glide_and_before_the_action(glide_ms, expected):
    executor = RecordingExecutor(glide_ms)
    assert executor.glides(Click(x=900, y=700)) is bool(glide_ms)
    executed = executor.run(Click(x=900, y=700), before_act=lambda: executor.log.append("before"))
    assert executor.log == expected
    assert "click" in executed.argv[-1] and len(executed.argv) == (2 if glide_ms else 1)  # the glide is part of it


def test_two_clicks_on_one_spot_stay_two_clicks():
    executor = RecordingExecutor(0)
    executor.run(Click(x=900, y=700))
    start = time.monotonic()
    executor.run(Click(x=900, y=700))
    assert time.monotonic() - start >= MULTI_CLICK_S * 0.9  # the second press waited out the double-click time
    start = time.monotonic()
    executor.run(Click(x=300, y=700))
    executor.run(Click())  # at the pointer (100, 100 here): asked where that is
    assert time.monotonic() - start < MULTI_CLICK_S * 0.9 and executor.log[-2:] == ["cursor", "click"]


def test_reads_in_the_background_hand_over_their_result_or_their_error():
    from desktop.session.manager import in_background

    assert in_background(lambda: 42).result(5) == 42
    with pytest.raises(ZeroDivisionError):
        in_background(lambda: 1 / 0).result(5)


def test_pointer_targets():
    assert pointer_target(Click(x=5, y=6)) == (5, 6)
    assert pointer_target(Click()) is None  # clicks where the pointer is: nothing to glide to
    assert pointer_target(Move(x=7, y=8)) == (7, 8)
    assert pointer_target(Scroll(x=1, y=2, direction="down", amount=3)) == (1, 2)
    assert pointer_target(Drag(path=[Point(x=1, y=2), Point(x=30, y=40)])) == (1, 2)
    assert pointer_target(Type(text="x")) is None and pointer_target(Key(keys=["a"])) is None


# ------------------------------------------------------------------------------------ the strip


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_strip_follows_a_run_and_fades_after_it():
    clock = Clock()
    narrator = Narrator(clock=clock)
    assert narrator.current("s1") is None
    narrator.observe({"kind": "run_started", "session_id": "s1", "max_steps": 10})
    first = narrator.current("s1")
    assert (first.text, first.tone, first.avoid) == ("step 1/10 · thinking…", "wait", ())
    narrator.observe({"kind": "action", "session_id": "s1", "step": 1, "action": {"action": "click", "x": 5, "y": 6}})
    acting = narrator.current("s1")
    assert acting.text == "step 1/10 · click at (5, 6)" and acting.avoid == ((5, 6),) and acting.seq > first.seq
    assert acting.as_json() == {"text": "step 1/10 · click at (5, 6)", "tone": "act", "avoid": [[5, 6]]}
    narrator.observe({"kind": "run_finished", "session_id": "s1", "status": "failed", "steps": 4})
    assert narrator.current("s1").text == "failed · 4 steps" and narrator.current("s1").tone == "bad"
    assert narrator.current("s2") is None  # per session
    clock.now += 3.9
    assert narrator.current("s1") is not None
    clock.now += 0.2  # the last words stay 4 s, then the strip is gone
    assert narrator.current("s1") is None


def test_strip_is_forgotten_with_its_session_and_can_be_off():
    narrator = Narrator(clock=Clock())
    narrator.observe({"kind": "paused", "session_id": "s1", "reason": "operator took over"})
    assert narrator.current("s1").text == "paused · operator took over"
    narrator.observe({"kind": "session_deleted", "session_id": "s1"})
    assert narrator.current("s1") is None
    off = Narrator(enabled=False)
    off.observe({"kind": "run_started", "session_id": "s1", "max_steps": 3})
    assert off.current("s1") is None
    assert strip_enabled({}) and strip_enabled({"GLASSDESK_OVERLAY": "1"})
    assert not strip_enabled({"GLASSDESK_OVERLAY": "0"}) and not strip_enabled({"GLASSDESK_OVERLAY": " Off "})


def test_strip_points_of_actions():
    assert action_points({"action": "click", "x": 3, "y": 4}) == [(3, 4)]
    assert action_points({"action": "drag", "path": [{"x": 1, "y": 2}, {"x": 5, "y": 6}]}) == [(1, 2), (5, 6)]
    assert len(action_points({"action": "zoom", "region": {"x0": 0, "y0": 0, "x1": 10, "y1": 10}})) == 4
    assert action_points({"action": "type", "text": "hi"}) == []


def test_strip_words_never_carry_typed_text():
    def short_action(action):
        return describe_action(action, redact=True)

    assert short_action({"action": "type", "text": "hunter2"}) == "type 7 characters"
    assert short_action({"action": "click", "x": 5, "y": 6}) == "click at (5, 6)"
    assert short_action({"action": "click", "x": 5, "y": 6, "button": "right", "modifiers": ["ctrl"]}) == \
        "ctrl+right click at (5, 6)"
    assert short_action({"action": "scroll", "x": 1, "y": 2, "direction": "down", "amount": 5}) == \
        "scroll down ×5 at (1, 2)"
    assert short_action({"action": "key", "keys": ["ctrl+l"]}) == "key ctrl+l"
    assert short_action({"action": "wait", "duration_ms": 1500}) == "wait 1.5 s"
    assert short_action({"action": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}) == "drag (1, 2) → (3, 4)"
    assert short_action({"action": "done", "answer": "the secret is 42"}) == "done"


# ------------------------------------------------------------------------------------ stats


def _summary(model, status, steps, tokens, step_ms):
    return {"model": model, "status": status, "steps": steps, "tokens": tokens, "step_ms": step_ms,
            "model_ms": [], "exec_ms": step_ms, "settle_ms": [0] * len(step_ms), "duration_s": 2.0}


def test_model_stats():
    stats = model_stats([
        _summary("a", "done", 2, 100, [100, 300]),
        _summary("a", "failed", 4, 300, [200]),
        _summary("b", "cancelled", 1, 0, []),
    ], running={"c": 1})
    by = {s["model"]: s for s in stats}
    assert by["a"]["runs"] == 2 and by["a"]["done"] == 1 and by["a"]["done_rate"] == 0.5
    assert by["a"]["mean_steps"] == 3 and by["a"]["mean_tokens"] == 200 and by["a"]["mean_step_ms"] == 200
    assert by["a"]["statuses"] == {"done": 1, "failed": 1}
    assert by["b"]["done_rate"] == 0 and by["b"]["mean_step_ms"] is None
    assert by["c"]["runs"] == 0 and by["c"]["running"] == 1 and by["c"]["done_rate"] is None


# ------------------------------------------------------------------------------------ metrics


def _samples(metrics: Metrics) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_from_bus_events():
    m = Metrics(lambda: {"sessions": {"ready": 2}, "active": 1, "paused": 0, "awaiting": 0}, process=False)
    step = {"index": 1, "model_ms": 1200, "exec_ms": 40, "settle_ms": 70, "actions": [{"action": "click"}],
            "usage": {"input_tokens": 1000, "output_tokens": 50}, "error": {"code": "action_failed", "message": "x"}}
    events = [
        {"seq": 1, "kind": "run_started", "trace_id": "t1", "model": "openai/x", "ts": 100.0},
        {"seq": 2, "kind": "step", "trace_id": "t1", "step": step},
        {"seq": 3, "kind": "retrying", "trace_id": "t1"},
        {"seq": 4, "kind": "needs_confirmation", "trace_id": "t1", "checks": [{"id": "s", "code": "malicious"}]},
        {"seq": 5, "kind": "run_finished", "trace_id": "t1", "status": "cancelled", "model": "openai/x", "ts": 104.0,
         "error": {"code": "cancelled", "message": "by the operator"}},
    ]
    m.observe_all(events)
    m.observe_all(events)  # a replay counts nothing twice
    s = _samples(m)
    assert s[("glassdesk_runs_started_total", (("model", "openai/x"),))] == 1
    assert s[("glassdesk_runs_total", (("model", "openai/x"), ("status", "cancelled")))] == 1
    assert s[("glassdesk_steps_total", (("model", "openai/x"),))] == 1
    assert s[("glassdesk_tokens_total", (("kind", "input"), ("model", "openai/x")))] == 1000
    assert s[("glassdesk_tokens_total", (("kind", "output"), ("model", "openai/x")))] == 50
    assert s[("glassdesk_errors_total", (("code", "action_failed"), ("level", "step")))] == 1
    assert s[("glassdesk_errors_total", (("code", "cancelled"), ("level", "run")))] == 1
    assert s[("glassdesk_model_retries_total", (("model", "openai/x"),))] == 1
    assert s[("glassdesk_safety_checks_total", (("code", "malicious"),))] == 1
    assert s[("glassdesk_step_latency_seconds_count", (("model", "openai/x"), ("phase", "model")))] == 1
    assert s[("glassdesk_step_latency_seconds_sum", (("model", "openai/x"), ("phase", "model")))] == pytest.approx(1.2)
    assert s[("glassdesk_run_duration_seconds_sum", (("model", "openai/x"),))] == pytest.approx(4.0)
    assert s[("glassdesk_sessions", (("status", "ready"),))] == 2
    assert s[("glassdesk_runs_active", ())] == 1


# ------------------------------------------------------------------------------------ auth


@pytest.mark.parametrize("path,method,open_", [
    ("/", "GET", True), ("/", "POST", False), ("/console/assets/console.js", "GET", True),
    ("/console/novnc/core/rfb.js", "HEAD", True), ("/console/../api/v1/sessions", "GET", False),
    ("/api/v1/sessions", "GET", False), ("/api/v1/events", "GET", False), ("/metrics", "GET", False),
    ("/healthz", "GET", True), ("/index.html", "GET", False),
    # the live viewer checks a live-view token instead
    ("/view/default", "GET", True), ("/view/default", "POST", False), ("/view/Bad", "GET", False),
    ("/api/v1/sessions/itest/viewer", "GET", True), ("/api/v1/sessions/itest/viewer", "POST", False),
    ("/api/v1/sessions/itest/live", "GET", False), ("/api/v1/sessions/itest/vnc", "GET", False),
    # the run viewer's page is public code; the run it shows is read with the token
    ("/runs/20261127T190427702375Z-8a15b33d", "GET", True), ("/runs/x", "POST", False),
    ("/runs/../api/v1/sessions", "GET", False), ("/runs/a/b", "GET", False),
    ("/api/v1/runs/20261127T190427702375Z-8a15b33d", "GET", False),
])
def test_only_the_console_page_its_static_files_and_the_viewer_are_open(path, method, open_):
    assert is_open({"type": "http", "path": path, "method": method}) is open_


@pytest.mark.parametrize("path,open_", [
    ("/api/v1/sessions/itest/vnc", True), ("/api/v1/sessions/itest/viewer/strip", True),
    ("/api/v1/sessions/itest/vnc/x", False), ("/api/v1/events", False), ("/mcp", False),
])
def test_only_the_viewer_websockets_are_open(path, open_):
    assert is_open({"type": "websocket", "path": path}) is open_


def test_failure_limit_per_client_for_a_window():
    clock = Clock(0.0)
    limit = FailureLimit(max_failures=3, window_s=60, clock=clock)
    for t in (0, 10, 20):
        clock.now = t
        assert limit.retry_after("1.2.3.4") is None
        limit.failed("1.2.3.4")
    assert limit.retry_after("1.2.3.4") == 40  # the failure at 0 ages out at 60
    assert limit.retry_after("5.6.7.8") is None  # another client is not held
    clock.now = 59.5
    assert limit.retry_after("1.2.3.4") == 1
    clock.now = 60
    assert limit.retry_after("1.2.3.4") is None  # no lockout beyond the window
    limit.failed("1.2.3.4")
    assert limit.retry_after("1.2.3.4") == 10  # 10, 20, 60 in the window: the one at 10 ages out at 70


@pytest.mark.parametrize("host,allowed", [
    ("127.0.0.1:8080", True), ("localhost:1", True), ("localhost", True), ("[::1]:8080", True),
    ("LOCALHOST:8080", True), ("evil.example", False), ("evil.example:8080", False), ("", False),
    ("127.0.0.1.evil.example:8080", False), ("[::1].evil:80", False),
])
def test_only_loopback_host_names_are_answered(host, allowed):
    hosts = ["127.0.0.1", "127.0.0.1:*", "[::1]", "[::1]:*", "localhost", "localhost:*"]
    headers = [(b"host", host.encode())] if host else []
    assert host_allowed(headers, hosts) is allowed


@pytest.mark.parametrize("origin,host,allowed", [
    (None, "127.0.0.1:8080", True), ("http://127.0.0.1:8080", "127.0.0.1:8080", True),
    ("http://localhost", "localhost", True), ("http://localhost:80", "localhost", True),
    ("https://[::1]:9", "[::1]:9", True), ("https://desk.example.lan", "desk.example.lan", True),
    ("https://desk.example.lan", "desk.example.lan:443", True), ("HTTP://LOCALHOST:8080", "localhost:8080", True),
    ("https://tools.example.com", "127.0.0.1:8080", True),  # configured
    # Another port, another name, another site: not the server's own origin.
    ("http://127.0.0.1:3000", "127.0.0.1:8080", False), ("http://127.0.0.1", "127.0.0.1:8080", False),
    ("http://localhost:8080", "127.0.0.1:8080", False), ("https://[::1]:9", "[::1]:8080", False),
    ("https://evil.example", "127.0.0.1:8080", False), ("http://evil.example:8080", "127.0.0.1:8080", False),
    ("null", "127.0.0.1:8080", False), ("http://127.0.0.1.evil.example:80", "127.0.0.1:80", False),
    ("http://127.0.0.1:8080/path", "127.0.0.1:8080", False), ("ftp://127.0.0.1:8080", "127.0.0.1:8080", False),
    ("http://127.0.0.1:8080", "", False),
])
def test_without_a_token_state_changes_from_foreign_pages_are_refused(origin, host, allowed):
    headers = [(b"host", host.encode())] + ([(b"origin", origin.encode())] if origin else [])
    assert origin_allowed(headers, ["https://tools.example.com"]) is allowed


def test_runs_whose_model_said_done_are_counted_by_what_was_checked():
    m = Metrics(process=False)
    finished = [("done", True), ("done", None), ("done_after_heal", None), ("failed", False), ("failed", None),
                ("max_steps", None), ("done", True)]
    m.observe_all({"seq": i, "kind": "run_finished", "trace_id": f"t{i}", "status": status, "verified": verified,
                   "model": "ocr"} for i, (status, verified) in enumerate(finished, 1))
    s = _samples(m)
    assert {verdict: s.get(("glassdesk_run_verdicts_total", (("model", "ocr"), ("verdict", verdict))))
            for verdict in ("verified", "failed_check", "unverified")} == {"verified": 2, "failed_check": 1,
                                                                          "unverified": 2}


def test_no_page_read_is_asked_before_an_input_while_a_dialog_holds_the_page():
    """A page with a dialog open runs no script: its input count would wait out its bound (3 s on
    every pixel action while the dialog is up), so neither read is asked, not even the tab in front."""
    import asyncio
    from types import SimpleNamespace

    from desktop.browser.pages import Pages

    class NoTab:
        async def front(self):
            raise AssertionError("the page was asked with a dialog open")

    pages = Pages.__new__(Pages)
    pages._dialogs, pages._tabs = SimpleNamespace(current=object()), NoTab()
    assert asyncio.run(pages.before_input((900, 800), "presses", 0.5)) == (None, None)


def test_a_click_on_no_element_of_the_page_is_not_counted_and_its_counter_is_taken_off(monkeypatch):
    """The count starts beside the element read; when the read finds no element (the browser's own
    frame, a read that failed), the presses are not counted and the page keeps no listener."""
    import asyncio
    from types import SimpleNamespace

    import desktop.browser.pages as pages_module
    from desktop.browser.pages import Pages
    from desktop.browser.settle import InputCount

    started, stopped = InputCount([], "presses"), []

    async def count_input(front, kind):
        return started

    async def stop_counting(count):
        stopped.append(count)

    class Front:
        async def front(self):
            return "the tab"

    monkeypatch.setattr(pages_module, "count_input", count_input)
    monkeypatch.setattr(pages_module, "stop_counting", stop_counting)
    pages = Pages.__new__(Pages)
    pages._dialogs, pages._tabs = SimpleNamespace(current=None), Front()

    async def nothing_there(x, y, front=None):
        return None

    pages.hit = nothing_there
    assert asyncio.run(pages.before_input((900, 80), "presses", 0.5)) == (None, None)
    assert stopped == [started]
    # A type has no element to find: its keys are counted.
    assert asyncio.run(pages.before_input(None, "keys", 0.5)) == (None, started)
    assert stopped == [started]
