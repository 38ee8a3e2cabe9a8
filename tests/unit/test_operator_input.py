"""A person's input read off the RFB stream (pure): messages split anywhere, gestures as actions."""

from __future__ import annotations

import struct

from desktop.session.operator_input import Gestures, RfbInputTap, keysym_name


def pointer(mask: int, x: int, y: int) -> bytes:
    return struct.pack(">BBHH", 5, mask, x, y)


def key(down: bool, keysym: int) -> bytes:
    return struct.pack(">BBxxI", 4, int(down), keysym)


def tapped(stream: bytes, chunk: int = 3):
    events = []
    tap = RfbInputTap(lambda m, x, y: events.append(("p", m, x, y)), lambda d, k: events.append(("k", d, k)))
    for i in range(0, len(stream), chunk):
        tap.feed(stream[i:i + chunk])
    return events, tap


def test_the_tap_reads_pointer_and_keys_between_other_messages_split_anywhere():
    stream = (b"\x01"  # ClientInit
              + struct.pack(">BxxxBBBBHHHBBBxxx", 0, 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)  # SetPixelFormat
              + struct.pack(">BxH", 2, 2) + struct.pack(">ii", 0, -223)  # SetEncodings
              + struct.pack(">BBHHHH", 3, 1, 0, 0, 1920, 1080)  # FramebufferUpdateRequest
              + pointer(0, 10, 20) + key(True, 0x61)
              + struct.pack(">BxxxI", 6, 3) + b"abc"  # ClientCutText
              + struct.pack(">BxxxIB", 248, 0, 2) + b"xy"  # ClientFence
              + struct.pack(">BBHII", 255, 0, 1, 0x62, 30)  # QEMU extended key event
              + pointer(1, 11, 21))
    events, tap = tapped(stream)
    assert events == [("p", 0, 10, 20), ("k", True, 0x61), ("k", True, 0x62), ("p", 1, 11, 21)]
    assert tap.broken is None


def test_an_unknown_message_stops_the_reading_and_says_so():
    events, tap = tapped(b"\x01" + pointer(0, 1, 1) + bytes([77, 0, 0, 0]) + pointer(1, 2, 2))
    assert events == [("p", 0, 1, 1)] and tap.broken == "unknown RFB client message 77"


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_gestures_clicks_drags_scrolls_typing_and_chords():
    clock = Clock()
    g = Gestures(clock=clock)
    g.pointer(0, 5, 5)
    g.pointer(1, 100, 200)
    clock.t += 0.1
    g.pointer(0, 102, 201)  # released within DRAG_PX: a click where it was pressed
    g.pointer(4, 300, 300)
    g.pointer(0, 300, 300)  # right click
    g.pointer(1, 10, 10)
    g.pointer(1, 200, 10)
    g.pointer(0, 400, 10)  # a drag
    g.pointer(16, 50, 60)
    g.pointer(0, 50, 60)
    g.pointer(16, 50, 60)
    g.pointer(0, 50, 60)  # two notches down
    for sym in (0xFFE1, 0x48, 0xFFE1, 0x69, 0x20, 0x21):  # shift+H (an "H"), i, space, !
        g.key(True, sym)
        g.key(False, sym)
    g.key(True, 0xFFE3)
    g.key(True, 0x61)  # ctrl+a ends the typing
    g.key(False, 0x61)
    g.key(False, 0xFFE3)
    g.key(True, 0xFF0D)  # Return
    actions = [x.action for x in g.take(flush=True)]
    assert actions == [
        {"action": "click", "x": 100, "y": 200, "button": "left"},
        {"action": "click", "x": 300, "y": 300, "button": "right"},
        {"action": "drag", "path": [{"x": 10, "y": 10}, {"x": 400, "y": 10}], "button": "left"},
        {"action": "scroll", "x": 50, "y": 60, "direction": "down", "amount": 2},
        {"action": "type", "text": "Hi !"},
        {"action": "key", "keys": ["ctrl+a"]},
        {"action": "key", "keys": ["Return"]},
    ]


def test_a_pause_ends_a_typed_text_and_the_times_are_kept():
    clock = Clock()
    g = Gestures(clock=clock)
    g.key(True, 0x61)
    clock.t += 0.5
    g.key(True, 0x62)
    assert g.take() == []  # still typing
    clock.t += 2.0
    (typed,) = g.take()
    assert typed.action == {"action": "type", "text": "ab"} and (typed.started, typed.finished) == (100.0, 100.5)


def test_key_names():
    assert keysym_name(0x61) == "a" and keysym_name(0xFF0D) == "Return" and keysym_name(0xFFBE) == "F1"
