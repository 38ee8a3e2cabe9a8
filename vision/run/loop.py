"""The vision loop: observe -> think -> act -> settle, until done, a budget, or a cancel.

One Runner per session runs at most one run at a time. The settled screenshot after a step is the
next step's observation: the screen is captured once per step, not twice. A run can stop part-way
and be continued by a later call: in step mode (``autopilot: false``) after each model turn, and
when the model raises safety checks that an operator must acknowledge.
"""

from __future__ import annotations

import base64
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from desktop import actions
from desktop.actions import Type
from desktop.actions import describe as describe_action
from desktop.errors import GlassdeskError, InvalidAction, SessionBusy, SessionUnavailable
from desktop.frame import Frame
from desktop.models import ElementAt, NativeElement
from desktop.port import Desktop, Marking
from vision.actions import (
    NO_EFFECT,
    BrowserMember,
    CallResult,
    CursorPosition,
    Done,
    Fail,
    Screenshot,
    Zoom,
    expects_effect,
)
from vision.config import VisionConfig, create_provider
from vision.errors import InvalidRequest, ModelUnavailable
from vision.evidence.runview import write_report
from vision.models import ActRequest, ActResult, CheckResult, RunView, SafetyCheckOut, StepSummary, VideoOut
from vision.perception.effects import appeared as texts_appeared
from vision.perception.marks import marks_note
from vision.providers.base import ModelCallError, ModelTurn, Observation, Provider
from vision.run.events import EventBus
from vision.run.film import Film, check_can_film, seal_film, start_film
from vision.trace.records import ErrorInfo, RunStatus, Usage, redact, redact_pieces
from vision.trace.store import TraceStore
from vision.trace.writer import TraceWriter

if TYPE_CHECKING:
    from desktop.session.operator_input import Gesture
    from desktop.x11.receipt import VideoReceipt
    from vision.models.qa import Expectation

log = logging.getLogger("glassdesk.loop")

PAUSED_RETURN_S = 5.0
# How long a step waits for a healing desktop (a part restarts in 1-3 s, the whole stack in ~5 s).
HEAL_WAIT_S = 20.0
MODEL_RETRIES = 3
MARKS_LIMIT = 200  # the controls marked on a screen, at most (the list is read with every screenshot)
MAX_RETRY_WAIT_S = 60.0
PauseKind = Literal["operator", "takeover"]


@dataclass
class DriveClock:
    """Time a run has been driven, for ``budget_seconds``: paused time (an operator's pause, a
    take-over) and the time between calls (step mode, approval) are not counted."""

    used_s: float = 0.0
    since: float | None = None

    def start(self) -> None:
        if self.since is None:
            self.since = time.monotonic()

    def stop(self) -> None:
        if self.since is not None:
            self.used_s += time.monotonic() - self.since
            self.since = None

    @property
    def elapsed_s(self) -> float:
        return self.used_s + (time.monotonic() - self.since if self.since is not None else 0.0)


@dataclass
class RunState:
    """A run in progress or paused between calls."""

    request: ActRequest
    instruction: str
    provider: Provider
    trace: TraceWriter
    frame: Frame
    clock: DriveClock = field(default_factory=DriveClock)
    results: list[CallResult] = field(default_factory=list)
    note: str | None = None
    parse_failures: int = 0
    usage: Usage = field(default_factory=Usage)
    steps: list[StepSummary] = field(default_factory=list)
    pending: ModelTurn | None = None  # a turn held for safety-check approval
    status: RunStatus = "running"
    answer: str | None = None
    error: dict | None = None
    report_path: str | None = None  # report.html written when the run ends
    url: str | None = None  # the page URL read when ``frame`` was last recorded: the next observation's
    heals_seen: int = 0  # how many of the desktop's heals (Desktop.heals) the run has recorded
    healed: list[str] = field(default_factory=list)  # what was healed under this run
    receipt: VideoReceipt | None = None  # filming the run (record_video)
    video: VideoOut | None = None  # the receipt, once sealed into the trace
    video_note: str | None = None  # why a run asked to be filmed has none
    verified: bool | None = None  # the expectations, checked when the model said done: all held / one did not
    checks: list[dict] = field(default_factory=list)  # each as checked (vision.models.CheckResult's fields)
    shown_marks: list | None = None  # set-of-marks: the numbered controls shown with the last observation


class Hold(Exception):
    """The run stays as it is and the call returns: it went on pausing past the caller's patience."""


class Stop(Exception):
    """Ends the run with a status (and maybe an error)."""

    def __init__(self, status: RunStatus, message: str | None = None, code: str | None = None,
                 answer: str | None = None):
        super().__init__(message or status)
        self.status = status
        self.error = {"code": code or status, "message": message} if message else None
        self.answer = answer


# The actions whose pixel a replay must find again when no DOM element names it (vision.perception.spot).
SPOT_ACTIONS = ("click", "double_click", "triple_click")


def cancelled() -> Stop:
    """How every cancel ends a run: by the operator, or by a client that went away."""
    return Stop("cancelled", "cancelled by the operator", code="cancelled")


def _utc() -> datetime:
    return datetime.now(UTC)


def held(step: StepSummary) -> bool:
    """A step recorded when its turn was held for safety-check approval: nothing of it ran (the
    step that ran it, after approval, comes later), so it is neither a failure nor an action."""
    return step.error is not None and step.error.get("code") == "needs_confirmation"


def is_heal(step: StepSummary) -> bool:
    """A step the loop recorded for a heal of the desktop under the run: no model turn of its own."""
    return step.error is not None and step.error.get("code") == "desktop_healed"


def desktop_heals(desktop: Desktop) -> list[str]:
    """The desktop's heals (Desktop.heals); a desktop that does not report them has none."""
    heals = getattr(desktop, "heals", None)
    return heals() if heals is not None else []


def last_acting_error(steps: list[StepSummary]) -> dict | None:
    """The error of the last step that did something on the desktop, or None if it worked."""
    for step in reversed(steps):
        if held(step):
            continue
        if any(a.get("action") not in ("done", "fail", "screenshot") for a in step.actions):
            return step.error
    return None  # (a reply that could not be parsed did nothing on the desktop: it does not count)


def agent_steps(steps: list[StepSummary]) -> int:
    """Steps the agent took: a person's input during a take-over and a heal of the desktop under
    the run are on the record, not on the agent's step budget."""
    return sum(step.by != "operator" and not is_heal(step) for step in steps)


def step_title(index: int, text: str, actions: list[dict]) -> str:
    """A step's chapter title: the model's words, and what it did (typed text as written, with
    its placeholders)."""
    did = "; ".join(describe_action(a) for a in actions if a.get("action") not in ("screenshot",))
    words = " ".join(text.split())
    return f"step {index}: " + (f"{words} ({did})" if words and did else words or did or "looked")


def fill_placeholders(text: str, secrets: dict[str, str]) -> str:
    """``{{password}}`` -> the secret; an unknown name is an error the model can correct."""
    try:
        return actions.fill_placeholders(text, secrets)
    except actions.UnknownPlaceholder as exc:
        raise InvalidRequest(str(exc)) from None


def typed_by_person(text: str, secrets: dict[str, str]) -> str:
    """What a person typed, fit for the record (pure): each whole secret by its placeholder, as an
    agent writes it (so it replays), and any piece of one between them redacted (a password typed
    with a pause or a correction arrives in pieces, none of them the whole value)."""
    named = actions.to_placeholders(text, secrets)
    out, last = [], 0
    for match in actions.PLACEHOLDER.finditer(named):
        out += [redact_pieces(named[last:match.start()], secrets.values()), match.group(0)]
        last = match.end()
    return "".join([*out, redact_pieces(named[last:], secrets.values())])


def backoff_s(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): Retry-After if given, else exponential."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), MAX_RETRY_WAIT_S)
    return min(0.5 * 2 ** (attempt - 1), 8.0) * (0.8 + 0.4 * random.random())


class Runner:
    """Runs vision/act on one session."""

    def __init__(self, desktop: Desktop, store: TraceStore, config: VisionConfig, bus: EventBus | None = None,
                 film: Film | None = None):
        self.desktop = desktop
        self.film = film  # None: this desktop's display cannot be filmed from here
        self.store = store
        self.config = config
        self.bus = bus or EventBus()
        # Runs a browser toolset member: (session id, tool_use id, member) -> (tool_result content,
        # is_error). Set by the application service; None where there is no browser executor.
        self.browser: Callable[[str, str, BrowserMember], tuple[list[dict], bool]] | None = None
        # Reads what is at a click's pixel when no DOM element names it (a native window, a canvas):
        # (the screen before it, x, y, the run's secrets) -> a Spot's fields or None
        # (vision.perception.spot); set by the application service. None: not recorded.
        self.spot: Callable[[Frame, int, int, Iterable[str]], dict | None] | None = None
        # The texts OCR reads in what changed between two screens, none showing a secret: what a
        # click on a native window or a canvas made appear (vision.perception.effects.ocr_appeared); set by the
        # application service. None: not recorded.
        self.screen_texts: Callable[[Frame, Frame, Iterable[str]], list[str]] | None = None
        # Checks a run's expectations on this runner's desktop when the model says done (the QA
        # assertion language: vision.qa.flow.Flows.check_expectations): each {check, passed, saw,
        # duration_ms}. Set by the application service; None: a run with expectations is refused.
        self.check: Callable[[list[Expectation]], list[dict]] | None = None
        self.state: RunState | None = None
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._resume = threading.Event()
        self._resume.set()
        self._paused_since_checkpoint = False
        # Why the run is paused, by who paused it: an operator's pause and a take-over are separate,
        # so handing back after a take-over leaves an operator's own pause in force.
        self._pauses: dict[PauseKind, str] = {}
        self._control = threading.Lock()
        self._driving = False  # an act call is driving the run (it holds the lock for as long)

    # ------------------------------------------------------------------ controls (any thread)

    @property
    def active(self) -> bool:
        return self._driving

    @property
    def pause_reason(self) -> str | None:
        """Why the run is paused (a take-over first), or None."""
        return self._pauses.get("takeover") or self._pauses.get("operator")

    def cancel(self) -> bool:
        """Stop the active run, or end a run waiting between calls. True if there was something to stop."""
        while not self._lock.acquire(timeout=0.05):
            if self._driving:
                self._cancel.set()  # the active run sees it within 0.2 s; a pause itself stays in force
                return True
        try:  # under the lock: no act can pick the run up while it is being ended
            if self.state is None:
                return False
            self._finish(self.state, cancelled())
            return True
        finally:
            self._lock.release()

    def pause(self, reason: str = "paused by the operator", *, kind: PauseKind = "operator") -> None:
        # Published under the control lock: a pause and a hand-back racing each other reach the
        # strip and the console in the order they took effect.
        with self._control:
            self._pauses[kind] = reason
            self._paused_since_checkpoint = True
            self._resume.clear()
            self._publish("paused", reason=reason, by=kind)

    def resume(self, *, kind: PauseKind = "operator") -> None:
        with self._control:
            self._pauses.pop(kind, None)
            still = self.pause_reason
            if still is None:
                self._resume.set()
                self._publish("resumed", by=kind)
            else:  # another pause is still in force: say which, so nobody thinks the run goes on
                self._publish("paused", reason=still, by="operator" if "operator" in self._pauses else "takeover")

    def record_operator(self, gestures: list[Gesture]) -> int:
        """A person's input during a take-over, recorded as steps of the run in progress (marked
        ``by: operator``, with their times, in the chain; filmed with the run when it is filmed).
        Answers how many were recorded: none when no run is open to take them."""
        state = self.state
        if state is None or not gestures or state.status == "needs_confirmation":
            return 0  # (a run held for approval keeps its trace closed to steps until decided)
        secrets = state.request.secrets.values()
        recorded = 0
        for gesture in gestures:
            # The page's URL once the gesture is done, read first (a native click's spot below costs
            # an OCR read, time in which a next gesture may move the page on). An export proposes a
            # change of it as an assertion, and a healed replay of the step must still make it.
            url = state.url = self.desktop.page_url()
            action = gesture.action
            if action.get("action") == "type":
                # A person types values: a whole secret is kept by its name, as an agent writes it
                # (it replays); a piece of one (typed with a pause or a correction) is redacted.
                action = {**action, "text": typed_by_person(action["text"], state.request.secrets)}
            offset = time.time() - time.monotonic()  # monotonic -> wall clock
            started = datetime.fromtimestamp(gesture.started + offset, UTC)
            finished = datetime.fromtimestamp(gesture.finished + offset, UTC)
            index = len(state.steps) + 1
            what = describe_action(action)
            text = redact(f"the operator: {what}", secrets)
            if state.receipt is not None:
                state.receipt.chapter(redact(f"step {index}: operator {what}", secrets), at=gesture.started)
                state.receipt.note_action(action, at=gesture.started)
            # What was under their pointer, when known for sure (desktop.session.operator_reads), and
            # where no element names the point, what the screen showed there: as an agent's step has.
            element = getattr(gesture, "element", None)
            spot = self._spot(state, action, element, getattr(gesture, "frame", None))
            try:
                state.trace.record_step(started_at=started, finished_at=finished, text=text, actions=[action], url=url,
                                        by="operator", elements=[element] if element is not None else [],
                                        spots=[spot] if spot is not None else [])
            except (RuntimeError, OSError) as exc:  # the run ended meanwhile, or its trace cannot be written
                log.warning("run %s: the operator's input was not recorded: %s", state.trace.trace_id, exc)
                return recorded
            summary = StepSummary.model_validate(redact(StepSummary(index=index, text=text, actions=[action],
                                                                    by="operator", url=url).model_dump(), secrets))
            state.steps.append(summary)
            self._publish("step", trace_id=state.trace.trace_id, step=summary.model_dump(),
                          max_steps=state.request.max_steps, tokens=state.usage.total,
                          operator_steps=len(state.steps) - agent_steps(state.steps))
            recorded += 1
        return recorded

    def view(self) -> RunView | None:
        """The run as every reader (console, metrics, MCP, REST) sees it; None before the first."""
        state = self.state
        if state is None:
            return None
        checks = [SafetyCheckOut(**c.__dict__) for c in state.pending.safety_checks] if state.pending else []
        return RunView(trace_id=state.trace.trace_id, status=state.status, instruction=state.instruction,
                       model=state.provider.name, step=len(state.steps), max_steps=state.request.max_steps,
                       operator_steps=len(state.steps) - agent_steps(state.steps),
                       tokens=state.usage.total, pending_safety_checks=checks, active=self.active,
                       pause_reason=self.pause_reason, answer=state.answer, error=state.error)

    # ------------------------------------------------------------------ the run

    def act(self, request: ActRequest, on_step: Callable[[StepSummary], None] | None = None, *,
            provider: Provider | None = None, paused_return_s: float | None = PAUSED_RETURN_S) -> ActResult:
        """Start (or continue) a run. ``provider`` replaces the one ``request.model`` names: for
        embedders with their own model code, and for tests (vision.providers.function). A run that
        stays paused for ``paused_return_s`` returns with status ``paused`` (None: wait it out)."""
        if not self._lock.acquire(blocking=False):
            raise SessionBusy(f"session {self.desktop.id} is already running an instruction; wait for it to end, "
                              "or cancel it")
        try:
            self._cancel.clear()  # before driving: a cancel from now on is this call's
            self._driving = self.desktop.busy = True
            # The run's own thread passes the busy guard its page operations meet (browser members).
            self.desktop.run_thread = threading.get_ident()
            state = self._continue_or_start(request, provider)
            try:
                result = self._drive(state, request, on_step, paused_return_s)
                if self._cancel.is_set() and self.state is state:
                    # Cancelled while the call was returning without a checkpoint (a model turn
                    # that raised safety checks, step mode, a pause): the cancel still wins.
                    self._finish(state, cancelled())
                    result = self._result(state)
                return result
            except Exception as exc:
                # Whatever escaped the normal stops (a screenshot of a restarting desktop, a full
                # disk under the trace) still ends the run: its trace must not stay "running".
                if self.state is state:
                    code = getattr(exc, "code", "internal_error")
                    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                    try:
                        self._finish(state, Stop("failed", message, code=code))
                    except Exception:
                        log.exception("could not close the trace of %s", state.trace.trace_id)
                        self.state = None
                raise
        finally:
            self._driving = self.desktop.busy = False
            self.desktop.run_thread = None
            self._lock.release()

    def _continue_or_start(self, request: ActRequest, provider: Provider | None) -> RunState:
        state = self.state
        if state is not None:
            same = request.instruction in (None, state.instruction)
            if state.pending is not None and request.acknowledged_safety_checks and same:
                pending_ids = {c.id for c in state.pending.safety_checks}
                unknown = set(request.acknowledged_safety_checks) - pending_ids
                if unknown:
                    raise InvalidRequest(f"acknowledged_safety_checks: {', '.join(sorted(unknown))} not pending; "
                                         f"pending: {', '.join(sorted(pending_ids))}")
                if set(request.acknowledged_safety_checks) != pending_ids:
                    raise InvalidRequest("acknowledged_safety_checks: acknowledge every pending check, "
                                         "or cancel the run")
                state.provider.acknowledge(request.acknowledged_safety_checks)
                state.status = "running"
                state.trace.hold("running")
                self._publish("acknowledged", trace_id=state.trace.trace_id, checks=request.acknowledged_safety_checks)
                return state
            if state.pending is None and same and state.status == "paused":
                state.status = "running"
                return state
            if state.pending is None and same and not state.request.autopilot:
                state.request = state.request.model_copy(update={"autopilot": request.autopilot})
                return state
            # A new instruction (or a refusal to approve) ends the paused run.
            reason = ("the operator did not approve the safety checks" if state.pending
                      else "replaced by a new instruction")
            self._finish(state, Stop("cancelled", reason, code="cancelled"))
        if request.acknowledged_safety_checks:
            raise InvalidRequest("acknowledged_safety_checks: no run on this session is waiting for approval")
        if not request.instruction:
            raise InvalidRequest("instruction: required to start a run")
        return self._start(request, request.instruction, provider)

    def _start(self, request: ActRequest, instruction: str, provider: Provider | None) -> RunState:
        try:
            provider = create_provider(provider or self.config.resolve(request.model), instruction,
                                       self.config, script=request.script, tools=request.tools)
        except ModelCallError as exc:
            raise ModelUnavailable(str(exc)) from exc
        if request.expect and self.check is None:
            raise InvalidRequest("expect: this server cannot check expectations; run without them")
        if request.marks and not provider.sees_marks:
            raise InvalidRequest(f"marks: {provider.name} is not shown set-of-marks (the ocr model reads the text "
                                 "the marks would cover; a grounding model sees the screen and the instruction alone)")
        if request.marks and not isinstance(self.desktop, Marking):
            raise InvalidRequest("marks: this desktop cannot number its controls; run without marks")
        # A server that cannot film says so before anything is made
        film = check_can_film(self.film, self.store, self.desktop.id) if request.record_video else None
        if request.reset:
            self.desktop.reset()
        frame = self.desktop.capture()
        trace = self.store.create(instruction, model=provider.name, session_id=self.desktop.id,
                                  max_steps=request.max_steps, secrets=request.secrets.values(),
                                  expect=[e.model_dump(mode="json", exclude_unset=True, by_alias=True)
                                          for e in request.expect])
        state = RunState(request=request, instruction=instruction, provider=provider, trace=trace, frame=frame,
                         heals_seen=len(desktop_heals(self.desktop)))
        if film is not None:
            state.receipt, state.video_note = start_film(film, trace, state.instruction,
                                                         request.video_format, list(request.secrets.values()))
        self.state = state
        self._publish("run_started", trace_id=trace.trace_id, instruction=instruction, model=provider.name,
                      max_steps=request.max_steps)
        return state

    def _drive(self, state: RunState, request: ActRequest, on_step, paused_return_s: float | None) -> ActResult:
        turns_this_call = 0
        state.clock.start()
        try:
            while True:
                self._checkpoint(state, paused_return_s)
                if state.pending is not None:
                    turn, model_ms = state.pending, 0
                    state.pending = None
                else:
                    if agent_steps(state.steps) >= state.request.max_steps:
                        raise Stop("max_steps", f"stopped after {state.request.max_steps} steps without finishing",
                                   code="max_steps")
                    if not state.request.autopilot and turns_this_call >= 1:
                        return self._result(state)  # step mode: one model turn per call
                    turn, model_ms = self._think(state)
                    turns_this_call += 1
                    state.usage.add(turn.usage)
                    if turn.parse_error is not None:
                        self._parse_failed(state, turn, model_ms, on_step)
                        continue
                    if turn.safety_checks:
                        self._hold_for_approval(state, turn, model_ms, on_step)
                        return self._result(state)
                terminal = self._act(state, turn, model_ms, on_step)
                self._record_heals(state, on_step)
                if terminal is None and turn.done:
                    terminal = Stop("done", answer=turn.answer or turn.text or None)
                if terminal is not None and terminal.status == "done" and (failed := last_acting_error(state.steps)):
                    # The model may say done; the run is done only if what it last did worked.
                    raise Stop("failed", f"the model said done, but its last step failed: {failed['message']}",
                               code="last_step_failed")
                if terminal is not None and terminal.status == "done" and state.request.expect:
                    terminal = self._verify(state, terminal)
                if terminal:
                    raise terminal
                budget = state.request.budget_tokens
                if budget is not None and state.usage.total >= budget:
                    raise Stop("budget_exceeded", f"used {state.usage.total} tokens of a budget of {budget}",
                               code="budget_exceeded")
        except Stop as stop:
            self._finish(state, stop)
            return self._result(state)
        except Hold:
            state.status = "paused"
            # Whoever paused may change the screen before the run goes on: look again then.
            self._paused_since_checkpoint = True
            return self._result(state)
        finally:
            state.clock.stop()

    def _verify(self, state: RunState, done: Stop) -> Stop:
        """The model says it is done: the run's expectations decide whether it is."""
        self._publish("checking", trace_id=state.trace.trace_id, expectations=len(state.request.expect))
        state.checks = self._checked(state.request.expect)
        failed = [c for c in state.checks if not c["passed"]]
        state.verified = not failed
        if not failed:
            return done
        saw = "; ".join(f"{c['check']}: {c['saw']}" for c in failed)
        return Stop("failed", f"the model said done, but {len(failed)} of {len(state.checks)} expectations failed: "
                    f"{saw}", code="expectation_failed", answer=done.answer)

    def _checkpoint(self, state: RunState, paused_return_s: float | None = None) -> None:
        """Between steps: honour pause, cancel and the wall-clock budget."""
        # A pause that began and ended between two checkpoints counts too: the operator may have
        # changed the screen meanwhile.
        waited, self._paused_since_checkpoint = self._paused_since_checkpoint, False
        if not self._resume.is_set():
            state.clock.stop()
            paused_at = time.monotonic()
            while not self._resume.wait(0.2):
                waited = True
                if self._cancel.is_set():
                    break
                if paused_return_s is not None and time.monotonic() - paused_at >= paused_return_s:
                    raise Hold()
            state.clock.start()
        if self._cancel.is_set():
            raise cancelled()
        if waited:  # the operator may have changed the screen meanwhile: look again
            state.frame, state.url = self.desktop.capture(), None
        elapsed = state.clock.elapsed_s
        if elapsed > state.request.budget_seconds:
            raise Stop("budget_exceeded", f"ran {elapsed:.1f}s of a {state.request.budget_seconds:g}s budget "
                       "(paused time not counted)", code="budget_exceeded")

    def _think(self, state: RunState) -> tuple[ModelTurn, int]:
        """One model turn, retrying transient failures with backoff that honours Retry-After."""
        # The last step's record read the URL right after ``state.frame`` settled: no second DevTools call.
        url = state.url if state.url is not None else self.desktop.page_url()
        frame, note = self._marked(state) if state.request.marks else (state.frame, state.note)
        observation = Observation(frame=frame, url=url, element_at=getattr(self.desktop, "element_at", None))
        for attempt in range(1, MODEL_RETRIES + 2):
            start = time.perf_counter()
            try:
                turn = state.provider.turn(observation, state.results, note)
                state.results, state.note = [], None
                return turn, round((time.perf_counter() - start) * 1000)
            except ModelCallError as exc:
                if not exc.transient or attempt > MODEL_RETRIES:
                    tries = f" after {attempt} attempts" if attempt > 1 else ""
                    raise Stop("failed", f"{exc}{tries}", code="model_call_failed") from exc
                delay = backoff_s(attempt, exc.retry_after)
                self._publish("retrying", trace_id=state.trace.trace_id, attempt=attempt, wait_s=round(delay, 2),
                              reason=str(exc))
                if self._cancel.wait(delay):
                    raise cancelled() from exc
            except Exception as exc:  # a provider bug must end the run cleanly, with a trace
                log.exception("provider %s failed", state.provider.name)
                raise Stop("failed", f"{state.provider.name} failed: {exc}", code="model_call_failed") from exc
        raise AssertionError("unreachable")

    def _marked(self, state: RunState) -> tuple[Frame, str | None]:
        """Set-of-marks (``request.marks``): the screen with the controls numbered on it, and their
        list after the step's own note. Read after the screen settled, as the frame was taken; a
        screen whose controls cannot be read is shown plain, and the model told so."""
        from desktop.marks import drawn_frame

        state.shown_marks = None
        try:
            desktop = self.desktop
            assert isinstance(desktop, Marking)  # a run with marks starts only on a desktop that numbers them
            marks = desktop.marks(MARKS_LIMIT, False)
        except (GlassdeskError, OSError, RuntimeError) as exc:  # the bus or the page gone meanwhile
            said = f"(set-of-marks: the controls could not be read this step, the screenshot is unmarked: {exc})"
            return state.frame, "\n\n".join(p for p in (state.note, said) if p)
        state.shown_marks = marks.marks
        listed = marks_note(marks, state.provider.coordinate_space(state.frame))
        return drawn_frame(state.frame, marks.marks), "\n\n".join(p for p in (state.note, listed) if p)

    def _await_desktop(self, state: RunState) -> Frame:
        """The screen once the desktop answers again; a run whose desktop does not come back
        within HEAL_WAIT_S fails with session_unavailable rather than burning its steps."""
        deadline = time.monotonic() + HEAL_WAIT_S
        self._publish("waiting", trace_id=state.trace.trace_id, reason="the desktop is restarting")
        while True:
            if self._cancel.wait(0.25):
                raise cancelled()
            try:
                return self.desktop.capture()
            except SessionUnavailable as exc:
                if time.monotonic() > deadline:
                    raise Stop("failed", f"the desktop did not come back within {HEAL_WAIT_S:g}s: {exc.message}",
                               code="session_unavailable") from exc

    def _record_heals(self, state: RunState, on_step) -> None:
        """A heal of the desktop under the run becomes a step of its own (``healed: chromium``, what
        was lost: the page and its URL), the model is told, and a done run ends ``done_after_heal``.
        Looked at after each step: the step before it acted on the page as it was, the next one
        sees the new desktop."""
        heals = desktop_heals(self.desktop)
        if len(heals) <= state.heals_seen:
            return
        new, state.heals_seen = heals[state.heals_seen:], len(heals)
        state.healed += new
        # The page the run last saw before this step (the step just recorded read the new one).
        lost = next((s.url for s in reversed(state.steps[:-1]) if s.url), None) if state.steps else None
        page = f"the page {lost}" if lost else "the page"
        what = {"chromium": "the browser restarted", "desktop": "the whole desktop restarted",
                "tab": "the tab's page crashed and was opened again at its address, its state lost"}
        message = f"healed: {', '.join(new)}; lost: {page} ({'; '.join(what.get(h, h) for h in new)})"
        try:
            state.frame = self.desktop.capture()
        except SessionUnavailable:
            state.frame = self._await_desktop(state)
        turn = ModelTurn(text=message)
        self._record(state, turn, 0, before=state.frame, after=state.frame, on_step=on_step,
                     error={"code": "desktop_healed", "message": message})
        self._publish("healed", trace_id=state.trace.trace_id, parts=new, lost_url=lost)
        state.note = (f"The desktop was restarted under you ({message}). The screen now shows the new "
                      "desktop: open again what you need before going on.")

    def _parse_failed(self, state: RunState, turn: ModelTurn, model_ms: int, on_step) -> None:
        state.parse_failures += 1
        error = {"code": "model_parse_failed", "message": turn.parse_error}
        self._record(state, turn, model_ms, before=state.frame, after=None, error=error, on_step=on_step)
        if state.parse_failures > 1:
            raise Stop("failed", f"the model's reply could not be understood twice: {turn.parse_error}",
                       code="model_parse_failed")
        state.note = (f"Your last reply could not be understood: {turn.parse_error}. "
                      "Reply again, following the required format exactly.")

    def _hold_for_approval(self, state: RunState, turn: ModelTurn, model_ms: int, on_step) -> None:
        state.pending = turn
        checks = [c.__dict__ for c in turn.safety_checks]
        text = "; ".join(f"[{c.code}] {c.message}" for c in turn.safety_checks)
        self._record(state, turn, model_ms, before=state.frame, after=None, on_step=on_step,
                     error={"code": "needs_confirmation", "message": text})
        state.status = "needs_confirmation"
        state.trace.hold("needs_confirmation")
        self._publish("needs_confirmation", trace_id=state.trace.trace_id, checks=checks)

    def _act(self, state: RunState, turn: ModelTurn, model_ms: int, on_step) -> Stop | None:  # noqa: C901
        """Execute the turn's calls in order; the results go back to the model next turn."""
        before = frame = state.frame
        executed: list[list[str]] = []
        exec_ms = settle_ms = 0.0
        settled_by: list[str] = []
        terminal: Stop | None = None
        results = []
        failed_codes: list[str] = []
        elements: dict[tuple[int, int], ElementAt] = {}  # (call, action) -> what was under its pixel
        natives: dict[tuple[int, int], NativeElement] = {}  # (call, action) -> the native control there
        spots: dict[tuple[int, int], dict] = {}  # (call, action) -> its pixel's OCR text and template
        # The page's texts before the step acts, to tell after it what it made appear.
        acting = any(not isinstance(a, (Done, Fail, Screenshot, Zoom, CursorPosition))
                     for call in turn.calls if not call.error for a in call.actions)
        texts_before = self._page_texts() if acting else None
        for call_index, call in enumerate(turn.calls):
            if call.error:
                results.append(self._answered(state, CallResult(call.id, ok=False, error=call.error), frame))
                continue
            result = CallResult(call.id, ok=True)
            for action_index, action in enumerate(call.actions):
                self._publish("action", trace_id=state.trace.trace_id, step=len(state.steps) + 1,
                              action=action.model_dump())
                try:
                    if isinstance(action, Done):
                        terminal = Stop("done", answer=action.answer or turn.text or None)
                    elif isinstance(action, Fail):
                        terminal = Stop("failed", action.reason, code="model_gave_up")
                    elif isinstance(action, Screenshot):
                        pass
                    elif isinstance(action, CursorPosition):
                        x, y = self.desktop.cursor()
                        result.output = f"X={x},Y={y}"
                    elif isinstance(action, Zoom):
                        result.image_png = frame.crop_png(action.region, action.scale)
                    elif isinstance(action, BrowserMember):
                        if self.browser is None:
                            raise InvalidAction("the browser toolset is not served here")
                        result.content, is_error = self.browser(self.desktop.id, call.id, action)
                        if is_error:
                            result.ok = False
                            result.error = " ".join(b.get("text", "") for b in result.content
                                                    if b.get("type") == "text")
                        frame = self.desktop.capture()
                    else:
                        if state.receipt is not None:  # as the model wrote it: placeholders, not secrets
                            state.receipt.note_action(action.model_dump())
                        if isinstance(action, Type) and state.request.secrets:
                            action = action.model_copy(
                                update={"text": fill_placeholders(action.text, state.request.secrets)})
                        try:
                            done = self.desktop.perform(action)
                        except SessionUnavailable:
                            # Refused before it started (the desktop is healing), or cut short by the
                            # death of the display or browser it acted on, whose state the restart
                            # replaces: wait for the heal, then run it once more on the new desktop.
                            frame = self._await_desktop(state)
                            done = self.desktop.perform(action)
                        element = getattr(done, "element", None)
                        if element is not None:
                            elements[call_index, action_index] = element
                        if done.native is not None:
                            natives[call_index, action_index] = done.native
                        spot = self._spot(state, action.model_dump(), element, frame)
                        if spot is not None:
                            spots[call_index, action_index] = spot
                        frame = done.frame
                        executed += done.executed
                        exec_ms += done.duration_ms
                        settle_ms += done.settle_ms
                        settled_by.append(done.settled_by)
                except GlassdeskError as exc:
                    # Sent back to the model: an xdotool error quotes its argv, typed secrets included.
                    error = redact(f"{exc.code}: {exc.message}", state.request.secrets.values())
                    result.ok, result.error = False, error
                    failed_codes.append(exc.code)
                    break  # the rest of this call depends on what failed
                if terminal:
                    break  # nothing after done or fail runs, not even in the same call
            results.append(self._answered(state, result, frame))
            if terminal:
                break
        state.frame = frame
        state.results = results
        errors = [r.error or "" for r in results if not r.ok]
        # A type refused for want of a field is the step's own verdict (an agent corrects itself on it).
        code = "typed_into_nothing" if failed_codes and set(failed_codes) == {"typed_into_nothing"} \
            else "action_failed"
        error = {"code": code, "message": "; ".join(errors)} if errors else None
        shown, shown_on = self._appeared(state, texts_before, before, frame, bool(spots))
        # Meant to change something, worked, and the screen is the same to the pixel: said, so that
        # neither the model nor an export takes it for done.
        no_effect = (error is None and terminal is None and frame.same_pixels(before)
                     and any(expects_effect(a) for call in turn.calls for a in call.actions))
        if no_effect and state.note is None:
            words = "; ".join(describe_action(a.model_dump()) for call in turn.calls for a in call.actions
                              if expects_effect(a))
            state.note = f"Your last step ({words}) {NO_EFFECT}"
        checks = self._look(state) if state.request.expect_each_step and terminal is None else []
        self._record(state, turn, model_ms, before=before, after=frame, executed=executed, exec_ms=exec_ms,
                     settle_ms=settle_ms, settled_by=settled_by, results=results, error=error, on_step=on_step,
                     elements=elements, natives=natives, spots=spots, appeared=shown, appeared_on=shown_on,
                     no_effect=no_effect, checks=checks)
        return terminal

    def _checked(self, expectations: list[Expectation]) -> list[dict]:
        assert self.check is not None  # a run with expectations starts only where they can be checked
        return self.check(expectations)

    def _look(self, state: RunState) -> list[dict]:
        """The expectations as they stand now, each looked at once (expect_each_step): progress,
        not the verdict. A look that fails costs the run nothing but the record."""
        try:
            return self._checked([e.model_copy(update={"timeout_ms": 1}) for e in state.request.expect])
        except Exception as exc:
            log.warning("run %s: the expectations could not be looked at: %s", state.trace.trace_id, exc)
            return []

    def _page_texts(self) -> list[str] | None:
        """The page's visible texts with the browser in front (None otherwise, or on a desktop
        that cannot say): one bounded script call."""
        read = getattr(self.desktop, "visible_texts", None)
        if read is None:
            return None
        try:
            return read()
        except Exception as exc:  # a record, never the run's failure
            log.debug("no visible texts: %s", exc)
            return None

    def _appeared(self, state: RunState, texts_before: list[str] | None, before: Frame, after: Frame,
                  spotted: bool) -> tuple[list[str], str | None]:
        """What the step made appear, and where it was read: the page's texts before and after it;
        else, after a click recorded by its spot (a native window, a canvas), OCR of the changed
        region of the screen. Best effort: a failure costs the run nothing but the record."""
        secrets = list(state.request.secrets.values())
        if texts_before is not None:
            after_texts = self._page_texts()
            if after_texts is not None:
                shown = texts_appeared(texts_before, after_texts, secrets)
                if shown or not spotted:
                    return shown, "page" if shown else None
        if spotted and self.screen_texts is not None and after is not None and after is not before:
            try:
                shown = self.screen_texts(before, after, secrets)
            except Exception as exc:
                log.warning("run %s: no texts read after the step: %s", state.trace.trace_id, exc)
                shown = []
            return shown, "screen" if shown else None
        return [], None

    def _spot(self, state: RunState, action: dict, element: ElementAt | None, before: Frame | None) -> dict | None:
        """What was at a click's pixel on the screen before it (``action`` in its dict form), when no
        DOM element names the target (none was read: a native window, the browser not in front; or a
        canvas, whose point matters): a replay re-finds it by this text and image. The agent's and
        a person's clicks alike. Best effort: a failure costs the run nothing but the record."""
        if self.spot is None or before is None or action.get("action") not in SPOT_ACTIONS:
            return None
        if element is not None and element.tag != "canvas":
            return None
        x, y = action["x"], action["y"]
        try:
            return self.spot(before, x, y, state.request.secrets.values())
        except Exception as exc:
            log.warning("run %s: nothing recorded at (%s, %s): %s", state.trace.trace_id, x, y, exc)
            return None

    def _answered(self, state: RunState, result: CallResult, frame: Frame) -> CallResult:
        """A call's result with the state right after it: the screen (a reference, free), and the
        page's URL for a provider whose contract answers each call with it."""
        result.screen = frame
        if state.provider.answers_each_call:
            result.url = self.desktop.page_url()
        return result

    def _record(self, state: RunState, turn: ModelTurn, model_ms: int, *, before: Frame, after: Frame | None,
                on_step, executed=(), exec_ms=0.0, settle_ms=0.0, settled_by=(), results=(), error=None,
                elements: dict[tuple[int, int], ElementAt] | None = None,
                natives: dict[tuple[int, int], NativeElement] | None = None,
                spots: dict[tuple[int, int], dict] | None = None, appeared: list[str] | None = None,
                appeared_on: str | None = None, no_effect: bool = False, checks: Sequence[dict] = ()) -> None:
        actions = [a.model_dump() for call in turn.calls for a in call.actions]
        # Aligned with actions; none at all when no action had one (a trace's records stay as small).
        found = elements or {}
        at = [found.get((c, a)) for c, call in enumerate(turn.calls) for a in range(len(call.actions))] if found else []
        native_list = [natives.get((c, a)) for c, call in enumerate(turn.calls)
                       for a in range(len(call.actions))] if natives else []
        seen = spots or {}
        spot_list = [seen.get((c, a)) for c, call in enumerate(turn.calls)
                     for a in range(len(call.actions))] if seen else []
        url = state.url = self.desktop.page_url()
        started = datetime.fromtimestamp(before.taken_at, UTC)
        if state.receipt is not None:  # the step's chapter begins when its observation was taken
            title = redact(step_title(len(state.steps) + 1, turn.text, actions), state.request.secrets.values())
            state.receipt.chapter(title, at=time.monotonic() - max(0.0, time.time() - before.taken_at))
        state.trace.record_step(
            before=before, after=after, started_at=started, finished_at=_utc(), text=turn.text,
            reasoning=turn.reasoning, tool_calls=turn.calls, actions=actions, argv=executed, results=results,
            error=error, model_ms=model_ms, exec_ms=round(exec_ms), settle_ms=round(settle_ms),
            settled_by=settled_by, usage=turn.usage, url=url, model_image_size=turn.image_size, elements=at,
            natives=native_list, spots=spot_list, appeared=appeared or [], appeared_on=appeared_on, no_effect=no_effect,
            checks=list(checks), marks=state.shown_marks,
        )
        summary = StepSummary(index=len(state.steps) + 1, text=turn.text, actions=actions, executed=list(executed),
                              error=error, model_ms=model_ms, exec_ms=round(exec_ms), settle_ms=round(settle_ms),
                              settled_by=list(settled_by), usage=turn.usage.model_copy(), url=url,
                              no_effect=no_effect, checks=[CheckResult(**c) for c in checks])
        # What leaves the process must not carry typed secrets either.
        summary = StepSummary.model_validate(redact(summary.model_dump(), state.request.secrets.values()))
        state.steps.append(summary)
        self._publish("step", trace_id=state.trace.trace_id, step=summary.model_dump(),
                      max_steps=state.request.max_steps, tokens=state.usage.total,
                      operator_steps=len(state.steps) - agent_steps(state.steps))
        if on_step:
            on_step(summary)

    def _finish(self, state: RunState, stop: Stop) -> None:
        try:
            state.trace.check_written()
        except (GlassdeskError, OSError) as exc:  # steps the trace lost: the run did not end as it says
            if stop.error is None or stop.error.get("code") != getattr(exc, "code", None):
                stop = Stop("failed", getattr(exc, "message", None) or str(exc),
                            code=getattr(exc, "code", "trace_write_failed"))
        if stop.status == "done" and state.healed:
            stop.status = "done_after_heal"
        state.status = stop.status
        state.pending = None
        error = ErrorInfo(**stop.error) if stop.error else None
        receipt, state.receipt = state.receipt, None
        if receipt is not None:
            state.video, state.video_note = seal_film(receipt, state.trace)
        state.trace.finish(stop.status, answer=stop.answer, error=error, verified=state.verified,
                           checks=state.checks)
        # The response and the run_finished event leave the process: no typed secret in them either.
        stop.answer, stop.error, state.checks = redact([stop.answer, stop.error, state.checks],
                                                       state.request.secrets.values())
        state.answer, state.error = stop.answer, stop.error
        try:
            state.report_path = str(write_report(self.store, state.trace.trace_id))
        except OSError as exc:  # the trace itself is safe; only the convenience copy is missing
            log.warning("could not write the report of %s: %s", state.trace.trace_id, exc)
        if self.state is state:
            self.state = None
        self._publish("run_finished", trace_id=state.trace.trace_id, status=stop.status, answer=stop.answer,
                      error=stop.error, steps=len(state.steps), tokens=state.usage.total, model=state.provider.name,
                      verified=state.verified)

    def _result(self, state: RunState) -> ActResult:
        try:
            screenshot = self.desktop.capture()
        except GlassdeskError:
            screenshot = state.frame
        pending = state.pending.safety_checks if state.pending else []
        note = None
        if state.status == "paused":
            note = (f"the run is paused ({self.pause_reason or 'by the operator'}); once it is resumed (or the "
                    "person hands back control) continue it by acting again with the same instruction, or "
                    "cancel it")
        elif state.status == "needs_confirmation":
            note = "the model raised safety checks: an operator must approve them, or cancel the run"
        elif state.status == "running" and not state.request.autopilot:
            note = "step mode: act again with the same instruction for the next model turn"
        return ActResult(
            trace_id=state.trace.trace_id, status=state.status, verified=state.verified,
            checks=[CheckResult(**c) for c in state.checks], answer=state.answer, note=note,
            failed_steps=sum(s.error is not None and not held(s) for s in state.steps),
            error=state.error, steps=state.steps, usage=state.usage.model_copy(),
            pending_safety_checks=[SafetyCheckOut(**c.__dict__) for c in pending],
            final_screenshot=base64.b64encode(screenshot.png).decode(),
            report_url=f"/api/v1/traces/{state.trace.trace_id}/report", report_path=state.report_path,
            video=state.video, video_note=state.video_note,
        )

    def _publish(self, kind: str, **data) -> None:
        self.bus.publish(kind, session_id=self.desktop.id, **data)
