"""The vision loop (vision.run.loop.Runner) against FakeDesktop and FunctionProvider: no X display.

Each test scripts the model turn by turn, runs the loop on a fake desktop, and checks what the
desktop performed, what the caller got back, what the trace on disk says (and that it verifies),
and what was published on the event bus. Threads are coordinated with threading.Event, never with
long sleeps.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable

import pytest
from PIL import Image

from desktop.actions import Click, Key, Move, Type, Zoom
from desktop.errors import ActionFailedError, GlassdeskError, SessionBusy
from tests.fakes.desktop import FakeDesktop, solid_frame
from vision.actions import CursorPosition, Done, Fail, SafetyCheck, Screenshot, ToolCall
from vision.config import VisionConfig
from vision.errors import InvalidRequest
from vision.models import ActRequest, StepSummary
from vision.providers.base import (
    ModelCallError,
    ModelTurn,
    Usage,
)
from vision.providers.function import Context, FunctionProvider, calls
from vision.run import loop as loop_module
from vision.run.events import EventBus
from vision.run.loop import Runner
from vision.trace.store import TraceStore

SECRET = "hunter2-secret"

Step = ModelTurn | BaseException | Callable[[Context], ModelTurn]


# ------------------------------------------------------------------------------------------ helpers


def script(*steps: Step) -> FunctionProvider:
    """A provider that plays ``steps`` in order (the last one repeats): a ModelTurn to return, an
    exception to raise, or a function of the Context. Every Context seen is kept in ``.contexts``."""
    contexts: list[Context] = []

    def turn(ctx: Context) -> ModelTurn:
        contexts.append(ctx)
        step = steps[min(ctx.turn, len(steps)) - 1]
        if isinstance(step, BaseException):
            raise step
        if not isinstance(step, ModelTurn):
            step = step(ctx)
        return step

    provider = FunctionProvider(turn)
    provider.contexts = contexts  # type: ignore[attr-defined]
    return provider


def done(answer: str = "finished") -> ModelTurn:
    return calls(Done(answer=answer))


def kinds(bus: EventBus) -> list[str]:
    return [e["kind"] for e in bus.recent()]


def first_pixel(frame) -> bytes:
    return bytes(frame.bgra[:4])


@pytest.fixture
def desktop() -> FakeDesktop:
    return FakeDesktop()


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
def runner(desktop, store, bus) -> Runner:
    runner = Runner(desktop, store, VisionConfig(), bus)
    yield runner
    runner.resume()  # a test that paused must not leave a timer thread or a waiting loop behind
    if runner.state is not None and not runner.active:
        runner.cancel()


def assert_trace(store: TraceStore, trace_id: str, status: str, steps: int):
    meta = store.meta(trace_id)
    assert meta.status == status
    assert meta.steps == steps
    check = store.verify(trace_id)
    assert check.ok, check.reason
    assert check.steps_checked == steps
    return store.load(trace_id)


# ----------------------------------------------------------------------------------- 1. a normal run


def test_three_clicks_then_done(runner, desktop, store, bus):
    seen: list[StepSummary] = []
    provider = script(
        calls(Click(x=10, y=20), text="first"),
        calls(Click(x=30, y=40), text="second"),
        calls(Click(x=50, y=60), Done(answer="all clicked"), text="third"),
    )
    result = runner.act(ActRequest(instruction="click three times"), on_step=seen.append, provider=provider)

    assert result.status == "done"
    assert result.answer == "all clicked"
    assert result.error is None
    assert [s.index for s in result.steps] == [1, 2, 3]
    assert desktop.performed == [Click(x=10, y=20), Click(x=30, y=40), Click(x=50, y=60)]
    assert [s.index for s in seen] == [1, 2, 3]
    assert [s.text for s in seen] == ["first", "second", "third"]
    assert provider.turns == 3
    # Each step's settled screen is the next observation: the model saw the frame after its click,
    # and the loop captured only at the start and for the final screenshot, never per step.
    assert first_pixel(provider.contexts[1].observation.frame) == first_pixel(solid_frame(1))
    assert first_pixel(provider.contexts[2].observation.frame) == first_pixel(solid_frame(2))
    assert [r.ok for r in provider.contexts[1].results] == [True]
    assert desktop.captures == 2
    assert result.final_screenshot and result.report_path

    trace = assert_trace(store, result.trace_id, "done", 3)
    assert trace.meta.answer == "all clicked"
    assert trace.meta.finished_at is not None
    assert [s.actions[0] for s in trace.steps] == [{"action": "click", "x": 10, "y": 20, "modifiers": [],
                                                   "button": "left"},
                                                  {"action": "click", "x": 30, "y": 40, "modifiers": [],
                                                   "button": "left"},
                                                  {"action": "click", "x": 50, "y": 60, "modifiers": [],
                                                   "button": "left"}]
    assert all(s.argv and s.argv[0][:2] == ["fake", "click"] for s in trace.steps)
    assert trace.steps[1].before_png == trace.steps[0].after_png  # one capture per step, stored once
    assert not desktop.busy and runner.state is None

    events = kinds(bus)
    assert events[0] == "run_started" and events[-1] == "run_finished"
    assert events.count("step") == 3
    finished = bus.recent()[-1]
    assert finished["status"] == "done" and finished["steps"] == 3 and finished["trace_id"] == result.trace_id


# ---------------------------------------------------------------------------------- 2. step mode


def test_step_mode_one_turn_per_call_and_continue(runner, desktop, store):
    provider = script(calls(Click(x=1, y=1)), calls(Key(keys=["Return"])), done("stepped"))

    first = runner.act(ActRequest(instruction="step through", autopilot=False), provider=provider)
    assert first.status == "running"
    assert provider.turns == 1 and len(first.steps) == 1
    assert desktop.performed == [Click(x=1, y=1)]
    assert store.meta(first.trace_id).status == "running"
    assert runner.state is not None and not runner.active and not desktop.busy

    # No instruction: continue the same run; the results of step 1 reach the model.
    second = runner.act(ActRequest(autopilot=False))
    assert second.trace_id == first.trace_id
    assert second.status == "running"
    assert provider.turns == 2 and [s.index for s in second.steps] == [1, 2]
    assert desktop.performed == [Click(x=1, y=1), Key(keys=["Return"])]
    assert [(r.call_id, r.ok) for r in provider.contexts[1].results] == [("call-1", True)]

    # The same instruction again also continues.
    third = runner.act(ActRequest(instruction="step through", autopilot=False))
    assert third.trace_id == first.trace_id
    assert third.status == "done" and third.answer == "stepped"
    assert provider.turns == 3
    assert runner.state is None
    assert_trace(store, first.trace_id, "done", 3)


def test_step_mode_new_instruction_replaces_the_paused_run(runner, desktop, store):
    old = runner.act(ActRequest(instruction="first task", autopilot=False),
                     provider=script(calls(Click(x=1, y=1))))
    assert old.status == "running"

    fresh = script(done("second done"))
    new = runner.act(ActRequest(instruction="second task"), provider=fresh)
    assert new.trace_id != old.trace_id
    assert new.status == "done" and fresh.turns == 1
    meta = store.meta(old.trace_id)
    assert meta.status == "cancelled"
    assert meta.error is not None and meta.error.code == "cancelled"
    assert "replaced" in meta.error.message
    assert store.verify(old.trace_id).ok


def test_cancel_a_run_paused_between_calls(runner, store, bus):
    assert runner.cancel() is False  # nothing to stop
    paused = runner.act(ActRequest(instruction="step", autopilot=False), provider=script(calls(Click(x=1, y=1))))
    assert runner.cancel() is True
    assert runner.state is None
    assert_trace(store, paused.trace_id, "cancelled", 1)
    assert bus.recent()[-1]["kind"] == "run_finished" and bus.recent()[-1]["status"] == "cancelled"
    with pytest.raises(InvalidRequest):  # nothing left to continue
        runner.act(ActRequest(autopilot=False))


# ---------------------------------------------------------------------------- 3. safety checks


def held_turn(*checks: SafetyCheck) -> ModelTurn:
    turn = calls(Click(x=5, y=5), text="about to pay")
    turn.safety_checks = list(checks)
    return turn


CHECK = SafetyCheck(id="sc-1", code="malicious_instructions", message="the page asks to wire money")


def test_safety_check_holds_the_turn_until_acknowledged(runner, desktop, store, bus):
    provider = script(held_turn(CHECK), done("paid"))

    held = runner.act(ActRequest(instruction="pay the bill"), provider=provider)
    assert held.status == "needs_confirmation"
    assert [(c.id, c.code, c.message) for c in held.pending_safety_checks] == [
        ("sc-1", "malicious_instructions", "the page asks to wire money")]
    assert desktop.performed == []
    assert provider.acknowledged == []
    assert store.meta(held.trace_id).status == "needs_confirmation"
    assert held.steps[-1].error["code"] == "needs_confirmation"
    assert "needs_confirmation" in kinds(bus)
    assert not desktop.busy and not runner.active

    result = runner.act(ActRequest(acknowledged_safety_checks=["sc-1"]))
    assert provider.acknowledged == ["sc-1"]
    assert desktop.performed == [Click(x=5, y=5)]  # the held turn ran, as the model made it
    assert result.trace_id == held.trace_id
    assert result.status == "done" and result.answer == "paid"
    assert result.pending_safety_checks == []
    assert provider.turns == 2
    assert "acknowledged" in kinds(bus)
    assert_trace(store, held.trace_id, "done", len(result.steps))


def test_acknowledging_an_unknown_check_is_invalid_and_changes_nothing(runner, desktop, store, bus):
    other = SafetyCheck(id="sc-2", code="irrelevant_domain", message="not the site you meant")
    provider = script(held_turn(CHECK, other), done())
    held = runner.act(ActRequest(instruction="pay the bill"), provider=provider)
    state, events = runner.state, len(bus.recent())

    for acks in (["sc-9"], ["sc-1", "sc-9"], ["sc-1"]):  # unknown, unknown among known, not all
        with pytest.raises(InvalidRequest) as raised:
            runner.act(ActRequest(acknowledged_safety_checks=acks))
        assert raised.value.code == "invalid_request"

    assert runner.state is state and state.pending is not None
    assert provider.acknowledged == [] and provider.turns == 1
    assert desktop.performed == []
    assert store.meta(held.trace_id).status == "needs_confirmation"
    assert len(bus.recent()) == events
    assert not desktop.busy and not runner.active

    result = runner.act(ActRequest(acknowledged_safety_checks=["sc-2", "sc-1"]))
    assert result.status == "done"
    assert sorted(provider.acknowledged) == ["sc-1", "sc-2"]


def test_acknowledging_with_no_pending_run_is_invalid(runner, store):
    with pytest.raises(InvalidRequest) as raised:
        runner.act(ActRequest(instruction="x", acknowledged_safety_checks=["sc-1"]), provider=script(done()))
    assert raised.value.code == "invalid_request"
    assert store.list_traces() == []


def test_new_instruction_instead_of_approval_cancels_the_held_run(runner, desktop, store):
    provider = script(held_turn(CHECK))
    held = runner.act(ActRequest(instruction="pay the bill"), provider=provider)

    fresh = script(done("did something else"))
    result = runner.act(ActRequest(instruction="do something else"), provider=fresh)
    assert result.trace_id != held.trace_id and result.status == "done"
    assert desktop.performed == []  # the held click never ran
    assert provider.acknowledged == []
    meta = store.meta(held.trace_id)
    assert meta.status == "cancelled"
    assert meta.error.code == "cancelled" and "did not approve" in meta.error.message
    assert store.verify(held.trace_id).ok


# ------------------------------------------------------------------------------- 4. parse retry


def test_one_parse_failure_gets_a_note_and_the_run_goes_on(runner, store):
    def second(ctx: Context) -> ModelTurn:
        assert ctx.note is not None
        assert "could not be understood" in ctx.note and "expected JSON, got prose" in ctx.note
        return done("understood")

    provider = script(ModelTurn(parse_error="expected JSON, got prose", text="I think I will click"), second,
                      lambda ctx: pytest.fail("no third turn"))
    result = runner.act(ActRequest(instruction="parse"), provider=provider)
    assert result.status == "done" and result.answer == "understood"
    assert provider.turns == 2
    assert provider.contexts[0].note is None
    trace = assert_trace(store, result.trace_id, "done", 2)
    assert trace.steps[0].error.code == "model_parse_failed"


def test_two_parse_failures_fail_the_run(runner, desktop, store):
    provider = script(ModelTurn(parse_error="garbage 1"), ModelTurn(parse_error="garbage 2"))
    result = runner.act(ActRequest(instruction="parse"), provider=provider)
    assert result.status == "failed"
    assert result.error["code"] == "model_parse_failed"
    assert "garbage 2" in result.error["message"]
    assert provider.turns == 2 and desktop.performed == []
    trace = assert_trace(store, result.trace_id, "failed", 2)
    assert trace.meta.error.code == "model_parse_failed"


# ------------------------------------------------------------------------------------ 5. budgets


def test_max_steps_stops_after_exactly_n_steps(runner, desktop, store):
    provider = script(calls(Click(x=7, y=7)))
    result = runner.act(ActRequest(instruction="never done", max_steps=3), provider=provider)
    assert result.status == "max_steps"
    assert result.error["code"] == "max_steps"
    assert len(result.steps) == 3 and provider.turns == 3
    assert len(desktop.performed) == 3
    assert_trace(store, result.trace_id, "max_steps", 3)


def test_budget_tokens_counts_every_turn(runner, desktop, store):
    def expensive(ctx: Context) -> ModelTurn:
        turn = calls(Click(x=ctx.turn, y=1))
        turn.usage = Usage(input_tokens=80, output_tokens=30)
        return turn

    result = runner.act(ActRequest(instruction="spend", budget_tokens=150), provider=script(expensive))
    assert result.status == "budget_exceeded"  # 110 < 150 after step 1, 220 after step 2
    assert result.error["code"] == "budget_exceeded"
    assert len(result.steps) == 2 and len(desktop.performed) == 2
    assert result.usage.input_tokens == 160 and result.usage.output_tokens == 60
    trace = assert_trace(store, result.trace_id, "budget_exceeded", 2)
    assert trace.meta.usage.input_tokens == 160


def test_budget_seconds_stops_a_slow_run(runner, store):
    def slow(ctx: Context) -> ModelTurn:
        time.sleep(0.12)
        return calls(Click(x=1, y=ctx.turn))

    start = time.monotonic()
    result = runner.act(ActRequest(instruction="slow", budget_seconds=0.3, max_steps=20), provider=script(slow))
    assert result.status == "budget_exceeded"
    assert result.error["code"] == "budget_exceeded"
    assert 1 <= len(result.steps) < 20
    assert time.monotonic() - start < 3
    assert_trace(store, result.trace_id, "budget_exceeded", len(result.steps))


# ------------------------------------------------------------------------------------- 6. cancel


def test_cancel_from_another_thread_while_paused(runner, desktop, store, bus):
    cancelled: list[bool] = []

    def pause_then_cancel(action) -> None:
        runner.pause("operator takes over")
        # Later than one 0.2 s poll of the paused loop: the cancel lands while it waits.
        timer = threading.Timer(0.25, lambda: cancelled.append(runner.cancel()))
        timer.daemon = True
        timer.start()

    desktop.during_perform = pause_then_cancel
    provider = script(calls(Click(x=1, y=1)), lambda ctx: pytest.fail("the model must not be asked while paused"))
    start = time.monotonic()
    result = runner.act(ActRequest(instruction="work"), provider=provider)

    assert result.status == "cancelled"
    assert result.error["code"] == "cancelled"
    assert cancelled == [True]
    assert provider.turns == 1 and len(result.steps) == 1
    assert time.monotonic() - start < 2
    assert_trace(store, result.trace_id, "cancelled", 1)
    assert "paused" in kinds(bus) and "resumed" not in kinds(bus)
    assert runner.state is None and not desktop.busy


def test_cancel_during_model_retry_backoff(runner, store, bus):
    failing = threading.Event()

    def rate_limited(ctx: Context) -> ModelTurn:
        failing.set()
        raise ModelCallError("429 slow down", transient=True, retry_after=30, status=429)

    outcome: dict = {}
    worker = threading.Thread(
        target=lambda: outcome.update(result=runner.act(ActRequest(instruction="x"), provider=script(rate_limited))),
        daemon=True)
    start = time.monotonic()
    worker.start()
    assert failing.wait(5)
    assert runner.cancel() is True
    worker.join(5)
    assert not worker.is_alive()

    result = outcome["result"]
    assert result.status == "cancelled" and result.error["code"] == "cancelled"
    assert time.monotonic() - start < 5  # not the 30 s Retry-After
    retrying = [e for e in bus.recent() if e["kind"] == "retrying"]
    assert len(retrying) == 1 and retrying[0]["wait_s"] == 30
    assert_trace(store, result.trace_id, "cancelled", 0)


# ------------------------------------------------------------------------------- 7. pause/resume


def test_pause_and_resume_mid_run(runner, desktop, store, bus):
    def pause_briefly(action) -> None:
        if action == Click(x=1, y=1):
            runner.pause("look at this")
            timer = threading.Timer(0.05, runner.resume)
            timer.daemon = True
            timer.start()

    desktop.during_perform = pause_briefly
    provider = script(calls(Click(x=1, y=1)), calls(Click(x=2, y=2)), done("resumed fine"))
    result = runner.act(ActRequest(instruction="work"), provider=provider)

    assert result.status == "done" and result.answer == "resumed fine"
    assert desktop.performed == [Click(x=1, y=1), Click(x=2, y=2)]
    events = kinds(bus)
    assert events.index("paused") < events.index("resumed") < events.index("run_finished")
    paused = next(e for e in bus.recent() if e["kind"] == "paused")
    assert paused["reason"] == "look at this" and paused["session_id"] == desktop.id
    assert_trace(store, result.trace_id, "done", 3)


def test_after_a_pause_the_model_sees_the_screen_as_the_operator_left_it(runner, desktop):
    """The loop's checkpoint promises to look again after a pause: the operator may have changed
    the screen. A short pause must count as a pause too."""
    operator_done = threading.Event()

    def operator(summary: StepSummary) -> None:
        if summary.index != 1:
            return
        runner.pause("operator takes over")

        def work_and_hand_back() -> None:
            with desktop._lock:
                desktop._shade += 10  # the operator changes the screen
            runner.resume()
            operator_done.set()

        timer = threading.Timer(0.05, work_and_hand_back)
        timer.daemon = True
        timer.start()

    def second(ctx: Context) -> ModelTurn:
        assert operator_done.is_set()
        return done()

    provider = script(calls(Click(x=1, y=1)), second)
    result = runner.act(ActRequest(instruction="work"), on_step=operator, provider=provider)
    assert result.status == "done"
    assert first_pixel(provider.contexts[1].observation.frame) == first_pixel(solid_frame(11))


# ----------------------------------------------------------------------------------- 8. secrets


def test_secrets_are_typed_but_never_leave_the_process(runner, desktop, store, bus):
    summaries: list[StepSummary] = []
    provider = script(calls(Click(x=3, y=3), Type(text="pw: {{pw}}!"), Key(keys=["Return"])), done("logged in"))
    result = runner.act(ActRequest(instruction="log in", secrets={"pw": SECRET}), on_step=summaries.append,
                        provider=provider)

    assert result.status == "done"
    assert desktop.performed[1] == Type(text=f"pw: {SECRET}!")  # the desktop typed the real value
    # ...but nothing that leaves the loop carries it: the response, the trace, the events.
    assert SECRET not in result.model_dump_json()
    assert all(SECRET not in s.model_dump_json() for s in summaries)
    trace_dir = store.trace_dir(result.trace_id)
    files = [p for p in trace_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"meta.json", "steps.jsonl", "report.html"}
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path.name
    assert SECRET not in json.dumps(bus.recent(), default=str)
    for ctx in provider.contexts:  # nor does the model ever see it
        assert all(SECRET not in (r.error or "") + (r.output or "") for r in ctx.results)

    trace = assert_trace(store, result.trace_id, "done", 2)
    assert trace.steps[0].actions[1] == {"action": "type", "text": "pw: {{pw}}!"}  # what the model wrote
    assert any("[REDACTED]" in arg for argv in trace.steps[0].argv for arg in argv)


def test_unknown_placeholder_is_an_error_for_the_model(runner, desktop, store):
    def check(ctx: Context) -> ModelTurn:
        [result] = ctx.results
        assert not result.ok
        assert "invalid_request" in result.error and "{{nope}}" in result.error and "pw" in result.error
        return done("corrected")

    provider = script(calls(Type(text="{{nope}}")), check)
    result = runner.act(ActRequest(instruction="log in", secrets={"pw": SECRET}), provider=provider)
    # The model said done without typing anything after the refusal: not a success it had.
    assert result.status == "failed" and result.error["code"] == "last_step_failed"
    assert desktop.performed == []
    trace = assert_trace(store, result.trace_id, "failed", 2)
    assert trace.steps[0].error.code == "action_failed"
    assert trace.steps[0].results[0].ok is False


# ---------------------------------------------------------------------------------- 9. model errors


def test_model_error_mid_run_fails_the_run_with_a_finished_trace(runner, desktop, store, bus):
    provider = script(calls(Click(x=1, y=1)), ModelCallError("400 bad request", status=400))
    result = runner.act(ActRequest(instruction="x"), provider=provider)
    assert result.status == "failed"
    assert result.error["code"] == "model_call_failed"
    assert "400 bad request" in result.error["message"]
    assert provider.turns == 2  # not retried
    assert "retrying" not in kinds(bus)
    trace = assert_trace(store, result.trace_id, "failed", 1)
    assert trace.meta.error.code == "model_call_failed" and trace.meta.finished_at is not None
    assert runner.state is None


def test_transient_model_errors_are_retried(runner, store, bus, monkeypatch):
    waits: list[tuple[int, float | None]] = []
    real_backoff = loop_module.backoff_s

    def no_wait(attempt: int, retry_after: float | None) -> float:
        waits.append((attempt, retry_after))
        return real_backoff(attempt, 0.0)

    monkeypatch.setattr(loop_module, "backoff_s", no_wait)

    def after_retries(ctx: Context) -> ModelTurn:
        # The results of step 1 were not lost to the failed attempts.
        assert [(r.call_id, r.ok) for r in ctx.results] == [("call-1", True)]
        return done("after retries")

    provider = script(
        calls(Click(x=1, y=1)),
        ModelCallError("429", transient=True, retry_after=0, status=429),
        ModelCallError("503", transient=True, status=503),
        after_retries,
    )
    result = runner.act(ActRequest(instruction="x"), provider=provider)
    assert result.status == "done" and result.answer == "after retries"
    assert provider.turns == 4
    assert waits == [(1, 0), (2, None)]
    retrying = [e for e in bus.recent() if e["kind"] == "retrying"]
    assert [e["attempt"] for e in retrying] == [1, 2]
    assert_trace(store, result.trace_id, "done", 2)


def test_transient_errors_give_up_after_the_retries(runner, store, monkeypatch):
    monkeypatch.setattr(loop_module, "MODEL_RETRIES", 2)
    provider = script(lambda ctx: (_ for _ in ()).throw(ModelCallError("overloaded", transient=True, retry_after=0)))
    result = runner.act(ActRequest(instruction="x"), provider=provider)
    assert result.status == "failed"
    assert result.error["code"] == "model_call_failed"
    assert "after 3 attempts" in result.error["message"]
    assert provider.turns == 3
    assert_trace(store, result.trace_id, "failed", 0)


def test_a_provider_bug_fails_the_run_cleanly(runner, store):
    provider = script(KeyError("choices"))
    result = runner.act(ActRequest(instruction="x"), provider=provider)
    assert result.status == "failed" and result.error["code"] == "model_call_failed"
    assert_trace(store, result.trace_id, "failed", 0)


# ------------------------------------------------------------------------------- 10. failing actions


@pytest.mark.parametrize("error, code", [
    (ActionFailedError("xdotool exited 1"), "action_failed"),
    (ActionFailedError("xdotool exited 1: BadWindow"), "action_failed"),
])
def test_a_failed_action_is_reported_to_the_model_and_the_run_goes_on(runner, desktop, store, error, code):
    def check(ctx: Context) -> ModelTurn:
        assert [(r.call_id, r.ok) for r in ctx.results] == [("c1", False), ("c2", True)]
        assert ctx.results[0].error == f"{code}: {error.message}"
        return calls(Click(x=9, y=9))

    desktop.fail_next = error
    failing_call = ToolCall(id="c1", name="computer", raw={}, actions=[Click(x=1, y=1), Type(text="skipped")])
    fine_call = ToolCall(id="c2", name="computer", raw={}, actions=[Click(x=2, y=2)])
    provider = script(ModelTurn(calls=[failing_call, fine_call]), check, done())
    result = runner.act(ActRequest(instruction="x"), provider=provider)

    assert result.status == "done"
    # The rest of the failing call was skipped; the next call and the next turn ran.
    assert desktop.performed == [Click(x=2, y=2), Click(x=9, y=9)]
    assert result.steps[0].error["code"] == "action_failed"
    assert code in result.steps[0].error["message"]
    trace = assert_trace(store, result.trace_id, "done", 3)
    assert [r.ok for r in trace.steps[0].results] == [False, True]


def test_a_call_the_provider_could_not_convert_is_reported_and_not_run(runner, desktop):
    def check(ctx: Context) -> ModelTurn:
        assert [(r.call_id, r.ok, r.error) for r in ctx.results] == [("bad", False, "coordinate off screen")]
        return done()

    bad = ToolCall(id="bad", name="computer", raw={"coordinate": [5000, 5000]}, actions=[Click(x=1, y=1)],
                   error="coordinate off screen")
    result = runner.act(ActRequest(instruction="x"), provider=script(ModelTurn(calls=[bad]), check))
    assert result.status == "failed" and result.error["code"] == "last_step_failed"
    assert desktop.performed == []


# -------------------------------------------------------------------------------- 11. model gives up


def test_model_fail_ends_the_run_as_failed(runner, desktop, store, bus):
    provider = script(calls(Click(x=1, y=1)), calls(Fail(reason="the site is down")),
                      lambda ctx: pytest.fail("no turn after Fail"))
    result = runner.act(ActRequest(instruction="x"), provider=provider)
    assert result.status == "failed"
    assert result.error == {"code": "model_gave_up", "message": "the site is down"}
    assert result.answer is None
    assert provider.turns == 2
    trace = assert_trace(store, result.trace_id, "failed", 2)
    assert trace.meta.error.code == "model_gave_up"
    assert bus.recent()[-1]["status"] == "failed"


# ------------------------------------------------------------------------ 12. non-input actions


def test_zoom_cursor_and_screenshot_perform_no_input(runner, desktop, store):
    desktop.pointer = (12, 34)

    def check(ctx: Context) -> ModelTurn:
        zoom, cursor, shot = ctx.results
        assert zoom.ok and zoom.image_png is not None
        image = Image.open(io.BytesIO(zoom.image_png))
        assert image.format == "PNG" and image.size == (200, 100)
        assert cursor.ok and cursor.output == "X=12,Y=34"
        assert shot.ok and shot.output is None and shot.image_png is None
        return done()

    provider = script(calls(Zoom(region=[0, 0, 100, 50], scale=2.0), CursorPosition(), Screenshot()), check)
    result = runner.act(ActRequest(instruction="look closely"), provider=provider)
    assert result.status == "done"
    assert desktop.performed == []
    assert result.steps[0].executed == []
    trace = assert_trace(store, result.trace_id, "done", 2)
    assert [r.output for r in trace.steps[0].results] == [None, "X=12,Y=34", None]


# ---------------------------------------------------------------------------- 13. one run at a time


def test_a_second_act_while_running_is_session_busy(runner, desktop, store):
    refused: list[BaseException] = []

    def second_caller(action) -> None:
        def call() -> None:
            try:
                runner.act(ActRequest(instruction="intruder"), provider=script(done()))
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                refused.append(exc)

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        thread.join(5)
        assert desktop.busy  # the refusal did not touch the running run's flag

    desktop.during_perform = second_caller
    result = runner.act(ActRequest(instruction="first"), provider=script(calls(Click(x=1, y=1)), done("mine")))

    assert len(refused) == 1 and isinstance(refused[0], SessionBusy)
    assert refused[0].code == "session_busy"
    assert result.status == "done" and result.answer == "mine"
    assert [m.trace_id for m in store.list_traces()] == [result.trace_id]


# ------------------------------------------------------------------------------- 14. desktop.busy


def test_desktop_is_busy_only_while_a_run_drives_it(runner, desktop):
    seen: list[bool] = []
    desktop.during_perform = lambda action: seen.append(desktop.busy)

    def turn(ctx: Context) -> ModelTurn:
        seen.append(desktop.busy)
        return calls(Click(x=1, y=1)) if ctx.turn == 1 else done()

    assert desktop.busy is False
    result = runner.act(ActRequest(instruction="x"), provider=script(turn))
    assert result.status == "done"
    assert seen == [True, True, True]
    assert desktop.busy is False and not runner.active

    with pytest.raises(InvalidRequest):  # a refused call leaves it free too
        runner.act(ActRequest())
    assert desktop.busy is False and not runner.active


def test_an_unexpected_error_still_closes_the_trace(runner, desktop, store):
    def boom(action) -> None:
        raise RuntimeError("kaboom")

    desktop.during_perform = boom
    with pytest.raises(RuntimeError, match="kaboom"):
        runner.act(ActRequest(instruction="x"), provider=script(calls(Click(x=1, y=1))))

    assert desktop.busy is False and not runner.active and runner.state is None
    [meta] = store.list_traces()
    assert meta.status == "failed" and meta.error.code == "internal_error"
    assert "kaboom" in meta.error.message
    assert store.verify(meta.trace_id).ok

    desktop.during_perform = None  # the runner is usable again
    assert runner.act(ActRequest(instruction="again"), provider=script(done())).status == "done"


def test_nothing_after_done_runs_even_in_the_same_call(tmp_path):
    from desktop.actions import Click
    from vision.actions import Done, ToolCall
    from vision.providers.base import ModelTurn

    desktop = FakeDesktop()
    turn = ModelTurn(calls=[ToolCall(id="c1", name="batch", raw={}, actions=[Done(answer="ok"), Click(x=5, y=5)])])
    provider = FunctionProvider(lambda ctx: turn)
    result = Runner(desktop, TraceStore(tmp_path), VisionConfig(), EventBus()).act(
        ActRequest(instruction="stop at once"), provider=provider)
    assert result.status == "done" and result.answer == "ok"
    assert desktop.performed == []


# ------------------------------------------------------------------------------ pause kinds, take-over


def test_handing_back_a_takeover_leaves_an_operators_pause_in_force(runner, desktop):
    runner.pause("wait for me")
    runner.pause("operator took over", kind="takeover")
    assert runner.pause_reason == "operator took over"
    runner.resume(kind="takeover")
    assert runner.pause_reason == "wait for me"  # the operator's own pause outlives the take-over
    result = runner.act(ActRequest(instruction="work"), provider=script(calls(Click(x=1, y=1)), done()),
                        paused_return_s=0.3)
    assert result.status == "paused" and desktop.performed == []
    assert "wait for me" in result.note and "resume" in result.note
    runner.resume()
    assert runner.pause_reason is None
    finished = runner.act(ActRequest(), provider=None)  # no instruction: the paused run goes on
    assert finished.status == "done" and finished.trace_id == result.trace_id
    assert desktop.performed == [Click(x=1, y=1)]


def test_a_blocking_call_on_a_paused_run_returns_saying_so(runner, desktop, bus):
    def pause_after_first(summary: StepSummary) -> None:
        if summary.index == 1:
            runner.pause("operator took over", kind="takeover")

    provider = script(calls(Click(x=1, y=1)), calls(Click(x=2, y=2)), done())
    started = time.monotonic()
    result = runner.act(ActRequest(instruction="work"), pause_after_first, provider=provider, paused_return_s=0.4)
    assert time.monotonic() - started < 5
    assert result.status == "paused" and len(result.steps) == 1 and not runner.active
    view = runner.view()
    assert view.status == "paused" and view.pause_reason == "operator took over" and not view.active
    assert not desktop.busy  # a paused run that returned holds nobody off the desktop


def test_paused_time_does_not_count_against_the_time_budget(runner, desktop):
    def pause_for_a_while(summary: StepSummary) -> None:
        if summary.index == 1:
            runner.pause("operator took over", kind="takeover")
            timer = threading.Timer(0.8, lambda: runner.resume(kind="takeover"))
            timer.daemon = True
            timer.start()

    provider = script(calls(Click(x=1, y=1)), calls(Click(x=2, y=2)), done())
    result = runner.act(ActRequest(instruction="work", budget_seconds=0.5), pause_for_a_while, provider=provider,
                        paused_return_s=None)
    assert result.status == "done", result.error  # 0.8 s paused against a 0.5 s budget: not exceeded
    assert runner.state is None and len(result.steps) == 3


def test_cancelling_a_run_waiting_between_calls_ends_it_once(runner, desktop, store):
    first = runner.act(ActRequest(instruction="step", autopilot=False), provider=script(calls(Click(x=1, y=1))))
    assert first.status == "running"
    barrier = threading.Barrier(4)
    outcomes: list[bool] = []

    def cancel() -> None:
        barrier.wait()
        outcomes.append(runner.cancel())

    threads = [threading.Thread(target=cancel) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(outcomes) == [False, False, False, True]  # ended exactly once, under the runner lock
    assert store.meta(first.trace_id).status == "cancelled"


def test_a_run_continued_after_a_paused_return_looks_at_the_screen_again(runner, desktop):
    seen: list[bytes] = []

    def look(ctx: Context) -> ModelTurn:
        seen.append(first_pixel(ctx.observation.frame))
        return done()

    runner.pause("operator took over", kind="takeover")
    paused = runner.act(ActRequest(instruction="work"), provider=FunctionProvider(look), paused_return_s=0.2)
    assert paused.status == "paused" and seen == []
    desktop._shade = 50  # the person changed the screen while holding it
    runner.resume(kind="takeover")
    finished = runner.act(ActRequest(instruction="work"))
    assert finished.status == "done" and seen == [first_pixel(solid_frame(50))]


def test_a_cancel_during_a_model_turn_that_raises_safety_checks_still_cancels(runner, desktop, store):
    def turn(ctx: Context) -> ModelTurn:
        runner.cancel()  # arrives while the model is thinking
        held = calls(Click(x=1, y=1))
        held.safety_checks = [SafetyCheck(id="sc1", code="malicious_instructions", message="check it")]
        return held

    result = runner.act(ActRequest(instruction="work"), provider=FunctionProvider(turn))
    assert result.status == "cancelled" and runner.state is None
    assert desktop.performed == [] and store.meta(result.trace_id).status == "cancelled"


# ------------------------------------------------------------------------------ runs tell the truth


def test_done_after_a_failed_last_step_is_a_failed_run(runner, desktop, store):
    desktop.fail_next = ActionFailedError("xdotool exited 1")
    provider = script(calls(Click(x=1, y=1)), done("all good, trust me"))
    result = runner.act(ActRequest(instruction="x"), provider=provider)
    assert result.status == "failed" and result.error["code"] == "last_step_failed"
    assert "xdotool exited 1" in result.error["message"] and result.failed_steps == 1
    assert store.meta(result.trace_id).status == "failed"


def test_done_after_a_failed_step_that_was_retried_is_done(runner, desktop):
    desktop.fail_next = ActionFailedError("xdotool exited 1")
    provider = script(calls(Click(x=1, y=1)), calls(Click(x=1, y=1)), done())
    result = runner.act(ActRequest(instruction="x"), provider=provider)
    assert result.status == "done" and result.failed_steps == 1
    assert desktop.performed == [Click(x=1, y=1)]


def test_an_action_refused_while_the_desktop_heals_waits_and_runs_once(runner, desktop, bus):
    healed: list[bool] = []

    def heal_soon(action) -> None:
        if not healed:
            healed.append(True)
            desktop.down = True
            timer = threading.Timer(0.5, lambda: setattr(desktop, "down", False))
            timer.daemon = True
            timer.start()

    desktop.during_perform = heal_soon
    provider = script(calls(Click(x=1, y=1)), done())
    result = runner.act(ActRequest(instruction="x"), provider=provider)
    assert result.status == "done" and result.failed_steps == 0
    assert desktop.performed == [Click(x=1, y=1)]  # exactly once
    assert "waiting" in kinds(bus)


def test_a_desktop_that_does_not_come_back_fails_the_run(runner, desktop, monkeypatch):
    monkeypatch.setattr(loop_module, "HEAL_WAIT_S", 0.5)
    desktop.during_perform = lambda action: setattr(desktop, "down", True)
    provider = script(*[calls(Click(x=i, y=i)) for i in range(1, 13)])
    result = runner.act(ActRequest(instruction="x", max_steps=12), provider=provider)
    assert result.status == "failed" and result.error["code"] == "session_unavailable"
    assert desktop.performed == [] and len(result.steps) == 0  # no steps burnt in a second


# ------------------------------------------------------------------------------------- reset first


def test_a_run_that_asks_for_a_reset_resets_once_before_its_first_look(runner, desktop, store):
    result = runner.act(ActRequest(instruction="work", reset=True), provider=script(done()))
    assert result.status == "done" and desktop.resets == 1
    assert result.steps[0].url == "about:blank"
    assert_trace(store, result.trace_id, "done", 1)


def test_a_bad_request_with_reset_resets_nothing(runner, desktop):
    with pytest.raises(GlassdeskError):
        runner.act(ActRequest(instruction="work", reset=True, model="scripted", script=[{"action": "nope"}]))
    assert desktop.resets == 0


def test_reset_needs_an_instruction():
    with pytest.raises(ValueError, match="reset"):
        ActRequest(reset=True)


# ------------------------------------------------------------------------- a heal under the run


def test_a_heal_under_the_run_is_a_step_the_model_is_told_and_done_says_so(runner, desktop, store, bus):
    desktop.url = "http://shop.test/cart"
    clicks = []

    def crash_on_second_click(action):
        clicks.append(action)
        if len(clicks) == 2:  # the browser dies under this step; the supervisor restarts it
            desktop.heal_log.append("chromium")
            desktop.url = "about:blank"
    desktop.during_perform = crash_on_second_click
    provider = script(calls(Click(x=1, y=1)), calls(Click(x=2, y=2)), calls(Click(x=3, y=3)), done("ordered"))
    result = runner.act(ActRequest(instruction="order", max_steps=4), provider=provider)

    assert result.status == "done_after_heal" and result.answer == "ordered"
    heal = result.steps[2]
    assert heal.actions == [] and heal.error["code"] == "desktop_healed"
    assert heal.error["message"].startswith("healed: chromium; lost: the page http://shop.test/cart")
    assert heal.url == "about:blank"
    # the model hears of it on its next turn, and the heal step takes none of its max_steps
    assert "healed: chromium" in provider.contexts[2].note
    assert len(result.steps) == 5 and len(desktop.performed) == 3
    assert "healed" in kinds(bus)
    trace = assert_trace(store, result.trace_id, "done_after_heal", 5)
    assert trace.steps[2].error.code == "desktop_healed"


def test_heals_before_the_run_are_not_its_own(runner, desktop):
    desktop.heal_log.append("desktop")
    result = runner.act(ActRequest(instruction="x"), provider=script(calls(Click(x=1, y=1)), done()))
    assert result.status == "done" and all(s.error is None for s in result.steps)


def test_a_persons_input_is_recorded_as_operator_steps_off_the_agents_budget(runner, store, bus):
    from desktop.session.operator_input import Gesture

    provider = script(calls(Click(x=1, y=1)), done("helped"))
    first = runner.act(ActRequest(instruction="with help", autopilot=False, max_steps=2,
                                  secrets={"pw": SECRET}), provider=provider)
    now = time.monotonic()
    recorded = runner.record_operator([Gesture({"action": "click", "x": 5, "y": 6, "button": "left"}, now, now),
                                       Gesture({"action": "type", "text": f"my {SECRET}"}, now, now + 0.5)])
    assert recorded == 2
    view = runner.view()
    assert (view.step, view.operator_steps, view.max_steps) == (3, 2, 2)
    steps = [e["step"] for e in bus.recent() if e["kind"] == "step"]
    assert [(s["index"], s["by"]) for s in steps] == [(1, "agent"), (2, "operator"), (3, "operator")]
    assert [e["operator_steps"] for e in bus.recent() if e["kind"] == "step"] == [0, 1, 2]
    # Two agent steps were allowed: the person's did not use them up.
    result = runner.act(ActRequest(instruction="with help", max_steps=2))
    assert result.status == "done" and [s.by for s in result.steps] == ["agent", "operator", "operator", "agent"]
    trace = store.load(first.trace_id)
    assert [s.by for s in trace.steps] == ["agent", "operator", "operator", "agent"]
    # The secret's value the person typed is recorded by its name, as an agent writes it: an
    # export types it on replay (a [REDACTED] would type the wrong text), and the value is nowhere.
    assert trace.steps[2].actions == [{"action": "type", "text": "my {{pw}}"}]
    assert trace.steps[2].text == 'the operator: type "my {{pw}}"'
    written = [p for p in store.root.rglob("*") if p.is_file()]
    assert written and not [p for p in written if SECRET.encode() in p.read_bytes()]
    assert (trace.steps[2].finished_at - trace.steps[2].started_at).total_seconds() == pytest.approx(0.5, abs=0.01)
    assert store.verify(first.trace_id).ok
    assert runner.record_operator([Gesture({"action": "key", "keys": ["a"]}, now, now)]) == 0  # no run open


def test_a_persons_click_records_what_was_under_it_and_a_native_clicks_spot(runner, store, desktop):
    from desktop.models import ElementAt
    from desktop.session.operator_input import Gesture

    seen = []
    runner.spot = lambda frame, x, y, secrets: seen.append((frame, x, y, list(secrets))) or {"text": "OK"}
    first = runner.act(ActRequest(instruction="with help", autopilot=False, max_steps=2, secrets={"pw": SECRET}),
                       provider=script(calls(Click(x=1, y=1)), done("helped")))
    button = ElementAt(x=5, y=6, css_x=5, css_y=6, tag="button", role="button", name="Save",
                       box={"x": 0, "y": 0, "width": 40, "height": 20}, locators=[])
    now = time.monotonic()
    frame = solid_frame(64, 48)
    on_page = Gesture({"action": "click", "x": 5, "y": 6, "button": "left"}, now, now, element=button, frame=None)
    native = Gesture({"action": "click", "x": 7, "y": 8, "button": "left"}, now, now, element=None, frame=frame)
    unknown = Gesture({"action": "click", "x": 9, "y": 9, "button": "left"}, now, now)  # not known for sure
    typed = Gesture({"action": "type", "text": "hi"}, now, now)
    desktop.url = "http://fake.test/next"  # where the person's input took the page
    assert runner.record_operator([on_page, native, unknown, typed]) == 4
    runner.cancel()
    steps = store.load(first.trace_id).steps[1:5]
    assert [(s.by, [e and (e.role, e.name) for e in s.elements]) for s in steps] == [
        ("operator", [("button", "Save")]), ("operator", []), ("operator", []), ("operator", [])]
    assert [[sp and sp.text for sp in s.spots] for s in steps] == [[], ["OK"], [], []]
    # Each records the page's URL after it, as an agent's step does (an export asserts a change).
    assert [s.url for s in steps] == ["http://fake.test/next"] * 4
    assert store.load(first.trace_id).steps[0].url == "http://fake.test/"
    # Of the person's, only the native click pays for OCR (the agent's click at (1, 1) had no element
    # either), on the frame read with it, told the run's secrets.
    assert [(f is frame, x, y, secrets) for f, x, y, secrets in seen[1:]] == [(True, 7, 8, [SECRET])]


# ------------------------------------------------------------------------------- expectations (expect)

EXPECT = [{"assertion": {"type": "has_value", "expected": "alice"}, "label": "Name"},
          {"assertion": {"type": "url", "expected": "http://app/home"}}]


class Checker:
    """The runner's check port: answers each expectation as ``held`` says, and keeps what it was asked."""

    def __init__(self, *held: bool):
        self.held, self.asked = held, []

    def __call__(self, expectations):
        self.asked.append([e.words() for e in expectations])
        return [{"check": e.words(), "passed": ok, "saw": "it held" if ok else f"saw {SECRET} instead",
                 "duration_ms": 7} for e, ok in zip(expectations, self.held, strict=True)]


def test_a_done_whose_expectations_hold_is_verified_and_the_trace_keeps_them(runner, desktop, store, bus):
    runner.check = checker = Checker(True, True)
    result = runner.act(ActRequest(instruction="sign in", expect=EXPECT), provider=script(calls(Click(x=1, y=1)),
                                                                                          done("signed in")))
    assert result.status == "done" and result.verified is True and result.answer == "signed in"
    assert [c.check for c in result.checks] == ["assert has_value label 'Name' 'alice'", "assert url 'http://app/home'"]
    assert all(c.passed for c in result.checks) and checker.asked == [[c.check for c in result.checks]]
    trace = assert_trace(store, result.trace_id, "done", 2)
    assert trace.meta.verified is True and [c["passed"] for c in trace.meta.checks] == [True, True]
    assert trace.meta.expect == EXPECT  # as given: what an export asserts
    assert bus.recent()[-1]["verified"] is True
    assert "checking" in kinds(bus)


def test_a_done_whose_expectation_fails_ends_failed_saying_what_was_seen(runner, store):
    runner.check = Checker(True, False)
    result = runner.act(ActRequest(instruction="sign in", expect=EXPECT, secrets={"pw": SECRET}),
                        provider=script(done("signed in")))
    assert result.status == "failed" and result.verified is False
    assert result.error["code"] == "expectation_failed"
    assert result.error["message"].startswith("the model said done, but 1 of 2 expectations failed: "
                                              "assert url 'http://app/home': saw ")
    assert SECRET not in json.dumps(result.model_dump(mode="json"))  # what was seen is redacted too
    assert [c.passed for c in result.checks] == [True, False]
    trace = assert_trace(store, result.trace_id, "failed", 1)
    assert trace.meta.verified is False and SECRET not in json.dumps(trace.meta.model_dump(mode="json"))


def test_without_expectations_a_done_is_the_models_word_and_nothing_is_checked(runner, store):
    runner.check = checker = Checker()
    result = runner.act(ActRequest(instruction="sign in"), provider=script(done()))
    assert result.status == "done" and result.verified is None and result.checks == [] and checker.asked == []
    assert store.meta(result.trace_id).verified is None


def test_a_run_that_ends_before_done_checks_nothing(runner, store):
    runner.check = checker = Checker(True, True)
    result = runner.act(ActRequest(instruction="sign in", expect=EXPECT, max_steps=1),
                        provider=script(calls(Click(x=1, y=1))))
    assert result.status == "max_steps" and result.verified is None and checker.asked == []


def test_a_done_after_a_failed_last_step_is_not_checked(runner, desktop):
    runner.check = checker = Checker(True, True)
    desktop.fail_next = ActionFailedError("xdotool said no")
    result = runner.act(ActRequest(instruction="sign in", expect=EXPECT),
                        provider=script(calls(Click(x=1, y=1), Done(answer="done"))))
    assert result.error["code"] == "last_step_failed" and checker.asked == [] and result.verified is None


def test_expectations_on_a_runner_that_cannot_check_them_are_refused_before_anything_runs(runner, desktop, store):
    with pytest.raises(InvalidRequest, match="expect: this server cannot check expectations"):
        runner.act(ActRequest(instruction="sign in", expect=EXPECT), provider=script(done()))
    assert desktop.performed == [] and store.list_traces() == []


def test_expectations_come_with_a_new_instruction_only():
    with pytest.raises(ValueError, match="expect: expectations come with a new instruction"):
        ActRequest(expect=EXPECT)
    with pytest.raises(ValueError, match="name the target"):
        ActRequest(instruction="x", expect=[{"assertion": {"type": "has_value", "expected": "a"}}])


# ------------------------------------------------------------------------------------- no_effect


def test_a_click_that_changes_nothing_is_flagged_and_the_model_is_told(runner, desktop, store):
    desktop.inert = True
    provider = script(calls(Click(x=5, y=5)), calls(Key(keys=["ctrl+c"])), calls(Move(x=9, y=9)), done())
    result = runner.act(ActRequest(instruction="click the button"), provider=provider)
    assert [s.no_effect for s in result.steps] == [True, False, False, False]  # a copy, a move: no change meant
    assert provider.contexts[1].note.startswith("Your last step (click at (5, 5)) worked but changed nothing")
    assert provider.contexts[2].note is None
    trace = store.load(result.trace_id)
    assert [s.no_effect for s in trace.steps] == [True, False, False, False] and store.verify(result.trace_id).ok


def test_a_click_that_changes_the_screen_is_not_flagged(runner, desktop):
    result = runner.act(ActRequest(instruction="click"), provider=script(calls(Click(x=5, y=5)), done()))
    assert not any(s.no_effect for s in result.steps)


def test_expect_each_step_records_how_the_expectations_stood_after_each_step(runner, desktop, store):
    held = iter([(False, False), (True, False), (True, True)])

    def check(expectations):
        # after a step, one look (1 ms); the verdict when the model says done, with their own timeouts
        looks = {e.timeout_ms for e in expectations}
        assert looks in ({1}, {5000}), looks
        return Checker(*(next(held) if looks == {1} else (True, True)))(expectations)

    runner.check = check
    result = runner.act(ActRequest(instruction="sign in", expect=EXPECT, expect_each_step=True),
                        provider=script(calls(Click(x=1, y=1)), calls(Click(x=2, y=2)), calls(Click(x=3, y=3)),
                                        done()))
    assert result.verified is True
    assert [[c.passed for c in s.checks] for s in result.steps] == [[False, False], [True, False], [True, True], []]
    trace = store.load(result.trace_id)
    assert [[c["passed"] for c in s.checks] for s in trace.steps] == [[False, False], [True, False], [True, True], []]
    with pytest.raises(ValueError, match="expect_each_step: looks at the expectations after each step"):
        ActRequest(instruction="x", expect_each_step=True)


# ----------------------------------------------------------------------------------- set-of-marks


def test_with_marks_the_model_sees_the_controls_numbered_and_listed_and_the_trace_keeps_the_plain_screen(
        runner, desktop, store):
    from desktop.marks import COLOURS
    from desktop.models import Mark

    seven = Mark(mark=1, source="native", role="push button", name="7", box=[100, 200, 40, 30], ref="n3",
                 application="galculator")
    desktop.controls = [seven]
    provider = script(calls(Click(x=120, y=215)), done())
    result = runner.act(ActRequest(instruction="press 7", marks=True), provider=provider)
    assert result.status == "done"
    seen = provider.contexts[0]
    # the list after the step's own note, each centre where this model points (display pixels here)
    assert '[1] push button "7" (galculator): centre (120, 215)' in seen.note and "display pixels" in seen.note
    shown = seen.observation.frame.image
    assert shown.getpixel((100, 215)) == COLOURS[1]  # the box drawn on what the model is shown
    assert shown.getpixel((300, 600)) == solid_frame(0).image.getpixel((300, 600))  # the rest is the screen
    # the trace keeps the screen as it was, never the marked picture
    with Image.open(store.image_path(result.trace_id, 1, "before")) as before:
        assert before.convert("RGB").getpixel((100, 215)) == solid_frame(0).image.getpixel((100, 215))
    # and each step says which numbered controls the model was shown (what its "[1]" meant)
    assert [s.marks for s in store.load(result.trace_id).steps] == [[seven], [seven]]


def test_a_screen_whose_controls_cannot_be_read_is_shown_plain_and_the_model_told(runner, desktop, store):
    desktop.controls = ActionFailedError("the accessibility bus did not answer")
    provider = script(done())
    result = runner.act(ActRequest(instruction="look", marks=True), provider=provider)
    assert result.status == "done"
    seen = provider.contexts[0]
    assert "could not be read" in seen.note and "did not answer" in seen.note
    assert seen.observation.frame.same_pixels(solid_frame(0))
    assert store.load(result.trace_id).steps[0].marks is None


def test_marks_are_refused_before_anything_starts_where_they_cannot_be_shown(runner, store):
    with pytest.raises(InvalidRequest, match="marks: ocr/rapidocr is not shown set-of-marks"):
        runner.act(ActRequest(instruction='click "Save"', model="ocr", marks=True))
    with pytest.raises(ValueError, match="marks: how the model observes is set with a new instruction"):
        ActRequest(marks=True)
    assert store.list_traces() == []


def test_a_desktop_that_cannot_number_its_controls_refuses_marks(store, bus):
    class Unmarked(FakeDesktop):
        marks = None

    with pytest.raises(InvalidRequest, match="this desktop cannot number its controls"):
        Runner(Unmarked(), store, VisionConfig(), bus).act(ActRequest(instruction="x", marks=True),
                                                            provider=script(done()))
