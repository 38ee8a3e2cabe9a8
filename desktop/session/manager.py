"""Sessions: one visible desktop each, isolated (display, ports, profile, temp dir), supervised.

The manager allocates, limits and expires sessions; a supervisor thread restarts what dies. A
session runs one input action at a time, so a screenshot taken after an action shows that action.
A request waits at most QUEUE_WAIT_S for the action before it, then is told how long to wait.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from desktop.actions import Move, Type, _Action
from desktop.errors import (
    ActionFailedError,
    GlassdeskError,
    InvalidAction,
    ScreenshotFailed,
    SessionBusy,
    SessionExists,
    SessionLimit,
    SessionNotFound,
    SessionUnavailable,
    StackError,
)
from desktop.frame import Frame, Pointer
from desktop.models import (
    DesktopTree,
    ElementAt,
    Marks,
    NativeFound,
    NativeMatch,
    NativeTarget,
    SessionInfo,
    Status,
    TreeQuery,
    Window,
)
from desktop.network.policy import NetworkPolicy
from desktop.network.servers import ServerRegistry
from desktop.port import Performed
from desktop.session.pool import WARM_RETRY_S, WarmPool, check_warm  # noqa: F401 - check_warm: its old home
from desktop.session.settle import HIT_TIMEOUT_S, READ_TIMEOUT_S, InputSettle, in_background
from desktop.session.stack import VIEWER_PARTS, DesktopStack, StackConfig, report_isolation, tagged_pids
from desktop.session.tree import find_native, native_target, read_marks, read_tree
from desktop.x11.atspi import AccessibilityReader
from desktop.x11.input import ActionFailed, Executor, expected_ms
from desktop.x11.screen import WINDOW_FIRST_CHANGE_MS, Screen, ScreenshotError
from desktop.x11.user import open_session_root, write_file_argv
from desktop.x11.windows import WindowError, Windows

CURSOR_ATTEMPTS = 3  # reads of the pointer before a failure is the desktop's (Session.cursor)
log = logging.getLogger("glassdesk.sessions")

SESSION_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
# How long a request waits for the action already running on its session (a 30 s wait, a long
# type) before it is refused with session_busy and an estimate of when to try again: never until
# the client's own timeout. A vision run's own steps wait as long as it takes: what holds the
# session then is bounded (one action that began before the run, or a heal).
QUEUE_WAIT_S = 5.0
# The retry hint of a session that is starting or restarting: a part restarts in 1-3 s, the whole
# desktop in about 5.
RESTART_RETRY_S = 2
# About how long a reset takes (Chromium restarts), for whoever waits behind one.
RESET_EXPECTED_S = 3.0
# A live view that could not be restarted is tried again this much later, not at every look.
VIEWER_RETRY_S = 10.0




def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Running:
    """The action holding a session's action lock, for the estimate given to whoever waits behind it."""

    what: str
    ends_at: float  # time.monotonic() by when it should be done

    def remaining_s(self) -> float:
        return max(0.0, self.ends_at - time.monotonic())


DOWN_MARK_WAIT_S = 0.5  # how long a failed capture waits for a heal under way to let it mark the session
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
    run_thread: int | None = None  # the thread of the run driving it: its own page operations pass
    # When a person took over mouse and keyboard (None: nobody holds it); agents must not fight them.
    takeover_since: datetime | None = None
    # Signed into every live-view token; a take-over bumps it, revoking the control tokens issued
    # before. Random at first, so a later session of the same name honours none of this one's.
    live_generation: int = field(default_factory=lambda: secrets.randbelow(2**31))
    # Which session of this name this is: signed into every live-view token (never sent), so a token
    # of a deleted session opens none made later under the same name.
    instance: str = field(default_factory=lambda: secrets.token_hex(16))

    def __post_init__(self):
        # Called with (action as a dict, time.monotonic()) as each action starts: a session recording's marks.
        self.input_watchers: list[Callable[[dict, float], None]] = []
        self.action_lock = threading.RLock()
        self._running: Running | None = None
        self._viewer_retry_at = 0.0
        self._lifecycle = threading.Lock()
        # Why the session is failed (a whole-desktop restart that gave up), for its errors; a reset
        # rebuilds it.
        self.failure: str | None = None
        # What was restarted that lost state (the Desktop port's heals): a run reads it. The page
        # record's list, which outlives browser heals and resets: a crashed tab's heal (the page layer's)
        # and the supervisor's are one sequence.
        self.heal_log: list[str] = self.stack.record.heals
        self._bind()

    def _bind(self) -> None:
        """(Re)create the handles on the display; after a whole-stack restart it may be new."""
        env = self.stack.env()
        old = getattr(self, "screen", None)
        if old is not None:
            old.close()  # its damage connection: to a display that may be gone
        self.screen = Screen(self.stack.display) if self.stack.display else None
        self.executor = Executor(env)
        self.windows = Windows(env, self.stack.run_prefix(), self.stack.user)
        old_reader = getattr(self, "accessibility", None)
        if old_reader is not None:
            old_reader.close()  # it read the bus of a desktop that may be gone
        self.accessibility = AccessibilityReader(env, self.stack.run_prefix())
        # The reads before an input and the wait after it, on this binding (a new page focus too).
        self.settle = InputSettle(self.id, self.stack, self._screen, self.executor, self.accessibility)
        if self.stack.display:  # its desktop is up: the reader starts now, not on a pointer action's read
            threading.Thread(target=self.accessibility.warm, name=f"glassdesk-atspi-{self.id}", daemon=True).start()

    def touch(self) -> None:
        self.last_used_at = utcnow()

    @property
    def display(self) -> str:
        return self.stack.display

    def _screen(self) -> Screen:
        """The display's screen. None only before the desktop first started: a session is said ready
        only after a _bind on its started display, whose name the stack never unsets, and its
        readers and actions pass require_ready first."""
        if self.screen is None:
            raise self._unavailable()
        return self.screen

    def info(self, *, default: bool = False, novnc_url: str = "") -> SessionInfo:
        return SessionInfo(
            id=self.id, display=self.stack.display, status=self.status, novnc_url=novnc_url,
            created_at=self.created_at, last_used_at=self.last_used_at,
            restarts=self.stack.restarts, events=self.stack.events[-20:],
            default=default, takeover=self.takeover_since is not None, takeover_since=self.takeover_since,
        )

    def rfb_target(self, *, control: bool) -> tuple[int, str]:
        """x11vnc's loopback port and the password for this mode: the view-only one unless
        ``control``. For the live-view relay only; neither leaves the server."""
        if not self.stack.vnc_port or self.status not in ("ready", "restarting"):
            raise SessionUnavailable(f"session {self.id} is {self.status}; its live view is not up")
        return self.stack.vnc_port, self.stack.vnc_password if control else self.stack.view_password

    def require_ready(self) -> None:
        if self.status == "failed":
            raise SessionUnavailable(f"session {self.id} failed: {self.failure or 'its desktop is down'}; "
                                     "reset it to rebuild its desktop, or delete it")
        if self.status != "ready":
            raise SessionUnavailable(f"session {self.id} is {self.status}; try again in a few seconds",
                                     retry_after=RESTART_RETRY_S)

    def down_error(self) -> SessionUnavailable | None:
        """After a capture or a command failed: session_unavailable if the desktop died under it
        (and the status says restarting from now on, not from the supervisor's next look), else
        None - the failure is the caller's to report."""
        if self.status != "ready":
            return self._unavailable()
        # The X connection closes a moment before its dead server can be reaped: look twice.
        deadline = time.monotonic() + 0.2
        while not (dead := self._dead_core()):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)
        # A heal (or a delete) may hold the lock: the supervisor's look that began before the death,
        # still reading the parts, or the heal itself (which marks the status). Waited for briefly,
        # so that from this answer on the status does not say ready while the desktop is dead;
        # bounded, since the caller may hold the action lock that a heal takes next.
        if not self._lifecycle.acquire(timeout=DOWN_MARK_WAIT_S):
            return self._unavailable(dead)
        try:  # under the lifecycle lock: a heal cannot finish between the look and the mark
            if self.status == "ready" and self._dead_core():
                self.status = "restarting"
        finally:
            self._lifecycle.release()
        return self._unavailable(dead)

    def _dead_core(self) -> list[str]:
        return [name for name in self.stack.dead_parts() if name not in VIEWER_PARTS]

    def _unavailable(self, dead: list[str] | None = None) -> SessionUnavailable:
        why = f"{', '.join(dead)} died; it is restarting" if dead else f"it is {self.status}"
        return SessionUnavailable(f"session {self.id}: {why}; try again in a few seconds", retry_after=RESTART_RETRY_S)

    @contextmanager
    def _acting(self, what: str, expected_s: float, queue_s: float | None) -> Iterator[None]:
        """Hold the action lock for one action. With ``queue_s``, wait at most that long for the
        action before, then refuse: session_busy with an estimate of when it ends."""
        if not self._take_action_lock(queue_s):
            raise self._busy()
        try:
            self.require_ready()  # a heal may have run while this waited
            self._running = Running(what, time.monotonic() + expected_s)
            yield
        finally:
            self._running = None
            self.action_lock.release()

    def exclusive(self, what: str, queue_s: float | None = QUEUE_WAIT_S):
        """Hold the action lock across several steps that must not be interleaved with anyone
        else's action (find an element, then click it; click a field, clear it, type). The lock
        is re-entrant, so the steps' own ``perform`` calls go through."""
        return self._acting(what, 1.0, queue_s)

    def _take_action_lock(self, queue_s: float | None) -> bool:
        if self.action_lock.acquire(blocking=False):
            return True
        if queue_s is None:
            return self.action_lock.acquire()
        running = self._running
        if running is not None and running.remaining_s() > queue_s:
            return False  # it will not be done in time: say so now rather than hold the caller
        return self.action_lock.acquire(timeout=queue_s)

    def _busy(self) -> GlassdeskError:
        if self.status != "ready":  # a heal holds the lock
            return self._unavailable()
        running = self._running
        if running is None:  # it ended just as this gave up
            return SessionBusy(f"session {self.id} was busy with another action; try again", retry_after=1)
        left = running.remaining_s()
        return SessionBusy(f"session {self.id} is busy with {running.what} (about {left:.0f} s left); one action "
                           "runs at a time", retry_after=left)

    def capture(self) -> Frame:
        self.require_ready()
        self.touch()
        try:
            return self._screen().capture()
        except ScreenshotError as exc:
            raise self.down_error() or ScreenshotFailed(str(exc)) from exc

    def pointer(self) -> Pointer:
        """The pointer's position and image, as the X server draws it over the screen."""
        self.require_ready()
        try:
            return self._screen().pointer()
        except ScreenshotError as exc:
            raise self.down_error() or ScreenshotFailed(str(exc)) from exc

    def perform(self, action: _Action, *, settle: bool = True, queue_s: float | None = None,
                glide: bool = True) -> Performed:
        """Execute one action and wait for the screen to settle (one capture, when it has: the
        settle watches the display's damage events, not frames). ``queue_s``: how long to wait for
        an action already running (None: as long as it takes). ``glide`` false: the pointer goes to
        its target at once whatever the server's glide (a step nobody needs to watch)."""
        self.require_ready()
        self.touch()
        expected_s = expected_ms(action, self.executor.glide_ms if glide else 0) / 1000
        dumped = action.model_dump()  # for the watchers; its "action" is the name every input action has
        with self._acting(f"a {dumped['action']} action", expected_s, queue_s):
            self.note_input(dumped)
            try:
                if not settle:
                    executed = self.executor.run(action, glide=glide)
                    return Performed(executed.argv, executed.duration_ms, 0, self._screen().capture(), True, "none")
                self.executor.keep_one_click(action)  # before the mark: the wait is no part of the click
                watch = self.settle.browser_watch()
                if isinstance(action, Type):
                    self.settle.refuse_typing_into_nothing(watch)
                native, program = self.settle.native_reads(action) if watch is None else (None, None)
                if watch is not None and self.executor.glides(action, glide):
                    # The page is read while the pointer glides there (~150 ms, against the reads'
                    # ~15): the record costs the action nothing; the press waits for the reads.
                    reads = in_background(lambda: self.settle.browser_reads(watch, action))
                    self._screen().mark()
                    executed = self.executor.run(action, before_act=reads.result, glide=glide)
                    element, counted, control = reads.result()
                else:
                    element, counted, control = self.settle.browser_reads(watch, action)
                    self._screen().mark()
                    executed = self.executor.run(action, glide=glide)
                native = native or control
                shot, settled_by = self.settle.settle_after_input(watch, counted, program)
                self.settle.follow_page_focus(action, element)
            except ActionFailed as exc:
                raise self.down_error() or ActionFailedError(str(exc), argv=exc.argv, stderr=exc.stderr) from exc
            except ScreenshotError as exc:
                raise self.down_error() or ScreenshotFailed(str(exc)) from exc
        return Performed(executed.argv, executed.duration_ms, shot.settle_ms, shot.frame, shot.settled, settled_by,
                         element, changed=shot.changed or settled_by in ("dialog", "navigation"), native=native)

    def element_at(self, x: int, y: int, *, strict: bool = False) -> ElementAt | None:
        """What is under display pixel (x, y) in the browser now, when Chromium is in front (the
        check a heal makes before acting on what it found); None otherwise. ``strict``: a read that
        fails or times out raises rather than answering None, for a caller that must tell "nothing
        there" from "not known" (a take-over's reads, desktop.session.operator_reads)."""
        watch = self.settle.browser_watch()
        if watch is None:
            return None
        return self.settle.element_at(watch, Move(x=x, y=y), strict=strict, timeout_s=READ_TIMEOUT_S)

    # ------------------------------------------------------------------ the home's files (saved states)

    def read_home_files(self, paths: list[str]) -> tuple[dict[str, bytes], list[str]]:
        """Files of the desktop user's home (paths relative to it), read as that user: what it may not
        read is not handed over. What was read, and one line for each that could not be."""
        files, problems = {}, []
        for path in paths:
            done = self._as_desktop_user(["cat", "--", path])
            if done.returncode == 0:
                files[path] = done.stdout
            else:
                problems.append(f"~/{path}: {done.stderr.decode(errors='replace').strip() or 'cannot be read'}")
        return files, problems

    def write_home_files(self, files: dict[str, bytes]) -> None:
        """Files written into the desktop user's home as that user (their directories made)."""
        for path, data in files.items():
            done = self._as_desktop_user(write_file_argv(path), data)
            if done.returncode != 0:
                raise StackError(f"~/{path} could not be written: {done.stderr.decode(errors='replace').strip()}")

    def _as_desktop_user(self, argv: list[str], data: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*self.stack.run_prefix(), *argv], input=data, capture_output=True,
                              env=self.stack.env(), cwd=self.stack.home, timeout=30)

    def list_windows(self) -> list[Window]:
        """The windows on the display, each at the place its content is drawn (Screen.windows)."""
        return self._screen().windows()

    @property
    def browser_pid(self) -> int | None:
        browser = self.stack.browser
        return browser.process.pid if browser is not None and browser.process is not None else None

    def desktop_tree(self, query: TreeQuery) -> DesktopTree:
        """The visible desktop as one tree (desktop.session.tree): windows, their native nodes, the page."""
        self.require_ready()
        return read_tree(query, self.list_windows, self._screen(), self.accessibility, self.browser_pid,
                         lambda: (watch := self.settle.browser_watch()) and watch[0])

    def marks(self, limit: int, image: bool) -> Marks:
        """Set-of-marks: the controls a person can act on now, numbered (desktop.session.tree.read_marks)."""
        self.require_ready()
        return read_marks(limit, image, self.list_windows, self._screen(), self.accessibility, self.stack.browser,
                          self.browser_pid)

    def native_find(self, target: NativeTarget) -> NativeFound:
        """The showing controls of the native windows that ``target`` names (desktop.native)."""
        self.require_ready()
        return find_native(target, self.list_windows, self._screen(), self.accessibility, self.browser_pid)

    def native_target(self, target: NativeTarget) -> NativeMatch:
        """The one uncovered control an action on ``target`` acts on (desktop.session.tree.native_target)."""
        self.require_ready()
        return native_target(target, self.list_windows, self._screen(), self.accessibility, self.browser_pid)

    def visible_texts(self) -> list[str] | None:
        """The short texts visible in the page when Chromium is in front (desktop.browser.pages
        VISIBLE_TEXTS), else None: what a run compares around a step (vision.perception.effects). Bounded
        like the element read: a page that cannot say in time costs nothing but the record."""
        watch = self.settle.browser_watch()
        if watch is None:
            return None
        try:
            return watch[0].call(lambda pages: pages.texts(), HIT_TIMEOUT_S)
        except Exception as exc:
            log.debug("session %s: no visible texts: %s", self.id, exc)
            return None

    def note_input(self, action: dict) -> None:
        """Whoever watches this desktop's input (a session recording marks each action on its
        film) hears of the action as it starts; a watcher that fails never costs the action. Called
        for each action performed here, and by what acts on the desktop past ``perform`` (an
        OSWorld guest's pyautogui code: desktop.osworld)."""
        for watcher in list(self.input_watchers):
            try:
                watcher(action, time.monotonic())
            except Exception:
                log.exception("session %s: an input watcher failed", self.id)

    def cursor(self) -> tuple[int, int]:
        """The pointer's position. Reading it changes nothing, so a failed read is tried again; one
        that keeps failing is the desktop not answering for a moment (XFCE restarting its window
        manager, a part it heals itself, so down_error() does not know it): 503, not a 500."""
        self.require_ready()
        for attempt in range(CURSOR_ATTEMPTS):
            try:
                return self.executor.cursor()
            except ActionFailed as exc:
                down = self.down_error()
                if down is not None:
                    raise down from exc
                if attempt == CURSOR_ATTEMPTS - 1:
                    raise SessionUnavailable(f"session {self.id} did not answer where the pointer is ({exc}); "
                                             "try again in a moment", retry_after=1) from exc
                time.sleep(0.1)
        raise AssertionError("unreachable")

    def page_url(self) -> str | None:
        """The URL of the tab in front."""
        browser = self.stack.browser
        return browser.page_url() if self.status == "ready" and browser is not None else None

    def open_url(self, url: str) -> list[list[str]]:
        """Load ``url`` in the session's Chromium (through its pipe: the page gets the keyboard, as
        desktop.browser.navigation does for every goto) and bring its window to the front; the
        argv-like record of what ran, for the answer's ``executed``."""
        browser = self.stack.browser
        if browser is None:
            raise RuntimeError("Chromium is not running")
        try:
            browser.open_url(url)
        except ValueError as exc:
            raise WindowError(str(exc)) from None
        self.windows.raise_class("chromium")
        self.settle.page_focus_window = None  # a new page: its focus is judged after a click in it
        return [["browser", "goto", url]]

    def run_settled(self, run, *, what: str = "a window operation",
                    queue_s: float | None = None) -> Performed:
        """Run a non-input side effect (open, focus, launch) and settle like an action."""
        self.require_ready()
        self.touch()
        with self._acting(what, 1.0, queue_s):
            self._screen().mark()
            start = time.perf_counter()
            executed = run()
            duration = (time.perf_counter() - start) * 1000
            shot = self._screen().settle(first_change_ms=WINDOW_FIRST_CHANGE_MS)
        return Performed(executed, duration, shot.settle_ms, shot.frame, shot.settled,
                         "damage" if shot.settled else "timeout", changed=shot.changed)

    def reset(self, *, queue_s: float | None = None) -> None:
        """Return to a fresh session (desktop.session.stack.DesktopStack.reset) on the same display. Actions
        wait for it; a failed reset leaves the session for the supervisor to heal. ``queue_s``: as
        for perform."""
        if self.status == "failed":
            return self._rebuild(queue_s)
        self.require_ready()
        # A heal, a delete or another reset holds the lifecycle lock: wait for it as long as for
        # an action, then say so, rather than hold the caller without bound.
        if not self._lifecycle.acquire(timeout=queue_s if queue_s is not None else -1):
            raise self._busy()
        try:
            with self._acting("a reset", RESET_EXPECTED_S, queue_s):
                try:
                    self.stack.reset()
                except Exception as exc:  # a failed reset leaves the session to the supervisor
                    raise SessionUnavailable(f"session {self.id} could not be reset: {exc}",
                                             retry_after=RESTART_RETRY_S) from exc
                finally:
                    self._bind()
        finally:
            self._lifecycle.release()
        self.touch()

    def _rebuild(self, queue_s: float | None) -> None:
        """The reset of a failed session: its whole desktop started again (the default session
        included, which never expires and so would otherwise stay failed for good)."""
        if not self._lifecycle.acquire(timeout=queue_s if queue_s is not None else -1):
            raise self._busy()
        try:
            if self.status != "failed":  # healed or deleted meanwhile
                if self.status == "stopped":
                    raise SessionUnavailable(f"session {self.id} was deleted")
                return
            self.status = "restarting"
            with self.action_lock:
                try:
                    self.stack.rebuild(backoff_s=())
                except StackError as exc:
                    self._failed(exc)
                    raise SessionUnavailable(f"session {self.id} could not be rebuilt: {exc}") from exc
                self._bind()
            self.stack._note("reset: the failed desktop was rebuilt")
            self.failure = None
            self.status = "ready"
        finally:
            self._lifecycle.release()
        self.touch()

    def _failed(self, exc: Exception) -> None:
        self.failure = str(exc).splitlines()[0]
        self.status = "failed"
        self.stack.events.append(f"restart failed: {exc}")
        log.error("session %s could not be restarted: %s", self.id, exc)

    def heal(self) -> list[str]:
        # Under the lifecycle lock: a delete that races a heal waits for it, then stops what it
        # brought back, instead of the heal rebuilding a stack that was just closed. Held by a
        # reset or a delete: this session is looked at again on the supervisor's next round, and
        # the other sessions are not kept waiting meanwhile.
        if not self._lifecycle.acquire(blocking=False):
            return []
        try:
            return self._heal_locked()
        finally:
            self._lifecycle.release()

    def _heal_locked(self) -> list[str]:
        if self.status not in ("ready", "restarting"):
            return []
        dead = self.stack.dead_parts()
        if not dead:
            if self.status != "ready":
                return []
            try:
                done = self.stack.check_window_manager()
            except StackError as exc:  # tried again on the supervisor's next look
                self.stack.events.append(f"restart failed: {exc}")
                log.error("session %s: no window manager could be started: %s", self.id, exc)
                return [str(exc)]
            return [done] if done else []
        if all(name in VIEWER_PARTS for name in dead):
            return self._heal_viewer(dead) if time.monotonic() >= self._viewer_retry_at else []
        self.status = "restarting"
        try:
            with self.action_lock:
                events = self.stack.heal()
                self._bind()
            # What the stack restarted, not what was seen dead before: Chromium dies of a killed
            # Xvfb a moment before the Xvfb is seen gone, and the whole desktop was restarted.
            healed = self.stack.last_healed
            if [name for name in healed if name not in VIEWER_PARTS and name != "wm"]:
                whole = any(name not in DesktopStack.STARTERS for name in healed)
                self.heal_log.append("desktop" if whole else "chromium")
            self.status = "ready"
            return events
        except StackError as exc:
            self._failed(exc)
            return [str(exc)]

    def _heal_viewer(self, dead: list[str]) -> list[str]:
        """Only the live view went: screenshots and input do not pass through it, so it is healed
        behind the agent's back, the status ready and the action lock free all along."""
        try:
            return self.stack.heal(dead)
        except StackError as exc:  # the agent can go on without a live view; a later look tries again
            self._viewer_retry_at = time.monotonic() + VIEWER_RETRY_S
            self.stack.events.append(f"restart failed: {exc}")
            log.error("session %s: the live view could not be restarted: %s", self.id, exc)
            return [str(exc)]

    def heals(self) -> list[str]:
        return list(self.heal_log)

    def close(self) -> None:
        with self._lifecycle:
            self.status = "stopped"
            if self.screen:
                self.screen.close()
            self.accessibility.close()
            self.stack.close()


class SessionRegistry:
    """What every registry of sessions shares, local (SessionManager) or remote (BackendSessions in
    desktop.remote.backends.manager): the sessions by id, their limit and names, lookup, and the listeners.
    A subclass sets ``sessions``, ``max_sessions``, ``listeners``, ``_lock``, ``protected_ports`` and
    ``servers`` (this host's registry of glassdesk servers: desktop.network.servers)."""

    sessions: dict
    protected_ports: set[int]
    servers: ServerRegistry
    # How sessions are kept apart (desktop.session.stack.isolation), for /healthz: the local
    # manager's; None for a remote registry, whose sessions are each a container or pod.
    isolation: dict | None = None
    max_sessions: int
    listeners: list

    def own_ports(self) -> set[int]:
        """This server's control plane: what no session, of this server or any other, may reach."""
        return set(self.protected_ports)

    def protect(self, *ports: int) -> None:
        """Add ports of this server's own (its API) to its control plane, refused here and by every
        other server's sessions."""
        self.protected_ports.update(ports)
        self.servers.publish(self.own_ports())

    def unprotect(self, *ports: int) -> None:
        """Take ports that no longer serve (a closed OSWorld guest server's) out of the control plane."""
        self.protected_ports.difference_update(ports)
        self.servers.publish(self.own_ports())

    def _claim(self, session_id: str | None, *, held: int = 0) -> str:
        """The id a new session gets: ``session_id`` checked, or a fresh one. Call it holding
        ``_lock``, and register the session before letting go, so that no other create takes it.
        ``held``: sessions beyond the listed ones that count toward the limit (a warm pool's)."""
        self._check_id(session_id)
        if len(self.sessions) + held >= self.max_sessions:
            pooled = f" ({held} of them started ahead for the warm pool)" if held else ""
            raise SessionLimit(f"all {self.max_sessions} sessions are in use{pooled}; delete one or raise the "
                               "session limit")
        return session_id or f"s-{secrets.token_hex(4)}"

    def _check_id(self, session_id: str | None) -> None:
        if session_id is not None and not SESSION_ID.match(session_id):
            raise InvalidAction("id: use 1-32 lower-case letters, digits, '-' or '_', starting with a letter or digit")
        if session_id in self.sessions:
            raise SessionExists(f"id: a session named {session_id!r} already exists; use it, delete it first, "
                                "or choose another name")

    # ------------------------------------------------------------------ the warm pool (desktop.session.pool)

    # Set by a registry that keeps a warm pool (both do): its ``WarmPool`` on ``_lock``.
    pool: WarmPool | None = None

    @property
    def warm_ready(self) -> int:
        """Sessions started ahead and waiting to be claimed (none but where a warm pool is kept)."""
        return self.pool.ready_count if self.pool is not None else 0

    @property
    def warm(self) -> int:
        """How many sessions the pool keeps started ahead (0: no pool)."""
        return self.pool.size if self.pool is not None else 0

    def keep_warm(self, n: int) -> None:
        """Keep ``n`` sessions started ahead from now on (0: none). InvalidAction, changing
        nothing, when ``n`` is negative or the pool would not fit beside one session."""
        problems = check_warm(n, self.max_sessions)
        if problems:
            raise InvalidAction("; ".join(problems))
        if self.pool is None:  # never: both registries keep one (pool)
            raise RuntimeError("this registry keeps no warm pool")
        self.pool.resize(n)

    def _pooled(self) -> int:
        """The pool's sessions that hold a place under the limit: ready or starting."""
        return self.pool.held() if self.pool is not None else 0

    def _claim_warm(self, session_id: str | None, wait_s: float):
        """Holding ``_lock``: the new session's id and, when the pool has one, its pooled item
        (None: start one cold). When the limit is full only because a pooled item is starting,
        wait for it (at most ``wait_s``): it is this create's, sooner than a cold start would be."""
        pool = self.pool
        while True:
            self._check_id(session_id)
            item = pool.take() if pool is not None else None
            if item is not None:
                return session_id or f"s-{secrets.token_hex(4)}", item
            if pool is None or pool.starting is None or len(self.sessions) + pool.held() < self.max_sessions:
                return self._claim(session_id, held=self._pooled()), None
            if not pool.changed.wait(wait_s):
                return self._claim(session_id, held=self._pooled()), None

    def _notify(self, what: str, session_id: str) -> None:
        self.servers.publish(self.own_ports())  # a session's ports came or went
        for listener in list(self.listeners):
            try:
                listener(what, session_id)
            except Exception:  # a listener's trouble is not the session's
                log.exception("session listener failed on %s %s", what, session_id)

    def get(self, session_id: str):
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionNotFound(f"no session {session_id!r}; list the sessions to see which exist")
        return session

    def list(self) -> list:
        return list(self.sessions.values())

    def close(self) -> None:
        """End every session (the server stops)."""
        raise NotImplementedError  # each registry ends its own kind


# A pooled desktop's directory: outside the id grammar (SESSION_ID starts with a letter or digit),
# so no session name can ever take it.
WARM_PREFIX = "_warm-"


class SessionManager(SessionRegistry):
    """The registry of sessions, their limits and expiry, and the supervisor that heals them.

    With a warm pool (``keep_warm(n)``), ``n`` desktops are kept started ahead, nobody's: a create
    claims one (seconds of start become milliseconds) and the pool refills behind it, one start at
    a time so that refilling never takes both cores from the sessions in use. The pool's desktops
    count toward ``max_sessions``; they are not listed, never expire, and one that dies is replaced.
    The pool itself (size, limit, filler, replacement, shutdown) is desktop.session.pool.WarmPool,
    which the remote registry (desktop.remote.backends.manager) shares.

    How a pooled desktop gets its session's id. A desktop's id is baked in at start only in its
    directory: ``root/<id>`` is HOME, the browser profile, the runtime dir (the dbus socket's path)
    and every process's working directory, and a running Chromium or dbus cannot be moved to
    another path. So a pooled desktop starts in ``root/_warm-<hex>``, a name no session can take,
    and the claim makes ``root/<id>`` a link to it: the session's files are found under its id like
    any session's. Everything else that names a session is made at claim: the ``Session`` (its id,
    its live-view instance and generation, so no token of anything before opens it), the network
    policy (the proxy's, set before the session is handed out), the dialog policy (the service's,
    as for a cold start), the listeners' "created". The reaper marks the server and its root, not a
    session, and the browser is recognised by its directory under the root: both hold as they are.
    Nothing of a pool's desktop is ever used before its claim (it sits at about:blank, as a cold
    start does), and a deleted session's desktop is stopped, never put back: a claim is as clean
    as a fresh start. Every option of a create today (id, network policy, dialog mode) is applied
    at claim; the options that shape how a desktop starts (``StackConfig``: start page, the
    browser's fences) are the server's, the same for the pool. One per session added later would
    have to start cold when it differs from the pool's.
    """

    def __init__(self, *, root: Path | None = None, max_sessions: int = 10, idle_ttl_s: float = 1800,
                 stack_config: StackConfig | None = None, supervise_every_s: float = 0.5):
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="glassdesk-"))
        open_session_root(self.root)  # the desktop users may pass through to their own directories
        # What keeps sessions apart here, and what is missing (logged once, and in /healthz).
        self.isolation: dict = report_isolation()
        self.max_sessions = max_sessions
        self.idle_ttl_s = idle_ttl_s
        self.stack_config = stack_config or StackConfig()
        self.sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._supervise_every_s = supervise_every_s
        # Sessions that must not expire while idle (the one `glassdesk up` starts).
        self.pinned: set[str] = set()
        # Called with (what, session_id) on "created", "deleted", "restarted": how the interfaces
        # learn of changes without this module knowing them.
        self.listeners: list = []
        # glassdesk's own ports besides the sessions' (the API's, added by whoever serves it with
        # protect()): no session's browser may reach them (desktop.network.policy).
        self.protected_ports: set[int] = set()
        # Every glassdesk server of this host registers its control plane there, and every session's
        # proxy refuses all of them, not only this server's (desktop.network.servers).
        self.servers = ServerRegistry()
        # The warm pool (keep_warm): desktops started ahead in root/_warm-<hex>, one at a time.
        self.pool: WarmPool[DesktopStack] = WarmPool(
            self._lock, make=self._make_warm, start=lambda stack: stack.start(), discard=self._discard,
            dead=lambda stack: stack.dead_parts(), abort=self._kill, in_use=lambda: len(self.sessions),
            limit=lambda: self.max_sessions, what="desktop")
        self._supervisor = threading.Thread(target=self._supervise, name="glassdesk-supervisor", daemon=True)
        self._supervisor.start()

    def own_ports(self) -> set[int]:
        """This server's control plane, as of now: the protected ports and each session's live view
        and proxy (a session started later counts from its start), a pooled desktop's included."""
        ports = set(self.protected_ports)
        for stack in [s.stack for s in list(self.sessions.values())] + self.pool.items():
            ports |= stack.own_ports()
        return ports

    def control_ports(self) -> set[int]:
        """Every port no session may reach: this server's, and every other live glassdesk server's
        on this host. Read on every proxy decision, so it only reads: this server's own entry is
        written where its ports change (protect, a session's create, delete or restart, and the
        supervisor's tick for warm desktops)."""
        return self.own_ports() | self.servers.ports()

    # ------------------------------------------------------------------ the warm pool

    def _make_warm(self) -> DesktopStack:
        return DesktopStack(self.root / f"{WARM_PREFIX}{secrets.token_hex(6)}", self.stack_config,
                            network=NetworkPolicy(), control_ports=self.control_ports)

    def _discard(self, stack: DesktopStack) -> None:
        stack.close()
        shutil.rmtree(stack.workdir, ignore_errors=True)

    @staticmethod
    def _kill(stack: DesktopStack) -> None:
        """End the processes of a desktop still starting: its start holds the stack's lock until it
        is up, and a shutdown should not wait for that."""
        for pid in tagged_pids(stack.tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _check_pool(self) -> None:
        self.pool.check()

    def create(self, session_id: str | None = None, *, pinned: bool = False,
               network: NetworkPolicy | None = None) -> Session:
        with self._lock:
            session_id, warm = self._claim_warm(session_id, self.stack_config.start_timeout)
            workdir = self.root / session_id
            if warm is not None:
                try:
                    session = Session(session_id, warm)  # binds to its display: it is up
                except BaseException:
                    threading.Thread(target=self._discard, args=(warm,), daemon=True).start()
                    raise
            else:
                session = Session(session_id, DesktopStack(workdir, self.stack_config,
                                                           network=network or NetworkPolicy(),
                                                           control_ports=self.control_ports))
            self.sessions[session_id] = session
            if pinned:
                self.pinned.add(session_id)
        if warm is not None:
            return self._claimed(session, network)
        try:
            session.stack.start()
        except BaseException as exc:
            # Whatever stopped it (a part that failed, a missing program, a file system error, an
            # interrupt), nothing of it stays registered or running.
            session.stack.close()
            with self._lock:
                self.sessions.pop(session_id, None)
                self.pinned.discard(session_id)
                self.pool.notify()  # its place under the limit is free again
            session.status = "failed"
            shutil.rmtree(workdir, ignore_errors=True)
            if isinstance(exc, (StackError, KeyboardInterrupt, SystemExit)):
                raise
            raise StackError(f"session {session_id} could not start: {type(exc).__name__}: {exc}") from exc
        with session._lifecycle:  # a delete that came while it started wins: no closed session marked ready
            if session.status == "stopped":
                raise SessionUnavailable(f"session {session_id} was deleted while it started")
            session._bind()
            session.touch()  # idle time counts from when it can be used, not from before it started
            session.status = "ready"
        log.info("session %s ready on %s", session_id, session.stack.display)
        self._notify("created", session_id)
        return session

    def _claimed(self, session: Session, network: NetworkPolicy | None) -> Session:
        """A session on a pooled desktop: what a cold start sets at start, set now."""
        stack = session.stack
        link = self.root / session.id
        try:
            stack.set_network(network or NetworkPolicy())  # before anyone can reach the session
            link.symlink_to(stack.workdir.name)  # its files under its own id, as any session's
        except BaseException:
            with self._lock:
                self.sessions.pop(session.id, None)
                self.pinned.discard(session.id)
            session.close()
            link.unlink(missing_ok=True)
            self._discard(stack)
            raise
        with session._lifecycle:
            if session.status == "stopped":  # deleted in the moment since
                raise SessionUnavailable(f"session {session.id} was deleted while it started")
            session.touch()
            session.status = "ready"
        log.info("session %s ready on %s (claimed from the warm pool)", session.id, stack.display)
        self._notify("created", session.id)
        return session

    def delete(self, session_id: str) -> None:
        with self._lock:
            session = self.get(session_id)
            del self.sessions[session_id]
            self.pinned.discard(session_id)
            self.pool.notify()  # a place under the limit for the pool
        session.close()
        link = self.root / session_id
        if link.is_symlink():  # a session claimed from the pool: its directory has the pool's name
            link.unlink()
        shutil.rmtree(session.stack.workdir, ignore_errors=True)
        log.info("session %s deleted", session_id)
        self._notify("deleted", session_id)

    def abort_starting(self) -> None:
        """End the processes of every desktop still starting: its start holds the stack's lock
        until it is up, and a shutdown should not wait for that."""
        stacks = [s.stack for s in list(self.sessions.values()) if s.status == "starting"]
        warming = self.pool.starting
        for stack in stacks + ([warming] if warming is not None else []):
            self._kill(stack)

    def close(self) -> None:
        self._stop.set()
        self.pool.close(self.stack_config.start_timeout)
        for session_id in list(self.sessions):
            try:
                self.delete(session_id)
            except SessionNotFound:
                pass
        self.servers.withdraw()

    def _supervise(self) -> None:
        while not self._stop.wait(self._supervise_every_s):
            self.servers.publish(self.own_ports())  # a warm desktop's, a restarted session's ports
            try:
                self.pool.check()
            except Exception:
                log.exception("supervising the warm pool")
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
