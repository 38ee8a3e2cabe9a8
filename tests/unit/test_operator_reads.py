"""What was under a person's pointer during a take-over (desktop.session.operator_reads): the choice
between the look at rest and the look at the press (pure), the gestures carrying their press, and
the reader's threads with a stand-in browser (no X; the tests wait on events, never on time)."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from desktop.models import ElementAt
from desktop.session.operator_input import Gestures
from desktop.session.operator_reads import HOVER_FRESH_S, Look, PointerReads, choose, same_element


def element(name: str = "Save", box: dict | None = None, tag: str = "button") -> ElementAt:
    return ElementAt(x=10, y=20, css_x=10, css_y=20, tag=tag, role="button", name=name,
                     box=box or {"x": 0, "y": 0, "width": 50, "height": 20}, locators=[])


def look(started: float, finished: float | None, found=None, ok: bool = True) -> Look:
    return Look(10, 20, started, finished, found, None, ok)


SAVE, DELETE = element("Save"), element("Delete")


@pytest.mark.parametrize("rest, at_press, expected", [
    # Both back in time and naming the same element: the page did not change around the press.
    (look(0.0, 0.5, SAVE), look(1.0, 1.05, element("Save")), "rest"),
    # They differ: the page changed under the pointer; which did the person mean? Nothing, not a guess.
    (look(0.0, 0.5, SAVE), look(1.0, 1.05, DELETE), None),
    # The look at the press finished after the release (the click may have changed the page): the
    # look at rest alone, fresh.
    (look(0.5, 0.9, SAVE), look(1.0, 1.3, DELETE), "rest"),
    # ... but not a look at rest older than HOVER_FRESH_S: a page may change under a resting pointer.
    (look(1.0 - HOVER_FRESH_S - 0.1, 0.5, SAVE), look(1.0, 1.3, DELETE), None),
    # No look at rest (the pointer arrived and pressed at once): the look at the press, back in time.
    (None, look(1.0, 1.1, SAVE), "press"),
    (None, look(1.0, 1.25, SAVE), None),   # back after the release
    (None, look(1.0, None, SAVE), None),   # not back at all
    (None, look(1.0, 1.1, SAVE, ok=False), None),  # failed: it says nothing
    # A look at rest still in flight when the button went down describes no moment before it.
    (look(0.9, 1.05, SAVE), None, None),
    # A native window: both looks found no element; the look at rest (and its frame) is kept.
    (look(0.0, 0.5, None), look(1.0, 1.05, None), "rest"),
    # The browser came to the front meanwhile: the two disagree, nothing is recorded.
    (look(0.0, 0.5, None), look(1.0, 1.05, SAVE), None),
])
def test_the_look_a_gesture_records_is_one_taken_before_the_page_could_change(rest, at_press, expected):
    chosen = choose(rest, at_press, pressed_at=1.0, released_at=1.2)
    if expected == "press":  # its element, not its frame (captured after the press reached x11vnc)
        assert chosen == replace(at_press, frame=None)
    else:
        assert chosen is {"rest": rest, None: None}[expected]


def test_a_look_taken_at_the_press_gives_its_element_but_never_its_frame():
    pressed_in = Look(10, 20, 1.0, 1.1, None, object(), True)  # a native window: a frame, no element
    assert choose(None, pressed_in, pressed_at=1.0, released_at=1.2) == replace(pressed_in, frame=None)
    at_rest = Look(10, 20, 0.0, 0.5, None, object(), True)
    assert choose(at_rest, pressed_in, pressed_at=1.0, released_at=1.2).frame is at_rest.frame


def test_a_scroll_has_no_look_at_the_press_only_at_rest():
    rest = look(0.5, 0.8, SAVE)
    assert choose(rest, None, pressed_at=1.0, released_at=1.0) is rest


def test_the_same_element_is_the_same_tag_role_name_and_box():
    assert same_element(SAVE, element("Save")) and same_element(None, None)
    assert not same_element(SAVE, DELETE) and not same_element(SAVE, None)
    assert not same_element(SAVE, element("Save", box={"x": 0, "y": 40, "width": 50, "height": 20}))


def test_each_press_travels_with_its_gesture():
    pressed = []

    def on_press(x, y, wheel):
        pressed.append((x, y, wheel))
        return f"press {len(pressed)}"

    gestures = Gestures(on_press=on_press)
    gestures.pointer(0, 10, 20)
    gestures.pointer(1, 10, 20)
    gestures.pointer(0, 10, 20)  # a click
    gestures.pointer(1, 30, 40)
    gestures.pointer(1, 90, 40)
    gestures.pointer(0, 90, 40)  # a drag
    gestures.pointer(1 << 4, 5, 5)
    gestures.pointer(0, 5, 5)
    gestures.pointer(1 << 4, 5, 5)  # two notches: one scroll, one press (its first notch)
    gestures.key(True, 0x61)
    done = gestures.take(flush=True)
    assert [(g.action["action"], g.press) for g in done] == [("click", "press 1"), ("drag", "press 2"),
                                                             ("scroll", "press 3"), ("type", None)]
    assert pressed == [(10, 20, False), (30, 40, False), (5, 5, True)]


class Browser:
    """Stands in for the session: what is under each pixel, and each read counted. A read can be
    held until the test lets it go (``hold``), to put it behind the release."""

    def __init__(self, under: dict):
        self.under = under
        self.reads: list[tuple[int, int]] = []
        self.read_done = threading.Semaphore(0)
        self.hold: threading.Event | None = None
        self.captures = 0

    def read(self, x, y):
        if self.hold is not None:
            self.hold.wait()
        self.reads.append((x, y))
        try:
            found = self.under.get((x, y))
            if isinstance(found, Exception):
                raise found
            return found
        finally:
            self.read_done.release()

    def capture(self):
        self.captures += 1
        return f"frame {self.captures}"


@pytest.fixture
def browser():
    return Browser({(10, 20): SAVE, (30, 40): None, (50, 60): RuntimeError("the page is navigating")})


@pytest.fixture
def reads(browser):
    reads = PointerReads(browser.read, browser.capture)
    yield reads
    reads.close()


def rested(reads: PointerReads, browser: Browser, x: int, y: int) -> None:
    """The pointer comes to rest at (x, y) and its look at rest is back."""
    reads.moved(x, y, held=False)
    assert browser.read_done.acquire(timeout=10)
    for _ in range(10_000):  # its result is stored just after the read returns
        if reads._rest is not None:
            return
        threading.Event().wait(0.001)
    raise AssertionError("no look at rest was kept")


def test_a_press_after_rest_records_what_was_read_at_rest_and_confirmed(reads, browser):
    rested(reads, browser, 10, 20)
    press = reads.pressed(10, 20)
    assert browser.read_done.acquire(timeout=10)  # the look at the press
    press.look.result(timeout=10)
    chosen = reads.resolve(press, released_at=float("inf"), wait_s=0)
    assert chosen is press.rest and chosen.element is SAVE and chosen.frame is None
    assert browser.reads == [(10, 20), (10, 20)]


def test_a_look_at_the_press_not_back_by_the_release_is_not_taken(reads, browser):
    browser.hold = threading.Event()
    press = reads.pressed(10, 20)  # no rest: the pointer pressed where it arrived
    released = press.at + 1e-6     # the release is in before the look is back
    assert reads.resolve(press, released_at=released, wait_s=0) is None
    browser.hold.set()
    assert browser.read_done.acquire(timeout=10)
    assert press.look.result(timeout=10).element is SAVE
    assert reads.resolve(press, released_at=released, wait_s=0) is None  # back now, but after the release


def test_a_native_window_keeps_the_frame_for_its_spot_and_a_failed_read_says_nothing(reads, browser):
    rested(reads, browser, 30, 40)
    assert reads._rest.frame == "frame 1" and reads._rest.element is None
    press = reads.pressed(30, 40)
    press.look.result(timeout=10)
    chosen = reads.resolve(press, released_at=float("inf"), wait_s=0)
    assert chosen is press.rest and chosen.frame == "frame 1"  # the frame from before the press
    failed = reads.pressed(50, 60)
    assert failed.look.result(timeout=10).ok is False
    assert reads.resolve(failed, released_at=float("inf"), wait_s=0) is None


def test_a_look_at_rest_belongs_to_the_pixel_and_ends_at_the_next_press(reads, browser):
    rested(reads, browser, 10, 20)
    reads.moved(11, 20, held=True)  # left it, dragging: no look at rest while a button is held
    press = reads.pressed(10, 20)   # back on it, but not rested there
    assert press.rest is None
    rested(reads, browser, 10, 20)
    first = reads.pressed(10, 20)
    assert first.rest is not None
    second = reads.pressed(10, 20)  # a double click's second press: the first may have changed the page
    assert second.rest is None
