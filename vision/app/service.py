"""The application service: one ``Glassdesk`` under every front door.

It holds the desktop service, the runs (act, cancel, pause, resume, take-over, their view), the
traces and the event bus, and it starts the observers (the live viewer's status strip, the
metrics feed). REST (desktop.http.desktop, vision.http.runs), MCP (vision.mcp), the console and the
CLI are thin adapters over it: an operation, its validation and its error mapping live here or
below, once.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop.models import LiveView
from desktop.service.desktop import DEFAULT_SESSION, DesktopService
from desktop.session.manager import Session, SessionRegistry
from desktop.session.operator_input import Gesture, Gestures, RfbInputTap
from desktop.session.operator_reads import PointerReads
from vision.app.metrics import Metrics
from vision.calibration.service import CalibrationService
from vision.config import VisionConfig
from vision.errors import TraceCorruptError, TraceNotFoundError
from vision.evidence.export import check_format, export_trace
from vision.evidence.report import render_junit
from vision.models import ActRequest, ActResult, RunView, StepSummary
from vision.providers.base import Provider
from vision.qa.service import QaService
from vision.recordings.service import SessionRecordings
from vision.run.events import EventBus
from vision.run.loop import Runner
from vision.run.observers import BusListener, Narrator, strip_enabled
from vision.settings import Settings
from vision.trace.records import (
    ImageKind,
    InvalidTraceId,
    Trace,
    TraceCorrupt,
    TraceMeta,
    TraceNotFound,
    VerifyResult,
)
from vision.trace.store import TraceStore
from vision.vendors.computer import ComputerService

if TYPE_CHECKING:
    from desktop.x11.recorder import VideoFormat
    from vision.vendors.browser_toolset import BrowserToolsetService

log = logging.getLogger("glassdesk.service")

TAKEOVER_REASON = "operator took over"


class Glassdesk:
    def __init__(self, desktops: DesktopService, store: TraceStore, config: VisionConfig, *,
                 bus: EventBus | None = None, strip: bool | None = None):
        self.desktops = desktops
        self.store = store
        self.config = config
        self.bus = bus or EventBus()
        # Runs a stopped server left unfinished end as "interrupted" now, before any new run starts.
        self.interrupted = store.close_interrupted()
        # The QA verbs over the same desktops and data directory, a flow's act step run as act()
        # runs any other; their runs a dead server left unfinished are closed the same way.
        self.qa = QaService(desktops, store.root, act=self.act, ask=self.ask_point)
        from vision.eval.service import EvalService  # evaluations: the runs and QA flows above, as episodes

        self.evals = EvalService(self, store.root / "evals")
        self.interrupted += self.qa.close_interrupted()
        # Session recordings (start/stop a video receipt of a session's display) into the same data dir.
        self.recordings = SessionRecordings(desktops, store.root)
        self.interrupted += self.recordings.close_interrupted()
        # The vendor-native executors (/computer/anthropic, /openai, /gemini) over the same desktops.
        self.computer = ComputerService(desktops)
        # Calibration: a model's click precision on this display, measured with vision runs.
        self.calibration = CalibrationService(self)
        self._runners: dict[str, Runner] = {}
        self._lock = threading.Lock()
        # A person's input during a take-over, by session, read off the live view's RFB stream: made
        # into steps of the run (vision.run.loop.Runner.record_operator) as each gesture ends, with what
        # was under their pointer.
        self._operator: dict[str, _Takeover] = {}
        self._operator_lock = threading.Lock()
        desktops.on_change(self._on_session)
        # The observers: started here, so every way of running glassdesk shows and counts the same.
        self.last_action: dict[str, dict] = {}
        self.metrics = Metrics(self.counts)
        self.narrator = Narrator(enabled=strip_enabled() if strip is None else strip)
        self.listener = BusListener(self.bus, [self.metrics.observe, self._track, self.narrator.observe])

    @classmethod
    def from_settings(cls, manager: SessionRegistry, settings: Settings, *,
                      default_session: str = DEFAULT_SESSION) -> Glassdesk:
        return cls.build(manager, data_dir=settings.data_dir, default_session=default_session,
                         launch_allow=settings.launch_allow, allow_local_urls=settings.allow_local_urls,
                         allow_evaluate=settings.allow_evaluate)

    @classmethod
    def build(cls, manager: SessionRegistry, *, data_dir: str | Path | None = None, config: VisionConfig | None = None,
              default_session: str = DEFAULT_SESSION, strip: bool | None = None,
              launch_allow: frozenset[str] | None = None, allow_local_urls: bool = False,
              allow_evaluate: bool = False) -> Glassdesk:
        from desktop.service import desktop_service_class  # DesktopService, or its remote form

        kind = desktop_service_class(manager)
        desktops = kind(manager, default_session=default_session, launch_allow=launch_allow,
                        allow_local_urls=allow_local_urls, allow_evaluate=allow_evaluate)
        store = TraceStore(data_dir)
        if kind is DesktopService:  # a remote backend's browsers are in its session servers: no states there yet
            from desktop.session.states import StateStore

            desktops.states = StateStore(store.root / "states")
            desktops.osworld_dir = store.root / "osworld"  # the guest contract's films (desktop.osworld)
        return cls(desktops, store, config or VisionConfig.load(), strip=strip)

    def close(self) -> None:
        self.recordings.close()
        self.desktops.close()

    # ------------------------------------------------------------------ runs

    @functools.cached_property
    def browser_toolset(self) -> BrowserToolsetService:
        """The /computer/anthropic-browser executor, made on first use: it subclasses the anthropic
        SDK's toolset, whose import (about 2 s) every `glassdesk mcp` start paid before its first
        answer, past the MCP SDK's 10 s discover timeout on a loaded machine."""
        from vision.vendors.browser_toolset import BrowserToolsetService

        return BrowserToolsetService(self.desktops)

    def runner(self, session_id: str | None = None, *, start: bool = True) -> Runner:
        """The session's runner (made on first use, dropped with the session). ``start``: the
        default session may be started for it (to act); controls pass False and never start one."""
        return self._runner_on(self.desktops.session(session_id) if start else self.desktops.existing(session_id))

    def _runner_on(self, session: Session) -> Runner:
        with self._lock:
            runner = self._runners.get(session.id)
            if runner is None or runner.desktop is not session:
                runner = self._runners[session.id] = Runner(session, self.store, self.config, self.bus,
                                                            film=_film_for(session))
                # browser toolset members of a run; looked up at the call, as the toolset is made on first use
                runner.browser = lambda *args, **kwargs: self.browser_toolset.loop_call(*args, **kwargs)
                runner.spot = _spot_at  # a native window's or a canvas's click: its text and template
                runner.screen_texts = _screen_texts  # and what it made appear, by OCR of what changed
                # A run's expect, in the QA assertion language, on this runner's own desktop
                runner.check = functools.partial(self.qa.check_expectations, session)
            return runner

    def ask_point(self, session_id: str | None, model: str, instruction: str,
                  script: list[dict] | None = None) -> dict | None:
        """One turn of ``model`` (through the providers, as a run's), shown the session's screen now
        and asked ``instruction``: where its first pointer action points ({x, y, said, model}, display
        px), or None when it points at nothing. Nothing is done on the desktop: the caller (a QA
        step healed by a model, vision.qa.flow) checks the point and acts itself."""
        from vision.config import create_provider
        from vision.errors import ModelUnavailable
        from vision.providers.base import ModelCallError, Observation

        name = self.config.resolve(model)
        try:
            provider = create_provider(name, instruction, self.config, script=script)
            session = self.desktops.session(session_id)
            turn = provider.turn(Observation(frame=session.capture(), url=session.page_url()), [])
        except ModelCallError as exc:
            raise ModelUnavailable(str(exc)) from exc
        for call in turn.calls:
            for action in call.actions:
                x, y = getattr(action, "x", None), getattr(action, "y", None)
                if isinstance(x, int) and isinstance(y, int):
                    return {"x": x, "y": y, "said": turn.text, "model": name}
        return None

    def act(self, session_id: str | None, request: ActRequest, on_step: Callable[[StepSummary], None] | None = None,
            *, provider: Provider | None = None, wait_out_pauses: bool = False) -> ActResult:
        """Run (or continue) an instruction on the visible desktop. Blocking. A run paused for a
        while returns with status ``paused``, unless ``wait_out_pauses`` (a stream that reports
        the pause as it goes)."""
        session = self.desktops.session(session_id)
        runner = self._runner_on(session)
        self.qa.check_idle(session.id)  # a QA verb's steps must not interleave with a run's
        if request.reset:  # the run resets the desktop once its request is known to be good
            self.desktops.check_agent(session.id)
        if request.expect:  # a missing baseline, a refused evaluate, a bad selector: refused before the run
            self.qa.check_expectations_first(session, request.expect)
        kwargs = {"paused_return_s": None} if wait_out_pauses else {}
        return runner.act(request, on_step, provider=provider, **kwargs)

    def cancel(self, session_id: str | None) -> bool:
        """Never blocks for long and never starts a session: safe to call from an event loop."""
        session = self.desktops.existing(session_id)  # a dictionary lookup; session_not_found if none
        with self._lock:
            runner = self._runners.get(session.id)
        return runner.cancel() if runner is not None else False

    def pause(self, session_id: str | None) -> None:
        self.runner(session_id, start=False).pause()

    def resume(self, session_id: str | None) -> None:
        self.runner(session_id, start=False).resume()

    def active(self, session_id: str | None) -> bool:
        return self.runner(session_id, start=False).active

    def takeover(self, session_id: str | None, on: bool) -> LiveView:
        """Hand mouse and keyboard to a person (the agent pauses between steps and agents' direct
        actions are refused), or give them back. An operator's own pause outlives the take-over."""
        runner = self.runner(session_id, start=False)
        self.desktops.require_viewer()  # the answer is a live-view link: refuse before changing anything
        session = self.desktops.set_takeover(runner.desktop.id, on)
        if on:
            with self._operator_lock:
                if session.id not in self._operator:
                    self._operator[session.id] = _Takeover(session.id, runner.desktop, self._operator_did)
            runner.pause(TAKEOVER_REASON, kind="takeover")
        else:
            with self._operator_lock:  # what the person did last (a typed text still open) is theirs too
                taken = self._operator.pop(session.id, None)
                if taken is not None:
                    taken.record(taken.gestures.take(flush=True))
            if taken is not None:
                # Their steps are written before the agent's next ones: the run resumes after them.
                taken.close(wait_s=OPERATOR_DRAIN_S)
            runner.resume(kind="takeover")
        self.bus.publish("takeover", session_id=session.id, on=on)
        return self.desktops.live_view(session.id, control=on)

    def operator_tap(self, session_id: str) -> RfbInputTap:
        """A reader for one live-view connection with control: the person's pointer and keys,
        recorded as steps of the session's run while they have taken over (and only then)."""

        # On the relay's thread, after the chunk went on to x11vnc: only hands work over (the reads
        # and the recording run on the take-over's own threads), so the person's input never waits.
        def feed(event: Callable[[_Takeover], None]) -> None:
            with self._operator_lock:
                taken = self._operator.get(session_id)
                if taken is None:  # no take-over: nobody's input to put on the record
                    return
                event(taken)
                done = taken.gestures.take()
                if done:
                    taken.record(done)

        def pointer(taken: _Takeover, mask: int, x: int, y: int) -> None:
            if taken.reads is not None:
                taken.reads.moved(x, y, held=bool(mask & 0b111))
            taken.gestures.pointer(mask, x, y)

        return RfbInputTap(on_pointer=lambda mask, x, y: feed(lambda t: pointer(t, mask, x, y)),
                           on_key=lambda down, keysym: feed(lambda t: t.gestures.key(down, keysym)))

    def _operator_did(self, session_id: str, gestures: list) -> None:
        """A person's gestures: steps of the session's run, and marks on its recording if filmed."""
        with self._lock:
            runner = self._runners.get(session_id)
        if runner is not None:
            runner.record_operator(gestures)
        self.recordings.note_operator(session_id, gestures)

    def view(self, session_id: str) -> RunView | None:
        """The session's current or last run in this process, without starting anything."""
        with self._lock:
            runner = self._runners.get(session_id)
        return runner.view() if runner is not None else None

    def views(self) -> dict[str, RunView]:
        with self._lock:
            runners = dict(self._runners)
        return {sid: view for sid, r in runners.items()
                if self.desktops.peek(sid) is r.desktop and (view := r.view()) is not None}

    def _on_session(self, what: str, session_id: str) -> None:
        self.bus.publish(f"session_{what}", session_id=session_id)
        if what != "deleted":
            return
        self.recordings.session_ended(session_id)
        with self._operator_lock:
            taken = self._operator.pop(session_id, None)
        if taken is not None:
            taken.close(wait_s=0)
        # A deleted (or expired) session ends its run: a paused run would otherwise wait forever.
        with self._lock:
            runner = self._runners.pop(session_id, None)
        if runner is not None:
            runner.cancel()

    # ------------------------------------------------------------------ observers

    def _track(self, event: dict) -> None:
        sid, kind = event.get("session_id"), event.get("kind")
        if not sid:
            return
        if kind == "action":
            self.last_action[sid] = {"step": event.get("step"), "action": event.get("action"), "ts": event.get("ts")}
        elif kind in ("run_started", "run_finished"):
            self.last_action.pop(sid, None)

    def counts(self) -> dict[str, Any]:
        """What the metrics gauges read at scrape time."""
        sessions: dict[str, int] = {}
        for info in self.desktops.list():
            sessions[info.status] = sessions.get(info.status, 0) + 1
        views = self.views().values()
        return {
            "sessions": sessions,
            "warm": self.desktops.manager.warm_ready,
            "active": sum(v.active for v in views),
            "paused": sum(v.pause_reason is not None for v in views),
            "awaiting": sum(v.status == "needs_confirmation" for v in views),
        }

    # ------------------------------------------------------------------ traces

    def traces(self, limit: int = 100) -> list[TraceMeta]:
        return self.store.list_traces(limit=max(1, min(limit, 1000)))

    def trace(self, trace_id: str) -> Trace:
        try:
            return self.store.load(trace_id)
        except (TraceNotFound, InvalidTraceId) as exc:
            raise _not_found(exc) from exc
        except TraceCorrupt as exc:
            raise TraceCorruptError(f"{exc}; verifying the trace says where") from exc

    def verify(self, trace_id: str) -> VerifyResult:
        # Not trace(): a record that no longer parses is what verify exists to report.
        try:
            return self.store.verify(trace_id)
        except (TraceNotFound, InvalidTraceId) as exc:
            raise _not_found(exc) from exc

    def step_image(self, trace_id: str, index: int, which: ImageKind) -> Path:
        self.trace(trace_id)
        try:
            return self.store.image_path(trace_id, index, which)
        except TraceNotFound as exc:
            raise TraceNotFoundError(str(exc)) from exc

    def video_file(self, trace_id: str, name: str) -> Path:
        """A file of a filmed run's video receipt (video, chapters.vtt, captions.vtt)."""
        self.trace(trace_id)
        try:
            return self.store.video_file(trace_id, name)
        except TraceNotFound as exc:
            raise TraceNotFoundError(str(exc)) from exc

    def junit(self, trace_id: str) -> str:
        trace = self.trace(trace_id)
        return render_junit(trace.meta, trace.steps)

    def export_trace(self, trace_id: str, fmt: str) -> str:
        """The run as a test (vision.evidence.export): a glassdesk qa suite, or a Playwright spec."""
        check_format(fmt)
        return export_trace(self.trace(trace_id), fmt)


def _film_for(session) -> Callable | None:
    """How a run on this session is filmed, or None when its display is not this machine's (a
    session server's desktop: the film would have to be made there)."""
    from desktop.session.manager import Session

    if not isinstance(session, Session):
        return None

    def film(directory: Path, fmt: VideoFormat, title: str):
        from desktop.x11.receipt import VideoReceipt

        return VideoReceipt(session.display, directory, fmt=fmt, title=title)  # the display now: a restart moves it

    return film


def _not_found(exc: Exception) -> TraceNotFoundError:
    return TraceNotFoundError(f"{exc}; list the traces to see which exist" if isinstance(exc, TraceNotFound)
                              else str(exc))


def _screen_texts(before, after, secrets) -> list[str]:
    """The texts OCR reads in what changed between two frames (vision.perception.effects.ocr_appeared)."""
    import numpy as np

    from vision.perception.effects import ocr_appeared
    from vision.perception.ocr import shared_engine
    from vision.perception.spot import frame_rgb

    engine = shared_engine()

    def read(rgb):
        return [line.text for line in engine.read(np.ascontiguousarray(rgb[:, :, ::-1]))]  # rapidocr reads BGR

    return ocr_appeared(frame_rgb(before), frame_rgb(after), read, secrets)


OPERATOR_DRAIN_S = 10.0  # a take-over handed back waits this long for the person's last steps to be written


class _Takeover:
    """One take-over's input: the gestures being read off the stream, the reads of what was under
    the pointer (desktop.session.operator_reads; none for a desktop that cannot say), and a thread
    that records each finished gesture in order: it resolves the gesture's reads (no waiting: a read
    not back by the release is not taken) and hands it on, where a native window's click may cost
    an OCR read (vision.perception.spot), off the relay's thread."""

    def __init__(self, session_id: str, desktop, did: Callable[[str, list[Gesture]], None]):
        element_at = getattr(desktop, "element_at", None)
        # strict: a read that failed or timed out is "not known" (no record), never "no element there"
        # (which would record a spot and export a pixel for what was a page element).
        self.reads = PointerReads(lambda x, y: element_at(x, y, strict=True), desktop.capture) \
            if element_at is not None else None
        self.gestures = Gestures(on_press=self._pressed)
        self._queue: queue.Queue[list[Gesture] | None] = queue.Queue()
        self._did = did
        self._thread = threading.Thread(target=self._run, args=(session_id,), name=f"operator-{session_id}",
                                        daemon=True)
        self._thread.start()

    def _pressed(self, x: int, y: int, wheel: bool):
        return self.reads.pressed(x, y, wheel=wheel) if self.reads is not None else None

    def record(self, gestures: list[Gesture]) -> None:
        if gestures:
            self._queue.put(gestures)

    def close(self, wait_s: float) -> None:
        self._queue.put(None)
        if wait_s > 0:
            self._thread.join(wait_s)
        if self.reads is not None:
            self.reads.close()

    def _run(self, session_id: str) -> None:
        while (gestures := self._queue.get()) is not None:
            for gesture in gestures:
                look = self.reads.resolve(gesture.press, gesture.finished, wait_s=0) if self.reads else None
                gesture.element, gesture.frame = (look.element, look.frame) if look is not None else (None, None)
                gesture.press = None  # its reads are done with
            try:
                self._did(session_id, gestures)
            except Exception:  # the record is lost, never the take-over
                log.exception("session %s: the operator's input could not be recorded", session_id)


def _spot_at(frame, x: int, y: int, secrets) -> dict | None:
    """What was at (x, y) on ``frame``: the OCR text and a template image (vision.perception.spot)."""
    from vision.perception.spot import frame_rgb, spot_at

    return spot_at(frame_rgb(frame), x, y, secrets)
