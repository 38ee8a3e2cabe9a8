"""The conformance matrix (docs/conformance.md): which action each model contract can ask for, and how
close to the display pixel it meant each pointer action lands. Pure: every cell is measured by
running glassdesk's own converter or parser on what the vendor's model writes, nothing is declared.

For each contract and each action, a *writer* says what that model sends to ask for the action at
model coordinates (a tool_use input, an OpenAI action, a reply in a chat dialect). The matrix feeds
it to the converter the loop and the executors use, and checks the display Actions that come out:
the right kind (a right click is a Click with button right, a drag goes from the first point to the
second), and for pointer actions, where they land. A pointer action is written at the model
coordinates of every point of a grid over the 1920x1080 display (the model's view of that pixel,
rounded as a model writes it), and the worst distance, in display pixels on either axis, between
where it lands and the pixel meant is the cell's precision.

A new contract is a ``Contract`` added to ``contracts()``. A contract that reaches only part of the
display (Anthropic's browser toolset: the browser's viewport) is measured on the grid's points there.

    python -m vision.vendors.conformance > docs/conformance.md

``tests/unit/test_conformance.py`` fails when docs/conformance.md differs from what this renders.
Its "on the real desktop" column is read from docs/conformance-desktop.md (``desktop_worst``), which
vision.vendors.conformance_desktop writes by running the same pointer actions on the real X display.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from desktop.actions import (
    SCREEN_HEIGHT,
    SCREEN_WIDTH,
    Click,
    DoubleClick,
    Drag,
    HoldKey,
    Key,
    MouseDown,
    MouseUp,
    Move,
    Scroll,
    TripleClick,
    Type,
    Wait,
    Zoom,
)
from vision import coords
from vision.actions import CursorPosition, Done, Fail, Screenshot
from vision.converters import anthropic as anthropic_tool
from vision.converters import anthropic_browser as browser_tool
from vision.converters import gemini as gemini_tool
from vision.converters import openai as openai_tool
from vision.providers import chat

Point = tuple[float, float]
# (first point, second point) in model coordinates -> what the model sends
Writer = Callable[[Point, Point], Any]


class ModelSpace(Protocol):
    """A model's coordinates: a coords.Space, or the browser toolset's viewport placed on the display."""

    def from_display(self, x: int, y: int) -> tuple[float, float]: ...


@dataclass(frozen=True)
class Row:
    """One action of the matrix and how to recognise it among the display Actions."""

    name: str
    pointer: bool  # has a place on the screen, so a precision
    check: Callable[[list], bool]
    # the display points of the actions, in order, to compare with the points meant
    points: Callable[[list], list[tuple[int, int]]] = lambda actions: []
    # how many points it is written with (a drag: 2)
    arity: int = 1


def _only(cls: type, **attrs: Any) -> Callable[[list], bool]:
    def check(actions: list) -> bool:
        return len(actions) >= 1 and isinstance(actions[-1], cls) and \
            all(getattr(actions[-1], k) == v for k, v in attrs.items())
    return check


def _where(actions: list) -> list[tuple[int, int]]:
    out = []
    for action in actions:
        if isinstance(action, Drag):
            out += [(p.x, p.y) for p in (action.path[0], action.path[-1])]
        elif isinstance(action, Zoom):
            out.append((action.region.x0, action.region.y0))
        elif getattr(action, "x", None) is not None:
            out.append((action.x, action.y))
    return out


def _dragged(actions: list) -> bool:
    """A Drag, or the press, move and release of a drag from where the pointer was put."""
    if len(actions) == 1 and isinstance(actions[0], Drag):
        return True
    kinds = [type(a) for a in actions]
    return kinds[-3:] == [MouseDown, Move, MouseUp]


def _drag_points(actions: list) -> list[tuple[int, int]]:
    points = _where(actions)
    return [points[0], points[-1]] if points else []


def _typed(actions: list) -> list:
    """The actions after a click that places the caret first (Gemini's ``type_text_at`` types at a point)."""
    return actions[1:] if actions and isinstance(actions[0], Click) else actions


def _kinds(actions: list) -> tuple[type, ...]:
    return tuple(type(x) for x in _typed(actions))


def _chords(key: Key) -> list[str]:
    """A key's chords, spelled one way (xdotool takes ``control`` and ``ctrl``, ``Return`` and ``enter`` alike)."""
    return [chord.lower().replace("control", "ctrl") for chord in key.keys]


ROWS: tuple[Row, ...] = (
    Row("click", True, _only(Click, button="left"), _where),
    Row("right click", True, _only(Click, button="right"), _where),
    Row("middle click", True, _only(Click, button="middle"), _where),
    Row("double click", True, _only(DoubleClick), _where),
    Row("triple click", True, _only(TripleClick), _where),
    Row("move", True, _only(Move), _where),
    Row("drag", True, _dragged, _drag_points, arity=2),
    Row("mouse down", True, _only(MouseDown), _where),
    Row("mouse up", True, _only(MouseUp), _where),
    Row("scroll", True, _only(Scroll), _where),
    Row("zoom", True, _only(Zoom), _where),
    Row("type", False, lambda a: _kinds(a) == (Type,) and _typed(a)[0].text == "hello"),
    # Text ending in a newline: a Type of it (xdotool presses Return for the newline), or the text and Enter.
    Row("type and Enter", False, lambda a: (_kinds(a) == (Type,) and _typed(a)[0].text == "hello\n")
        or (_kinds(a) == (Type, Key) and _chords(_typed(a)[1]) in (["enter"], ["return"]))),
    Row("key chord", False, lambda a: len(a) == 1 and isinstance(a[0], Key) and _chords(a[0]) == ["ctrl+c"]),
    Row("hold key", False, _only(HoldKey)),
    Row("wait", False, _only(Wait)),
    Row("screenshot", False, _only(Screenshot)),
    Row("cursor position", False, _only(CursorPosition)),
    Row("done", False, _only(Done)),
    Row("fail", False, _only(Fail)),
)


@dataclass(frozen=True)
class Contract:
    """A model contract: its name, its coordinate space at 1920x1080, how it reads what the model
    sends (-> display Actions; raises ValueError when it cannot), and a writer per action."""

    name: str
    family: str  # the table it goes in
    space: ModelSpace
    space_note: str
    read: Callable[[Any], list]
    writers: dict[str, Writer] = field(default_factory=dict)
    # The display points the contract can name (None: all); the grid is measured where it can.
    reach: Callable[[int, int], bool] | None = None


# ---------------------------------------------------------------------------------------------
# Anthropic computer tool versions and toolset


def _anthropic(version: anthropic_tool.ToolVersion) -> Contract:
    space = coords.anthropic()

    def read(sent: tuple[str, dict]) -> list:
        action, args = sent
        if version.toolset:
            call = anthropic_tool.parse_tool_use("t", action, args, space, toolset_name=anthropic_tool.TOOLSET_NAME,
                                                 version=version)
        else:
            call = anthropic_tool.parse_tool_use("t", "computer", {"action": action, **args}, space, version=version)
        if call.error:
            raise ValueError(call.error)
        return call.actions

    def at(p: Point) -> list[int]:
        return [round(p[0]), round(p[1])]

    writers: dict[str, Writer] = {
        "click": lambda a, b: ("left_click", {"coordinate": at(a)}),
        "right click": lambda a, b: ("right_click", {"coordinate": at(a)}),
        "middle click": lambda a, b: ("middle_click", {"coordinate": at(a)}),
        "double click": lambda a, b: ("double_click", {"coordinate": at(a)}),
        "triple click": lambda a, b: ("triple_click", {"coordinate": at(a)}),
        "move": lambda a, b: ("mouse_move", {"coordinate": at(a)}),
        "drag": lambda a, b: ("left_click_drag", {"start_coordinate": at(a), "coordinate": at(b)}),
        "mouse down": lambda a, b: ("left_mouse_down", {"coordinate": at(a)}),
        "mouse up": lambda a, b: ("left_mouse_up", {"coordinate": at(a)}),
        "scroll": lambda a, b: ("scroll", {"coordinate": at(a), "scroll_direction": "down", "scroll_amount": 3}),
        "zoom": lambda a, b: ("zoom", {"region": [*at(a), round(a[0]) + 1, round(a[1]) + 1]}),
        "type": lambda a, b: ("type", {"text": "hello"}),
        "type and Enter": lambda a, b: ("type", {"text": "hello\n"}),
        "key chord": lambda a, b: ("key", {"text": "ctrl+c"}),
        "hold key": lambda a, b: ("hold_key", {"text": "shift", "duration": 1}),
        "wait": lambda a, b: ("wait", {"duration": 1}),
        "screenshot": lambda a, b: ("screenshot", {}),
        "cursor position": lambda a, b: ("cursor_position", {}),
    }
    if not version.zoom:
        del writers["zoom"]  # refused by the converter for this version, as the API would not offer it
    label = f"Anthropic `{version.type}`"
    return Contract(label, "vendor", space, f"pixels of the {space.width}x{space.height} screenshot", read, writers)


# ---------------------------------------------------------------------------------------------
# Anthropic browser toolset

# The maximised Chromium's viewport on this display: below its tab strip and toolbar, as measured
# on the real desktop (tests/conftest.py's viewport fixture: a click's screenY - clientY).
BROWSER_VIEWPORT = browser_tool.Viewport(x=0, y=87, width=SCREEN_WIDTH, height=SCREEN_HEIGHT - 87)


@dataclass(frozen=True)
class _ViewportSpace:
    """The toolset's coordinates: pixels of the viewport's screenshot, placed on the display."""

    view: browser_tool.Viewport

    def from_display(self, x: int, y: int) -> tuple[float, float]:
        width, height = self.view.shot_size
        return (x - self.view.x) * width / self.view.width, (y - self.view.y) * height / self.view.height


def _browser() -> Contract:
    view = BROWSER_VIEWPORT

    def read(sent: tuple[str, dict]) -> list:
        name, input = sent
        return browser_tool.to_display_actions(name, input, view)

    def at(p: Point) -> dict[str, Any]:
        return {"type": "coordinate", "x": round(p[0]), "y": round(p[1])}

    writers: dict[str, Writer] = {
        "click": lambda a, b: ("left_click", {"target": at(a)}),
        "right click": lambda a, b: ("right_click", {"target": at(a)}),
        "middle click": lambda a, b: ("middle_click", {"target": at(a)}),
        "double click": lambda a, b: ("double_click", {"target": at(a)}),
        "triple click": lambda a, b: ("triple_click", {"target": at(a)}),
        "move": lambda a, b: ("mouse_move", {"target": at(a)}),
        "drag": lambda a, b: ("left_click_drag", {"from": at(a), "target": at(b)}),
        "mouse down": lambda a, b: ("left_mouse_down", {"target": at(a)}),
        "mouse up": lambda a, b: ("left_mouse_up", {"target": at(a)}),
        "scroll": lambda a, b: ("scroll", {"target": at(a), "scroll_direction": "down", "scroll_amount": 3}),
        "zoom": lambda a, b: ("zoom", {"region": [round(a[0]), round(a[1]), round(a[0]) + 1, round(a[1]) + 1]}),
        "type": lambda a, b: ("type", {"text": "hello"}),
        "type and Enter": lambda a, b: ("type", {"text": "hello\n"}),
        "key chord": lambda a, b: ("key", {"text": "ctrl+c"}),
        "hold key": lambda a, b: ("hold_key", {"text": "shift", "duration": 1}),
        "wait": lambda a, b: ("wait", {"duration": 1}),
        "screenshot": lambda a, b: ("screenshot", {}),
    }
    width, height = view.shot_size

    def reach(x: int, y: int) -> bool:
        # the screenshot's last row and column hold the viewport's edge: a point the model names there
        x0, y0 = view.to_display(0, 0)
        x1, y1 = view.to_display(width - 1, height - 1)
        return x0 <= x <= x1 and y0 <= y <= y1

    note = (f"pixels of the {width}x{height} screenshot of the {view.width}x{view.height} viewport at "
            f"({view.x}, {view.y}); or element refs")
    return Contract("Anthropic `browser_toolset_20260801`", "vendor", _ViewportSpace(view), note, read, writers,
                    reach=reach)


# ---------------------------------------------------------------------------------------------
# OpenAI computer tools


def _openai(name: str, space: coords.Space) -> Contract:
    def read(action: dict) -> list:
        actions, error = openai_tool.map_actions([action], space)
        if error:
            raise ValueError(error)
        return actions

    def at(p: Point) -> dict[str, int]:
        return {"x": round(p[0]), "y": round(p[1])}

    writers: dict[str, Writer] = {
        "click": lambda a, b: {"type": "click", "button": "left", **at(a)},
        "right click": lambda a, b: {"type": "click", "button": "right", **at(a)},
        "middle click": lambda a, b: {"type": "click", "button": "wheel", **at(a)},
        "double click": lambda a, b: {"type": "double_click", **at(a)},
        "move": lambda a, b: {"type": "move", **at(a)},
        "drag": lambda a, b: {"type": "drag", "path": [at(a), at(b)]},
        "scroll": lambda a, b: {"type": "scroll", **at(a), "scroll_x": 0, "scroll_y": 360},
        "type": lambda a, b: {"type": "type", "text": "hello"},
        "type and Enter": lambda a, b: {"type": "type", "text": "hello\n"},
        "key chord": lambda a, b: {"type": "keypress", "keys": ["CTRL", "C"]},
        "wait": lambda a, b: {"type": "wait"},
        "screenshot": lambda a, b: {"type": "screenshot"},
    }
    note = f"pixels of the {space.width}x{space.height} screenshot"
    return Contract(name, "vendor", space, note, read, writers)


# ---------------------------------------------------------------------------------------------
# Gemini computer use


def _gemini() -> Contract:
    def read(sent: tuple[str, dict]) -> list:
        name, args = sent
        return gemini_tool.to_actions(name, args)  # CallError (a ValueError) when it cannot

    def at(p: Point) -> dict[str, int]:
        return {"x": round(p[0]), "y": round(p[1])}

    writers: dict[str, Writer] = {
        "click": lambda a, b: ("click_at", at(a)),
        "move": lambda a, b: ("hover_at", at(a)),
        "drag": lambda a, b: ("drag_and_drop", {**at(a), "destination_x": round(b[0]), "destination_y": round(b[1])}),
        "scroll": lambda a, b: ("scroll_at", {**at(a), "direction": "down", "magnitude": 400}),
        "type": lambda a, b: ("type_text_at", {**at(a), "text": "hello", "press_enter": False,
                                              "clear_before_typing": False}),
        "type and Enter": lambda a, b: ("type_text_at", {**at(a), "text": "hello", "press_enter": True,
                                                        "clear_before_typing": False}),
        "key chord": lambda a, b: ("key_combination", {"keys": "Control+C"}),
        "wait": lambda a, b: ("wait_5_seconds", {}),
    }
    return Contract("Gemini computer use", "vendor", gemini_tool.GRID, "0..999 on both axes", read, writers)


# ---------------------------------------------------------------------------------------------
# Chat dialects


def _seed(name: str, **params: str) -> str:
    inner = "".join(f"<parameter={k}>{v}</parameter>" for k, v in params.items())
    return f"<seed:tool_call><function={name}>{inner}</function></seed:tool_call>"


def _n(value: float) -> str:
    return f"{round(value)}"


def _chat_writers(dialect: str) -> dict[str, Writer]:  # noqa: C901
    def pt(p: Point) -> str:
        return f"({_n(p[0])},{_n(p[1])})"

    if dialect == "json":
        def obj(action: str, **rest: Any) -> str:
            import json
            return json.dumps({"action": action, **rest})

        def xy(p: Point) -> dict[str, int]:
            return {"x": round(p[0]), "y": round(p[1])}
        return {
            "click": lambda a, b: obj("click", **xy(a)),
            "right click": lambda a, b: obj("click", button="right", **xy(a)),
            "middle click": lambda a, b: obj("click", button="middle", **xy(a)),
            "double click": lambda a, b: obj("double_click", **xy(a)),
            "triple click": lambda a, b: obj("triple_click", **xy(a)),
            "move": lambda a, b: obj("move", **xy(a)),
            "drag": lambda a, b: obj("drag", **xy(a), to_x=round(b[0]), to_y=round(b[1])),
            "scroll": lambda a, b: obj("scroll", **xy(a), direction="down", amount=3),
            "type": lambda a, b: obj("type", text="hello"),
            "type and Enter": lambda a, b: obj("type", text="hello\n"),
            "key chord": lambda a, b: obj("key", keys="ctrl+c"),
            "wait": lambda a, b: obj("wait", seconds=1),
            "done": lambda a, b: obj("done", answer="42"),
            "fail": lambda a, b: obj("fail", reason="no"),
        }
    if dialect in ("uitars-1.0", "uitars-1.5"):
        def act(text: str) -> str:
            return f"Thought: t\nAction: {text}"
        return {
            "click": lambda a, b: act(f"click(start_box='{pt(a)}')"),
            "right click": lambda a, b: act(f"right_single(start_box='{pt(a)}')"),
            "double click": lambda a, b: act(f"left_double(start_box='{pt(a)}')"),
            "move": lambda a, b: act(f"hover(start_box='{pt(a)}')"),
            "drag": lambda a, b: act(f"drag(start_box='{pt(a)}', end_box='{pt(b)}')"),
            "scroll": lambda a, b: act(f"scroll(start_box='{pt(a)}', direction='down')"),
            "type": lambda a, b: act("type(content='hello')"),
            "type and Enter": lambda a, b: act("type(content='hello\\n')"),
            "key chord": lambda a, b: act("hotkey(key='ctrl c')"),
            "wait": lambda a, b: act("wait()"),
            "done": lambda a, b: act("finished(content='42')"),
            "fail": lambda a, b: act("call_user()"),
        }
    if dialect in ("qwen25", "qwen3"):
        def call(**args: Any) -> str:
            import json
            return f'<tool_call>{json.dumps({"name": "computer_use", "arguments": args})}</tool_call>'

        def c(p: Point) -> list[int]:
            return [round(p[0]), round(p[1])]
        return {
            "click": lambda a, b: call(action="left_click", coordinate=c(a)),
            "right click": lambda a, b: call(action="right_click", coordinate=c(a)),
            "middle click": lambda a, b: call(action="middle_click", coordinate=c(a)),
            "double click": lambda a, b: call(action="double_click", coordinate=c(a)),
            "triple click": lambda a, b: call(action="triple_click", coordinate=c(a)),
            "move": lambda a, b: call(action="mouse_move", coordinate=c(a)),
            "drag": lambda a, b: call(action="left_click_drag", start_coordinate=c(a), coordinate=c(b)),
            "scroll": lambda a, b: call(action="scroll", coordinate=c(a), pixels=-3),
            "type": lambda a, b: call(action="type", text="hello"),
            "type and Enter": lambda a, b: call(action="type", text="hello\n"),
            "key chord": lambda a, b: call(action="key", keys=["ctrl", "c"]),
            "wait": lambda a, b: call(action="wait", time=1),
            "done": lambda a, b: call(action="answer", text="42"),
            "fail": lambda a, b: call(action="terminate", status="failure"),
        }
    if dialect == "uitars-2":
        def p(q: Point) -> str:
            return f"<point>{_n(q[0])} {_n(q[1])}</point>"
        return {
            "click": lambda a, b: _seed("click", point=p(a)),
            "right click": lambda a, b: _seed("right_single", point=p(a)),
            "double click": lambda a, b: _seed("left_double", point=p(a)),
            "move": lambda a, b: _seed("move_to", point=p(a)),
            "drag": lambda a, b: _seed("drag", start_point=p(a), end_point=p(b)),
            "mouse down": lambda a, b: _seed("mouse_down", point=p(a)),
            "mouse up": lambda a, b: _seed("mouse_up", point=p(a)),
            "scroll": lambda a, b: _seed("scroll", point=p(a), direction="down"),
            "type": lambda a, b: _seed("type", content="hello"),
            "type and Enter": lambda a, b: _seed("type", content="hello\\n"),
            "key chord": lambda a, b: _seed("hotkey", key="ctrl c"),
            "wait": lambda a, b: _seed("wait", time="1"),
            "done": lambda a, b: _seed("finished", content="42"),
            "fail": lambda a, b: _seed("call_user", content="help"),
        }
    if dialect == "opencua":
        def code(text: str) -> str:
            return f"## Thought:\nt\n## Action:\na\n## Code:\n```python\n{text}\n```"

        def keywords(q: Point) -> str:
            return f"x={_n(q[0])}, y={_n(q[1])}"
        return {
            "click": lambda a, b: code(f"pyautogui.click({keywords(a)})"),
            "right click": lambda a, b: code(f"pyautogui.rightClick({keywords(a)})"),
            "middle click": lambda a, b: code(f"pyautogui.middleClick({keywords(a)})"),
            "double click": lambda a, b: code(f"pyautogui.doubleClick({keywords(a)})"),
            "triple click": lambda a, b: code(f"computer.triple_click({keywords(a)})"),
            "move": lambda a, b: code(f"pyautogui.moveTo({keywords(a)})"),
            "drag": lambda a, b: code(f"pyautogui.moveTo({keywords(a)})\npyautogui.dragTo({keywords(b)})"),
            "mouse down": lambda a, b: code(f"pyautogui.mouseDown({keywords(a)})"),
            "mouse up": lambda a, b: code(f"pyautogui.mouseUp({keywords(a)})"),
            "scroll": lambda a, b: code(f"pyautogui.scroll(-3, {keywords(a)})"),
            "type": lambda a, b: code("pyautogui.write(message='hello')"),
            "type and Enter": lambda a, b: code("pyautogui.write(message='hello\\n')"),
            "key chord": lambda a, b: code("pyautogui.hotkey('ctrl', 'c')"),
            "wait": lambda a, b: code("computer.wait()"),
            "done": lambda a, b: code("computer.terminate(status='success', answer='42')"),
            "fail": lambda a, b: code("computer.terminate(status='failure')"),
        }
    if dialect == "gta1":
        return {"click": lambda a, b: pt(a)}
    if dialect == "holo1.5":
        return {"click": lambda a, b: f'{{"action": "click_absolute", "x": {_n(a[0])}, "y": {_n(a[1])}}}'}
    raise ValueError(f"no writers for the chat dialect {dialect!r}: add them to vision.vendors.conformance")


def _chat(dialect: chat.Dialect) -> Contract:
    _, space = dialect.layout(None, coords.QWEN_MIN_PIXELS, coords.QWEN_MAX_PIXELS)

    def read(text: str) -> list:
        parsed = dialect.parse(text, space)
        errors = [c.error for c in parsed.calls if c.error]
        if errors:
            raise ValueError("; ".join(errors))
        return [a for c in parsed.calls for a in c.actions]

    if space.kind == "relative":
        note = f"0..{space.max_x} on both axes"
    elif dialect.coordinates == "smart":
        note = f"pixels of the {space.width}x{space.height} smart-resized image"
    else:
        note = f"pixels of the {space.width}x{space.height} screenshot"
    if dialect.grounding:
        note += "; grounding: one click per run"
    return Contract(f"chat `{dialect.name}`", "chat", space, note, read, _chat_writers(dialect.name))


def contracts() -> tuple[Contract, ...]:
    """Every contract measured, in the order of the matrix."""
    return (
        *(_anthropic(v) for v in anthropic_tool.TOOL_VERSIONS.values()),
        _browser(),
        _openai("OpenAI `computer` (GA)", coords.pixels(SCREEN_WIDTH, SCREEN_HEIGHT)),
        _openai("OpenAI `computer_use_preview`", coords.pixels(1280, 720)),
        _gemini(),
        *(_chat(d) for d in chat.DIALECTS.values()),
    )


# ---------------------------------------------------------------------------------------------
# Measuring


def grid() -> list[tuple[int, int]]:
    """Display points spread over the whole screen, its corners included."""
    points = [(x, y) for x in range(0, SCREEN_WIDTH, 97) for y in range(0, SCREEN_HEIGHT, 61)]
    return points + [(SCREEN_WIDTH - 1, SCREEN_HEIGHT - 1), (SCREEN_WIDTH - 1, 0), (0, SCREEN_HEIGHT - 1)]


@dataclass(frozen=True)
class Cell:
    supported: bool
    error_px: int | None = None  # worst distance, display pixels, for a pointer action
    why: str = ""  # what went wrong, when a writer exists but its action did not come out right


def measure(contract: Contract, row: Row) -> Cell:
    writer = contract.writers.get(row.name)
    if writer is None:
        return Cell(False)
    space = contract.space
    points = grid() if row.pointer else [(SCREEN_WIDTH // 2, SCREEN_HEIGHT // 2)]
    worst = 0
    for x, y in points:
        other = (SCREEN_WIDTH - 1 - x, SCREEN_HEIGHT - 1 - y)
        if contract.reach is not None and not all(contract.reach(*p) for p in [(x, y), other][:row.arity]):
            continue
        a, b = space.from_display(x, y), space.from_display(*other)
        try:
            actions = contract.read(writer(a, b))
        except ValueError as exc:
            return Cell(False, why=f"at ({x}, {y}): {exc}")
        if not row.check(actions):
            return Cell(False, why=f"at ({x}, {y}): {actions!r}")
        if row.pointer:
            meant = [(x, y), other][:row.arity]
            landed = row.points(actions)
            if len(landed) < len(meant):
                return Cell(False, why=f"at ({x}, {y}): no point in {actions!r}")
            landed = landed[-len(meant):] if row.arity == 1 else landed
            worst = max(worst, *(max(abs(lx - mx), abs(ly - my)) for (lx, ly), (mx, my) in zip(landed, meant)))
    return Cell(True, worst if row.pointer else None)


@functools.cache
def matrix() -> dict[str, dict[str, Cell]]:
    """contract name -> row name -> its cell."""
    return {c.name: {r.name: measure(c, r) for r in ROWS} for c in contracts()}


# ---------------------------------------------------------------------------------------------
# Rendering


def _cell(cell: Cell) -> str:
    if not cell.supported:
        return "—"
    return f"{cell.error_px} px" if cell.error_px is not None else "yes"


DESKTOP_DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance-desktop.md"


def desktop_worst(text: str | None = None) -> dict[str, str]:
    """contract name -> its worst error measured on the real desktop, from the contracts table of
    docs/conformance-desktop.md (vision.vendors.conformance_desktop writes it; measuring needs X, reading
    it does not)."""
    if text is None:
        text = DESKTOP_DOC.read_text() if DESKTOP_DOC.exists() else ""
    table = text.split("## Contracts", 1)[1].split("\n## ", 1)[0] if "## Contracts" in text else ""
    return {m[1]: m[2] for m in re.finditer(r"^\| (.+?) \| ([^|]+?) \|$", table, re.M)
            if m[1] not in ("contract", "---")}


def render() -> str:
    measured = matrix()
    on_desktop = desktop_worst()
    all_contracts = contracts()
    lines = [
        "# Conformance matrix",
        "",
        "<!-- Generated by `python -m vision.vendors.conformance > docs/conformance.md`; "
        "tests/unit/test_conformance.py fails when it is stale. Do not edit by hand. -->",
        "",
        "Which actions each model contract can ask glassdesk for, and how close to the display pixel the model",
        "meant each pointer action lands, on the 1920x1080 display. Every cell is measured, none declared:",
        "`vision/vendors/conformance.py` writes each action as the vendor's model would (a `tool_use` input, an",
        "OpenAI action, a reply in a chat dialect) at the model's coordinates of every point of a grid over",
        f"the display ({len(grid())} points, corners included), runs it through the converter or parser the",
        "loop and the executors use, and checks what comes out: the right action (a right click is a click",
        "with the right button; a drag goes from the first point to the second) and where it lands.",
        "",
        "`N px`: supported, and the worst distance between where it lands and the pixel meant, on either",
        "axis. `yes`: supported, no place on the screen. `—`: the contract has no such action (or it did",
        "not come out right: then the generator says why and the test fails).",
        "",
        "A model sees a scaled screenshot or a grid, so one model unit covers more than one display pixel;",
        "the error is the rounding of the two conversions, never a drift: 0 px where the model sees the",
        "display at full size, at most 1 px elsewhere. Anthropic's browser toolset names points of the",
        "browser's viewport only (and elements by ref): it is measured on the grid's points inside it.",
        "",
        "## Contracts",
        "",
        "The last column is the same pointer actions run to the end on the real desktop (the executor on",
        "the X display, where the page saw the input): [conformance-desktop.md](conformance-desktop.md).",
        "",
        "| contract | coordinates at 1920x1080 | actions | worst error | on the real desktop |",
        "| --- | --- | --- | --- | --- |",
    ]
    for contract in all_contracts:
        cells = measured[contract.name]
        supported = [c for c in cells.values() if c.supported]
        errors = [c.error_px for c in supported if c.error_px is not None]
        worst = f"{max(errors)} px" if errors else "—"
        desktop = on_desktop.get(contract.name, "not measured yet")
        lines.append(f"| {contract.name} | {contract.space_note} | {len(supported)} | {worst} | {desktop} |")
    for family, title in (("vendor", "Vendor computer tools"), ("chat", "Chat dialects (`chat/<model>`)")):
        group = [c for c in all_contracts if c.family == family]
        lines += ["", f"## {title}", "",
                  "| action | " + " | ".join(c.name for c in group) + " |",
                  "| --- | " + " | ".join("---" for _ in group) + " |"]
        for row in ROWS:
            lines.append(f"| {row.name} | " + " | ".join(_cell(measured[c.name][row.name]) for c in group) + " |")
    lines += ["", "`done` and `fail` are actions of the chat dialects. The vendor tools end a run by answering",
              "without a tool call (Anthropic's `end_turn`, an OpenAI message), which the loop takes as done; a",
              "grounding dialect's run is done once its one click is performed."]
    lines += ["", "The Anthropic tool versions are picked by model, as [docs/vision.md](vision.md#models) says; the",
              "chat dialects by model name ([docs/vision.md](vision.md#chat-dialects)).", ""]
    return "\n".join(lines)


def problems() -> list[str]:
    """The cells whose writer exists but whose action did not come out right."""
    return [f"{contract} / {row}: {cell.why}" for contract, cells in matrix().items()
            for row, cell in cells.items() if cell.why]


if __name__ == "__main__":
    sys.stdout.write(render())
