"""Anthropic's computer tool <-> canonical actions (pure): tool_use input in, tool_result content out.

The model speaks pixels of the screenshot it was sent, which its tool declares as the display
(``display_width_px`` x ``display_height_px``); ``space`` is that size and every coordinate is
converted through it, both ways (``cursor_position`` answers in it too). Durations arrive in
seconds, modifiers as "ctrl+shift" strings, ``key`` may carry a ``repeat``: all of it becomes the
display-pixel, millisecond, key-list actions of ``vision.actions`` here.

Tool versions:

- ``computer_20250124``: one ``computer`` tool, the action in ``input.action``.
- ``computer_20251124``: the same plus ``zoom`` (``region`` [x0, y0, x1, y1]).
- ``computer_toolset_20260801``: each action is its own tool_use named after it, with
  ``toolset_name == "computer"``, which its tool_result must echo.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

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
    Point,
    Region,
    Scroll,
    TripleClick,
    Type,
    Wait,
    Zoom,
)
from vision import coords
from vision.actions import Action, CallResult, CursorPosition, Screenshot, ToolCall

# --- tool versions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolVersion:
    type: str
    beta: str | None = None
    zoom: bool = False
    toolset: bool = False


COMPUTER_20250124 = ToolVersion("computer_20250124", beta="computer-use-2025-01-24")
COMPUTER_20251124 = ToolVersion("computer_20251124", beta="computer-use-2025-11-24", zoom=True)
COMPUTER_TOOLSET_20260801 = ToolVersion("computer_toolset_20260801", zoom=True, toolset=True)
TOOL_VERSIONS: dict[str, ToolVersion] = {
    v.type: v for v in (COMPUTER_20250124, COMPUTER_20251124, COMPUTER_TOOLSET_20260801)
}
TOOLSET_NAME = "computer"
MAX_KEYS = 100  # desktop.actions.Key's bound on the keys of one action, repeats included
MAX_SECONDS = 86_400

# --- tool input -> Actions ---------------------------------------------------------------------


class InputError(ValueError):
    """A computer-tool call that cannot run as given; the text goes back to the model."""


_CLICKS: dict[str, tuple[type, str]] = {
    "left_click": (Click, "left"),
    "right_click": (Click, "right"),
    "middle_click": (Click, "middle"),
    "double_click": (DoubleClick, "left"),
    "triple_click": (TripleClick, "left"),
}

#: every action name of the tool, in the order of Anthropic's documentation
ACTIONS = ("key", "type", "mouse_move", *_CLICKS, "left_click_drag", "left_mouse_down", "left_mouse_up", "scroll",
           "hold_key", "wait", "screenshot", "cursor_position", "zoom")


def region_to_display(region: Any, space: coords.Space) -> Region:
    """A zoom region [x0, y0, x1, y1] in model pixels -> the display Region that covers it.

    Edges, not pixels: x1 may equal the image width. Rounded outwards so nothing asked for is lost.
    """
    if not (isinstance(region, (list, tuple)) and len(region) == 4 and all(_is_number(v) for v in region)):
        raise InputError(f"region must be [x0, y0, x1, y1], got {region!r}")
    x0, y0, x1, y1 = region
    if not (0 <= x0 < x1 <= space.width and 0 <= y0 < y1 <= space.height):
        raise InputError(f"region {list(region)} is not inside the {space.width}x{space.height} screen "
                         "with x0 < x1 and y0 < y1")
    sx, sy = SCREEN_WIDTH / space.width, SCREEN_HEIGHT / space.height
    return Region(x0=math.floor(x0 * sx), y0=math.floor(y0 * sy),
                  x1=min(SCREEN_WIDTH, math.ceil(x1 * sx)), y1=min(SCREEN_HEIGHT, math.ceil(y1 * sy)))


def _is_number(value: Any) -> bool:
    """A JSON number a float can hold: JSON's integers are unbounded, and 10**400 is no coordinate."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _point(args: Mapping[str, Any], key: str, space: coords.Space, *, required: bool) -> dict[str, int]:
    """``args[key]`` ([x, y] in model pixels) -> {"x", "y"} in display pixels; {} when absent."""
    value = args.get(key)
    if value is None:
        if required:
            raise InputError(f"{key} is required")
        return {}
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_number(v) for v in value)):
        raise InputError(f"{key} must be [x, y] numbers, got {value!r}")
    try:
        x, y = space.to_display(*value)
    except coords.OffScreen:
        raise InputError(f"{key} {list(value)} is off the {space.width}x{space.height} screen: x must be "
                         f"0..{space.max_x} and y 0..{space.max_y}") from None
    return {"x": x, "y": y}


def _text(args: Mapping[str, Any], key: str = "text") -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"{key} must be a non-empty string")
    return value


def _modifiers(args: Mapping[str, Any]) -> list[str]:
    """Keys held during a click or scroll: "ctrl+shift" in ``text`` (or ``key``, as some models send)."""
    held = args.get("text") or args.get("key")
    if held is None:
        return []
    if not isinstance(held, str):
        raise InputError(f"modifier keys must be a string like 'ctrl+shift', got {held!r}")
    return [name for name in re.split(r"[+\s]+", held.strip()) if name]


def _ms(args: Mapping[str, Any], key: str, default: float | None = None) -> int:
    """A duration in seconds -> milliseconds."""
    value = args.get(key, default)
    if not _is_number(value) or value < 0:
        raise InputError(f"{key} must be a number of seconds >= 0, got {value!r}")
    # Far past any limit of the desktop's (which says what the limit is), and still a float in ms.
    return round(min(value, MAX_SECONDS) * 1000)


def zoom_action(region: Any, space: coords.Space) -> Zoom:
    """A zoom region in model pixels -> the Zoom whose image fills the declared screenshot size
    (at most 4x): the budget the model reads images in."""
    display = region_to_display(region, space)
    scale = min(4.0, space.width / display.width, space.height / display.height)
    return Zoom(region=display, scale=scale)


def to_actions(action: Any, args: Mapping[str, Any], space: coords.Space) -> list[Action]:  # noqa: C901
    """One computer-tool call in model pixels -> the display-pixel Actions it means.

    Raises InputError, or pydantic's ValidationError for values the desktop refuses (both are
    ValueErrors).
    """
    if action in _CLICKS:
        cls, button = _CLICKS[action]
        return [cls(button=button, modifiers=_modifiers(args), **_point(args, "coordinate", space, required=False))]
    match action:
        case "mouse_move":
            return [Move(**_point(args, "coordinate", space, required=True))]
        case "left_click_drag":
            start = _point(args, "start_coordinate", space, required=True)
            end = _point(args, "coordinate", space, required=True)
            return [Drag(path=[Point(**start), Point(**end)], modifiers=_modifiers(args))]
        case "left_mouse_down":
            return [MouseDown(**_point(args, "coordinate", space, required=False))]
        case "left_mouse_up":
            return [MouseUp(**_point(args, "coordinate", space, required=False))]
        case "scroll":
            direction = args.get("scroll_direction")
            if direction not in ("up", "down", "left", "right"):
                raise InputError(f"scroll_direction must be up, down, left or right, got {direction!r}")
            return [Scroll(direction=direction, amount=args.get("scroll_amount", 3), modifiers=_modifiers(args),
                           **_point(args, "coordinate", space, required=False))]
        case "key":
            repeat = 1 if args.get("repeat") is None else args["repeat"]  # 0 is a mistake, not "once"
            if not isinstance(repeat, int) or isinstance(repeat, bool) or not 1 <= repeat <= MAX_KEYS:
                raise InputError(f"repeat must be an integer from 1 to {MAX_KEYS}, got {repeat!r}")
            return [Key(keys=_text(args).split() * repeat)]
        case "type":
            return [Type(text=_text(args))]
        case "hold_key":
            return [HoldKey(keys=_text(args), duration_ms=_ms(args, "duration"))]
        case "wait":
            return [Wait(duration_ms=_ms(args, "duration", default=1))]
        case "screenshot":
            return [Screenshot()]
        case "cursor_position":
            return [CursorPosition()]
        case "zoom":
            return [zoom_action(args.get("region"), space)]
    raise InputError(f"unknown action {action!r}")


def explain(exc: Exception) -> str:
    """A short sentence for the model from an InputError or a pydantic ValidationError."""
    if isinstance(exc, ValidationError):
        parts = []
        for error in exc.errors():
            msg = error["msg"].removeprefix("Value error, ")
            loc = ".".join(str(p) for p in error["loc"])
            parts.append(f"{loc}: {msg}" if loc else msg)
        return "; ".join(parts)
    return str(exc)


def parse_tool_use(id: str, name: str, input: Mapping[str, Any], space: coords.Space, *,
                   toolset_name: str | None = None, version: ToolVersion | None = None) -> ToolCall:
    """One tool_use block -> a ToolCall, with ``error`` set (nothing to run) if it makes no sense.

    ``version``, when known, refuses what that tool version does not offer (zoom before 20251124).
    """
    raw = dict(input)
    if toolset_name is not None:
        action = name if toolset_name == TOOLSET_NAME else None
    else:
        action = raw.get("action") if name == "computer" else None
    if action is None:
        return ToolCall(id, name, raw, error=f"unknown tool {name!r}: only the computer tool is available")
    if action == "zoom" and version is not None and not version.zoom:
        return ToolCall(id, name, raw, error=f"zoom is not an action of {version.type}; it needs computer_20251124 "
                                             "or later")
    try:
        return ToolCall(id, name, raw, actions=to_actions(action, raw, space))
    except ValueError as exc:
        return ToolCall(id, name, raw, error=explain(exc))


# --- results -> tool_result content ------------------------------------------------------------


def image_block(png: bytes) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                        "data": base64.b64encode(png).decode("ascii")}}


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def cursor_text(output: str, space: coords.Space) -> str:
    """The pointer as the loop reports it ("X=..,Y=.." in display pixels) -> the same in model pixels."""
    found = re.findall(r"-?\d+", output)
    if len(found) < 2:
        return output
    try:
        x, y = space.from_display(int(found[0]), int(found[1]))
    except coords.OffScreen:
        return output
    return f"X={x},Y={y}"


def result_content(call: ToolCall, result: CallResult | None, space: coords.Space) -> tuple[list[dict[str, Any]], bool]:
    """What one call did -> (the tool_result's content blocks, is_error), screenshot not included:
    the loop puts one on the turn's last result, the executor on every answer."""
    if result is None:
        return [text_block(call.error or "not run: an earlier action of this turn failed")], True
    if not result.ok:
        return [text_block(result.error or call.error or "the action failed")], True
    content = []
    if result.output:
        is_cursor = any(isinstance(a, CursorPosition) for a in call.actions)
        content.append(text_block(cursor_text(result.output, space) if is_cursor else result.output))
    if result.image_png:
        content.append(image_block(result.image_png))
    return content, False
