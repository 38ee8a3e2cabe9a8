"""OpenAI's computer tool <-> canonical actions (pure): a computer_call's actions in, its output out.

Coordinates are pixels of the screenshot the model is sent (``computer_use_preview`` declares that
size as ``display_width`` x ``display_height``; the GA ``computer`` tool sees the screenshot as
sent); ``space`` is that size. OpenAI's semantics are kept as they are meant:

- a ``keypress`` list is ONE chord, pressed together: ["CTRL", "A"] is ctrl+a, not "ctrl" then "a";
- ``scroll_x``/``scroll_y`` are pixels of scrolling: each ``SCROLL_PX_PER_NOTCH`` (120) is one
  wheel notch, rounded half up, at least one for any non-zero distance (240 -> 2, 300 -> 3,
  1 -> 1), whatever the screenshot's size;
- GA actions may carry ``keys`` held during a click, drag or scroll.

A call's actions run all or nothing: one unusable action and none of them runs.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from pydantic import ValidationError

from desktop import keys
from desktop.actions import Click, DoubleClick, Drag, Key, Move, Point, Scroll, Type, Wait
from vision import coords
from vision.actions import Action, Screenshot

#: pixels of scroll_x / scroll_y per wheel notch (Windows' WHEEL_DELTA, and what openai-agents'
#: examples assume); applied to the value as given
SCROLL_PX_PER_NOTCH = 120
MAX_NOTCHES = 50  # desktop.actions.Scroll's bound
WAIT_MS = 1000  # the model's bare "wait" has no duration
_BUTTONS = {"left": "left", "right": "right", "wheel": "middle", "middle": "middle", "back": "back",
            "forward": "forward"}
# Keys that cannot be written inside a "+"-joined chord.
_CHORD_UNSAFE = {"+": "plus", " ": "space"}

#: every action type of the tool
ACTION_TYPES = ("click", "double_click", "drag", "keypress", "move", "screenshot", "scroll", "type", "wait")


def key_name(name: str) -> str:
    """An OpenAI key name ("CTRL", "ARROWLEFT", "ESC") -> a desktop.keys name that fits a chord."""
    if name in _CHORD_UNSAFE:
        return _CHORD_UNSAFE[name]
    lowered = name.lower()
    if lowered in keys.ALIASES or len(name) == 1:
        return lowered
    return name  # F5, KP_Enter, XF86AudioMute...: desktop.keys resolves the case of real keysyms


def keypress_chord(names: list[str]) -> str:
    """keypress keys are pressed together: ["CTRL", "A"] -> "ctrl+a"."""
    if not names:
        raise ValueError("keypress without keys")
    if not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"keys must be non-empty strings, got {names!r}")
    return "+".join(key_name(n) for n in names)


def notches(pixels: float) -> int:
    """A scroll distance in pixels -> wheel notches: 120 px each, half up, at least 1, at most 50."""
    return min(MAX_NOTCHES, max(1, math.floor(abs(pixels) / SCROLL_PX_PER_NOTCH + 0.5)))


def scroll_actions(x: int, y: int, scroll_x: Any, scroll_y: Any, modifiers: list[str]) -> list[Action]:
    """Pixel deltas -> wheel notches, vertical first; a zero scroll just moves the pointer there."""
    actions: list[Action] = []
    for delta, negative, positive in ((scroll_y, "up", "down"), (scroll_x, "left", "right")):
        delta = delta or 0
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not math.isfinite(float(delta)):
            raise ValueError(f"scroll distance must be a number, got {delta!r}")
        if delta:
            actions.append(Scroll(x=x, y=y, direction=positive if delta > 0 else negative, amount=notches(delta),
                                  modifiers=modifiers))
    return actions or [Move(x=x, y=y)]


def map_action(action: dict[str, Any], space: coords.Space) -> list[Action]:
    """One OpenAI action (as JSON) -> display-pixel Actions. Raises ValueError if unusable."""
    kind = action.get("type")
    held = [] if kind == "keypress" else [key_name(k) for k in action.get("keys") or []]  # GA held keys
    if kind in ("click", "double_click"):
        x, y = space.to_display(action.get("x"), action.get("y"))
        if kind == "double_click":
            return [DoubleClick(x=x, y=y, modifiers=held)]
        button = action.get("button", "left")
        if button not in _BUTTONS:
            raise ValueError(f"unknown mouse button {button!r}")
        return [Click(x=x, y=y, button=_BUTTONS[button], modifiers=held)]
    if kind == "move":  # keys held during a bare move change nothing on this desktop: dropped
        x, y = space.to_display(action.get("x"), action.get("y"))
        return [Move(x=x, y=y)]
    if kind == "drag":
        points = (space.to_display(p.get("x"), p.get("y")) for p in action.get("path") or [])
        return [Drag(path=[Point(x=x, y=y) for x, y in points], modifiers=held)]
    if kind == "scroll":
        x, y = space.to_display(action.get("x"), action.get("y"))
        return scroll_actions(x, y, action.get("scroll_x"), action.get("scroll_y"), held)
    if kind == "keypress":
        return [Key(keys=[keypress_chord(list(action.get("keys") or []))])]
    if kind == "type":
        return [Type(text=action.get("text") or "")]
    if kind == "wait":
        return [Wait(duration_ms=WAIT_MS)]
    if kind == "screenshot":
        return [Screenshot()]
    raise ValueError(f"unknown action type {kind!r}")


def map_actions(batch: list[Any], space: coords.Space) -> tuple[list[Action], str | None]:
    """A call's actions -> (Actions, None), or ([], why) if any one is unusable: all or nothing."""
    mapped: list[Action] = []
    for index, action in enumerate(batch):
        try:
            if not isinstance(action, dict):
                raise ValueError(f"expected an object, got {action!r}")
            mapped.extend(map_action(action, space))
        except (ValueError, TypeError, AttributeError, OverflowError) as exc:  # JSON ints are unbounded
            where = f"action {index + 1} ({action.get('type') if isinstance(action, dict) else '?'})"
            return [], f"{where}: {describe(exc)}"
    return mapped, None


def describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
    return str(exc)


# --- the screen -> computer_call_output ----------------------------------------------------------


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def screenshot_output(image_url: str) -> dict[str, str]:
    """A computer_call_output's ``output``: the screen after the call, as a data URL (``data_url``)."""
    return {"type": "computer_screenshot", "image_url": image_url}
