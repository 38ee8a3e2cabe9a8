"""Models behind any OpenAI-compatible chat-completions server (vLLM, Ollama, hosted): "chat/<model>".

Such models have no computer tool: they answer in text, and each family has its own habits. A
*dialect* pairs the prompt that tells the model how to answer with the parser that reads the answer:

    json        our documented protocol (JSON_PROTOCOL below), pixels of the screenshot sent
    uitars-1.0  UI-TARS "Thought: ... Action: click(start_box='(x,y)')", relative 0..1000
    uitars-1.5  the same format, pixels of the smart-resized image
    qwen25      Qwen2.5-VL <tool_call>{"name": "computer_use", ...}</tool_call>, pixels of the
                smart-resized image
    qwen3       the same format, relative 0..1000

The parsers are pure functions (text, Space) -> Parsed; they convert coordinates with vision.coords,
so every Action they return is already in display pixels.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import openai
from openai.types import CompletionUsage
from pydantic import ValidationError

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
from vision.actions import Action, Done, Fail
from vision.coords import DISPLAY, QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, Space
from vision.providers.base import (
    CallResult,
    ModelCallError,
    ModelTurn,
    Observation,
    Provider,
    ToolCall,
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

JSON_ACTIONS: dict[str, type] = {
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
    return cls.model_validate({k: v for k, v in data.items() if k in cls.model_fields})


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


def _uitars_actions(name: str, args: dict[str, str], space: Space) -> list[Action]:
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


def _qwen_actions(args: dict[str, Any], space: Space) -> list[Action]:
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
)}


def detect_dialect(model: str) -> str:
    """The dialect a model name implies: "bytedance/UI-TARS-1.5-7B" -> "uitars-1.5", else "json"."""
    name = re.sub(r"[-_\s]", "", model.lower())  # "Qwen2.5-VL", "qwen2_5_vl", "qwen2.5vl:7b" alike
    if "uitars" in name:
        return "uitars-1.5" if "1.5" in name or name.split("uitars", 1)[1].startswith("15") else "uitars-1.0"
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
        self._turns = 0

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        png = observation.frame.scaled_png(*self.image_size)
        user = {"role": "user", "content": [
            {"type": "text", "text": self._user_text(observation, results, note)},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode(),
                                                "detail": "auto"}},
        ]}
        messages = keep_last_images([*self._history, user], self.keep_images)
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=[{"role": "system", "content": self._system}, *messages],
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
        turn.calls = parsed.calls
        # Reasoning servers (vLLM's reasoning parsers) return the thinking apart from the content.
        reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
        turn.reasoning = reasoning if isinstance(reasoning, str) else parsed.thought
        return turn

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
