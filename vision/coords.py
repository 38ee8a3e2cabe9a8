"""Pure conversions between each model's coordinate space and display pixels (1920x1080).

A model never sees the display itself: it sees a scaled screenshot, or reasons on a normalised
grid. Each provider picks its ``Space`` once and converts at its own edge:

    Anthropic                      anthropic()       pixels of the <=1.15 MP image it is sent
    OpenAI computer_use_preview    pixels(w, h)      pixels of the declared display_width/height
    OpenAI GA computer             pixels(w, h)      pixels of the screenshot sent
    UI-TARS 1.0, Qwen3-VL          relative()        0..1000 on both axes
    UI-TARS 1.5, Qwen2.5-VL        smart_resized()   pixels of the image after Qwen's smart resize
    Gemini                         gemini()          0..999 on both axes

A model coordinate off its space is an error (``OffScreen``), never clamped: clicking the nearest
edge instead of what the model meant would do the wrong thing quietly. Only the rounding overshoot
of a valid coordinate (1000 -> 1920 -> 1919) is clamped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH

DISPLAY = (SCREEN_WIDTH, SCREEN_HEIGHT)

# Qwen2.5-VL's image processor defaults (qwen-vl-utils uses the same numbers).
QWEN_FACTOR = 28
QWEN_MIN_PIXELS = 4 * 28 * 28
QWEN_MAX_PIXELS = 16384 * 28 * 28

# Anthropic downsizes larger images itself, silently; we scale first and declare the size.
ANTHROPIC_MAX_PIXELS = 1_150_000
ANTHROPIC_MAX_EDGE = 1568


class OffScreen(ValueError):
    """A coordinate outside the space it was given in."""


@dataclass(frozen=True)
class Space:
    """A model's coordinate space: ``width`` x ``height`` units stretched over the whole display.

    ``kind`` says what a unit is: a pixel of the screenshot the model was sent, or a step of a
    normalised grid whatever the image size. Valid coordinates run 0..max_x and 0..max_y.
    """

    kind: Literal["pixels", "relative"]
    width: int
    height: int
    max_x: int
    max_y: int

    @property
    def image_size(self) -> tuple[int, int] | None:
        """The screenshot the model must be sent for its coordinates to mean anything (pixel
        spaces); a relative space works with any image size."""
        return (self.width, self.height) if self.kind == "pixels" else None

    def to_display(self, x: object, y: object) -> tuple[int, int]:
        """Model coordinates, as the model gave them -> display pixels. Raises OffScreen if off this
        space or not a number."""
        return (_convert(x, "x", self.max_x, self.width, SCREEN_WIDTH, SCREEN_WIDTH - 1),
                _convert(y, "y", self.max_y, self.height, SCREEN_HEIGHT, SCREEN_HEIGHT - 1))

    def from_display(self, x: float, y: float) -> tuple[int, int]:
        """Display pixels -> model coordinates (what this model would say to point there)."""
        return (_convert(x, "x", SCREEN_WIDTH - 1, SCREEN_WIDTH, self.width, self.max_x),
                _convert(y, "y", SCREEN_HEIGHT - 1, SCREEN_HEIGHT, self.height, self.max_y))

    def describe(self) -> str:
        """One sentence for a prompt or an error message."""
        if self.kind == "pixels":
            return (f"pixels of the {self.width}x{self.height} screenshot: x from 0 (left) to {self.max_x} "
                    f"(right), y from 0 (top) to {self.max_y} (bottom)")
        return (f"relative coordinates from 0 to {self.max_x} on both axes, whatever the image size: "
                f"(0,0) is the top-left corner, ({self.max_x},{self.max_y}) the bottom-right")


def _convert(value: object, axis: str, top: int, units: int, target_units: int, target_top: int) -> int:
    """``value`` on a 0..top axis of ``units`` -> the same place on an axis of ``target_units``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
        raise OffScreen(f"{axis}={value!r:.40} is not a number")
    if not 0 <= value <= top:
        raise OffScreen(f"{axis}={value:g} is off the screen: valid {axis} is 0..{top}")
    # Proportional mapping of the continuous coordinate; clamp the rounding overshoot only.
    return min(round(value * target_units / units), target_top)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond any float (JSON's integers are unbounded): no coordinate
        return False


def pixels(width: int, height: int) -> Space:
    """Pixels of a width x height screenshot of the whole display (OpenAI, generic chat models)."""
    if width < 1 or height < 1:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    return Space("pixels", width, height, width - 1, height - 1)


def relative(scale: int = 1000) -> Space:
    """A 0..scale grid over the display, both ends included (UI-TARS 1.0, Qwen3-VL)."""
    return Space("relative", scale, scale, scale, scale)


def gemini() -> Space:
    """Gemini's 0..999 grid: a point is denormalised as x / 1000 * width."""
    return Space("relative", 1000, 1000, 999, 999)


def anthropic_size(width: int = SCREEN_WIDTH, height: int = SCREEN_HEIGHT, *,
                   max_pixels: int = ANTHROPIC_MAX_PIXELS, max_edge: int = ANTHROPIC_MAX_EDGE) -> tuple[int, int]:
    """The largest aspect-keeping size the Anthropic API will not downsize again: 1920x1080 -> 1429x804."""
    factor = min(1.0, max_edge / max(width, height), math.sqrt(max_pixels / (width * height)))
    # Floor so that no limit is crossed by rounding up; the epsilon absorbs float error such as
    # 3000 * (1568 / 3000) == 1567.9999...
    return max(1, math.floor(width * factor + 1e-9)), max(1, math.floor(height * factor + 1e-9))


def anthropic(width: int = SCREEN_WIDTH, height: int = SCREEN_HEIGHT) -> Space:
    return pixels(*anthropic_size(width, height))


def smart_resize(height: int, width: int, factor: int = QWEN_FACTOR, min_pixels: int = QWEN_MIN_PIXELS,
                 max_pixels: int = QWEN_MAX_PIXELS) -> tuple[int, int]:
    """Qwen2-VL/2.5-VL's image resize, as (height, width) like Qwen's own function.

    Each side goes to the nearest multiple of ``factor`` (the vision patch size times the merge
    size); if the area then leaves [min_pixels, max_pixels], both sides are rescaled by the same
    ratio and rounded towards the inside of the bounds. 1080x1920 -> 1092x1932.
    """
    if height < 1 or width < 1:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"aspect ratio of {width}x{height} is beyond Qwen's limit of 200")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def smart_resized(width: int = SCREEN_WIDTH, height: int = SCREEN_HEIGHT, *, min_pixels: int = QWEN_MIN_PIXELS,
                  max_pixels: int = QWEN_MAX_PIXELS) -> Space:
    """Pixels of a width x height screenshot after Qwen's smart resize (UI-TARS 1.5, Qwen2.5-VL).

    The server resizes whatever it is sent; the bounds must match the server's processor config.
    """
    h, w = smart_resize(height, width, min_pixels=min_pixels, max_pixels=max_pixels)
    return pixels(w, h)
