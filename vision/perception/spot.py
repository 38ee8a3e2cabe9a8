"""What is at a pointer action's pixel when no DOM element names it (a native window, the browser not
in front, a ``<canvas>``): the text OCR reads there and a small template image centred on the pixel.

A replay re-finds such a target by them (vision.qa.flow): the text by OCR, then the image by
template matching, each anywhere on the screen. Read from the screen *before* the action (what the
actor saw), from a region around the pixel only, and only the text the template shows recognised:
a fraction of a second, not a whole screen's OCR.

Secrets: the text is redacted by the trace writer like every string; the image cannot be, so it is
left out when the text read around the pixel shows a secret's value (a field typed into in clear).
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Iterable

import numpy as np
from PIL import Image

# The template: wide enough to hold a button's label or an icon with its edge, small enough to be
# one place on a screen and to travel inline in a suite (a few KB of PNG).
TEMPLATE_W, TEMPLATE_H = 96, 48
# The region read by OCR: a line of text through the pixel, with room on both sides so a word is
# not cut (a label is read whole, not the half of it the template holds).
READ_W, READ_H = 480, 64
# A line counts as the pixel's text when the pixel is inside its box grown by this (a click just
# beside a word still names it).
NEAR_PX = 12
# A reading of fewer letters or digits names nothing: OCR reads a round icon as "0", and one
# character is found in too many places to re-find a target by (the template is kept for those).
MIN_CHARS = 2


def _region(x: int, y: int, w: int, h: int, width: int, height: int, centred: bool) -> tuple[int, int, int, int]:
    """[x0, y0, x1, y1) of a w x h region around (x, y) inside the screen (pure). ``centred``: shrunk
    evenly at an edge, so the pixel stays at its centre (a template's centre is the point to act on)."""
    half_w, half_h = w // 2, h // 2
    if centred:
        half_w = min(half_w, x, width - 1 - x)
        half_h = min(half_h, y, height - 1 - y)
        return x - half_w, y - half_h, x + half_w + 1, y + half_h + 1
    x0, y0 = max(0, min(x - half_w, width - w)), max(0, min(y - half_h, height - h))
    return x0, y0, min(width, x0 + w), min(height, y0 + h)


def _png(rgb: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, "PNG", optimize=True)
    return out.getvalue()


def template_at(rgb: np.ndarray, x: int, y: int) -> bytes | None:
    """A PNG of the screen around (x, y), centred on it; None where it would match anywhere (one flat
    colour) or is too small to mean anything (the pixel at the screen's very edge) (pure)."""
    height, width = rgb.shape[:2]
    x0, y0, x1, y1 = _region(x, y, TEMPLATE_W, TEMPLATE_H, width, height, centred=True)
    crop = rgb[y0:y1, x0:x1]
    if crop.shape[0] < 9 or crop.shape[1] < 9 or (crop == crop[0, 0]).all():
        return None
    return _png(np.ascontiguousarray(crop))


def text_at(lines, x: int, y: int, origin: tuple[int, int]) -> tuple[str, list[int]] | None:
    """The OCR line at (x, y) (display px) among ``lines`` read from a region whose top-left is
    ``origin``: the one whose box, grown by NEAR_PX, holds the pixel, the nearest first; its text
    and its box on the display (pure)."""
    best = None
    for line in lines:
        box = line.box
        x0, y0, x1, y1 = box.x0 + origin[0], box.y0 + origin[1], box.x1 + origin[0], box.y1 + origin[1]
        if x0 - NEAR_PX <= x <= x1 + NEAR_PX and y0 - NEAR_PX <= y <= y1 + NEAR_PX \
                and len(re.findall(r"\w", line.text)) >= MIN_CHARS:
            distance = abs((x0 + x1) / 2 - x) + abs((y0 + y1) / 2 - y)
            if best is None or distance < best[0]:
                best = (distance, " ".join(line.text.split()), [int(x0), int(y0), round(x1), round(y1)])
    return (best[1], best[2]) if best else None


def spot_at(rgb: np.ndarray, x: int, y: int, secrets: Iterable[str] = (), reader=None) -> dict | None:
    """What is at (x, y) on a screen (an H x W x 3 RGB array): ``{"text", "text_box", "image"}``,
    each present when found (the image as base64 PNG); None when neither is. ``reader``: the OCR of
    a small BGR image, recognising only the text that reaches into a given Rect of it (default: the
    process's engine, vision.perception.ocr)."""
    height, width = rgb.shape[:2]
    if not (0 <= x < width and 0 <= y < height):
        return None
    if reader is None:
        from vision.perception.ocr import shared_engine

        reader = shared_engine().read_region
    x0, y0, x1, y1 = _region(x, y, READ_W, READ_H, width, height, centred=False)
    # Only the text the template shows (and the line at the pixel, which reaches into it) is
    # recognised: what names the point, and what the secret check must see.
    tx0, ty0, tx1, ty1 = _region(x, y, TEMPLATE_W, TEMPLATE_H, width, height, centred=True)
    from vision.perception.ocr import Rect

    keep = Rect(tx0 - x0 - NEAR_PX, ty0 - y0 - NEAR_PX, tx1 - x0 + NEAR_PX, ty1 - y0 + NEAR_PX)
    lines = reader(np.ascontiguousarray(rgb[y0:y1, x0:x1, ::-1]), keep)
    out: dict = {}
    found = text_at(lines, x, y, (x0, y0))
    if found is not None:
        out["text"], out["text_box"] = found
    shown = " ".join(line.text for line in lines)
    if not any(secret and secret in shown for secret in secrets):  # a secret in clear: no picture of it
        image = template_at(rgb, x, y)
        if image is not None:
            out["image"] = base64.b64encode(image).decode()
    return out or None


def frame_rgb(frame) -> np.ndarray:
    """A desktop.frame.Frame as an H x W x 3 RGB array (no copy of the PNG)."""
    bgra = np.frombuffer(frame.bgra, np.uint8).reshape(frame.height, frame.width, 4)
    return np.ascontiguousarray(bgra[:, :, 2::-1])
