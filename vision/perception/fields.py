"""Finding the input field next to a label (``field_point``).

Fields (``field_point``): OCR sees no empty input box, so "type ... into <label>" finds the label and
then looks at the pixels for the nearest box-like region (a vertical border with a horizontal edge
at its end) to the right of the label on its middle row, else below it on its middle column, and
clicks inside it. Without a detected box it falls back to a fixed offset: right of the label by
twice its height, or below it. See ``field_point`` for the limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from vision.perception.grounding import GroundingError
from vision.perception.ocr import Box, Line

# ---------------------------------------------------------------------------------------------
# Finding the input field next to a label


@dataclass(frozen=True)
class FieldPoint:
    x: int
    y: int
    how: Literal["box-right", "box-below", "offset-right", "offset-below"]


_DIFF = 48  # a pixel "differs" from another when a channel differs by more than this


def _differs(a: np.ndarray, b: np.ndarray) -> bool:
    return int(np.max(np.abs(a.astype(np.int16) - b.astype(np.int16)))) > _DIFF


def _run(image: np.ndarray, x: int, y: int, ref: np.ndarray, dx: int, dy: int, limit: int) -> int:
    """How many pixels from (x, y) in direction (dx, dy), this one included, differ from ``ref``."""
    h, w = image.shape[:2]
    n = 0
    while 0 <= x < w and 0 <= y < h and n < limit and _differs(image[y, x], ref):
        n += 1
        x += dx
        y += dy
    return n


def _edge_leaves(image: np.ndarray, bg: np.ndarray, start: int, across: Iterable[int], dx: int, dy: int) -> int:
    """The longest edge that leaves a border at one of its ends: scanning right (dx) from column
    ``start`` on each row in ``across``, or down (dy) from row ``start`` on each column. The rows
    (columns) just beyond the ends count too: a rounded corner leaves its corner pixel out."""
    h, w = image.shape[:2]
    best = 0
    for a in across:
        if dx and 0 <= a < h:
            best = max(best, _run(image, start + 1, a, bg, 1, 0, 12))
        if dy and 0 <= a < w:
            best = max(best, _run(image, a, start + 1, bg, 0, 1, 12))
    return best


def _own(line: Line, label: Box) -> bool:
    """Is this line (part of) the label itself?"""
    return label.contains(line.box.cx, line.box.cy) or line.box.contains(label.cx, label.cy)


def _first_obstacle(lines: Sequence[Line], label: Box, axis: Literal["x", "y"], at: int) -> float | None:
    """The nearest start of other text that blocks a scan right (``axis`` x, on row ``at``) or
    down (``axis`` y, on column ``at``) from the label."""
    hits = []
    for line in lines:
        b = line.box
        if _own(line, label):
            continue
        if axis == "x" and b.x0 > label.x1 - 2 and b.y0 <= at <= b.y1:
            hits.append(b.x0)
        if axis == "y" and b.y0 > label.y1 - 2 and b.x0 <= at <= b.x1:
            hits.append(b.y0)
    return min(hits) if hits else None


def _skip_border(image: np.ndarray, x: int, y: int, dx: int, dy: int) -> tuple[int, int]:
    """From a border pixel, step past the border (and a 2 px anti-aliasing fringe) into the box."""
    h, w = image.shape[:2]
    border = image[y, x].copy()
    while 0 <= x + dx < w and 0 <= y + dy < h and not _differs(image[y, x], border):
        x, y = x + dx, y + dy
    return min(w - 1, x + 2 * dx), min(h - 1, y + 2 * dy)


def _box_right(image: np.ndarray, lines: Sequence[Line], label: Box) -> tuple[int, int] | None:
    """Scan right along the label's middle row for a box's left border; the point inside the box."""
    h, w = image.shape[:2]
    y = min(h - 1, max(0, round(label.cy)))
    start = min(w - 1, int(label.x1) + 1)
    stop = _first_obstacle(lines, label, "x", y)
    end = int(min(w, label.x1 + max(600.0, 15 * label.height), stop if stop is not None else w))
    bg = image[y, start].copy()
    need = max(10, round(0.5 * label.height))
    for x in range(start, end):
        if not _differs(image[y, x], bg):
            continue
        up, down = _run(image, x, y, bg, 0, -1, 400), _run(image, x, y, bg, 0, 1, 400)
        top, bottom = y - up + 1, y + down - 1
        tall = up + down - 1
        # A border: tall enough, with a horizontal edge leaving it rightwards at its top or bottom
        # (a glyph or a lone vertical rule has none).
        if tall < need or _edge_leaves(image, bg, x, (top - 1, top, bottom, bottom + 1), 1, 0) < 10:
            continue
        inner, _ = _skip_border(image, x, y, 1, 0)
        fill = image[y, inner].copy()
        right = None
        for xr in range(inner + 1, w):
            if _differs(image[y, xr], fill):
                span = _run(image, xr, y, fill, 0, -1, 400) + _run(image, xr, y, fill, 0, 1, 400) - 1
                if span >= 0.8 * tall:  # the far border, not a glyph of text inside the box
                    right = xr
                    break
        return ((x + right) // 2 if right is not None else min(w - 1, x + 15)), (top + bottom) // 2
    return None


def _box_below(image: np.ndarray, lines: Sequence[Line], label: Box) -> tuple[int, int] | None:
    """Scan down the label's middle column for a box's top border; the point inside the box."""
    h, w = image.shape[:2]
    x = min(w - 1, max(0, round(label.cx)))
    start = min(h - 1, int(label.y1) + 1)
    stop = _first_obstacle(lines, label, "y", x)
    end = int(min(h, label.y1 + max(150.0, 4 * label.height), stop if stop is not None else h))
    bg = image[start, x].copy()
    need = max(24, round(1.5 * label.height))
    for y in range(start, end):
        if not _differs(image[y, x], bg):
            continue
        left, right = _run(image, x, y, bg, -1, 0, 4000), _run(image, x, y, bg, 1, 0, 4000)
        x0, x1 = x - left + 1, x + right - 1
        wide = left + right - 1
        # A top border: wide enough, with a vertical edge going down at its left or right end
        # (a horizontal rule or an underline has none).
        if wide < need or _edge_leaves(image, bg, y, (x0 - 1, x0, x1, x1 + 1), 0, 1) < 8:
            continue
        _, inner = _skip_border(image, x, y, 0, 1)
        fill = image[inner, x].copy()
        bottom = None
        for yb in range(inner + 1, min(h, inner + 300)):
            if _differs(image[yb, x], fill):
                span = _run(image, x, yb, fill, -1, 0, 4000) + _run(image, x, yb, fill, 1, 0, 4000) - 1
                if span >= 0.8 * wide:
                    bottom = yb
                    break
        return x, ((y + bottom) // 2 if bottom is not None else min(h - 1, y + 10))
    return None


def field_point(lines: Sequence[Line], label: Box, image: np.ndarray | None = None,
                size: tuple[int, int] = (1920, 1080)) -> FieldPoint:
    """Where to click to focus the input field named by the label at ``label``.

    With the screenshot (``image``, H x W x 3): the nearest box-like region -- a border at least
    half the label's height with a horizontal edge leaving it -- scanning right along the label's
    middle row (up to 600 px, stopping at other text), else scanning down its middle column (up to
    150 px or four label heights). The point is the middle of the box when its far border is
    found, else just inside its near border. Without an image, or when no box is seen: the
    label's right edge plus twice its height (at least 40 px) on the same row, or, when that lands
    on other text or off the screen, one label height below its bottom edge.

    Limits: a button or any other bordered thing next to the label looks like a field too; a
    borderless field (only an underline, or a shade barely different from the page) is not seen
    and gets the offset guess; a field to the label's left or far from it is not found; a
    placeholder inside the field works as a label (the scan finds the field's right border).
    """
    if image is not None:
        found = _box_right(image, lines, label)
        if found:
            return FieldPoint(*found, "box-right")
        found = _box_below(image, lines, label)
        if found:
            return FieldPoint(*found, "box-below")
    width, height = (image.shape[1], image.shape[0]) if image is not None else size
    others = [line.box for line in lines if not _own(line, label)]
    x, y = round(label.x1 + max(40.0, 2 * label.height)), round(label.cy)
    if x < width and not any(b.y0 <= y <= b.y1 and label.x1 < b.x1 and b.x0 <= x for b in others):
        return FieldPoint(x, y, "offset-right")
    x, y = round(label.cx), round(label.y1 + label.height)
    if y < height and not any(b.contains(x, y) for b in others):
        return FieldPoint(x, y, "offset-below")
    raise GroundingError("found the label but no room for a field to its right or below it")
