"""What was under a person's pointer during a take-over, read while their input flows on untouched.

A take-over's gestures are read off the live view's RFB stream (desktop.session.operator_input); the
relay writes each chunk to x11vnc *before* the tap reads it, so a press is on its way to the display
when we first hear of it, and nothing here may hold it back. What a gesture acted on is therefore
read at two moments, on threads of their own, never on the relay's:

- **at rest**: when the pointer has stood still for HOVER_REST_S with no button held, what is under
  it (a person's pointer rests on a target before the button goes down). Such a look describes the
  page before the press, if it finished before the press arrived and the pointer has not left that
  pixel since;
- **at the press**: a look started as the press arrives. It is taken only if it finished before the
  release arrived: the click (the event pages act on) is dispatched at the release, which x11vnc
  had not yet been given; only the press itself preceded it.

``choose`` (pure) decides from the two. Both valid: kept only when they name the same element (the
page did not change under the pointer around the press); when they differ, something changed and
we cannot tell which the person meant, so nothing is recorded rather than a wrong element. One
valid: that one (a look at rest alone only if it is at most HOVER_FRESH_S old at the press: a page
may change under a pointer resting longer). Neither (a quick click whose look at the press lost the
race, a read that failed or timed out): null. A scroll scrolls at its first wheel notch, so only a
look at rest counts for it.

Where no element names the point (the browser not in front, a native window, a ``<canvas>``) a look
also keeps the frame captured with it, from which the run records the spot (vision.perception.spot).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["HOVER_FRESH_S", "HOVER_REST_S", "Look", "PointerReads", "Press", "choose", "same_element"]

log = logging.getLogger(__name__)

HOVER_REST_S = 0.05   # a pointer still this long is at rest: read under it (a moving one is not: each
                      # read is a script call in the page, and a pointer in motion is going elsewhere)
HOVER_FRESH_S = 2.0   # a look at rest, unconfirmed by one at the press, is trusted this long before it


@dataclass
class Look:
    """One read of what was under the pointer: its pixel, when it began and ended (monotonic),
    the element (None: nothing the browser names there), and the frame captured with it when no
    element names the point. ``ok`` is false when the read failed (then it says nothing)."""

    x: int
    y: int
    started: float
    finished: float | None = None
    element: Any = None
    frame: Any = None
    ok: bool = False


@dataclass
class Press:
    """A button (or wheel notch) going down: when it arrived, the look at rest on its pixel then
    (maybe still in flight), and the look started for it."""

    x: int
    y: int
    at: float
    rest: Look | None = None
    look: Future | None = None


def _identity(element: Any) -> tuple | None:
    if element is None:
        return None
    return (element.tag, element.role, element.name, tuple(sorted((element.box or {}).items())))


def same_element(a: Any, b: Any) -> bool:
    """Whether two reads name the same element: tag, role, name and box (pure). Two reads of no
    element are the same (nothing the browser names, both times)."""
    return _identity(a) == _identity(b)


def choose(rest: Look | None, look: Look | None, pressed_at: float, released_at: float | None) -> Look | None:
    """The look a gesture records, or None (pure; the reasoning is the module's docstring)."""
    before = rest if rest is not None and rest.ok and rest.finished is not None and rest.finished <= pressed_at \
        else None
    during = look if look is not None and look.ok and look.finished is not None and released_at is not None \
        and look.finished <= released_at else None
    if before is not None and during is not None:
        return before if same_element(before.element, during.element) else None
    if before is not None:
        return before if pressed_at - before.started <= HOVER_FRESH_S else None
    # Its element was read before the release (a click's effect comes then), but its frame was
    # captured after the press had reached x11vnc: it may show the target pressed in, which a
    # replay's template would not find. So no frame (no spot): only a look at rest gives one.
    return replace(during, frame=None) if during is not None else None


class PointerReads:
    """The looks of one take-over. ``moved`` and ``pressed`` are called on the relay's thread and
    only hand work over; ``read(x, y)`` (the element under a display pixel, bounded by the session)
    and ``capture()`` (a frame) run on this object's threads. ``close`` ends them."""

    def __init__(self, read: Callable[[int, int], Any], capture: Callable[[], Any], *,
                 clock: Callable[[], float] = time.monotonic):
        self._read, self._capture, self._clock = read, capture, clock
        self._cond = threading.Condition()
        self._target: tuple[int, int, float] | None = None  # where the pointer is, and since when, to read
        self._at: tuple[int, int] | None = None              # the pointer's last pixel
        self._epoch = 0                                      # bumped when it moves elsewhere or presses
        self._rest: Look | None = None                       # the last look at rest, on the pointer's pixel
        self._closed = False
        self._press_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="operator-press")
        self._thread = threading.Thread(target=self._rest_loop, name="operator-rest", daemon=True)
        self._thread.start()

    def moved(self, x: int, y: int, held: bool) -> None:
        """The pointer is at (x, y); ``held``: a button is down (a drag: nothing to read at rest)."""
        now = self._clock()
        with self._cond:
            if (x, y) != self._at:
                self._at, self._epoch, self._rest = (x, y), self._epoch + 1, None
                self._target = None if held else (x, y, now)
            elif not held and self._target is None and self._rest is None:
                self._target = (x, y, now)
            self._cond.notify()

    def pressed(self, x: int, y: int, *, wheel: bool = False) -> Press:
        """A press (or a wheel notch) at (x, y): the look at rest there, and a look started now
        (none for a wheel, whose notch has scrolled already)."""
        now = self._clock()
        with self._cond:
            rest = self._rest if self._rest is not None and (self._rest.x, self._rest.y) == (x, y) else None
            # What was read at rest describes the page before this press only: the press may change
            # it, so the next press (a double click's second) needs a look of its own, taken once the
            # pointer rests again after the release; a look in flight now will not be kept.
            self._target, self._rest, self._epoch = None, None, self._epoch + 1
        look = None
        if not wheel and not self._closed:
            try:
                look = self._press_pool.submit(self._look, x, y)
            except RuntimeError:  # closed meanwhile
                look = None
        return Press(x, y, now, rest, look)

    def resolve(self, press: Press | None, released_at: float | None, wait_s: float) -> Look | None:
        """The look a gesture records (``choose``), waiting at most ``wait_s`` for the press's look
        (called off the relay's thread: by whoever records the gesture)."""
        if press is None:
            return None
        look = None
        if press.look is not None:
            try:
                look = press.look.result(timeout=wait_s)
            except Exception:  # not back in time, or cancelled by close: says nothing
                look = None
        return choose(press.rest, look, press.at, released_at)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._press_pool.shutdown(wait=False, cancel_futures=True)

    def _look(self, x: int, y: int) -> Look:
        look = Look(x, y, self._clock())
        try:
            look.element = self._read(x, y)
            if look.element is None or getattr(look.element, "tag", None) == "canvas":
                look.frame = self._capture()  # for the spot: no DOM element names this point
            look.ok = True
        except Exception as exc:  # the record is lost, never the person's input
            log.debug("take-over: nothing read at (%s, %s): %s", x, y, exc)
        look.finished = self._clock()
        return look

    def _rest_loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and self._target is None:
                    self._cond.wait()
                target = self._target
                if self._closed or target is None:
                    return
                x, y, since = target
                still = since + HOVER_REST_S - self._clock()
                if still > 0:
                    self._cond.wait(still)
                    continue  # look again: it may have moved meanwhile
                self._target, epoch = None, self._epoch
            look = self._look(x, y)
            with self._cond:
                if self._epoch == epoch:  # not moved, not pressed: the look describes what is under it
                    self._rest = look
