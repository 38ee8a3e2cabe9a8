"""Parsers of chat models' replies: realistic outputs -> display-pixel Actions, garbage -> clear errors."""

from __future__ import annotations

import pytest

from desktop.actions import (
    Click,
    DoubleClick,
    Drag,
    Key,
    MouseDown,
    MouseUp,
    Move,
    Point,
    Scroll,
    TripleClick,
    Type,
    Wait,
)
from vision import coords
from vision.actions import Done, Fail
from vision.providers.chat import (
    DIALECTS,
    ChatParseError,
    detect_dialect,
    keep_last_images,
    parse_json,
    parse_qwen,
    parse_uitars,
)

PIX = coords.pixels(1280, 720)      # json dialect default: 1.5 display px per model px
REL = coords.relative()             # UI-TARS 1.0, Qwen3-VL
SMART = coords.smart_resized()      # UI-TARS 1.5, Qwen2.5-VL: 1932x1092


def only_actions(parsed):
    assert len(parsed.calls) == 1, parsed.calls
    call = parsed.calls[0]
    assert call.error is None, call.error
    return call.actions


# ------------------------------------------------------------------ json


@pytest.mark.parametrize("text, expected", [
    ('{"thought": "the OK button", "action": "click", "x": 640, "y": 360}', [Click(x=960, y=540)]),
    ('{"action": "click", "x": 100, "y": 200, "button": "right", "modifiers": ["ctrl"]}',
     [Click(x=150, y=300, button="right", modifiers=["ctrl"])]),
    ('{"action": "double_click", "x": 0, "y": 0}', [DoubleClick(x=0, y=0)]),
    ('{"action": "triple_click", "x": 1279, "y": 719}', [TripleClick(x=1918, y=1078)]),
    ('{"action": "move", "coordinate": [640, 360]}', [Move(x=960, y=540)]),
    ('{"action": "drag", "x": 100, "y": 100, "to_x": 200, "to_y": 100}',
     [Drag(path=[Point(x=150, y=150), Point(x=300, y=150)])]),
    ('{"action": "scroll", "x": 640, "y": 360, "direction": "up", "amount": 5}',
     [Scroll(x=960, y=540, direction="up", amount=5)]),
    ('{"action": "scroll", "direction": "down"}', [Scroll(direction="down")]),
    ('{"action": "type", "text": "hello {world}"}', [Type(text="hello {world}")]),
    ('{"action": "key", "keys": "ctrl+a Delete"}', [Key(keys=["ctrl+a", "Delete"])]),
    ('{"action": "key", "keys": ["ctrl+l"]}', [Key(keys=["ctrl+l"])]),
    ('{"action": "wait", "seconds": 1.5}', [Wait(duration_ms=1500)]),
    ('{"action": "done", "answer": "42"}', [Done(answer="42")]),
    ('{"action": "done"}', [Done()]),
    ('{"action": "fail", "reason": "no network"}', [Fail(reason="no network")]),
    # Extra keys are dropped, numbers in strings accepted.
    ('{"action": "click", "x": "640", "y": 360, "target": "OK button"}', [Click(x=960, y=540)]),
])
def test_json_actions(text, expected):
    assert only_actions(parse_json(text, PIX)) == expected


@pytest.mark.parametrize("text", [
    # fenced, with prose around it
    'Sure. I will click OK.\n```json\n{"thought": "OK", "action": "click", "x": 640, "y": 360}\n```\nDone.',
    # prose with braces that are not JSON before the object
    'The {OK} button is in the middle {of the dialog}. {"action": "click", "x": 640, "y": 360}',
    # braces inside the thought string
    '{"thought": "click {OK} then }}}", "action": "click", "x": 640, "y": 360}',
    # another JSON object first, without an action
    'Screen: {"title": "Dialog"}\n{"action": "click", "x": 640, "y": 360}',
    # whitespace and a trailing remark
    '  \n{"action":"click","x":640,"y":360}  (centre)',
])
def test_json_lenient_extraction(text):
    assert only_actions(parse_json(text, PIX)) == [Click(x=960, y=540)]


def test_json_thought_and_raw_are_kept():
    parsed = parse_json('{"thought": "press {OK}", "action": "click", "x": 640, "y": 360}', PIX)
    assert parsed.thought == "press {OK}"
    assert parsed.calls[0].raw == {"thought": "press {OK}", "action": "click", "x": 640, "y": 360}
    assert parsed.calls[0].name == "click"


@pytest.mark.parametrize("text", [
    "I would click the OK button.",
    "",
    '{"action": "click", "x": 10, "y": 20,}',  # trailing comma: not JSON
    '{"thought": "no action here"}',
    "```json\n{'action': 'click'}\n```",
])
def test_json_garbage_is_a_clear_parse_error(text):
    with pytest.raises(ChatParseError, match='no JSON object with an "action" field'):
        parse_json(text, PIX)


@pytest.mark.parametrize("text, error", [
    ('{"action": "click", "x": 1280, "y": 10}', "click: x=1280 is off the screen: valid x is 0..1279"),
    ('{"action": "click", "x": 10}', "click: coordinates must be numbers"),
    ('{"action": "fly", "x": 1, "y": 1}', "fly: unknown action 'fly'; use one of click"),
    ('{"action": "key", "keys": "hyperdrive"}', "key: keys: unknown key name 'hyperdrive'"),
    ('{"action": "drag", "x": 1, "y": 1}', "drag: drag needs x, y, to_x and to_y"),
    ('{"action": "type", "text": ""}', "type: text:"),
])
def test_json_bad_calls_carry_an_error_and_no_actions(text, error):
    (call,) = parse_json(text, PIX).calls
    assert call.actions == []
    assert call.error.startswith(error), call.error


# ------------------------------------------------------------------ UI-TARS


@pytest.mark.parametrize("text, expected", [
    ("Thought: The search box is at the top.\nAction: click(start_box='<|box_start|>(500,500)<|box_end|>')",
     [Click(x=960, y=540)]),
    ("Thought: x\nAction: click(start_box='(500,500)')", [Click(x=960, y=540)]),
    ("Action: click(point='<point>250 750</point>')", [Click(x=480, y=810)]),
    ("Action: click(start_box='[400,400,600,600]')", [Click(x=960, y=540)]),
    ("Action: click(start_box='(400,400,600,600)')", [Click(x=960, y=540)]),
    ("Action: left_double(start_box='(0,0)')", [DoubleClick(x=0, y=0)]),
    ("Action: right_single(start_box='(1000,1000)')", [Click(x=1919, y=1079, button="right")]),
    ("Action: drag(start_box='(100,100)', end_box='(200,100)')",
     [Drag(path=[Point(x=192, y=108), Point(x=384, y=108)])]),
    ("Action: hotkey(key='ctrl c')", [Key(keys=["ctrl+c"])]),
    ("Action: hotkey(key='enter')", [Key(keys=["enter"])]),
    ("Action: type(content='hello world')", [Type(text="hello world")]),
    ("Action: type(content='It\\'s done, (really)\\n')", [Type(text="It's done, (really)"), Key(keys=["enter"])]),
    ("Action: type(content='It's fine')", [Type(text="It's fine")]),  # unescaped inner quote
    ("Action: type(content='a = b, c')", [Type(text="a = b, c")]),
    ("Action: scroll(start_box='(500,500)', direction='up')", [Scroll(x=960, y=540, direction="up")]),
    ("Action: scroll(direction='down')", [Scroll(direction="down")]),
    ("Action: wait()", [Wait(duration_ms=2000)]),
    ("Action: finished(content='The price is $42.')", [Done(answer="The price is $42.")]),
    ("Action: finished()", [Done()]),
    ("Action: call_user()", [Fail(reason="the model asked for a person's help (call_user)")]),
])
def test_uitars_1_0_actions(text, expected):
    assert only_actions(parse_uitars(text, REL)) == expected


def test_uitars_1_5_uses_smart_resized_pixels():
    parsed = parse_uitars("Thought: Open the menu.\nAction: click(start_box='(966,546)')", SMART)
    assert only_actions(parsed) == [Click(x=960, y=540)]
    assert only_actions(parse_uitars("Action: click(start_box='(1931,1091)')", SMART)) == [Click(x=1919, y=1079)]


def test_uitars_thought_with_braces_and_parentheses():
    text = ("Thought: The dialog {Save as} is open (see the title); I'll press Save.\n"
            "Action: click(start_box='(500,500)')")
    parsed = parse_uitars(text, REL)
    assert parsed.thought == "The dialog {Save as} is open (see the title); I'll press Save."
    assert only_actions(parsed) == [Click(x=960, y=540)]
    assert parsed.calls[0].raw == {"action": "click", "start_box": "(500,500)"}


def test_uitars_reflection_format_and_several_actions():
    text = ("Reflection: the page loaded.\nAction_Summary: copy the text\n"
            "Action: hotkey(key='ctrl a')\n\nhotkey(key='ctrl c')")
    parsed = parse_uitars(text, REL)
    assert [c.actions for c in parsed.calls] == [[Key(keys=["ctrl+a"])], [Key(keys=["ctrl+c"])]]
    assert "Action_Summary: copy the text" in parsed.thought


def test_uitars_without_label():
    assert only_actions(parse_uitars("click(start_box='(500,500)')", REL)) == [Click(x=960, y=540)]


@pytest.mark.parametrize("text, error", [
    ("Action: click(start_box='(1200,300)')", "click: x=1200 is off the screen: valid x is 0..1000"),
    ("Action: click(start_box='(1,2,3)')", "click: cannot read a point"),
    ("Action: click()", "click: missing start_box"),
    ("Action: teleport(start_box='(1,2)')", "teleport: unknown action 'teleport'"),
    ("Action: hotkey(key='ctrl hyperdrive')", "hotkey: keys: unknown key name 'hyperdrive'"),
    ("Action: scroll(direction='sideways')", "scroll: direction:"),
])
def test_uitars_bad_calls(text, error):
    (call,) = parse_uitars(text, REL).calls
    assert call.actions == [] and call.error.startswith(error), call.error


@pytest.mark.parametrize("text", ["", "Thought: I am not sure what to do.", "I'd click the button (the blue one)."])
def test_uitars_garbage_is_a_clear_parse_error(text):
    with pytest.raises(ChatParseError, match="no action found"):
        parse_uitars(text, REL)


# ------------------------------------------------------------------ Qwen


def tool_call(args: str) -> str:
    return f'<tool_call>\n{{"name": "computer_use", "arguments": {args}}}\n</tool_call>'


@pytest.mark.parametrize("args, expected", [
    ('{"action": "left_click", "coordinate": [966, 546]}', [Click(x=960, y=540)]),
    ('{"action": "left_click"}', [Click()]),
    ('{"action": "right_click", "coordinate": [0, 0]}', [Click(x=0, y=0, button="right")]),
    ('{"action": "middle_click", "coordinate": [966, 546]}', [Click(x=960, y=540, button="middle")]),
    ('{"action": "double_click", "coordinate": [966, 546]}', [DoubleClick(x=960, y=540)]),
    ('{"action": "triple_click", "coordinate": [966, 546]}', [TripleClick(x=960, y=540)]),
    ('{"action": "mouse_move", "coordinate": [1931, 1091]}', [Move(x=1919, y=1079)]),
    ('{"action": "left_click_drag", "coordinate": [966, 546]}', [MouseDown(), Move(x=960, y=540), MouseUp()]),
    ('{"action": "left_click_drag", "start_coordinate": [0, 0], "coordinate": [966, 546]}',
     [Drag(path=[Point(x=0, y=0), Point(x=960, y=540)])]),
    ('{"action": "key", "keys": ["ctrl", "c"]}', [Key(keys=["ctrl+c"])]),
    ('{"action": "key", "keys": ["Return"]}', [Key(keys=["Return"])]),
    ('{"action": "type", "text": "hello\\n"}', [Type(text="hello"), Key(keys=["enter"])]),
    ('{"action": "scroll", "pixels": -5, "coordinate": [966, 546]}',
     [Scroll(x=960, y=540, direction="down", amount=5)]),
    ('{"action": "scroll", "pixels": 3}', [Scroll(direction="up", amount=3)]),
    ('{"action": "scroll", "pixels": -500}', [Scroll(direction="down", amount=50)]),
    ('{"action": "hscroll", "pixels": 2}', [Scroll(direction="right", amount=2)]),
    ('{"action": "wait", "time": 2}', [Wait(duration_ms=2000)]),
    ('{"action": "terminate", "status": "success"}', [Done()]),
    ('{"action": "terminate", "status": "failure"}',
     [Fail(reason="the model ended the task as failed (terminate, status failure)")]),
    ('{"action": "answer", "text": "42"}', [Done(answer="42")]),
])
def test_qwen25_actions(args, expected):
    assert only_actions(parse_qwen(tool_call(args), SMART)) == expected


def test_qwen3_uses_relative_coordinates():
    assert only_actions(parse_qwen(tool_call('{"action": "left_click", "coordinate": [500, 500]}'), REL)) == [
        Click(x=960, y=540)]


@pytest.mark.parametrize("text", [
    # thinking before the call, braces in the thought
    '<think>The {OK} button is centred.</think>\n' + tool_call('{"action": "left_click", "coordinate": [500, 500]}'),
    # Qwen3's "Action:" preamble
    'Action: click OK\n' + tool_call('{"action": "left_click", "coordinate": [500, 500]}'),
    # unclosed tag (generation stopped at the stop token)
    '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 500]}}',
    # no tags at all
    '{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 500]}}',
    # arguments encoded as a JSON string
    '<tool_call>{"name": "computer_use", '
    '"arguments": "{\\"action\\": \\"left_click\\", \\"coordinate\\": [500, 500]}"}</tool_call>',
    # the action written as the function name
    '<tool_call>{"name": "left_click", "arguments": {"coordinate": [500, 500]}}</tool_call>',
])
def test_qwen_lenient_variants(text):
    assert only_actions(parse_qwen(text, REL)) == [Click(x=960, y=540)]


def test_qwen_thought_and_several_calls():
    text = ("<think>Select all, then copy.</think>\n" + tool_call('{"action": "key", "keys": ["ctrl", "a"]}')
            + "\n" + tool_call('{"action": "key", "keys": ["ctrl", "c"]}'))
    parsed = parse_qwen(text, REL)
    assert parsed.thought == "Select all, then copy."
    assert [c.actions for c in parsed.calls] == [[Key(keys=["ctrl+a"])], [Key(keys=["ctrl+c"])]]
    assert [c.id for c in parsed.calls] == ["call_0", "call_1"]


@pytest.mark.parametrize("args, error", [
    ('{"action": "left_click", "coordinate": [1001, 5]}', "left_click: x=1001 is off the screen: valid x is 0..1000"),
    ('{"action": "mouse_move"}', "mouse_move: missing coordinate"),
    ('{"action": "jump"}', "jump: unknown action 'jump'"),
    ('{"action": "scroll"}', "scroll: missing pixels"),
])
def test_qwen_bad_calls(args, error):
    (call,) = parse_qwen(tool_call(args), REL).calls
    assert call.actions == [] and call.error.startswith(error), call.error


@pytest.mark.parametrize("text", ["", "I will click the OK button.", "<tool_call>\nleft_click(500, 500)\n</tool_call>"])
def test_qwen_garbage_is_a_clear_parse_error(text):
    with pytest.raises(ChatParseError, match="no readable tool call"):
        parse_qwen(text, REL)


def test_qwen_arguments_must_be_an_object():
    with pytest.raises(ChatParseError, match='"arguments" must be a JSON object'):
        parse_qwen('<tool_call>{"name": "computer_use", "arguments": [500, 500]}</tool_call>', REL)


# ------------------------------------------------------------------ dialect selection and history


@pytest.mark.parametrize("model, dialect", [
    ("ByteDance-Seed/UI-TARS-1.5-7B", "uitars-1.5"),
    ("ui-tars-7b-1.5", "uitars-1.5"),
    ("bytedance-research/UI-TARS-7B-DPO", "uitars-1.0"),
    ("ui-tars:7b", "uitars-1.0"),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen25"),
    ("qwen2.5vl:7b", "qwen25"),
    ("Qwen/Qwen3-VL-8B-Instruct", "qwen3"),
    ("gpt-4o-mini", "json"),
    ("llava:13b", "json"),
])
def test_detect_dialect(model, dialect):
    assert detect_dialect(model) == dialect


@pytest.mark.parametrize("name, image, space", [
    ("json", (1280, 720), coords.pixels(1280, 720)),
    ("uitars-1.0", (1920, 1080), coords.relative()),
    ("uitars-1.5", (1932, 1092), coords.smart_resized()),
    ("qwen25", (1932, 1092), coords.smart_resized()),
    ("qwen3", (1920, 1080), coords.relative()),
])
def test_dialect_layout_sends_the_image_the_space_describes(name, image, space):
    assert DIALECTS[name].layout(None, coords.QWEN_MIN_PIXELS, coords.QWEN_MAX_PIXELS) == (image, space)


def test_dialect_layout_with_a_chosen_image_size():
    assert DIALECTS["json"].layout((1920, 1080), 0, 10**9) == ((1920, 1080), coords.pixels(1920, 1080))
    assert DIALECTS["qwen25"].layout((1280, 720), 3136, 10**9) == ((1288, 728), coords.pixels(1288, 728))


def test_keep_last_images():
    def user(n):
        return {"role": "user", "content": [{"type": "text", "text": str(n)},
                                             {"type": "image_url", "image_url": {"url": f"img{n}"}}]}
    history = [user(1), {"role": "assistant", "content": "a"}, user(2), user(3), user(4)]
    kept = keep_last_images(history, 2)
    urls = [p["image_url"]["url"] for m in kept if isinstance(m["content"], list)
            for p in m["content"] if p["type"] == "image_url"]
    assert urls == ["img3", "img4"]
    assert kept[0]["content"][1] == {"type": "text", "text": "(an earlier screenshot, omitted)"}
    assert history[0]["content"][1]["type"] == "image_url"  # the input is not modified
