"""The canonical action union, in display pixels: the one language between providers and desktop.

Providers parse their model's output into these; the loop validates and executes them. The
executable ones come from desktop.actions; the rest only steer the loop. A model's call with the
actions it means (``ToolCall``) and what running it gave (``CallResult``) are this language too:
the converters write and read them, the providers carry them, the loop runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from desktop import keys
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
from desktop.frame import Frame


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
    """A member of Anthropic's browser toolset, run by its executor (vision.vendors.browser_toolset) on the
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


# The actions meant to change something on the screen: one that worked and changed nothing is said
# to (``no_effect``: the loop's step, the vendor executors' tool results), so that neither the model
# nor an export takes it for done.
EFFECT_EXPECTED = (Click, DoubleClick, TripleClick, Key, Type, Scroll, Drag)
# Chords that copy, as keysyms whatever a model calls them ("ctrl+c", "control+C"): nothing on the
# screen is meant to change.
COPY_CHORDS = frozenset({frozenset({"Control", "c"}), frozenset({"Control", "Insert"}),
                         frozenset({"Control", "Shift", "c"})})
# What the model is told of such a step, after the words for it ("Your last step (click at (3, 4))").
NO_EFFECT = "worked but changed nothing on the screen: check that you acted on the right place before going on."


def expects_effect(action) -> bool:
    """Whether an action is meant to change something on the screen (pure): a click, typing, a
    scroll, a drag, a key other than a copy; not a move, a wait, a screenshot."""
    if isinstance(action, Key):
        return not all(_copies(chord) for chord in action.keys)
    return isinstance(action, EFFECT_EXPECTED)


def _copies(chord: str) -> bool:
    try:
        syms = keys.chord(chord)
    except keys.KeyNameError:
        return False
    return frozenset(sym.removesuffix("_L").removesuffix("_R") for sym in syms) in COPY_CHORDS


@dataclass
class ToolCall:
    """One call as the model made it, and what it means on the display.

    ``raw`` is the model's own arguments (model coordinate space), kept for the trace. ``actions``
    are display-pixel Actions to run in order (OpenAI GA batches several in one call). If the call
    could not be understood or is off-screen, ``error`` says why and nothing is executed; the error
    is reported back to the model in the next turn.
    """

    id: str
    name: str
    raw: dict[str, Any]
    actions: list[Action] = field(default_factory=list)
    error: str | None = None


@dataclass
class SafetyCheck:
    id: str
    code: str
    message: str


@dataclass
class CallResult:
    """What happened when the loop ran one ToolCall; sent back with the next observation."""

    call_id: str
    ok: bool
    error: str | None = None
    # Text output (cursor position, a note), and for zoom the cropped image as PNG.
    output: str | None = None
    image_png: bytes | None = None
    # The call's actions were meant to change the screen, worked, and changed nothing (the vendor
    # executors; the loop flags its whole step instead).
    no_effect: bool = field(default=False, metadata={"trace": False})
    # The screen after this call (set by the loop), for a contract that answers each call with its
    # own screenshot (Gemini); never written to the trace, which has the step's frames. And the
    # page's URL after it, read only for a provider that ``answers_each_call``.
    screen: Frame | None = field(default=None, repr=False, metadata={"trace": False})
    url: str | None = field(default=None, metadata={"trace": False})
    # A browser toolset member's tool_result content, as its executor rendered it (text, images,
    # the browser_state block): sent back as it is; kept out of the trace like the screen (its
    # images would be the step's frames again).
    content: list[dict] | None = field(default=None, repr=False, metadata={"trace": False})
