"""verify_user_flow: a flow's steps in order on the visible desktop, each with its evidence, retried
on a transient failure, all within the flow's aggregate timeout; the assertions a step makes and
the flow's success condition.

A step's targets are found in the DOM first and, for text or an image, on the screen (a click there
is real input at that pixel). An ``act`` step runs a vision instruction through the ``act``
callable ``QaService`` is given (``Glassdesk.act``): the flow knows the vision loop only by it.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from desktop.actions import Click, DoubleClick, Key, Move, Type
from desktop.errors import (
    ElementNotFound,
    EvaluateDisabled,
    GlassdeskError,
    InvalidAction,
    InvalidRequest,
    PageTimeoutError,
)
from desktop.models import Locating, Target
from desktop.session.manager import Session
from vision.evidence.qa_runs import RunWriter
from vision.models.qa import (
    ELEMENT_PRESENCE,
    TARGETED,
    Artifact,
    Expectation,
    FlowResult,
    FlowStep,
    StepResult,
    SuccessCondition,
    VerifyUserFlowRequest,
    retarget_test_ids,
    template_png,
)
from vision.perception.effects import appeared
from vision.qa.baselines import BaselineStore
from vision.qa.driver import (
    CONSOLE_LIMIT,
    DOM_FIRST_MS,
    POLL_S,
    AssertionFailed,
    Driver,
    FinishRun,
    StartRun,
    StepFailed,
    _console_line,
    _reason,
    _stem,
    _transient,
    poll_pause,
)
from vision.qa.expect import REGEX_TEXT_LIMIT
from vision.qa.healing import HEALABLE, Healer, ms_until, squash
from vision.qa.native import NativeSteps

if TYPE_CHECKING:
    from vision.models import ActRequest, ActResult

EVALUATED_LIMIT = 2000  # characters of an evaluate step's JSON value kept in its record


class Flows:
    """verify_user_flow, checked whole before its run is made, and the assertions its steps make."""

    def __init__(self, driver: Driver, baselines: BaselineStore, run: StartRun, finish: FinishRun, *,
                 compare_now: Callable[..., dict], act: Callable[[str, ActRequest], ActResult],
                 ask: Callable[..., dict | None] | None = None):
        self.driver = driver
        self.desktops = driver.desktops
        self.pages = driver.pages
        self.native = NativeSteps(self.desktops)  # steps on a native window's control
        self.baselines = baselines
        self._run = run
        self._finish = finish
        self.compare_now = compare_now  # vision.qa.visual.Visual.compare_now: a visual_matches assertion
        self.act = act
        # (session id, model, instruction, script) -> where the model points on the screen now
        # ({x, y, said, model}) or None: a heal_with step (Glassdesk.ask_point); None: not served.
        self.ask = ask

    def verify_user_flow(self, session_id: str | None, request: VerifyUserFlowRequest) -> FlowResult:
        session = self.driver.acting(session_id, request.start_url)
        # Everything that can be checked is, before anything runs: a bad request makes no run.
        from desktop.actions import UnknownPlaceholder, fill_placeholders

        for number, step in enumerate(request.steps, 1):
            if step.action == "navigate":
                assert step.url is not None  # a navigate step has one (FlowStep's check)
                self.desktops.check_url(step.url, session)
            filled = {"value": step.value or ""} if step.action in ("fill", "type") else {
                f"request.headers.{name}": value for name, value in (step.request.headers or {}).items()
            } if step.request is not None else {}
            for field, text in filled.items():
                try:
                    fill_placeholders(text, request.secrets)
                except UnknownPlaceholder as exc:
                    raise InvalidRequest(f"steps[{number}].{field}: {exc}") from None
        if request.heal_with is not None and self.ask is None:
            raise InvalidRequest("heal_with: this server cannot ask a model to re-target a step")
        condition = request.success_condition
        self._refuse_before_running(session, request.steps, "step(s)",
                                    [condition.selector] if condition is not None and condition.selector else [])
        acts = [e.as_step() for step in request.steps for e in step.expect or []]
        if acts:  # an act step's expectations, as a run's are before it starts
            self._refuse_before_running(session, acts, "an act step's expect")
        secrets = tuple(request.secrets.values())
        with self._run("verify_user_flow", request.name, session, request, secrets) as run:
            flow = _Flow(self, run, session, request)
            flow.run()
            result = flow.result
            status = "passed" if result.success else ("error" if flow.errored else "failed")
            return self._finish(run, status, result, {
                "name": request.name or f"flow from {request.start_url or 'the page in front'}",
                "screenshots": [a.name for a in result.screenshots], "console_logs": result.console_logs,
                "failure_reason": result.failure_reason,
                "steps": [s.model_dump(mode="json") for s in result.steps]})

    def _refuse_before_running(self, session: Session, steps: list[FlowStep], what: str,
                               selectors: Sequence[str] = ()) -> None:
        """What can be known wrong with steps' assertions before anything runs (a missing
        baseline: 404; an evaluate this server does not allow; a selector that does not parse),
        ``what`` naming them in the message (\"step(s)\", \"expect\")."""
        for step in steps:
            if step.assertion is not None and step.assertion.type == "visual_matches":
                self.baselines.get(step.assertion.baseline_id or "")
        evaluating = [number for number, step in enumerate(steps, 1) if step.action == "evaluate"
                      or (step.assertion is not None and step.assertion.type == "evaluate")]
        if evaluating and getattr(self.pages, "allow_evaluate", None) is False:
            raise EvaluateDisabled(f"{what} {', '.join(map(str, evaluating))}: an evaluate step or assertion runs "
                                   "JavaScript in the page, which this server does not allow; start it with "
                                   "--allow-evaluate")
        self.driver.check_selectors(session, [css for s in steps for css in _selectors(s)] + list(selectors))

    # ------------------------------------------------------------------ expectations (a vision run's expect)

    def check_expectations_first(self, session: Session, expectations: list[Expectation]) -> None:
        """Refuse a run whose expectations could never be checked, before it starts."""
        self._refuse_before_running(session, [e.as_step() for e in expectations], "expect")

    def check_expectations(self, session: Session, expectations: list[Expectation]) -> list[dict]:
        """Each expectation looked at until it holds or its timeout passes, in order:
        ``{check, passed, saw, duration_ms}``. A check that cannot be made (the page gone) fails,
        saying why: a run is verified by what was seen, never by what could not be looked at."""
        outcomes = []
        for expectation in expectations:
            step = expectation.as_step()
            started = time.monotonic()
            try:
                seen = self.check_assertion(session, step, started + expectation.timeout_ms / 1000)
                passed, saw = True, _held_words(seen)
            except AssertionFailed as exc:
                passed, saw = False, str(exc)
            except GlassdeskError as exc:
                passed, saw = False, f"could not look: {exc.code}: {exc.message}"
            outcomes.append({"check": step.heading(), "passed": passed, "saw": saw,
                             "duration_ms": round((time.monotonic() - started) * 1000)})
        return outcomes

    # ------------------------------------------------------------------ assertions

    def check_assertion(self, session: Session, step: FlowStep, deadline: float,
                        test_id_attribute: str = "data-testid", run: RunWriter | None = None) -> dict:
        """Raise AssertionFailed unless the step's assertion holds by ``deadline`` (it is looked at
        until then, as a person would wait for a page to settle, and passes the moment it holds);
        what was seen otherwise. ``run`` keeps a visual_matches comparison's images."""
        a = step.assertion
        assert a is not None
        kind = a.kind
        if step.native is not None and kind in TARGETED:
            return self.native.check(session.id, step, a, deadline)
        if kind in ELEMENT_PRESENCE and not step.dom_only():
            # Text (the DOM, then OCR) or an image on the screen: present or not.
            if a.negate:
                kind = "visible" if kind == "hidden" else "hidden"
            return self._element_state(session, step, kind, deadline)
        if kind in TARGETED:
            return self._element(session, step.dom_target(test_id_attribute), a, deadline)
        if kind in ("url", "url_matches", "title", "evaluate"):
            return self._page_value(session, a, deadline)
        if kind == "screen_text_contains":
            return self._screen_text(session, a.expected or "", deadline, negate=a.negate)
        if kind == "visual_matches":
            compared = self.compare_now(session, a.baseline_id or "", a, run)
            if not compared["passed"]:
                raise AssertionFailed(f"baseline {a.baseline_id}: {compared['reason']} ({compared['diff_pixels']} px "
                                      f"differ, {compared['diff_percentage']:.3f}% of the page)", detail=compared)
            return compared
        raise AssertionFailed(f"unknown assertion {a.type}")

    def _element(self, session: Session, target: Target, a, deadline: float) -> dict:
        """An assertion about the target's elements, polled (POLL_S) until it holds or ``deadline``."""
        from vision.qa.expect import STATES, judge, wanted

        started = time.monotonic()
        looks = 0
        while True:
            seen, _ = self.driver.retrying(
                session, lambda: self.pages.inspect(session.id, target, STATES.get(a.kind, ()), a.attribute),
                deadline=deadline)
            looks += 1
            held, saw = judge(a, seen)
            if held != a.negate:
                return {"saw": saw, "count": seen["count"], "looks": looks,
                        "waited_ms": round((time.monotonic() - started) * 1000)}
            if time.monotonic() >= deadline:
                raise AssertionFailed(f"{target.describe()}: expected {wanted(a)}; saw {saw}"
                                      + self._closest(session, target, a, seen))
            time.sleep(poll_pause(started))

    def _closest(self, session: Session, target: Target, a, seen: dict) -> str:
        """For a failed assertion about a text, the closest text there was: among the matches' texts
        (has_text, contains_text), or among the page's lines when nothing matched a target named by
        its words."""
        from vision.qa.expect import closest, normalise

        if a.negate:
            return ""
        if seen["count"] and a.kind in ("has_text", "contains_text") and a.expected is not None:
            texts = [normalise(e["text"]) for e in seen["elements"]]
            near = closest(a.expected, texts)
            if not near or near == texts[0]:
                return ""
            return f"; the closest match: {near!r}" + (f" (match {texts.index(near) + 1} of {seen['count']})"
                                                       if seen["count"] > 1 else "")
        words = target.has_text or next((getattr(target, k) for k in ("text", "label", "placeholder", "alt", "title")
                                         if getattr(target, k) is not None), None) or target.name
        if seen["count"] or words is None:
            return ""
        try:
            page = self.pages.content(session.id, "text").content
        except GlassdeskError:
            return ""
        near = closest(words, str(page).splitlines())
        return f"; the closest text on the page: {near!r}" if near else ""

    def _page_value(self, session: Session, a, deadline: float) -> dict:
        """url, url_matches, title, evaluate: the page's value polled until the assertion holds."""
        regex = re.compile(a.expected or "") if a.kind == "url_matches" else None
        started = time.monotonic()
        while True:
            if a.kind == "evaluate":
                value = self.pages.evaluate(session.id, a.expected or "")
                held, saw = bool(value), f"the expression's value {json.dumps(value)[:300]}"
            else:
                state = self.pages.state(session.id)
                value = (state.title if a.kind == "title" else state.url) or ""
                held = bool(regex.search(value[:REGEX_TEXT_LIMIT])) if regex else value == a.expected
                saw = f"{'title' if a.kind == 'title' else 'URL'} {value!r}"
            if held != a.negate:
                return {"saw": saw, "waited_ms": round((time.monotonic() - started) * 1000)}
            if time.monotonic() >= deadline:
                what = {"url": "the URL", "url_matches": "a URL matching", "title": "the title",
                        "evaluate": "a true value of"}[a.kind]
                raise AssertionFailed(f"expected {'not ' if a.negate else ''}{what} {a.expected!r}; saw {saw}")
            time.sleep(poll_pause(started))

    def _element_state(self, session: Session, step: FlowStep, kind: str, deadline: float) -> dict:
        if step.image is not None:
            spot = self.driver.on_screen(session, deadline, template=template_png(step.image),
                                         confidence=step.confidence)
            if (not spot) != (kind == "hidden"):
                raise AssertionFailed(f"{step.describe()} is on the screen" if spot else spot.why)
            return {"point": [spot.x, spot.y]} if spot else {}
        target = _dom_target(step)
        if kind == "hidden":
            remaining = max(1, int((deadline - time.monotonic()) * 1000))
            found, _ = self.driver.retrying(session, lambda: self.pages.probe(session.id, target, "hidden", remaining),
                                            deadline=deadline)
            if found["visible"]:
                raise AssertionFailed(f"{target.describe()} is still visible")
            if target.text is not None and self.driver.on_screen(session, time.monotonic(), text=target.text):
                raise AssertionFailed(f"{target.describe()} is visible on the screen")
            return {"exists": found["exists"]}
        found = self.driver.find(session, target, deadline, visible=kind == "visible")
        if not found["exists"]:
            raise AssertionFailed(f"no element for {target.describe()}"
                                  + (f"; nor on the screen: {found['miss']}" if found.get("miss") else ""))
        if kind == "visible" and not found["visible"]:
            raise AssertionFailed(f"{target.describe()} exists but is not visible")
        return {"box": found["box"], "found_by": found.get("how")}

    def _url_matches(self, session: Session, pattern: str, deadline: float) -> dict:
        regex = re.compile(pattern)
        started = time.monotonic()
        while True:
            url = self.pages.state(session.id).url or ""
            if regex.search(url[:REGEX_TEXT_LIMIT]):
                return {"url": url}
            if time.monotonic() >= deadline:
                raise AssertionFailed(f"the URL {url!r} does not match {pattern!r}")
            time.sleep(poll_pause(started))

    def _screen_text(self, session: Session, expected: str, deadline: float, negate: bool = False) -> dict:
        from vision.qa.screen_find import screen_text

        want = squash(expected)
        while True:
            text = screen_text(self.desktops.screenshot(session.id).png)
            if (want in squash(text)) != negate:
                return {"screen_text": expected}
            if time.monotonic() >= deadline:
                raise AssertionFailed(f"the screen {'shows' if negate else 'does not show'} {expected!r}; it reads: "
                                      f"{text[:300]!r}")
            time.sleep(POLL_S)

    def check_success(self, session: Session, condition: SuccessCondition, deadline: float) -> dict:
        if condition.url_matches is not None:
            return self._url_matches(session, condition.url_matches, deadline)
        if condition.screen_text is not None:
            return self._screen_text(session, condition.screen_text, deadline)
        target = Target(selector=condition.selector) if condition.selector else Target(text=condition.text)
        found = self.driver.find(session, target, deadline, visible=True)
        if not (found["exists"] and found["visible"]):
            raise AssertionFailed(f"no visible element for {target.describe()}"
                                  + (f" in the page; nor on the screen: {found.get('miss')}" if target.text else ""))
        return {"box": found["box"], "found_by": found.get("how")}


# ---------------------------------------------------------------------------------------- a flow


class _Flow:
    """One verify_user_flow: its steps in order, with evidence, retries and the flow's deadline."""

    def __init__(self, flows: Flows, run: RunWriter, session: Session, request: VerifyUserFlowRequest):
        self.flows, self.run_, self.session, self.request = flows, run, session, request
        self.deadline = time.monotonic() + request.timeout_ms / 1000
        self.console_from, self.network_from = flows.pages.cursors(session.id)
        self.requests_taken: set[int] = set()  # the recorded requests earlier wait_for_request steps named
        self.errored = False
        self.result = FlowResult(test_run_id=run.run_id, success=False, steps_completed=0, trace_id=run.run_id)
        self.last_shot: Artifact | None = None
        self.healer = Healer(flows, session.id, request, run, self.result.heals, self.do)

    def remaining_ms(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)

    def shot(self, stem: str, **about: Any) -> Artifact:
        self.last_shot = self.flows.driver.shot(self.run_, self.session, stem, **about)
        return self.last_shot

    def run(self) -> None:
        flows, session, request = self.flows, self.session, self.request
        try:
            if request.start_url is not None:  # without one, the flow starts where the browser is
                flows.driver.retrying(session, lambda: flows.pages.navigate(session.id, "goto", request.start_url,
                                                                            "load",
                                                                            max(1, min(30_000, self.remaining_ms()))),
                                      navigation=True, deadline=self.deadline)
        except GlassdeskError as exc:
            if exc.code == "operator_in_control":
                raise
            self.fail(None, f"start_url {request.start_url}: {_reason(exc)}", error=True)
            return
        self.shot("start")
        for index, step in enumerate(request.steps, 1):
            if not self.step(index, step):
                return
        if request.success_condition is not None:
            try:
                seen = flows.check_success(session, request.success_condition,
                                           time.monotonic() + max(0, min(10_000, self.remaining_ms())) / 1000)
            except (AssertionFailed, GlassdeskError) as exc:
                if isinstance(exc, GlassdeskError) and exc.code == "operator_in_control":
                    raise
                self.fail(None, f"success_condition {request.success_condition.describe()}: {_reason(exc)}",
                          error=isinstance(exc, GlassdeskError))
                return
            self.run_.record("success_condition", seen=seen)
        self.result.success = True
        self.result.console_logs = self.console()

    def step(self, index: int, step: FlowStep) -> bool:
        flows, session = self.flows, self.session
        started = time.monotonic()
        record = StepResult(index=index, name=step.heading(), action=step.action, status="passed",
                            before=self.last_shot.name if self.last_shot else None)
        if self.remaining_ms() <= 0:
            record.status, record.failure_reason = "failed", (f"the flow's timeout of {self.request.timeout_ms} ms "
                                                              f"ran out before step {index}")
            self.finish_step(record, started, failed=True)
            self.fail(index, record.failure_reason)
            return False
        step_deadline = min(self.deadline, started + step.timeout_ms / 1000)
        receipt = getattr(self.run_, "video", None)  # the run is filmed: a chapter per step
        if receipt is not None:
            receipt.chapter(self.run_.redacted(f"step {index}: {step.heading()}"), at=started)
        # The page's texts around an acting step: what it made appear is kept with it, for an export
        # to carry as the effect a healed replay must still have (vision.perception.effects).
        texts_before = self._visible_texts() if step.action in HEALABLE else None
        try:
            detail, attempts = flows.driver.retrying(session, lambda: self.act(index, step, step_deadline),
                                                     navigation=step.action == "navigate", deadline=self.deadline)
            record.detail, record.attempts = detail or {}, attempts
            if texts_before is not None:
                texts_after = self._visible_texts()
                shown = appeared(texts_before, texts_after or [], self.request.secrets.values())
                if shown:
                    record.detail["appeared"] = shown
            if receipt is not None:
                film_step(receipt, step, record.detail, started, self.run_.redacted)
        except (AssertionFailed, StepFailed, GlassdeskError) as exc:
            if isinstance(exc, GlassdeskError) and exc.code == "operator_in_control":
                raise
            record.status = "error" if isinstance(exc, GlassdeskError) and _transient(exc, True) else "failed"
            record.failure_reason = _reason(exc)
            record.detail = dict(getattr(exc, "detail", None) or {})
            self.finish_step(record, started, failed=True)
            self.fail(index, f"step {index} ({record.name}): {record.failure_reason}",
                      error=record.status == "error")
            return False
        self.finish_step(record, started, failed=False)
        self.result.steps_completed = index
        return True

    def _visible_texts(self) -> list[str] | None:
        read = getattr(self.session, "visible_texts", None)
        return read() if read is not None else None

    def finish_step(self, record: StepResult, started: float, *, failed: bool) -> None:
        shot = self.shot(f"step-{record.index:03d}-{'failure' if failed else 'after'}", step=record.index,
                         which="failure" if failed else "after")
        record.after = shot.name
        record.duration_ms = round((time.monotonic() - started) * 1000)
        if failed:  # the console at the failure, with the step
            record.detail["console"] = self.console()[-50:]
        self.result.steps.append(record)
        self.result.screenshots.append(shot)
        self.run_.record("step", **record.model_dump(mode="json"))

    def fail(self, index: int | None, reason: str, *, error: bool = False) -> None:
        self.result.success = False
        self.result.failure_step = index
        self.result.failure_reason = reason
        self.errored = error
        self.result.console_logs = self.console()
        if index is None:  # the start or the success condition: the screen at that moment
            self.result.screenshots.append(self.shot("failure", which="failure"))

    def console(self) -> list[dict]:
        entries = self.flows.pages.console(self.session.id, self.console_from)
        # Every uncaught exception of the run, however many log lines followed it.
        self.result.page_errors = [_console_line(e) for e in entries if e.get("exception")][:CONSOLE_LIMIT]
        return [_console_line(e) for e in entries][-CONSOLE_LIMIT:]

    def ms(self, step_deadline: float) -> int:
        return ms_until(step_deadline)

    def act(self, index: int, step: FlowStep, step_deadline: float) -> dict:
        return self.healer.act(index, step, step_deadline)

    def do(self, index: int, step: FlowStep, step_deadline: float) -> dict:  # noqa: C901
        """Carry out one step as it is written."""
        flows, sid = self.flows, self.session.id
        pages = flows.pages
        if step.action in ("navigate", "reload", "back", "forward"):
            how: Literal["goto", "back", "forward", "reload"] = "goto" if step.action == "navigate" else step.action
            url = step.url if step.action == "navigate" else None
            try:
                done = pages.navigate(sid, how, url, "load", self.ms(step_deadline))
            except PageTimeoutError as exc:
                # The driver tries a timed-out navigation again while the step's time lasts, each try
                # given what is left of it: the last one's own figure (down to 1 ms) is not what the
                # step allowed. Said with the step's own timeout (the flow's deadline may have cut it
                # shorter: its own failure says so) and the browser's words.
                raise PageTimeoutError(f"{step.describe()}: the page did not load within the step's "
                                       f"timeout of {step.timeout_ms} ms (last try: {exc.message})") from None
            return {"status": done["status"], "url": done["url"], "load_time_ms": done["load_time_ms"]}
        if step.action == "launch":
            program, *args = shlex.split(step.command or "")
            launched, pid = flows.desktops.launch(sid, program, args)
            return {"pid": pid, "executed": launched.executed}
        if step.action in ("click", "dblclick", "hover"):
            return self.point_at(step, step_deadline)
        if step.action == "wait_for_request":
            return self.wait_for_request(step, step_deadline)
        if step.action == "evaluate":
            value = pages.evaluate(sid, step.expression or "")
            said = json.dumps(value, default=str)
            return {"value": said if len(said) <= EVALUATED_LIMIT else said[:EVALUATED_LIMIT] + "…"}
        if step.action == "fill":
            return self.fill(step, step_deadline)
        if step.action == "clear":
            target = self.target(step)
            acted = pages.fill(sid, target, "", clear=True, timeout_ms=self.ms(step_deadline))
            if acted.verified is False:  # not a form field (contenteditable): its text must be gone
                left = pages.inspect(sid, target)["elements"][:1]
                if not left or left[0]["value"] or (left[0]["value"] is None and left[0]["text"].strip()):
                    raise StepFailed(f"{step.describe()} still holds text after ctrl+a, BackSpace")
            return {"point": [acted.x, acted.y], "box": acted.box, "verified": acted.verified}
        if step.action in ("check", "uncheck"):
            acted = pages.check(sid, self.target(step), step.action == "check", self.ms(step_deadline))
            if not acted.verified:
                raise StepFailed(f"{step.describe()} is not {step.action}ed after "
                                 + ("the click" if acted.executed else "looking (it was not clicked)"))
            return {"point": [acted.x, acted.y], "box": acted.box, "clicked": bool(acted.executed),
                    "verified": True}
        if step.action == "select":
            acted = pages.select(sid, self.target(step), step.option or "", self.ms(step_deadline))
            return {"point": [acted.x, acted.y], "box": acted.box, "verified": acted.verified}
        if step.action == "type":
            if step.native is not None:
                return flows.native.typed(sid, step, step_deadline, self.typing(step), clear=False)
            if step.target_kinds():
                acted = pages.type_text(sid, self.target(step), step.value or "", secrets=self.request.secrets,
                                        timeout_ms=self.ms(step_deadline))
                return {"point": [acted.x, acted.y], "box": acted.box, "executed": acted.executed}
            typing = self.typing(step)
            if typing is not None:
                flows.desktops.perform(sid, typing)
            return {"executed": [["xdotool", "type", step.value or ""]]}  # the placeholders, not the secrets
        if step.action == "blur":
            acted = pages.blur(sid, self.target(step), self.ms(step_deadline))
            if not acted.verified:
                raise StepFailed(f"{step.describe()} still has the focus after blur")
            return {"box": acted.box, "dispatched": "devtools"}
        if step.action == "press":
            if step.target_kinds():
                acted = pages.press(sid, self.target(step), step.key_list, self.ms(step_deadline))
                return {"point": [acted.x, acted.y], "box": acted.box, "executed": acted.executed}
            performed = flows.desktops.perform(sid, Key(keys=step.key_list))
            return {"executed": performed.executed}
        if step.action == "drag":
            assert step.to is not None
            to = retarget_test_ids(step.to, self.request.test_id_attribute)
            acted = pages.drag(sid, self.target(step), to, self.ms(step_deadline), position=step.position)
            return {"point": [acted.x, acted.y], "box": acted.box, "executed": acted.executed}
        if step.action == "scroll_into_view":
            found = pages.probe(sid, self.target(step), "visible", self.ms(step_deadline))
            if not found["visible"]:
                raise StepFailed(f"{step.describe()}: " + ("no element matches" if not found["exists"] else
                                                           "there but not visible") + f" within {step.timeout_ms} ms")
            return {"box": found["box"], "matches": found["matches"]}
        if step.action == "upload":
            acted = pages.upload(sid, self.target(step), step.files or [], self.ms(step_deadline))
            if not acted.verified:
                raise StepFailed(f"{step.describe()} does not hold the files after the upload")
            return {"box": acted.box, "files": [f.name for f in step.files or []], "dispatched": "devtools"}
        if step.action == "wait":
            if not step.target_kinds():
                time.sleep(max(0.0, step_deadline - time.monotonic()))
                return {"waited_ms": step.timeout_ms}
            if step.native is not None:
                return flows.native.wait(sid, step, step_deadline)
            if step.state is not None or step.dom_only():
                state = step.state or "visible"
                try:
                    return pages.wait_for(sid, self.target(step), state, self.ms(step_deadline))
                except PageTimeoutError:
                    raise StepFailed(f"{step.describe()} was not {state} within {step.timeout_ms} ms") from None
            if step.image is not None:
                spot = flows.driver.on_screen(self.session, step_deadline, template=template_png(step.image),
                                              confidence=step.confidence)
                if not spot:
                    raise StepFailed(f"{step.describe()} did not show within {step.timeout_ms} ms: {spot.why}")
                return {"point": [spot.x, spot.y]}
            found = flows.driver.find(self.session, self.target(step), step_deadline, visible=True)
            if not (found["exists"] and found["visible"]):
                raise StepFailed(f"{step.describe()} was not visible within {step.timeout_ms} ms")
            return {"box": found["box"], "found_by": found.get("how")}
        if step.action == "assert":
            return flows.check_assertion(self.session, step, step_deadline, self.request.test_id_attribute,
                                         self.run_)
        if step.action == "screenshot":
            shot = self.shot(f"step-{index:03d}-{_stem(step.name or 'screenshot')}", step=index, which="screenshot")
            self.result.screenshots.append(shot)
            return {"screenshot": shot.name}
        if step.action == "act":
            return self.vision(index, step, step_deadline)
        raise StepFailed(f"unknown action {step.action}")

    def wait_for_request(self, step: FlowStep, step_deadline: float) -> dict:
        """The first request since the flow started, not taken by an earlier step, that the check
        names: waited for (and its answer, when a status is checked), then checked."""
        from vision.qa import requests

        check, pages, sid = step.request, self.flows.pages, self.session.id
        assert check is not None
        while True:
            entry = requests.first_match(check, pages.network(sid, self.network_from), self.requests_taken)
            answered = entry is not None and (check.status is None or entry.get("status") is not None
                                              or entry.get("failure") is not None)
            if answered or time.monotonic() >= step_deadline:
                break
            time.sleep(POLL_S)
        if entry is None:
            raise StepFailed(f"no {check.method + ' ' if check.method else ''}request to /{check.url_matches}/ "
                             f"within {step.timeout_ms} ms")
        self.requests_taken.add(entry["seq"])
        detail = pages.request_detail(sid, entry["seq"])
        said = requests.shown(entry, detail)
        wrong = requests.problems(check, entry, detail, self.request.secrets)
        if wrong:
            raise StepFailed(f"{entry.get('method')} {entry.get('url')}: " + "; ".join(wrong))
        return {"request": said}

    def point(self, step: FlowStep, step_deadline: float) -> tuple[int, int, str]:
        """The display pixel of a target that has no DOM element: OCR text, an image, x,y."""
        if step.x is not None and step.y is not None:
            return step.x, step.y, "pixels"
        spot = self.flows.driver.on_screen(self.session, step_deadline, text=step.text,
                                           template=template_png(step.image) if step.image else None,
                                           confidence=step.confidence)
        if not spot:
            where = "in the page nor on the screen" if step.text else "on the screen"
            raise StepFailed(f"{step.describe()} was not found {where} within {step.timeout_ms} ms: {spot.why}")
        return spot.x, spot.y, "ocr" if step.text else "image"

    def target(self, step: FlowStep) -> Target:
        """The step's element as the page layer names it, its test_ids on the flow's attribute."""
        return step.dom_target(self.request.test_id_attribute)

    def _dom_or_pixel(self, step: FlowStep, step_deadline: float, dom: Callable[[Target, int], Any]):
        """The step done on its DOM element (a text target: the DOM first, then OCR), or None when
        it has to be done at a pixel."""
        if step.dom_only():
            return dom(self.target(step), self.ms(step_deadline))
        if step.text is not None:
            try:
                return dom(Target(text=step.text), min(self.ms(step_deadline), DOM_FIRST_MS))
            except ElementNotFound:
                return None  # not in the DOM (a canvas, a native window): OCR
        return None

    def point_at(self, step: FlowStep, step_deadline: float) -> dict:
        """click, dblclick, hover: real pointer input at the element's pixel (found in the DOM, or
        by OCR, an image, x,y)."""
        pages, sid = self.flows.pages, self.session.id
        if step.native is not None:
            return self.flows.native.point_at(sid, step, step_deadline)
        if step.action == "hover":
            acted = self._dom_or_pixel(step, step_deadline, lambda t, ms: pages.hover(sid, t, timeout_ms=ms))
        else:
            count = 2 if step.action == "dblclick" else 1
            acted = self._dom_or_pixel(step, step_deadline,
                                       lambda t, ms: pages.click(sid, t, click_count=count, timeout_ms=ms))
        if acted is not None:
            return {"point": [acted.x, acted.y], "box": acted.box, "found_by": "dom", **_element(acted.element)}
        x, y, how = self.point(step, step_deadline)
        kind = {"click": Click, "dblclick": DoubleClick, "hover": Move}[step.action]
        done = self.flows.desktops.perform(sid, kind(x=x, y=y))
        return {"point": [x, y], "found_by": how, "executed": done.executed, **_element(done.element)}

    def fill(self, step: FlowStep, step_deadline: float) -> dict:
        pages, sid = self.flows.pages, self.session.id
        if step.native is not None:
            return self.flows.native.typed(sid, step, step_deadline, self.typing(step), clear=True)
        secrets = self.request.secrets
        acted = self._dom_or_pixel(step, step_deadline,
                                   lambda t, ms: pages.fill(sid, t, step.value or "", secrets=secrets, timeout_ms=ms))
        if acted is not None:
            return {"point": [acted.x, acted.y], "box": acted.box, "verified": acted.verified, "found_by": "dom",
                    **_element(acted.element)}
        x, y, how = self.point(step, step_deadline)
        typing = self.typing(step)  # untypeable characters are found before anything is clicked
        clicked = self.flows.desktops.perform(sid, Click(x=x, y=y))
        self.flows.desktops.perform(sid, Key(keys=["ctrl+a", "BackSpace"]))
        if typing is not None:
            self.flows.desktops.perform(sid, typing)
        return {"point": [x, y], "found_by": how, **_element(clicked.element)}

    def typing(self, step: FlowStep) -> Type | None:
        """The keyboard action typing a step's value with its placeholders filled (None: no text),
        for a step typed where the focus is, with no element of the page to hand it to."""
        from desktop.actions import UnknownPlaceholder, fill_placeholders

        try:
            text = fill_placeholders(step.value or "", self.request.secrets)
        except UnknownPlaceholder as exc:
            raise InvalidAction(str(exc)) from None
        try:
            return Type(text=text) if text else None
        except ValueError as exc:
            raise StepFailed(f"value: {exc}") from None

    def vision(self, index: int, step: FlowStep, step_deadline: float) -> dict:
        from vision.models import ActRequest

        budget = max(1.0, min(3600.0, step_deadline - time.monotonic()))
        try:
            request = ActRequest(instruction=step.instruction, model=step.model, max_steps=step.max_steps,
                                 script=step.script, budget_seconds=budget, secrets=self.request.secrets,
                                 expect=step.expect or [])
        except ValueError as exc:
            raise StepFailed(f"act: {exc}") from None
        result = self.flows.act(self.session.id, request)
        self.result.act_traces.append(result.trace_id)
        self.run_.record("trace", trace_id=result.trace_id, path=f"/api/v1/traces/{result.trace_id}", step=index)
        if result.status != "done":
            error = result.error or {}
            raise StepFailed(f"act ended {result.status}" + (f": {error.get('code')}: {error.get('message')}"
                                                             if error else ""))
        return {"trace_id": result.trace_id, "answer": result.answer, "steps": len(result.steps),
                "verified": result.verified, "checks": [c.model_dump() for c in result.checks]}


# ---------------------------------------------------------------------------------------- helpers


def _held_words(seen: dict) -> str:
    """What a held assertion saw, in words (pure): its own words, else the facts it returned."""
    if seen.get("saw"):
        return seen["saw"]
    if "diff_pixels" in seen:  # a visual comparison
        return f"{seen['diff_pixels']} px differ from the baseline, within its limits"
    facts = [f"{key} {value}" for key, value in seen.items() if key in ("box", "found_by", "point", "screen_text",
                                                                          "url", "exists")]
    return "; ".join(facts) or "held"


def film_step(receipt, step: FlowStep, detail: dict, at: float, redacted: Callable[[str], str]) -> None:
    """A filmed step's marks: a ring where it pointed, its typing (as written: placeholders) and keys."""
    point = detail.get("point")
    if step.action in ("click", "dblclick", "check", "uncheck", "select", "drag", "fill", "clear", "press") \
            and isinstance(point, (list, tuple)) and len(point) == 2:
        receipt.click(point[0], point[1], at=at)
    if step.action == "fill" and step.value:
        receipt.typed(redacted(step.value), at=at)
    elif step.action == "press" and step.key_list:
        receipt.keys(" ".join(step.key_list), at=at)


def _dom_target(step: FlowStep) -> Target:
    return step.dom_target()


def _selectors(step: FlowStep) -> list[str]:
    """The CSS selectors a step names (its own, its within's, its drop target's), to check before
    the run."""
    found = []
    for named in (step, step.to):
        target: Locating | None = named
        while target is not None:
            if target.selector:
                found.append(target.selector)
            target = target.within
    return found


def _element(element) -> dict:
    """A step's record of the element under its pixel (desktop.browser.hit), when one was read:
    what an export names the step's target by (vision.evidence.export)."""
    return {"element": element.model_dump(mode="json")} if element is not None else {}
