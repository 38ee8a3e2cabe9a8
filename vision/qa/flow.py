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
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from desktop.actions import Click, DoubleClick, Key, Move, Type
from desktop.errors import (
    ElementNotFound,
    EvaluateDisabled,
    GlassdeskError,
    InvalidAction,
    InvalidRequest,
    PageTimeoutError,
)
from desktop.models import LOCATOR_FIELDS, Target
from desktop.session.manager import Session
from vision.evidence.qa_runs import RunWriter
from vision.models.qa import (
    ELEMENT_PRESENCE,
    TARGETED,
    Artifact,
    Expectation,
    FlowResult,
    FlowStep,
    Heal,
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

if TYPE_CHECKING:
    from vision.models import ActRequest, ActResult


class Flows:
    """verify_user_flow, checked whole before its run is made, and the assertions its steps make."""

    def __init__(self, driver: Driver, baselines: BaselineStore, run: StartRun, finish: FinishRun, *,
                 compare_now: Callable[..., dict], act: Callable[[str, ActRequest], ActResult],
                 ask: Callable[..., dict | None] | None = None):
        self.driver = driver
        self.desktops = driver.desktops
        self.pages = driver.pages
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
                               selectors: list[str] = ()) -> None:
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

        want = _squash(expected)
        while True:
            text = screen_text(self.desktops.screenshot(session.id).png)
            if (want in _squash(text)) != negate:
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
        self._asked: dict[str, str] = {}  # a step's heading -> why heal_with's model did not heal it

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
        return max(1, int((step_deadline - time.monotonic()) * 1000))

    def act(self, index: int, step: FlowStep, step_deadline: float) -> dict:
        """Carry out one step; what it did (for the record). A step with a recorded element (an
        exported run) whose own locator finds nothing is healed from the record (``heal``), unless
        the flow is strict; a pixel step with what was recorded there (a native window, a canvas)
        is done at its pixel while that still shows it, else healed (``act_on_screen``)."""
        rec = step.recorded
        if rec is None or step.action not in HEALABLE or not step.target_kinds():
            return self.do(index, step, step_deadline)
        if step.x is not None and step.y is not None and (rec.text or rec.image):
            return self.act_on_screen(index, step, step_deadline)
        # The locator gets part of the step's time: the rest is the heal's.
        first = min(step_deadline, time.monotonic() + HEAL_AFTER_S) if not self.request.strict else step_deadline
        try:
            return self.do(index, step, first)
        except ElementNotFound as exc:
            if self.request.strict:
                raise StepFailed(f"{exc.message} (strict: not healed from the recorded element)") from None
            missed = exc.message
        healed = self.heal(step, step_deadline) or self.heal_by_model(step, step_deadline)
        if healed is None:
            raise StepFailed(f"{missed}; not healed: nothing recorded of the element ({rec.role or 'no role'} "
                             f"{rec.name!r}) matches an element of the same role"
                             + self._model_said(step)) from None
        return self.healed(index, step, *healed, step_deadline)

    def act_on_screen(self, index: int, step: FlowStep, step_deadline: float) -> dict:
        """A pixel step with the text and image recorded at its pixel: done there while the screen
        still shows them there; else re-targeted where the text (OCR) or the image (template) now
        is, or by the model of heal_with. A screen that shows neither anywhere fails the step:
        the recorded pixel alone is not a heal (it is the target that no longer shows)."""
        rec = step.recorded
        assert rec is not None
        png = self.flows.desktops.screenshot(self.session.id).png
        if _still_at(png, rec):
            return self.do(index, step, step_deadline)
        what = _recorded_words(rec)
        if self.request.strict:
            raise StepFailed(f"{step.describe()}: {what} is no longer at the pixel (strict: not healed)")
        healed = self.find_on_screen(step, png) or self.heal_by_model(step, step_deadline)
        if healed is None:
            raise StepFailed(f"{step.describe()}: {what} is no longer at the pixel, nor anywhere on the screen; "
                             "not healed" + self._model_said(step))
        return self.healed(index, step, *healed, step_deadline)

    def healed(self, index: int, step: FlowStep, retargeted: FlowStep, note: dict, step_deadline: float) -> dict:
        """The step done on its healed target, with its evidence: the screen just before and just
        after, each with the recorded box and the healed one drawn (files of their own; the step's
        screenshots stay as taken), and the recorded effect checked: a healed step whose effect
        does not happen fails, so a heal never hides a regression."""
        from vision.qa.heals import heal_images

        rec = step.recorded
        assert rec is not None
        sid = self.session.id
        before = self.flows.desktops.screenshot(sid).png
        # The recorded texts already showing before the healed action are not its effect.
        # Read where they were recorded; a suite older than appeared_on: by the target (a pixel step
        # with no role is a native window or a canvas, with no DOM to read).
        on_screen = rec.appeared_on == "screen" if rec.appeared_on else step.x is not None and rec.role is None
        shown_before = self._shown(rec.appeared, on_screen, before) if rec.appeared and not rec.url_after else []
        detail = self.do(index, retargeted, step_deadline)
        point = detail.get("point")
        heal = Heal(step=index, failed=step.describe(), **note,
                    point=list(point) if isinstance(point, (list, tuple)) and len(point) == 2 else None,
                    recorded_at=[rec.x, rec.y] if rec.x is not None and rec.y is not None else None,
                    recorded_box=rec.box)
        missed = None
        if rec.url_after:
            missed = self._effect(rec.url_after, step_deadline)
            heal.effect = f"the URL became {rec.url_after}" if missed is None else f"did not happen: {missed}"
        elif rec.appeared:
            wanted = [t for t in rec.appeared if t not in shown_before]
            if wanted:
                seen, missed = self._texts_effect(wanted, on_screen, step_deadline)
                heal.effect = f"{seen!r} appeared" if missed is None else f"did not happen: {missed}"
            else:  # nothing it could make appear is absent: the evidence says so, and claims no effect
                heal.effect = "not checked: every recorded text showed before the healed action"
        after = self.flows.desktops.screenshot(sid).png
        drawn = heal_images(before, after, heal.model_dump())
        for which, image in zip(("before", "after"), drawn, strict=True):
            shot = self.run_.artifact(f"step-{index:03d}-heal-{which}", image, kind="heal", step=index,
                                      which=f"heal-{which}")
            setattr(heal, which, shot.name)
        self.result.heals.append(heal)
        out = {**detail, "healed": heal.model_dump(mode="json", exclude_none=True)}
        if missed is not None:
            failure = StepFailed(f"healed by {heal.by} ({heal.matched}), but the recorded effect did not happen: "
                                 f"{missed}")
            failure.detail = out  # the failed step keeps its heal and images
            raise failure
        return out

    def _effect(self, url: str, step_deadline: float) -> str | None:
        """None once the page's URL is the recorded one (looked at until the step's deadline, at
        most EFFECT_WAIT_S); else what it is."""
        deadline = min(step_deadline, time.monotonic() + EFFECT_WAIT_S)
        while True:
            now = self.flows.pages.state(self.session.id).url or ""
            if now == url:
                return None
            if time.monotonic() >= deadline:
                return f"the URL is {now!r}, not {url!r}"
            time.sleep(POLL_S)

    def _shown(self, texts: list[str], on_screen: bool, png: bytes | None = None) -> list[str]:
        """Which of ``texts`` show now: on the screen by OCR (of ``png`` when given), else in the
        page's text (whitespace and case aside, as screen_text_contains compares)."""
        if on_screen:
            from vision.qa.screen_find import screen_text

            now = _squash(screen_text(png if png is not None else self.flows.desktops.screenshot(self.session.id).png))
        else:
            try:
                now = _squash(self.flows.pages.content(self.session.id, "text").content)
            except GlassdeskError:  # no page to read (a dialog, the browser not there): nothing shows
                return []
        return [t for t in texts if _squash(t) in now]

    def _texts_effect(self, texts: list[str], on_screen: bool, step_deadline: float) -> tuple[str | None, str | None]:
        """(the recorded text that showed, None) once one of ``texts`` shows (looked at until the
        step's deadline, at most EFFECT_WAIT_S); else (None, what is missing)."""
        deadline = min(step_deadline, time.monotonic() + EFFECT_WAIT_S)
        while True:
            shown = self._shown(texts, on_screen)
            if shown:
                return shown[0], None
            if time.monotonic() >= deadline:
                where = "the screen (OCR)" if on_screen else "the page"
                return None, f"{where} does not show {' or '.join(repr(t) for t in texts)}"
            time.sleep(POLL_S)

    def find_on_screen(self, step: FlowStep, png: bytes) -> tuple[FlowStep, dict] | None:
        """The step re-targeted where its recorded text (OCR) or template image now is on the
        screen, the pixel keeping its offset from the text; a text or image found at more than one
        place is no heal. With a role recorded (a page's element), the element there must be of
        that kind, as for every heal."""
        from vision.qa.screen_find import NotOnScreen, find_image_on_screen, find_text_on_screen

        rec = step.recorded
        assert rec is not None
        element_at = getattr(self.flows.desktops, "element_at", None)

        def fits(x: int, y: int) -> bool:
            if rec.role is None:
                return True
            return element_at is not None and _same_element_kind(element_at(self.session.id, x, y), rec)

        def moved(x: int, y: int, by: str, matched: str, box: tuple[int, int, int, int]):
            at = step.model_copy(update={**dict.fromkeys(LOCATOR_FIELDS), "exact": False, "image": None, "x": x,
                                         "y": y})
            return at, {"by": by, "matched": matched, "target": {"x": x, "y": y},
                        "box": {"x": box[0], "y": box[1], "width": box[2] - box[0], "height": box[3] - box[1]}}

        if rec.text:
            try:
                found = find_text_on_screen(png, rec.text)
            except NotOnScreen:
                found = None
            if found is not None:
                dx, dy = 0, 0
                if rec.text_box and rec.x is not None and rec.y is not None:
                    dx = rec.x - (rec.text_box[0] + rec.text_box[2]) // 2
                    dy = rec.y - (rec.text_box[1] + rec.text_box[3]) // 2
                x, y = _on_display(found.x + dx, found.y + dy)
                if fits(x, y):
                    return moved(x, y, "ocr", f"text {rec.text!r} at ({x}, {y})", found.box)
        if rec.image:
            try:
                found = find_image_on_screen(png, template_png(rec.image), TEMPLATE_CONFIDENCE)
            except NotOnScreen:
                found = None
            if found is not None and fits(found.x, found.y):
                return moved(found.x, found.y, "image",
                             f"the recorded image at ({found.x}, {found.y}), score {found.score:.2f}", found.box)
        return None

    def heal_by_model(self, step: FlowStep, step_deadline: float) -> tuple[FlowStep, dict] | None:
        """heal_with: the model is shown the screen now and asked for this one step (its recorded
        instruction); the step is re-targeted where it points. With the browser in front and a role
        recorded, the element there must have that role: a model does not make a heal onto another
        kind of element."""
        model = self.request.heal_with
        ask = self.flows.ask
        if model is None or ask is None:
            return None
        rec = step.recorded
        instruction = (rec.instruction if rec is not None and rec.instruction else None) or step.heading()
        asked = (f"Replaying a recorded test, this step no longer finds its target: {step.heading()}. "
                 f"The step was: {instruction}. Point at its target on the screen now: one "
                 f"{'click' if step.action != 'hover' else 'move'} on it, nothing else.")
        try:
            point = ask(self.session.id, model, asked, self.request.heal_script)
        except GlassdeskError as exc:
            self._asked[step.heading()] = f"the model {model} could not be asked: {_reason(exc)}"
            return None
        if point is None:
            self._asked[step.heading()] = f"the model {model} pointed at nothing"
            return None
        x, y = _on_display(int(point["x"]), int(point["y"]))
        element = None
        element_at = getattr(self.flows.desktops, "element_at", None)
        if element_at is not None:
            element = element_at(self.session.id, x, y)
        if rec is not None and rec.role is not None and (element is None or element.role != rec.role):
            seen = f"{element.role} {element.name!r}" if element is not None else "no page element"
            self._asked[step.heading()] = (f"the model {model} pointed at ({x}, {y}): {seen}, not a {rec.role}; "
                                           "not taken")
            return None
        # The new target: the element's best locator there when the page has one, else the pixel.
        if element is not None and element.locators:
            target = element.locators[0]
            fields = target.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
            retargeted = _on(step, target)
            matched = f"({x}, {y}): {element.role} {element.name!r}, {target.describe()}"
            box = element.box
        else:
            fields = {"x": x, "y": y}
            retargeted = step.model_copy(update={**dict.fromkeys(LOCATOR_FIELDS), "exact": False, "image": None,
                                                 "x": x, "y": y})
            matched = f"({x}, {y})"
            box = None
        return retargeted, {"by": "model", "matched": matched, "target": fields, "box": box,
                            "model": point.get("model") or model, "said": (point.get("said") or "")[:500] or None}

    def _model_said(self, step: FlowStep) -> str:
        said = self._asked.get(step.heading())
        return f"; heal_with: {said}" if said else ""

    def heal(self, step: FlowStep, step_deadline: float) -> tuple[FlowStep, dict] | None:  # noqa: C901
        """The step on what was recorded of its element: the other recorded locators, then the
        role and a similar accessible name in the accessibility snapshot, then the recorded text by
        OCR and the template image (when recorded), then the recorded pixel. A candidate counts
        only when it is one element, of the recorded role, with a name like the recorded one (read
        under its pixel, as the recording was): never another kind of element."""
        rec = step.recorded
        pages, sid = self.flows.pages, self.session.id
        element_at = getattr(self.flows.desktops, "element_at", None)
        if rec is None or element_at is None:
            return None

        def fits(box: dict | None) -> tuple[bool, Any]:
            if not box:
                return False, None
            found = element_at(sid, box["x"] + box["width"] // 2, box["y"] + box["height"] // 2)
            return _same_element_kind(found, rec), found

        def probe(target: Target) -> dict:
            return pages.probe(sid, retarget_test_ids(target, self.request.test_id_attribute), "visible",
                               max(1, min(HEAL_PROBE_MS, self.ms(step_deadline))))

        def fields(target: Target) -> dict:
            return target.model_dump(mode="json", exclude_none=True, exclude_defaults=True)

        for alternative in rec.locators:
            found = probe(alternative)
            if found["exists"] and found["visible"] and found.get("matches") == 1:
                ok, element = fits(found.get("box"))
                if ok:
                    return _on(step, alternative), {"by": "locator", "matched": alternative.describe(),
                                                    "box": found.get("box"), "target": fields(alternative)}
        if rec.role and rec.name:
            snapshot = pages.content(sid, "accessibility").content
            named = _closest_name(str(snapshot), rec.role, rec.name)
            if named is not None:
                candidate = Target(role=rec.role, name=named, exact=True)
                found = probe(candidate)
                if found["exists"] and found["visible"] and found.get("matches") == 1 and fits(found.get("box"))[0]:
                    return _on(step, candidate), {"by": "name", "matched": candidate.describe(),
                                                  "box": found.get("box"), "target": fields(candidate)}
        if rec.text or rec.image:
            on_screen = self.find_on_screen(step, self.flows.desktops.screenshot(sid).png)
            if on_screen is not None:
                return on_screen
        if rec.x is not None and rec.y is not None:
            element = element_at(sid, rec.x, rec.y)
            if _same_element_kind(element, rec):
                return (step.model_copy(update={**dict.fromkeys(LOCATOR_FIELDS), "exact": False, "x": rec.x,
                                                "y": rec.y}),
                        {"by": "pixel", "matched": f"({rec.x}, {rec.y}): {element.role} {element.name!r}",
                         "box": element.box, "target": {"x": rec.x, "y": rec.y}})
        return None

    def do(self, index: int, step: FlowStep, step_deadline: float) -> dict:  # noqa: C901
        """Carry out one step as it is written."""
        flows, sid = self.flows, self.session.id
        pages = flows.pages
        if step.action in ("navigate", "reload", "back", "forward"):
            how, url = ("goto", step.url) if step.action == "navigate" else (step.action, None)
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
            done = flows.desktops.perform(sid, Key(keys=step.key_list))
            return {"executed": done.executed}
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
    for target in (step, step.to):
        while target is not None:
            if target.selector:
                found.append(target.selector)
            target = target.within
    return found


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def _element(element) -> dict:
    """A step's record of the element under its pixel (desktop.browser.hit), when one was read:
    what an export names the step's target by (vision.evidence.export)."""
    return {"element": element.model_dump(mode="json")} if element is not None else {}


# Steps healed from a recorded element, and how long their own locator is given first.
HEALABLE = ("click", "dblclick", "hover", "fill", "check", "uncheck")
HEAL_AFTER_S = 3.0
HEAL_PROBE_MS = 1000
EFFECT_WAIT_S = 5.0  # how long a healed step's recorded effect (its URL, its texts) is waited for
TEMPLATE_CONFIDENCE = 0.9  # a recorded template image must match this well to be the target
EVALUATED_LIMIT = 2000  # characters of an evaluate step's JSON value kept in its record
# How far (px) the recorded text or image may have moved and still be "at the pixel" (a repaint, a
# font's hinting): beyond it the target has moved, and finding it again is a heal.
STILL_PX = 4
# How alike a healed element's accessible name must be to the recorded one: the same words in
# much the same order (difflib's ratio over the words, at least this), or the same letters and
# digits once spaces and punctuation are dropped ("E-mail" for "Email"). Words, not letters:
# "Delete account" is 86% the letters of "Create account" and half its words.
NAME_SIMILARITY = 0.6
_SNAPSHOT_LINE = re.compile(r'^\s*-\s+([a-z]+)(?:\s+"((?:[^"\\]|\\.)*)")?')


def similar_names(a: str | None, b: str | None) -> bool:
    """Whether a heal may take name ``a`` for the recorded ``b`` (pure)."""
    import difflib

    words_a, words_b = re.findall(r"\w+", (a or "").casefold()), re.findall(r"\w+", (b or "").casefold())
    if "".join(words_a) == "".join(words_b):
        return True
    return difflib.SequenceMatcher(None, words_a, words_b).ratio() >= NAME_SIMILARITY


def _same_element_kind(element, rec) -> bool:
    """The element read under a candidate's pixel is the recorded kind: the same role (or tag, with
    no role recorded) and, when a name was recorded, a similar one (pure)."""
    if element is None:
        return False
    if rec.role is not None and element.role != rec.role:
        return False
    if rec.name and not similar_names(element.name, rec.name):
        return False
    return True


def _closest_name(snapshot: str, role: str, name: str) -> str | None:
    """The accessible name, among the snapshot's elements of ``role``, most like ``name`` (pure),
    if alike enough: Playwright's aria snapshot lines read ``- button "Save" [ref=e3]``."""
    import difflib

    best, score = None, 0.0
    for line in snapshot.splitlines():
        m = _SNAPSHOT_LINE.match(line)
        if m and m.group(1) == role and m.group(2):
            candidate = m.group(2).replace('\\"', '"')
            if similar_names(candidate, name):
                ratio = difflib.SequenceMatcher(None, candidate.casefold(), name.casefold()).ratio()
                if ratio > score:
                    best, score = candidate, ratio
    return best


def _on(step: FlowStep, target: Target) -> FlowStep:
    """The step retargeted: its locator fields replaced by the target's."""
    fields = {**dict.fromkeys(LOCATOR_FIELDS), "exact": False,
              **target.model_dump(exclude_none=True, exclude_defaults=True)}
    return step.model_copy(update=fields)


def _on_display(x: int, y: int) -> tuple[int, int]:
    from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH

    return max(0, min(SCREEN_WIDTH - 1, x)), max(0, min(SCREEN_HEIGHT - 1, y))


def _recorded_words(rec) -> str:
    """What was recorded at a pixel, in words (pure)."""
    parts = ([f"the text {rec.text!r}"] if rec.text else []) + (["the recorded image"] if rec.image else [])
    return " and ".join(parts) or "what was recorded"


def _still_at(png: bytes, rec) -> bool:
    """The screen still shows, at the recorded pixel, what was recorded there: the template image
    within STILL_PX of its place, or (no image recorded) the text OCR read there, over the pixel."""
    from vision.qa.screen_find import NotOnScreen, find_image_on_screen, find_text_on_screen

    if rec.x is None or rec.y is None:
        return False
    if rec.image:
        template = template_png(rec.image)
        try:
            found = find_image_on_screen(_around(png, rec.x, rec.y, template), template, TEMPLATE_CONFIDENCE)
        except (NotOnScreen, InvalidRequest):
            return False
        # The crop is the template's region grown by STILL_PX on each side: found at its centre, or near.
        return True if found else False
    try:
        found = find_text_on_screen(png, rec.text)
    except NotOnScreen:
        return False
    x0, y0, x1, y1 = found.box
    return x0 - STILL_PX <= rec.x <= x1 + STILL_PX and y0 - STILL_PX <= rec.y <= y1 + STILL_PX


def _around(png: bytes, x: int, y: int, template: bytes) -> bytes:
    """The screenshot's region where the template was recorded, grown by STILL_PX on each side, as PNG."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(template)) as t:
        tw, th = t.size
    with Image.open(io.BytesIO(png)) as screen:
        left, top = x - tw // 2 - STILL_PX, y - th // 2 - STILL_PX
        box = (max(0, left), max(0, top), min(screen.width, left + tw + 2 * STILL_PX),
               min(screen.height, top + th + 2 * STILL_PX))
        out = io.BytesIO()
        screen.crop(box).save(out, "PNG")
    return out.getvalue()
