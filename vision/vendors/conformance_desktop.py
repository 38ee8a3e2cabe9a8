"""The conformance matrix measured on the real desktop (docs/conformance-desktop.md).

vision/vendors/conformance.py measures each contract's conversions, purely: where each pointer action the
model writes is meant to land, in display pixels. This runs the same actions to the end: each
contract's writer says what the model sends at the model coordinates of a display point, the
contract's converter or parser turns it into display Actions, the session's real executor
(xdotool on the real X display) performs them on the calibration page (desktop.browser.targets:
full screen, recording every press, release, move and wheel with the browser's own screenX/Y), and
the cell is the worst distance, in display pixels on either axis, between where the page saw the
input and the pixel meant, over ``POINTS`` (the corners and edges included). The button, and the
number of presses of a double or triple click, must be right too, or the cell says what was wrong.

``zoom`` is not an input (a crop of the screenshot) and has no cell here.

    python -m vision.vendors.conformance_desktop > docs/conformance-desktop.md   # needs X (starts a desktop)

``tests/integration/test_conformance_desktop.py`` measures on the test desktop and fails when the
file differs from what it measured; ``tests/unit/test_conformance.py`` (no X) fails when it does not
cover exactly the contracts and pointer actions of vision/vendors/conformance.py. docs/conformance.md's
"on the real desktop" column is read from this file (vision.vendors.conformance.desktop_worst).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from vision.vendors import conformance

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance-desktop.md"
# Display points every pointer action is measured at: the four corners, the centre, and points
# whose model coordinates round differently on each axis in scaled spaces.
# The top edge is measured TOP rows down: in full screen, a pointer on the top four rows of the
# display makes Chromium reveal its exit button, which takes the input (and a click on it leaves
# full screen), so no page can see input there.
TOP = 5
POINTS: tuple[tuple[int, int], ...] = (
    (0, TOP), (SCREEN_WIDTH - 1, TOP), (0, SCREEN_HEIGHT - 1), (SCREEN_WIDTH - 1, SCREEN_HEIGHT - 1),
    (960, 540), (97, 61), (1333, 777), (1777, 123), (421, 1003),
)
NOT_INPUT = ("zoom",)  # a crop of the screenshot: nothing reaches the desktop
EVENT_WAIT_S = 2.0
QUIET_S = 0.1

# row -> (which events it leaves: their kinds in order, the button) -- the page's view of the input.
BUTTONS = {"left": 0, "middle": 1, "right": 2}
EXPECTED: dict[str, tuple[tuple[str, ...], int | None]] = {
    "click": (("down", "up"), 0),
    "right click": (("down", "up"), 2),
    "middle click": (("down", "up"), 1),
    "double click": (("down", "up") * 2, 0),
    "triple click": (("down", "up") * 3, 0),
    "move": (("move",), None),
    "drag": (("down", "up"), 0),
    "mouse down": (("down",), 0),
    "mouse up": (("up",), 0),
    "scroll": (("wheel",), None),
}


@dataclass(frozen=True)
class Cell:
    supported: bool
    error_px: int | None = None
    inputs: int = 0  # the actions the cell rests on (one identical to another's at the same point: performed once)
    why: str = ""


def _landed(row: str, events: list[dict]) -> list[tuple[int, int]] | str:
    """Where the page saw the row's input, in the order of the points meant; or what was wrong."""
    kinds, button = EXPECTED[row]
    seen = [e for e in events if e["kind"] in set(kinds)]
    if row == "move":
        seen = seen[-1:]
    elif row == "scroll":
        seen = seen[:1]
    if [e["kind"] for e in seen] != list(kinds):
        return f"the page saw {[e['kind'] for e in seen]}, not {list(kinds)}"
    if button is not None and any(e["button"] != button for e in seen):
        return f"button {[e['button'] for e in seen]}, not {button}"
    if row == "drag":
        return [(seen[0]["x"], seen[0]["y"]), (seen[-1]["x"], seen[-1]["y"])]
    if row == "mouse up":
        return [(seen[0]["x"], seen[0]["y"])]
    return [(e["x"], e["y"]) for e in seen if e["kind"] in ("down", "move", "wheel")][:1]


class Log:
    """The page's events, read from where the last read ended (the log only grows)."""

    def __init__(self, events: Callable[[int], list[dict]]):
        self.events = events
        self.cursor = len(events(0))

    def settled(self, done: Callable[[list[dict]], bool], quiet: bool = False) -> list[dict]:
        """The events since the last call once ``done`` says they are all there (and, ``quiet``, no
        more have come for QUIET_S: a scroll of three notches is three wheels), or whatever came
        within EVENT_WAIT_S. The browser delivers input on its own time, after the X input."""
        deadline = time.monotonic() + EVENT_WAIT_S
        seen = self.events(self.cursor)
        while time.monotonic() < deadline:
            if done(seen):
                if not quiet:
                    break
                time.sleep(QUIET_S)
                again = self.events(self.cursor)
                if len(again) == len(seen):
                    break
                seen = again
                continue
            time.sleep(0.01)
            seen = self.events(self.cursor)
        self.cursor += len(seen)
        return seen


def points_for(contract: conformance.Contract, row: conformance.Row) -> list[tuple[int, int]]:
    """The POINTS a contract can name for a row (pure): all of them, but for a contract that reaches
    only part of the display (the browser toolset: its viewport) those there, the second point of a
    drag (the opposite one) included."""
    def named(x: int, y: int) -> bool:
        other = (SCREEN_WIDTH - 1 - x, SCREEN_HEIGHT - 1 - y)
        return contract.reach is None or all(contract.reach(*p) for p in [(x, y), other][:row.arity])
    return [p for p in POINTS if named(*p)]


# What the page saw of an input already performed: (row, display point, the converted actions) ->
# where it landed, or what was wrong. Most contracts convert a click at the centre to the same
# Click(960, 540): its landing is the executor's, whichever contract sent it.
Seen = dict[tuple[str, int, int, tuple[str, ...]], list[tuple[int, int]] | str]


def measure(contract: conformance.Contract, row: conformance.Row, perform: Callable[[Any], None], log: Log,
            seen: Seen | None = None) -> Cell:
    """One cell: the row's action written by the contract at each point, performed (or, when
    ``seen`` has the same actions at that point, read from it), and read back."""
    writer = contract.writers.get(row.name)
    if writer is None:
        return Cell(False)
    seen = {} if seen is None else seen
    worst, inputs = 0, 0
    for x, y in points_for(contract, row):
        other = (SCREEN_WIDTH - 1 - x, SCREEN_HEIGHT - 1 - y)
        actions = contract.read(writer(contract.space.from_display(x, y), contract.space.from_display(*other)))
        key = (row.name, x, y, tuple(action.model_dump_json() for action in actions))
        if key not in seen:
            seen[key] = _perform(row, (x, y), actions, perform, log)
        landed = seen[key]
        inputs += len(actions)
        if isinstance(landed, str):
            return Cell(True, None, inputs, f"at ({x}, {y}): {landed}")
        meant = [(x, y), other][:len(landed)]
        worst = max(worst, *(max(abs(lx - mx), abs(ly - my)) for (lx, ly), (mx, my) in zip(landed, meant)))
    return Cell(True, worst, inputs)


def _perform(row: conformance.Row, at: tuple[int, int], actions: list, perform: Callable[[Any], None],
             log: Log) -> list[tuple[int, int]] | str:
    """Perform a row's converted actions meant for display point ``at``: where the page saw them."""
    from desktop.actions import MouseDown, MouseUp

    if row.name == "mouse up":  # a release needs a press before it; where the press was is not measured
        perform(MouseDown(x=at[0], y=at[1]))
        log.settled(lambda seen: any(e["kind"] == "down" for e in seen))
    for action in actions:
        perform(action)
    # A scroll of three notches is three wheels; a move's last position is the one that counts.
    landed = log.settled(lambda seen: not isinstance(_landed(row.name, seen), str),
                         quiet=row.name in ("scroll", "move"))
    if row.name == "mouse down":  # let go, and wait for the page to see it, before the next point
        perform(MouseUp())
        log.settled(lambda seen: any(e["kind"] == "up" for e in seen))
    return _landed(row.name, landed)


def measure_all(session: Any, pages: Any) -> dict[str, dict[str, Cell]]:
    """Every contract's pointer actions on ``session``'s real desktop (a local Session: its executor
    runs them); ``pages`` is the session's page service (shows the page, reads its events). The page
    is shown full screen and closed after."""
    from vision.calibration.service import until_bubble_gone

    pages.show_targets(session.id, [])
    executor = session.executor
    glide, executor.glide_ms = executor.glide_ms, 0
    try:
        until_bubble_gone(pages, session)

        def perform(action: Any) -> None:
            # The session's own executor (the xdotool argv every action runs as), under the
            # session's action lock, without the settle's capture: the page's events are the answer.
            with session.exclusive("the conformance measurement"):
                executor.run(action)

        log = Log(lambda since: pages.target_events(session.id, since))
        seen: Seen = {}
        return {c.name: {r.name: measure(c, r, perform, log, seen)
                         for r in conformance.ROWS if r.pointer and r.name not in NOT_INPUT}
                for c in conformance.contracts()}
    finally:
        executor.glide_ms = glide
        pages.hide_targets(session.id)


def problems(measured: dict[str, dict[str, Cell]]) -> list[str]:
    return [f"{contract} / {row}: {cell.why}" for contract, cells in measured.items()
            for row, cell in cells.items() if cell.why]


# ---------------------------------------------------------------------------------------------
# Rendering


def _cell(cell: Cell) -> str:
    if not cell.supported:
        return "—"
    return f"{cell.error_px} px" if cell.error_px is not None else f"failed: {cell.why}"


def render(measured: dict[str, dict[str, Cell]]) -> str:
    rows = [r.name for r in conformance.ROWS if r.pointer and r.name not in NOT_INPUT]
    inputs = sum(c.inputs for cells in measured.values() for c in cells.values())
    lines = [
        "# Conformance matrix: measured on the real desktop",
        "",
        "<!-- Generated by `python -m vision.vendors.conformance_desktop > docs/conformance-desktop.md` (needs X); "
        "tests/integration/test_conformance_desktop.py fails when it is stale. Do not edit by hand. -->",
        "",
        "The pointer actions of [the conformance matrix](conformance.md), run to the end: each contract's",
        "action written as its model writes it, at the model's coordinates of a display point, through the",
        "converter or parser, performed by the session's executor (xdotool) on the real 1920x1080 X display,",
        "onto a full-screen page glassdesk shows (the calibration page) that records every press, release,",
        "move and wheel with the browser's own screen coordinates. A cell is the worst distance, in display",
        f"pixels on either axis, between where the page saw the input and the pixel meant, over {len(POINTS)} points",
        "(the four corners, the centre and four more); the button, and the number of presses of a double",
        "or triple click, were right at every point. `—`: the contract has no such action. `zoom` is a crop",
        f"of the screenshot, not an input: it has no cell here. {inputs} inputs in all; one that is the same,",
        "converted, as another contract's at the same point (most convert a click at the centre to the same",
        "click) is performed once, and where it landed stands for both.",
        "",
        f"The top edge is measured at y={TOP}: in full screen, a pointer on the display's top four rows makes",
        "Chromium reveal its exit button, which takes the input, so no page sees input there.",
        "",
        "A cell equal to the conversions' own (docs/conformance.md) says the executor adds nothing: the",
        "input lands on the pixel the converter meant. The pointer glide (the few steps the pointer takes",
        "towards a target so a person sees where it goes) is off while measuring: it ends where the",
        "action's own move starts, and only costs time.",
        "",
        "## Contracts",
        "",
        "| contract | worst on the real desktop |",
        "| --- | --- |",
    ]
    for contract, cells in measured.items():
        errors = [c.error_px for c in cells.values() if c.supported and c.error_px is not None]
        lines.append(f"| {contract} | {max(errors)} px |" if errors else f"| {contract} | — |")
    for family, title in (("vendor", "Vendor computer tools"), ("chat", "Chat dialects (`chat/<model>`)")):
        group = [c.name for c in conformance.contracts() if c.family == family and c.name in measured]
        lines += ["", f"## {title}", "",
                  "| action | " + " | ".join(group) + " |",
                  "| --- | " + " | ".join("---" for _ in group) + " |"]
        for row in rows:
            lines.append(f"| {row} | " + " | ".join(_cell(measured[c][row]) for c in group) + " |")
    lines += ["", "Click precision of a model itself (where it aims, not where glassdesk puts its click) is "
              "measured by [calibration](calibration.md).", ""]
    return "\n".join(lines)


def main() -> None:
    import tempfile

    from desktop.service.desktop import DesktopService
    from desktop.session.manager import SessionManager

    with tempfile.TemporaryDirectory(prefix="glassdesk-conformance-") as root:
        manager = SessionManager(root=Path(root), max_sessions=1)
        try:
            session = manager.create("conformance")
            measured = measure_all(session, DesktopService(manager).pages)
        finally:
            manager.close()
    wrong = problems(measured)
    if wrong:
        sys.exit("\n".join(["not as the contract says:", *wrong]))
    sys.stdout.write(render(measured))


if __name__ == "__main__":
    main()
