"""The current open models' dialects (UI-TARS-2, OpenCUA, GTA1, Holo1.5): their documented outputs ->
display-pixel Actions, garbage -> clear errors, and every dialect's coordinates round trip within one
display pixel at 1920x1080."""

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
    parse_gta1,
    parse_holo,
    parse_opencua,
    parse_uitars2,
)

REL = coords.relative()          # UI-TARS-2: 0..1000
SMART = coords.smart_resized()   # OpenCUA, GTA1, Holo1.5: pixels of the 1932x1092 smart-resized image


def actions(parsed) -> list:
    assert all(c.error is None for c in parsed.calls), [c.error for c in parsed.calls]
    return [a for c in parsed.calls for a in c.actions]


def seed(*functions: str, think: str = "") -> str:
    """A UI-TARS-2 reply as its documented format writes it."""
    head = f"<gui_think> {think} </gui_think>\n" if think else ""
    return f"{head}<seed:tool_call>{''.join(functions)}</seed:tool_call>"


def fn(name: str, **params: str) -> str:
    return f"<function={name}>" + "".join(f"<parameter={k}>{v}</parameter>" for k, v in params.items()) + \
        "</function>"


# ------------------------------------------------------------------ UI-TARS-2


@pytest.mark.parametrize("reply, expected", [
    (seed(fn("click", point="<point>500 500</point>")), [Click(x=960, y=540)]),
    (seed(fn("left_double", point="<point>0 0</point>")), [DoubleClick(x=0, y=0)]),
    (seed(fn("right_single", point="<point>1000 1000</point>")), [Click(x=1919, y=1079, button="right")]),
    (seed(fn("move_to", point="<point>250 750</point>")), [Move(x=480, y=810)]),
    (seed(fn("drag", start_point="<point>100 100</point>", end_point="<point>200 100</point>")),
     [Drag(path=[Point(x=192, y=108), Point(x=384, y=108)])]),
    (seed(fn("scroll", point="<point>500 500</point>", direction="down")), [Scroll(x=960, y=540, direction="down")]),
    (seed(fn("scroll", direction="up")), [Scroll(direction="up")]),
    (seed(fn("mouse_down", point="<point>500 500</point>", button="left")), [MouseDown(x=960, y=540)]),
    (seed(fn("mouse_up", button="right")), [MouseUp(button="right")]),
    (seed(fn("hotkey", key="ctrl c")), [Key(keys=["ctrl+c"])]),
    (seed(fn("press", key="enter"), fn("release", key="enter")), [Key(keys=["enter"])]),
    (seed(fn("type", content="hello")), [Type(text="hello")]),
    (seed(fn("type", content="hello\\n")), [Type(text="hello"), Key(keys=["enter"])]),  # \n submits
    (seed(fn("type", content="\nmulti line\nvalue\n")), [Type(text="multi line\nvalue")]),  # layout newlines
    (seed(fn("wait", time="3")), [Wait(duration_ms=3000)]),
    (seed(fn("take_screenshot")), []),
    (seed(fn("finished", content="42")), [Done(answer="42")]),
    (seed(fn("finished")), [Done()]),
])
def test_uitars2_documented_functions(reply, expected):
    assert actions(parse_uitars2(reply, REL)) == expected


def test_uitars2_several_functions_in_one_call_and_the_thought():
    reply = seed(fn("click", point="<point>500 300</point>"), fn("type", content="glassdesk\\n"),
                 think="The search box is at the top; click it and type the query.")
    parsed = parse_uitars2(reply, REL)
    assert [c.name for c in parsed.calls] == ["click", "type"]
    assert actions(parsed) == [Click(x=960, y=324), Type(text="glassdesk"), Key(keys=["enter"])]
    assert parsed.thought == "The search box is at the top; click it and type the query."
    assert parsed.calls[0].raw == {"function": "click", "point": "<point>500 300</point>"}


def test_uitars2_call_user_fails_and_unknown_or_off_screen_calls_carry_errors():
    assert actions(parse_uitars2(seed(fn("call_user", content="needs a password")), REL))[0].__class__ is Fail
    parsed = parse_uitars2(seed(fn("click", point="<point>1200 10</point>"), fn("teleport")), REL)
    assert "x=1200 is off the screen" in parsed.calls[0].error and parsed.calls[0].actions == []
    assert parsed.calls[1].error == "teleport: unknown action 'teleport'"
    assert parse_uitars2(seed(fn("hotkey")), REL).calls[0].error == "hotkey: missing key"


def test_uitars2_unclosed_tags_are_read_and_garbage_is_a_clear_error():
    assert actions(parse_uitars2("<seed:tool_call><function=click><parameter=point><point>500 500</point>", REL)) \
        == [Click(x=960, y=540)]
    with pytest.raises(ChatParseError, match="<seed:tool_call>"):
        parse_uitars2("I would click the button.", REL)


# ------------------------------------------------------------------ OpenCUA

def opencua(code: str, fence: str = "python") -> str:
    """An OpenCUA reply as its documented L2 format writes it."""
    return (f"## Thought:\nThe Sign in button is top right.\n\n## Action:\nClick the Sign in button.\n\n"
            f"## Code:\n```{fence}\n{code}\n```\n")


@pytest.mark.parametrize("code, expected", [
    ("pyautogui.click(x=966, y=546)", [Click(x=960, y=540)]),
    ("pyautogui.click(966, 546)", [Click(x=960, y=540)]),
    ("pyautogui.click(x=966, y=546, clicks=2)", [DoubleClick(x=960, y=540)]),
    ("pyautogui.click(x=966, y=546, button='right')", [Click(x=960, y=540, button="right")]),
    ("pyautogui.doubleClick(x=0, y=0)", [DoubleClick(x=0, y=0)]),
    ("pyautogui.rightClick(x=1931, y=1091)", [Click(x=1919, y=1079, button="right")]),
    ("pyautogui.tripleClick(x=966, y=546)", [TripleClick(x=960, y=540)]),
    ("computer.triple_click(x=966, y=546)", [TripleClick(x=960, y=540)]),
    ("pyautogui.moveTo(966, 546)", [Move(x=960, y=540)]),
    ("pyautogui.moveTo(100, 100)\npyautogui.dragTo(966, 546, duration=0.5)",
     [Move(x=99, y=99), MouseDown(), Move(x=960, y=540), MouseUp()]),
    ("pyautogui.scroll(-5)", [Scroll(direction="down", amount=5)]),
    ("pyautogui.scroll(3, x=966, y=546)", [Scroll(x=960, y=540, direction="up", amount=3)]),
    ("pyautogui.hscroll(2)", [Scroll(direction="right", amount=2)]),
    ("pyautogui.hotkey('ctrl', 'c')", [Key(keys=["ctrl+c"])]),
    ("pyautogui.hotkey(['ctrl', 'shift', 't'])", [Key(keys=["ctrl+shift+t"])]),
    ("pyautogui.press('enter')", [Key(keys=["enter"])]),
    ("pyautogui.press(['tab', 'tab'])", [Key(keys=["tab", "tab"])]),
    ("pyautogui.press('down', presses=3)", [Key(keys=["down", "down", "down"])]),
    ("pyautogui.write(message='hello world')", [Type(text="hello world")]),
    ("pyautogui.typewrite('search\\n')", [Type(text="search"), Key(keys=["enter"])]),
    ("import pyautogui\nimport time\npyautogui.click(x=966, y=546)\ntime.sleep(1)",
     [Click(x=960, y=540), Wait(duration_ms=1000)]),
])
def test_opencua_documented_code(code, expected):
    assert actions(parse_opencua(opencua(code), SMART)) == expected


def test_opencua_functions_thought_and_action():
    parsed = parse_opencua(opencua("computer.terminate(status='success', answer='3 items')", fence="code"), SMART)
    assert actions(parsed) == [Done(answer="3 items")]
    assert parsed.thought == "The Sign in button is top right.\nClick the Sign in button."
    assert actions(parse_opencua(opencua("computer.terminate(status='failure')", "code"), SMART))[0].__class__ is Fail
    assert actions(parse_opencua(opencua("computer.wait()", "code"), SMART))[0].duration_ms == 2000
    assert parse_opencua(opencua("pyautogui.click(x=966, y=546)"), SMART).calls[0].raw == {
        "code": "pyautogui.click(x=966, y=546)", "x": 966, "y": 546}


def test_opencua_code_is_read_never_run_and_bad_code_is_refused():
    parsed = parse_opencua(opencua("pyautogui.click(x=__import__('os').getpid(), y=1)\nos.system('rm -rf /')"), SMART)
    assert "literal values" in parsed.calls[0].error
    assert parsed.calls[1].error == "os.system: unknown action 'os.system'; use the pyautogui calls and computer " \
                                    "functions listed"
    assert "x=2000 is off the screen" in parse_opencua(opencua("pyautogui.click(x=2000, y=5)"), SMART).calls[0].error
    assert "needs x and y" in parse_opencua(opencua("pyautogui.moveTo()"), SMART).calls[0].error
    with pytest.raises(ChatParseError, match="not valid Python"):
        parse_opencua(opencua("pyautogui.click(x=1, y="), SMART)
    with pytest.raises(ChatParseError, match="## Code:"):
        parse_opencua("## Thought:\nhmm\n## Action:\nnothing", SMART)


def test_opencua_without_a_fence_reads_the_call_lines():
    assert actions(parse_opencua("## Action:\nclick OK\npyautogui.click(x=966, y=546)", SMART)) == \
        [Click(x=960, y=540)]


# ------------------------------------------------------------------ GTA1 and Holo1.5 (grounding)


@pytest.mark.parametrize("reply", ["(966,546)", "(966, 546)", "The button is at (966.0,546.0)."])
def test_gta1_point(reply):
    assert actions(parse_gta1(reply, SMART)) == [Click(x=960, y=540)]


@pytest.mark.parametrize("reply", ['{"action": "click_absolute", "x": 966, "y": 546}',
                                   '```json\n{"action":"click_absolute","x":966,"y":546}\n```',
                                   "Click(966, 546)"])
def test_holo_click_absolute(reply):
    parsed = parse_holo(reply, SMART)
    assert actions(parsed) == [Click(x=960, y=540)] and parsed.calls[0].name == "click_absolute"


def test_grounding_garbage_and_off_screen():
    with pytest.raises(ChatParseError, match=r"\(x,y\)"):
        parse_gta1("the login button", SMART)
    with pytest.raises(ChatParseError, match="click_absolute"):
        parse_holo("I cannot see it", SMART)
    assert "off the screen" in parse_gta1("(2000,10)", SMART).calls[0].error
    assert parse_holo('{"action": "scroll", "x": 1, "y": 1}', SMART).calls[0].error.startswith(
        "scroll: unknown action 'scroll'")


# ------------------------------------------------------------------ selection, layout, round trips


@pytest.mark.parametrize("model, dialect", [
    ("ByteDance-Seed/UI-TARS-2", "uitars-2"),
    ("ui-tars-2-7b", "uitars-2"),
    ("bytedance-research/UI-TARS-2B-SFT", "uitars-1.0"),  # UI-TARS 1.0 at 2B, not UI-TARS-2
    ("ByteDance-Seed/UI-TARS-1.5-7B", "uitars-1.5"),
    ("xlangai/OpenCUA-7B", "opencua"),
    ("opencua-32b", "opencua"),
    ("HelloKKMe/GTA1-7B", "gta1"),
    ("Salesforce/GTA1-32B-2507", "gta1"),
    ("Hcompany/Holo1.5-7B", "holo1.5"),
    ("Hcompany/Holo1-3B", "holo1.5"),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen25"),
])
def test_detect_dialect_of_current_open_models(model, dialect):
    assert detect_dialect(model) == dialect


@pytest.mark.parametrize("name, image, grounding", [
    ("uitars-2", (1920, 1080), False), ("opencua", (1932, 1092), False),
    ("gta1", (1932, 1092), True), ("holo1.5", (1932, 1092), True),
])
def test_layout(name, image, grounding):
    dialect = DIALECTS[name]
    size, space = dialect.layout(None, coords.QWEN_MIN_PIXELS, coords.QWEN_MAX_PIXELS)
    assert size == image and dialect.grounding is grounding
    assert space == (REL if name == "uitars-2" else SMART)


def test_smart_resize_is_qwens():
    # Each side to the nearest multiple of 28 (14 px patches merged 2x2), inside [4, 16384] x 28 x 28 pixels.
    assert coords.smart_resize(1080, 1920) == (1092, 1932)
    assert (coords.QWEN_FACTOR, coords.QWEN_MIN_PIXELS, coords.QWEN_MAX_PIXELS) == (28, 3136, 12_845_056)


def _writes(name: str, x: float, y: float) -> str:
    """What each dialect's model writes to point at model coordinates (x, y)."""
    return {
        "json": f'{{"action": "click", "x": {x}, "y": {y}}}',
        "uitars-1.0": f"Action: click(start_box='({x},{y})')",
        "uitars-1.5": f"Action: click(start_box='({x},{y})')",
        "qwen25": f'<tool_call>{{"name": "computer_use", "arguments": {{"action": "left_click", '
                  f'"coordinate": [{x}, {y}]}}}}</tool_call>',
        "qwen3": f'<tool_call>{{"name": "computer_use", "arguments": {{"action": "left_click", '
                 f'"coordinate": [{x}, {y}]}}}}</tool_call>',
        "uitars-2": seed(fn("click", point=f"<point>{x} {y}</point>")),
        "opencua": opencua(f"pyautogui.click(x={x}, y={y})"),
        "gta1": f"({x},{y})",
        "holo1.5": f'{{"action": "click_absolute", "x": {x}, "y": {y}}}',
    }[name]


POINTS = [(x, y) for x in range(0, 1920, 97) for y in range(0, 1080, 61)] + [(1919, 1079), (1919, 0), (0, 1079)]


@pytest.mark.parametrize("name", list(DIALECTS))
def test_every_dialect_round_trips_within_one_display_pixel(name):
    """The model sees the display point at space.from_display (integer, as models write), writes it
    in its format, and the parser lands within one pixel of where it looked."""
    dialect = DIALECTS[name]
    _, space = dialect.layout(None, coords.QWEN_MIN_PIXELS, coords.QWEN_MAX_PIXELS)
    worst = 0
    for x, y in POINTS:
        mx, my = space.from_display(x, y)
        [click] = actions(dialect.parse(_writes(name, mx, my), space))
        worst = max(worst, abs(click.x - x), abs(click.y - y))
    assert worst <= 1, (name, worst)
