"""AnthropicProvider through the real anthropic SDK against a local fake Messages API."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from desktop.actions import (
    Click,
    DoubleClick,
    Drag,
    HoldKey,
    Key,
    MouseDown,
    MouseUp,
    Move,
    Point,
    Scroll,
    Type,
    Wait,
    Zoom,
)
from desktop.frame import Frame, encode_png
from tests.fakes import anthropic_fake as af
from tests.fakes.server import FakeServer
from vision.actions import CallResult, CursorPosition, Fail, Screenshot
from vision.providers.anthropic import (
    COMPUTER_20250124,
    COMPUTER_20251124,
    COMPUTER_TOOLSET_20260801,
    PRUNED_IMAGE,
    AnthropicProvider,
    InputError,
    model_space,
    parse_tool_use,
    prune_images,
    region_to_display,
    to_actions,
    tool_version_for,
    with_cache_breakpoints,
)
from vision.providers.base import ModelCallError, Observation, retry_after

API_KEY = "sk-ant-test-0123456789abcdefSECRET"
INSTRUCTION = "Open the settings page."
FRAME = Frame(bytes(1920 * 1080 * 4), 1920, 1080)
OBSERVATION = Observation(FRAME)
SPACE = model_space()  # 1429x804 for 1920x1080
SX, SY = 1920 / SPACE.width, 1080 / SPACE.height


def provider(fake: FakeServer, model: str = "claude-opus-4-5", **kwargs) -> AnthropicProvider:
    return AnthropicProvider(INSTRUCTION, model=model, api_key=API_KEY, base_url=fake.url, **kwargs)


def body(fake: FakeServer, i: int = -1) -> dict:
    return fake.requests[i].body


# --- the request ------------------------------------------------------------------------------


@pytest.mark.parametrize("model, tool_type, beta", [
    ("claude-opus-4-1-20250805", "computer_20250124", "computer-use-2025-01-24"),
    ("anthropic/claude-opus-4-5", "computer_20251124", "computer-use-2025-11-24"),
])
def test_request_declares_the_png_size_actually_sent(fake, model, tool_type, beta):
    fake.queue(af.end_turn("ok"))
    p = provider(fake, model)
    turn = p.turn(OBSERVATION, [])

    request = fake.requests[0]
    assert request.method == "POST" and request.path == "/v1/messages"
    assert request.headers["anthropic-beta"] == beta
    (tool,) = request.body["tools"]
    width, height = af.png_size(af.last_image(request.body))
    assert tool == {"type": tool_type, "name": "computer", "display_width_px": width, "display_height_px": height,
                    **({"enable_zoom": True} if tool_type == "computer_20251124" else {})}
    # Within Anthropic's budget, aspect kept, and the largest such size.
    assert width * height <= 1_150_000 and max(width, height) <= 1568
    assert abs(width / height - 1920 / 1080) < 0.01 and (width + 1) * (height + 1) > 1_150_000
    assert turn.image_size == (width, height)
    assert request.body["model"] == model.removeprefix("anthropic/")


def test_first_message_and_system_prompt(fake):
    fake.queue(af.end_turn("ok"))
    provider(fake, system="Never buy anything.").turn(OBSERVATION, [])
    sent = body(fake)
    system = sent["system"][0]["text"]
    assert "XFCE" in system and "Chromium" in system and f"{SPACE.width}x{SPACE.height}" in system
    assert "Never buy anything." in system
    (user,) = sent["messages"]
    assert user["role"] == "user"
    assert user["content"][0] == {"type": "text", "text": INSTRUCTION}
    assert user["content"][1]["type"] == "image"


def test_toolset_has_no_beta_and_echoes_toolset_name(fake):
    fake.queue(
        af.reply(af.toolset_use("left_click", {"coordinate": [715, 402], "text": "ctrl"}, id="t1"),
                 af.toolset_use("type", {"text": "hello"}, id="t2")),
        af.end_turn("done"),
    )
    p = provider(fake, "claude-opus-5-5")
    assert p.tool is COMPUTER_TOOLSET_20260801
    turn = p.turn(OBSERVATION, [])
    first = fake.requests[0]
    assert "anthropic-beta" not in first.headers
    assert first.body["tools"] == [{"type": "computer_toolset_20260801"}]
    assert [c.name for c in turn.calls] == ["left_click", "type"]
    click = turn.calls[0].actions[0]
    assert isinstance(click, Click) and click.modifiers == ["ctrl"]
    assert abs(click.x - 715 * SX) <= 1 and abs(click.y - 402 * SY) <= 1

    p.turn(OBSERVATION, [CallResult("t1", ok=True), CallResult("t2", ok=True)])
    second = body(fake)
    assert second["messages"][1]["content"][0]["toolset_name"] == "computer"  # assistant turn put back
    results = af.tool_results(second)
    assert [(r["tool_use_id"], r["toolset_name"]) for r in results] == [("t1", "computer"), ("t2", "computer")]


def test_tool_version_override(fake):
    p = provider(fake, "claude-opus-4-5", tool_version="computer_20250124")
    assert p.tool is COMPUTER_20250124
    with pytest.raises(ValueError, match="computer_20251124"):
        provider(fake, tool_version="computer_1999")


@pytest.mark.parametrize("model, version", [
    ("claude-3-7-sonnet-20250219", COMPUTER_20250124),
    ("claude-sonnet-4-20250514", COMPUTER_20250124),
    ("claude-sonnet-4-0", COMPUTER_20250124),
    ("claude-opus-4-1-20250805", COMPUTER_20250124),
    ("claude-sonnet-4-5", COMPUTER_20250124),
    ("claude-haiku-4-5-20251001", COMPUTER_20250124),
    ("claude-opus-4-5", COMPUTER_20251124),
    ("claude-opus-4-5-20251101", COMPUTER_20251124),
    ("claude-sonnet-4-6", COMPUTER_20251124),
    ("claude-opus-4-8", COMPUTER_20251124),
    ("claude-opus-5", COMPUTER_20251124),
    ("claude-fable-5-1", COMPUTER_20251124),
    ("claude-opus-5-5", COMPUTER_TOOLSET_20260801),
    ("anthropic/claude-haiku-5-5", COMPUTER_TOOLSET_20260801),
    ("claude-sonnet-6", COMPUTER_TOOLSET_20260801),
    ("claude-mythos-preview", COMPUTER_20251124),
])
def test_model_table(model, version):
    assert tool_version_for(model) is version


# --- replies -> actions -------------------------------------------------------------------------


def test_coordinates_come_back_in_display_pixels(fake):
    fake.queue(af.reply(af.text("Clicking the button."),
                        af.tool_use({"action": "left_click", "coordinate": [715, 402]}, id="a")))
    turn = provider(fake).turn(OBSERVATION, [])
    (call,) = turn.calls
    assert call.id == "a" and call.name == "computer" and call.raw == {"action": "left_click", "coordinate": [715, 402]}
    (click,) = call.actions
    assert isinstance(click, Click) and click.button == "left"
    assert abs(click.x - 715 * SX) <= 1 and abs(click.y - 402 * SY) <= 1
    assert turn.text == "Clicking the button." and not turn.done


def test_multi_turn_pairs_ids_and_puts_the_screenshot_on_the_last_result(fake):
    fake.queue(
        af.reply(af.tool_use({"action": "left_click", "coordinate": [100, 100]}, id="c1"),
                 af.tool_use({"action": "cursor_position"}, id="c2"),
                 af.tool_use({"action": "type", "text": "hi"}, id="c3")),
        af.reply(af.tool_use({"action": "key", "text": "Return"}, id="c4")),
        af.end_turn("The settings page is open.", usage_=af.usage(10, 5, cache_read=7, cache_write=3)),
    )
    p = provider(fake)
    first = p.turn(OBSERVATION, [])
    assert [c.id for c in first.calls] == ["c1", "c2", "c3"]
    p.turn(OBSERVATION, [CallResult("c1", ok=True), CallResult("c2", ok=True, output="X=960,Y=540"),
                         CallResult("c3", ok=False, error="typing failed")])
    second = body(fake)
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant" and [b["id"] for b in assistant["content"]] == ["c1", "c2", "c3"]
    r1, r2, r3 = af.tool_results(second)
    assert [r["tool_use_id"] for r in (r1, r2, r3)] == ["c1", "c2", "c3"]
    assert "content" not in r1 and "is_error" not in r1
    assert r2["content"] == [{"type": "text", "text": f"X={round(960 / SX)},Y={round(540 / SY)}"}]
    assert r3["is_error"] is True and r3["content"][0] == {"type": "text", "text": "typing failed"}
    assert r3["content"][-1]["type"] == "image"  # an error still gets the screenshot
    assert len(af.images(second)) == 2  # the first observation and this one: nothing duplicated

    last = p.turn(OBSERVATION, [CallResult("c4", ok=True)], note="Reminder: be brief.")
    third = body(fake)
    assert [r["tool_use_id"] for r in af.tool_results(third)] == ["c4"]
    assert third["messages"][-1]["content"][-1]["text"] == "Reminder: be brief."
    assert last.done and last.answer == "The settings page is open." and not last.calls
    assert (last.usage.input_tokens, last.usage.output_tokens) == (10, 5)
    assert (last.usage.cache_read_tokens, last.usage.cache_write_tokens) == (7, 3)


def test_missing_result_is_reported_as_not_run(fake):
    fake.queue(af.reply(af.tool_use({"action": "left_click", "coordinate": [1, 1]}, id="x1"),
                        af.tool_use({"action": "type", "text": "a"}, id="x2")),
               af.end_turn("ok"))
    p = provider(fake)
    p.turn(OBSERVATION, [])
    p.turn(OBSERVATION, [CallResult("x1", ok=False, error="boom")])
    r1, r2 = af.tool_results(body(fake))
    assert r1["is_error"] and r2["is_error"] and "not run" in r2["content"][0]["text"]


def test_off_screen_call_is_an_error_reported_back(fake):
    fake.queue(af.reply(af.tool_use({"action": "left_click", "coordinate": [SPACE.width + 50, 10]}, id="o1")),
               af.end_turn("ok"))
    p = provider(fake)
    (call,) = p.turn(OBSERVATION, []).calls
    assert call.actions == [] and "off the" in call.error and f"{SPACE.width}x{SPACE.height}" in call.error
    p.turn(OBSERVATION, [CallResult("o1", ok=False, error=call.error)])
    (result,) = af.tool_results(body(fake))
    assert result["is_error"] and result["content"][0]["text"] == call.error


def test_zoom_maps_the_region_and_returns_the_zoomed_image(fake):
    fake.queue(af.reply(af.tool_use({"action": "zoom", "region": [100, 200, 300, 350]}, id="z1")),
               af.end_turn("ok"))
    p = provider(fake)
    (call,) = p.turn(OBSERVATION, []).calls
    (zoom,) = call.actions
    assert isinstance(zoom, Zoom)
    r = zoom.region
    assert (r.x0, r.y0) == (int(100 * SX), int(200 * SY))
    assert abs(r.x1 - 300 * SX) <= 1 and abs(r.y1 - 350 * SY) <= 1
    # The zoomed image fits in a screenshot's budget.
    assert r.width * zoom.scale <= SPACE.width + 1 and r.height * zoom.scale <= SPACE.height + 1

    crop = FRAME.crop_png(r, zoom.scale)
    p.turn(OBSERVATION, [CallResult("z1", ok=True, image_png=crop)])
    (result,) = af.tool_results(body(fake))
    kinds = [b["type"] for b in result["content"]]
    assert kinds == ["image", "text", "image"]  # the zoom, a label, the screen now
    assert af.png_bytes(result["content"][0]) == crop


def test_thinking_becomes_reasoning(fake):
    fake.queue(af.reply(af.thinking("The button is top-right."), af.tool_use({"action": "screenshot"})))
    turn = provider(fake, thinking={"type": "adaptive"}).turn(OBSERVATION, [])
    assert turn.reasoning == "The button is top-right."
    assert body(fake)["thinking"] == {"type": "adaptive"}
    assert isinstance(turn.calls[0].actions[0], Screenshot)


def test_refusal_fails_and_max_tokens_is_a_parse_error(fake):
    fake.queue(af.reply(af.text("I can't help with that."), stop_reason="refusal"),
               af.reply(af.text("Let me think"), stop_reason="max_tokens"))
    refused = provider(fake).turn(OBSERVATION, [])
    assert isinstance(refused.calls[0].actions[0], Fail) and not refused.done
    cut = provider(fake).turn(OBSERVATION, [])
    assert not cut.calls and not cut.done and "max_tokens" in cut.parse_error


# --- errors -------------------------------------------------------------------------------------


def test_429_is_transient_with_retry_after(fake):
    fake.queue(af.error(429, "rate_limit_error", "slow down", {"retry-after": "2"}))
    with pytest.raises(ModelCallError) as info:
        provider(fake).turn(OBSERVATION, [])
    assert info.value.transient and info.value.retry_after == 2 and info.value.status == 429
    assert len(fake.requests) == 1  # the SDK does not retry behind the loop's back


@pytest.mark.parametrize("status, kind", [(500, "api_error"), (529, "overloaded_error"), (503, "api_error")])
def test_server_errors_are_transient(fake, status, kind):
    fake.queue(af.error(status, kind, "try later"))
    with pytest.raises(ModelCallError) as info:
        provider(fake).turn(OBSERVATION, [])
    assert info.value.transient and info.value.status == status


@pytest.mark.parametrize("status, kind", [(400, "invalid_request_error"), (401, "authentication_error")])
def test_client_errors_are_not_transient_and_never_show_the_key(fake, status, kind):
    # Even a server that echoes the key must not get it into our message.
    fake.queue(af.error(status, kind, f"bad request from key {API_KEY}"))
    with pytest.raises(ModelCallError) as info:
        provider(fake).turn(OBSERVATION, [])
    assert not info.value.transient and info.value.status == status
    assert API_KEY not in str(info.value) and kind in str(info.value)


def test_connection_error_is_transient():
    p = AnthropicProvider(INSTRUCTION, model="claude-opus-4-5", api_key=API_KEY, base_url="http://127.0.0.1:9")
    with pytest.raises(ModelCallError) as info:
        p.turn(OBSERVATION, [])
    assert info.value.transient


def test_missing_key_is_a_clear_error():
    with pytest.raises(ModelCallError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider(INSTRUCTION, model="claude-opus-4-5")


def test_key_and_base_url_from_env(fake, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    fake.queue(af.end_turn("ok"))
    AnthropicProvider(INSTRUCTION, model="claude-opus-4-5").turn(OBSERVATION, [])
    assert fake.requests[0].headers["authorization"] == f"Bearer {API_KEY}"


def test_a_failed_call_is_not_committed_to_the_conversation(fake):
    fake.queue(af.reply(af.tool_use({"action": "screenshot"}, id="s1")),
               af.error(529, "overloaded_error", "busy"), af.end_turn("ok"))
    p = provider(fake)
    p.turn(OBSERVATION, [])
    with pytest.raises(ModelCallError):
        p.turn(OBSERVATION, [CallResult("s1", ok=True)])
    p.turn(OBSERVATION, [CallResult("s1", ok=True)])
    assert [m["role"] for m in body(fake)["messages"]] == ["user", "assistant", "user"]


def test_no_api_key_in_any_request_body(fake):
    fake.queue(af.reply(af.tool_use({"action": "screenshot"}, id="k1")), af.end_turn("ok"))
    p = provider(fake)
    p.turn(OBSERVATION, [])
    p.turn(OBSERVATION, [CallResult("k1", ok=True)])
    for request in fake.requests:
        assert API_KEY not in json.dumps(request.body)


# --- caching and pruning ------------------------------------------------------------------------


def test_cache_breakpoints_on_system_and_newest_user_turns(fake):
    fake.queue(*[af.reply(af.tool_use({"action": "screenshot"}, id=f"p{i}")) for i in range(4)])
    p = provider(fake)
    p.turn(OBSERVATION, [])
    for i in range(3):
        p.turn(OBSERVATION, [CallResult(f"p{i}", ok=True)])
    for request in fake.requests:
        sent = request.body
        assert sent["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert af.cache_breakpoints(sent) <= 4
    assert af.cache_breakpoints(body(fake)) == 3


def test_images_are_pruned_in_chunks(fake):
    turns = 16
    fake.queue(*[af.reply(af.tool_use({"action": "screenshot"}, id=f"i{i}")) for i in range(turns)])
    p = provider(fake, max_images=10, prune_chunk=5)
    p.turn(OBSERVATION, [])
    for i in range(turns - 1):
        p.turn(OBSERVATION, [CallResult(f"i{i}", ok=True)])
    counts = [len(af.images(r.body)) for r in fake.requests]
    assert counts == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 9, 10]
    # Between prunes each request extends the previous one unchanged: the cached prefix holds.

    def strip(msgs):
        return json.loads(json.dumps(msgs).replace(', "cache_control": {"type": "ephemeral"}', ""))

    for before, after in zip(fake.requests[10:], fake.requests[11:]):
        n = len(before.body["messages"])
        assert strip(after.body["messages"][:n]) == strip(before.body["messages"])
    assert PRUNED_IMAGE in json.dumps(body(fake))


# --- pure helpers (no SDK) ------------------------------------------------------------------------


def act(action: str, **args):
    return to_actions(action, {"action": action, **args}, SPACE)


def test_model_space_round_trip():
    assert (SPACE.width, SPACE.height) == (1429, 804)
    for x in range(SPACE.width):
        dx, _ = SPACE.to_display(x, 0)
        assert SPACE.from_display(dx, 0)[0] == x
    for x in range(1920):
        mx, _ = SPACE.from_display(x, 0)
        assert abs(SPACE.to_display(mx, 0)[0] - x) <= 1


def test_click_family():
    assert act("left_click") == [Click()]
    right = act("right_click", coordinate=[0, 0])[0]
    assert right == Click(button="right", x=0, y=0)
    assert act("middle_click")[0].button == "middle"
    assert isinstance(act("double_click", coordinate=[10, 10])[0], DoubleClick)
    assert act("triple_click", key="shift")[0].modifiers == ["shift"]
    assert act("left_click", text="ctrl+shift")[0].modifiers == ["ctrl", "shift"]
    corner = act("left_click", coordinate=[SPACE.width - 1, SPACE.height - 1])[0]
    assert (corner.x, corner.y) == (1919, 1079)


def test_pointer_and_drag():
    assert act("mouse_move", coordinate=[715, 402]) == [Move(x=round(715 * SX), y=round(402 * SY))]
    (drag,) = act("left_click_drag", start_coordinate=[10, 20], coordinate=[30, 40])
    assert isinstance(drag, Drag) and drag.path == [Point(x=round(10 * SX), y=round(20 * SY)),
                                                   Point(x=round(30 * SX), y=round(40 * SY))]
    assert act("left_mouse_down") == [MouseDown()]
    assert act("left_mouse_up", coordinate=[1, 1]) == [MouseUp(x=1, y=1)]


def test_scroll_keys_and_time():
    (scroll,) = act("scroll", coordinate=[100, 100], scroll_direction="up", scroll_amount=5, text="ctrl")
    assert isinstance(scroll, Scroll) and (scroll.direction, scroll.amount, scroll.modifiers) == ("up", 5, ["ctrl"])
    assert act("key", text="ctrl+a Delete") == [Key(keys=["ctrl+a", "Delete"])]
    assert act("key", text="Tab", repeat=3) == [Key(keys=["Tab"] * 3)]
    assert act("type", text="hello world") == [Type(text="hello world")]
    assert act("hold_key", text="shift", duration=1.5) == [HoldKey(keys="shift", duration_ms=1500)]
    assert act("wait", duration=2) == [Wait(duration_ms=2000)]
    assert act("screenshot") == [Screenshot()] and act("cursor_position") == [CursorPosition()]


@pytest.mark.parametrize("action, args, fragment", [
    ("left_click", {"coordinate": [-1, 5]}, "off the"),
    ("left_click", {"coordinate": [5, SPACE.height]}, "off the"),
    ("left_click", {"coordinate": "100,200"}, "[x, y]"),
    ("mouse_move", {}, "coordinate is required"),
    ("left_click_drag", {"coordinate": [1, 1]}, "start_coordinate is required"),
    ("scroll", {"scroll_direction": "sideways"}, "scroll_direction"),
    ("scroll", {"scroll_direction": "down", "scroll_amount": 0}, "amount"),
    ("key", {"text": "ctrl+nosuchkey"}, "unknown key name"),
    ("key", {}, "text"),
    ("type", {"text": ""}, "text"),
    ("hold_key", {"text": "shift", "duration": 60}, "duration_ms"),
    ("wait", {"duration": -1}, "duration"),
    ("zoom", {"region": [300, 10, 100, 50]}, "region"),
    ("zoom", {"region": [0, 0, SPACE.width + 1, 10]}, "region"),
    ("teleport", {}, "unknown action"),
])
def test_malformed_inputs_are_errors(action, args, fragment):
    call = parse_tool_use("id1", "computer", {"action": action, **args}, SPACE)
    assert call.actions == [] and fragment in call.error


def test_unknown_tool_is_an_error():
    assert "unknown tool" in parse_tool_use("id", "bash", {"command": "ls"}, SPACE).error
    assert "unknown tool" in parse_tool_use("id", "navigate", {}, SPACE, toolset_name="browser").error


def test_full_width_zoom_region():
    region = region_to_display([0, 0, SPACE.width, SPACE.height], SPACE)
    assert (region.x0, region.y0, region.x1, region.y1) == (0, 0, 1920, 1080)
    with pytest.raises(InputError):
        region_to_display([0, 0, 10], SPACE)


def test_prune_images_pure():
    def user(n):
        return {"role": "user", "content": [{"type": "image", "source": {}} for _ in range(n)]}
    messages = [user(1), {"role": "assistant", "content": []},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
                                              "content": [{"type": "image", "source": {}}] * 1}]}, user(3)]
    assert prune_images(messages, max_images=5, chunk=2) == 0
    messages.append(user(1))  # 6 > 5: down to 3
    assert prune_images(messages, max_images=5, chunk=2) == 3
    assert messages[0]["content"][0]["text"] == PRUNED_IMAGE
    assert messages[2]["content"][0]["content"][0]["text"] == PRUNED_IMAGE
    assert [b["type"] for b in messages[3]["content"]] == ["text", "image", "image"]


def test_cache_breakpoints_do_not_touch_history():
    history = [{"role": "user", "content": [{"type": "text", "text": "a"}]},
               {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
               {"role": "user", "content": [{"type": "text", "text": "c"}]}]
    marked = with_cache_breakpoints(history)
    assert all("cache_control" in m["content"][-1] for m in marked if m["role"] == "user")
    assert all("cache_control" not in m["content"][-1] for m in history)


def test_retry_after_forms():
    assert retry_after({"retry-after": "2"}) == 2
    assert retry_after({"retry-after-ms": "1500"}) == 1.5
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


def test_frame_from_pillow_scales_to_the_declared_size(fake):
    image = Image.linear_gradient("L").resize((1920, 1080)).convert("RGB")
    bgra = image.convert("RGBA").tobytes("raw", "BGRA")
    frame = Frame(bgra, 1920, 1080)
    assert encode_png(image)  # the frame's own encoder works on this image too
    fake.queue(af.end_turn("ok"))
    provider(fake).turn(Observation(frame), [])
    assert af.png_size(af.last_image(body(fake))) == (SPACE.width, SPACE.height)


# --- the browser toolset beside the computer tool ---------------------------------------------------


def test_browser_toolset_is_offered_and_its_members_answered_with_the_executor_s_results(fake):
    from anthropic.types.beta import BetaToolResultBlockParam
    from pydantic import TypeAdapter

    from vision.actions import BrowserMember

    browser_use = {"type": "tool_use", "id": "b1", "name": "navigate", "input": {"url": "example.test"},
                   "toolset_name": "browser"}
    fake.queue(
        af.reply(af.toolset_use("left_click", {"coordinate": [10, 10]}, id="c1"), browser_use,
                 {**browser_use, "id": "b2", "name": "read_page", "input": {"filter": "interactive"}}),
        af.end_turn("done"),
    )
    p = provider(fake, "claude-opus-5-5", tools=["computer", "browser"])
    turn = p.turn(OBSERVATION, [])
    first = fake.requests[0]
    assert "anthropic-beta" not in first.headers  # neither toolset takes a beta header
    assert first.body["tools"] == [{"type": "computer_toolset_20260801"},
                                   {"type": "browser_toolset_20260801",
                                    "configs": {"read_console": {"enabled": True}, "read_network": {"enabled": True}}}]
    assert "browser tools" in first.body["system"][0]["text"]
    assert [c.name for c in turn.calls] == ["left_click", "navigate", "read_page"]
    assert turn.calls[1].actions == [BrowserMember(name="navigate", input={"url": "example.test"})]
    assert turn.calls[2].actions == [BrowserMember(name="read_page", input={"filter": "interactive"})]

    state = {"type": "browser_state", "tabs": [{"tab_id": "t1", "title": "x", "url": "https://example.test/",
                                                "active": True}]}
    p.turn(OBSERVATION, [CallResult("c1", ok=True),
                         CallResult("b1", ok=True, content=[{"type": "text", "text": "Navigated to "
                                                             "https://example.test/ — x (HTTP 200)"}, state]),
                         CallResult("b2", ok=False, error="ref_9 is gone",
                                    content=[{"type": "text", "text": "ref_9 is gone"}])])
    user = body(fake)["messages"][-1]["content"]
    results = af.tool_results(body(fake))
    for result in results:
        TypeAdapter(BetaToolResultBlockParam).validate_python(result)
    assert [(r["tool_use_id"], r["toolset_name"], r.get("is_error", False)) for r in results] == [
        ("c1", "computer", False), ("b1", "browser", False), ("b2", "browser", True)]
    assert results[1]["content"][-1] == state and results[2]["content"] == [{"type": "text", "text": "ref_9 is gone"}]
    # the screen after the turn follows the results, once
    assert user[-1]["type"] == "image" and [b["type"] for b in user].count("image") == 1


def test_tools_are_checked():
    with pytest.raises(ValueError, match="computer, browser"):
        AnthropicProvider(INSTRUCTION, model="claude-opus-5-5", api_key=API_KEY, tools=["browser", "teleport"])
