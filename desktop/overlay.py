"""A status strip drawn on the desktop itself, so a person watching the live view sees what the
agent is doing next to where it happens.

The strip is an override-redirect window: the window manager does not manage it, so it never gets
a frame, a taskbar entry or the keyboard focus. Its input region is empty (X SHAPE extension), so
every click and wheel event passes through to the window below: it cannot intercept the agent's
click nor the operator's. It sits over the empty right-hand part of the bottom panel, where it
hides no application content, and moves to another spot when the current action targets a point
near it. It re-raises itself whenever a managed window is restacked above it.

Screenshots (XGetImage of the root window) do include it: the model sees a small dark strip on the
panel naming its own last action. That is the price of showing status *on the desktop*; the
placement keeps it off every application's content, and ``GLASSDESK_OVERLAY=0`` turns it off.

One thread per overlay owns the X connection (python-xlib connections are not thread-safe);
``show``/``hide`` only queue requests for it, so callers never block on X.
"""

from __future__ import annotations

import logging
import os
import queue
import select
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from PIL import Image, ImageDraw, ImageFont

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH

log = logging.getLogger("glassdesk.overlay")

TONES: dict[str, tuple[int, int, int]] = {
    "act": (59, 130, 246),    # blue: acting
    "wait": (245, 158, 11),   # amber: thinking, paused, waiting for approval
    "ok": (34, 197, 94),      # green: done
    "bad": (239, 68, 68),     # red: failed, cancelled
    "idle": (148, 163, 184),
}
HEIGHT = 24
MAX_WIDTH = 640
MARGIN = 48          # keep at least this far from any point the action targets
PANEL_HEIGHT = 28    # desktop/assets/xfce4-panel.xml: one 28 px panel at the bottom
FONT_PATHS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",)
BOLD_PATHS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",)
BACKGROUND = (17, 24, 39)
TEXT = (243, 244, 246)
MUTED = (156, 163, 175)


def enabled(env: dict[str, str] | None = None) -> bool:
    """GLASSDESK_OVERLAY: on unless set to 0/false/no/off."""
    value = (env if env is not None else os.environ).get("GLASSDESK_OVERLAY", "1")
    return value.strip().lower() not in ("0", "false", "no", "off")


# ------------------------------------------------------------------------------- pure placement


def candidates(width: int, height: int = HEIGHT) -> list[tuple[int, int]]:
    """Where the strip may go, best first.

    1. bottom right, over the panel's empty right-hand side (the tasklist grows from the left);
    2. top, just left of Chromium's window buttons, over the empty end of the tab strip;
    3. bottom, centred over the panel;
    4. top left corner, over the tab strip's first tab: the last resort.
    """
    panel_y = SCREEN_HEIGHT - PANEL_HEIGHT + (PANEL_HEIGHT - height) // 2
    return [
        (SCREEN_WIDTH - width - 8, panel_y),
        (SCREEN_WIDTH - width - 160, 4),
        ((SCREEN_WIDTH - width) // 2, panel_y),
        (8, 4),
    ]


def place(width: int, avoid: Iterable[tuple[int, int]] = (), height: int = HEIGHT,
          margin: int = MARGIN) -> tuple[int, int]:
    """The first candidate position whose rectangle, grown by ``margin``, holds none of ``avoid``."""
    points = list(avoid)
    options = candidates(width, height)
    for x, y in options:
        if not any(x - margin <= px < x + width + margin and y - margin <= py < y + height + margin
                   for px, py in points):
            return x, y
    # Every spot is near a target (a path across the screen): take the one farthest from them.
    return max(options, key=lambda o: min((abs(o[0] + width / 2 - px) + abs(o[1] + height / 2 - py)
                                           for px, py in points), default=0))


def action_points(action: dict) -> list[tuple[int, int]]:
    """Every display point an action dict touches: its x/y, a drag path, a zoom region's corners."""
    points = []
    if action.get("x") is not None and action.get("y") is not None:
        points.append((int(action["x"]), int(action["y"])))
    points += [(int(p["x"]), int(p["y"])) for p in action.get("path") or []]
    if region := action.get("region"):
        points += [(region["x0"], region["y0"]), (region["x1"], region["y1"]),
                   (region["x0"], region["y1"]), (region["x1"], region["y0"])]
    return points


# ------------------------------------------------------------------------------------ rendering


@lru_cache(maxsize=4)
def _font(bold: bool, size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for path in BOLD_PATHS if bold else FONT_PATHS:
        if os.path.exists(path):
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size=size)


def render(text: str, tone: str = "act", label: str = "glassdesk", height: int = HEIGHT) -> Image.Image:
    """The strip as an RGB image: a coloured dot, a muted label, the text; at most MAX_WIDTH wide."""
    regular, bold = _font(False, 13), _font(True, 12)
    pad, dot = 10, 8
    label_w = round(bold.getlength(label)) if label else 0
    text_x = pad + dot + 8 + (label_w + 10 if label else 0)
    room = MAX_WIDTH - text_x - pad
    if regular.getlength(text) > room:
        while text and regular.getlength(text + "…") > room:
            text = text[:-1]
        text += "…"
    width = text_x + round(regular.getlength(text)) + pad
    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    cy = height // 2
    draw.ellipse((pad, cy - dot // 2, pad + dot, cy + dot // 2), fill=TONES.get(tone, TONES["idle"]))
    if label:
        draw.text((pad + dot + 8, cy), label, font=bold, fill=MUTED, anchor="lm")
    draw.text((text_x, cy), text, font=regular, fill=TEXT, anchor="lm")
    return image


def rounded_rows(width: int, height: int, radius: int = 6) -> list[tuple[int, int, int, int]]:
    """Rectangles (x, y, w, h) whose union is a rounded rectangle: the strip's window shape."""
    radius = min(radius, height // 2, width // 2)
    rows = []
    for y in range(radius):
        dy = radius - y - 0.5
        inset = radius - round((radius * radius - dy * dy) ** 0.5)
        rows.append((inset, y, width - 2 * inset, 1))
        rows.append((inset, height - 1 - y, width - 2 * inset, 1))
    rows.append((0, radius, width, height - 2 * radius))
    return rows


# ---------------------------------------------------------------------------------------- the window


@dataclass
class _Show:
    text: str
    tone: str
    avoid: list[tuple[int, int]]
    hide_after: float | None
    at: tuple[int, int] | None


class Overlay:
    """The status strip on one X display. ``show`` and ``hide`` return at once; ``close`` ends it."""

    def __init__(self, display: str):
        self.display_name = display
        self.visible = False
        self.geometry: tuple[int, int, int, int] | None = None  # x, y, width, height when shown
        self.window_id: int | None = None
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        self._ready = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._main, name=f"overlay{display}", daemon=True)
        self._thread.start()
        self._ready.wait(5)
        if self._error:
            raise self._error

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def show(self, text: str, tone: str = "act", avoid: Iterable[tuple[int, int]] = (),
             hide_after: float | None = None, at: tuple[int, int] | None = None) -> None:
        """Show ``text``, away from the ``avoid`` points (or at ``at``); hide after ``hide_after`` s."""
        self._send(_Show(text, tone, list(avoid), hide_after, at))

    def hide(self) -> None:
        self._send("hide")

    def close(self) -> None:
        self._send("close")
        self._thread.join(2)

    def flush(self, timeout: float = 2.0) -> bool:
        """Wait until every queued request has been drawn (for tests)."""
        done = threading.Event()
        self._send(done)
        return done.wait(timeout)

    def _send(self, request) -> None:
        if not self._thread.is_alive():
            return
        self._requests.put(request)
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    # ------------------------------------------------------------------ the X thread

    def _main(self) -> None:
        try:
            from Xlib import X, display as xdisplay
            from Xlib.ext import shape

            self._X, self._shape = X, shape
            self._d = xdisplay.Display(self.display_name)
            if not self._d.has_extension("SHAPE"):
                raise RuntimeError("the X server lacks the SHAPE extension: the overlay could not be click-through")
            screen = self._d.screen()
            self._root = screen.root
            self._depth = screen.root_depth
            self._window = self._root.create_window(
                -100, -100, 10, HEIGHT, 0, self._depth, X.InputOutput, X.CopyFromParent,
                override_redirect=True, background_pixel=screen.black_pixel, event_mask=0,
            )
            self.window_id = self._window.id
            self._window.set_wm_name("glassdesk status")
            self._window.set_wm_class("glassdesk-overlay", "GlassdeskOverlay")
            # An empty input region: pointer events go to whatever is below.
            self._window.shape_rectangles(shape.SO.Set, shape.SK.Input, X.Unsorted, 0, 0, [])
            # Hear about windows being mapped or restacked, to stay on top of them.
            self._root.change_attributes(event_mask=X.SubstructureNotifyMask)
            self._pixmap = None
            self._d.sync()
        except Exception as exc:  # no display, no SHAPE: the caller decides what to do
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        hide_at: float | None = None
        try:
            while True:
                timeout = None if hide_at is None else max(0.0, hide_at - time.monotonic())
                readable, _, _ = select.select([self._wake_r, self._d.fileno()], [], [], timeout)
                if self._wake_r in readable:
                    os.read(self._wake_r, 4096)
                raise_again = False
                while self._d.pending_events():
                    event = self._d.next_event()
                    if self.visible and event.type in (X.MapNotify, X.ConfigureNotify) \
                            and getattr(event, "window", None) != self._window:
                        raise_again = raise_again or not self._is_override_redirect(event.window)
                if raise_again:
                    self._window.configure(stack_mode=X.Above)
                while True:
                    try:
                        request = self._requests.get_nowait()
                    except queue.Empty:
                        break
                    if request == "close":
                        return
                    if request == "hide":
                        self._hide()
                        hide_at = None
                    elif isinstance(request, _Show):
                        self._show(request)
                        hide_at = time.monotonic() + request.hide_after if request.hide_after else None
                    elif isinstance(request, threading.Event):
                        self._d.sync()
                        request.set()
                if hide_at is not None and time.monotonic() >= hide_at:
                    self._hide()
                    hide_at = None
                self._d.flush()
        except Exception as exc:
            if type(exc).__name__ == "ConnectionClosedError":  # the display went away with its session
                log.debug("overlay on %s: display closed", self.display_name)
            else:
                log.exception("overlay on %s stopped", self.display_name)
        finally:
            try:
                self._window.destroy()
                self._d.close()
            except Exception:
                pass
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _is_override_redirect(self, window) -> bool:
        try:
            return bool(window.get_attributes().override_redirect)
        except Exception:  # gone already
            return True

    def _show(self, request: _Show) -> None:
        X = self._X
        image = render(request.text, request.tone)
        width, height = image.size
        x, y = request.at or place(width, request.avoid, height)
        pixmap = self._window.create_pixmap(width, height, self._depth)
        gc = pixmap.create_gc()
        data = image.convert("RGBX").tobytes("raw", "BGRX")
        rows_per_put = max(1, 200_000 // (width * 4))  # stay under the core protocol's request size
        for top in range(0, height, rows_per_put):
            rows = min(rows_per_put, height - top)
            pixmap.put_image(gc, 0, top, width, rows, X.ZPixmap, self._depth, 0,
                             data[top * width * 4:(top + rows) * width * 4])
        gc.free()
        self._window.configure(x=x, y=y, width=width, height=height, stack_mode=X.Above)
        self._window.shape_rectangles(self._shape.SO.Set, self._shape.SK.Bounding, X.Unsorted, 0, 0,
                                      rounded_rows(width, height))
        self._window.change_attributes(background_pixmap=pixmap)
        if self._pixmap is not None:
            self._pixmap.free()
        self._pixmap = pixmap
        if not self.visible:
            self._window.map()
        self._window.clear_area(0, 0, width, height)
        self.visible = True
        self.geometry = (x, y, width, height)

    def _hide(self) -> None:
        if self.visible:
            self._window.unmap()
        self.visible = False
