"""Gemini's computer-use function calls <-> canonical actions (vision.converters.gemini), pure, and
the /computer/gemini executor over a fake desktop."""

from __future__ import annotations

import base64
import io

import pytest
from google.genai import types
from PIL import Image
from pydantic import ValidationError

from desktop.actions import Click, Drag, Key, Move, Point, Scroll, Type, Wait
from desktop.errors import InvalidAction, OperatorInControl
from tests.fakes.services import FakeDesktops
from vision.actions import CallResult, Screenshot
from vision.converters import gemini
from vision.models import GeminiComputerRequest
from vision.vendors.computer import ComputerService

GRID = gemini.GRID
CONFIRM = {"decision": "require_confirmation", "explanation": "This buys something."}


def grid(x: int, y: int) -> dict[str, int]:
    """A display pixel as the model names it on the 0..999 grid."""
    gx, gy = GRID.from_display(x, y)
    return {"x": gx, "y": gy}


# --- the grid ------------------------------------------------------------------------------------


@pytest.mark.parametrize("point", [(0, 0), (1919, 0), (0, 1079), (1919, 1079), (960, 540), (1333, 777)])
def test_a_display_pixel_round_trips_through_the_grid_within_a_pixel(point):
    [click] = gemini.to_actions("click_at", grid(*point))
    assert abs(click.x - point[0]) <= 1 and abs(click.y - point[1]) <= 1, (point, click)


def test_every_grid_value_round_trips_exactly_and_every_pixel_within_one():
    for value in range(1000):
        x, y = GRID.to_display(value, value)
        assert GRID.from_display(x, y) == (value, value)
    for x in range(1920):
        assert abs(GRID.to_display(*GRID.from_display(x, 0))[0] - x) <= 1
    for y in range(1080):
        assert abs(GRID.to_display(*GRID.from_display(0, y))[1] - y) <= 1


def test_grid_corners_and_centre_are_the_screens():
    assert gemini.to_actions("click_at", {"x": 0, "y": 0}) == [Click(x=0, y=0)]
    assert gemini.to_actions("click_at", {"x": 999, "y": 999}) == [Click(x=1918, y=1079)]
    assert gemini.to_actions("click_at", {"x": 500, "y": 500}) == [Click(x=960, y=540)]


# --- every function ------------------------------------------------------------------------------

NAV = [Key(keys=["ctrl+l"]), Type(text="https://example.test/a"), Key(keys=["Return"])]

CASES = {
    "open_web_browser": ({}, [Screenshot()]),
    "wait_5_seconds": ({}, [Wait(duration_ms=5000)]),
    "go_back": ({}, [Key(keys=["alt+Left"])]),
    "go_forward": ({}, [Key(keys=["alt+Right"])]),
    "search": ({}, [Key(keys=["ctrl+l"]), Type(text="https://www.google.com"), Key(keys=["Return"])]),
    "navigate": ({"url": "https://example.test/a"}, NAV),
    "click_at": ({"x": 500, "y": 250}, [Click(x=960, y=270)]),
    "hover_at": ({"x": 100, "y": 900}, [Move(x=192, y=972)]),
    "type_text_at": ({"x": 500, "y": 500, "text": "hello"},
                     [Click(x=960, y=540), Key(keys=["ctrl+a", "Delete"]), Type(text="hello"), Key(keys=["Return"])]),
    "key_combination": ({"keys": "Control+Shift+T"}, [Key(keys=["control+shift+t"])]),
    "scroll_document": ({"direction": "down"}, [Key(keys=["Next"])]),
    "scroll_at": ({"x": 500, "y": 500, "direction": "down"}, [Scroll(x=960, y=540, direction="down", amount=7)]),
    "drag_and_drop": ({"x": 100, "y": 100, "destination_x": 900, "destination_y": 900},
                      [Drag(path=[Point(x=192, y=108), Point(x=1728, y=972)])]),
}


def test_the_cases_cover_every_predefined_function():
    assert set(CASES) == set(gemini.FUNCTIONS) and len(gemini.FUNCTIONS) == 13


@pytest.mark.parametrize("name", gemini.FUNCTIONS)
def test_every_function_maps_to_its_actions(name):
    args, expected = CASES[name]
    assert gemini.to_actions(name, args) == expected


def test_type_text_at_without_enter_or_clearing_and_with_empty_text():
    assert gemini.to_actions("type_text_at", {"x": 0, "y": 0, "text": "a b", "press_enter": False,
                                              "clear_before_typing": False}) == [Click(x=0, y=0), Type(text="a b")]
    # Empty text with clearing is how a model empties a field.
    assert gemini.to_actions("type_text_at", {"x": 0, "y": 0, "text": "", "press_enter": False}) == [
        Click(x=0, y=0), Key(keys=["ctrl+a", "Delete"])]


@pytest.mark.parametrize("keys, chord", [("Control+A", "control+a"), ("Enter", "enter"),
                                         ("Meta+Shift+T", "meta+shift+t"), ("Control++", "control+plus"),
                                         ("+", "plus"), ("PageDown", "pagedown"),
                                         ("ArrowLeft", "arrowleft"), ("F5", "F5"), ("alt+Tab", "alt+tab")])
def test_key_combination_is_one_chord(keys, chord):
    assert gemini.to_actions("key_combination", {"keys": keys}) == [Key(keys=[chord])]


@pytest.mark.parametrize("direction, magnitude, expected", [
    ("down", 800, Scroll(x=960, y=540, direction="down", amount=7)),    # 864 px
    ("up", 250, Scroll(x=960, y=540, direction="up", amount=2)),        # 270 px
    ("right", 500, Scroll(x=960, y=540, direction="right", amount=8)),  # 960 px of width
    ("left", 1, Scroll(x=960, y=540, direction="left", amount=1)),      # any distance is a notch
    ("down", 0, Move(x=960, y=540)),                                    # no distance: no scroll
])
def test_scroll_at_magnitude_is_grid_units_along_its_axis(direction, magnitude, expected):
    args = {"x": 500, "y": 500, "direction": direction, "magnitude": magnitude}
    assert gemini.to_actions("scroll_at", args) == [expected]


def test_scroll_document_sideways_is_half_a_screen_of_wheel_at_the_centre():
    assert gemini.to_actions("scroll_document", {"direction": "up"}) == [Key(keys=["Prior"])]
    assert gemini.to_actions("scroll_document", {"direction": "left"}) == [
        Scroll(x=960, y=540, direction="left", amount=8)]


def test_search_goes_where_it_is_told():
    assert gemini.to_actions("search", {}, search_url="https://search.test/")[1] == Type(text="https://search.test/")


# --- the model's mistakes ------------------------------------------------------------------------


def test_bad_args_list_every_problem_at_once():
    with pytest.raises(gemini.CallError) as caught:
        gemini.to_actions("type_text_at", {"x": 1200, "y": "top", "press_enter": "yes", "colour": "red"})
    message = str(caught.value)
    for problem in ("unknown argument colour", "x=1200 is off the 0..999 grid", "y must be a number",
                    "text is required", "press_enter must be true or false"):
        assert problem in message, message
    assert message.startswith("type_text_at: ")


@pytest.mark.parametrize("name, args, problem", [
    ("click_at", {"x": 10}, "y is required"),
    ("click_at", {"x": -1, "y": 5}, "x=-1 is off the 0..999 grid"),
    ("click_at", {"x": 10**400, "y": 5}, "x must be a number"),
    ("click_at", {"x": True, "y": 5}, "x must be a number"),
    ("drag_and_drop", {"x": 1, "y": 1, "destination_x": 1000}, "destination_x=1000 is off the 0..999 grid"),
    ("scroll_at", {"x": 1, "y": 1, "direction": "sideways"}, "direction must be one of up, down, left, right"),
    ("scroll_at", {"x": 1, "y": 1, "direction": "up", "magnitude": 5000}, "magnitude must be a number from 0"),
    ("navigate", {"url": ""}, "url must be a non-empty string"),
    ("key_combination", {"keys": "Control+"}, "keys must be key names joined by '+'"),
    ("key_combination", {"keys": "Control+Hyperdrive"}, "Hyperdrive"),
    ("go_back", {"steps": 2}, "unknown argument steps (go_back takes none)"),
])
def test_each_bad_call_says_why(name, args, problem):
    with pytest.raises(gemini.CallError, match=None) as caught:
        gemini.to_actions(name, args)
    assert problem in str(caught.value), str(caught.value)


def test_an_unknown_function_is_a_call_error_naming_the_known_ones():
    call = gemini.parse_call("c1", "open_app", {"name": "xterm"})
    assert call.actions == [] and call.error.startswith("unknown function 'open_app'")
    assert "click_at" in call.error


def test_a_safety_decision_rides_on_any_call_and_is_not_an_argument():
    call = gemini.parse_call("c1", "click_at", {"x": 500, "y": 500, "safety_decision": CONFIRM})
    assert call.error is None and call.actions == [Click(x=960, y=540)]
    assert call.raw["safety_decision"] == CONFIRM  # the trace keeps what the model said
    check = gemini.safety_check("c1", call.raw)
    assert (check.id, check.code, check.message) == ("c1", "require_confirmation", "This buys something.")
    assert gemini.safety_check("c2", {"x": 1, "y": 1}) is None
    assert gemini.safety_check("c3", {"safety_decision": {"decision": "regular"}}) is None


# --- the function response -----------------------------------------------------------------------


def test_response_fields_carry_url_acknowledgement_and_error():
    assert gemini.response_fields(CallResult("c", ok=True), url="http://a.test/", acknowledged=False) == {
        "url": "http://a.test/"}
    assert gemini.response_fields(CallResult("c", ok=False, error="click_at: x is required"), url=None,
                                  acknowledged=True) == {"safety_acknowledgement": "true",
                                                         "error": "click_at: x is required"}
    assert gemini.response_fields(None, url="u", acknowledged=False) == {"url": "u", "error": "not executed"}


def test_the_function_response_is_what_the_sdk_takes():
    data = gemini.function_response("click_at", "fc_1", {"url": "u"}, b"\x89PNG-bytes")
    response = types.FunctionResponse.model_validate(data)
    assert (response.name, response.id, response.response) == ("click_at", "fc_1", {"url": "u"})
    assert response.parts[0].inline_data.mime_type == "image/png"
    assert response.parts[0].inline_data.data == b"\x89PNG-bytes"
    assert "id" not in gemini.function_response("click_at", None, {}, b"x")


# --- the executor over a fake desktop ------------------------------------------------------------


def size_of(data: str) -> tuple[int, int]:
    return Image.open(io.BytesIO(base64.b64decode(data))).size


@pytest.fixture
def desktops():
    return FakeDesktops()


def run(desktops, *calls, **fields):
    request = GeminiComputerRequest(function_calls=list(calls), **fields)
    return ComputerService(desktops).gemini("s1", request)


def test_several_calls_run_in_order_each_answered_with_its_screen(desktops):
    result = run(desktops, {"name": "click_at", "args": {"x": 500, "y": 500}, "id": "a"},
                 {"name": "type_text_at", "args": {"x": 500, "y": 500, "text": "hi", "press_enter": False}},
                 {"name": "key_combination", "args": {"keys": "Control+A"}, "id": "c"},
                 screenshot_width=1280, screenshot_height=720)
    assert desktops.desk.performed == [Click(x=960, y=540), Click(x=960, y=540), Key(keys=["ctrl+a", "Delete"]),
                                       Type(text="hi"), Key(keys=["control+a"])]
    responses = [r.model_dump() for r in result.function_responses]
    assert [(r["name"], r["id"]) for r in responses] == [("click_at", "a"), ("type_text_at", None),
                                                         ("key_combination", "c")]
    for r in responses:
        assert r["response"] == {"url": "http://fake.test/"}
        [part] = r["parts"]
        assert part["inline_data"]["mime_type"] == "image/png" and size_of(part["inline_data"]["data"]) == (1280, 720)


def test_a_wrong_call_is_answered_with_its_error_and_the_next_still_runs(desktops):
    result = run(desktops, {"name": "click_at", "args": {"x": 5000, "y": 1}},
                 {"name": "teleport", "args": {}}, {"name": "hover_at", "args": {"x": 0, "y": 0}})
    assert desktops.desk.performed == [Move(x=0, y=0)]
    errors = [r.response.get("error") for r in result.function_responses]
    assert errors[0] == "click_at: x=5000 is off the 0..999 grid"
    assert errors[1].startswith("unknown function 'teleport'") and errors[2] is None
    assert size_of(result.function_responses[0].parts[0].inline_data.data) == (1920, 1080)


def test_a_call_requiring_confirmation_is_run_and_acknowledged(desktops):
    result = run(desktops, {"name": "click_at", "args": {"x": 1, "y": 1, "safety_decision": CONFIRM}},
                 {"name": "click_at", "args": {"x": 2, "y": 2}})
    assert [r.response.get("safety_acknowledgement") for r in result.function_responses] == ["true", None]
    assert len(desktops.desk.performed) == 2


def test_the_desktops_refusal_is_the_calls_error_other_faults_propagate(desktops):
    desktops.refusal = InvalidAction("nope")
    result = run(desktops, {"name": "click_at", "args": {"x": 1, "y": 1}})
    assert result.function_responses[0].response["error"] == "invalid_action: nope"
    desktops.refusal = OperatorInControl("a person has taken over")
    with pytest.raises(OperatorInControl):
        run(desktops, {"name": "click_at", "args": {"x": 1, "y": 1}})


@pytest.mark.parametrize("body", [{}, {"function_calls": []}, {"function_calls": [{"name": ""}]},
                                  {"function_calls": [{"name": "go_back", "extra": 1}]},
                                  {"function_calls": [{"name": "go_back"}], "screenshot_width": 0}])
def test_bad_gemini_bodies_are_refused(body):
    with pytest.raises(ValidationError):
        GeminiComputerRequest.model_validate(body)
