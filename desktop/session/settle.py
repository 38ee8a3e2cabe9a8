"""An input on a session's desktop, before and after: what it meets (the element under its pixel in
the browser's page, or the control on a native window over the accessibility bus; where the keys
go), and the wait after it until its effect is shown (desktop/browser/settle.py is the browser's
side, desktop/x11/screen.py the display's damage). Session.perform (desktop.session.manager) runs
the input between the two; an ``InputSettle`` is made for each binding of a session's display."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import NamedTuple, TypeVar

from desktop.actions import Click, DoubleClick, Drag, Key, Move, TripleClick, Type, _Action, _OptionalPoint
from desktop.browser.settle import FIRST_PRESS_MS, input_mark
from desktop.errors import TypedIntoNothing
from desktop.models import ElementAt, NativeElement
from desktop.x11.atspi import AccessibilityReader, AccessibilityUnavailable
from desktop.x11.input import ActionFailed, Executor
from desktop.x11.procs import ProcessActivity, session_activity, session_of, still_working
from desktop.x11.screen import FIRST_CHANGE_MS, QUIET_MS, TIMEOUT_MS, Screen, Settled

log = logging.getLogger("glassdesk.sessions")

# After the browser has produced its frames, the display already shows them: in 158 of 160 clicks
# on the test page (2-core machine, load average 1-7) the effect's last damage had arrived before
# the browser's two frames were done, one came 1 ms after and one 109 ms after (no slack of a few
# frames would have caught that one). How long to wait for damage before calling the input one
# that changed nothing.
FRAME_SLACK_MS = 10
# The stillness asked of damage the browser's frames have already accounted for (it came while the
# browser was asked): the effect itself, so what is left is to tell a page at rest from one still
# moving (a transition, an animation paints every frame): one 60 Hz frame interval and jitter.
MOTION_MS = 25
# The stillness asked after any damage that comes later than that: an effect still moving. Without
# the browser (damage alone) the 50 ms of QUIET_MS must also outlast the gap between a click's two
# paints (the pressed button, then the handler's change); the browser's frames have covered that
# already: two frames at 60 Hz and change.
BROWSER_QUIET_MS = 35
# A dialog the input opened is painted by the browser after it says it opened: at most this long
# (a paint that came before the wait began is not seen again: the wait then ends at this bound,
# with the dialog on the screen).
DIALOG_PAINT_MS = 2000
# The bound of the wait for a typed text's keys to reach the page, beyond TIMEOUT_MS. Chromium takes
# ~1.4 ms a key here (20,000 characters in ~28 s) and over 6 ms at load average 10 on 2 cores. The
# wait ends sooner when the keys stop coming (desktop.browser.settle.KEYS_STALL_MS), so this bound
# only has to be generous: it stops a page that keeps taking keys slower than this.
KEY_MS_PER_CHAR = 20
PRESSES = {Click: 1, DoubleClick: 2, TripleClick: 3}  # the pointer releases a click's page sees
# How often a native program still at work after an input is looked at: the stillness asked of the
# screen, so that a program at rest for one look has been at rest as long as the screen.
PROGRAM_LOOK_MS = QUIET_MS

# The longest a pointer action waits to learn what is under its pixel (desktop.browser.hit): a
# few ms when the page answers; a page busy in a long script is not waited for.
HIT_TIMEOUT_S = 0.5
# The longest a read asked for on its own waits (Session.element_at): a heal's check of what it
# found, the offline model's search for a field. Nothing waits on it but its asker, and an answer
# "none" that only meant "not in time" would be a wrong judgement (CI, 3 workers on 2 cores: a
# heal's check of the right field timed out at 0.5 s, and the heal took a weaker path).
READ_TIMEOUT_S = 5.0
# The actions whose pixel names an element: where a click, a press, a scroll or a drag starts.
POINTER_ACTIONS = ("click", "double_click", "triple_click", "mouse_down", "mouse_up", "scroll", "move", "drag")
# Elements a click on may hand the keys to the page's own code, with nothing focused (a canvas app
# reads keydown on its document; a frame's or a plugin's focus is theirs).
KEYS_OF_THEIR_OWN = frozenset({"canvas", "iframe", "frame", "embed", "object", "video"})
# The chords that edit in the field that has the focus, and leave the keys there.
EDITING_CHORDS = frozenset({"ctrl+a", "ctrl+c", "ctrl+v", "ctrl+x", "ctrl+z", "ctrl+y", "ctrl+shift+z"})


def keeps_page_focus(chord: str) -> bool:
    """Whether a key chord leaves the keyboard focus where it was (pure): a plain key (a letter,
    Return, Escape, an arrow, BackSpace) or an editing chord does; Tab (past the last field it goes
    to the browser's toolbar), function keys and other chords with ctrl, alt or super (ctrl+l
    focuses the address bar, ctrl+f the find bar) may move it out of the page."""
    parts = chord.lower().split("+")
    if len(parts) > 1 and set(parts[:-1]) - {"shift"}:
        return chord.lower() in EDITING_CHORDS
    key = parts[-1]
    return key not in ("tab", "iso_left_tab") and not (key.startswith("f") and key[1:].isdigit())


T = TypeVar("T")


class Program(NamedTuple):
    """A native program that takes an input: its process session, and its processes just before."""

    sid: int
    before: dict[int, ProcessActivity]


def in_background(work: Callable[[], T]) -> Future[T]:
    """``work`` run on a thread of its own; its result, or what it raised, in the future."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # handed to whoever waits for the result
            future.set_exception(exc)

    threading.Thread(target=run, name="glassdesk-read", daemon=True).start()
    return future


def pointer_point(action: _Action) -> tuple[int, int] | tuple[None, None] | None:
    """The display pixel a pointer action acts at (pure): its x, y; a drag's first point; (None,
    None) for one at the pointer's current place; None for an action that is not a pointer's."""
    name = getattr(action, "action", None)
    if name not in POINTER_ACTIONS:
        return None
    if isinstance(action, Drag):
        return action.path[0].x, action.path[0].y
    if not isinstance(action, (Move, _OptionalPoint)):  # never: POINTER_ACTIONS are these actions' names
        raise TypeError(f"not a pointer action: {action!r}")
    if action.x is None or action.y is None:  # then both are (_OptionalPoint's check)
        return None, None
    return action.x, action.y


class InputSettle:
    """The reads before an input and the wait after it, on one binding of a session's display (its
    screen, its input executor, its accessibility reader; the stack's browser as it is now)."""

    def __init__(self, session_id: str, stack, screen: Callable[[], Screen], executor: Executor,
                 accessibility: AccessibilityReader):
        self.id = session_id
        self.stack = stack
        # The display's screen, asked for at each use: the session's own accessor (Session._screen),
        # which says unavailable before the session's desktop first started
        self.screen = screen
        self.executor = executor
        self.accessibility = accessibility
        # The window a click just gave a page the keyboard focus in (the browser in front, the click
        # on one of its page's elements): a type that follows in the same window is judged by that
        # page's focus (refuse_typing_into_nothing). Whatever may have moved the keys out of the
        # page since (a chord like ctrl+l or ctrl+f, Tab, a click beside the page, a new page opened)
        # makes it unknown: not judged. (The page's document.hasFocus() cannot say: Playwright
        # emulates focus.)
        self.page_focus_window: int | None = None

    def browser_watch(self):
        """(the browser, where its record stands) when the session's Chromium is the window in
        front, so that its own signals can tell when an input's effect is shown; else None."""
        browser = self.stack.browser
        if browser is None or browser.pages is None or browser.process is None:
            return None
        if self.screen().active_pid() != browser.process.pid:
            return None
        return browser, input_mark(browser.record)

    def follow_page_focus(self, action: _Action, element: ElementAt | None) -> None:
        """Where the keys go after ``action``, as far as a type's judgement needs (page_focus_window)."""
        if isinstance(action, (Click, DoubleClick, TripleClick)):
            # On a canvas, a plugin or a frame the page's own code decides where keys go: not judged.
            judged = element is not None and element.tag not in KEYS_OF_THEIR_OWN
            self.page_focus_window = self.screen().active_window() if judged else None
        elif isinstance(action, Key) and not all(keeps_page_focus(chord) for chord in action.keys):
            self.page_focus_window = None

    def refuse_typing_into_nothing(self, watch) -> None:
        """Before a ``type`` right after a click in the page in front: refuse it when the page's
        focus takes no text (desktop.browser.focus), rather than send keys nothing will take. A
        page that cannot say in time is typed into as before."""
        if watch is None or self.page_focus_window is None or self.screen().active_window() != self.page_focus_window:
            return
        try:
            focus = watch[0].call(lambda pages: pages.typing_focus(), HIT_TIMEOUT_S)
        except Exception as exc:
            log.debug("session %s: no focus read before typing: %s", self.id, exc)
            return
        if focus is not None and focus.get("takes") is False:
            raise TypedIntoNothing(f"nothing was typed: the keyboard focus is on {focus.get('element')}, which "
                                   "takes no text; click the field to type into first (press keys with a key "
                                   "action)", focused=focus.get("element"))

    def browser_reads(self, watch, action: _Action) -> tuple[ElementAt | None, tuple | None, NativeElement | None]:
        """``page_reads``, then where the page has no element under the pointer, the browser's own
        control there (browser_control)."""
        element, counted = self.page_reads(watch, action)
        return element, counted, self.browser_control(action) if element is None and watch is not None else None

    def browser_control(self, action: _Action) -> NativeElement | None:
        """With the browser's own controls on the bus (StackConfig.browser_accessibility): the one under
        a pointer action's pixel (its toolbar, a tab, a dialog it draws for the page), read as
        native_reads reads a native window's; None on the page itself (its element is the page
        layer's), for an input that is not a pointer's, or without the switch."""
        browser = self.stack.browser
        if (not self.stack.config.browser_accessibility or pointer_point(action) is None or browser is None
                or browser.process is None):
            return None
        point = self.acted_at(action)
        if point is None:
            return None
        pid = browser.process.pid
        try:
            return self.accessibility.node_at(*point, pid, HIT_TIMEOUT_S, start=False, page_of=pid)
        except AccessibilityUnavailable as exc:
            log.debug("session %s: no browser control at %s: %s", self.id, point, exc)
            return None

    def page_reads(self, watch, action: _Action) -> tuple[ElementAt | None, tuple | None]:
        """Before an input with Chromium in front, in one wait on the browser (Pages.before_input):
        what a pointer action is about to act on (its element record, bounded by HIT_TIMEOUT_S) and,
        before a ``type`` or a click on an element of the page, the page's count of the keys
        (presses) it takes and how many it should (for arrived). Best effort: what the page cannot
        say costs the input nothing but the record, or the count."""
        if watch is None:
            return None, None
        point = self.acted_at(action)
        if isinstance(action, Type):
            kind, wanted = "keys", len(action.text)
        elif isinstance(action, (Click, DoubleClick, TripleClick)) and point is not None:
            kind, wanted = "presses", PRESSES[type(action)]
        else:
            kind, wanted = None, 0
        if point is None and kind is None:
            return None, None
        try:
            element, count = watch[0].call(lambda pages: pages.before_input(point, kind, HIT_TIMEOUT_S), 3)
        except Exception as exc:  # a heal, a hang, a page navigating away: the input runs as it is
            log.debug("session %s: no reads before the input: %s", self.id, exc)
            return None, None
        for what, failure in (("element", element), ("count", count)):
            if isinstance(failure, BaseException):
                log.debug("session %s: no %s before the input at %s: %s", self.id, what, point, failure)
        element = None if isinstance(element, BaseException) else element
        count = None if isinstance(count, BaseException) else count
        if count is None:
            return element, None
        return element, (count, wanted)

    def element_at(self, watch, action: _Action, *, strict: bool = False,
                    timeout_s: float = HIT_TIMEOUT_S) -> ElementAt | None:
        """What is under a pointer action's pixel, read before the action runs (it may remove the
        element), for the trace and the answer. Best effort and bounded: a browser that cannot
        say within ``timeout_s`` costs the action nothing but this record."""
        point = self.acted_at(action)
        if point is None:
            return None
        browser, _mark = watch
        x, y = point
        try:
            return browser.call(lambda pages: pages.hit(x, y), timeout_s)
        except Exception as exc:  # a heal, a hang, a page navigating away: no record, the action runs
            if strict:
                raise
            log.debug("session %s: no element at (%s, %s): %s", self.id, x, y, exc)
            return None

    def acted_at(self, action: _Action) -> tuple[int, int] | None:
        """The display pixel a pointer action acts at (the pointer's, for one that names none); None
        for an action with no pixel, or a pointer that cannot be read."""
        point = pointer_point(action)
        if point is None:
            return None
        x, y = point
        if x is None or y is None:  # (None, None): at the pointer
            try:
                return self.executor.cursor()
            except ActionFailed:
                return None
        return x, y

    def native_reads(self, action: _Action) -> tuple[NativeElement | None, Program | None]:
        """Before an input on a native window (the browser not in front), in one look at the window
        it goes to (the one on top at a pointer action's pixel, else the active one): the control
        under the pixel, read over the accessibility bus (bounded like the browser's element: a bus
        that cannot say within HIT_TIMEOUT_S costs the action nothing but this record), and the
        program that takes the input, with its processes as they are before it (program_session)."""
        point = self.acted_at(action)
        pid = self.screen().pid_at(*point) if point is not None else self.screen().active_pid()
        if pid is None:
            return None, None
        program = in_background(lambda: self.program_session(pid))  # the process table read while the bus answers
        native = None
        if point is not None:  # the bus knows no stacking: asked of the window on top there
            try:
                native = self.accessibility.node_at(*point, pid, HIT_TIMEOUT_S, start=False)
            except AccessibilityUnavailable as exc:
                log.debug("session %s: no native element at %s: %s", self.id, point, exc)
        return native, program.result()

    def program_session(self, pid: int) -> Program | None:
        """The process session of a program the desktop runs (one ``launch`` or the agent started),
        whose work after an input the wait follows (program_at_rest), and its processes now; None
        for the session's own parts (the display, XFCE's window manager, panel and desktop, the
        browser, which has signals of its own) or a process gone."""
        sid = session_of(pid)
        parts = {child.popen.pid for child in self.stack.children.values()}
        browser = self.stack.browser
        if browser is not None and browser.process is not None:
            parts.add(session_of(browser.process.pid))
        return None if sid is None or sid in parts else Program(sid, session_activity(sid))

    def program_at_rest(self, program: Program, shot: Settled, left_ms: int) -> Settled:
        """A screen still after an input on a native program, and the program still at work (it
        exits to run another, starts a dialog, loads a file: on a loaded machine its new window
        can come later than the stillness window): looked at every PROGRAM_LOOK_MS until it rests,
        then the display's damage since once more. The processor time it used since the input is
        its handling of it, painted already (a repaint is not more work to wait for), so the first
        look asks only whether a process started, ended, ran another program or is running.
        Bounded by ``left_ms``; a program that never rests only costs the wait."""
        spent, worked, before = shot.settle_ms, False, program.before
        while spent < left_ms:
            now = session_activity(program.sid)
            if not still_working(before, now, by_time=worked):
                break
            worked, before = True, now
            start = time.monotonic()
            time.sleep(min(PROGRAM_LOOK_MS, left_ms - spent) / 1000)
            spent += round((time.monotonic() - start) * 1000)
        if not worked:
            return shot
        again = self.screen().settle(first_change_ms=0, timeout_ms=max(0, left_ms - spent))
        return again._replace(settle_ms=spent + again.settle_ms, changed=shot.changed or again.changed,
                              moved=shot.moved or again.changed)

    def arrived(self, watch, counted) -> bool | None:
        """Wait until the page has taken every key typed, or every press of a click (``counted``:
        its count and how many, from page_reads), or the input opened a dialog; a type bounded by
        TIMEOUT_MS and KEY_MS_PER_CHAR a key. None when it cannot tell."""
        browser, mark = watch
        count, expected = counted
        budget_ms = TIMEOUT_MS + KEY_MS_PER_CHAR * expected if count.kind == "keys" else FIRST_PRESS_MS
        try:
            return browser.call(lambda pages: pages.arrived(count, expected, budget_ms, mark), budget_ms / 1000 + 2)
        except Exception as exc:
            log.debug("session %s: the %s count failed: %s", self.id, count.kind, exc)
            return None

    def settle_after_input(self, watch, counted=None, program: Program | None = None) -> tuple[Settled, str]:
        """Wait for what the input set in motion, and only that (see desktop.browser.settle): with
        Chromium in front, the keys a ``type`` sent (or a click's presses) taken by the page
        (``counted``), its frames, the requests the input started, a navigation or a dialog, then
        the display's damage for the frame to reach the screen; elsewhere the damage alone. The
        screenshot and what decided the wait. ``program``: the native program that took the input
        (native_reads), whose work the wait also follows. The keys (presses) have a bound of their
        own; the rest has TIMEOUT_MS after them."""
        start = time.monotonic()
        arrival_ms, by = 0, None
        if watch is not None and counted:
            arrived = self.arrived(watch, counted)
            arrival_ms = round((time.monotonic() - start) * 1000)
            if arrived is False and counted[0].kind == "keys":  # still arriving at their bound: said, not waited on
                return Settled(self.screen().capture(), arrival_ms, False, True), "timeout"
            start = time.monotonic()  # the bound of the rest counts from here
        if watch is not None:
            browser, mark = watch
            try:
                by = browser.call(lambda pages: pages.after_input(mark, TIMEOUT_MS), TIMEOUT_MS / 1000 + 2)
            except Exception as exc:  # the browser cannot say (a heal, a hang): the damage alone decides
                log.debug("session %s: no browser signal after the input: %s", self.id, exc)
        waited_ms = round((time.monotonic() - start) * 1000)
        left_ms = max(0, TIMEOUT_MS - waited_ms)  # one bound for the whole wait, a browser that hung included
        if by is not None:
            if by == "dialog":
                # Known as soon as it opens, before the browser paints it: what was painted until now
                # (the button pressed in, the page behind) is not the answer; the dialog's paint is.
                self.screen().mark()
                shot = self.screen().settle(quiet_ms=BROWSER_QUIET_MS, first_change_ms=min(DIALOG_PAINT_MS, left_ms),
                                            timeout_ms=left_ms)
            else:
                shot = self.screen().settle(quiet_ms=BROWSER_QUIET_MS, first_change_ms=FRAME_SLACK_MS,
                                            start_quiet_ms=MOTION_MS, timeout_ms=left_ms)
                shot = self.still_after_frames(browser, shot, left_ms)
        else:
            shot = self.screen().settle(first_change_ms=FIRST_CHANGE_MS, timeout_ms=left_ms)
            if program is not None and shot.settled:
                shot = self.program_at_rest(program, shot, left_ms)
        shot = shot._replace(settle_ms=arrival_ms + waited_ms + shot.settle_ms)
        if by == "timeout" or not shot.settled:
            return shot._replace(settled=False), "timeout"
        if by in ("network", "navigation", "dialog"):
            return shot, by
        return shot, "frame" if by == "frame" and not shot.changed else "damage"

    def still_after_frames(self, browser, shot: Settled, left_ms: int) -> Settled:
        """A screen that moved after the browser's frames (an animation, a transition) and then
        paused: on a loaded machine a pause between two of its frames can outlast the stillness
        window. It is still only once the browser has produced two more frames without a paint;
        asked again until then, within the bound."""
        spent = shot.settle_ms
        while shot.settled and shot.moved and spent < left_ms:
            start, budget_ms = time.monotonic(), left_ms - spent
            try:
                mark = input_mark(browser.record)
                browser.call(lambda pages, mark=mark, budget_ms=budget_ms: pages.after_input(mark, budget_ms),
                             budget_ms / 1000 + 2)
            except Exception:  # the browser cannot say: the damage's word stands
                return shot
            waited = round((time.monotonic() - start) * 1000)
            again = self.screen().settle(quiet_ms=BROWSER_QUIET_MS, first_change_ms=FRAME_SLACK_MS,
                                         start_quiet_ms=BROWSER_QUIET_MS, timeout_ms=max(0, left_ms - spent - waited))
            spent += waited + again.settle_ms
            shot = again._replace(settle_ms=spent, changed=True, moved=again.changed)
        return shot
