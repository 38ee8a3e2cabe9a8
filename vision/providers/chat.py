"""Models behind any OpenAI-compatible chat-completions server (vLLM, Ollama, hosted): "chat/<model>".

Such models have no computer tool: they answer in text, and each family has its own habits. A
*dialect* pairs the prompt that tells the model how to answer with the parser that reads the answer:

    json        our documented protocol (JSON_PROTOCOL below), pixels of the screenshot sent
    uitars-1.0  UI-TARS "Thought: ... Action: click(start_box='(x,y)')", relative 0..1000
    uitars-1.5  the same format, pixels of the smart-resized image
    qwen25      Qwen2.5-VL <tool_call>{"name": "computer_use", ...}</tool_call>, pixels of the
                smart-resized image
    qwen3       the same format, relative 0..1000
    uitars-2    UI-TARS-2 "<seed:tool_call><function=click><parameter=point><point>x y</point>
                </parameter></function></seed:tool_call>", several functions a turn, relative 0..1000
    opencua     OpenCUA "## Thought / ## Action / ## Code" with pyautogui calls (and computer.wait,
                computer.terminate, computer.triple_click), pixels of the smart-resized image
    gta1        GTA1, a grounding model: "(x,y)", pixels of the smart-resized image
    holo1.5     Holo1.5 (and Holo1), a grounding model: {"action": "click_absolute", "x": .., "y": ..}
                or "Click(x, y)", pixels of the smart-resized image

A grounding dialect (gta1, holo1.5) locates one thing: each turn it is sent the instruction (the
element's description) and the current screen alone, and its point is clicked; once a click has
been performed the run is done without asking the model again.

The parsers are pure functions (text, Space) -> Parsed; they convert coordinates with vision.coords,
so every Action they return is already in display pixels.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, cast

import openai
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel, ValidationError

from desktop.actions import (
    Click,
    DoubleClick,
    Drag,
    Key,
    MouseDown,
    MouseUp,
    Move,
    Scroll,
    TripleClick,
    Type,
    Wait,
)
from desktop.errors import describe_validation
from vision import coords
from vision.actions import Action, CallResult, Done, Fail, ToolCall
from vision.coords import DISPLAY, QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, Space
from vision.providers.base import (
    ModelCallError,
    ModelTurn,
    Observation,
    Provider,
    Usage,
    retry_after,
)


class ChatParseError(ValueError):
    """The reply holds no action in the dialect's format; the message tells the model what to send."""


@dataclass
class Parsed:
    calls: list[ToolCall]
    thought: str = ""


# ---------------------------------------------------------------------------------------------
# Shared pieces of the parsers


def _numbers(value: Any) -> list[float]:
    """[x, y] as a list, or any text holding the numbers: "(x,y)", "<point>x y</point>", "[x1,y1,x2,y2]"."""
    if isinstance(value, (list, tuple)):
        try:
            return [float(v) for v in value]
        except (TypeError, ValueError):
            raise ValueError(f"coordinates must be numbers, got {value!r}") from None
    return [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", str(value))]


def _point(space: Space, value: Any) -> dict[str, int]:
    """A point or a box (-> its centre) in the model's space -> display-pixel {"x", "y"}."""
    nums = _numbers(value)
    if len(nums) == 4:
        nums = [(nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2]
    if len(nums) != 2:
        raise ValueError(f"cannot read a point from {value!r}: expected (x,y) or a box [x1,y1,x2,y2]")
    x, y = space.to_display(*nums)
    return {"x": x, "y": y}


def _chord(keys: Any) -> str:
    """["ctrl", "c"] (Qwen), "ctrl c" (UI-TARS) or "ctrl+c" -> "ctrl+c": keys pressed together."""
    parts = keys if isinstance(keys, list) else str(keys).replace("+", " ").split()
    if not parts:
        raise ValueError("no key given")
    return "+".join(str(k).strip() for k in parts)


def _typing(text: Any) -> list[Action]:
    """Models end text with a newline to submit it: that newline becomes an explicit Enter."""
    text = str(text)
    body, enter = (text[:-1], True) if text.endswith("\n") else (text, False)
    actions: list[Action] = [Type(text=body)] if body else []
    if enter:
        actions.append(Key(keys=["enter"]))
    if not actions:
        raise ValueError("type needs some text")
    return actions


def _wait(seconds: Any) -> Wait:
    return Wait(duration_ms=min(30_000, max(0, round(float(seconds) * 1000))))


def _call(index: int, name: str, raw: dict[str, Any], build: Callable[[], list[Action]]) -> ToolCall:
    """One call the model made. If it cannot become display actions (off-screen, unknown action or
    key), ``error`` says why: nothing runs, and the model hears about it next turn."""
    try:
        return ToolCall(f"call_{index}", name, raw, actions=build())
    except (ValueError, TypeError) as exc:
        return ToolCall(f"call_{index}", name, raw,
                        error=f"{name}: {describe_validation(exc) if isinstance(exc, ValidationError) else exc}")


def _json_objects(text: str) -> Iterator[dict]:
    """Each JSON object in the text: the whole text if it is one, then every object starting at a
    "{" (inside a ```json fence, after a preamble; braces in prose that are not JSON are skipped)."""
    try:
        whole = json.loads(text)
    except ValueError:
        pass
    else:
        if isinstance(whole, dict):
            yield whole
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


# ---------------------------------------------------------------------------------------------
# Dialect "json": our protocol

JSON_ACTIONS: dict[str, type[BaseModel]] = {  # each a member of Action
    cls.model_fields["action"].default: cls
    for cls in (Click, DoubleClick, TripleClick, Move, Drag, Scroll, Type, Key, Wait, Done, Fail)
}

JSON_PROTOCOL = """\
Reply with exactly one JSON object and nothing else:
{{"thought": "<what you see and why you act>", "action": "<name>", ...arguments}}

The screenshot is {width}x{height}. Coordinates are {coordinates}. Aim at the centre of the target.

Actions:
{{"action": "click", "x": {cx}, "y": {cy}}}  optional "button": "left" | "right" | "middle", "modifiers": ["ctrl"]
{{"action": "double_click", "x": {cx}, "y": {cy}}}
{{"action": "triple_click", "x": {cx}, "y": {cy}}}
{{"action": "move", "x": {cx}, "y": {cy}}}
{{"action": "drag", "x": {cx}, "y": {cy}, "to_x": {tx}, "to_y": {cy}}}
{{"action": "scroll", "x": {cx}, "y": {cy}, "direction": "down", "amount": 3}}  direction up|down|left|right, \
amount in wheel notches
{{"action": "type", "text": "hello"}}
{{"action": "key", "keys": "ctrl+l"}}  one chord, or several in order separated by spaces: "ctrl+a Delete"
{{"action": "wait", "seconds": 1}}
{{"action": "done", "answer": "<the answer, if the task asked a question>"}}  the task is complete
{{"action": "fail", "reason": "<why>"}}  the task cannot be done

After each action you get the result and a new screenshot."""


def json_prompt(space: Space) -> str:
    return JSON_PROTOCOL.format(width=space.width, height=space.height, coordinates=space.describe(),
                                cx=space.width // 2, cy=space.height // 2, tx=space.width * 3 // 4)


def parse_json(text: str, space: Space) -> Parsed:
    obj = next((o for o in _json_objects(text) if "action" in o), None)
    if obj is None:
        raise ChatParseError('no JSON object with an "action" field in the reply; answer with exactly one '
                             'object such as {"thought": "...", "action": "click", "x": 100, "y": 200}')
    name = str(obj["action"])
    return Parsed([_call(0, name, obj, lambda: [_json_action(obj, space)])], str(obj.get("thought") or ""))


def _json_action(obj: dict[str, Any], space: Space) -> Action:
    name = obj["action"]
    cls = JSON_ACTIONS.get(name)
    if cls is None:
        raise ValueError(f"unknown action {name!r}; use one of {', '.join(JSON_ACTIONS)}")
    data = dict(obj)
    if "coordinate" in data:  # models trained on Anthropic's or Qwen's tools write [x, y]
        data.update(_point(space, data.pop("coordinate")))
    elif "x" in data or "y" in data:
        data.update(_point(space, [data.get("x"), data.get("y")]))
    if name == "drag":
        if "to_x" not in data or "to_y" not in data:
            raise ValueError("drag needs x, y, to_x and to_y")
        data["path"] = [{"x": data["x"], "y": data["y"]}, _point(space, [data["to_x"], data["to_y"]])]
    if name == "wait" and "seconds" in data:
        data["duration_ms"] = _wait(data["seconds"]).duration_ms
    # Extra keys a model adds ("target": "the OK button") are dropped rather than refused.
    return cast(Action, cls.model_validate({k: v for k, v in data.items() if k in cls.model_fields}))


# ---------------------------------------------------------------------------------------------
# Dialect "uitars": Thought: ...\nAction: click(start_box='(x,y)')

UITARS_PROMPT = """\
You are a GUI agent operating a Linux desktop (XFCE with Chromium). You get a task and screenshots;
do the next step.

Output format:
Thought: <what you see and what you do next>
Action: <one action>

Action space:
click(start_box='(x,y)')
left_double(start_box='(x,y)')
right_single(start_box='(x,y)')
drag(start_box='(x1,y1)', end_box='(x2,y2)')
hotkey(key='ctrl c')  # keys pressed together, separated by spaces, lower case
type(content='text')  # end the content with \\n to press Enter
scroll(start_box='(x,y)', direction='down')  # up, down, left or right
wait()  # pause 2 seconds, then look again
finished(content='answer')  # the task is done; content answers the task's question, if any
call_user()  # the task cannot be done, or needs a person

Coordinates are {coordinates}."""


def uitars_prompt(space: Space) -> str:
    return UITARS_PROMPT.format(coordinates=space.describe())


_ACTION_LABEL = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*", re.M)
_THOUGHT_LABEL = re.compile(r"^[ \t]*Thought[ \t]*:[ \t]*", re.M)
# name(args) ending its line; the lazy args stop at the first ")" that does, so text may hold ")".
_UITARS_CALL = re.compile(r"(\w+)\((.*?)\)[ \t]*(?=\n|$)", re.S)
# key='value' up to the quote that ends the argument list or precedes ", next_key=": a model
# writes type(content='It's done') with the inner quote unescaped.
_UITARS_ARG = re.compile(r"""(\w+)\s*=\s*(?:(['"])(.*?)\2|([^,\s)]*))\s*(?=,\s*\w+\s*=|,?\s*$)""", re.S)
_ESCAPES = {"n": "\n", "t": "\t"}


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[1]), value, flags=re.S)


def parse_uitars(text: str, space: Space) -> Parsed:
    label = _ACTION_LABEL.search(text)
    thought, section = (text[:label.start()], text[label.end():]) if label else ("", text)
    calls = []
    for index, match in enumerate(_UITARS_CALL.finditer(section)):
        name, arg_text = match[1], match[2]
        args = {m[1]: _unescape(m[3]) if m[2] else m[4] for m in _UITARS_ARG.finditer(arg_text)}
        calls.append(_call(index, name, {"action": name, **args}, partial(_uitars_actions, name, args, space)))
    if not calls:
        raise ChatParseError("no action found; reply with 'Thought: ...' and then a line such as "
                             "\"Action: click(start_box='(x,y)')\" using an action from the list")
    return Parsed(calls, _THOUGHT_LABEL.sub("", thought, count=1).strip())


def _uitars_actions(name: str, args: dict[str, str], space: Space) -> list[Action]:  # noqa: C901
    def at(*keys: str) -> dict[str, int]:
        box = next((args[k] for k in keys if args.get(k)), None)
        if box is None:
            raise ValueError(f"missing {keys[0]}")
        return _point(space, box)

    def start() -> dict[str, int]:
        return at("start_box", "point", "start_point")

    def end() -> dict[str, int]:
        return at("end_box", "end_point")

    match name:
        case "click" | "left_single":
            return [Click(**start())]
        case "left_double" | "double_click":
            return [DoubleClick(**start())]
        case "right_single" | "right_click":
            return [Click(button="right", **start())]
        case "drag" | "select":
            return [Drag(path=[start(), end()])]
        case "move_to" | "hover" | "mouse_move":
            return [Move(**start())]
        case "hotkey" | "press":
            return [Key(keys=[_chord(args.get("key") or args.get("hotkey") or "")])]
        case "type":
            return _typing(args.get("content", ""))
        case "scroll":
            where = start() if any(args.get(k) for k in ("start_box", "point", "start_point")) else {}
            return [Scroll(direction=args.get("direction", "down").strip().lower(), **where)]
        case "wait":
            return [Wait(duration_ms=2000)]
        case "finished":
            return [Done(answer=args.get("content") or None)]
        case "call_user":
            return [Fail(reason="the model asked for a person's help (call_user)")]
    raise ValueError(f"unknown action {name!r}")


# ---------------------------------------------------------------------------------------------
# Dialects "qwen25" and "qwen3": <tool_call>{"name": "computer_use", "arguments": {...}}</tool_call>

QWEN_ACTIONS = {
    "key": "press keys together: keys=[\"ctrl\", \"c\"]",
    "type": "type text; end it with \\n to press Enter",
    "mouse_move": "move the pointer to coordinate",
    "left_click": "click at coordinate",
    "left_click_drag": "press at start_coordinate (default: the pointer) and release at coordinate",
    "right_click": "right-click at coordinate",
    "middle_click": "middle-click at coordinate",
    "double_click": "double-click at coordinate",
    "triple_click": "triple-click at coordinate",
    "scroll": "turn the wheel by pixels notches at coordinate: positive up, negative down",
    "hscroll": "turn the wheel sideways by pixels notches: positive right, negative left",
    "wait": "wait time seconds",
    "terminate": "end the task with status success or failure",
    "answer": "end the task and give text as the answer",
}

QWEN_PROMPT = """\
You operate a Linux desktop (XFCE with Chromium) through screenshots. Do the next step of the task.

# Tools

You may call a function to assist with the user query. Function signatures are within <tools></tools> XML tags:
<tools>
{tool}
</tools>

For each function call, return a json object with the function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""


def qwen_prompt(space: Space) -> str:
    description = ("Use a mouse and keyboard to operate the computer. Coordinates are "
                   f"{space.describe()}. Actions:\n" + "\n".join(f"* {k}: {v}" for k, v in QWEN_ACTIONS.items()))
    tool = {"type": "function", "function": {"name": "computer_use", "description": description, "parameters": {
        "type": "object", "required": ["action"], "properties": {
            "action": {"type": "string", "enum": list(QWEN_ACTIONS)},
            "coordinate": {"type": "array", "description": "(x, y)"},
            "start_coordinate": {"type": "array", "description": "(x, y), for left_click_drag"},
            "keys": {"type": "array", "description": "for key"},
            "text": {"type": "string", "description": "for type and answer"},
            "pixels": {"type": "number", "description": "for scroll and hscroll"},
            "time": {"type": "number", "description": "seconds, for wait"},
            "status": {"type": "string", "enum": ["success", "failure"], "description": "for terminate"},
        }}}}
    return QWEN_PROMPT.format(tool=json.dumps(tool))


_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_THINK = re.compile(r"</?think>")


def parse_qwen(text: str, space: Space) -> Parsed:
    # Without the tags, a bare {"name": ..., "arguments": ...} or {"action": ...} object is accepted.
    bodies = _TOOL_CALL.findall(text) or [text]
    calls = []
    for index, body in enumerate(bodies):
        obj = next((o for o in _json_objects(body) if "arguments" in o or "action" in o), None)
        if obj is None:
            raise ChatParseError('no readable tool call; reply with <tool_call>{"name": "computer_use", '
                                 '"arguments": {"action": "left_click", "coordinate": [x, y]}}</tool_call>')
        args = obj.get("arguments", obj)
        if isinstance(args, str):  # some servers encode the arguments as a JSON string
            args = next(_json_objects(args), None)
        if not isinstance(args, dict):
            raise ChatParseError('the tool call\'s "arguments" must be a JSON object such as '
                                 '{"action": "left_click", "coordinate": [x, y]}')
        if "action" not in args and obj.get("name") not in (None, "computer_use"):
            args = {"action": obj["name"], **args}  # the action written as the function name
        name = str(args.get("action"))
        calls.append(_call(index, name, args, partial(_qwen_actions, args, space)))
    thought = text[:text.find("<tool_call>")] if "<tool_call>" in text else ""
    return Parsed(calls, _THINK.sub("", thought).strip())


def _qwen_actions(args: dict[str, Any], space: Space) -> list[Action]:  # noqa: C901
    def at() -> dict[str, int]:
        return _point(space, args["coordinate"]) if "coordinate" in args else {}

    def needed(key: str) -> Any:
        if key not in args:
            raise ValueError(f"missing {key}")
        return args[key]

    def notches() -> int:
        pixels = float(needed("pixels"))  # reference agents ran this through pyautogui.scroll: wheel clicks
        return min(50, max(1, round(abs(pixels))))

    match args.get("action"):
        case "left_click":
            return [Click(**at())]
        case "right_click":
            return [Click(button="right", **at())]
        case "middle_click":
            return [Click(button="middle", **at())]
        case "double_click":
            return [DoubleClick(**at())]
        case "triple_click":
            return [TripleClick(**at())]
        case "mouse_move":
            return [Move(**_point(space, needed("coordinate")))]
        case "left_click_drag":
            end = _point(space, needed("coordinate"))
            if "start_coordinate" in args:
                return [Drag(path=[_point(space, args["start_coordinate"]), end])]
            return [MouseDown(), Move(**end), MouseUp()]  # from wherever the pointer is
        case "key":
            return [Key(keys=[_chord(needed("keys"))])]
        case "type":
            return _typing(needed("text"))
        case "scroll":
            return [Scroll(direction="up" if float(needed("pixels")) > 0 else "down", amount=notches(), **at())]
        case "hscroll":
            return [Scroll(direction="right" if float(needed("pixels")) > 0 else "left", amount=notches(), **at())]
        case "wait":
            return [_wait(args.get("time", 1))]
        case "terminate":
            if args.get("status", "success") == "success":
                return [Done()]
            return [Fail(reason="the model ended the task as failed (terminate, status failure)")]
        case "answer":
            return [Done(answer=str(needed("text")))]
    raise ValueError(f"unknown action {args.get('action')!r}; use one of {', '.join(QWEN_ACTIONS)}")


# ---------------------------------------------------------------------------------------------
# Dialect "uitars-2": <seed:tool_call><function=NAME><parameter=P>V</parameter></function></seed:tool_call>

# UI-TARS-2's functions as its documented schema names them (parameters in brackets).
UITARS2_FUNCTIONS = {
    "click": "left click at point [point]",
    "left_double": "double-click at point [point]",
    "right_single": "right-click at point [point]",
    "move_to": "move the pointer to point [point]",
    "drag": "press at start_point, move to end_point and release [start_point, end_point]",
    "scroll": "turn the wheel at point (default: the pointer) towards direction up, down, left or right "
              "[point, direction]",
    "mouse_down": "press a button (left or right) at point (default: the pointer) [point, button]",
    "mouse_up": "release a button at point (default: the pointer) [point, button]",
    "hotkey": "press keys together, separated by spaces, lower case, e.g. ctrl c [key]",
    "press": "press one key [key]",
    "release": "release a key pressed with press [key]",
    "type": "type content; end it with \\n to press Enter [content]",
    "wait": "wait time seconds [time]",
    "take_screenshot": "look at the screen again []",
    "finished": "the task is done; content answers its question, if any [content]",
    "call_user": "the task cannot be done without a person [content]",
}

UITARS2_PROMPT = """\
You are a GUI agent operating a Linux desktop (XFCE with Chromium). You are given a task and screenshots;
perform the next action. If repeating an action leaves the screen unchanged, try another.

Functions (parameters in brackets):
{functions}

Points are written <point>x y</point> in {coordinates}.

Think inside <gui_think></gui_think>, then call functions, several in order if you like:
<gui_think> reasoning </gui_think>
<seed:tool_call><function=click><parameter=point><point>500 300</point></parameter></function>\
<function=type><parameter=content>hello\\n</parameter></function></seed:tool_call>"""


def uitars2_prompt(space: Space) -> str:
    functions = "\n".join(f"- {name}: {what}" for name, what in UITARS2_FUNCTIONS.items())
    return UITARS2_PROMPT.format(functions=functions, coordinates=space.describe())


_SEED_CALL = re.compile(r"<seed:tool_call>(.*?)(?:</seed:tool_call>|$)", re.S)
_SEED_FUNCTION = re.compile(r"<function=([\w.]+)>(.*?)(?:</function>|(?=<function=)|$)", re.S)
_SEED_PARAMETER = re.compile(r"<parameter=(\w+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.S)
_SEED_THINK = re.compile(r"<(gui_think|think[^>]*)>(.*?)</\1>", re.S)


def parse_uitars2(text: str, space: Space) -> Parsed:
    calls: list[ToolCall] = []
    for block in _SEED_CALL.findall(text):
        for name, body in _SEED_FUNCTION.findall(block):
            # The line breaks a model puts around a value are layout, not content; a written \n
            # is a newline (its schema: "use \n at the end of content" to submit), so it presses Enter.
            args = {key: value.strip() for key, value in _SEED_PARAMETER.findall(body)}
            if "content" in args:
                args["content"] = args["content"].replace("\\n", "\n")
            calls.append(_call(len(calls), name, {"function": name, **args},
                               partial(_uitars2_actions, name, args, space)))
    if not calls:
        raise ChatParseError("no function call found; reply with <gui_think>...</gui_think> and then "
                             "<seed:tool_call><function=click><parameter=point><point>x y</point></parameter>"
                             "</function></seed:tool_call>")
    thought = "\n".join(m[2].strip() for m in _SEED_THINK.finditer(text))
    if not thought:
        thought = _SEED_THINK.sub("", text[:text.find("<seed:tool_call>")]).strip()
    return Parsed(calls, thought)


def _uitars2_actions(name: str, args: dict[str, str], space: Space) -> list[Action]:
    def where() -> dict[str, int]:
        return _point(space, args["point"]) if args.get("point") else {}

    def button() -> str:
        chosen = (args.get("button") or "left").strip().lower()
        if chosen not in ("left", "right", "middle"):
            raise ValueError(f"button {chosen!r}: use left or right")
        return chosen

    match name:
        case "mouse_down":
            return [MouseDown(button=button(), **where())]
        case "mouse_up":
            return [MouseUp(button=button(), **where())]
        case "press":
            # Without a key held across calls, press is the whole press; release then has
            # nothing left to do (a press and its release as one keystroke, as the trace shows).
            return [Key(keys=[_chord(_required(args, "key"))])]
        case "release":
            return []
        case "wait":
            return [_wait(args.get("time") or 2)]
        case "take_screenshot" | "open_computer":
            return []  # every step ends with a fresh screenshot
        case "hotkey":
            return [Key(keys=[_chord(_required(args, "key"))])]
    # The functions UI-TARS 1.x has too, with the same names and meanings.
    return _uitars_actions(name, args, space)


def _required(args: dict[str, Any], key: str) -> Any:
    if args.get(key) in (None, ""):
        raise ValueError(f"missing {key}")
    return args[key]


# ---------------------------------------------------------------------------------------------
# Dialect "opencua": ## Thought / ## Action / ## Code with pyautogui calls

OPENCUA_PROMPT = """\
You are a GUI agent operating a Linux desktop (XFCE with Chromium). You are given a task and a screenshot;
perform the next step with pyautogui actions.

For each step answer in this format:
## Thought:
<what you see, what is done, what to do next>
## Action:
<the next action in one sentence>
## Code:
```python
pyautogui.click(x=500, y=300)
```

Coordinates are {coordinates}.

Allowed code, one call a line:
pyautogui.click(x, y, clicks=1, button='left'), pyautogui.doubleClick(x, y), pyautogui.rightClick(x, y),
pyautogui.middleClick(x, y), pyautogui.tripleClick(x, y), pyautogui.moveTo(x, y), pyautogui.dragTo(x, y),
pyautogui.mouseDown(x, y), pyautogui.mouseUp(x, y), pyautogui.scroll(clicks, x=None, y=None) (positive is
up), pyautogui.hscroll(clicks) (positive is right), pyautogui.hotkey('ctrl', 'c'), pyautogui.press('enter'),
pyautogui.write('text'), time.sleep(seconds)
and these functions:
computer.triple_click(x, y)
computer.wait()  # pause, then look again
computer.terminate(status='success', answer='<the answer, if the task asked one>')  # or status='failure'"""


def opencua_prompt(space: Space) -> str:
    return OPENCUA_PROMPT.format(coordinates=space.describe())


_CODE_BLOCK = re.compile(r"```[ \t]*(?:python|code|py)?[ \t]*\n?(.*?)```", re.S | re.I)
_SECTION = r"^[ \t]*#*[ \t]*{name}[ \t]*:?[ \t]*\n?(.*?)(?=^[ \t]*#+[ \t]*\w+[ \t]*:?[ \t]*$|^[ \t]*##|\Z)"
# pyautogui's positional parameters, for calls that pass x and y without naming them.
_PYAUTOGUI_POSITIONAL = {
    "click": ("x", "y", "clicks", "interval", "button"),
    "doubleClick": ("x", "y", "interval", "button"), "rightClick": ("x", "y"), "middleClick": ("x", "y"),
    "tripleClick": ("x", "y", "interval", "button"), "moveTo": ("x", "y"), "dragTo": ("x", "y"),
    "mouseDown": ("x", "y", "button"), "mouseUp": ("x", "y", "button"), "scroll": ("clicks", "x", "y"),
    "hscroll": ("clicks", "x", "y"), "write": ("message", "interval"), "typewrite": ("message", "interval"),
    "press": ("keys", "presses"), "sleep": ("seconds",), "triple_click": ("x", "y"),
    "terminate": ("status", "answer"), "wait": ("seconds",), "keyDown": ("key",), "keyUp": ("key",),
}


def parse_opencua(text: str, space: Space) -> Parsed:
    blocks = _CODE_BLOCK.findall(text)
    # The last block is the step's code (a thought may quote code); without a fence, the lines
    # that are calls.
    code = blocks[-1] if blocks else "\n".join(line for line in text.splitlines()
                                                if re.match(r"\s*(pyautogui|computer)\.\w+\(", line))
    try:
        statements = ast.parse(code.strip()).body if code.strip() else []
    except SyntaxError as exc:
        raise ChatParseError(f"the code block is not valid Python ({exc.msg}, line {exc.lineno}); answer with "
                             "## Code: and a ```python block such as pyautogui.click(x=500, y=300)") from None
    calls: list[ToolCall] = []
    for statement in statements:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            continue  # "import pyautogui" is not an action
        name, args = _pyautogui_call(statement)
        calls.append(_call(len(calls), name, {"code": ast.unparse(statement), **args},
                           partial(_opencua_actions, name, args, space)))
    if not calls:
        raise ChatParseError("no action found; answer with ## Thought:, ## Action: and ## Code: with a ```python "
                             "block such as pyautogui.click(x=500, y=300), or computer.terminate(status='success')")
    thought = re.search(_SECTION.format(name="Thought"), text, re.S | re.M | re.I)
    action = re.search(_SECTION.format(name="Action"), text, re.S | re.M | re.I)
    said = "\n".join(m[1].strip() for m in (thought, action) if m and m[1].strip())
    return Parsed(calls, said)


def _pyautogui_call(statement: ast.stmt) -> tuple[str, dict[str, Any]]:
    """``pyautogui.click(x=1, y=2)`` -> ("pyautogui.click", {"x": 1, "y": 2}). Only literal
    arguments are read (ast.literal_eval): the code is data, never run."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return ast.unparse(statement)[:80], {"_error": "not a call"}
    call = statement.value
    name = ast.unparse(call.func)
    base = name.rsplit(".", 1)[-1]
    positional = _PYAUTOGUI_POSITIONAL.get(base, ())
    args: dict[str, Any] = {}
    try:
        values = [ast.literal_eval(a) for a in call.args]
        if base in ("hotkey",):
            args["keys"] = values[0] if len(values) == 1 and isinstance(values[0], list) else values
        else:
            args.update(zip(positional, values))
            if len(values) > len(positional):
                args["_error"] = f"too many positional arguments for {name}"
        for keyword in call.keywords:
            args[keyword.arg or "**"] = ast.literal_eval(keyword.value)
    except ValueError:
        args["_error"] = "arguments must be literal values (numbers, strings, lists)"
    return name, args


# The calls each module offers the model (the prompt lists them); anything else is refused, unread.
_OPENCUA_MODULES = {
    "pyautogui": set(_PYAUTOGUI_POSITIONAL) - {"sleep", "triple_click", "terminate", "wait"} | {"hotkey"},
    "computer": {"triple_click", "terminate", "wait"},
    "time": {"sleep"},
}


def _opencua_actions(name: str, args: dict[str, Any], space: Space) -> list[Action]:  # noqa: C901
    module, _, base = name.rpartition(".")
    if base not in _OPENCUA_MODULES.get(module, ()):
        raise ValueError(f"unknown action {name!r}; use the pyautogui calls and computer functions listed")
    if "_error" in args:
        raise ValueError(args["_error"])

    def at(required: bool = True) -> dict[str, int]:
        if args.get("x") is None or args.get("y") is None:
            if required:
                raise ValueError("needs x and y")
            return {}
        return _point(space, [args["x"], args["y"]])

    def notches() -> int:
        return min(50, max(1, round(abs(float(_required(args, "clicks"))))))

    def button() -> str:
        chosen = str(args.get("button", "left")).lower()
        if chosen not in ("left", "right", "middle"):
            raise ValueError(f"button {chosen!r}: use left, right or middle")
        return chosen

    match name if name.startswith("computer.") else base:
        case "click":
            clicks = int(args.get("clicks", 1))
            by_count: dict[int, type[Click | DoubleClick | TripleClick]] = {1: Click, 2: DoubleClick, 3: TripleClick}
            kind = by_count.get(clicks)
            if kind is None:
                raise ValueError(f"clicks={clicks}: 1, 2 or 3")
            return [kind(button=button(), **at(required=False))]
        case "doubleClick":
            return [DoubleClick(button=button(), **at(required=False))]
        case "tripleClick" | "computer.triple_click":
            return [TripleClick(**at(required=False))]
        case "rightClick":
            return [Click(button="right", **at(required=False))]
        case "middleClick":
            return [Click(button="middle", **at(required=False))]
        case "moveTo":
            return [Move(**at())]
        case "dragTo":
            # From wherever the pointer is (a moveTo before it), as pyautogui does.
            return [MouseDown(button=button()), Move(**at()), MouseUp(button=button())]
        case "mouseDown":
            return [MouseDown(button=button(), **at(required=False))]
        case "mouseUp":
            return [MouseUp(button=button(), **at(required=False))]
        case "scroll":
            direction = "up" if float(_required(args, "clicks")) > 0 else "down"
            return [Scroll(direction=direction, amount=notches(), **at(required=False))]
        case "hscroll":
            direction = "right" if float(_required(args, "clicks")) > 0 else "left"
            return [Scroll(direction=direction, amount=notches(), **at(required=False))]
        case "hotkey":
            keys = args.get("keys") or []
            return [Key(keys=[_chord([str(k) for k in keys])])]
        case "press":
            keys = _required(args, "keys")
            keys = keys if isinstance(keys, list) else [keys]
            presses = int(args.get("presses", 1))
            if not 1 <= presses <= 100:
                raise ValueError(f"presses={presses}: 1 to 100")
            return [Key(keys=[str(k) for k in keys] * presses)]
        case "keyDown":
            # No key stays held across calls here: the press is the whole keystroke, and keyUp
            # then has nothing left to do (as UI-TARS-2's press and release).
            return [Key(keys=[_chord(_required(args, "key"))])]
        case "keyUp":
            return []
        case "write" | "typewrite":
            return _typing(_required(args, "message"))
        case "sleep" | "computer.wait":
            return [_wait(args.get("seconds", 2))]
        case "computer.terminate":
            status = str(args.get("status", "success")).lower()
            if status == "success":
                return [Done(answer=str(args["answer"]) if args.get("answer") else None)]
            return [Fail(reason=f"the model ended the task as failed (terminate, status {status})")]
    raise ValueError(f"unknown action {name!r}; use the pyautogui calls and computer functions listed")


# ---------------------------------------------------------------------------------------------
# Grounding dialects "gta1" and "holo1.5": the instruction names one element; the answer is its point

GTA1_PROMPT = """\
You are an expert UI element locator. Given a GUI image and a user's element description, provide the \
coordinates of the specified element as a single (x,y) point. The image resolution is height {height} and \
width {width}. For elements with area, return the center point.

Output the coordinate pair exactly:
(x,y)"""


def gta1_prompt(space: Space) -> str:
    return GTA1_PROMPT.format(width=space.width, height=space.height)


HOLO_PROMPT = """\
Localize an element on the GUI image according to the provided target and output a click position.
* Only output the click position, as the JSON object {{"action": "click_absolute", "x": <x>, "y": <y>}}, \
nothing else.
* x is the number of pixels from the left edge, y from the top edge, of the {width}x{height} image.
Your target is in the user's message."""


def holo_prompt(space: Space) -> str:
    return HOLO_PROMPT.format(width=space.width, height=space.height)


_PAIR = re.compile(r"\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)")


def parse_gta1(text: str, space: Space) -> Parsed:
    match = _PAIR.search(text)
    if match is None:
        raise ChatParseError("no (x,y) point in the reply; output the coordinate pair exactly: (x,y)")
    point = [float(match[1]), float(match[2])]
    return Parsed([_call(0, "click", {"x": point[0], "y": point[1]}, lambda: [Click(**_point(space, point))])],
                  text[:match.start()].strip())


def parse_holo(text: str, space: Space) -> Parsed:
    obj = next((o for o in _json_objects(text) if "x" in o and "y" in o), None)
    if obj is not None:
        action = str(obj.get("action", "click_absolute"))
        raw = {"action": action, "x": obj["x"], "y": obj["y"]}

        def click() -> list[Action]:
            if action != "click_absolute":
                raise ValueError(f"unknown action {action!r}; answer with click_absolute")
            return [Click(**_point(space, [obj["x"], obj["y"]]))]
        return Parsed([_call(0, action, raw, click)])
    match = re.search(r"click\s*" + _PAIR.pattern, text, re.I)  # Holo1's own "Click(x, y)"
    if match is None:
        raise ChatParseError('no click position in the reply; output {"action": "click_absolute", "x": <x>, '
                             '"y": <y>} and nothing else')
    point = [float(match[1]), float(match[2])]
    return Parsed([_call(0, "click_absolute", {"x": point[0], "y": point[1]},
                         lambda: [Click(**_point(space, point))])])


# ---------------------------------------------------------------------------------------------
# Dialects: prompt + parser + coordinate space


@dataclass(frozen=True)
class Dialect:
    name: str
    prompt: Callable[[Space], str]
    parse: Callable[[str, Space], Parsed]
    # pixels: of the image sent; smart: of the image after Qwen's smart resize; relative: 0..1000
    coordinates: Literal["pixels", "smart", "relative"]
    # Generic models see a moderate image; the VL families were trained on full-size screenshots.
    default_image: tuple[int, int] = DISPLAY
    # A grounding model: one point for one description, no conversation (see the module's doc).
    grounding: bool = False

    def layout(self, image_size: tuple[int, int] | None, min_pixels: int,
               max_pixels: int) -> tuple[tuple[int, int], Space]:
        """The size of the image to send and the space the model's coordinates are in."""
        width, height = image_size or self.default_image
        if self.coordinates == "relative":
            return (width, height), coords.relative()
        space = (coords.smart_resized(width, height, min_pixels=min_pixels, max_pixels=max_pixels)
                 if self.coordinates == "smart" else coords.pixels(width, height))
        # Send exactly the image the model sees, so that the size we state is the size it gets.
        return (space.width, space.height), space


DIALECTS: dict[str, Dialect] = {d.name: d for d in (
    Dialect("json", json_prompt, parse_json, "pixels", default_image=(1280, 720)),
    Dialect("uitars-1.0", uitars_prompt, parse_uitars, "relative"),
    Dialect("uitars-1.5", uitars_prompt, parse_uitars, "smart"),
    Dialect("qwen25", qwen_prompt, parse_qwen, "smart"),
    Dialect("qwen3", qwen_prompt, parse_qwen, "relative"),
    Dialect("uitars-2", uitars2_prompt, parse_uitars2, "relative"),
    Dialect("opencua", opencua_prompt, parse_opencua, "smart"),
    Dialect("gta1", gta1_prompt, parse_gta1, "smart", grounding=True),
    Dialect("holo1.5", holo_prompt, parse_holo, "smart", grounding=True),
)}


def detect_dialect(model: str) -> str:
    """The dialect a model name implies: "bytedance/UI-TARS-1.5-7B" -> "uitars-1.5", else "json".

    UI-TARS-2 is "UI-TARS-2..." but not "UI-TARS-2B-SFT" (UI-TARS 1.0 at 2 billion parameters);
    OpenCUA, GTA1 and Holo1.5 (Holo1 too) are Qwen2.5-VL fine-tunes, so their names are read
    before Qwen's."""
    name = re.sub(r"[-_\s]", "", model.lower())  # "Qwen2.5-VL", "qwen2_5_vl", "qwen2.5vl:7b" alike
    if "opencua" in name:
        return "opencua"
    if "gta1" in name:
        return "gta1"
    if "holo1" in name:
        return "holo1.5"
    if "uitars" in name:
        rest = name.split("uitars", 1)[1]
        if rest.startswith("2") and not re.match(r"2(\.\d+)?b", rest):
            return "uitars-2"
        return "uitars-1.5" if "1.5" in name or rest.startswith("15") else "uitars-1.0"
    if "qwen2.5vl" in name or "qwen25vl" in name:
        return "qwen25"
    if "qwen3vl" in name:
        return "qwen3"
    return "json"


# ---------------------------------------------------------------------------------------------
# The provider


class ChatProvider(Provider):
    """One conversation with a vision model behind an OpenAI-compatible chat-completions server."""

    def __init__(self, instruction: str, *, model: str, system: str = "", dialect: str | None = None,
                 base_url: str | None = None, api_key: str | None = None,
                 image_size: tuple[int, int] | None = None, timeout: float = 120.0, max_tokens: int = 1024,
                 temperature: float = 0.0, keep_images: int = 3,
                 min_pixels: int = QWEN_MIN_PIXELS, max_pixels: int = QWEN_MAX_PIXELS):
        super().__init__(instruction, model=model, system=system)
        self.name = f"chat/{model}"
        dialect = dialect or detect_dialect(model)
        if dialect not in DIALECTS:
            raise ValueError(f"unknown chat dialect {dialect!r}; use one of {', '.join(DIALECTS)}")
        if keep_images < 1:
            raise ValueError("keep_images must be at least 1: the model needs the current screen")
        self.dialect = DIALECTS[dialect]
        self.sees_marks = not self.dialect.grounding  # shown the screen and the instruction alone
        self.image_size, self.space = self.dialect.layout(image_size, min_pixels, max_pixels)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.keep_images = keep_images
        # The SDK would retry on its own and wait up to 600 s; the loop owns retries and budgets.
        self._client = openai.OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                                     api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
                                     max_retries=0, timeout=timeout)
        self._system = "\n\n".join(p for p in (system, self.dialect.prompt(self.space)) if p)
        self._history: list[dict[str, Any]] = []
        self._call_names: dict[str, str] = {}
        self._points: dict[str, tuple[int, int]] = {}  # a call's click, in display pixels
        self._turns = 0

    def coordinate_space(self, frame) -> Space:
        return self.space

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        if self.dialect.grounding and self._clicked(results):
            # A grounding model locates; it does not judge the outcome. Its click was performed.
            return ModelTurn(done=True, answer=self._clicked(results), image_size=self.image_size)
        png = observation.frame.scaled_png(*self.image_size)
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode(),
                                                    "detail": "auto"}}
        if self.dialect.grounding:
            # One screen and the description, as these models were trained: no history. A failed
            # click (off the screen, unreadable) is asked again on the current screen.
            user: dict[str, Any] = {"role": "user", "content": [image, {"type": "text", "text": self.instruction}]}
            messages = [user]
        else:
            user = {"role": "user", "content": [
                {"type": "text", "text": self._user_text(observation, results, note)}, image]}
            messages = keep_last_images([*self._history, user], self.keep_images)
        # The messages are the wire's JSON, kept as plain dicts (keep_last_images rewrites them)
        wire = cast("list[ChatCompletionMessageParam]", [{"role": "system", "content": self._system}, *messages])
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=wire,
                max_tokens=self.max_tokens, temperature=self.temperature)
        except openai.OpenAIError as exc:
            raise call_error(exc) from exc  # history untouched: the loop may retry this very turn

        choice = response.choices[0] if response.choices else None
        message = choice.message if choice else None
        text = (message.content if message else None) or ""
        self._history = [*messages, {"role": "assistant", "content": text}]
        self._turns += 1
        turn = ModelTurn(text=text, usage=_usage(response.usage), image_size=self.image_size)
        try:
            parsed = self.dialect.parse(text, self.space)
        except ChatParseError as exc:
            cut = choice is not None and choice.finish_reason == "length"
            turn.parse_error = f"{exc}{' (the reply was cut off at max_tokens)' if cut else ''}"
            return turn
        for index, call in enumerate(parsed.calls):
            call.id = f"call_{self._turns}_{index}"
            self._call_names[call.id] = call.name
            # A click where the pointer is has no point to report
            points = [(a.x, a.y) for a in call.actions if isinstance(a, Click) and a.x is not None and a.y is not None]
            if points:
                self._points[call.id] = points[0]
        turn.calls = parsed.calls
        # Reasoning servers (vLLM's reasoning parsers) return the thinking apart from the content.
        reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
        turn.reasoning = reasoning if isinstance(reasoning, str) else parsed.thought
        return turn

    def _clicked(self, results: list[CallResult]) -> str | None:
        """What a grounding model's performed click was, or None when none was performed."""
        done = [self._points.get(r.call_id) for r in results if r.ok and r.call_id in self._points]
        return f"clicked {self.instruction!r} at display pixel {done[-1]}" if done else None

    def _user_text(self, observation: Observation, results: list[CallResult], note: str | None) -> str:
        lines = [f"Task: {self.instruction}"] if not self._history else []
        for result in results:
            name = self._call_names.get(result.call_id, result.call_id)
            outcome = "done" if result.ok else f"failed: {result.error or 'unknown error'}"
            lines.append(f"Result of {name}: {outcome}" + (f" ({result.output})" if result.output else ""))
        if note:
            lines.append(note)
        if observation.url:
            lines.append(f"Current URL: {observation.url}")
        lines.append("The screen now:")
        return "\n".join(lines)


def keep_last_images(messages: list[dict[str, Any]], keep: int) -> list[dict[str, Any]]:
    """The messages with all but the last ``keep`` screenshots replaced by a short text: old
    screens cost tokens and memory and say little about the present."""
    out = []
    for message in reversed(messages):
        content = message["content"]
        if isinstance(content, list):
            parts = []
            for part in content:
                if part.get("type") == "image_url":
                    if keep > 0:
                        keep -= 1
                    else:
                        part = {"type": "text", "text": "(an earlier screenshot, omitted)"}
                parts.append(part)
            message = {**message, "content": parts}
        out.append(message)
    return out[::-1]


def _usage(usage: CompletionUsage | None) -> Usage:
    if usage is None:
        return Usage()
    details = usage.prompt_tokens_details
    return Usage(input_tokens=usage.prompt_tokens or 0, output_tokens=usage.completion_tokens or 0,
                 cache_read_tokens=(details.cached_tokens or 0) if details else 0)


def call_error(exc: openai.OpenAIError) -> ModelCallError:
    """An SDK exception -> ModelCallError; rate limits, 5xx and network trouble are worth a retry."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        # The SDK hands over the body's "error" object; its message is the part worth reading.
        detail = exc.body.get("message") if isinstance(exc.body, dict) else None
        return ModelCallError(f"chat server answered HTTP {status}: {detail or exc.message}",
                              transient=status == 429 or status >= 500,
                              retry_after=retry_after(exc.response.headers), status=status)
    if isinstance(exc, openai.APITimeoutError):
        return ModelCallError("chat server did not answer in time", transient=True)
    if isinstance(exc, openai.APIConnectionError):
        return ModelCallError(f"chat server unreachable: {exc.__cause__ or exc}", transient=True)
    return ModelCallError(f"chat call failed: {exc}")
