"""Set-of-marks (pure): the controls a person can act on, native (the desktop tree's interactive nodes)
and the page's (desktop.browser.hit's _MARKS), numbered in reading order, written as a list for a
model and drawn on the screenshot as numbered boxes."""

from __future__ import annotations

import io

from desktop.frame import Frame
from desktop.models import Mark, TreeWindow
from desktop.tree import only_interactive

COLOURS = ((230, 25, 75), (0, 130, 200), (60, 160, 60), (145, 30, 180), (245, 130, 48), (0, 128, 128))
ROW_PX = 12  # boxes whose tops are this close are one row: read left to right


def native_candidates(windows: list[TreeWindow], top_pid_at) -> list[dict]:
    """Each window's interactive nodes with a box whose middle shows that window's program on top
    (``top_pid_at(x, y)``: the process of the window on top there), so a covered control gets no mark."""
    found = []
    for window in windows:
        for node in only_interactive(window.nodes):
            if node.box is None or "showing" not in node.states:
                continue
            x, y, width, height = node.box
            if width < 2 or height < 2 or top_pid_at(x + width // 2, y + height // 2) != window.pid:
                continue
            found.append({"source": "native", "role": node.role, "name": node.name or None, "box": node.box,
                          "ref": node.ref, "application": window.application})
    return found


def numbered(candidates: list[dict], limit: int) -> tuple[list[Mark], bool]:
    """The candidates in reading order (rows top to bottom, each left to right), numbered from 1; at
    most ``limit`` (and whether there were more)."""
    ordered = sorted(candidates, key=lambda c: (c["box"][1] // ROW_PX, c["box"][0], c["box"][1]))
    return [Mark(mark=i, **c) for i, c in enumerate(ordered[:limit], 1)], len(ordered) > limit


def as_text(marks: list[Mark], truncated: bool = False) -> str:
    """One line a mark: ``[3] push button "Save" @100,200 80x24 (native n17 in mousepad)``."""
    lines = []
    for m in marks:
        x, y, width, height = m.box
        words = f"[{m.mark}] {m.role or 'element'}" + (f' "{m.name}"' if m.name else "")
        where = f"native {m.ref}" + (f" in {m.application}" if m.application else "") if m.source == "native" \
            else "page"
        lines.append(f"{words} @{x},{y} {width}x{height} ({where})")
    if truncated:
        lines.append("(more controls than the limit: not all are marked)")
    return "\n".join(lines) if lines else "no control to mark on the screen"


def draw(png: bytes, marks: list[Mark]) -> bytes:
    """The screenshot with each mark's box outlined and its number on a filled tag at the box's top
    left corner (inside the box when there is no room above it)."""
    from PIL import Image  # here: the list alone (the doors' text) needs no imaging

    with Image.open(io.BytesIO(png)) as opened:
        image = opened.convert("RGB")
    _draw_on(image, marks)
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1)
    return out.getvalue()


def drawn_frame(frame: Frame, marks: list[Mark]) -> Frame:
    """``frame`` with the marks drawn on it, as a frame of its own (what a model observing with
    set-of-marks is shown); ``frame`` itself is left as it was (the trace keeps the plain screen)."""
    image = frame.image.copy()
    _draw_on(image, marks)
    return Frame.of_image(image, taken_at=frame.taken_at)


def _draw_on(image, marks: list[Mark]) -> None:
    from PIL import ImageDraw, ImageFont

    pen = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=13)
    for m in marks:
        colour = COLOURS[m.mark % len(COLOURS)]
        x, y, width, height = m.box
        pen.rectangle([x, y, x + width - 1, y + height - 1], outline=colour, width=2)
        label = str(m.mark)
        left, upper, right, lower = pen.textbbox((0, 0), label, font=font)
        tag_w, tag_h = right - left + 6, lower - upper + 4
        tag_y = y - tag_h if y - tag_h >= 0 else y
        pen.rectangle([x, tag_y, x + tag_w, tag_y + tag_h], fill=colour)
        pen.text((x + 3 - left, tag_y + 2 - upper), label, fill=(255, 255, 255), font=font)
