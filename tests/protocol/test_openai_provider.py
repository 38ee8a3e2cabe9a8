"""OpenAIProvider through the real openai SDK against a local fake Responses API."""

from __future__ import annotations

import pytest

from desktop import keys
from desktop.actions import Click, DoubleClick, Drag, Key, Move, Point, Scroll, Type, Wait
from desktop.frame import Frame
from tests.fakes import openai_fake as oa
from tests.fakes.server import FakeServer
from vision import coords
from vision.actions import CallResult, SafetyCheck, Screenshot
from vision.providers.base import ModelCallError, Observation
from vision.providers.openai import (
    OpenAIProvider,
    keypress_chord,
    map_action,
    map_actions,
    scroll_actions,
    tool_for_model,
)

API_KEY = "sk-test-0123456789abcdefSECRET"
SYSTEM = "You operate a Linux desktop."
INSTRUCTION = "Open the settings page."
FRAME = Frame(bytes(1920 * 1080 * 4), 1920, 1080)
OBSERVATION = Observation(FRAME)
PREVIEW = coords.pixels(1280, 720)
FULL = coords.pixels(1920, 1080)


def provider(fake: FakeServer, model: str = "computer-use-preview", **kwargs) -> OpenAIProvider:
    return OpenAIProvider(INSTRUCTION, model=model, system=SYSTEM, api_key=API_KEY, base_url=fake.url + "/v1",
                          timeout=10, **kwargs)


def click(x: int, y: int, button: str = "left", **extra) -> dict:
    return {"type": "click", "button": button, "x": x, "y": y, **extra}


# --- request shape -------------------------------------------------------------------------------


def test_preview_first_request(fake):
    fake.queue(oa.ok(oa.computer_call(click(640, 360))))
    turn = provider(fake).turn(OBSERVATION, [])

    [request] = fake.requests
    assert (request.method, request.path) == ("POST", "/v1/responses")
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    body = request.body
    [image_url] = oa.image_urls(request)
    width, height = oa.png_size(image_url)
    assert body["tools"] == [{"type": "computer_use_preview", "display_width": width, "display_height": height,
                              "environment": "linux"}]
    assert (width, height) == (1280, 720) == turn.image_size
    assert body["model"] == "computer-use-preview"
    assert body["truncation"] == "auto"
    assert body["reasoning"] == {"summary": "concise"}
    assert body["instructions"] == SYSTEM
    assert "previous_response_id" not in body
    [message] = body["input"]
    assert message["role"] == "user"
    assert [p["type"] for p in message["content"]] == ["input_text", "input_image"]
    assert message["content"][0]["text"] == INSTRUCTION


def test_ga_tool_sends_the_full_frame(fake):
    fake.queue(oa.ok(oa.computer_call(actions=[{"type": "screenshot"}]), model="gpt-5.4"))
    p = provider(fake, model="openai/gpt-5.4")
    turn = p.turn(OBSERVATION, [])

    body = fake.requests[0].body
    assert p.name == "openai/gpt-5.4" and body["model"] == "gpt-5.4"
    assert body["tools"] == [{"type": "computer"}]
    assert oa.png_size(oa.image_urls(fake.requests[0])[0]) == (1920, 1080) == turn.image_size
    assert turn.calls[0].actions == [Screenshot()]


def test_tool_flavour_by_model_and_override(fake):
    assert tool_for_model("computer-use-preview-2025-03-11") == "computer_use_preview"
    assert tool_for_model("gpt-5.4") == "computer"
    fake.queue(oa.ok(oa.message("ok")))
    provider(fake, model="computer-use-preview", tool="computer").turn(OBSERVATION, [])
    assert fake.requests[0].body["tools"] == [{"type": "computer"}]


def test_env_vars_supply_key_and_base_url(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url + "/v1")
    fake.queue(oa.ok(oa.message("ok")))
    OpenAIProvider(INSTRUCTION, model="gpt-5.4", system=SYSTEM).turn(OBSERVATION, [])
    assert fake.requests[0].headers["authorization"] == f"Bearer {API_KEY}"


def test_missing_key_is_refused():
    with pytest.raises(ModelCallError, match="OPENAI_API_KEY"):
        OpenAIProvider(INSTRUCTION, model="gpt-5.4", system=SYSTEM)


# --- the conversation ----------------------------------------------------------------------------


def test_second_turn_answers_the_call_with_a_screenshot(fake):
    first = oa.response(oa.computer_call(click(10, 10), call_id="call_a"))
    fake.queue(oa.Reply(200, first), oa.ok(oa.message("done")))
    p = provider(fake)
    p.turn(OBSERVATION, [])
    p.turn(OBSERVATION, [CallResult("call_a", ok=True)])

    second = fake.requests[1]
    assert second.body["previous_response_id"] == first["id"]
    assert second.body["instructions"] == SYSTEM
    [output] = oa.input_items(second, "computer_call_output")
    assert output["call_id"] == "call_a"
    assert output["acknowledged_safety_checks"] == []
    assert output["output"]["type"] == "computer_screenshot"
    assert oa.png_size(output["output"]["image_url"]) == (1280, 720)
    assert oa.image_urls(second) == [output["output"]["image_url"]]  # no input_image besides it
    assert oa.user_texts(second) == []


def test_failed_call_is_answered_with_screenshot_and_a_note(fake):
    fake.queue(oa.ok(oa.computer_call(click(1300, 10), call_id="call_off")), oa.ok(oa.message("sorry")))
    p = provider(fake)
    turn = p.turn(OBSERVATION, [])
    [call] = turn.calls
    assert call.actions == [] and "x=1300 is off the screen" in call.error

    p.turn(OBSERVATION, [CallResult("call_off", ok=False, error=call.error)], note="Reply with an action.")
    second = fake.requests[1]
    [output] = oa.input_items(second, "computer_call_output")
    assert output["call_id"] == "call_off" and output["output"]["image_url"].startswith("data:image/png;base64,")
    [text] = oa.user_texts(second)
    assert "call_off failed" in text and "x=1300 is off the screen" in text and "Reply with an action." in text


def test_after_a_message_the_next_turn_shows_the_screen(fake):
    fake.queue(oa.ok(oa.message("Which settings?")), oa.ok(oa.message("ok")))
    p = provider(fake)
    p.turn(OBSERVATION, [])
    p.turn(OBSERVATION, [], note="The system settings.")
    [message] = fake.requests[1].body["input"]
    assert [part["type"] for part in message["content"]] == ["input_text", "input_image"]
    assert message["content"][0]["text"] == "The system settings."


def test_message_ends_the_task_with_reasoning_and_usage(fake):
    fake.queue(oa.ok(oa.reasoning("The page is open."), oa.message("Settings are open."),
                     usage_=oa.usage(input_tokens=1200, output_tokens=30, cached_tokens=800)))
    turn = provider(fake).turn(OBSERVATION, [])
    assert turn.done and turn.answer == "Settings are open." and turn.calls == []
    assert turn.reasoning == "The page is open."
    assert (turn.usage.input_tokens, turn.usage.output_tokens, turn.usage.cache_read_tokens) == (1200, 30, 800)


# --- coordinates and actions ---------------------------------------------------------------------


@pytest.mark.parametrize("target", [(0, 0), (1919, 1079), (960, 540), (1234, 567), (1, 1078)])
def test_preview_coordinates_map_back_within_a_pixel(fake, target):
    model_x, model_y = round(target[0] * 1280 / 1920), round(target[1] * 720 / 1080)
    model_x, model_y = min(model_x, 1279), min(model_y, 719)
    fake.queue(oa.ok(oa.computer_call(click(model_x, model_y))))
    [call] = provider(fake).turn(OBSERVATION, []).calls
    [action] = call.actions
    assert isinstance(action, Click)
    assert abs(action.x - target[0]) <= 1 and abs(action.y - target[1]) <= 1
    assert call.raw == {"action": click(model_x, model_y)}


def test_ga_batch_maps_to_display_actions(fake):
    batch = [
        click(100, 200),
        {"type": "type", "text": "hello"},
        {"type": "keypress", "keys": ["CTRL", "A"]},
        {"type": "scroll", "x": 960, "y": 540, "scroll_x": 0, "scroll_y": 300},
        {"type": "wait"},
    ]
    fake.queue(oa.ok(oa.computer_call(actions=batch, call_id="call_batch"), model="gpt-5.4"))
    [call] = provider(fake, model="gpt-5.4").turn(OBSERVATION, []).calls
    assert call.id == "call_batch" and call.error is None
    assert call.actions == [
        Click(x=100, y=200),
        Type(text="hello"),
        Key(keys=["ctrl+a"]),
        Scroll(x=960, y=540, direction="down", amount=3),
        Wait(duration_ms=1000),
    ]


@pytest.mark.filterwarnings("error")
def test_malformed_action_from_the_sdk_is_a_call_error(fake):
    # The SDK builds models without validation; the provider must still see what was sent.
    fake.queue(oa.ok(oa.computer_call(actions=[{"type": "teleport", "x": 1}], call_id="call_t"), model="gpt-5.4"))
    [call] = provider(fake, model="gpt-5.4").turn(OBSERVATION, []).calls
    assert call.id == "call_t" and call.actions == []
    assert call.error == "action 1 (teleport): unknown action type 'teleport'"
    assert call.raw == {"actions": [{"type": "teleport", "x": 1}]}


def test_a_bad_action_in_a_batch_fails_the_whole_call():
    actions, error = map_actions([click(100, 200), click(1920, 5)], FULL)
    assert actions == [] and error.startswith("action 2 (click)") and "x=1920 is off the screen" in error
    assert map_actions([{"type": "teleport"}], FULL)[1] == "action 1 (teleport): unknown action type 'teleport'"
    assert "is not a number" in map_actions([click("a", 1)], FULL)[1]


@pytest.mark.parametrize("names, chord, syms", [
    (["CTRL", "A"], "ctrl+a", ["Control_L", "a"]),
    (["ENTER"], "enter", ["Return"]),
    (["ESC"], "esc", ["Escape"]),
    (["ARROWLEFT"], "arrowleft", ["Left"]),
    (["CMD", "L"], "cmd+l", ["Super_L", "l"]),
    (["CTRL", "SHIFT", "T"], "ctrl+shift+t", ["Control_L", "Shift_L", "t"]),
    (["CTRL", "+"], "ctrl+plus", ["Control_L", "plus"]),
    (["SPACE"], "space", ["space"]),
    (["F5"], "F5", ["F5"]),
    (["PAGEDOWN"], "pagedown", ["Next"]),
])
def test_keypress_is_one_chord(names, chord, syms):
    assert keypress_chord(names) == chord
    [action] = map_action({"type": "keypress", "keys": names}, FULL)
    assert action == Key(keys=[chord]) and keys.chords(action.keys) == [syms]


@pytest.mark.parametrize("scroll_x, scroll_y, expected", [
    (0, 300, [("down", 3)]),  # 2.5 notches: half up
    (0, 240, [("down", 2)]),
    (0, 179, [("down", 1)]),
    (0, 180, [("down", 2)]),
    (0, -50, [("up", 1)]),
    (0, 1, [("down", 1)]),
    (-250, 0, [("left", 2)]),
    (400, -120, [("up", 1), ("right", 3)]),
    (0, 100_000, [("down", 50)]),
])
def test_scroll_pixels_become_notches(scroll_x, scroll_y, expected):
    actions = scroll_actions(10, 20, scroll_x, scroll_y, [])
    assert [(a.direction, a.amount) for a in actions] == expected
    assert all((a.x, a.y) == (10, 20) for a in actions)


def test_zero_scroll_only_moves_the_pointer():
    assert scroll_actions(10, 20, 0, 0, []) == [Move(x=10, y=20)]


def test_buttons_held_keys_drag_and_double_click():
    assert map_action(click(5, 6, "wheel"), FULL) == [Click(x=5, y=6, button="middle")]
    assert map_action(click(5, 6, "back"), FULL) == [Click(x=5, y=6, button="back")]
    assert map_action(click(5, 6, keys=["SHIFT"]), FULL) == [Click(x=5, y=6, modifiers=["shift"])]
    assert map_action({"type": "double_click", "x": 640, "y": 360}, PREVIEW) == [DoubleClick(x=960, y=540)]
    drag = {"type": "drag", "path": [{"x": 0, "y": 0}, {"x": 1200, "y": 700}], "keys": ["CTRL"]}
    assert map_action(drag, PREVIEW) == [Drag(path=[Point(x=0, y=0), Point(x=1800, y=1050)], modifiers=["ctrl"])]
    assert map_action({"type": "move", "x": 1, "y": 1}, FULL) == [Move(x=1, y=1)]
    with pytest.raises(ValueError, match="unknown mouse button"):
        map_action(click(5, 6, "thumb"), FULL)
    with pytest.raises(ValueError):
        map_action({"type": "drag", "path": [{"x": 1, "y": 1}]}, FULL)


def test_every_model_pixel_round_trips_to_its_display_pixel():
    for display in range(1920):
        model_x, _ = PREVIEW.from_display(display, 0)
        assert abs(PREVIEW.to_display(model_x, 0)[0] - display) <= 1


# --- safety checks -------------------------------------------------------------------------------


def test_safety_check_waits_for_acknowledgement(fake):
    check = oa.safety_check("sc_1")
    fake.queue(oa.ok(oa.computer_call(click(10, 10), call_id="call_s", safety_checks=[check])),
               oa.ok(oa.message("done")))
    p = provider(fake)
    turn = p.turn(OBSERVATION, [])
    assert turn.safety_checks == [SafetyCheck(**check)]
    assert not turn.done and turn.calls[0].actions == [Click(x=15, y=15)]

    with pytest.raises(ValueError, match="sc_nope"):
        p.acknowledge(["sc_nope"])
    p.acknowledge(["sc_1"])
    p.turn(OBSERVATION, [CallResult("call_s", ok=True)])
    [output] = oa.input_items(fake.requests[1], "computer_call_output")
    assert output["call_id"] == "call_s"
    assert output["acknowledged_safety_checks"] == [check]


# --- errors --------------------------------------------------------------------------------------


def test_rate_limit_is_transient_with_retry_after(fake):
    fake.queue(oa.error(429, "Rate limit reached.", type="requests", code="rate_limit_exceeded",
                        headers={"retry-after": "7"}))
    with pytest.raises(ModelCallError) as info:
        provider(fake).turn(OBSERVATION, [])
    assert info.value.transient and info.value.retry_after == 7 and info.value.status == 429
    assert len(fake.requests) == 1  # the SDK does not retry behind the loop's back


def test_server_error_is_transient_and_quota_is_not(fake):
    fake.queue(oa.error(503, "Overloaded", type="server_error"),
               oa.error(429, "You exceeded your quota.", type="insufficient_quota", code="insufficient_quota"))
    p = provider(fake)
    with pytest.raises(ModelCallError) as overloaded:
        p.turn(OBSERVATION, [])
    with pytest.raises(ModelCallError) as quota:
        p.turn(OBSERVATION, [])
    assert overloaded.value.transient and overloaded.value.status == 503
    assert not quota.value.transient


def test_retry_after_a_failure_resends_the_same_turn(fake):
    fake.queue(oa.ok(oa.computer_call(click(1, 1), call_id="call_r")), oa.error(500, "boom", type="server_error"),
               oa.ok(oa.message("done")))
    p = provider(fake)
    p.turn(OBSERVATION, [])
    with pytest.raises(ModelCallError):
        p.turn(OBSERVATION, [CallResult("call_r", ok=True)])
    p.turn(OBSERVATION, [CallResult("call_r", ok=True)])
    assert fake.requests[2].body == fake.requests[1].body


def test_unauthorized_is_not_transient_and_hides_the_key(fake):
    fake.queue(oa.error(401, f"Incorrect API key provided: {API_KEY}.", code="invalid_api_key"))
    with pytest.raises(ModelCallError) as info:
        provider(fake).turn(OBSERVATION, [])
    assert not info.value.transient and info.value.status == 401
    assert "401" in str(info.value) and API_KEY not in str(info.value)


def test_unreachable_server_is_transient():
    with FakeServer() as gone:
        url = gone.url
    p = OpenAIProvider(INSTRUCTION, model="gpt-5.4", system=SYSTEM, api_key=API_KEY, base_url=url + "/v1", timeout=5)
    with pytest.raises(ModelCallError) as info:
        p.turn(OBSERVATION, [])
    assert info.value.transient and API_KEY not in str(info.value)
