"""Each model family THROUGH the real loop, on the real desktop, with its real SDK.

A FakeServer on 127.0.0.1 plays the model: each queued turn is a function of the request that
checks the request's shape (plain ``assert``s) and answers with actions aimed at targets on the
event-recording test page. Targets are computed from the measured ``viewport`` and converted to
the model's own coordinate space with vision.coords, exactly as a model would see them; the page
then tells us where the click really landed.

A failed check inside a turn is recorded and answered with HTTP 400, so the run stops at once and
the test reports which request was wrong (``model.problems``).
"""

from __future__ import annotations

import time

import pytest

from tests.fakes import anthropic_fake as af
from tests.fakes import gemini_fake as gf
from tests.fakes import openai_fake as oa
from tests.fakes.server import FakeModel, FakeServer, Reply, Request
from vision import coords
from vision.providers.anthropic import region_to_display

pytestmark = [pytest.mark.x11, pytest.mark.usefixtures("no_paused_run")]

SESSION = "itest"
ACT = f"/api/v1/sessions/{SESSION}/vision/act"
ANTHROPIC_KEY = "sk-ant-test-loop-0123456789abcdef"
OPENAI_KEY = "sk-test-loop-0123456789abcdefghij"
GEMINI_KEY = "AIza-test-loop-0123456789abcdefghij"

# Test-page targets in CSS pixels (tests/assets/testpage.html): a point well inside each element.
SIGNIN = (1255, 142)   # button at left 1200, top 120
FIELD = (300, 282)     # text input at left 100, top 260, 900x44
EMAIL = (1500, 282)    # email input at left 1340, top 262, 400x40


# --------------------------------------------------------------------------------------- helpers


@pytest.fixture
def model_config(services):
    """services.config.models, restored after the test."""
    saved = {name: dict(options) for name, options in services.config.models.items()}
    yield services.config.models
    services.config.models.clear()
    services.config.models.update(saved)


@pytest.fixture
def model():
    with FakeServer() as server:
        yield FakeModel(server)


def display(viewport, css: tuple[int, int]) -> tuple[int, int]:
    return viewport[0] + css[0], viewport[1] + css[1]


def aim(space: coords.Space, target: tuple[int, int], *, exact: bool = True, search: int = 8):
    """A display pixel near ``target`` and the model coordinates pointing at it.

    ``exact=True``: a pixel whose round trip model -> display is exact, so the click must land on
    that very pixel. ``exact=False``: one whose round trip is NOT exact (the conversion's 1 px), to
    check the loop lands within 1 px of it. Returns (the display pixel the loop will click, model
    coords); with ``exact=False`` also the intended pixel: ((landed, intended), model).
    """
    assert space.kind == "pixels"
    for dx in range(search):
        for dy in range(search):
            x, y = target[0] + dx, target[1] + dy
            mx, my = space.from_display(x, y)
            # Where a pixel of a W-wide screenshot lands on the display, worked out here rather than
            # with the code under test: the same proportional mapping, nearest pixel.
            landed = (min(round(mx * 1920 / space.width), 1919), min(round(my * 1080 / space.height), 1079))
            if (landed == (x, y)) == exact:
                assert abs(landed[0] - x) <= 1 and abs(landed[1] - y) <= 1
                return (landed if exact else (landed, (x, y))), (mx, my)
    raise AssertionError(f"no {'exact' if exact else 'inexact'} pixel near {target} in {space}")


def clicks(page) -> list[dict]:
    time.sleep(0.3)  # stragglers: events travel by fetch
    return [e for e in page.events if e["type"] in ("mousedown", "click")]


def act(vision_api, **body) -> dict:
    r = vision_api.post(ACT, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def events_of(services, trace_id: str, kind: str) -> list[dict]:
    return [e for e in services.bus.recent() if e.get("trace_id") == trace_id and e["kind"] == kind]


# ------------------------------------------------------------------------------------- anthropic

ANTHROPIC_MODEL = "anthropic/claude-opus-4-5"  # -> computer_20251124, with zoom


def _anthropic(model_config, model: FakeModel, name: str = ANTHROPIC_MODEL) -> None:
    model_config[name] = {"base_url": model.url, "api_key": ANTHROPIC_KEY, "timeout": 10}


def _anthropic_request_shape(request: Request) -> tuple[int, int]:
    """The checks every Messages request must pass; returns the declared display size."""
    assert request.path == "/v1/messages", request.path
    assert "computer-use-2025-11-24" in request.headers.get("anthropic-beta", ""), request.headers
    (tool,) = request.body["tools"]
    assert tool["type"] == "computer_20251124" and tool["name"] == "computer", tool
    assert tool.get("enable_zoom") is True, tool
    declared = (tool["display_width_px"], tool["display_height_px"])
    assert declared == af.png_size(af.last_image(request.body)), "declared display != the PNG sent"
    assert ANTHROPIC_KEY not in str(request.body)
    return declared


def test_anthropic_multi_step_run_with_zoom_to_done(vision_api, page, viewport, services, model_config, model):
    _anthropic(model_config, model)
    space = coords.anthropic()
    assert (space.width, space.height) == (1429, 804)
    signin_px, signin_m = aim(space, display(viewport, SIGNIN), exact=True)
    (field_px, field_intended), field_m = aim(space, display(viewport, FIELD), exact=False)
    # Zoom on the page's status line ("ready" -> "signed in"), in model pixels.
    zoom_region = [round(v * 1429 / 1920) for v in (viewport[0] + 1150, viewport[1] + 330, viewport[0] + 1550,
                                                    viewport[1] + 420)]
    zoom_display = region_to_display(zoom_region, space)
    zoom_scale = min(4.0, space.width / zoom_display.width, space.height / zoom_display.height)
    zoom_size = (round(zoom_display.width * zoom_scale), round(zoom_display.height * zoom_scale))
    ids = {}

    def first(request):
        _anthropic_request_shape(request)
        assert request.body["model"] == "claude-opus-4-5"
        (user,) = request.body["messages"]
        assert user["content"][0] == {"type": "text", "text": "sign in and say hello"}
        assert user["content"][1]["type"] == "image"
        reply = af.reply(af.text("I will click Sign in."),
                         af.tool_use({"action": "left_click", "coordinate": list(signin_m)}))
        ids["click"] = reply.body["content"][1]["id"]
        return reply

    def after_click(request):
        declared = _anthropic_request_shape(request)
        (result,) = af.tool_results(request.body)
        assert result["tool_use_id"] == ids["click"] and not result.get("is_error"), result
        images = [b for b in result["content"] if b["type"] == "image"]
        assert len(images) == 1 and af.png_size(images[0]) == declared  # the new screen rides on the result
        reply = af.reply(af.tool_use({"action": "zoom", "region": zoom_region}))
        ids["zoom"] = reply.body["content"][0]["id"]
        return reply

    def after_zoom(request):
        declared = _anthropic_request_shape(request)
        (result,) = af.tool_results(request.body)
        assert result["tool_use_id"] == ids["zoom"] and not result.get("is_error"), result
        images = [b for b in result["content"] if b["type"] == "image"]
        assert len(images) == 2, "the zoomed crop, then the screen"
        assert af.png_size(images[0]) == zoom_size and af.png_size(images[1]) == declared
        reply = af.reply(af.text("Signed in. Now the field."),
                         af.tool_use({"action": "left_click", "coordinate": list(field_m)}),
                         af.tool_use({"action": "type", "text": "hello glassdesk"}))
        ids["field"], ids["type"] = reply.body["content"][1]["id"], reply.body["content"][2]["id"]
        return reply

    def after_typing(request):
        _anthropic_request_shape(request)
        results = af.tool_results(request.body)
        assert [r["tool_use_id"] for r in results] == [ids["field"], ids["type"]]
        assert not any(r.get("is_error") for r in results), results
        assert results[-1]["content"][-1]["type"] == "image"  # the screenshot goes on the last result
        return af.end_turn("Signed in and typed hello glassdesk.")

    model.turns(first, after_click, after_zoom, after_typing)
    body = act(vision_api, instruction="sign in and say hello", model=ANTHROPIC_MODEL)

    assert model.problems == []
    assert body["status"] == "done", body.get("error")
    assert body["answer"] == "Signed in and typed hello glassdesk."
    assert len(model.requests) == 4 and len(body["steps"]) == 4
    signin = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (signin["screenX"], signin["screenY"]) == signin_px  # round trip exact: the very pixel
    field = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "field")
    assert (field["screenX"], field["screenY"]) == field_px  # what the conversion gives, to the pixel
    assert field_px != field_intended  # inexact by construction, and yet within the conversion's 1 px:
    assert abs(field["screenX"] - field_intended[0]) <= 1 and abs(field["screenY"] - field_intended[1]) <= 1
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "hello glassdesk")

    # The trace keeps both spaces: the model's raw coordinate and the display pixel executed.
    trace = services.store.load(body["trace_id"])
    step1 = trace.steps[0]
    assert step1.tool_calls[0].raw == {"action": "left_click", "coordinate": list(signin_m)}
    assert (step1.actions[0]["x"], step1.actions[0]["y"]) == signin_px
    assert step1.model_image_size == (1429, 804)
    assert trace.steps[1].actions[0]["action"] == "zoom" and not trace.steps[1].argv  # zoom executes nothing
    assert trace.meta.model == ANTHROPIC_MODEL and trace.meta.status == "done"
    assert trace.meta.usage.input_tokens == 4 * 1000
    assert services.store.verify(body["trace_id"]).ok


def test_anthropic_429_is_retried_and_an_off_screen_input_is_reported_not_executed(
        vision_api, page, viewport, services, model_config, model):
    _anthropic(model_config, model)
    tool_id = "toolu_offscreen"

    def rate_limited(request):
        _anthropic_request_shape(request)
        return af.error(429, "rate_limit_error", "slow down", {"retry-after": "1"})

    def retried(request):
        _anthropic_request_shape(request)
        # The retry resends the same turn: nothing was committed by the failed attempt.
        assert request.body["messages"] == model.requests[0].body["messages"]
        # x == 1429 is one past the last pixel of the 1429-wide image Claude is sent.
        return af.reply(af.tool_use({"action": "left_click", "coordinate": [1429, 100]}, id=tool_id))

    def told(request):
        _anthropic_request_shape(request)
        (result,) = af.tool_results(request.body)
        assert result["tool_use_id"] == tool_id and result.get("is_error") is True, result
        message = result["content"][0]["text"]
        assert "off the 1429x804 screen" in message, message
        assert result["content"][-1]["type"] == "image"  # an error still carries the screenshot
        return af.end_turn("I could not click there.")

    model.turns(rate_limited, retried, told)
    body = act(vision_api, instruction="click the far edge", model=ANTHROPIC_MODEL)

    assert model.problems == []
    assert body["status"] == "done" and body["answer"] == "I could not click there."
    assert len(model.requests) == 3
    retries = events_of(services, body["trace_id"], "retrying")
    assert [(e["attempt"], e["wait_s"]) for e in retries] == [(1, 1.0)]  # Retry-After honoured
    assert "429" in retries[0]["reason"]
    assert clicks(page) == []  # refused, not clamped to the edge
    step1 = body["steps"][0]
    assert step1["executed"] == [] and step1["error"]["code"] == "action_failed"
    assert "off the 1429x804 screen" in step1["error"]["message"]
    trace = services.store.load(body["trace_id"])
    assert trace.steps[0].tool_calls[0].error and trace.steps[0].results[0].ok is False


# ---------------------------------------------------------------------------------------- openai


def _openai(model_config, model: FakeModel, name: str) -> None:
    model_config[name] = {"base_url": model.url + "/v1", "api_key": OPENAI_KEY, "timeout": 10}


def test_openai_ga_batched_actions_execute_in_order(vision_api, page, viewport, services, model_config, model):
    name = "openai/gpt-5.4"  # any model but computer-use-preview*: the GA computer tool
    _openai(model_config, model, name)
    space = coords.pixels(1920, 1080)  # GA: pixels of the screenshot sent, the full frame
    email_px, email_m = aim(space, display(viewport, EMAIL))
    field_px, field_m = aim(space, display(viewport, FIELD))
    calls = {}

    def first(request):
        assert request.path == "/v1/responses"
        assert request.body["tools"] == [{"type": "computer"}]
        assert request.body["truncation"] == "auto" and "previous_response_id" not in request.body
        (image_url,) = oa.image_urls(request)
        assert oa.png_size(image_url) == (1920, 1080)
        assert oa.user_texts(request) == ["fill both fields"]
        call = oa.computer_call(actions=[
            {"type": "click", "button": "left", "x": email_m[0], "y": email_m[1]},
            {"type": "type", "text": "ga@example.test"},
            {"type": "click", "button": "left", "x": field_m[0], "y": field_m[1]},
            {"type": "type", "text": "batched"},
        ])
        calls["first"] = call["call_id"]
        return oa.ok(call, id="resp_ga_1", model="gpt-5.4")

    def second(request):
        assert request.body["previous_response_id"] == "resp_ga_1"
        (output,) = oa.input_items(request, "computer_call_output")
        assert output["call_id"] == calls["first"] and output["acknowledged_safety_checks"] == []
        assert output["output"]["type"] == "computer_screenshot"
        assert oa.png_size(output["output"]["image_url"]) == (1920, 1080)
        return oa.ok(oa.message("Both fields are filled."), id="resp_ga_2", model="gpt-5.4")

    model.turns(first, second)
    body = act(vision_api, instruction="fill both fields", model=name)

    assert model.problems == []
    assert body["status"] == "done" and body["answer"] == "Both fields are filled."
    # One call, four actions, four commands, in the model's order.
    step1 = body["steps"][0]
    assert [a["action"] for a in step1["actions"]] == ["click", "type", "click", "type"]
    # The commands that act (the pointer glide before a click, if on, only moves), in the model's order.
    acting = [argv for argv in step1["executed"] if "click" in argv or "type" in argv]
    assert [(argv[argv.index("click") - 2:argv.index("click")] if "click" in argv else argv[-1])
            for argv in acting] == \
        [[str(email_px[0]), str(email_px[1])], "ga@example.test", [str(field_px[0]), str(field_px[1])], "batched"]
    email = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "email")
    field = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "field")
    assert (email["screenX"], email["screenY"]) == email_px
    assert (field["screenX"], field["screenY"]) == field_px
    assert email["t"] < field["t"]
    # Typed into the email before the field was clicked, and the field got only its own text.
    page.wait_for(lambda e: e["type"] == "input" and e["email"] == "ga@example.test" and e["field"] == "batched")


def test_openai_safety_check_needs_confirmation_then_acknowledged_resume(
        vision_api, page, viewport, services, model_config, model):
    name = "openai/computer-use-preview"
    _openai(model_config, model, name)
    space = coords.pixels(1280, 720)  # the preview tool's declared display
    signin_px, signin_m = aim(space, display(viewport, SIGNIN))
    check = oa.safety_check("sc_loop_1", "malicious_instructions", "The page asks you to sign in.")
    calls = {}

    def first(request):
        assert request.body["tools"] == [{"type": "computer_use_preview", "display_width": 1280,
                                          "display_height": 720, "environment": "linux"}]
        (image_url,) = oa.image_urls(request)
        assert oa.png_size(image_url) == (1280, 720)
        call = oa.computer_call({"type": "click", "button": "left", "x": signin_m[0], "y": signin_m[1]},
                                safety_checks=[check])
        calls["first"] = call["call_id"]
        return oa.ok(oa.reasoning("The page wants a sign-in."), call, id="resp_sc_1")

    def resumed(request):
        assert request.body["previous_response_id"] == "resp_sc_1"
        (output,) = oa.input_items(request, "computer_call_output")
        assert output["call_id"] == calls["first"]
        assert output["acknowledged_safety_checks"] == [check]  # the operator's decision, sent back
        assert oa.png_size(output["output"]["image_url"]) == (1280, 720)
        return oa.ok(oa.message("Signed in."), id="resp_sc_2")

    model.turns(first, resumed)
    held = act(vision_api, instruction="sign in", model=name)
    assert model.problems == []
    assert held["status"] == "needs_confirmation"
    assert held["pending_safety_checks"] == [check]
    assert held["steps"][0]["error"]["code"] == "needs_confirmation"
    assert "The page asks you to sign in." in held["steps"][0]["error"]["message"]
    assert clicks(page) == []  # nothing runs before the operator approves
    assert len(model.requests) == 1

    # Acknowledging a check that is not pending is refused, and the run stays held.
    wrong = vision_api.post(ACT, json={"acknowledged_safety_checks": ["sc_other"]})
    assert wrong.status_code == 422 and "sc_other" in wrong.json()["error"]["message"]

    done = act(vision_api, acknowledged_safety_checks=["sc_loop_1"])
    assert model.problems == []
    assert done["status"] == "done" and done["answer"] == "Signed in."
    assert done["trace_id"] == held["trace_id"]
    assert len(model.requests) == 2
    signin = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (signin["screenX"], signin["screenY"]) == signin_px
    acks = events_of(services, held["trace_id"], "acknowledged")
    assert [e["checks"] for e in acks] == [["sc_loop_1"]]
    trace = services.store.load(held["trace_id"])
    assert trace.meta.status == "done" and services.store.verify(held["trace_id"]).ok


# ---------------------------------------------------------------------------------------- gemini


def test_gemini_turn_of_several_calls_held_for_confirmation_then_run_in_order(
        vision_api, page, viewport, services, model_config, model):
    name = "gemini/gemini-2.5-computer-use-preview-10-2025"
    model_config[name] = {"base_url": model.url, "api_key": GEMINI_KEY, "timeout": 10}
    grid = coords.gemini()
    signin_target, field_target = display(viewport, SIGNIN), display(viewport, FIELD)
    signin_g, field_g = grid.from_display(*signin_target), grid.from_display(*field_target)

    def first(request):
        assert gf.model_of(request) == "gemini-2.5-computer-use-preview-10-2025"
        assert request.headers["x-goog-api-key"] == GEMINI_KEY and GEMINI_KEY not in str(request.body)
        assert gf.computer_use(request) == {"environment": "ENVIRONMENT_DESKTOP"}
        (user,) = gf.contents(request)
        assert user["parts"][0] == {"text": "sign in and say hello"}
        assert [gf.png_size(png) for png in gf.images(user)] == [(1920, 1080)]
        return gf.ok(gf.text("Sign in, then the field."),
                     gf.function_call("click_at", {"x": signin_g[0], "y": signin_g[1],
                                                   "safety_decision": gf.confirm("Signing in shares your identity.")},
                                      id="fc_signin"),
                     gf.function_call("type_text_at", {"x": field_g[0], "y": field_g[1], "text": "hello gemini",
                                                       "press_enter": False}, id="fc_type"))

    def resumed(request):
        user, model_turn, answers = gf.contents(request)
        assert model_turn["role"] == "model" and len(model_turn["parts"]) == 3
        responses = gf.function_responses(answers)
        assert [(r["name"], r["id"]) for r in responses] == [("click_at", "fc_signin"), ("type_text_at", "fc_type")]
        assert responses[0]["response"] == {"url": page.url, "safety_acknowledgement": "true"}
        assert responses[1]["response"] == {"url": page.url}
        first_screen, second_screen = gf.images(answers)  # each the screen right after its own call
        assert gf.png_size(first_screen) == gf.png_size(second_screen) == (1920, 1080)
        assert first_screen != second_screen
        return gf.ok(gf.text("Signed in and said hello."))

    model.turns(first, resumed)
    held = act(vision_api, instruction="sign in and say hello", model=name)
    assert model.problems == []
    assert held["status"] == "needs_confirmation"
    assert held["pending_safety_checks"] == [{"id": "fc_signin", "code": "require_confirmation",
                                              "message": "Signing in shares your identity."}]
    assert clicks(page) == []  # nothing of the turn runs before the operator approves

    done = act(vision_api, acknowledged_safety_checks=["fc_signin"])
    assert model.problems == []
    assert done["status"] == "done" and done["answer"] == "Signed in and said hello."
    signin = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert abs(signin["screenX"] - signin_target[0]) <= 1 and abs(signin["screenY"] - signin_target[1]) <= 1
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "hello gemini")
    assert done["usage"]["input_tokens"] == 2 * 1200
    assert services.store.verify(done["trace_id"]).ok


# ------------------------------------------------------------------------------------------ chat


def completion(content: str, *, prompt_tokens: int = 300, completion_tokens: int = 20) -> Reply:
    return Reply(200, {
        "id": "chatcmpl-loop", "object": "chat.completion", "created": 1700000000, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })


def _chat_user_text(request: Request) -> str:
    last = request.body["messages"][-1]
    assert last["role"] == "user"
    return "\n".join(p["text"] for p in last["content"] if p["type"] == "text")


def _chat_image_size(request: Request) -> tuple[int, int]:
    last = request.body["messages"][-1]
    (image,) = [p for p in last["content"] if p["type"] == "image_url"]
    return oa.png_size(image["image_url"]["url"])


# name, image sent (= the model's pixel space), how a click at (x, y) is written
CHAT_DIALECTS = {
    "json": ("chat/gpt-4o-mini", (1280, 720),
             lambda x, y: f'{{"thought": "Sign in is top right.", "action": "click", "x": {x}, "y": {y}}}'),
    "uitars-1.5": ("chat/ui-tars-1.5-7b", (1932, 1092),  # Qwen's smart resize of 1920x1080
                   lambda x, y: f"Thought: Sign in is top right.\nAction: click(start_box='({x},{y})')"),
}


@pytest.mark.parametrize("dialect", list(CHAT_DIALECTS))
def test_chat_malformed_reply_is_told_once_then_fails(vision_api, page, viewport, services, model_config, model,
                                                      dialect):
    name, image_size, click = CHAT_DIALECTS[dialect]
    model_config[name] = {"base_url": model.url + "/v1", "api_key": "test-key", "timeout": 10}
    space = coords.pixels(*image_size)
    signin_px, signin_m = aim(space, display(viewport, SIGNIN))

    def first(request):
        assert request.path == "/v1/chat/completions" and request.body["model"] == name.split("/", 1)[1]
        assert request.body["messages"][0]["role"] == "system"
        assert _chat_image_size(request) == image_size
        assert "Task: sign in" in _chat_user_text(request)
        return completion(click(*signin_m))

    def after_click(request):
        text = _chat_user_text(request)
        assert "Result of click: done" in text and "could not be understood" not in text, text
        return completion("I think I should press the button now.")

    def after_first_garble(request):
        text = _chat_user_text(request)
        assert "could not be understood" in text, text  # the loop tells the model, once
        assert _chat_image_size(request) == image_size
        return completion("Sure, done!")

    model.turns(first, after_click, after_first_garble)
    body = act(vision_api, instruction="sign in", model=name)

    assert model.problems == []
    assert body["status"] == "failed"
    assert body["error"]["code"] == "model_parse_failed"
    assert len(model.requests) == 3  # no third chance
    assert [s["error"]["code"] if s["error"] else None for s in body["steps"]] == \
        [None, "model_parse_failed", "model_parse_failed"]
    signin = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (signin["screenX"], signin["screenY"]) == signin_px
    assert len([e for e in clicks(page) if e["type"] == "click"]) == 1
    trace = services.store.load(body["trace_id"])
    assert trace.meta.status == "failed" and trace.meta.error.code == "model_parse_failed"
    assert trace.steps[1].text == "I think I should press the button now."  # the garbled reply is evidence


def test_a_chat_model_with_marks_is_shown_the_controls_numbered_and_its_click_at_a_listed_centre_lands(
        vision_api, page, viewport, services, model_config, model, desk):
    """Set-of-marks through the real loop and the openai SDK: the request carries the marked screenshot
    and the list; a model that picks the mark named "Sign in" and points at its listed centre (in its
    own 1280x720 pixels) presses the real button; the trace keeps the plain screen."""
    import base64
    import io
    import re

    from PIL import Image

    name = "chat/gpt-4o-mini"
    model_config[name] = {"base_url": model.url + "/v1", "api_key": "test-key", "timeout": 10}
    plain = desk.capture()
    seen: dict = {}

    def pick_sign_in(request):
        text = _chat_user_text(request)
        found = re.search(r'\[(\d+)\] button "Sign in" \(page\): centre \((\d+), (\d+)\)', text)
        assert found, text
        (image,) = [p for p in request.body["messages"][-1]["content"] if p["type"] == "image_url"]
        seen["image"] = Image.open(io.BytesIO(base64.b64decode(image["image_url"]["url"].split(",", 1)[1])))
        return completion(f'{{"action": "click", "x": {found[2]}, "y": {found[3]}}}')

    model.turns(pick_sign_in, lambda request: completion('{"action": "done", "answer": "signed in"}'))
    body = act(vision_api, instruction="sign in", model=name, marks=True)
    assert model.problems == [] and body["status"] == "done", (model.problems, body)
    page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    # what the model was shown is the screen with boxes drawn on it, scaled to its 1280x720
    shown = seen["image"].convert("RGB")
    assert shown.size == (1280, 720)
    scaled = plain.image.resize((1280, 720))
    differing = sum(1 for x in range(0, 1280, 4) for y in range(0, 720, 4)
                    if max(abs(a - b) for a, b in zip(shown.getpixel((x, y)), scaled.getpixel((x, y)))) > 60)
    assert differing > 100, differing
    # the trace's first screenshot is the plain screen: no mark drawn around the button
    (sign_in,) = [m for m in desk.marks(200, False).marks if m.name == "Sign in"]
    x, y, width, height = sign_in.box
    around = (x - 20, y - 20, x + width + 20, y + height + 20)
    with Image.open(services.store.image_path(body["trace_id"], 1, "before")) as before:
        assert before.convert("RGB").crop(around).tobytes() == plain.image.crop(around).tobytes()
    # and says what the model's marks were: the step's record lists them
    assert "Sign in" in [m.name for m in services.store.load(body["trace_id"]).steps[0].marks]


# ---------------------------------------------------------------------------------------- budget


def test_budget_stops_after_the_step_that_crosses_it(vision_api, page, viewport, services, model_config, model):
    name = "chat/gpt-4o-mini"
    model_config[name] = {"base_url": model.url + "/v1", "api_key": "test-key", "timeout": 10}
    space = coords.pixels(1280, 720)
    _, (mx, my) = aim(space, display(viewport, SIGNIN))
    move = f'{{"action": "move", "x": {mx}, "y": {my}}}'
    # 320 + 320 = 640 tokens: under 1000. The third turn's 660 takes it to 1300: over.
    model.turns(completion(move), completion(move), completion(move, prompt_tokens=600, completion_tokens=60),
                completion('{"action": "done"}'))
    body = act(vision_api, instruction="hover sign in", model=name, budget_tokens=1000)

    assert model.problems == []
    assert body["status"] == "budget_exceeded"
    assert body["error"]["code"] == "budget_exceeded" and "1300" in body["error"]["message"]
    assert len(body["steps"]) == 3 and len(model.requests) == 3  # the crossing step ran; no 4th call
    assert body["usage"]["input_tokens"] + body["usage"]["output_tokens"] == 1300
    assert len(body["steps"][2]["executed"]) == 1
    trace = services.store.load(body["trace_id"])
    assert trace.meta.status == "budget_exceeded" and trace.meta.steps == 3
