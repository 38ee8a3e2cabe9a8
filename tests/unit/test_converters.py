"""vision.converters and the executors over them, with no X: every action of both Anthropic tool
versions (and the toolset) and every OpenAI action type, round-tripped through a declared screen.

A round trip: a display pixel -> what a model seeing the declared screen would name it -> the
converter's canonical action -> back on the display within one pixel; and the other way for what
the executor reports (cursor_position). Then each call through ``ComputerService`` over a fake
desktop, to see what ran and what the vendor gets back.
"""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image
from pydantic import ValidationError

from desktop.actions import (
    Click,
    DoubleClick,
    Drag,
    HoldKey,
    Key,
    MouseDown,
    MouseUp,
    Move,
    Region,
    Scroll,
    TripleClick,
    Type,
    Wait,
    Zoom,
)
from desktop.errors import InvalidAction, OperatorInControl, TypedIntoNothing
from tests.fakes.services import FakeDesktops
from vision import coords
from vision.actions import CallResult, CursorPosition, Screenshot
from vision.converters import anthropic as claude
from vision.converters import openai as gpt
from vision.models import AnthropicComputerRequest, GeminiComputerRequest, OpenAIComputerRequest
from vision.vendors.computer import ComputerService

SPACES = {"1280x720": coords.pixels(1280, 720), "1429x804": coords.pixels(1429, 804),
          "1024x768": coords.pixels(1024, 768), "1920x1080": coords.pixels(1920, 1080)}
TARGET = (1333, 777)  # a display pixel no scale maps exactly
START = (101, 1003)


def near(point, expected=TARGET) -> bool:
    return abs(point[0] - expected[0]) <= 1 and abs(point[1] - expected[1]) <= 1


def model(space: coords.Space, point=TARGET) -> list[int]:
    return list(space.from_display(*point))


# --- Anthropic: every action, as each tool version has it ------------------------------------------


def anthropic_cases(space: coords.Space) -> dict[str, tuple[dict, callable]]:
    """action -> (its input, a check of the canonical actions it becomes)."""
    at = model(space)

    def clicked(cls, button="left", modifiers=()):
        def check(actions):
            [a] = actions
            return isinstance(a, cls) and a.button == button and near((a.x, a.y)) and a.modifiers == list(modifiers)
        return check

    return {
        "key": ({"text": "ctrl+shift+t Return", "repeat": 2},
                lambda a: a == [Key(keys=["ctrl+shift+t", "Return", "ctrl+shift+t", "Return"])]),
        "type": ({"text": "héllo\n"}, lambda a: a == [Type(text="héllo\n")]),
        "mouse_move": ({"coordinate": at}, lambda a: isinstance(a[0], Move) and near((a[0].x, a[0].y))),
        "left_click": ({"coordinate": at, "text": "ctrl+shift"}, clicked(Click, modifiers=["ctrl", "shift"])),
        "right_click": ({"coordinate": at}, clicked(Click, "right")),
        "middle_click": ({"coordinate": at}, clicked(Click, "middle")),
        "double_click": ({"coordinate": at, "key": "alt"}, clicked(DoubleClick, modifiers=["alt"])),
        "triple_click": ({"coordinate": at}, clicked(TripleClick)),
        "left_click_drag": ({"start_coordinate": model(space, START), "coordinate": at},
                            lambda a: isinstance(a[0], Drag) and near((a[0].path[0].x, a[0].path[0].y), START)
                            and near((a[0].path[1].x, a[0].path[1].y))),
        "left_mouse_down": ({"coordinate": at}, lambda a: isinstance(a[0], MouseDown) and near((a[0].x, a[0].y))),
        "left_mouse_up": ({}, lambda a: a == [MouseUp()]),
        "scroll": ({"coordinate": at, "scroll_direction": "left", "scroll_amount": 7, "text": "shift"},
                   lambda a: isinstance(a[0], Scroll) and (a[0].direction, a[0].amount, a[0].modifiers)
                   == ("left", 7, ["shift"]) and near((a[0].x, a[0].y))),
        "hold_key": ({"text": "shift", "duration": 1.25}, lambda a: a == [HoldKey(keys="shift", duration_ms=1250)]),
        "wait": ({"duration": 2.5}, lambda a: a == [Wait(duration_ms=2500)]),
        "screenshot": ({}, lambda a: a == [Screenshot()]),
        "cursor_position": ({}, lambda a: a == [CursorPosition()]),
        "zoom": ({"region": [0, 0, space.width // 2, space.height // 2]},
                 lambda a: isinstance(a[0], Zoom) and a[0].region.x0 == 0 and abs(a[0].region.x1 - 960) <= 1
                 and abs(a[0].region.y1 - 540) <= 1 and fills(a[0], space)),
    }


def fills(zoom: Zoom, space: coords.Space) -> bool:
    """The zoomed image fits the declared screen, its aspect kept, touching two of its edges."""
    width, height = round(zoom.region.width * zoom.scale), round(zoom.region.height * zoom.scale)
    return width <= space.width + 1 and height <= space.height + 1 and (
        abs(width - space.width) <= 1 or abs(height - space.height) <= 1)


def test_every_action_of_the_tool_has_a_case():
    assert set(anthropic_cases(SPACES["1280x720"])) == set(claude.ACTIONS)


@pytest.mark.parametrize("version", list(claude.TOOL_VERSIONS))
@pytest.mark.parametrize("size", list(SPACES))
@pytest.mark.parametrize("action", claude.ACTIONS)
def test_anthropic_action_round_trips(version, size, action):
    space = SPACES[size]
    tool = claude.TOOL_VERSIONS[version]
    args, check = anthropic_cases(space)[action]
    if tool.toolset:  # each action its own tool_use, named after it
        call = claude.parse_tool_use("t1", action, args, space, toolset_name="computer", version=tool)
    else:
        call = claude.parse_tool_use("t1", "computer", {"action": action, **args}, space, version=tool)
    if action == "zoom" and not tool.zoom:
        assert call.actions == [] and "computer_20251124" in call.error
        return
    assert call.error is None, call.error
    assert check(call.actions), call.actions


@pytest.mark.parametrize("size", list(SPACES))
def test_cursor_position_answers_in_the_declared_space(size):
    space = SPACES[size]
    call = claude.parse_tool_use("t", "computer", {"action": "cursor_position"}, space)
    content, is_error = claude.result_content(call, CallResult("t", ok=True, output="X=1333,Y=777"), space)
    assert not is_error
    x, y = (int(v.split("=")[1]) for v in content[0]["text"].split(","))
    assert [x, y] == model(space) and near(space.to_display(x, y))


@pytest.mark.parametrize("args, expected", [
    ({"action": "left_click", "coordinate": [1280, 0]}, "off the 1280x720 screen"),
    ({"action": "left_click", "coordinate": "10,10"}, "must be [x, y]"),
    ({"action": "mouse_move"}, "coordinate is required"),
    ({"action": "scroll", "scroll_direction": "sideways"}, "scroll_direction"),
    ({"action": "key", "text": "ctrl+a", "repeat": 0}, "repeat"),
    ({"action": "key", "text": "hyperspace"}, "hyperspace"),
    ({"action": "hold_key", "text": "shift", "duration": -1}, "seconds"),
    ({"action": "hold_key", "text": "shift", "duration": 11}, "10000"),
    ({"action": "zoom", "region": [10, 10, 5, 5]}, "x0 < x1"),
    ({"action": "teleport"}, "unknown action"),
    ({"action": "key", "text": "a", "repeat": 10**9}, "from 1 to 100"),
    ({"action": "key", "text": "a b", "repeat": 51}, "at most 100"),
    ({"action": "left_click", "coordinate": [10**400, 1]}, "must be [x, y] numbers"),
    ({"action": "wait", "duration": 1e300}, "30000"),
    ({"action": "hold_key", "text": "shift", "duration": 10**400}, "seconds"),
])
def test_anthropic_mistakes_are_call_errors(args, expected):
    call = claude.parse_tool_use("t", "computer", args, SPACES["1280x720"], version=claude.COMPUTER_20251124)
    assert call.actions == [] and expected in call.error
    content, is_error = claude.result_content(call, CallResult("t", ok=False, error=call.error), SPACES["1280x720"])
    assert is_error and content == [{"type": "text", "text": call.error}]


def test_another_tool_name_is_a_call_error():
    assert "only the computer tool" in claude.parse_tool_use("t", "bash", {"action": "type"}, SPACES["1280x720"]).error
    call = claude.parse_tool_use("t", "left_click", {}, SPACES["1280x720"], toolset_name="editor")
    assert "only the computer tool" in call.error


# --- OpenAI: every action type ----------------------------------------------------------------------


def openai_cases(space: coords.Space) -> dict[str, tuple[dict, callable]]:
    x, y = model(space)
    sx, sy = model(space, START)
    return {
        "click": ({"type": "click", "button": "right", "x": x, "y": y, "keys": ["CTRL"]},
                  lambda a: isinstance(a[0], Click) and a[0].button == "right" and a[0].modifiers == ["ctrl"]
                  and near((a[0].x, a[0].y))),
        "double_click": ({"type": "double_click", "x": x, "y": y},
                         lambda a: isinstance(a[0], DoubleClick) and near((a[0].x, a[0].y))),
        "drag": ({"type": "drag", "path": [{"x": sx, "y": sy}, {"x": x, "y": y}]},
                 lambda a: isinstance(a[0], Drag) and near((a[0].path[0].x, a[0].path[0].y), START)
                 and near((a[0].path[-1].x, a[0].path[-1].y))),
        "keypress": ({"type": "keypress", "keys": ["CTRL", "A"]}, lambda a: a == [Key(keys=["ctrl+a"])]),
        "move": ({"type": "move", "x": x, "y": y}, lambda a: isinstance(a[0], Move) and near((a[0].x, a[0].y))),
        "screenshot": ({"type": "screenshot"}, lambda a: a == [Screenshot()]),
        "scroll": ({"type": "scroll", "x": x, "y": y, "scroll_x": -120, "scroll_y": 240},
                   lambda a: [(s.direction, s.amount) for s in a] == [("down", 2), ("left", 1)]
                   and all(near((s.x, s.y)) for s in a)),
        "type": ({"type": "type", "text": "hello"}, lambda a: a == [Type(text="hello")]),
        "wait": ({"type": "wait"}, lambda a: a == [Wait(duration_ms=1000)]),
    }


def test_every_openai_action_type_has_a_case():
    assert set(openai_cases(SPACES["1280x720"])) == set(gpt.ACTION_TYPES)


@pytest.mark.parametrize("size", list(SPACES))
@pytest.mark.parametrize("kind", gpt.ACTION_TYPES)
def test_openai_action_round_trips(size, kind):
    space = SPACES[size]
    action, check = openai_cases(space)[kind]
    actions, error = gpt.map_actions([action], space)
    assert error is None and check(actions), (error, actions)


@pytest.mark.parametrize("pixels, expected", [(240, 2), (-240, 2), (120, 1), (1, 1), (179, 1), (180, 2), (300, 3),
                                              (359, 3), (6000, 50), (10**6, 50)])
def test_scroll_pixels_to_notches_at_120_per_notch(pixels, expected):
    assert gpt.SCROLL_PX_PER_NOTCH == 120 and gpt.notches(pixels) == expected


@pytest.mark.parametrize("action", [{"type": "click", "x": 10**400, "y": 1},
                                    {"type": "scroll", "x": 1, "y": 1, "scroll_y": 10**400},
                                    {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 1, "y": -(10**400)}]}])
def test_numbers_beyond_any_float_are_call_errors(action):
    actions, error = gpt.map_actions([action], SPACES["1920x1080"])
    assert actions == [] and error.startswith("action 1")


def test_a_keypress_list_is_one_chord_not_a_sequence():
    [key] = gpt.map_action({"type": "keypress", "keys": ["CTRL", "SHIFT", "T"]}, SPACES["1920x1080"])
    assert key.keys == ["ctrl+shift+t"]  # one element: pressed together
    assert "keypress without keys" in gpt.map_actions([{"type": "keypress", "keys": []}], SPACES["1920x1080"])[1]


# --- ComputerService over a fake desktop -------------------------------------------------------------


def size_of(png: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(png)).size


def b64size(data: str) -> tuple[int, int]:
    return size_of(base64.b64decode(data.removeprefix("data:image/png;base64,")))


@pytest.fixture
def desktops():
    return FakeDesktops()


def run_claude(desktops, input, version="computer_20251124", **extra):
    request = AnthropicComputerRequest(tool_version=version, display_width_px=1280, display_height_px=720,
                                       input=input, **extra)
    return ComputerService(desktops).anthropic("s1", request)


@pytest.mark.parametrize("action", claude.ACTIONS)
def test_every_anthropic_action_runs_and_answers(desktops, action):
    args, check = anthropic_cases(SPACES["1280x720"])[action]
    desktops.desk.pointer = TARGET
    result = run_claude(desktops, {"action": action, **args})
    assert result.is_error is False
    blocks = [b.model_dump() for b in result.content]
    if action == "cursor_position":
        assert blocks == [{"type": "text", "text": "X={:d},Y={:d}".format(*model(SPACES["1280x720"]))}]
    elif action == "zoom":
        [zoomed] = blocks
        assert b64size(zoomed["source"]["data"]) == (1280, 720)
    else:
        [screen] = blocks
        assert screen["type"] == "image" and b64size(screen["source"]["data"]) == (1280, 720)
    ran = desktops.desk.performed
    if action in ("screenshot", "cursor_position", "zoom"):
        assert ran == []
    else:
        assert check(ran), ran


def test_an_anthropic_mistake_runs_nothing_and_answers_is_error_with_the_screen(desktops):
    result = run_claude(desktops, {"action": "left_click", "coordinate": [2000, 5]}, tool_use_id="toolu_9")
    assert result.is_error and desktops.desk.performed == []
    text, screen = result.content
    assert "off the 1280x720 screen" in text.text and screen.type == "image"
    assert result.tool_result == {"type": "tool_result", "tool_use_id": "toolu_9", "is_error": True,
                                  "content": [b.model_dump() for b in result.content]}


def test_the_desktops_refusal_of_an_action_is_is_error_other_faults_propagate(desktops):
    desktops.refusal = InvalidAction("url: nope")
    result = run_claude(desktops, {"action": "left_click", "coordinate": [5, 5]})
    assert result.is_error and result.content[0].text == "invalid_action: url: nope"
    desktops.refusal = OperatorInControl("a person has taken over")
    with pytest.raises(OperatorInControl):
        run_claude(desktops, {"action": "left_click", "coordinate": [5, 5]})


def test_the_toolset_form_echoes_toolset_name(desktops):
    result = run_claude(desktops, {"coordinate": [640, 360]}, version="computer_toolset_20260801",
                        name="double_click", tool_use_id="toolu_2")
    assert desktops.desk.performed == [DoubleClick(x=960, y=540)]
    assert result.tool_result["toolset_name"] == "computer" and "is_error" not in result.tool_result


def test_openai_batch_runs_in_order_and_answers_the_call_output(desktops):
    checks = [{"id": "sc1", "code": "irrelevant_domain", "message": "Check the domain."}]
    request = OpenAIComputerRequest(actions=[{"type": "click", "x": 640, "y": 360},
                                             {"type": "keypress", "keys": ["CTRL", "A"]},
                                             {"type": "scroll", "x": 0, "y": 0, "scroll_x": 0, "scroll_y": 240}],
                                    display_width=1280, display_height=720, pending_safety_checks=checks,
                                    call_id="call_1")
    result = ComputerService(desktops).openai("s1", request)
    assert desktops.desk.performed == [Click(x=960, y=540), Key(keys=["ctrl+a"]),
                                       Scroll(x=0, y=0, direction="down", amount=2)]
    assert result.error is None and b64size(result.output.image_url) == (1280, 720)
    assert [c.model_dump(exclude_none=True) for c in result.acknowledged_safety_checks] == checks
    assert result.computer_call_output == {"type": "computer_call_output", "call_id": "call_1",
                                           "acknowledged_safety_checks": checks,
                                           "output": result.output.model_dump()}


def test_openai_batch_is_all_or_nothing(desktops):
    request = OpenAIComputerRequest(actions=[{"type": "click", "x": 1, "y": 1}, {"type": "keypress", "keys": []}])
    result = ComputerService(desktops).openai("s1", request)
    assert desktops.desk.performed == [] and result.error.startswith("action 2 (keypress)")
    assert b64size(result.output.image_url) == (1920, 1080)  # the default: the display's own size


def _each_vendor(desktops, claude_input: dict, gpt_action: dict, gemini_call: dict) -> dict:
    """One call through each executor: what its caller sees and what its model would read."""
    service = ComputerService(desktops)
    anthropic = run_claude(desktops, claude_input)
    openai = service.openai("s1", OpenAIComputerRequest(action=gpt_action, display_width=1280, display_height=720))
    [gemini] = service.gemini("s1", GeminiComputerRequest(function_calls=[gemini_call])).function_responses
    texts = " ".join(b.text for b in anthropic.content if b.type == "text")
    return {"anthropic": (anthropic.no_effect, texts, anthropic.is_error),
            "openai": (openai.no_effect, openai.error or "", openai.error is not None),
            "gemini": (gemini.response.get("no_effect", False),
                       gemini.response.get("output") or gemini.response.get("error") or "", "error" in gemini.response)}


CLICK = ({"action": "left_click", "coordinate": [640, 360]}, {"type": "click", "x": 640, "y": 360, "button": "left"},
         {"name": "click_at", "args": {"x": 500, "y": 500}})


def test_a_call_that_worked_and_changed_nothing_is_said_to_every_vendors_model(desktops):
    desktops.desk.inert = True  # a click beside every control: it runs, the screen stays the same
    for vendor, (no_effect, text, failed) in _each_vendor(desktops, *CLICK).items():
        assert no_effect and not failed, vendor
        if vendor != "openai":  # computer_call_output has no place for text: the caller's flag only
            assert "changed nothing on the screen" in text, (vendor, text)
    # Not meant to change anything: a move, a copy.
    moves = _each_vendor(desktops, {"action": "mouse_move", "coordinate": [5, 5]}, {"type": "move", "x": 5, "y": 5},
                         {"name": "hover_at", "args": {"x": 5, "y": 5}})
    copies = _each_vendor(desktops, {"action": "key", "text": "ctrl+c"}, {"type": "keypress", "keys": ["CTRL", "C"]},
                          {"name": "key_combination", "args": {"keys": "control+c"}})
    assert [flag for answers in (moves, copies) for flag, _, _ in answers.values()] == [False] * 6
    # A call that changed the screen says nothing of the kind.
    desktops.desk.inert = False
    for vendor, (no_effect, text, _) in _each_vendor(desktops, *CLICK).items():
        assert not no_effect and "changed nothing" not in text, vendor


def test_a_type_with_nothing_to_take_it_is_answered_to_the_model_not_raised(desktops):
    desktops.refusal = TypedIntoNothing("nothing was typed: the keyboard focus is on <body>, which takes no text",
                                        focused={"tag": "body"})
    answers = _each_vendor(desktops, {"action": "type", "text": "alice"}, {"type": "type", "text": "alice"},
                           {"name": "type_text_at", "args": {"x": 500, "y": 500, "text": "alice"}})
    for vendor, (no_effect, text, failed) in answers.items():
        assert failed and not no_effect and text.startswith("typed_into_nothing: nothing was typed"), (vendor, text)


@pytest.mark.parametrize("body", [{}, {"action": {"type": "wait"}, "actions": []}, {"actions": [], "extra": 1},
                                  {"action": {"type": "wait"}, "display_width": 0}])
def test_bad_openai_bodies_are_refused(body):
    with pytest.raises(ValidationError):
        OpenAIComputerRequest.model_validate(body)


def test_region_to_display_rounds_outwards():
    space = coords.pixels(1280, 720)
    assert claude.region_to_display([1, 1, 3, 3], space) == Region(x0=1, y0=1, x1=5, y1=5)


def test_the_toolset_form_must_name_its_action():
    with pytest.raises(ValidationError, match="names the action"):
        AnthropicComputerRequest(tool_version="computer_toolset_20260801", display_width_px=1280,
                                 display_height_px=720, input={"coordinate": [1, 1]})

