"""What a person does through the live view, read off the RFB stream the relay passes to x11vnc:
their clicks, drags, scrolls, typing and key chords, as actions in display pixels.

The relay (vision.http.viewer) hands every chunk a control connection sends to ``RfbInputTap.feed``;
nothing is changed or held back: the tap reads a copy. It knows the client messages of RFB 3.8 and
the extensions noVNC sends (continuous updates, fences, desktop size, xvp, QEMU extended key
events); at the first message it does not know it stops reading (it cannot tell where the next
message begins) and says so, and the relay goes on relaying.

``Gestures`` turns the pointer and key events into actions a reviewer reads: a press and release
in place is a click (a drag when the pointer moved more than a few pixels between them), wheel
buttons are a scroll, printable keys pressed without ctrl/alt/super run together into one typed
text until something else happens or the person pauses, and any other key (with its modifiers) is
a chord. Each gesture is finished with its start and end times (monotonic), in the order done.

Watching the RFB stream rather than the X server: every input on the display arrives through the
XTEST extension (x11vnc's and the agent's xdotool's alike), so the X server cannot tell the
person's from the agent's; the relay sees only the person's, with their pixels and keysyms.

Pure: no X, no sockets (key names come from python-xlib's keysym tables, data only).
"""

from __future__ import annotations

import functools
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Gesture", "Gestures", "RfbInputTap", "keysym_name"]

DRAG_PX = 5            # a release further than this from its press is a drag, not a click
TYPING_PAUSE_S = 1.5   # a pause this long between characters ends one typed text
BUTTONS = {0: "left", 1: "middle", 2: "right"}
WHEEL = {3: "up", 4: "down", 5: "left", 6: "right"}
MODIFIERS = {0xFFE1: "shift", 0xFFE2: "shift", 0xFFE3: "ctrl", 0xFFE4: "ctrl", 0xFFE9: "alt", 0xFFEA: "alt",
             0xFFE7: "alt", 0xFFE8: "alt", 0xFFEB: "super", 0xFFEC: "super", 0xFE03: "alt"}


def keysym_name(keysym: int) -> str:
    """An X keysym's name as the Key action takes it ("Return", "a", "F5")."""
    if 0x20 < keysym < 0x7F:
        return chr(keysym).lower() if chr(keysym).isalpha() else chr(keysym)
    return _keysym_names().get(keysym) or f"0x{keysym:x}"


@functools.cache
def _keysym_names() -> dict[int, str]:
    """python-xlib's keysym tables reversed (XK_Return -> "Return"); the first name of a value wins."""
    from desktop.keys import _xk

    names: dict[int, str] = {}
    for name, value in vars(_xk()).items():
        if name.startswith("XK_") and isinstance(value, int):
            names.setdefault(value, name[3:])
    return names


def keysym_char(keysym: int) -> str | None:
    """The character a keysym types, or None (a function key, a modifier)."""
    if 0x20 <= keysym <= 0x7E or 0xA0 <= keysym <= 0xFF:
        return chr(keysym)
    if 0x01000100 <= keysym <= 0x0110FFFF:  # Unicode keysyms
        return chr(keysym - 0x01000000)
    return None


@dataclass
class Gesture:
    """One thing the person did: an action (desktop.actions' dict form) and when."""

    action: dict
    started: float  # monotonic
    finished: float
    # What ``Gestures.on_press`` answered at its press (or first wheel notch): the reads of what was
    # under the pointer (desktop.session.operator_reads). Then, once resolved by whoever records the
    # gesture: the element there (None: none, or not known for sure) and the frame for its spot.
    press: Any = None
    element: Any = None
    frame: Any = None


class RfbInputTap:
    """Reads RFB client messages from a stream of chunks; calls ``on_pointer(mask, x, y)`` and
    ``on_key(down, keysym)``. After an unknown message ``broken`` says why, and it reads no more."""

    def __init__(self, on_pointer: Callable[[int, int, int], None], on_key: Callable[[bool, int], None], *,
                 client_init: bool = True):
        self.on_pointer = on_pointer
        self.on_key = on_key
        self.broken: str | None = None
        self._buffer = bytearray()
        # The stream after the security handshake begins with ClientInit: one byte, not a message.
        self._skip = 1 if client_init else 0

    def feed(self, data: bytes) -> None:
        if self.broken is not None:
            return
        self._buffer += data
        if self._skip and self._buffer:
            del self._buffer[:self._skip]
            self._skip = 0
        while self._buffer and self.broken is None:
            size = self._size(self._buffer)
            if size is None or len(self._buffer) < size:
                return  # wait for the rest of the message
            message = bytes(self._buffer[:size])
            del self._buffer[:size]
            kind = message[0]
            if kind == 4:
                down, keysym = struct.unpack(">BxxI", message[1:8])
                self.on_key(bool(down), keysym)
            elif kind == 5:
                mask, x, y = struct.unpack(">BHH", message[1:6])
                self.on_pointer(mask, x, y)
            elif kind == 255 and message[1] == 0:  # QEMU extended key event: keysym and scancode
                down, keysym = struct.unpack(">HI", message[2:8])
                self.on_key(bool(down), keysym)

    def _size(self, buf: bytearray) -> int | None:
        """The whole message's length once its header is in, None until then."""
        kind = buf[0]
        fixed = {0: 20, 3: 10, 4: 8, 5: 6, 150: 10, 250: 4}
        if kind in fixed:
            return fixed[kind]
        if kind == 2:  # SetEncodings
            return 4 + 4 * struct.unpack(">H", buf[2:4])[0] if len(buf) >= 4 else None
        if kind == 6:  # ClientCutText (a negative length is the extended form: not read)
            if len(buf) < 8:
                return None
            length = struct.unpack(">i", buf[4:8])[0]
            if length < 0:
                self.broken = "extended clipboard message"
                return None
            return 8 + length
        if kind == 248:  # ClientFence
            return 9 + buf[8] if len(buf) >= 9 else None
        if kind == 251:  # SetDesktopSize
            return 8 + 16 * buf[6] if len(buf) >= 7 else None
        if kind == 255:  # QEMU client message: subtype 0 is the extended key event
            if len(buf) < 2:
                return None
            if buf[1] == 0:
                return 12
        self.broken = f"unknown RFB client message {kind}"
        return None


@dataclass
class Gestures:
    """Pointer and key events -> gestures, in order. ``flush`` ends a typed text still open."""

    clock: Callable[[], float] = time.monotonic
    # Told of each press as it arrives, (x, y, wheel): its answer travels with the gesture (``press``).
    on_press: Callable[[int, int, bool], Any] | None = None
    done: list[Gesture] = field(default_factory=list)
    _mask: int = 0
    _press: tuple[int, int, int, float, Any] | None = None  # (button bit, x, y, when, on_press's answer)
    _mods: set[str] = field(default_factory=set)
    _typed: list[str] = field(default_factory=list)
    _typed_span: tuple[float, float] = (0.0, 0.0)

    def pointer(self, mask: int, x: int, y: int) -> None:
        now = self.clock()
        pressed, released = mask & ~self._mask, self._mask & ~mask
        self._mask = mask
        for bit, direction in WHEEL.items():
            if pressed & (1 << bit):
                self._scroll(direction, x, y, now)
        for bit in BUTTONS:
            if pressed & (1 << bit) and self._press is None:
                self._end_typing()
                self._press = (bit, x, y, now, self._pressed(x, y, False))
            elif released & (1 << bit) and self._press is not None and self._press[0] == bit:
                _, px, py, when, handle = self._press
                self._press = None
                button = BUTTONS[bit]
                action: dict[str, Any]
                if max(abs(x - px), abs(y - py)) > DRAG_PX:
                    action = {"action": "drag", "path": [{"x": px, "y": py}, {"x": x, "y": y}], "button": button}
                else:
                    action = {"action": "click", "x": px, "y": py, "button": button}
                if self._mods:
                    action["modifiers"] = sorted(self._mods)
                self.done.append(Gesture(action, when, now, handle))

    def _pressed(self, x: int, y: int, wheel: bool) -> Any:
        return self.on_press(x, y, wheel) if self.on_press is not None else None

    def _scroll(self, direction: str, x: int, y: int, now: float) -> None:
        self._end_typing()
        last = self.done[-1] if self.done else None
        if (last is not None and last.action.get("action") == "scroll" and last.action["direction"] == direction
                and now - last.finished < 1.0 and last.action["amount"] < 50):
            last.action["amount"] += 1  # one notch more of the same scroll
            last.finished = now
        else:
            self.done.append(Gesture({"action": "scroll", "x": x, "y": y, "direction": direction, "amount": 1},
                                     now, now, self._pressed(x, y, True)))

    def key(self, down: bool, keysym: int) -> None:
        now = self.clock()
        modifier = MODIFIERS.get(keysym)
        if modifier is not None:
            (self._mods.add if down else self._mods.discard)(modifier)
            return
        if not down:
            return
        char = keysym_char(keysym)
        if char is not None and not (self._mods - {"shift"}):
            if self._typed and now - self._typed_span[1] > TYPING_PAUSE_S:
                self._end_typing()
            if not self._typed:
                self._typed_span = (now, now)
            self._typed.append(char)
            self._typed_span = (self._typed_span[0], now)
            return
        self._end_typing()
        chord = "+".join([*sorted(self._mods), keysym_name(keysym)])
        self.done.append(Gesture({"action": "key", "keys": [chord]}, now, now))

    def _end_typing(self) -> None:
        if self._typed:
            self.done.append(Gesture({"action": "type", "text": "".join(self._typed)}, *self._typed_span))
            self._typed = []

    def take(self, *, flush: bool = False) -> list[Gesture]:
        """The gestures finished so far (and, with ``flush``, a typed text still open), oldest
        first; a typed text also ends once the person has paused for TYPING_PAUSE_S."""
        if flush or (self._typed and self.clock() - self._typed_span[1] > TYPING_PAUSE_S):
            self._end_typing()
        out, self.done = self.done, []
        return out
