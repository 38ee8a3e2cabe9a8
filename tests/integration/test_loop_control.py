"""Controlling the loop over HTTP on the real desktop: cancel, 409, SSE, step mode, limits, refusals."""

from __future__ import annotations

import json
import threading
import time

import httpx2
import pytest

from tests.fakes import openai_fake as oa
from tests.fakes.server import FakeServer
from tests.fakes.testpage import at

pytestmark = [pytest.mark.x11, pytest.mark.usefixtures("no_paused_run")]

SESSION = "itest"
ACT = f"/api/v1/sessions/{SESSION}/vision/act"
CANCEL = f"/api/v1/sessions/{SESSION}/vision/cancel"
WAIT = {"action": "wait", "duration_ms": 1500}


def _wait_until(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _trace_count(services) -> int:
    return len(services.store.list_traces())


def _sse(lines) -> list[tuple[str, dict]]:
    """Parse a text/event-stream into (event, data) pairs."""
    events, kind, data = [], None, []
    for line in lines:
        if line == "":
            if kind is not None or data:
                events.append((kind or "message", json.loads("\n".join(data))))
            kind, data = None, []
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
    if kind is not None or data:
        events.append((kind or "message", json.loads("\n".join(data))))
    return events


@pytest.fixture
def background_act(vision_api):
    """Start a POST vision/act in a thread (own client); returns a function giving its response."""
    threads = []

    def start(body: dict):
        box: dict = {}

        def run():
            with httpx2.Client(base_url=str(vision_api.base_url), timeout=120) as client:
                try:
                    box["response"] = client.post(ACT, json=body)
                except Exception as exc:  # surfaced by the test
                    box["error"] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)

        def result() -> httpx2.Response:
            thread.join(60)
            assert not thread.is_alive(), "the run did not return"
            if "error" in box:
                raise box["error"]
            return box["response"]
        return result

    yield start
    for thread in threads:
        thread.join(60)


# ----------------------------------------------------------------------------- cancel and 409


def test_cancel_stops_a_running_run_and_a_concurrent_act_gets_409(vision_api, desk, services, background_act):
    runner = services.runner(SESSION)
    recent = services.bus.recent()
    seen = recent[-1]["seq"] if recent else 0
    result = background_act({"instruction": "wait a lot", "model": "scripted", "script": [WAIT] * 6})
    _wait_until(lambda: runner.active and any(e["kind"] == "step" and e.get("session_id") == SESSION
                                              for e in services.bus.recent(seen)), what="the first step")

    busy = vision_api.post(ACT, json={"instruction": "another", "model": "scripted", "script": [WAIT]})
    assert busy.status_code == 409, busy.text
    assert busy.json()["error"]["code"] == "session_busy"
    assert "cancel it" in busy.json()["error"]["message"]
    # The streaming variant refuses with a real status too, before any stream starts.
    busy_sse = vision_api.post(ACT, json={"instruction": "another", "model": "scripted", "script": [WAIT]},
                               headers={"accept": "text/event-stream"})
    assert busy_sse.status_code == 409 and busy_sse.json()["error"]["code"] == "session_busy"

    cancelled = vision_api.post(CANCEL)
    assert cancelled.status_code == 200 and cancelled.json() == {"ok": True, "active": True}
    response = result()
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "cancelled" and body["error"]["code"] == "cancelled"
    assert 1 <= len(body["steps"]) < 6
    meta = services.store.meta(body["trace_id"])
    assert meta.status == "cancelled" and meta.error.code == "cancelled" and meta.finished_at is not None
    assert meta.steps == len(body["steps"])
    assert services.store.verify(body["trace_id"]).ok
    assert not runner.active and runner.state is None
    # Nothing left to cancel.
    assert vision_api.post(CANCEL).json() == {"ok": False, "active": False}


# ------------------------------------------------------------------------------------------ SSE


def test_sse_streams_one_step_event_per_step_then_the_result(vision_api, page, viewport):
    bx, by = at(viewport, 1260, 145)
    script = [{"action": "move", "x": bx, "y": by}, {"action": "click", "x": bx, "y": by},
              {"action": "done", "answer": "streamed"}]
    with vision_api.stream("POST", ACT, json={"instruction": "stream it", "model": "scripted", "script": script},
                           headers={"accept": "text/event-stream"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = _sse(r.iter_lines())

    kinds = [kind for kind, _ in events]
    assert kinds == ["step", "step", "step", "result"], kinds
    steps = [data for kind, data in events if kind == "step"]
    assert [s["index"] for s in steps] == [1, 2, 3]
    assert [a["action"] for s in steps for a in s["actions"]] == ["move", "click", "done"]
    result = events[-1][1]
    assert result["status"] == "done" and result["answer"] == "streamed"
    assert [s["index"] for s in result["steps"]] == [1, 2, 3]
    assert result["steps"][1]["executed"] == steps[1]["executed"]
    click = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (click["screenX"], click["screenY"]) == (bx, by)


# ------------------------------------------------------------------------------------ step mode


def test_step_mode_runs_one_step_per_call_and_continues_the_same_trace(vision_api, page, viewport, services):
    fx, fy = at(viewport, 300, 280)
    ex, ey = at(viewport, 1500, 282)
    script = [{"action": "click", "x": fx, "y": fy}, {"action": "click", "x": ex, "y": ey},
              {"action": "done", "answer": "stepped"}]
    first = vision_api.post(ACT, json={"instruction": "step through", "model": "scripted", "script": script,
                                       "autopilot": False})
    assert first.status_code == 200, first.text
    first = first.json()
    assert first["status"] == "running" and len(first["steps"]) == 1
    page.wait_for(lambda e: e["type"] == "click" and e["target"] == "field")
    time.sleep(0.3)
    assert not any(e["type"] == "click" and e["target"] == "email" for e in page.events)  # only one step ran
    assert services.store.meta(first["trace_id"]).status == "running"

    second = vision_api.post(ACT, json={"autopilot": False}).json()  # instruction omitted: continue
    assert second["trace_id"] == first["trace_id"]
    assert second["status"] == "running" and [s["index"] for s in second["steps"]] == [1, 2]
    click = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "email")
    assert (click["screenX"], click["screenY"]) == (ex, ey)

    third = vision_api.post(ACT, json={"autopilot": False}).json()
    assert third["trace_id"] == first["trace_id"]
    assert third["status"] == "done" and third["answer"] == "stepped" and len(third["steps"]) == 3
    meta = services.store.meta(first["trace_id"])
    assert meta.status == "done" and meta.steps == 3

    # Nothing paused any more: continuing without an instruction is refused, clearly.
    again = vision_api.post(ACT, json={"autopilot": False})
    assert again.status_code == 422 and "instruction" in again.json()["error"]["message"]


# ------------------------------------------------------------------------------------ max_steps


def test_max_steps_stops_a_longer_script(vision_api, desk, services):
    script = [{"action": "move", "x": 100 + 10 * i, "y": 900} for i in range(5)]
    r = vision_api.post(ACT, json={"instruction": "too long", "model": "scripted", "script": script, "max_steps": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "max_steps" and body["error"]["code"] == "max_steps"
    assert len(body["steps"]) == 3
    assert [s["actions"][0]["x"] for s in body["steps"]] == [100, 110, 120]
    assert services.store.meta(body["trace_id"]).status == "max_steps"


# ------------------------------------------------------------------------------ invalid requests


@pytest.mark.parametrize("body, says", [
    ({"instruction": "x", "model": "scripted", "script": [WAIT], "max_steps": 51}, "max_steps"),
    ({"instruction": "x", "model": "frobnicate/v1"}, "frobnicate"),
    ({"instruction": "x", "model": "anthropic"}, "needs a model name"),
    ({"instruction": "x", "model": "scripted"}, "script"),
    ({"instruction": "x", "model": "scripted", "script": [{"action": "click", "x": 5000, "y": 10}]}, "script[0]"),
    ({"instruction": "x", "model": "scripted", "script": [{"action": "teleport"}]}, "script[0]"),
    ({"model": "scripted", "script": [WAIT]}, "instruction"),
    ({"acknowledged_safety_checks": ["sc_1"]}, "no run on this session is waiting"),
], ids=["max_steps_51", "unknown_family", "family_without_model", "scripted_without_script", "script_x_5000",
        "script_unknown_action", "no_instruction", "ack_without_run"])
def test_invalid_request_is_422_with_a_clear_message_and_no_trace(vision_api, desk, services, body, says):
    before = _trace_count(services)
    r = vision_api.post(ACT, json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert says in error["message"], error
    assert error["code"] in ("invalid_request", "invalid_action", "model_unavailable")
    assert _trace_count(services) == before
    assert not services.runner(SESSION).active


def test_bad_script_coordinate_names_the_field_and_its_range(vision_api, desk):
    r = vision_api.post(ACT, json={"instruction": "x", "model": "scripted",
                                   "script": [WAIT, {"action": "click", "x": 5000, "y": 10}]})
    assert r.status_code == 422
    message = r.json()["error"]["message"]
    assert "script[1]" in message and "x" in message and "1919" in message, message


# ------------------------------------------------------------------- off-screen from a provider


def test_off_screen_action_from_a_provider_is_reported_back_not_executed(vision_api, page, viewport, services):
    name = "openai/gpt-5.4"
    config = services.config.models
    saved = config.get(name)
    problems: list[str] = []
    with FakeServer() as fake:
        config[name] = {"base_url": fake.url + "/v1", "api_key": "sk-test-loop-0123456789abcdefghij", "timeout": 10}

        def second(request):
            try:
                (output,) = oa.input_items(request, "computer_call_output")
                assert output["call_id"] == "call_off"  # still answered with the screen
                (note,) = oa.user_texts(request)
                assert "call_off failed" in note and "x=1920" in note and "off the screen" in note, note
            except AssertionError as exc:
                problems.append(str(exc))
            return oa.ok(oa.message("That was off the screen."))

        fake.queue(oa.ok(oa.computer_call(actions=[{"type": "click", "button": "left", "x": 1920, "y": 500}],
                                          call_id="call_off")),
                   second)
        try:
            r = vision_api.post(ACT, json={"instruction": "click past the edge", "model": name})
        finally:
            if saved is None:
                config.pop(name, None)
            else:
                config[name] = saved
    assert r.status_code == 200, r.text
    body = r.json()
    assert problems == []
    assert body["status"] == "done"
    step = body["steps"][0]
    assert step["executed"] == [] and step["error"]["code"] == "action_failed"
    assert "off the screen" in step["error"]["message"]
    time.sleep(0.3)
    assert [e for e in page.events if e["type"] in ("mousedown", "click")] == []
    trace = services.store.load(body["trace_id"])
    assert trace.steps[0].tool_calls[0].raw == {"actions": [{"type": "click", "button": "left", "x": 1920, "y": 500}]}
    assert trace.steps[0].results[0].ok is False


def test_after_a_pause_the_model_sees_the_screen_as_the_operator_left_it(services, desk, page, viewport):
    """A pause (or take-over) must not leave the model looking at the frame from before it."""
    import threading

    from desktop.actions import Click, Region
    from vision.models import ActRequest

    runner = services.runner("itest")
    seen = []
    original = runner._think
    # Only the page's status line: it changes from "ready" to "signed in" by the operator's click.
    status = Region(x0=viewport[0] + 1190, y0=viewport[1] + 350, x1=viewport[0] + 1500, y1=viewport[1] + 400)

    def spy(state):
        seen.append(state.frame)
        return original(state)

    runner._think = spy
    try:
        runner.pause("operator took over")
        result: list = []
        thread = threading.Thread(target=lambda: result.append(runner.act(ActRequest(
            instruction="after the operator", model="scripted", script=[{"action": "wait", "duration_ms": 10}]))))
        thread.start()
        before = desk.capture()
        # The operator signs in while the agent is paused.
        desk.perform(Click(x=viewport[0] + 1260, y=viewport[1] + 145))
        page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
        after = desk.capture()
        runner.resume()
        thread.join(30)
    finally:
        runner._think = original
        runner.resume()
    assert result and result[0].status == "done"
    assert before.crop_png(status) != after.crop_png(status), "the operator's click did not show"
    assert seen and seen[0].crop_png(status) == after.crop_png(status), \
        "the model was shown the screen from before the pause"


def test_cancelling_a_paused_run_keeps_the_pause_for_the_next_run(services, desk):
    """Cancel ends the run, not the operator's take-over: a new run must still wait for resume."""
    import threading

    from vision.models import ActRequest

    runner = services.runner(SESSION)
    request = ActRequest(instruction="while the operator has control", model="scripted",
                         script=[{"action": "wait", "duration_ms": 10}])
    try:
        runner.pause("operator took over")
        first: list = []
        thread = threading.Thread(target=lambda: first.append(runner.act(request)))
        thread.start()
        _wait_until(lambda: runner.active, what="the first run")
        assert runner.cancel()
        thread.join(10)
        assert first and first[0].status == "cancelled" and first[0].steps == []
        assert runner.pause_reason == "operator took over"

        second: list = []
        thread = threading.Thread(target=lambda: second.append(runner.act(request)))
        thread.start()
        _wait_until(lambda: runner.active, what="the second run")
        time.sleep(0.5)
        assert not second and runner.state is not None and runner.state.steps == [], \
            "a run went ahead while the operator still had control"
        runner.resume()
        thread.join(30)
        assert second and second[0].status == "done"
    finally:
        runner.resume()


def test_deleting_the_session_ends_its_paused_run(services, manager):
    """A run paused on a session that is then deleted must end (cancelled), not wait forever."""
    import threading

    from vision.models import ActRequest

    session = manager.create("itest-gone")
    try:
        runner = services.runner(session.id)
        runner.pause("operator took over")
        result: list = []
        thread = threading.Thread(target=lambda: result.append(runner.act(ActRequest(
            instruction="never runs", model="scripted", script=[{"action": "wait", "duration_ms": 10}]))))
        thread.start()
        _wait_until(lambda: runner.active and runner.state is not None, what="the paused run")
        trace_id = runner.state.trace.trace_id
    finally:
        manager.delete(session.id)
    thread.join(10)
    assert not thread.is_alive(), "the paused run outlived its session"
    assert result and result[0].status == "cancelled"
    assert services.store.load(trace_id).meta.status == "cancelled"


def test_a_failure_outside_the_normal_stops_still_ends_the_trace(services, desk):
    """An unexpected error mid-run (here: the desktop cannot be captured) must not leave the
    trace 'running' or the runner holding a dead run."""
    from desktop.errors import ScreenshotFailed
    from vision.models import ActRequest

    runner = services.runner("itest")
    original = runner._act

    def broken(*args, **kwargs):
        raise ScreenshotFailed("could not capture display: simulated")

    runner._act = broken
    try:
        with pytest.raises(ScreenshotFailed):
            runner.act(ActRequest(instruction="break mid-run", model="scripted",
                                  script=[{"action": "wait", "duration_ms": 1}]))
    finally:
        runner._act = original
    assert runner.state is None
    meta = services.store.list_traces(limit=1)[0]
    assert meta.instruction == "break mid-run" and meta.status == "failed"
    assert meta.error.code == "screenshot_failed"


def test_a_stream_whose_client_goes_away_is_cancelled_within_two_seconds(vision_api, services, no_paused_run):
    runner = services.runner(SESSION)
    script = [{"action": "wait", "duration_ms": 300}] * 40
    with httpx2.Client(base_url=str(vision_api.base_url), timeout=60) as client:
        with client.stream("POST", ACT, json={"instruction": "wait long", "model": "scripted", "script": script},
                           headers={"accept": "text/event-stream"}) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("event: step"):
                    break  # the run is going: now leave without reading the rest
    gone = time.monotonic()
    _wait_until(lambda: not runner.active, timeout=10, what="the run to stop after the client left")
    assert time.monotonic() - gone < 2.0
    trace = services.store.list_traces(limit=1)[0]
    assert trace.status == "cancelled" and trace.steps < 40
