"""Input: a desktop action in display pixels -> xdotool argv lists -> executed on the display.

Building argv is pure (``argv_for``), so what runs can be tested and shown without X. Every
command is an argv list, never a shell string: text like ``$HOME; rm -rf /`` is typed, not run.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from desktop import keys
from desktop.actions import (
    Click,
    DoubleClick,
    Drag,
    HoldKey,
    Key,
    MouseDown,
    MouseUp,
    Move,
    Scroll,
    TripleClick,
    Type,
    Wait,
    _Action,
)

BUTTONS = {"left": "1", "middle": "2", "right": "3", "back": "8", "forward": "9"}
WHEEL = {"up": "4", "down": "5", "left": "6", "right": "7"}

# xdotool's default 12 ms per key drops nothing in Chromium and XFCE apps on Xvfb. A character
# that is not on the keyboard map is the risk: xdotool remaps a scratch key for each one, and an
# app that reads the key before it has seen the new mapping types nothing (seen here under load).
# So such characters are first bound to spare keycodes in one xmodmap call, then typed as keys
# that are on the map; the short pause lets apps take in the new mapping.
TYPE_DELAY_MS = 12
TYPE_CHUNK = 50
MAPPING_PAUSE_S = "0.05"
# Long text takes the fast path: key events sent over XTEST from this process (XTestTyper), about
# 0.3 ms a character here against xdotool's 3 ms even at --delay 0 (it waits for the X server
# after every key) and 12 ms at its safe delay: 20,000 characters in ~7 s instead of 4 minutes.
# The X server queues the events in order and the app reads them in order, so nothing is lost;
# characters not on the keyboard map are bound beforehand (xmodmap, as for xdotool), so no event
# depends on a mapping changed under it. Short text keeps xdotool's human pace: some pages react
# to each key (suggestions, validation) and have always been typed into that way.
FAST_TYPE_MIN_CHARS = 100
FAST_TYPE_CHUNK = 2000
XTEST = "xtest"  # [XTEST, "type", "--", text]: typed in process by XTestTyper, not a program
# Repeated clicks need a gap apps can see, well inside the double-click time (400 ms in GTK).
MULTI_CLICK_DELAY_MS = 40
# Two presses of a button within the double-click time (400 ms in XFCE's settings, which GTK and
# Chromium read) and a few pixels of each other are one double click to every app. So a click is
# kept one click: a press that would fall within both of the previous one waits out the rest of
# that time first. CI saw a native type's click, a few hundred ms after the click of the fill
# before it on the same control, select the comma just typed in the editor and type over it.
MULTI_CLICK_S = 0.5
MULTI_CLICK_PX = 5
MODIFIER_PAUSE_S = "0.02"
DRAG_STEP_PX = 25


def _moves(x: int | None, y: int | None) -> list[str]:
    return [] if x is None or y is None else ["mousemove", str(x), str(y)]


def _held(modifiers: list[str]) -> tuple[list[str], list[str]]:
    """keydown/keyup around a pointer action. Chromium tracks modifier state apart from the
    pointer event, so under load a click sent right after keydown arrived without ctrl: a short
    pause on each side keeps the order apps see."""
    syms = [keys.keysym(m) for m in modifiers]
    if not syms:
        return [], []
    return ["keydown", *syms, "sleep", MODIFIER_PAUSE_S], ["sleep", MODIFIER_PAUSE_S, "keyup", *reversed(syms)]


def _click(action: Click | DoubleClick | TripleClick, repeat: int) -> list[str]:
    down, up = _held(action.modifiers)
    delay = "0" if repeat == 1 else str(MULTI_CLICK_DELAY_MS)
    click = ["click", "--repeat", str(repeat), "--delay", delay, BUTTONS[action.button]]
    return ["xdotool", *_moves(action.x, action.y), *down, *click, *up]


def _interpolate(path) -> list[tuple[int, int]]:
    """Intermediate points every ~25 px, so apps see a drag as motion, not a jump."""
    points = [(path[0].x, path[0].y)]
    for a, b in zip(path, path[1:]):
        steps = max(1, round(max(abs(b.x - a.x), abs(b.y - a.y)) / DRAG_STEP_PX))
        for i in range(1, steps + 1):
            points.append((round(a.x + (b.x - a.x) * i / steps), round(a.y + (b.y - a.y) * i / steps)))
    return points


@dataclass
class Keymap:
    """What the X keyboard map holds: keysym names present, and keycodes free to bind."""

    present: set[str]
    spare: list[int]
    bound: dict[int, str]

    @classmethod
    def parse(cls, pke: str) -> Keymap:
        """Parse ``xmodmap -pke`` output."""
        present, spare = set(), []
        for line in pke.splitlines():
            head, _, syms = line.partition("=")
            if not head.startswith("keycode"):
                continue
            code = int(head.split()[1])
            names = syms.split()
            if names:
                present.update(names)
            elif code > 8:
                spare.append(code)
        return cls(present, spare, {})

    def bind(self, names: list[str]) -> list[str]:
        """Bind keysyms to spare keycodes, reusing the least recently bound; xmodmap expressions."""
        expressions = []
        for name in names:
            code = self.spare.pop(0)
            self.spare.append(code)
            self.present.discard(self.bound.get(code, ""))
            self.bound[code] = name
            self.present.add(name)
            expressions += ["-e", f"keycode {code} = {name} {name}"]
        return expressions


def _unmapped(text: str, keymap: Keymap) -> list[str]:
    names = dict.fromkeys(keys.keysym(c) for c in text if not c.isascii())
    return [n for n in names if n not in keymap.present]


CAPS_LOCK_TAP = ["xdotool", "key", "Caps_Lock"]


def plan_type(text: str, keymap: Keymap | None = None, *, caps_lock: bool = False) -> list[list[str]]:
    """argv lists that type ``text``: chunks of xdotool type (or, for long text, of the in-process
    XTEST typer), each preceded, when a keymap is known and the chunk has characters not on it, by
    the xmodmap call that binds them.

    With Caps Lock on, a key's unshifted symbol arrives upper-case and its shifted one lower-case
    ("abc Hello" would arrive as "ABC hELLO"): it is switched off around the typing and back on
    after, so the text arrives as given and the lock is as it was."""
    fast = len(text) >= FAST_TYPE_MIN_CHARS
    chunk = FAST_TYPE_CHUNK if fast else TYPE_CHUNK
    commands, start = [CAPS_LOCK_TAP] if caps_lock else [], 0
    while start < len(text):
        end = min(start + chunk, len(text))
        if keymap is not None:
            # Shrink the chunk until its new characters fit the spare keycodes.
            while end - start > 1 and len(_unmapped(text[start:end], keymap)) > len(keymap.spare):
                end = start + (end - start) // 2
            needed = _unmapped(text[start:end], keymap)
            if needed and keymap.spare:
                commands += [["xmodmap", *keymap.bind(needed)], ["sleep", MAPPING_PAUSE_S]]
        if fast:
            commands.append([XTEST, "type", "--", text[start:end]])
        else:
            commands.append(["xdotool", "type", "--delay", str(TYPE_DELAY_MS), "--", text[start:end]])
        start = end
    return commands + [CAPS_LOCK_TAP] if caps_lock else commands


def argv_for(action: _Action) -> list[list[str]]:
    """The xdotool commands that perform ``action``, in order. Wait runs nothing."""
    match action:
        case Click():
            return [_click(action, 1)]
        case DoubleClick():
            return [_click(action, 2)]
        case TripleClick():
            return [_click(action, 3)]
        case Move():
            return [["xdotool", "mousemove", str(action.x), str(action.y)]]
        case MouseDown():
            return [["xdotool", *_moves(action.x, action.y), "mousedown", BUTTONS[action.button]]]
        case MouseUp():
            return [["xdotool", *_moves(action.x, action.y), "mouseup", BUTTONS[action.button]]]
        case Drag():
            down, up = _held(action.modifiers)
            points = _interpolate(action.path)
            argv = ["xdotool", "mousemove", str(points[0][0]), str(points[0][1]), *down,
                    "mousedown", BUTTONS[action.button]]
            for x, y in points[1:]:
                argv += ["sleep", "0.01", "mousemove", str(x), str(y)]
            return [argv + ["sleep", "0.02", "mouseup", BUTTONS[action.button], *up]]
        case Scroll():
            down, up = _held(action.modifiers)
            return [["xdotool", *_moves(action.x, action.y), *down,
                     "click", "--repeat", str(action.amount), "--delay", "10", WHEEL[action.direction], *up]]
        case Type():
            return plan_type(action.text)
        case Key():
            chords = [keys.xdotool_chord(c) for c in keys.chords(action.keys)]
            return [["xdotool", "key", "--delay", "10", *chords]]
        case HoldKey():
            chord = keys.xdotool_chord(keys.chord(action.keys))
            return [["xdotool", "keydown", chord, "sleep", f"{action.duration_ms / 1000:g}", "keyup", chord]]
        case Wait():
            return []
    raise TypeError(f"not a desktop input action: {action!r}")


# What a queued request is told to wait for an action still running (expected_ms): typing took
# 7-9 ms a character here (xdotool's delay is spent once per character, plus its own work).
TYPE_MS_PER_CHAR = 8
FAST_TYPE_MS_PER_CHAR = 1  # the XTEST path: ~0.3-0.5 ms measured, with room for a loaded machine
ACTION_MS = 100  # one xdotool call and the settling that follows, for an action with no duration


def expected_ms(action: _Action, glide_ms: int = 0) -> float:
    """About how long ``action`` takes to run, settling included (pure): an estimate for whoever
    waits behind it, never a limit."""
    match action:
        case Wait() | HoldKey():
            own = action.duration_ms
        case Type():
            fast = len(action.text) >= FAST_TYPE_MIN_CHARS
            own = len(action.text) * (FAST_TYPE_MS_PER_CHAR if fast else TYPE_MS_PER_CHAR)
        case Drag():
            own = len(_interpolate(action.path)) * 10  # a 10 ms sleep between intermediate points
        case Key():
            own = len(action.keys) * 10
        case _:
            own = 0
    return own + ACTION_MS + (glide_ms if pointer_target(action) is not None else 0)


# The visible pointer glide: before a pointer action the pointer travels to its target in a few
# steps, so a person watching the live view sees where the agent is about to act. Costs about
# GLIDE_MS per pointer action; GLASSDESK_POINTER_GLIDE_MS=0 turns it off (benchmarks, CI speed).
GLIDE_MS = 150
GLIDE_FRAME_MS = 15     # one intermediate pointer position per ~frame
GLIDE_MIN_PX = 8        # closer than this: just go there


def glide_ms_from(env: Mapping[str, str]) -> int:
    """GLASSDESK_POINTER_GLIDE_MS from an environment (default GLIDE_MS, 0 disables, capped at 2 s)."""
    raw = env.get("GLASSDESK_POINTER_GLIDE_MS", "")
    try:
        return max(0, min(int(raw), 2000)) if raw.strip() else GLIDE_MS
    except ValueError:
        return GLIDE_MS


def pointer_target(action: _Action) -> tuple[int, int] | None:
    """Where a pointer action first puts the pointer, if it moves it at all."""
    match action:
        case Drag():
            return action.path[0].x, action.path[0].y
        case Click() | DoubleClick() | TripleClick() | Move() | MouseDown() | MouseUp() | Scroll():
            return (action.x, action.y) if action.x is not None and action.y is not None else None
    return None


def glide_argv(start: tuple[int, int], end: tuple[int, int], ms: int) -> list[str] | None:
    """One xdotool command moving the pointer from ``start`` towards ``end`` over ~``ms``, eased,
    stopping one step short: the action's own argv makes the final move. None when not worth it."""
    distance = math.dist(start, end)
    steps = ms // GLIDE_FRAME_MS
    if ms <= 0 or steps < 2 or distance < GLIDE_MIN_PX:
        return None
    argv = ["xdotool"]
    pause = f"{ms / steps / 1000:.3f}"
    for i in range(1, steps):
        t = i / steps
        eased = t * t * (3 - 2 * t)  # smoothstep: starts and lands gently
        x = round(start[0] + (end[0] - start[0]) * eased)
        y = round(start[1] + (end[1] - start[1]) * eased)
        argv += ["mousemove", str(x), str(y), "sleep", pause]
    return argv


@dataclass(frozen=True)
class Press:
    """A pointer button pressed: when (monotonic), where and which."""

    at: float
    x: int
    y: int
    button: str


def pressed_button(action: _Action) -> str | None:
    """The button an action presses first, if it presses one where it stands (a drag's press and
    release are apart: it starts no click count anyone continues)."""
    return action.button if isinstance(action, (Click, DoubleClick, TripleClick, MouseDown)) else None


def separating_wait(last: Press | None, button: str, x: int, y: int, now: float) -> float:
    """How long to wait before pressing ``button`` at (x, y) so that no app counts the press as the
    next of ``last``'s clicks (pure)."""
    if last is None or last.button != button or max(abs(last.x - x), abs(last.y - y)) > MULTI_CLICK_PX:
        return 0.0
    return max(0.0, last.at + MULTI_CLICK_S - now)


class ActionFailed(RuntimeError):
    def __init__(self, message: str, argv: list[str], stderr: str):
        super().__init__(message)
        self.argv = argv
        self.stderr = stderr


@dataclass
class Executed:
    argv: list[list[str]]
    duration_ms: float


def type_keysym(char: str) -> int:
    """The X keysym that types ``char`` (pure): Latin-1 characters are their own keysym, newline
    and carriage return are Return, tab is Tab, any other character its Unicode keysym."""
    if char in "\n\r":
        return XK_RETURN
    if char == "\t":
        return XK_TAB
    code = ord(char)
    return code if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF else 0x01000000 + code


XK_RETURN, XK_TAB, XK_SHIFT_L = 0xFF0D, 0xFF09, 0xFFE1
LOCK_MASK = 1 << 1  # X's Lock modifier: Caps Lock is on
XTEST_SYNC_EVERY = 100  # characters between waits for the X server: keeps its queue short


def keysym_table(first_keycode: int, mapping: list[list[int]]) -> dict[int, tuple[int, bool]]:
    """keysym -> (keycode, needs shift) from the server's keyboard mapping (pure). A keysym on a
    key's first level wins over one on another key's shifted level; groups past the first are not
    used (they need a group switch)."""
    table: dict[int, tuple[int, bool]] = {}
    for level in (0, 1):
        for offset, syms in enumerate(mapping):
            if len(syms) > level and syms[level]:
                table.setdefault(syms[level], (first_keycode + offset, bool(level)))
    return table


class XTestTyper:
    """Types text with XTEST key events sent from this process over one X connection."""

    def __init__(self, display: str, fallback):
        self.display = display
        self.fallback = fallback  # types one character some other way (xdotool)

    def type(self, text: str) -> None:
        from Xlib import X
        from Xlib import display as xdisplay
        from Xlib.ext import xtest

        try:
            conn = xdisplay.Display(self.display)
        except Exception as exc:  # python-xlib raises several kinds on a refused connection
            raise ActionFailed(f"the display {self.display} refused a connection: {exc}", [XTEST, "type"], "") from exc
        try:
            info = conn.display.info
            table = keysym_table(info.min_keycode,
                                 conn.get_keyboard_mapping(info.min_keycode, info.max_keycode - info.min_keycode + 1))
            shift = conn.keysym_to_keycode(XK_SHIFT_L)
            for i, char in enumerate(text):
                key = table.get(type_keysym(char))
                if key is None:  # not on the map after all: type it the slow way, in order
                    conn.sync()
                    self.fallback(char)
                    continue
                code, shifted = key
                if shifted:
                    xtest.fake_input(conn, X.KeyPress, shift)
                xtest.fake_input(conn, X.KeyPress, code)
                xtest.fake_input(conn, X.KeyRelease, code)
                if shifted:
                    xtest.fake_input(conn, X.KeyRelease, shift)
                if i % XTEST_SYNC_EVERY == XTEST_SYNC_EVERY - 1:
                    conn.sync()
            conn.sync()
        finally:
            conn.close()


def caps_lock_on(display: str) -> bool:
    """Is Caps Lock on, on ``display``? (the core keyboard state's Lock modifier)"""
    from Xlib import display as xdisplay

    try:
        conn = xdisplay.Display(display)
    except Exception:
        return False  # the typing that follows will say what is wrong with the display
    try:
        return bool(conn.screen().root.query_pointer().mask & LOCK_MASK)
    finally:
        conn.close()


class Executor:
    """Runs argv lists on one display."""

    def __init__(self, env: dict[str, str]):
        self.env = env  # the session's: the commands run in it
        self._keymap: Keymap | None = None
        # A server setting, read from the server's environment: the desktop's holds no GLASSDESK_*
        # but its mark (desktop.session.stack.desktop_environment).
        self.glide_ms = glide_ms_from(os.environ)
        self._last_press: Press | None = None

    def glides(self, action: _Action, glide: bool = True) -> bool:
        """Whether ``run`` moves the pointer in steps before ``action`` (it may still find its
        target too close to be worth it)."""
        return glide and bool(self.glide_ms) and pointer_target(action) is not None

    def run(self, action: _Action, before_act: Callable[[], object] | None = None, glide: bool = True) -> Executed:
        """Carry out ``action``; ``before_act`` is called once the pointer has glided to its target
        (at once when it does not glide: ``glide`` false, or the server's glide off), just before
        the action's own input."""
        start = time.perf_counter()
        if isinstance(action, Type):
            if self._keymap is None and not action.text.isascii():
                self._keymap = Keymap.parse(self._run(["xmodmap", "-pke"]))
            keymap = None if action.text.isascii() else self._keymap
            commands = plan_type(action.text, keymap, caps_lock=caps_lock_on(self.env.get("DISPLAY", "")))
        else:
            commands = argv_for(action)
        target = pointer_target(action) if self.glides(action, glide) else None
        steps = glide_argv(self.cursor(), target, self.glide_ms) if target is not None else None
        if steps:
            self._run(steps)
        button = pressed_button(action)
        at = self._keep_one_click(action, button) if button is not None else None
        if before_act is not None:
            before_act()
        for argv in commands:
            if argv[0] == XTEST:
                XTestTyper(self.env.get("DISPLAY", ""), self._type_slowly).type(argv[-1])
            else:
                self._run(argv)
        if isinstance(action, Wait):
            time.sleep(action.duration_ms / 1000)
        if at is not None and button is not None:  # at is found for a pressed button only
            self._last_press = Press(time.monotonic(), *at, button)
        return Executed([steps, *commands] if steps else commands, (time.perf_counter() - start) * 1000)

    def keep_one_click(self, action: _Action) -> None:
        """Wait out the double-click time of the last press when ``action``'s would continue its count
        (see MULTI_CLICK_S). ``run`` waits it out too; a caller that marks the screen before ``run``
        (desktop.session) calls this first, so that what the screen does while nothing is pressed (a
        caret's blink, the last click's late paint) is not taken for this action's effect."""
        button = pressed_button(action)
        last = self._last_press
        if button is not None and last is not None and last.button == button:  # else no wait: no pointer read
            self._keep_one_click(action, button)

    def _keep_one_click(self, action, button: str) -> tuple[int, int]:
        """Wait out the double-click time of the last press when this one would continue its count
        (see MULTI_CLICK_S); where this press lands."""
        at: tuple[int, int] = (action.x, action.y) if action.x is not None and action.y is not None else self.cursor()
        time.sleep(separating_wait(self._last_press, button, *at, time.monotonic()))
        return at

    def _type_slowly(self, char: str) -> None:
        self._run(["xdotool", "type", "--delay", str(TYPE_DELAY_MS), "--", char])

    def _run(self, argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ActionFailed(f"{argv[0]} could not run: {exc}", argv, "") from exc
        if done.returncode != 0:
            stderr = done.stderr.strip()
            raise ActionFailed(f"{argv[0]} exited with {done.returncode}: {stderr or 'no message'}", argv, stderr)
        return done.stdout

    def cursor(self) -> tuple[int, int]:
        out = self._run(["xdotool", "getmouselocation", "--shell"])
        values = dict(line.split("=", 1) for line in out.split() if "=" in line)
        return int(values["X"]), int(values["Y"])
