"""The canonical action union, in display pixels: the one language between providers and desktop.

Providers parse their model's output into these; the loop validates and executes them. The
executable ones come from desktop.actions; the rest only steer the loop.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from desktop.actions import (
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
    _Action,
)


class Screenshot(_Action):
    """Ask for a fresh observation; executes nothing."""

    action: Literal["screenshot"] = "screenshot"


class CursorPosition(_Action):
    action: Literal["cursor_position"] = "cursor_position"


class Done(_Action):
    """The model says the task is complete."""

    action: Literal["done"] = "done"
    answer: str | None = None


class Fail(_Action):
    """The model says the task cannot be done."""

    action: Literal["fail"] = "fail"
    reason: str


class BrowserMember(_Action):
    """A member of Anthropic's browser toolset, run by its executor (vision.browser_toolset) on the
    session's browser; the tool_result it answers goes back to the model as it is."""

    action: Literal["browser"] = "browser"
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


Action = Annotated[
    Click | DoubleClick | TripleClick | Move | MouseDown | MouseUp | Drag | Scroll | Type | Key | HoldKey | Wait | Zoom
    | Screenshot | CursorPosition | Done | Fail | BrowserMember,
    Field(discriminator="action"),
]
ACTION_ADAPTER: TypeAdapter = TypeAdapter(Action)


def parse_action(data: dict) -> Action:
    """A dict in display pixels -> a validated Action (raises pydantic.ValidationError)."""
    return ACTION_ADAPTER.validate_python(data)
