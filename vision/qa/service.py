"""The QA service: the six verbs, flows with retries and an aggregate timeout, baseline approval.

``QaService`` is built by ``Glassdesk`` (``glassdesk.qa``) and every door calls it. It is given
what it calls, not the application: the desktop service (``DesktopService``), the data directory
its runs and baselines are kept under, and ``act``, the call that runs a vision instruction (a
flow's ``act`` step). It drives the visible browser through the page layer
(``DesktopService.pages``: navigate, state, console, network, click, fill, select, screenshots) and
the real pixels through the session (a click found by OCR or by an image is real input at that
pixel). Every call is one QA run (``vision.evidence.qa_runs``): its screenshots hashed and timestamped in a
hash-chained manifest.

This module keeps what every verb shares: one verb per session at a time, the run made around a
verb's work (filmed when asked) and closed with its answer, and the runs read back. The work itself
is done by jobs, each in its own module: the single-shot verbs (``vision.qa.verbs``), flows
(``vision.qa.flow``), visual baselines (``vision.qa.visual``), all reaching the desktop through one
``vision.qa.driver.Driver``.

What is a result and what is an error: a page that does not load, an element that is not there, a
flow step that fails, a visual difference are answers (200, ``success``/``passed`` false, with the
reason). A request that cannot be carried out as given (a bad URL, a missing baseline, a person in
control of the session) is a typed error raised before the run is created, so it creates nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from desktop.errors import GlassdeskError, SessionBusy
from desktop.session.manager import QUEUE_WAIT_S, Session
from desktop.x11.recorder import VideoFormat
from vision.evidence.export import check_format, export_qa_run
from vision.evidence.qa_runs import QaRunStore, RunWriter, corrupt_if_malformed, reading_run, render_junit
from vision.models.qa import (
    VERBS,
    AnalyzeConsoleRequest,
    Artifact,
    BaselineResult,
    CaptureBaselineRequest,
    CompareRequest,
    CompareResult,
    ConsoleResult,
    ElementResult,
    Expectation,
    FlowResult,
    FlowStep,
    PageLoadResult,
    QaRun,
    SuccessCondition,
    VerifyElementRequest,
    VerifyPageLoadsRequest,
    VerifyReport,
    VerifyUserFlowRequest,
    VisualLimits,
)
from vision.qa.baselines import BaselineStore
from vision.qa.driver import AssertionFailed, Driver, _reason
from vision.qa.flow import Flows
from vision.qa.verbs import Verbs
from vision.qa.visual import Visual

if TYPE_CHECKING:
    from desktop.service.desktop import DesktopService
    from vision.models import ActRequest, ActResult

log = logging.getLogger("glassdesk.qa")

# How long a verb waits for another QA verb running on the same session before it is refused with
# session_busy (as a desktop action waits for the one before it).
VERB_QUEUE_WAIT_S = QUEUE_WAIT_S


@dataclass
class _VerbHolder:
    """The QA verb running on a session: which thread runs it, what it is, when it must be done."""

    owner: int
    what: str
    ends_at: float
    depth: int = 1


class QaService:
    def __init__(self, desktops: DesktopService, data_dir: str | Path, *,
                 act: Callable[[str, ActRequest], ActResult], ask: Callable[..., dict | None] | None = None):
        self.desktops = desktops
        self.pages = desktops.pages
        self.data_dir = Path(data_dir)
        self.runs = QaRunStore(self.data_dir)
        self._verbs = threading.Condition()
        self._holders: dict[str, _VerbHolder] = {}
        # Made here, not on first use: two first calls at once would each make one, with its own lock.
        self.baselines = BaselineStore(self.data_dir)
        # One driver for every job: a flow step's look for its element is retried at its level only.
        self.driver = Driver(desktops)
        self._single = Verbs(self.driver, self._run, self._finish)
        self._visual = Visual(self.driver, self.baselines, self.runs, self._run, self._finish)
        self._flows = Flows(self.driver, self.baselines, self._run, self._finish,
                            compare_now=self._visual.compare_now, act=act, ask=ask)

    def close_interrupted(self) -> list[str]:
        """What a server that stopped left (called at start): its runs closed as interrupted (their
        ids returned), and the baseline versions it was writing removed."""
        self.baselines.remove_unfinished()
        return self.runs.close_interrupted()

    # ------------------------------------------------------------------ the verbs

    def verify_page_loads(self, session_id: str | None, request: VerifyPageLoadsRequest) -> PageLoadResult:
        return self._single.verify_page_loads(session_id, request)

    def verify_element_exists(self, session_id: str | None, request: VerifyElementRequest) -> ElementResult:
        return self._single.verify_element_exists(session_id, request)

    def verify_user_flow(self, session_id: str | None, request: VerifyUserFlowRequest) -> FlowResult:
        return self._flows.verify_user_flow(session_id, request)

    def check_assertion(self, session: Session, step: FlowStep, deadline: float) -> dict:
        return self._flows.check_assertion(session, step, deadline)

    def check_success(self, session: Session, condition: SuccessCondition, deadline: float) -> dict:
        return self._flows.check_success(session, condition, deadline)

    def check_expectations_first(self, session: Session, expectations: list[Expectation]) -> None:
        self._flows.check_expectations_first(session, expectations)

    def check_expectations(self, session: Session, expectations: list[Expectation]) -> list[dict]:
        return self._flows.check_expectations(session, expectations)

    def capture_visual_baseline(self, session_id: str | None, request: CaptureBaselineRequest) -> BaselineResult:
        return self._visual.capture_visual_baseline(session_id, request)

    def compare_visual_regression(self, session_id: str | None, request: CompareRequest) -> CompareResult:
        return self._visual.compare_visual_regression(session_id, request)

    def compare_now(self, session: Session, baseline_id: str, options: VisualLimits,
                    run: RunWriter | None = None) -> dict:
        return self._visual.compare_now(session, baseline_id, options, run)

    def baseline_list(self) -> list:
        return self._visual.baseline_list()

    def approve(self, baseline_id: str, test_run_id: str) -> BaselineResult:
        return self._visual.approve(baseline_id, test_run_id)

    def analyze_console_errors(self, session_id: str | None, request: AnalyzeConsoleRequest) -> ConsoleResult:
        return self._single.analyze_console_errors(session_id, request)

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
        """One QA run around a verb's work: the session held for it (see _one_verb), the browser's
        state cleared first when the request says ``fresh``, the run created, recorded (and the
        display filmed when asked), and closed as ``error`` with the reason if the work raises."""
        with self._one_verb(session.id, verb, getattr(request, "timeout_ms", 10_000)):
            # A fresh start is done before the run is made: a browser that cannot be cleared is an
            # error of the request (it creates nothing), not a verdict on the page.
            cleared = self.pages.clear_state(session.id) if getattr(request, "fresh", False) else None
            with self._recorded_run(verb, name, session, request, secrets) as run:
                if cleared is not None:
                    run.record("note", message=f"fresh start: the browser's state cleared in {cleared.duration_ms} ms "
                                               f"({len(cleared.origins)} origin(s), {cleared.closed_tabs} tab(s) "
                                               "closed)")
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
        run.inline_images = bool(getattr(request, "inline_images", False))  # type: ignore[attr-defined]
        try:
            if filming:
                run.video = self._start_video(run, session, getattr(request, "video_format", "mp4"),  # type: ignore[attr-defined]
                                              name or verb)
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
        answer = type(result).model_validate(stored["result"])
        if getattr(run, "inline_images", False):
            _inline_images(answer, run.dir)
        return answer

    @staticmethod
    def _elapsed(run: RunWriter) -> int:
        return round((time.monotonic() - run.t0) * 1000)  # type: ignore[attr-defined]

    def _start_video(self, run: RunWriter, session: Session, fmt: VideoFormat, title: str):
        """The display filmed from now as a video receipt (a chapter per flow step, rings, captions:
        desktop/x11/receipt.py), or None (the record says why): the verdict does not depend on the
        film, so a recording that will not start costs the verb nothing else."""
        from desktop.errors import RecorderError
        from desktop.x11.receipt import VideoReceipt

        receipt = VideoReceipt(session.display, run.dir, fmt=fmt, title=run.redacted(title))
        try:
            receipt.start()
        except RecorderError as exc:
            log.warning("run %s: no video: %s", run.run_id, exc)
            receipt.abandon()  # no file the manifest will not list
            run.record("note", message=f"no video: {exc.message}")
            return None
        return receipt

    def _stop_video(self, run: RunWriter) -> Artifact | None:
        """The receipt made, and its files listed with their SHA-256 in the run's chain: the video,
        its chapters and its captions."""
        receipt = getattr(run, "video", None)
        if receipt is None:
            return None
        run.video = None  # type: ignore[attr-defined]
        try:
            files = receipt.finish()
        except Exception as exc:  # the verdict stands without its film; the record says why
            log.warning("run %s: no video: %s", run.run_id, exc)
            run.record("note", message=f"no video: {getattr(exc, 'message', None) or exc}")
            partial = run.dir / receipt.name
            if partial.is_file() and partial.stat().st_size > 0:  # what ffmpeg wrote before it failed
                return run.adopt(partial.name, kind="video")
            partial.unlink(missing_ok=True)  # nothing worth keeping: no file the manifest does not list
            return None
        for note in files.notes:
            run.record("note", message=f"video: {note}")
        run.adopt(files.chapters.name, kind="chapters")
        run.adopt(files.captions.name, kind="captions")
        return run.adopt(files.video.name, kind="video")

    # ------------------------------------------------------------------ reading runs

    def run(self, test_run_id: str) -> QaRun:
        with reading_run(test_run_id):
            return self.runs.load(test_run_id)

    def verify(self, test_run_id: str) -> VerifyReport:
        """Whatever the damage, an answer: the run is not built first (a damaged one would not
        build), only looked for; what is wrong is the report's problems."""
        with reading_run(test_run_id):
            return self.runs.verify(test_run_id)

    def junit(self, test_run_id: str) -> str:
        run = self.run(test_run_id)
        with reading_run(test_run_id), corrupt_if_malformed():
            return render_junit([run])

    def export(self, test_run_id: str, fmt: str) -> str:
        """A verify_user_flow run as a test (vision.evidence.export): a glassdesk qa suite, or a Playwright spec."""
        check_format(fmt)
        self.run(test_run_id)  # not found, corrupt: the same errors as reading it
        with reading_run(test_run_id), corrupt_if_malformed():
            return export_qa_run(self.runs.records_with_templates(test_run_id), fmt)

    def artifact(self, test_run_id: str, name: str) -> Path:
        """A listed file of the run; served from the manifest's records alone, so the files of a
        run whose record no longer builds can still be fetched and looked at."""
        with reading_run(test_run_id):
            return self.runs.file(test_run_id, name)


__all__ = ["QaService", "VERBS", "AssertionFailed", "QUEUE_WAIT_S"]


def _inline_images(value: Any, run_dir: Path) -> None:
    """Fill ``data`` (base64) of every image artifact in an answer, from the run's own files: the
    bytes the caller gets are the ones whose SHA-256 the run recorded."""
    import base64

    if isinstance(value, Artifact):
        if value.name.endswith(".png"):
            value.data = base64.b64encode((run_dir / value.name).read_bytes()).decode()
    elif isinstance(value, BaseModel):
        for field in type(value).model_fields:
            _inline_images(getattr(value, field), run_dir)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _inline_images(item, run_dir)
    elif isinstance(value, dict):
        for item in value.values():
            _inline_images(item, run_dir)
