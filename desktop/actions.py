"""Desktop actions in display pixels: what the desktop can execute.

These pydantic models are the single description of an action, used by the REST primitives, by the
xdotool argv builder and (extended with model-only actions) by the vision loop. Validation happens
here, before anything runs: a coordinate off the 1920x1080 screen or an unknown key name is refused
with a message that says what was wrong.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from desktop import keys

SCREEN_WIDTH = 1920
SCREEN_HEIGHT = 1080

# strict: "5", true and 10.0 are mistakes to report, not coordinates to guess.
X = Annotated[int, Field(strict=True, ge=0, le=SCREEN_WIDTH - 1, description="display pixels, 0..1919")]
Y = Annotated[int, Field(strict=True, ge=0, le=SCREEN_HEIGHT - 1, description="display pixels, 0..1079")]
Button = Literal["left", "right", "middle", "back", "forward"]
Direction = Literal["up", "down", "left", "right"]


class Point(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: X
    y: Y


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _OptionalPoint(_Action):
    """x and y together, or neither (then the action happens where the pointer is)."""

    x: Annotated[int | None, Field(strict=True, ge=0, le=SCREEN_WIDTH - 1, description="display pixels, 0..1919; "
                                   "omit (with y) to act where the pointer is")] = None
    y: Annotated[int | None, Field(strict=True, ge=0, le=SCREEN_HEIGHT - 1,
                                   description="display pixels, 0..1079")] = None

    @model_validator(mode="after")
    def _both_or_neither(self):
        if (self.x is None) != (self.y is None):
            raise ValueError("give both x and y, or neither to act at the current pointer")
        return self


def _known_keys(value: list[str]) -> list[str]:
    for name in value:
        keys.keysym(name)
    return value


MODIFIERS = 'keys held during the action, e.g. ["ctrl"] or ["shift", "alt"]'


class _WithModifiers(_OptionalPoint):
    modifiers: list[str] = Field(default_factory=list, description=MODIFIERS)

    _known_modifiers = field_validator("modifiers")(_known_keys)


class Click(_WithModifiers):
    action: Literal["click"] = "click"
    button: Button = "left"


class DoubleClick(_WithModifiers):
    action: Literal["double_click"] = "double_click"
    button: Button = "left"


class TripleClick(_WithModifiers):
    action: Literal["triple_click"] = "triple_click"
    button: Button = "left"


class Move(_Action):
    action: Literal["move"] = "move"
    x: X
    y: Y


class MouseDown(_OptionalPoint):
    action: Literal["mouse_down"] = "mouse_down"
    button: Button = "left"


class MouseUp(_OptionalPoint):
    action: Literal["mouse_up"] = "mouse_up"
    button: Button = "left"


class Drag(_Action):
    action: Literal["drag"] = "drag"
    path: list[Point] = Field(min_length=2, max_length=200, description="press at the first point, release at the last")
    button: Button = "left"
    modifiers: list[str] = Field(default_factory=list, description=MODIFIERS)

    _known_modifiers = field_validator("modifiers")(_known_keys)


class Scroll(_WithModifiers):
    action: Literal["scroll"] = "scroll"
    direction: Direction = "down"
    amount: int = Field(default=3, ge=1, le=50, description="wheel notches")


def untypeable(char: str) -> bool:
    """C0 controls but newline, tab and carriage return; DEL; C1 controls; lone surrogates."""
    code = ord(char)
    return ((code < 0x20 and char not in "\n\t\r") or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF)


def typeable(value: str) -> str:
    """A text the keyboard can type (a validator: Type's, and every request that types a text)."""
    # An argv element cannot hold NUL, control characters have no key to press, and a lone
    # surrogate cannot even be encoded: refused here, they would fail inside the executor.
    if "\x00" in value:
        raise ValueError("a NUL character cannot be typed")
    for position, char in enumerate(value):
        if untypeable(char):
            raise ValueError(f"the character U+{ord(char):04X} at position {position} cannot be typed "
                             "(a control character or a lone surrogate); newline and tab can")
    return value


class Type(_Action):
    action: Literal["type"] = "type"
    text: str = Field(min_length=1, max_length=20_000)

    _typeable = field_validator("text")(typeable)


def _split_chords(value):
    return value.split() if isinstance(value, str) else value


def _known_chords(value: list[str]) -> list[str]:
    keys.chords(value)  # an unknown key name is refused here, before anything runs
    return value


# Chords in order, as a list or one space-separated string; every key name checked.
Chords = Annotated[list[str], BeforeValidator(_split_chords), AfterValidator(_known_chords)]


class Key(_Action):
    action: Literal["key"] = "key"
    # Its schema says both forms it takes (a model reading it may send either).
    keys: Annotated[Chords, WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "string"}, "minItems": 1,
                                                       "maxItems": 100}, {"type": "string", "minLength": 1}]})] = \
        Field(min_length=1, max_length=100, description='one chord ("ctrl+l"), several separated by spaces, or a '
                                                        'list of chords')


class HoldKey(_Action):
    action: Literal["hold_key"] = "hold_key"
    keys: str = Field(min_length=1, description='one chord, e.g. "shift" or "ctrl+alt"')
    duration_ms: int = Field(default=500, ge=0, le=10_000, description="how long to hold it, in ms")

    @field_validator("keys")
    @classmethod
    def _known(cls, value: str) -> str:
        keys.chord(value)
        return value


class Wait(_Action):
    action: Literal["wait"] = "wait"
    duration_ms: int = Field(default=1000, ge=0, le=30_000, description="how long to wait, in ms")


InputAction = Annotated[
    Click | DoubleClick | TripleClick | Move | MouseDown | MouseUp | Drag | Scroll | Type | Key | HoldKey | Wait,
    Field(discriminator="action"),
]

INPUT_ACTIONS: dict[str, type[_Action]] = {
    cls.model_fields["action"].default: cls
    for cls in (Click, DoubleClick, TripleClick, Move, MouseDown, MouseUp, Drag, Scroll, Type, Key, HoldKey, Wait)
}


class Region(BaseModel):
    """A rectangle in display pixels, [x0, y0) to [x1, y1)."""

    model_config = ConfigDict(extra="forbid")
    x0: Annotated[int, Field(ge=0, le=SCREEN_WIDTH - 1)]
    y0: Annotated[int, Field(ge=0, le=SCREEN_HEIGHT - 1)]
    x1: Annotated[int, Field(ge=1, le=SCREEN_WIDTH)]
    y1: Annotated[int, Field(ge=1, le=SCREEN_HEIGHT)]

    @model_validator(mode="before")
    @classmethod
    def _from_list(cls, value):
        if isinstance(value, (list, tuple)):
            if len(value) != 4:
                raise ValueError("region is [x0, y0, x1, y1]")
            return dict(zip(("x0", "y0", "x1", "y1"), value))
        return value

    @model_validator(mode="after")
    def _ordered(self):
        if self.x1 <= self.x0 or self.y1 <= self.y0:
            raise ValueError("region needs x0 < x1 and y0 < y1")
        return self

    @property
    def width(self) -> int:
        return self.x1 - self.x0

    @property
    def height(self) -> int:
        return self.y1 - self.y0


class Zoom(_Action):
    action: Literal["zoom"] = "zoom"
    region: Region
    scale: float = Field(default=1.0, gt=0, le=4, description="output size relative to the region")


PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class UnknownPlaceholder(ValueError):
    """A ``{{name}}`` with no secret of that name."""


def fill_placeholders(text: str, secrets: dict[str, str]) -> str:
    """``{{password}}`` -> the secret (pure); an unknown name raises UnknownPlaceholder."""
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in secrets:
            raise UnknownPlaceholder(f"placeholder {{{{{name}}}}} has no value; known: "
                                     f"{', '.join(sorted(secrets)) or 'none'}")
        return secrets[name]
    return PLACEHOLDER.sub(value, text)


def to_placeholders(text: str, secrets: dict[str, str]) -> str:
    """The inverse of fill_placeholders (pure): each secret's value in ``text`` -> ``{{name}}``.
    For text typed by a person, which holds values, not names: recorded this way it replays
    (a ``[REDACTED]`` would type the wrong text). Longest values first, so a secret that contains
    another is named whole; empty values name nothing."""
    for name, secret in sorted(secrets.items(), key=lambda item: -len(item[1])):
        if secret:
            text = text.replace(secret, f"{{{{{name}}}}}")
    return text


def describe(action: dict[str, Any], *, redact: bool = False) -> str:
    """One readable line for an action dict in display pixels, e.g. ``ctrl+right click at (960, 540)``.

    ``redact`` leaves out what the page or the model wrote (typed text is only counted, an answer or
    a reason is dropped, long key lists are cut): for the on-desktop strip, which is in the
    screenshots, where a text-matching model must not find page words, and where secrets must not
    show."""
    rest = dict(action)
    kind = str(rest.pop("action", "?")).replace("_", " ")
    modifiers = rest.pop("modifiers", None) or []
    button = rest.pop("button", None)
    if button not in (None, "left"):
        kind = f"{button} {kind}"
    words = ["+".join([*modifiers, kind])]
    if "direction" in rest:
        words.append(f"{rest.pop('direction')} ×{rest.pop('amount', '?')}")
    if rest.get("x") is not None and rest.get("y") is not None:
        words.append(f"at ({rest.pop('x')}, {rest.pop('y')})")
    rest = {k: v for k, v in rest.items() if v is not None}
    if "path" in rest:
        path = rest.pop("path")
        points = [f"({p['x']}, {p['y']})" for p in path]
        words.append(" → ".join(points) if len(points) <= 4
                     else f"{points[0]} → {points[-1]} via {len(points) - 2} points")
    if "keys" in rest:
        keys = rest.pop("keys")
        keys = " ".join(keys) if isinstance(keys, list) else str(keys)
        words.append(keys[:40] if redact else keys)
    if "text" in rest:
        text = str(rest.pop("text"))
        if redact:
            words.append(f"{len(text)} character{'s' if len(text) != 1 else ''}")
        else:
            words.append(json.dumps(text if len(text) <= 200 else text[:200] + "…", ensure_ascii=False))
    if "duration_ms" in rest:
        words.append(f"{rest.pop('duration_ms') / 1000:g} s")
    if "region" in rest:
        r = rest.pop("region")
        words.append(f"[{r['x0']}, {r['y0']}, {r['x1']}, {r['y1']}]")
    if redact:
        rest = {k: v for k, v in rest.items() if k not in ("answer", "reason")}
    words += [f"{k}={v}" if k not in ("answer", "reason") else f"— {v}" for k, v in rest.items()]
    return " ".join(words)
