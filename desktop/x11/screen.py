"""Capture the display (mss over XShm), encode it, and wait for it to settle after an action."""

from __future__ import annotations

import select
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

import mss
from Xlib import X, Xatom
from Xlib import display as xdisplay
from Xlib.error import ConnectionClosedError, DisplayError, XError
from Xlib.ext import damage, res

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from desktop.frame import Frame, Pointer
from desktop.models import Window

# The settle's defaults, from damage events recorded after clicks on the test page's buttons
# (tests/assets/testpage.html; 60 clicks, 2-core machine at load average 6):
# - QUIET_MS, the stillness window after the last damage. Chromium paints one click in one frame,
#   or in two (the pressed button at mousedown, then the click handler's change): 35 of 60 clicks
#   took two or three frames, up to 95 ms apart on the loaded machine (median 18 ms: one frame at
#   60 Hz and change). A window shorter than that gap answers with the pressed button and without
#   the click's effect; 50 ms covered 57 of 60 clicks (all but the 51, 79 and 95 ms gaps) and is
#   what the old 45 ms quiet period polled every 10 ms gave in effect. At load average 2, 16 of 60
#   clicks took two frames, all but one (351 ms) within 31 ms: a quieter machine would do with
#   35 ms, a shared one needs the 50. The hard cases stay well
#   apart from it: a caret blinks every ~600 ms (a 1x25 px damage), so a page with a focused
#   field still settles in one window; an animation that paints more often than every 50 ms
#   never settles and stops at TIMEOUT_MS, flagged.
# - FIRST_CHANGE_MS, how long to wait for a first damage when an action shows nothing at once and
#   no browser can say more (a native window in front; with Chromium in front its own signals
#   decide, desktop.browser.settle). Only actions with no visible effect pay it; a repainting
#   action settles QUIET_MS after its last repaint. XFCE's own windows (the desktop's menu, the
#   panel) and GTK apps repaint an input's effect in one or two frames: 150 ms is several frames
#   on a loaded machine. A native app that shows its effect later than that is answered before
#   it (the next screenshot shows it); it was 400 ms for every action, paid by every action
#   that changed nothing, whichever window was in front.
# - WINDOW_FIRST_CHANGE_MS, the same for a window operation (opening a page, focusing a window,
#   launching a program): a new window takes a few hundred ms to map and paint.
# - TIMEOUT_MS bounds every wait: a blinking or animated screen cannot hang a run.
QUIET_MS = 50
FIRST_CHANGE_MS = 150
WINDOW_FIRST_CHANGE_MS = 400
TIMEOUT_MS = 3000


class ScreenshotError(RuntimeError):
    pass


class DamageWatch:
    """The X DAMAGE events of a display's root window, on a connection of its own.

    The root window's damage covers every window on it (x11vnc watches the screen the same way),
    so any repaint anywhere is damage. Pointer motion is none: Xvfb's software cursor is kept
    out of damage and out of screenshots alike. Not thread-safe: ``Screen`` guards it.

    The level is NonEmpty: the server sends one event when the damage region stops being empty,
    then none until it is cleared, and every drain that saw one clears it. The settle only asks
    "has anything changed since I last looked?", which this answers the same as an event per
    repaint; and between actions, however busy the screen (an animation on an idle session), at
    most one event waits, instead of one per repaint piling up without end in the X server and
    this connection, to be parsed by the next action."""

    def __init__(self, display: str):
        try:
            self._display = xdisplay.Display(display)
        except (DisplayError, OSError) as exc:
            raise ScreenshotError(f"could not watch display {display}: {exc}") from exc
        if not self._display.has_extension("DAMAGE"):
            self._display.close()
            raise ScreenshotError(f"display {display} has no DAMAGE extension")
        self._display.damage_query_version()  # the protocol wants it before the first damage request
        self._xfixes = False
        self._res = self._display.has_extension("X-Resource")
        self._damage = self._display.screen().root.damage_create(damage.DamageReportNonEmpty)
        self._display.sync()

    def drain(self) -> bool:
        """Read the events already here; whether there was any damage among them. Damage seen is
        cleared, which re-arms the event for the next change."""
        seen = False
        while self._display.pending_events():
            self._display.next_event()  # this connection asked for damage events only
            seen = True
        if seen:
            self._display.damage_subtract(self._damage)
            self._display.flush()
        return seen

    def mark(self) -> None:
        """Forget the damage so far: a round trip makes sure every event the server made before
        now has arrived, and is dropped. What arrives after this is the next action's."""
        self._display.sync()
        self.drain()

    def wait(self, timeout_s: float) -> bool:
        """True as soon as damage arrives, False when ``timeout_s`` passes without any."""
        if self.drain():
            return True
        select.select([self._display], [], [], max(0.0, timeout_s))
        return self.drain()

    def pointer(self) -> Pointer:
        """The pointer's position and image, in one request (XFixes GetCursorImage)."""
        if not self._xfixes:
            if not self._display.has_extension("XFIXES"):
                raise ScreenshotError("the display has no XFIXES extension: its pointer cannot be read")
            self._display.xfixes_query_version()  # the protocol wants it before the first request
            self._xfixes = True
        got = self._display.xfixes_get_cursor_image(None)
        return Pointer(got.x, got.y, got.xhot, got.yhot, got.width, got.height, tuple(got.cursor_image))

    def active_window(self) -> int | None:
        """The window in front (the window manager's _NET_ACTIVE_WINDOW), or None."""
        root = self._display.screen().root
        active = root.get_full_property(self._display.intern_atom("_NET_ACTIVE_WINDOW"), Xatom.WINDOW)
        return int(active.value[0]) if active and len(active.value) and active.value[0] else None

    def stacking(self) -> list[int]:
        """The managed windows bottom to top (the window manager's _NET_CLIENT_LIST_STACKING)."""
        root = self._display.screen().root
        listed = root.get_full_property(self._display.intern_atom("_NET_CLIENT_LIST_STACKING"), Xatom.WINDOW)
        return [int(wid) for wid in listed.value] if listed else []

    def client_box(self, wid: int) -> tuple[int, int, int, int] | None:
        """Where a window's content is on the screen: x, y, width, height; None when it is gone."""
        window = self._display.create_resource_object("window", wid)
        try:
            geometry = window.get_geometry()
            origin = window.translate_coords(self._display.screen().root, 0, 0)
        except XError:
            return None
        return -origin.x, -origin.y, geometry.width, geometry.height

    def windows(self) -> list[Window]:
        """The managed windows in the window manager's order (_NET_CLIENT_LIST, as ``wmctrl -l``
        lists them), each at the place its content is drawn, with its _NET_WM_PID, WM_CLASS and
        title; a window gone while it is read is left out. Read over this connection: a wmctrl
        process cost ~10 ms of every tree, set-of-marks and native action."""
        root = self._display.screen().root
        listed = root.get_full_property(self._display.intern_atom("_NET_CLIENT_LIST"), Xatom.WINDOW)
        windows = []
        for wid in (listed.value if listed else ()):
            box = self.client_box(int(wid))
            if box is None:
                continue
            window = self._display.create_resource_object("window", int(wid))
            try:
                names = [window.get_full_property(self._display.intern_atom(atom), X.AnyPropertyType)
                         for atom in ("_NET_WM_NAME", "WM_NAME", "WM_CLASS")]
                pid = window.get_full_property(self._display.intern_atom("_NET_WM_PID"), Xatom.CARDINAL)
            except XError:
                continue
            net_name, name, wm_class = (bytes(p.value) if p and p.format == 8 else None for p in names)
            known = int(pid.value[0]) if pid and len(pid.value) else 0
            windows.append(Window(id=f"0x{int(wid):08x}", pid=known or None, x=box[0], y=box[1], width=box[2],
                                  height=box[3], wm_class=class_text(wm_class), title=title_text(net_name, name)))
        return windows

    def pid_at(self, x: int, y: int) -> int | None:
        """The process of the topmost window whose content holds display pixel (x, y) (its _NET_WM_PID)."""
        for wid in reversed(self.stacking()):
            box = self.client_box(wid)
            if box is not None and box[0] <= x < box[0] + box[2] and box[1] <= y < box[1] + box[3]:
                return self.window_pid(wid)
        return None

    def active_pid(self) -> int | None:
        """The process that owns the window in front, or None."""
        active = self.active_window()
        return None if active is None else self.window_pid(active)

    def window_pid(self, wid: int) -> int | None:
        """The process of the client that made a window: the X server's word (X-Resource), which a
        program cannot leave out as it can its _NET_WM_PID (xmessage and other Xt programs set
        none); else the window's _NET_WM_PID; None for a window gone or a client out of reach."""
        if self._res:
            try:
                answer = self._display.res_query_client_ids([{"client": wid, "mask": res.LocalClientPIDMask}])
                for client in answer.ids:
                    if client.spec.mask & res.LocalClientPIDMask and len(client.value):
                        return int(client.value[0])
            except XError:
                pass
        window = self._display.create_resource_object("window", wid)
        try:
            pid = window.get_full_property(self._display.intern_atom("_NET_WM_PID"), Xatom.CARDINAL)
        except XError:
            return None
        return int(pid.value[0]) if pid and len(pid.value) else None

    def close(self) -> None:
        self._display.close()


class Settled(NamedTuple):
    frame: Frame
    settle_ms: int
    settled: bool   # False: still changing at the timeout
    changed: bool   # whether anything was painted since the mark
    moved: bool = False  # whether anything was painted after the wait began (not only before it)


def class_text(wm_class: bytes | None) -> str:
    """A window's WM_CLASS as wmctrl -x prints it (pure): instance.class ("N/A" when it has none)."""
    if not wm_class:
        return "N/A"
    return ".".join(part.decode("utf-8", "replace") for part in wm_class.rstrip(b"\0").split(b"\0", 1))


def title_text(net_wm_name: bytes | None, wm_name: bytes | None) -> str:
    """A window's title as wmctrl prints it (pure): its _NET_WM_NAME (UTF-8), else its WM_NAME
    (Latin-1, as X's STRING type is), else "N/A"."""
    if net_wm_name:
        return net_wm_name.decode("utf-8", "replace")
    if wm_name:
        return wm_name.decode("latin-1")
    return "N/A"


class Screen:
    """Grabs frames of one X display. mss handles are per thread, so one is kept per thread."""

    def __init__(self, display: str):
        self.display = display
        self._local = threading.local()
        self._watch: DamageWatch | None = None
        self._watch_lock = threading.Lock()  # one settle at a time per display (the action lock's too)

    def _mss(self):
        handle = getattr(self._local, "mss", None)
        if handle is None:
            handle = mss.MSS(display=self.display)
            self._local.mss = handle
        return handle

    def capture(self) -> Frame:
        try:
            shot = self._mss().grab({"left": 0, "top": 0, "width": SCREEN_WIDTH, "height": SCREEN_HEIGHT})
        except Exception as exc:  # the X server went away or refused: drop the handle, report
            self._local.mss = None
            raise ScreenshotError(f"could not capture display {self.display}: {exc}") from exc
        # mss hands over a fresh buffer per grab: keep it rather than copy 8 MB.
        return Frame(shot.raw, shot.width, shot.height)

    def _damage(self) -> DamageWatch:
        if self._watch is None:
            self._watch = DamageWatch(self.display)
        return self._watch

    def _x(self, call):
        """A call on the damage connection; a dead X server is a ScreenshotError, and the
        connection is dropped so that the next call opens a new one (after a heal)."""
        try:
            return call(self._damage())
        except ScreenshotError:
            raise
        except (XError, DisplayError, ConnectionClosedError, OSError) as exc:
            self._drop_watch()
            raise ScreenshotError(f"lost the damage events of display {self.display}: {exc}") from exc

    def pointer(self) -> Pointer:
        """Where the pointer is and what it looks like (desktop.frame.with_pointer draws it)."""
        return self._x(lambda watch: watch.pointer())

    def mark(self) -> None:
        """Call just before an action: damage from here on is the action's (see ``settle``)."""
        with self._watch_lock:
            self._x(lambda watch: watch.mark())

    def active_pid(self) -> int | None:
        """The process owning the window in front; None when there is none or it cannot be read."""
        with self._watch_lock:
            try:
                return self._x(lambda watch: watch.active_pid())
            except (ScreenshotError, XError):
                return None

    def stacking(self) -> list[int]:
        """The managed windows bottom to top; empty when it cannot be read."""
        with self._watch_lock:
            try:
                return self._x(lambda watch: watch.stacking())
            except (ScreenshotError, XError):
                return []

    def windows(self) -> list[Window]:
        """The managed windows (DamageWatch.windows); empty when they cannot be read."""
        with self._watch_lock:
            try:
                return self._x(lambda watch: watch.windows())
            except (ScreenshotError, XError):
                return []

    def pid_at(self, x: int, y: int) -> int | None:
        """The process of the topmost window at display pixel (x, y); None when none or unreadable."""
        with self._watch_lock:
            try:
                return self._x(lambda watch: watch.pid_at(x, y))
            except (ScreenshotError, XError):
                return None

    def active_window(self) -> int | None:
        """The window in front; None when there is none or it cannot be read."""
        with self._watch_lock:
            try:
                return self._x(lambda watch: watch.active_window())
            except (ScreenshotError, XError):
                return None

    def settle(self, *, quiet_ms: int = QUIET_MS, first_change_ms: int = FIRST_CHANGE_MS,
               timeout_ms: int = TIMEOUT_MS, start_quiet_ms: int | None = None) -> Settled:
        """Wait until the screen stops changing, then capture it once. Returns the frame, the ms
        waited, and whether it settled (False: still changing at ``timeout_ms``).

        Changes are the display's DAMAGE events since ``mark()`` (called before the action), so a
        repaint that landed before this call counts too. No frame is grabbed until the end: the
        wait is a select() on the X connection until SettlePolicy's next deadline."""
        policy = SettlePolicy(quiet_ms=quiet_ms, first_change_ms=first_change_ms, timeout_ms=timeout_ms,
                              start_quiet_ms=start_quiet_ms)
        start = time.monotonic()
        with self._watch_lock:
            changed = self._x(lambda watch: watch.drain())  # what arrived while the action ran: at time 0
            now_ms = 0.0
            while not policy.observe(now_ms, changed):
                wait_s = max(0.001, (policy.deadline_ms() - now_ms) / 1000)  # at least a tick: no spin
                changed = self._x(lambda watch, wait_s=wait_s: watch.wait(wait_s))
                now_ms = (time.monotonic() - start) * 1000
        return Settled(self.capture(), round(now_ms), not policy.timed_out, policy.changed, policy.moved)

    def _drop_watch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            try:
                watch.close()
            except Exception:  # already gone with its X server
                pass

    def close(self) -> None:
        handle = getattr(self._local, "mss", None)
        if handle is not None:
            handle.close()
            self._local.mss = None
        with self._watch_lock:
            self._drop_watch()


@dataclass
class SettlePolicy:
    """When is the screen settled? A pure state machine fed with (time, changed?) observations
    (Screen.settle feeds it the display's damage events, and asks it how long to wait next).

    - After any change, the screen must stay unchanged for ``quiet_ms``.
    - If nothing has changed yet, wait up to ``first_change_ms`` for the action's effect to show
      (an app repaints a few ms to a few tens of ms after input), then call it settled.
    - A change already there when the wait starts (time 0) may be asked a shorter stillness,
      ``start_quiet_ms``: when the browser has said its frames with the input's effect are done,
      that damage is the effect itself, and the wait only has to tell a still page from one still
      moving (an animation paints every frame). Any later change is asked the full ``quiet_ms``.
    - Never wait past ``timeout_ms``: an animation or a blinking caret must not hang the loop.
    """

    quiet_ms: int = QUIET_MS
    first_change_ms: int = FIRST_CHANGE_MS
    timeout_ms: int = TIMEOUT_MS
    start_quiet_ms: int | None = None
    _last_change_ms: float | None = None
    _quiet_now_ms: float = 0.0  # the stillness asked after the last change: read only once there is one

    def observe(self, now_ms: float, changed: bool) -> bool:
        if changed:
            self._last_change_ms = now_ms
            self._quiet_now_ms = (self.start_quiet_ms if now_ms <= 0 and self.start_quiet_ms is not None
                                  else self.quiet_ms)
        return now_ms >= self.deadline_ms()

    def deadline_ms(self) -> float:
        """When it will be settled if nothing changes before then."""
        due: float
        if self._last_change_ms is None:
            due = self.first_change_ms
        else:
            due = self._last_change_ms + self._quiet_now_ms
        return min(due, self.timeout_ms)

    @property
    def changed(self) -> bool:
        return self._last_change_ms is not None

    @property
    def moved(self) -> bool:
        """Changed after the start: the screen was still moving when the wait began."""
        return self._last_change_ms is not None and self._last_change_ms > 0

    @property
    def timed_out(self) -> bool:
        """Stopped by the timeout while the screen was still changing: never settled."""
        return self._last_change_ms is not None and self._last_change_ms + self._quiet_now_ms > self.timeout_ms
