"""Finding the input field next to a label (``field_point``).

Fields: OCR sees no empty input box, so "type ... into <label>" finds the label, then the field:

- in a page with the browser in front (``field_by_page``), by asking the page which element is
  under points near the label, in a fixed order (the label's own middle, then rightwards along its
  row, then down its left edge and its middle): the first editable element (a text field, a text
  area, a text role) is the field, clicked in its middle; a form, a label, a button is never taken
  for one, and when no editable element is near the label the step fails rather than guess;
- elsewhere (a native window), by the pixels (``field_point``): the nearest box-like region (a
  vertical border with a horizontal edge at its end) to the right of the label on its middle row,
  else below it on its middle column, clicked inside. Without a detected box it falls back to a
  fixed offset: right of the label by twice its height, or below it. See ``field_point`` for the
  limits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from desktop.models import ElementAt
from vision.perception.grounding import GroundingError
from vision.perception.ocr import Box, Line

# ---------------------------------------------------------------------------------------------
# Finding the input field next to a label


ProbedHow = Literal["field-at", "field-right", "field-below"]  # where the page was asked about


@dataclass(frozen=True)
class FieldPoint:
    x: int
    y: int
    how: Literal["box-right", "box-below", "offset-right", "offset-below"] | ProbedHow


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


# ---------------------------------------------------------------------------------------------
# Finding it by asking the page (the browser in front)

PROBE_STEP_X, PROBE_STEP_Y = 12, 6  # px between the points asked about, along a row and down a column
MAX_PROBES = 80  # what one field may cost: each point is one question to the browser (a few ms)
TEXT_ROLES = ("textbox", "searchbox", "combobox", "spinbutton")
NOT_TEXT_INPUT_ROLES = ("checkbox", "radio", "button", "slider", "switch")


def probe_points(lines: Sequence[Line], label: Box, size: tuple[int, int] = (1920, 1080)
                 ) -> list[tuple[int, int, ProbedHow]]:
    """The points to ask the page about for the field of ``label``, in order (pure, so the same
    screen gives the same choice): its own middle (a placeholder or a floating label is inside its
    field), then rightwards along its middle row (a label to the left of its field, or wrapping
    it) up to other text or 600 px, then down its left edge and its middle column (a label above
    its field, a grid's row of labels) up to other text or 150 px."""
    width, height = size
    points: list[tuple[int, int, ProbedHow]] = [(round(label.cx), round(label.cy), "field-at")]
    y = round(label.cy)
    stop = _first_obstacle(lines, label, "x", y)
    end = min(width - 1, label.x1 + max(600.0, 15 * label.height), (stop - 1) if stop is not None else width)
    points += [(x, y, "field-right") for x in range(int(label.x1) + PROBE_STEP_X // 2, int(end) + 1, PROBE_STEP_X)]
    for column in (round(label.x0 + min(10.0, label.width / 2)), round(label.cx)):
        stop = _first_obstacle(lines, label, "y", column)
        end = min(height - 1, label.y1 + max(150.0, 4 * label.height), (stop - 1) if stop is not None else height)
        points += [(column, y, "field-below") for y in range(int(label.y1) + PROBE_STEP_Y // 2, int(end) + 1,
                                                               PROBE_STEP_Y)]
    seen: set[tuple[int, int]] = set()
    unique = []
    for point in points:
        if (point[0], point[1]) not in seen:
            seen.add((point[0], point[1]))
            unique.append(point)
    return unique[:MAX_PROBES]


def editable(element: ElementAt) -> bool:
    """Whether a desktop.models.ElementAt takes typed text (pure): a text field, a text area, an
    element with a text role; not a form, a label, a button, a check box."""
    if element.role in TEXT_ROLES or element.tag == "textarea":
        return True
    return element.tag == "input" and element.role not in NOT_TEXT_INPUT_ROLES


def field_by_page(lines: Sequence[Line], label: Box, element_at: Callable[[int, int], ElementAt | None],
                  size: tuple[int, int] = (1920, 1080), label_text: str = "") -> FieldPoint | None:
    """The field of ``label`` as the page reports it (``element_at``: display pixel -> the
    desktop.models.ElementAt there, None when the browser cannot say): the middle of the first
    editable element met at ``probe_points``. None when the page cannot say (not in front: the
    caller looks at the pixels instead); GroundingError when it can and no editable element is
    near the label (a guess would type into nothing, or into the wrong field)."""
    width, height = size
    met: list[str] = []
    for x, y, how in probe_points(lines, label, size):
        element = element_at(x, y)
        if element is None:
            if not met:
                return None  # not a page, or it cannot say: not known, so not refused
            continue
        if editable(element):
            box = element.box
            cx = min(width - 1, max(0, round(box["x"] + box["width"] / 2)))
            cy = min(height - 1, max(0, round(box["y"] + box["height"] / 2)))
            return FieldPoint(cx, cy, how)
        described = f"<{element.tag}>" + (f" {element.name!r}" if element.name else "")
        if described not in met:
            met.append(described)
    raise GroundingError(f"found the label {label_text!r} but no editable field next to it (the page has "
                         f"{', '.join(met[:4]) or 'nothing'} there)")
