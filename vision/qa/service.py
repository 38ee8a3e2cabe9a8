"""The QA service: the six verbs, flows with retries and an aggregate timeout, baseline approval.

``QaService`` is built by ``Glassdesk`` (``glassdesk.qa``) and every door calls it. It is given
what it calls, not the application: the desktop service (``DesktopService``), the data directory
its runs and baselines are kept under, and ``act``, the call that runs a vision instruction (a
flow's ``act`` step). It drives the visible browser through the page layer
(``DesktopService.pages``: navigate, state, console, network, click, fill, select, screenshots) and
the real pixels through the session (a click found by OCR or by an image is real input at that
pixel). Every call is one QA run (``vision.qa.runs``): its screenshots hashed and timestamped in a
hash-chained manifest.

What is a result and what is an error: a page that does not load, an element that is not there, a
flow step that fails, a visual difference are answers (200, ``success``/``passed`` false, with the
reason). A request that cannot be carried out as given (a bad URL, a missing baseline, a person in
control of the session) is a typed error raised before the run is created, so it creates nothing.
"""

from __future__ import annotations

import io
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from desktop.actions import Click, Key, Region, Type
from desktop.errors import (
    ElementNotFound, GlassdeskError, InvalidAction, InvalidRequest, InvalidSelector, PageTimeoutError, PageUnavailable,
    SessionBusy, SessionUnavailable,
)
from desktop.browser.pages import Target
from desktop.session.manager import QUEUE_WAIT_S, Session
from vision.errors import QaRunCorruptError, QaRunNotFoundError
from vision.qa.baselines import BaselineStore
from vision.qa.diff import ImageSizeMismatch, compare, decode_png, diff_image, mask_boxes
from vision.qa.models import (
    VERBS, Artifact, AnalyzeConsoleRequest, BaselineResult, CaptureBaselineRequest, CompareRequest, CompareResult,
    ConsoleEntry, ConsoleResult, ElementResult, FlowResult, FlowStep, PageLoadResult, QaRun, Shot, ShotComparison,
    StepResult, SuccessCondition, VerifyElementRequest, VerifyPageLoadsRequest, VerifyReport, VerifyUserFlowRequest,
    check_name, template_png,
)
from vision.qa.runs import (
    BadName, QaRunCorrupt, QaRunNotFound, QaRunStore, RunWriter, render_html, render_junit, safe_stem,
)

if TYPE_CHECKING:
    from desktop.service.desktop import DesktopService
    from vision.loop import ActRequest, ActResult

log = logging.getLogger("glassdesk.qa")
T = TypeVar("T")

ATTEMPTS = 3  # a step is tried at most this often on a transient failure
HEAL_WAIT_S = 15  # how long a retry waits for a healing browser or desktop to be ready again
DOM_FIRST_MS = 1500  # a text target's share of the step's time in the DOM before OCR takes over
POLL_S = 0.1  # how often a condition that must come true is looked at again
CONSOLE_LIMIT = 200  # console lines kept with a test case
# The XFCE panel at the bottom of the display (desktop/assets/xfce4-panel.xml; its window is at
# y 1051, 29 px tall): masked in every display-wide comparison. Its clock changes each minute and
# sits right of the window buttons, so it moves with how many windows are open: the whole strip is
# masked, not a box that would miss the clock once another window opens.
CLOCK_BOX = [0, 1051, 1920, 1080]
# How long a verb waits for another QA verb running on the same session before it is refused with
# session_busy (as a desktop action waits for the one before it).
VERB_QUEUE_WAIT_S = QUEUE_WAIT_S
# Page-controlled text a caller's regular expression is applied to is cut to this many characters
# (a console line, a URL): a cheap bound on what a pathological pattern can cost.
REGEX_TEXT_LIMIT = 10_000


@dataclass(frozen=True)
class Miss:
    """Not on the screen, and why (what OCR read instead, how close the image came)."""

    why: str

    def __bool__(self) -> bool:
        return False


@dataclass
class _VerbHolder:
    """The QA verb running on a session: which thread runs it, what it is, when it must be done."""

    owner: int
    what: str
    ends_at: float
    depth: int = 1


class AssertionFailed(Exception):
    """What a step asserts does not hold: a test failure, never retried."""


class StepFailed(Exception):
    """A step that cannot be done (nothing to click, no model): a failure, not retried."""


def _transient(exc: BaseException, navigation: bool) -> bool:
    """Worth another try: the browser or the desktop healing, a target detached under the
    operation (page_unavailable), the session's own queue; a navigation that timed out."""
    if isinstance(exc, (PageUnavailable, SessionUnavailable, SessionBusy)):
        return True
    return navigation and isinstance(exc, PageTimeoutError)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, GlassdeskError):
        return f"{exc.code}: {exc.message}"
    return str(exc) or type(exc).__name__


class QaService:
    def __init__(self, desktops: DesktopService, data_dir: str | Path, *,
                 act: Callable[[str, ActRequest], ActResult]):
        self.desktops = desktops
        self.pages = desktops.pages
        self.data_dir = Path(data_dir)
        self.act = act
        self.runs = QaRunStore(self.data_dir)
        self._verbs = threading.Condition()
        self._holders: dict[str, _VerbHolder] = {}
        self._retrying_here = threading.local()
        # Made here, not on first use: two first calls at once would each make one, with its own lock.
        self.baselines = BaselineStore(self.data_dir)

    def close_interrupted(self) -> list[str]:
        return self.runs.close_interrupted()

    # ------------------------------------------------------------------ runs

    # ------------------------------------------------------------------ one verb at a time

    @contextmanager
    def _one_verb(self, session_id: str, verb: str, timeout_ms: int) -> Iterator[None]:
        """Hold the session for one QA verb: a second verb on it waits at most VERB_QUEUE_WAIT_S for
        the first, then is session_busy with when to try again (their steps would interleave)."""
        me = threading.get_ident()
        give_up = time.monotonic() + VERB_QUEUE_WAIT_S
        with self._verbs:
            while (holder := self._holders.get(session_id)) is not None and holder.owner != me:
                left = give_up - time.monotonic()
                if left <= 0:
                    raise SessionBusy(f"session {session_id} is running {holder.what}; one QA verb runs on a session "
                                      "at a time", retry_after=max(1.0, holder.ends_at - time.monotonic()))
                self._verbs.wait(left)
            if holder is not None:
                holder.depth += 1
            else:
                self._holders[session_id] = _VerbHolder(me, f"the QA verb {verb}",
                                                        time.monotonic() + timeout_ms / 1000)
        try:
            yield
        finally:
            with self._verbs:
                holder = self._holders[session_id]
                holder.depth -= 1
                if not holder.depth:
                    del self._holders[session_id]
                    self._verbs.notify_all()

    def check_idle(self, session_id: str) -> None:
        """session_busy while another thread runs a QA verb on the session: a vision run started
        meanwhile would act between the verb's steps (a flow's own act step passes: same thread)."""
        with self._verbs:
            holder = self._holders.get(session_id)
            if holder is not None and holder.owner != threading.get_ident():
                raise SessionBusy(f"session {session_id} is running {holder.what}; wait for it to end",
                                  retry_after=max(1.0, holder.ends_at - time.monotonic()))

    # ------------------------------------------------------------------ runs

    @contextmanager
    def _run(self, verb: str, name: str | None, session: Session, request: Any,
             secrets: tuple[str, ...] = ()) -> Iterator[RunWriter]:
        """One QA run around a verb's work: the session held for it (see _one_verb), the run
        created, recorded (and the display filmed when asked), and closed as ``error`` with the
        reason if the work raises."""
        with self._one_verb(session.id, verb, getattr(request, "timeout_ms", 10_000)):
            with self._recorded_run(verb, name, session, request, secrets) as run:
                yield run

    @contextmanager
    def _recorded_run(self, verb: str, name: str | None, session: Session, request: Any,
                      secrets: tuple[str, ...]) -> Iterator[RunWriter]:
        filming = bool(getattr(request, "record_video", False))
        if filming:  # a server that cannot record says so before anything is made
            from desktop.x11.recorder import find_ffmpeg

            find_ffmpeg()
        dump = request.model_dump(mode="json", exclude={"secrets"})
        run = self.runs.create(verb, name or verb, session_id=session.id, request=dump, secrets=secrets)
        run.t0 = time.monotonic()  # type: ignore[attr-defined]
        run.video = None  # type: ignore[attr-defined]
        try:
            if filming:
                run.video = self._start_video(run, session)  # type: ignore[attr-defined]
            yield run
        except BaseException as exc:
            self._stop_video(run)
            if not run.finished:
                run.finish("error", reason=_reason(exc))
            if isinstance(exc, GlassdeskError):  # its message may quote a value typed from a secret
                exc.message = run.redacted(exc.message)
                exc.args = (exc.message,)
            raise

    def _finish(self, run: RunWriter, status: str, result: Any, case: dict) -> Any:
        """Record the test case and the verb's answer, and close the run."""
        video = self._stop_video(run)
        result.test_run_id = run.run_id
        result.report_url = f"/api/v1/qa/runs/{run.run_id}/report"
        if video is not None and hasattr(result, "video"):
            result.video = video
        run.record("case", status=status, duration_ms=self._elapsed(run), **case)
        stored = run.finish(status, result=result.model_dump(mode="json"))
        # The caller gets what the evidence keeps: a secret is no more in the answer than on disk.
        return type(result).model_validate(stored["result"])

    @staticmethod
    def _elapsed(run: RunWriter) -> int:
        return round((time.monotonic() - run.t0) * 1000)  # type: ignore[attr-defined]

    VIDEO_FILE = "video.webm"

    def _start_video(self, run: RunWriter, session: Session):
        """The display filmed from now, or None (the record says why): the verdict does not depend
        on the film, so a recording that will not start costs the verb nothing else."""
        from desktop.x11.recorder import Recorder, RecorderError

        recorder = Recorder(session.display, run.dir / self.VIDEO_FILE, fps=10, fmt="webm")
        try:
            recorder.start()
        except RecorderError as exc:
            log.warning("run %s: no video: %s", run.run_id, exc)
            (run.dir / self.VIDEO_FILE).unlink(missing_ok=True)  # a file the manifest will not list
            run.record("note", message=f"no video: {exc.message}")
            return None
        return recorder

    def _stop_video(self, run: RunWriter) -> Artifact | None:
        recorder = getattr(run, "video", None)
        if recorder is None:
            return None
        run.video = None  # type: ignore[attr-defined]
        try:
            path = recorder.stop()
        except Exception as exc:  # the verdict stands without its film; the record says why
            log.warning("run %s: no video: %s", run.run_id, exc)
            run.record("note", message=f"no video: {getattr(exc, 'message', None) or exc}")
            partial = run.dir / self.VIDEO_FILE
            if partial.is_file() and partial.stat().st_size > 0:  # what ffmpeg wrote before it failed
                return run.adopt(partial.name, kind="video")
            partial.unlink(missing_ok=True)  # nothing worth keeping: no file the manifest does not list
            return None
        return run.adopt(path.name, kind="video")

    def _shot(self, run: RunWriter, session: Session, stem: str, **about: Any) -> Artifact:
        """The display now, stored as evidence."""
        return run.artifact(stem, self.desktops.screenshot(session.id).png, **about)

    def _acting(self, session_id: str | None, url: str | None = None) -> Session:
        """The session, if an agent may act on it now and ``url`` may be opened: checked before a
        run is created, so a refusal creates nothing."""
        if url is not None:
            self.desktops.check_url(url)
        session = self.desktops.session(session_id)
        self.desktops.check_agent(session.id)
        if url is not None:
            self.desktops.check_url(url, session)
        return session

    def _retrying(self, session: Session, work: Callable[[], T], *, navigation: bool = False,
                  deadline: float | None = None) -> tuple[T, int]:
        """``work()``, tried up to ATTEMPTS times on a transient failure, never past ``deadline``;
        (its value, attempts). Retries happen at one level only: inside another ``_retrying`` (a
        flow step's look for its element) the work is tried once and the outer level tries again,
        so a step is attempted ATTEMPTS times, not ATTEMPTS squared."""
        if getattr(self._retrying_here, "active", False):
            return work(), 1
        self._retrying_here.active = True
        try:
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    return work(), attempt
                except (AssertionFailed, StepFailed):
                    raise
                except GlassdeskError as exc:
                    out_of_time = deadline is not None and time.monotonic() >= deadline
                    if attempt == ATTEMPTS or out_of_time or not _transient(exc, navigation):
                        raise
                    log.info("transient failure (attempt %d of %d): %s", attempt, ATTEMPTS, _reason(exc))
                    self._await_ready(session, deadline, exc.retry_after)
            raise AssertionError("unreachable")
        finally:
            self._retrying_here.active = False

    def _await_ready(self, session: Session, deadline: float | None, retry_after: float | None) -> None:
        """Wait (bounded) until the session and its browser are ready again after a heal."""
        limit = time.monotonic() + min(HEAL_WAIT_S, retry_after or HEAL_WAIT_S)
        if deadline is not None:
            limit = min(limit, deadline)
        time.sleep(min(0.25, max(0.0, limit - time.monotonic())))
        self.desktops.wait_ready(session.id, limit - time.monotonic())

    def _check_selectors(self, session: Session, selectors: list[str]) -> None:
        """invalid_selector, before the run is made, for a CSS selector the browser cannot parse:
        one DevTools call, whatever page is loaded (parsing does not depend on it). Only the
        browser knows its selector syntax (Playwright's extensions included); if it cannot answer
        now (a heal, a dialog), the verb meets the selector as it runs."""
        if not selectors:
            return
        try:
            self.pages.boxes(session.id, list(dict.fromkeys(selectors)), "page")
        except InvalidSelector:
            raise
        except GlassdeskError:
            pass

    def _navigate(self, session: Session, url: str, deadline: float) -> dict:
        """Load ``url``, retried on a transient failure, all of it by ``deadline``."""
        done, _ = self._retrying(session, lambda: self.pages.navigate(session.id, "goto", url, "load",
                                                                      _ms_left(deadline)),
                                 navigation=True, deadline=deadline)
        return done

    # ------------------------------------------------------------------ verify_page_loads

    def verify_page_loads(self, session_id: str | None, request: VerifyPageLoadsRequest) -> PageLoadResult:
        session = self._acting(session_id, request.url)
        with self._run("verify_page_loads", request.name, session, request) as run:
            # Whatever happens to the page or the desktop from here is this verb's answer (200,
            # success false, the reason), never an error: only a person taking over ends it.
            deadline = time.monotonic() + request.timeout_ms / 1000
            result = PageLoadResult(test_run_id=run.run_id, success=False)
            problems: list[str] = []
            try:
                console_from, network_from = self.pages.cursors(session.id)
                try:
                    done = self._navigate(session, request.url, deadline)
                    result.status_code, result.url = done["status"], done["url"]
                    result.load_time_ms = done["load_time_ms"]
                    result.title = self.pages.state(session.id).title
                except GlassdeskError as exc:
                    if exc.code == "operator_in_control":
                        raise
                    problems.append(f"the page did not load: {_reason(exc)}")
                result.console_errors = [_console_line(e) for e in self.pages.console(
                    session.id, console_from, "error")][:CONSOLE_LIMIT]
                result.failed_requests = [_request_line(e) for e in self.pages.network(
                    session.id, network_from, True)][:CONSOLE_LIMIT]
            except GlassdeskError as exc:
                if exc.code == "operator_in_control":
                    raise
                problems.append(f"the browser's record could not be read: {_reason(exc)}")
            if not problems:
                if result.status_code is not None and result.status_code >= 400:
                    problems.append(f"HTTP {result.status_code} from {result.url}")
                elif request.expected_title is not None and (result.title or "").strip() != request.expected_title.strip():
                    problems.append(f"title {result.title!r}, expected {request.expected_title!r}")
            try:
                result.screenshot = self._shot(run, session, "page", step="loaded")
            except GlassdeskError as exc:
                if exc.code == "operator_in_control":
                    raise
                problems.append(f"no screenshot: {_reason(exc)}")
            result.reason = "; ".join(problems) or None
            result.success = not problems
            return self._finish(run, "passed" if result.success else "failed", result, {
                "name": request.name or f"page loads: {request.url}",
                "screenshots": [result.screenshot.name] if result.screenshot else [],
                "console_logs": result.console_errors, "failure_reason": result.reason})

    # ------------------------------------------------------------------ verify_element_exists

    def verify_element_exists(self, session_id: str | None, request: VerifyElementRequest) -> ElementResult:
        session = self._acting(session_id, request.url) if request.url else self.desktops.session(session_id)
        target = Target(selector=request.selector, ref=request.ref, text=request.text)
        self._check_selectors(session, [request.selector] if request.selector else [])
        with self._run("verify_element_exists", request.name, session, request) as run:
            result = ElementResult(test_run_id=run.run_id, success=False, exists=False, visible=False)
            miss = None
            deadline = time.monotonic() + request.timeout_ms / 1000
            try:
                if request.url:
                    self._navigate(session, request.url, deadline)
                found = self._find(session, target, deadline, visible=request.should_be_visible)
                result.exists, result.visible = found["exists"], found["visible"]
                result.box, result.matches, result.found_by = found["box"], found["matches"], found.get("how")
                miss = found.get("miss")
            except GlassdeskError as exc:
                if exc.code in ("operator_in_control", "invalid_selector"):
                    raise
                result.reason = _reason(exc)
            screen = self.desktops.screenshot(session.id)
            if result.box:
                result.screenshot["element"] = run.artifact("element", _crop(screen.png, result.box))
                result.screenshot["screen"] = run.artifact("screen-marked", _marked(screen.png, result.box))
            else:
                result.screenshot["screen"] = run.artifact("screen", screen.png)
            result.success = result.exists and (result.visible or not request.should_be_visible)
            if not result.success and result.reason is None:
                result.reason = (f"no element for {target.describe()}" if not result.exists
                                 else f"{target.describe()} exists but is not visible")
                if miss:
                    result.reason += f"; nor on the screen: {miss}"
            return self._finish(run, "passed" if result.success else "failed", result, {
                "name": request.name or f"element exists: {target.describe()}",
                "screenshots": [a.name for a in result.screenshot.values()], "failure_reason": result.reason})

    def _find(self, session: Session, target: Target, deadline: float, *, visible: bool) -> dict:
        """The element in the DOM, else (a text target) on the screen by OCR."""
        remaining = max(1, int((deadline - time.monotonic()) * 1000))
        state = "visible" if visible else "attached"
        dom_ms = min(remaining, DOM_FIRST_MS) if target.text is not None else remaining
        found, _ = self._retrying(session, lambda: self.pages.probe(session.id, target, state, dom_ms),
                                  deadline=deadline)
        found["how"] = "dom" if found["exists"] else None
        if target.text is None or (found["exists"] and (found["visible"] or not visible)):
            return found
        spot = self._on_screen(session, deadline, text=target.text)
        if not spot:
            found["miss"] = spot.why
            return found
        return {"exists": True, "visible": True, "matches": 1, "how": "ocr", "text": target.text, "value": None,
                "box": {"x": spot.box[0], "y": spot.box[1], "width": spot.box[2] - spot.box[0],
                        "height": spot.box[3] - spot.box[1]}}

    def _on_screen(self, session: Session, deadline: float, *, text: str | None = None,
                   template: bytes | None = None, confidence: float = 0.9):
        """Where the text (OCR) or the image is on the display, looked for until ``deadline`` (at
        least once); a Miss (false, with what was seen) when it never showed."""
        from vision.qa.screen_find import NotOnScreen, find_image_on_screen, find_text_on_screen

        while True:
            png = self.desktops.screenshot(session.id).png
            try:
                if text is not None:
                    return find_text_on_screen(png, text)
                return find_image_on_screen(png, template, confidence)
            except NotOnScreen as exc:
                if time.monotonic() >= deadline:
                    return Miss(str(exc))
            time.sleep(POLL_S)

    # ------------------------------------------------------------------ verify_user_flow

    def verify_user_flow(self, session_id: str | None, request: VerifyUserFlowRequest) -> FlowResult:
        session = self._acting(session_id, request.start_url)
        # Everything that can be checked is, before anything runs: a bad request makes no run.
        from desktop.actions import UnknownPlaceholder, fill_placeholders

        for number, step in enumerate(request.steps, 1):
            if step.action == "navigate":
                self.desktops.check_url(step.url, session)
            if step.action == "fill":
                try:
                    fill_placeholders(step.value or "", request.secrets)
                except UnknownPlaceholder as exc:
                    raise InvalidRequest(f"steps[{number}].value: {exc}") from None
            if step.assertion is not None and step.assertion.type == "visual_matches":
                self.baselines.get(step.assertion.baseline_id or "")  # a missing one: 404
        condition = request.success_condition
        self._check_selectors(session, [s.selector for s in request.steps if s.selector]
                              + ([condition.selector] if condition is not None and condition.selector else []))
        secrets = tuple(request.secrets.values())
        with self._run("verify_user_flow", request.name, session, request, secrets) as run:
            flow = _Flow(self, run, session, request)
            flow.run()
            result = flow.result
            status = "passed" if result.success else ("error" if flow.errored else "failed")
            return self._finish(run, status, result, {
                "name": request.name or f"flow from {request.start_url}",
                "screenshots": [a.name for a in result.screenshots], "console_logs": result.console_logs,
                "failure_reason": result.failure_reason,
                "steps": [s.model_dump(mode="json") for s in result.steps]})

    # ------------------------------------------------------------------ assertions

    def check_assertion(self, session: Session, step: FlowStep, deadline: float) -> dict:
        """Raise AssertionFailed unless the step's assertion holds by ``deadline`` (it is looked at
        until then, as a person would wait for a page to settle); what was seen otherwise."""
        a = step.assertion
        assert a is not None
        if a.type in ("exists", "visible", "hidden"):
            return self._element_state(session, step, a.type, deadline)
        if a.type in ("text_contains", "value_equals"):
            target = _dom_target(step)
            key = "text" if a.type == "text_contains" else "value"
            seen = None
            while True:
                remaining = max(1, int((deadline - time.monotonic()) * 1000))
                found, _ = self._retrying(session, lambda: self.pages.probe(session.id, target, "attached",
                                                                            min(remaining, 1000)), deadline=deadline)
                seen = found[key]
                ok = seen is not None and (a.expected in seen if key == "text" else seen == a.expected)
                if ok:
                    return {key: seen[:500]}
                if time.monotonic() >= deadline:
                    what = "no element" if not found["exists"] else f"{key} {(seen or '')[:300]!r}"
                    raise AssertionFailed(f"{target.describe()}: {what}; expected {key} "
                                          f"{'containing' if key == 'text' else 'equal to'} {a.expected!r}")
                time.sleep(POLL_S)
        if a.type == "url_matches":
            return self._url_matches(session, a.expected or "", deadline)
        if a.type == "screen_text_contains":
            return self._screen_text(session, a.expected or "", deadline)
        if a.type == "visual_matches":
            compared = self.compare_now(session, a.baseline_id or "", threshold=a.threshold)
            if not compared["passed"]:
                raise AssertionFailed(f"baseline {a.baseline_id}: {compared['diff_percentage']:.3f}% of pixels "
                                      f"differ (threshold {a.threshold * 100:g}%)"
                                      + (f"; {compared['reason']}" if compared.get("reason") else ""))
            return compared
        raise AssertionFailed(f"unknown assertion {a.type}")

    def _element_state(self, session: Session, step: FlowStep, kind: str, deadline: float) -> dict:
        if step.image is not None:
            spot = self._on_screen(session, deadline, template=template_png(step.image), confidence=step.confidence)
            if (not spot) != (kind == "hidden"):
                raise AssertionFailed(f"{step.describe()} is on the screen" if spot else spot.why)
            return {"point": [spot.x, spot.y]} if spot else {}
        target = _dom_target(step)
        if kind == "hidden":
            remaining = max(1, int((deadline - time.monotonic()) * 1000))
            found, _ = self._retrying(session, lambda: self.pages.probe(session.id, target, "hidden", remaining),
                                      deadline=deadline)
            if found["visible"]:
                raise AssertionFailed(f"{target.describe()} is still visible")
            if target.text is not None and self._on_screen(session, time.monotonic(), text=target.text):
                raise AssertionFailed(f"{target.describe()} is visible on the screen")
            return {"exists": found["exists"]}
        found = self._find(session, target, deadline, visible=kind == "visible")
        if not found["exists"]:
            raise AssertionFailed(f"no element for {target.describe()}"
                                  + (f"; nor on the screen: {found['miss']}" if found.get("miss") else ""))
        if kind == "visible" and not found["visible"]:
            raise AssertionFailed(f"{target.describe()} exists but is not visible")
        return {"box": found["box"], "found_by": found.get("how")}

    def _url_matches(self, session: Session, pattern: str, deadline: float) -> dict:
        regex = re.compile(pattern)
        while True:
            url = self.pages.state(session.id).url or ""
            if regex.search(url[:REGEX_TEXT_LIMIT]):
                return {"url": url}
            if time.monotonic() >= deadline:
                raise AssertionFailed(f"the URL {url!r} does not match {pattern!r}")
            time.sleep(POLL_S)

    def _screen_text(self, session: Session, expected: str, deadline: float) -> dict:
        from vision.qa.screen_find import screen_text

        want = _squash(expected)
        while True:
            text = screen_text(self.desktops.screenshot(session.id).png)
            if want in _squash(text):
                return {"screen_text": expected}
            if time.monotonic() >= deadline:
                raise AssertionFailed(f"the screen does not show {expected!r}; it reads: {text[:300]!r}")
            time.sleep(POLL_S)

    def check_success(self, session: Session, condition: SuccessCondition, deadline: float) -> dict:
        if condition.url_matches is not None:
            return self._url_matches(session, condition.url_matches, deadline)
        if condition.screen_text is not None:
            return self._screen_text(session, condition.screen_text, deadline)
        target = Target(selector=condition.selector) if condition.selector else Target(text=condition.text)
        found = self._find(session, target, deadline, visible=True)
        if not (found["exists"] and found["visible"]):
            raise AssertionFailed(f"no visible element for {target.describe()}"
                                  + (f" in the page; nor on the screen: {found.get('miss')}" if target.text else ""))
        return {"box": found["box"], "found_by": found.get("how")}

    # ------------------------------------------------------------------ visual baselines

    def _capture(self, session: Session, scope: str, selectors: list[str],
                 missing: dict[str, str] | None = None) -> dict[str, bytes]:
        """The page (or display) shot and one per component selector. With ``missing``, a
        component not on the page is noted there (selector -> why) instead of raising."""
        if scope == "display":
            shots = {"page": self.desktops.screenshot(session.id).png}
        else:
            shots = {"page": self.pages.screenshot(session.id, full_page=scope == "full_page")}
        for selector in selectors:
            try:
                shots[selector] = self.pages.screenshot(session.id, selector=selector)
            except ElementNotFound as exc:
                if missing is None:
                    raise
                missing[selector] = exc.message
        return shots

    def _mask_boxes(self, session: Session, mask: list, scope: str) -> list[list[int]]:
        boxes = [list(entry) for entry in mask if not isinstance(entry, str)]
        selectors = [entry for entry in mask if isinstance(entry, str)]
        if selectors:
            boxes += self.pages.boxes(session.id, selectors, scope)
        if scope == "display":
            boxes.append(list(CLOCK_BOX))
        return boxes

    def capture_visual_baseline(self, session_id: str | None, request: CaptureBaselineRequest) -> BaselineResult:
        session = self._acting(session_id, request.url) if request.url else self.desktops.session(session_id)
        self._check_selectors(session, request.selectors + [m for m in request.mask if isinstance(m, str)])
        with self._run("capture_visual_baseline", request.name, session, request) as run:
            if request.url:
                self._navigate(session, request.url, time.monotonic() + request.timeout_ms / 1000)
            scope = request.scope
            shots = self._capture(session, scope, request.selectors)
            boxes = self._mask_boxes(session, request.mask, scope)
            url = self.pages.state(session.id).url if scope != "display" or request.url else request.url
            meta = self.baselines.create(request.name, shots, url=url, scope=scope, mask=request.mask,
                                         mask_boxes=boxes)
            names = []
            for shot_name, png in shots.items():
                names.append(run.artifact(f"baseline-{_stem(shot_name)}", png, shot=shot_name).name)
            result = BaselineResult(test_run_id=run.run_id, baseline_id=meta.id, version=meta.version, scope=scope,
                                    screenshots=[Shot(name=s.name, sha256=s.sha256) for s in meta.screenshots],
                                    mask_boxes=boxes)
            return self._finish(run, "passed", result, {
                "name": f"baseline {request.name}", "screenshots": names})

    def compare_visual_regression(self, session_id: str | None, request: CompareRequest) -> CompareResult:
        meta = self.baselines.get(request.baseline_id, request.version)  # a missing one: 404, nothing made
        session = self._acting(session_id, request.url) if request.url else self.desktops.session(session_id)
        self._check_selectors(session, [m for m in request.mask if isinstance(m, str)])
        with self._run("compare_visual_regression", request.name, session, request) as run:
            if request.url:
                self._navigate(session, request.url, time.monotonic() + request.timeout_ms / 1000)
            result = self._compare(run, session, meta, threshold=request.threshold,
                                   pixel_threshold=request.pixel_threshold,
                                   ignore_antialiasing=request.ignore_antialiasing, mask=request.mask)
            shots = [a for s in result.shots for a in (s.baseline_image, s.current_image, s.diff_image) if a]
            return self._finish(run, "passed" if result.passed else "failed", result, {
                "name": request.name or f"visual regression: {meta.id} v{meta.version}",
                "screenshots": [a.name for a in shots], "failure_reason": result.reason})

    def compare_now(self, session: Session, baseline_id: str, *, threshold: float) -> dict:
        """A flow's visual_matches: the comparison without a run of its own."""
        meta = self.baselines.get(check_name(baseline_id))
        return self._compare(None, session, meta, threshold=threshold).model_dump(mode="json")

    def _compare(self, run: RunWriter | None, session: Session, meta, *, threshold: float,
                 pixel_threshold: float = 0.1, ignore_antialiasing: bool = True, mask: list | None = None) -> CompareResult:
        components = [s.name for s in meta.screenshots if s.name != "page"]
        missing: dict[str, str] = {}
        current = self._capture(session, meta.scope, components, missing)
        selectors = [m for m in meta.mask if isinstance(m, str)] + [m for m in mask or [] if isinstance(m, str)]
        boxes = [list(b) for b in meta.mask_boxes] + [list(m) for m in mask or [] if not isinstance(m, str)]
        if selectors:
            boxes += self.pages.boxes(session.id, selectors, meta.scope)
        if meta.scope == "display" and CLOCK_BOX not in boxes:
            boxes.append(list(CLOCK_BOX))
        shots: list[ShotComparison] = []
        for shot in meta.screenshots:
            base_png = self.baselines.image(meta.id, shot.name, meta.version)
            if shot.name in missing:  # a component gone from the page: that shot fails, with why
                gone = ShotComparison(name=shot.name, passed=False, diff_pixels=0, diff_percentage=100.0,
                                      baseline_sha256=shot.sha256, current_sha256="",
                                      reason=f"not on the page now ({missing[shot.name]})")
                if run is not None:
                    gone.baseline_image = run.artifact(f"baseline-{_stem(shot.name)}", base_png, shot=shot.name)
                shots.append(gone)
                continue
            now_png = current[shot.name]
            base, now = decode_png(base_png), decode_png(now_png)
            compared = ShotComparison(name=shot.name, passed=False, diff_pixels=0, diff_percentage=0.0,
                                      baseline_sha256=shot.sha256, current_sha256=_sha256(now_png))
            try:
                masked = mask_boxes(base.shape[0], base.shape[1], boxes) if shot.name == "page" and boxes else None
                diff = compare(base, now, pixel_threshold=pixel_threshold, ignore_antialiasing=ignore_antialiasing,
                               mask=masked)
                compared.diff_pixels, compared.diff_percentage = diff.diff_pixels, round(diff.diff_percentage, 6)
                compared.passed = diff.diff_fraction <= threshold
                picture = None if compared.passed else diff_image(base, now, diff)
            except ImageSizeMismatch as exc:
                compared.reason = str(exc)
                compared.diff_pixels = int(now.shape[0] * now.shape[1])
                compared.diff_percentage = 100.0
                picture = None
            if run is not None:
                stem = _stem(shot.name)
                compared.baseline_image = run.artifact(f"baseline-{stem}", base_png, shot=shot.name)
                compared.current_image = run.artifact(f"current-{stem}", now_png, shot=shot.name)
                if picture is not None:
                    compared.diff_image = run.artifact(f"diff-{stem}", picture, kind="diff", shot=shot.name)
            shots.append(compared)
        page = shots[0]
        failed = [s for s in shots if not s.passed]
        reason = None
        if failed:
            reason = "; ".join(f"{s.name}: " + (s.reason or f"{s.diff_percentage:.3f}% of pixels differ "
                                                            f"(threshold {threshold * 100:g}%)") for s in failed)
        return CompareResult(test_run_id=run.run_id if run else "", passed=not failed,
                             diff_percentage=page.diff_percentage, diff_pixels=page.diff_pixels,
                             diff_image=page.diff_image, baseline_sha256=page.baseline_sha256,
                             current_sha256=page.current_sha256, baseline_id=meta.id, baseline_version=meta.version,
                             threshold=threshold, shots=shots, reason=reason)

    def baseline_list(self) -> list:
        return self.baselines.list()

    def approve(self, baseline_id: str, test_run_id: str) -> BaselineResult:
        """Promote a failed comparison's current images to the baseline's next version."""
        try:
            check_name(baseline_id)
        except ValueError as exc:
            raise InvalidRequest(f"baseline_id: {exc}") from None
        meta = self.baselines.get(baseline_id)
        run = self.run(test_run_id)
        result = run.result or {}
        if run.verb != "compare_visual_regression" or result.get("baseline_id") != baseline_id:
            raise InvalidRequest(f"run {test_run_id} is not a comparison with baseline {baseline_id!r}; approve "
                                 "the test_run_id that compare_visual_regression answered")
        if run.status != "failed":
            raise InvalidRequest(f"run {test_run_id} {run.status}; only a failed comparison's images are promoted")
        check = self.runs.verify(test_run_id)
        if not check.ok:
            raise InvalidRequest(f"run {test_run_id}'s evidence does not verify ({'; '.join(check.problems)}); "
                                 "nothing was promoted")
        shots: dict[str, bytes] = {}
        with self._reading_run(test_run_id), _corrupt_if_malformed():
            for shot in result.get("shots") or []:
                image = shot.get("current_image")
                if not image:
                    raise InvalidRequest(f"run {test_run_id} has no current image of {shot['name']!r} (it was not on "
                                         "the page): there is nothing to promote; compare again")
                shots[shot["name"]] = self.runs.file(test_run_id, image.get("name", "")).read_bytes()
            compared = int(result.get("baseline_version"))
        if compared == meta.version and [s.name for s in meta.screenshots] != list(shots):
            raise InvalidRequest(f"run {test_run_id} compared other shots than baseline {baseline_id!r} has now")
        promoted = self.baselines.promote(baseline_id, shots, over_version=compared, from_run=test_run_id)
        return BaselineResult(test_run_id=test_run_id, baseline_id=promoted.id, version=promoted.version,
                              scope=promoted.scope, screenshots=[Shot(name=s.name, sha256=s.sha256)
                                                                 for s in promoted.screenshots],
                              mask_boxes=promoted.mask_boxes)

    # ------------------------------------------------------------------ analyze_console_errors

    def analyze_console_errors(self, session_id: str | None, request: AnalyzeConsoleRequest) -> ConsoleResult:
        session = self._acting(session_id, request.url) if request.url else self.desktops.session(session_id)
        ignore = [re.compile(p) for p in request.ignore_patterns]
        with self._run("analyze_console_errors", request.name, session, request) as run:
            since = self.pages.cursors(session.id)[0] if request.url else 0
            problem = None
            if request.url:
                try:
                    self._navigate(session, request.url, time.monotonic() + request.timeout_ms / 1000)
                except GlassdeskError as exc:
                    if exc.code == "operator_in_control":
                        raise
                    problem = ConsoleEntry(message=f"the page did not load: {_reason(exc)}", source=request.url)
            entries = self.pages.console(session.id, since)
            errors, warnings, ignored = [], [], 0
            for entry in entries:
                if entry["level"] not in ("error", "warning"):
                    continue
                if any(p.search(entry["text"][:REGEX_TEXT_LIMIT]) for p in ignore):
                    ignored += 1
                    continue
                line = ConsoleEntry(message=entry["text"], source=entry.get("url") or "", line=entry.get("line") or 0)
                (errors if entry["level"] == "error" else warnings).append(line)
            if problem is not None:
                errors.insert(0, problem)
            result = ConsoleResult(test_run_id=run.run_id, has_errors=bool(errors), errors=errors[:CONSOLE_LIMIT],
                                   warnings=warnings[:CONSOLE_LIMIT], ignored=ignored)
            shot = self._shot(run, session, "console")
            reason = (f"{len(errors)} console error(s); the first: {errors[0].message[:300]}" if errors else None)
            return self._finish(run, "failed" if errors else "passed", result, {
                "name": request.name or ("console errors" + (f": {request.url}" if request.url else "")),
                "screenshots": [shot.name], "console_logs": [e.model_dump() for e in errors + warnings][:CONSOLE_LIMIT],
                "failure_reason": reason})

    # ------------------------------------------------------------------ reading runs

    @contextmanager
    def _reading_run(self, test_run_id: str) -> Iterator[None]:
        """The run store's own errors as typed ones: a bad id, no such run, a damaged one."""
        try:
            yield
        except BadName as exc:
            raise InvalidRequest(str(exc)) from None
        except QaRunNotFound as exc:
            raise QaRunNotFoundError(str(exc)) from None
        except QaRunCorrupt as exc:
            raise QaRunCorruptError(f"QA run {test_run_id}: {exc}; verifying the run says what is damaged") from None

    def run(self, test_run_id: str) -> QaRun:
        with self._reading_run(test_run_id):
            return self.runs.load(test_run_id)

    def verify(self, test_run_id: str) -> VerifyReport:
        """Whatever the damage, an answer: the run is not built first (a damaged one would not
        build), only looked for; what is wrong is the report's problems."""
        with self._reading_run(test_run_id):
            return self.runs.verify(test_run_id)

    def junit(self, test_run_id: str) -> str:
        run = self.run(test_run_id)
        with self._reading_run(test_run_id), _corrupt_if_malformed():
            return render_junit([run])

    def report_html(self, test_run_id: str) -> str:
        run = self.run(test_run_id)
        with self._reading_run(test_run_id), _corrupt_if_malformed():
            return render_html([run], verification={test_run_id: self.runs.verify(test_run_id)})

    def artifact(self, test_run_id: str, name: str) -> Path:
        """A listed file of the run; served from the manifest's records alone, so the files of a
        run whose record no longer builds can still be fetched and looked at."""
        with self._reading_run(test_run_id):
            return self.runs.file(test_run_id, name)


# ---------------------------------------------------------------------------------------- a flow


class _Flow:
    """One verify_user_flow: its steps in order, with evidence, retries and the flow's deadline."""

    def __init__(self, qa: QaService, run: RunWriter, session: Session, request: VerifyUserFlowRequest):
        self.qa, self.run_, self.session, self.request = qa, run, session, request
        self.deadline = time.monotonic() + request.timeout_ms / 1000
        self.console_from = qa.pages.cursors(session.id)[0]
        self.errored = False
        self.result = FlowResult(test_run_id=run.run_id, success=False, steps_completed=0, trace_id=run.run_id)
        self.last_shot: Artifact | None = None

    def remaining_ms(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)

    def shot(self, stem: str, **about: Any) -> Artifact:
        self.last_shot = self.qa._shot(self.run_, self.session, stem, **about)
        return self.last_shot

    def run(self) -> None:
        qa, session, request = self.qa, self.session, self.request
        try:
            qa._retrying(session, lambda: qa.pages.navigate(session.id, "goto", request.start_url, "load",
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
                seen = qa.check_success(session, request.success_condition,
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
        qa, session = self.qa, self.session
        started = time.monotonic()
        record = StepResult(index=index, name=step.title(), action=step.action, status="passed",
                            before=self.last_shot.name if self.last_shot else None)
        if self.remaining_ms() <= 0:
            record.status, record.failure_reason = "failed", (f"the flow's timeout of {self.request.timeout_ms} ms "
                                                              f"ran out before step {index}")
            self.finish_step(record, started, failed=True)
            self.fail(index, record.failure_reason)
            return False
        step_deadline = min(self.deadline, started + step.timeout_ms / 1000)
        try:
            detail, attempts = qa._retrying(session, lambda: self.act(index, step, step_deadline),
                                            navigation=step.action == "navigate", deadline=self.deadline)
            record.detail, record.attempts = detail or {}, attempts
        except (AssertionFailed, StepFailed, GlassdeskError) as exc:
            if isinstance(exc, GlassdeskError) and exc.code == "operator_in_control":
                raise
            record.status = "error" if isinstance(exc, GlassdeskError) and _transient(exc, True) else "failed"
            record.failure_reason = _reason(exc)
            self.finish_step(record, started, failed=True)
            self.fail(index, f"step {index} ({record.name}): {record.failure_reason}",
                      error=record.status == "error")
            return False
        self.finish_step(record, started, failed=False)
        self.result.steps_completed = index
        return True

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
        entries = self.qa.pages.console(self.session.id, self.console_from)
        return [_console_line(e) for e in entries][-CONSOLE_LIMIT:]

    def ms(self, step_deadline: float) -> int:
        return max(1, int((step_deadline - time.monotonic()) * 1000))

    def act(self, index: int, step: FlowStep, step_deadline: float) -> dict:
        """Carry out one step; what it did (for the record)."""
        qa, sid = self.qa, self.session.id
        pages = qa.pages
        if step.action == "navigate":
            done = pages.navigate(sid, "goto", step.url, "load", self.ms(step_deadline))
            return {"status": done["status"], "url": done["url"], "load_time_ms": done["load_time_ms"]}
        if step.action == "click":
            return self.click(step, step_deadline)
        if step.action == "fill":
            return self.fill(step, step_deadline)
        if step.action == "select":
            acted = pages.select(sid, _dom_target(step), step.option or "", self.ms(step_deadline))
            return {"point": [acted.x, acted.y], "box": acted.box, "verified": acted.verified}
        if step.action == "press":
            done = qa.desktops.perform(sid, Key(keys=step.key_list))
            return {"executed": done.executed}
        if step.action == "wait":
            if not step.target_kinds():
                time.sleep(max(0.0, step_deadline - time.monotonic()))
                return {"waited_ms": step.timeout_ms}
            if step.image is not None:
                spot = qa._on_screen(self.session, step_deadline, template=template_png(step.image),
                                     confidence=step.confidence)
                if not spot:
                    raise StepFailed(f"{step.describe()} did not show within {step.timeout_ms} ms: {spot.why}")
                return {"point": [spot.x, spot.y]}
            found = qa._find(self.session, _dom_target(step), step_deadline, visible=True)
            if not (found["exists"] and found["visible"]):
                raise StepFailed(f"{step.describe()} was not visible within {step.timeout_ms} ms")
            return {"box": found["box"], "found_by": found.get("how")}
        if step.action == "assert":
            return qa.check_assertion(self.session, step, step_deadline)
        if step.action == "screenshot":
            shot = self.shot(f"step-{index:03d}-{_stem(step.name or 'screenshot')}", step=index, which="screenshot")
            self.result.screenshots.append(shot)
            return {"screenshot": shot.name}
        if step.action == "act":
            return self.vision(index, step, step_deadline)
        raise StepFailed(f"unknown action {step.action}")

    def point(self, step: FlowStep, step_deadline: float) -> tuple[int, int, str]:
        """The display pixel of a target that has no DOM element: OCR text, an image, x,y."""
        if step.x is not None and step.y is not None:
            return step.x, step.y, "pixels"
        spot = self.qa._on_screen(self.session, step_deadline, text=step.text,
                                  template=template_png(step.image) if step.image else None,
                                  confidence=step.confidence)
        if not spot:
            where = "in the page nor on the screen" if step.text else "on the screen"
            raise StepFailed(f"{step.describe()} was not found {where} within {step.timeout_ms} ms: {spot.why}")
        return spot.x, spot.y, "ocr" if step.text else "image"

    def _dom_or_pixel(self, step: FlowStep, step_deadline: float, dom: Callable[[Target, int], Any]):
        """The step done on its DOM element (a text target: the DOM first, then OCR), or None when
        it has to be done at a pixel."""
        if step.selector or step.ref or step.label:
            return dom(_dom_target(step), self.ms(step_deadline))
        if step.text is not None:
            try:
                return dom(Target(text=step.text), min(self.ms(step_deadline), DOM_FIRST_MS))
            except ElementNotFound:
                return None  # not in the DOM (a canvas, a native window): OCR
        return None

    def click(self, step: FlowStep, step_deadline: float) -> dict:
        pages, sid = self.qa.pages, self.session.id
        acted = self._dom_or_pixel(step, step_deadline, lambda t, ms: pages.click(sid, t, timeout_ms=ms))
        if acted is not None:
            return {"point": [acted.x, acted.y], "box": acted.box, "found_by": "dom"}
        x, y, how = self.point(step, step_deadline)
        done = self.qa.desktops.perform(sid, Click(x=x, y=y))
        return {"point": [x, y], "found_by": how, "executed": done.executed}

    def fill(self, step: FlowStep, step_deadline: float) -> dict:
        pages, sid = self.qa.pages, self.session.id
        secrets = self.request.secrets
        acted = self._dom_or_pixel(step, step_deadline,
                                   lambda t, ms: pages.fill(sid, t, step.value or "", secrets=secrets, timeout_ms=ms))
        if acted is not None:
            return {"point": [acted.x, acted.y], "box": acted.box, "verified": acted.verified, "found_by": "dom"}
        x, y, how = self.point(step, step_deadline)
        from desktop.actions import UnknownPlaceholder, fill_placeholders

        try:
            text = fill_placeholders(step.value or "", secrets)
        except UnknownPlaceholder as exc:
            raise InvalidAction(str(exc)) from None
        try:  # untypeable characters are found before anything is clicked
            typing = Type(text=text) if text else None
        except ValueError as exc:
            raise StepFailed(f"value: {exc}") from None
        self.qa.desktops.perform(sid, Click(x=x, y=y))
        self.qa.desktops.perform(sid, Key(keys=["ctrl+a", "BackSpace"]))
        if typing is not None:
            self.qa.desktops.perform(sid, typing)
        return {"point": [x, y], "found_by": how}

    def vision(self, index: int, step: FlowStep, step_deadline: float) -> dict:
        from vision.loop import ActRequest

        budget = max(1.0, min(3600.0, step_deadline - time.monotonic()))
        try:
            request = ActRequest(instruction=step.instruction, model=step.model, max_steps=step.max_steps,
                                 script=step.script, budget_seconds=budget, secrets=self.request.secrets)
        except ValueError as exc:
            raise StepFailed(f"act: {exc}") from None
        result = self.qa.act(self.session.id, request)
        self.result.act_traces.append(result.trace_id)
        self.run_.record("trace", trace_id=result.trace_id, path=f"/api/v1/traces/{result.trace_id}", step=index)
        if result.status != "done":
            error = result.error or {}
            raise StepFailed(f"act ended {result.status}" + (f": {error.get('code')}: {error.get('message')}"
                                                             if error else ""))
        return {"trace_id": result.trace_id, "answer": result.answer, "steps": len(result.steps)}


# ---------------------------------------------------------------------------------------- helpers


def _ms_left(deadline: float) -> int:
    """The milliseconds to ``deadline``, rounded up: work given them ends at or past it."""
    return max(1, math.ceil((deadline - time.monotonic()) * 1000))


def _dom_target(step) -> Target:
    return Target(selector=step.selector, ref=step.ref, label=step.label, text=step.text)


def _console_line(entry: dict) -> dict:
    return {"level": entry.get("level"), "text": str(entry.get("text", ""))[:2000], "url": entry.get("url") or "",
            "line": entry.get("line") or 0}


def _request_line(entry: dict) -> dict:
    return {"method": entry.get("method"), "url": entry.get("url"), "status": entry.get("status"),
            "failure": entry.get("failure"), "blocked": entry.get("blocked")}


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


@contextmanager
def _corrupt_if_malformed() -> Iterator[None]:
    """A run that builds but whose free-form parts (the verb's answer, a step's detail) have the
    wrong shape cannot be rendered: damaged evidence, not a fault of the server."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise QaRunCorrupt(f"its records cannot be rendered ({type(exc).__name__}: {str(exc)[:300]})") from None


def _stem(name: str) -> str:
    return safe_stem(name, 60)


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _clip(box: dict) -> Region | None:
    from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH

    x0, y0 = max(0, box["x"]), max(0, box["y"])
    x1, y1 = min(SCREEN_WIDTH, box["x"] + box["width"]), min(SCREEN_HEIGHT, box["y"] + box["height"])
    return Region(x0=x0, y0=y0, x1=x1, y1=y1) if x1 > x0 and y1 > y0 and x0 < SCREEN_WIDTH and y0 < SCREEN_HEIGHT else None


def _crop(png: bytes, box: dict) -> bytes:
    from PIL import Image

    region = _clip(box)
    image = Image.open(io.BytesIO(png))
    if region is not None:
        image = image.crop((region.x0, region.y0, region.x1, region.y1))
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)
    return out.getvalue()


def _marked(png: bytes, box: dict) -> bytes:
    """The screen with a red frame around the element (pure)."""
    from PIL import Image, ImageDraw

    image = Image.open(io.BytesIO(png)).convert("RGB")
    draw = ImageDraw.Draw(image)
    x0, y0 = box["x"] - 3, box["y"] - 3
    draw.rectangle((x0, y0, box["x"] + box["width"] + 2, box["y"] + box["height"] + 2), outline=(255, 23, 68), width=3)
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)
    return out.getvalue()


__all__ = ["QaService", "VERBS", "AssertionFailed", "QUEUE_WAIT_S"]
