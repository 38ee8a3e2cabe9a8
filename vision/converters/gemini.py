"""Gemini's computer-use tool <-> canonical actions (pure): function calls in, function responses out.

Gemini's computer use is built into the model: the request carries ``tools: [{computer_use:
{environment, excluded_predefined_functions}}]`` and the model answers with ordinary function calls
of predefined names (``click_at``, ``type_text_at``, ...), several per turn. Coordinates are on a
0..999 grid over the whole screen whatever the screenshot's size (``vision.coords.gemini``). Each
call is answered by a function response carrying the URL of the page and the screenshot after it;
a call whose ``args.safety_decision`` says ``require_confirmation`` may run only once a person
agreed, and its response then says ``safety_acknowledgement: "true"``.

The meanings follow Google's documentation of the predefined functions and its reference computer
(google-gemini/computer-use-preview), done with real input on this desktop:

- ``type_text_at`` clicks at the point, selects all and deletes when ``clear_before_typing``
  (default true), types, and presses Enter when ``press_enter`` (default true, as documented);
- ``key_combination`` is one chord, ``"Control+A"``: keys held together, the last one pressed;
- ``scroll_document`` up/down is Page Up/Page Down; left/right is half the screen's width of
  horizontal wheel at the centre of the screen (the page has no key for it);
- ``scroll_at`` turns the wheel at the point by ``magnitude`` (default 800) on the grid along the
  scroll's axis: 800 down is 864 display pixels, ``SCROLL_PX_PER_NOTCH`` (120) a wheel notch;
- ``navigate`` and ``search`` type the URL into the browser's address bar (ctrl+L, the URL, Enter),
  so the operator sees it and the session's network policy applies; ``go_back``/``go_forward``
  are alt+Left/alt+Right; ``open_web_browser`` runs nothing (Chromium is always open);
  ``wait_5_seconds`` waits 5 s.

A call the model got wrong (an unknown function, a missing or bad argument, a point off the grid)
raises ``CallError`` listing every problem; nothing of it runs and the text goes back to the model
as that call's function response.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from pydantic import ValidationError

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Click, Drag, Key, Move, Point, Scroll, Type, Wait
from vision import coords
from vision.actions import Action, CallResult, SafetyCheck, Screenshot, ToolCall
from vision.converters.openai import SCROLL_PX_PER_NOTCH, describe, key_name, notches
from vision.models import GEMINI_SEARCH_URL

GRID = coords.gemini()

#: every predefined function of the computer-use tool, in the order of Google's documentation
FUNCTIONS = ("open_web_browser", "wait_5_seconds", "go_back", "go_forward", "search", "navigate", "click_at",
             "hover_at", "type_text_at", "key_combination", "scroll_document", "scroll_at", "drag_and_drop")

#: the tool's environments glassdesk serves, by the name a provider option uses
ENVIRONMENTS = {"desktop": "ENVIRONMENT_DESKTOP", "browser": "ENVIRONMENT_BROWSER"}

DEFAULT_SEARCH_URL = GEMINI_SEARCH_URL
DEFAULT_SCROLL_MAGNITUDE = 800
WAIT_5_SECONDS_MS = 5000
DIRECTIONS = ("up", "down", "left", "right")
SAFETY_DECISION = "safety_decision"
REQUIRE_CONFIRMATION = "require_confirmation"

# The arguments each function takes: (required, optional). ``safety_decision`` may ride on any.
_ARGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "open_web_browser": ((), ()),
    "wait_5_seconds": ((), ()),
    "go_back": ((), ()),
    "go_forward": ((), ()),
    "search": ((), ()),
    "navigate": (("url",), ()),
    "click_at": (("x", "y"), ()),
    "hover_at": (("x", "y"), ()),
    "type_text_at": (("x", "y", "text"), ("press_enter", "clear_before_typing")),
    "key_combination": (("keys",), ()),
    "scroll_document": (("direction",), ()),
    "scroll_at": (("x", "y", "direction"), ("magnitude",)),
    "drag_and_drop": (("x", "y", "destination_x", "destination_y"), ()),
}


class CallError(ValueError):
    """A function call that cannot run as given; the text goes back to the model."""


# --- function call -> Actions --------------------------------------------------------------------


class _Problems:
    """Every problem of one call's arguments, gathered so the model hears them all at once."""

    def __init__(self, args: Mapping[str, Any]):
        self.args = args
        self.found: list[str] = []

    def point(self, kx: str, ky: str) -> tuple[int, int] | None:
        x, y = self._coordinate(kx), self._coordinate(ky)
        if x is None or y is None:
            return None
        # Both axes share the grid: one conversion, the same rounding as every other provider.
        return GRID.to_display(x, y)

    def _coordinate(self, key: str) -> float | None:
        value = self.args.get(key)
        if key not in self.args:
            self.found.append(f"{key} is required")
        elif not _is_number(value):
            self.found.append(f"{key} must be a number on the 0..999 grid, got {value!r:.40}")
        elif not 0 <= value <= GRID.max_x:
            self.found.append(f"{key}={value:g} is off the 0..999 grid")
        else:
            return value
        return None

    def text(self, key: str, *, empty: bool = False) -> str | None:
        value = self.args.get(key)
        if key not in self.args:
            self.found.append(f"{key} is required")
        elif not isinstance(value, str) or (not value and not empty):
            self.found.append(f"{key} must be a {'' if empty else 'non-empty '}string, got {value!r:.40}")
        else:
            return value
        return None

    def flag(self, key: str, default: bool) -> bool:
        value = self.args.get(key, default)
        if not isinstance(value, bool):
            self.found.append(f"{key} must be true or false, got {value!r:.40}")
            return default
        return value

    def direction(self) -> str | None:
        value = self.text("direction")
        if value is not None and value not in DIRECTIONS:
            self.found.append(f"direction must be one of {', '.join(DIRECTIONS)}, got {value!r:.40}")
            return None
        return value

    def magnitude(self) -> float | None:
        value = self.args.get("magnitude", DEFAULT_SCROLL_MAGNITUDE)
        if not _is_number(value) or not 0 <= value <= 1000:
            self.found.append(f"magnitude must be a number from 0 to 1000 (grid units), got {value!r:.40}")
            return None
        return value


def _is_number(value: Any) -> TypeGuard[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # JSON's integers are unbounded: 10**400 is no coordinate
        return False


def key_chord(keys: str) -> str:
    """``key_combination``'s keys ("Control+Shift+T", "Enter", "Control++") -> one desktop chord."""
    names = keys.split("+")
    # "Control++" is Control and "+": a trailing empty pair of pieces is the plus key itself.
    if keys == "+":
        names = ["+"]
    elif keys.endswith("++"):
        names = [*names[:-2], "+"]
    if not names or any(not n.strip() for n in names):
        raise CallError(f"keys must be key names joined by '+', e.g. 'Control+A', got {keys!r:.60}")
    return "+".join(key_name(n.strip()) for n in names)


def _navigate(url: str) -> list[Action]:
    # Through the address bar with real keys: the operator sees it, and the browser's own policy
    # (the session's network policy, its URL blocklist) decides, as for anything a model types.
    return [Key(keys=["ctrl+l"]), Type(text=url), Key(keys=["Return"])]


def to_actions(name: str, args: Mapping[str, Any] | None, *, search_url: str = DEFAULT_SEARCH_URL) -> list[Action]:
    """One function call -> display-pixel Actions. Raises CallError listing every problem."""
    if name not in _ARGS:
        raise CallError(f"unknown function {name!r}: glassdesk runs the computer-use tool's predefined functions "
                        f"({', '.join(FUNCTIONS)})")
    args = dict(args or {})
    args.pop(SAFETY_DECISION, None)
    required, optional = _ARGS[name]
    p = _Problems(args)
    unknown = sorted(set(args) - set(required) - set(optional))
    if unknown:
        p.found.append(f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                       f"({name} takes {', '.join(required + optional) or 'none'})")
    actions: list[Action] | None = None
    try:
        actions = _build(name, p, search_url)
    except CallError as exc:
        p.found.append(str(exc))
    except (ValidationError, ValueError) as exc:  # an action model's own check: a key name, a text
        p.found.append(describe(exc))
    if p.found or actions is None:
        raise CallError(f"{name}: " + "; ".join(p.found))
    return actions


def _build(name: str, p: _Problems, search_url: str) -> list[Action] | None:  # noqa: C901
    if name == "open_web_browser":
        return [Screenshot()]
    if name == "wait_5_seconds":
        return [Wait(duration_ms=WAIT_5_SECONDS_MS)]
    if name in ("go_back", "go_forward"):
        return [Key(keys=["alt+Left" if name == "go_back" else "alt+Right"])]
    if name == "search":
        return _navigate(search_url)
    if name == "navigate":
        url = p.text("url")
        return _navigate(url) if url is not None else None
    if name in ("click_at", "hover_at"):
        point = p.point("x", "y")
        if point is None:
            return None
        return [Click(x=point[0], y=point[1]) if name == "click_at" else Move(x=point[0], y=point[1])]
    if name == "type_text_at":
        point, text = p.point("x", "y"), p.text("text", empty=True)
        press_enter, clear = p.flag("press_enter", True), p.flag("clear_before_typing", True)
        if point is None or text is None:
            return None
        actions: list[Action] = [Click(x=point[0], y=point[1])]
        if clear:
            actions.append(Key(keys=["ctrl+a", "Delete"]))
        if text:
            actions.append(Type(text=text))
        if press_enter:
            actions.append(Key(keys=["Return"]))
        return actions
    if name == "key_combination":
        keys = p.text("keys")
        return [Key(keys=[key_chord(keys)])] if keys is not None else None
    if name == "scroll_document":
        direction = p.direction()
        if direction is None:
            return None
        if direction in ("up", "down"):
            return [Key(keys=["Prior" if direction == "up" else "Next"])]
        return [Scroll(x=SCREEN_WIDTH // 2, y=SCREEN_HEIGHT // 2, direction=direction,
                       amount=notches(SCREEN_WIDTH / 2))]
    if name == "scroll_at":
        point, direction, magnitude = p.point("x", "y"), p.direction(), p.magnitude()
        if point is None or direction is None or magnitude is None:
            return None
        return scroll_at(point, direction, magnitude)
    if name == "drag_and_drop":
        start, end = p.point("x", "y"), p.point("destination_x", "destination_y")
        if start is None or end is None:
            return None
        return [Drag(path=[Point(x=start[0], y=start[1]), Point(x=end[0], y=end[1])])]
    raise AssertionError(name)  # every name of _ARGS is built above


def scroll_at(point: tuple[int, int], direction: str, magnitude: float) -> list[Action]:
    """The wheel at a display point, ``magnitude`` grid units along the scroll's axis."""
    pixels = scroll_pixels(magnitude, direction)
    if pixels <= 0:
        return [Move(x=point[0], y=point[1])]  # no distance: the pointer goes there, nothing scrolls
    return [Scroll(x=point[0], y=point[1], direction=direction, amount=notches(pixels))]


def scroll_pixels(magnitude: float, direction: str) -> float:
    """How many display pixels a ``scroll_at`` magnitude is (before rounding to notches)."""
    return magnitude / 1000 * (SCREEN_HEIGHT if direction in ("up", "down") else SCREEN_WIDTH)


# --- safety decisions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SafetyDecision:
    decision: str
    explanation: str


def safety_decision(args: Mapping[str, Any] | None) -> SafetyDecision | None:
    """The call's ``safety_decision``, if it carries one (any decision, as the model wrote it)."""
    value = (args or {}).get(SAFETY_DECISION)
    if not isinstance(value, Mapping):
        return None
    return SafetyDecision(decision=str(value.get("decision") or ""), explanation=str(value.get("explanation") or ""))


def needs_confirmation(args: Mapping[str, Any] | None) -> bool:
    decision = safety_decision(args)
    return decision is not None and decision.decision == REQUIRE_CONFIRMATION


def safety_check(call_id: str, args: Mapping[str, Any] | None) -> SafetyCheck | None:
    """A call that requires confirmation, as the loop's safety check (approved by the operator)."""
    if not needs_confirmation(args):
        return None
    decision = safety_decision(args)
    assert decision is not None
    return SafetyCheck(id=call_id, code=REQUIRE_CONFIRMATION,
                       message=decision.explanation or "the model asks for confirmation before this action")


# --- ToolCall and the function response ----------------------------------------------------------


def parse_call(call_id: str, name: str, args: Mapping[str, Any] | None, *,
               search_url: str = DEFAULT_SEARCH_URL) -> ToolCall:
    """A function call -> the loop's ToolCall (``error`` set, nothing to run, when it cannot run)."""
    raw = dict(args or {})
    call = ToolCall(id=call_id, name=name, raw=raw)
    try:
        call.actions = to_actions(name, raw, search_url=search_url)
    except CallError as exc:
        call.error = str(exc)
    return call


def response_fields(result: CallResult | None, *, url: str | None, acknowledged: bool) -> dict[str, Any]:
    """A function response's ``response`` object: the page's URL (when there is one: a desktop
    window that is no browser has none), the safety acknowledgement, and what went wrong or that
    nothing changed."""
    fields: dict[str, Any] = {}
    if url is not None:
        fields["url"] = url
    if acknowledged:
        fields["safety_acknowledgement"] = "true"
    if result is None:
        fields["error"] = "not executed"
    elif not result.ok:
        fields["error"] = result.error or "failed"
    elif result.output:
        fields["output"] = result.output
    if result is not None and result.no_effect:
        fields["no_effect"] = True
    return fields


def screenshot_part(png: bytes) -> dict[str, Any]:
    """A function response's screenshot part, as JSON (``inline_data`` with base64 PNG)."""
    return {"inline_data": {"mime_type": "image/png", "data": base64.b64encode(png).decode()}}


def function_response(name: str, call_id: str | None, fields: dict[str, Any], png: bytes) -> dict[str, Any]:
    """A whole FunctionResponse as JSON: ``types.FunctionResponse.model_validate`` takes it as is."""
    response: dict[str, Any] = {"name": name, "response": fields, "parts": [screenshot_part(png)]}
    if call_id:
        response["id"] = call_id
    return response


__all__ = ["DEFAULT_SEARCH_URL", "ENVIRONMENTS", "FUNCTIONS", "GRID", "SCROLL_PX_PER_NOTCH", "CallError",
           "SafetyDecision", "function_response", "key_chord", "needs_confirmation", "parse_call",
           "response_fields", "safety_check", "safety_decision", "screenshot_part", "scroll_at", "scroll_pixels",
           "to_actions"]
