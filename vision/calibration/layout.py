"""Where the calibration targets go, and how the errors add up. Pure."""

from __future__ import annotations

import math

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH

# A target's centre stays this far from the display's edges: its whole circle (radius 22, see
# desktop.browser.targets) is on the screen, and the corners, where a scaling error is largest,
# are still measured.
MARGIN = 30


def _spread(count: int, low: int, high: int) -> list[int]:
    """``count`` whole pixels from ``low`` to ``high``, evenly spaced; one alone sits in the middle."""
    if count == 1:
        return [(low + high) // 2]
    return [round(low + (high - low) * i / (count - 1)) for i in range(count)]


def layout(count: int, width: int = SCREEN_WIDTH, height: int = SCREEN_HEIGHT,
           margin: int = MARGIN) -> list[tuple[int, int]]:
    """``count`` display points spread over the whole screen, row by row from the top left: rows
    and columns in the display's proportions, the last row spread over the full width too, so the
    four corners are targets as soon as there are four rows' worth."""
    if count < 1:
        raise ValueError("count: at least one target")
    rows = max(1, min(count, round(math.sqrt(count * height / width))))
    cols = math.ceil(count / rows)
    ys = _spread(rows, margin, height - 1 - margin)
    points: list[tuple[int, int]] = []
    for r, y in enumerate(ys):
        in_row = min(cols, count - len(points)) if r < rows - 1 else count - len(points)
        points += [(x, y) for x in _spread(in_row, margin, width - 1 - margin)]
    return points


def distance(dx: int, dy: int) -> float:
    return round(math.hypot(dx, dy), 2)


def summary(errors: list[tuple[int, int]]) -> dict:
    """Mean and worst distance, and the mean offset on each axis (a model that is always off the
    same way shows it there), over the targets that were clicked."""
    if not errors:
        return {"mean_error_px": None, "worst_error_px": None, "mean_dx": None, "mean_dy": None}
    distances = [distance(dx, dy) for dx, dy in errors]
    return {"mean_error_px": round(sum(distances) / len(distances), 2), "worst_error_px": max(distances),
            "mean_dx": round(sum(dx for dx, _ in errors) / len(errors), 2),
            "mean_dy": round(sum(dy for _, dy in errors) / len(errors), 2)}
