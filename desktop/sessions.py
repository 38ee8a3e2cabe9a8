"""Sessions: one visible desktop each, isolated (display, ports, profile, temp dir), supervised.

The manager allocates, limits and expires sessions; a supervisor thread restarts what dies. A
session runs one input action at a time, so a screenshot taken after an action shows that action.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from desktop.actions import _Action
from desktop.errors import (
    ActionFailedError, InvalidAction, ScreenshotFailed, SessionLimit, SessionNotFound, SessionUnavailable,
)
from desktop.input import ActionFailed, Executor
from desktop.netpolicy import NetworkPolicy
from desktop.port import Performed
from desktop.screen import Frame, Screen, ScreenshotError
from desktop.stack import DesktopStack, StackConfig, StackError, tagged_pids
from desktop.windows import Windows

log = logging.getLogger("glassdesk.sessions")

SESSION_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
Status = Literal["starting", "ready", "restarting", "failed", "stopped"]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class SessionInfo(BaseModel):
    id: str
    display: str
    status: Status
    novnc_url: str
    created_at: datetime
    last_used_at: datetime
    restarts: int
    events: list[str]
    default: bool = Field(False, description="the session used when none is named")
    takeover: bool = Field(False, description="a person holds mouse and keyboard; agents' actions are refused")
    takeover_since: datetime | None = None


class LiveView(BaseModel):
    session_id: str
    host: str | None = Field(None, description="host of the websockify port; null: the host the API is on")
    port: int
    path: str = "websockify"
    password: str = Field(description="VNC password: the view-only one unless control was asked for")
    view_only: bool
    takeover: bool
    novnc_url: str = Field(description="the same, as a standalone noVNC page")


@dataclass
class Session:
    id: str
    stack: DesktopStack
    created_at: datetime = field(default_factory=utcnow)
    last_used_at: datetime = field(default_factory=utcnow)
    status: Status = "starting"
    # Set while a vision run drives the session: it never expires meanwhile, and direct actions
    # are refused instead of interleaving with the run's.
    busy: bool = False
    # When a person took over mouse and keyboard (None: nobody holds it); agents must not fight them.
    takeover_since: datetime | None = None

    def __post_init__(self):
        self.action_lock = threading.RLock()
        self._lifecycle = threading.Lock()
        self._bind()

    def _bind(self) -> None:
        """(Re)create the handles on the display; after a whole-stack restart it may be new."""
        env = self.stack.env()
        self.screen = Screen(self.stack.display) if self.stack.display else None
        self.executor = Executor(env)
        self.windows = Windows(env, self.stack.browser)

    def touch(self) -> None:
        self.last_used_at = utcnow()

    @property
    def display(self) -> str:
        return self.stack.display

    def info(self, *, default: bool = False) -> SessionInfo:
        return SessionInfo(
            id=self.id, display=self.stack.display, status=self.status,
            novnc_url=self.stack.novnc_url() if self.stack.web_port else "",
            created_at=self.created_at, last_used_at=self.last_used_at,
            restarts=sum(c.restarts for c in self.stack.children.values()), events=self.stack.events[-20:],
            default=default, takeover=self.takeover_since is not None, takeover_since=self.takeover_since,
        )

    def live_view(self, *, control: bool = False) -> LiveView:
        stack = self.stack
        if not stack.web_port:
            raise SessionUnavailable(f"session {self.id} has no live view yet; try again in a few seconds")
        return LiveView(session_id=self.id, host=stack.config.public_host or None, port=stack.web_port,
                        password=stack.vnc_password if control else stack.view_password, view_only=not control,
                        takeover=self.takeover_since is not None, novnc_url=stack.novnc_url(control=control))

    def require_ready(self) -> None:
        if self.status != "ready":
            raise SessionUnavailable(f"session {self.id} is {self.status}; try again in a few seconds")

    def capture(self) -> Frame:
        self.require_ready()
        self.touch()
        try:
            return self.screen.capture()
        except ScreenshotError as exc:
            raise ScreenshotFailed(str(exc)) from exc

    def perform(self, action: _Action, *, before: Frame | None = None, settle: bool = True) -> Performed:
        """Execute one action and wait for the screen to settle. ``before`` is the frame from
        before the action if the caller has it (the loop does), saving one capture."""
        self.require_ready()
        self.touch()
        with self.action_lock:
            try:
                before = before or self.screen.capture()
                executed = self.executor.run(action)
                if settle:
                    frame, settle_ms = self.screen.settle(before=before)
                else:
                    frame, settle_ms = self.screen.capture(), 0
            except ActionFailed as exc:
                raise ActionFailedError(str(exc), argv=exc.argv, stderr=exc.stderr) from exc
            except ScreenshotError as exc:
                raise ScreenshotFailed(str(exc)) from exc
        return Performed(executed.argv, executed.duration_ms, settle_ms, frame)

    def cursor(self) -> tuple[int, int]:
        self.require_ready()
        try:
            return self.executor.cursor()
        except ActionFailed as exc:
            raise ActionFailedError(str(exc), argv=exc.argv, stderr=exc.stderr) from exc

    def page_url(self) -> str | None:
        return self.windows.page_url() if self.status == "ready" else None

    def run_settled(self, run, before: Frame | None = None) -> Performed:
        """Run a non-input side effect (open, focus, launch) and settle like an action."""
        self.require_ready()
        self.touch()
        with self.action_lock:
            before = before or self.screen.capture()
            start = time.perf_counter()
            executed = run()
            duration = (time.perf_counter() - start) * 1000
            frame, settle_ms = self.screen.settle(before=before, first_change_ms=400)
        return Performed(executed, duration, settle_ms, frame)

    def reset(self) -> None:
        """Return to a fresh session (desktop.stack.DesktopStack.reset) on the same display. Actions
        wait for it; a failed reset leaves the session for the supervisor to heal."""
        self.require_ready()
        with self._lifecycle, self.action_lock:
            try:
                self.stack.reset()
            except StackError as exc:
                raise SessionUnavailable(f"session {self.id} could not be reset: {exc}") from exc
            finally:
                self._bind()
        self.touch()

    def heal(self) -> list[str]:
        # Under the lifecycle lock: a delete that races a heal waits for it, then stops what it
        # brought back, instead of the heal rebuilding a stack that was just closed.
        with self._lifecycle:
            if self.status not in ("ready", "restarting"):
                return []
            dead = [n for n, c in self.stack.children.items() if not c.alive]
            if not dead:
                return []
            self.status = "restarting"
            try:
                with self.action_lock:
                    events = self.stack.heal()
                    self._bind()
                self.status = "ready"
                return events
            except StackError as exc:
                self.status = "failed"
                self.stack.events.append(f"restart failed: {exc}")
                log.error("session %s could not be restarted: %s", self.id, exc)
                return [str(exc)]

    def close(self) -> None:
        with self._lifecycle:
            self.status = "stopped"
            if self.screen:
                self.screen.close()
            self.stack.close()


class SessionManager:
    """The registry of sessions, their limits and expiry, and the supervisor that heals them."""

    def __init__(self, *, root: Path | None = None, max_sessions: int = 10, idle_ttl_s: float = 1800,
                 stack_config: StackConfig | None = None, supervise_every_s: float = 0.5):
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="glassdesk-"))
        self.max_sessions = max_sessions
        self.idle_ttl_s = idle_ttl_s
        self.stack_config = stack_config or StackConfig()
        self.sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._supervise_every_s = supervise_every_s
        self._supervisor = threading.Thread(target=self._supervise, name="glassdesk-supervisor", daemon=True)
        self._supervisor.start()
        # Sessions that must not expire while idle (the one `glassdesk up` starts).
        self.pinned: set[str] = set()
        # Called with (what, session_id) on "created", "deleted", "restarted": how the interfaces
        # learn of changes without this module knowing them.
        self.listeners: list = []
        # glassdesk's own ports besides the sessions' (the API's, added by whoever serves it): no
        # session's browser may reach them (desktop.netpolicy).
        self.protected_ports: set[int] = set()

    def control_ports(self) -> set[int]:
        """Every port of glassdesk's control plane, as of now: the protected ones and each
        session's live view and proxy (a session started later counts from its start)."""
        ports = set(self.protected_ports)
        for session in list(self.sessions.values()):
            ports |= session.stack.own_ports()
        return ports

    def _notify(self, what: str, session_id: str) -> None:
        for listener in list(self.listeners):
            try:
                listener(what, session_id)
            except Exception:  # a listener's trouble is not the session's
                log.exception("session listener failed on %s %s", what, session_id)

    def create(self, session_id: str | None = None, *, pinned: bool = False,
               network: NetworkPolicy | None = None) -> Session:
        if session_id is not None and not SESSION_ID.match(session_id):
            raise InvalidAction("id: use 1-32 lower-case letters, digits, '-' or '_', starting with a letter or digit")
        with self._lock:
            if session_id in self.sessions:
                raise InvalidAction(f"id: a session named {session_id!r} already exists")
            if len(self.sessions) >= self.max_sessions:
                raise SessionLimit(f"all {self.max_sessions} sessions are in use; delete one or raise the session limit")
            session_id = session_id or f"s-{secrets.token_hex(4)}"
            workdir = self.root / session_id
            session = Session(session_id, DesktopStack(workdir, self.stack_config, network=network or NetworkPolicy(),
                                                       control_ports=self.control_ports))
            self.sessions[session_id] = session
            if pinned:
                self.pinned.add(session_id)
        try:
            session.stack.start()
        except StackError:
            session.stack.close()  # gives its noVNC port back
            with self._lock:
                self.sessions.pop(session_id, None)
            session.status = "failed"
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        with session._lifecycle:  # a delete that came while it started wins: no closed session marked ready
            if session.status == "stopped":
                raise SessionUnavailable(f"session {session_id} was deleted while it started")
            session._bind()
            session.touch()  # idle time counts from when it can be used, not from before it started
            session.status = "ready"
        log.info("session %s ready on %s", session_id, session.stack.display)
        self._notify("created", session_id)
        return session

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionNotFound(f"no session {session_id!r}; list the sessions to see which exist")
        return session

    def list(self) -> list[Session]:
        return list(self.sessions.values())

    def delete(self, session_id: str) -> None:
        with self._lock:
            session = self.get(session_id)
            del self.sessions[session_id]
            self.pinned.discard(session_id)
        session.close()
        shutil.rmtree(session.stack.workdir, ignore_errors=True)
        log.info("session %s deleted", session_id)
        self._notify("deleted", session_id)

    def abort_starting(self) -> None:
        """End the processes of every desktop still starting: its start holds the stack's lock
        until it is up, and a shutdown should not wait for that."""
        for session in [s for s in list(self.sessions.values()) if s.status == "starting"]:
            for pid in tagged_pids(session.stack.tag):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        for session_id in list(self.sessions):
            try:
                self.delete(session_id)
            except SessionNotFound:
                pass

    def _supervise(self) -> None:
        while not self._stop.wait(self._supervise_every_s):
            for session in list(self.sessions.values()):
                try:
                    if session.heal():
                        self._notify("restarted", session.id)
                    self._expire(session)
                except Exception:  # the supervisor must outlive any one session's trouble
                    log.exception("supervising session %s", session.id)

    def _expire(self, session: Session) -> None:
        if session.id in self.pinned or session.busy or session.status in ("starting", "restarting"):
            return
        idle = (utcnow() - session.last_used_at).total_seconds()
        if idle > self.idle_ttl_s:
            log.info("session %s idle for %.0fs; expiring", session.id, idle)
            try:
                self.delete(session.id)
            except SessionNotFound:
                pass
