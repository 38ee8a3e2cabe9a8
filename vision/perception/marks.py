"""Set-of-marks for a model (pure): the numbered controls of the screen (desktop.marks) written as the
text that comes with the marked screenshot, each one's centre in the model's own coordinates, so a
model that grounds by mark points where the control is without converting anything itself."""

from __future__ import annotations

from desktop.models import Marks
from vision.coords import SCREEN_HEIGHT, SCREEN_WIDTH, Space

INTRO = ("Set-of-marks: the controls a person can act on are outlined and numbered on the screenshot. "
         "To act on one, point at its centre, listed here with it")


def marks_note(marks: Marks, space: Space | None) -> str:
    """One line a mark: ``[3] push button "7" (galculator): centre (412, 230)``, the centre in
    ``space`` (the model's coordinates; display pixels when None)."""
    unit = "in display pixels" if space is None else (
        f"in your coordinates ({space.width}x{space.height} "
        + ("pixels of the screenshot)" if space.kind == "pixels" else "grid)"))
    lines = [f"{INTRO} ({unit}):"]
    for m in marks.marks:
        x, y, width, height = m.box
        # a control partly off the screen: its middle's nearest pixel on it
        cx, cy = min(max(x + width // 2, 0), SCREEN_WIDTH - 1), min(max(y + height // 2, 0), SCREEN_HEIGHT - 1)
        if space is not None:
            cx, cy = space.from_display(cx, cy)
        words = f"[{m.mark}] {m.role or 'element'}" + (f' "{m.name}"' if m.name else "")
        where = f" ({m.application})" if m.application else " (page)" if m.source == "page" else ""
        lines.append(f"{words}{where}: centre ({cx}, {cy})")
    if not marks.marks:
        lines.append("(no control to mark on this screen)")
    if marks.truncated:
        lines.append("(more controls than are marked: not every one is numbered)")
    if marks.error:
        lines.append(f"(not everything could be read: {marks.error})")
    return "\n".join(lines)
