"""The vendor-native executors through the real HTTP API on the real desktop.

Ground truth is the event-recording test page: where a click declared at 1280x720 lands, whether
an OpenAI keypress list is one chord, how many wheel notches a pixel scroll becomes.
"""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from tests.answers import error, ok, until
from tests.fakes.testpage import at
from vision import coords

pytestmark = pytest.mark.x11

SID = "itest"
ANTHROPIC = f"/api/v1/sessions/{SID}/computer/anthropic"
OPENAI = f"/api/v1/sessions/{SID}/computer/openai"
GEMINI = f"/api/v1/sessions/{SID}/computer/gemini"
DECLARED = coords.pixels(1280, 720)
GRID = coords.gemini()


def claude(api, input: dict, *, version: str = "computer_20251124", size=(1280, 720), **extra):
    return api.post(ANTHROPIC, json={"tool_version": version, "display_width_px": size[0],
                                     "display_height_px": size[1], "input": input, **extra})


def gpt(api, body: dict, size=(1280, 720)):
    return api.post(OPENAI, json={"display_width": size[0], "display_height": size[1], **body})


def gem(api, *calls: dict, **fields):
    return api.post(GEMINI, json={"function_calls": list(calls), **fields})


def on_grid(viewport, cx: int, cy: int) -> dict[str, int]:
    """A point of the page, as Gemini names it on its 0..999 grid."""
    x, y = GRID.from_display(*at(viewport, cx, cy))
    return {"x": x, "y": y}


def image(data: str) -> Image.Image:
    picture = Image.open(io.BytesIO(base64.b64decode(data)))
    picture.load()
    assert picture.format == "PNG"
    return picture


def screen_of(answer: dict) -> Image.Image:
    """The screenshot at the end of an Anthropic answer."""
    last = answer["content"][-1]
    assert last["type"] == "image" and last["source"]["media_type"] == "image/png"
    return image(last["source"]["data"])


def declared(viewport, cx: int, cy: int) -> list[int]:
    """A point of the page, as a model that sees 1280x720 names it."""
    return list(DECLARED.from_display(*at(viewport, cx, cy)))


def wheel_delta(api, page, at_least: float) -> tuple[float, dict]:
    """How far the wheel turned since the log was cleared (the sum of the wheel events' deltaY:
    Chromium merges wheel events when its page is busy, never their distance), once it reaches
    ``at_least`` in size; and a sentinel click after it (its ``scrollY`` is where the page ended),
    so that a notch too many would have arrived too. Events travel by concurrent fetches, late
    under load: waited for, never timed."""
    def total() -> float:
        return sum(e["deltaY"] for e in list(page.events) if e["type"] == "wheel")

    def clicks() -> int:
        return sum(e["type"] == "click" for e in list(page.events))

    until(lambda: abs(total()) >= at_least, f"a wheel turn of {at_least}")
    before = clicks()
    ok(api.post(f"/api/v1/sessions/{SID}/desktop/click", json={"x": 1700, "y": 1000}))
    until(lambda: clicks() > before, "the sentinel click")
    sentinel = page.last("click")  # and the stragglers of its burst
    return total(), sentinel


def one_notch(api, page) -> tuple[float, int]:
    """One wheel notch down through the desktop's own scroll: its deltaY and where the page is."""
    page.clear()
    ok(api.post(f"/api/v1/sessions/{SID}/desktop/scroll", json={"x": 960, "y": 600, "direction": "down",
                                                                 "amount": 1}))
    notch, sentinel = wheel_delta(api, page, 1)
    assert notch > 0 and sentinel["scrollY"] > 0
    page.clear()
    return notch, sentinel["scrollY"]


def focus_field(api, page, viewport) -> None:
    answer = ok(claude(api, {"action": "left_click", "coordinate": declared(viewport, 300, 282)}))
    assert answer["is_error"] is False
    page.wait_for(lambda e: e["type"] == "click" and e["target"] == "field")


# ------------------------------------------------------------------ the three checks of issue 13


def test_openai_keypress_list_is_one_chord_that_selects_all(api, page, viewport):
    x, y = declared(viewport, 300, 282)
    ok(gpt(api, {"actions": [{"type": "click", "x": x, "y": y}, {"type": "type", "text": "hello world"}]}))
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "hello world")
    answer = ok(gpt(api, {"action": {"type": "keypress", "keys": ["CTRL", "A"]}}))
    assert answer["error"] is None
    chord = page.wait_for(lambda e: e["type"] == "keydown" and e["key"] == "a")
    assert chord["ctrlKey"] is True
    # Everything was selected: typing now replaces the whole text (a plain "A" would have been added).
    ok(gpt(api, {"action": {"type": "type", "text": "X"}}))
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "X")
    assert not [e for e in page.events if e["type"] == "input" and "A" in e["field"]]


def test_openai_scroll_of_240_px_is_exactly_two_notches(api, page, viewport):
    notch, top = one_notch(api, page)
    x, y = declared(viewport, 960, 600)
    answer = ok(gpt(api, {"action": {"type": "scroll", "x": x, "y": y, "scroll_x": 0, "scroll_y": 240}}))
    assert answer["error"] is None
    down, sentinel = wheel_delta(api, page, 2 * notch)
    assert down == 2 * notch and sentinel["scrollY"] > top
    # and back up by 240: two notches up, where the page was before
    page.clear()
    ok(gpt(api, {"action": {"type": "scroll", "x": x, "y": y, "scroll_x": 0, "scroll_y": -240}}))
    up, sentinel = wheel_delta(api, page, 2 * notch)
    assert up == -2 * notch and sentinel["scrollY"] == top


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_a_click_declared_at_1280x720_lands_within_a_pixel(api, page, vendor):
    target = (1333, 777)  # a display pixel that is no exact multiple of 1.5
    mx, my = DECLARED.from_display(*target)
    if vendor == "anthropic":
        answer = ok(claude(api, {"action": "left_click", "coordinate": [mx, my]}))
        assert answer["is_error"] is False and screen_of(answer).size == (1280, 720)
    else:
        answer = ok(gpt(api, {"action": {"type": "click", "button": "left", "x": mx, "y": my}}))
        assert image(answer["output"]["image_url"].removeprefix("data:image/png;base64,")).size == (1280, 720)
    event = page.wait_for(lambda e: e["type"] == "click")
    assert abs(event["screenX"] - target[0]) <= 1 and abs(event["screenY"] - target[1]) <= 1, event


# ------------------------------------------------------------------ Anthropic


def test_anthropic_cursor_position_answers_in_the_declared_space(api, page):
    answer = ok(claude(api, {"action": "mouse_move", "coordinate": [640, 360]}))
    assert answer["is_error"] is False
    answer = ok(claude(api, {"action": "cursor_position"}))
    assert answer == {"content": [{"type": "text", "text": "X=640,Y=360"}], "is_error": False, "tool_result": None,
                      "no_effect": False}
    x, y = ok(api.get(f"/api/v1/sessions/{SID}/desktop/cursor")).values()
    assert (x, y) == (960, 540)


def test_anthropic_zoom_is_the_region_at_the_declared_size(api, page):
    answer = ok(claude(api, {"action": "zoom", "region": [0, 0, 640, 360]}))
    assert answer["is_error"] is False and len(answer["content"]) == 1  # the zoom only: no screenshot after it
    zoomed = image(answer["content"][0]["source"]["data"])
    assert zoomed.size == (1280, 720)  # the top-left quarter, filling the declared screen
    # Pixel for pixel the desktop's own zoom of the display region that quarter covers.
    same = ok(api.post(f"/api/v1/sessions/{SID}/desktop/zoom", json={"region": [0, 0, 960, 540], "scale": 4 / 3}))
    reference = image(same["result"]["image"])
    assert reference.size == (1280, 720)
    assert zoomed.convert("RGB").tobytes() == reference.convert("RGB").tobytes()


def test_anthropic_zoom_is_not_an_action_of_20250124(api, page):
    answer = ok(claude(api, {"action": "zoom", "region": [0, 0, 640, 360]}, version="computer_20250124"))
    assert answer["is_error"] is True
    assert "computer_20251124" in answer["content"][0]["text"]
    assert screen_of(answer).size == (1280, 720)  # the screen rides on an error too


def test_anthropic_key_with_repeat_and_type(api, page, viewport):
    focus_field(api, page, viewport)
    ok(claude(api, {"action": "type", "text": "abcde"}))
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "abcde")
    answer = ok(claude(api, {"action": "key", "text": "BackSpace", "repeat": 3}))
    assert answer["is_error"] is False
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "ab")
    ok(claude(api, {"action": "key", "text": "ctrl+a"}))  # a chord in text
    ok(claude(api, {"action": "key", "text": "Delete"}))
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "")


def test_anthropic_hold_key_holds_for_its_seconds(api, page, viewport):
    focus_field(api, page, viewport)
    answer = ok(claude(api, {"action": "hold_key", "text": "shift", "duration": 0.6}))
    assert answer["is_error"] is False
    up = page.wait_for(lambda e: e["type"] == "keyup" and e["key"] == "Shift")
    down = next(e for e in page.events if e["type"] == "keydown" and e["key"] == "Shift")
    # Held at least its 0.6 s (a lower bound: a slow machine only holds it longer).
    assert up["t"] - down["t"] >= 550, (down["t"], up["t"])


def test_anthropic_click_modifiers_in_text_are_split(api, page):
    ok(claude(api, {"action": "left_click", "coordinate": [600, 600], "text": "ctrl+shift"}))
    event = page.wait_for(lambda e: e["type"] == "click")
    assert event["ctrlKey"] is True and event["shiftKey"] is True and event["altKey"] is False


def test_anthropic_scroll_amount_is_notches(api, page):
    notch, top = one_notch(api, page)
    ok(claude(api, {"action": "scroll", "coordinate": [640, 400], "scroll_direction": "down", "scroll_amount": 3}))
    turned, sentinel = wheel_delta(api, page, 3 * notch)
    assert turned == 3 * notch and sentinel["scrollY"] > top


def test_anthropic_toolset_form_echoes_toolset_name(api, page):
    answer = ok(claude(api, {"coordinate": [700, 650]}, version="computer_toolset_20260801", name="left_click",
                       tool_use_id="toolu_1"))
    event = page.wait_for(lambda e: e["type"] == "click")
    assert abs(event["screenX"] - 1050) <= 1 and abs(event["screenY"] - 975) <= 1
    result = answer["tool_result"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    assert result["toolset_name"] == "computer" and "is_error" not in result
    assert result["content"] == answer["content"] and answer["content"][-1]["type"] == "image"


def test_anthropic_screenshot_is_scaled_to_the_declared_display(api, desk):
    answer = ok(claude(api, {"action": "screenshot"}, size=(1429, 804), version="computer_20250124"))
    assert answer["is_error"] is False and len(answer["content"]) == 1
    assert screen_of(answer).size == (1429, 804)


def test_anthropic_mistakes_are_is_error_and_nothing_runs(api, page):
    for bad, expected in [
        ({"action": "left_click", "coordinate": [1280, 10]}, "off the 1280x720 screen"),
        ({"action": "teleport"}, "unknown action"),
        ({"action": "key", "text": "hyperspace"}, "hyperspace"),
        ({"action": "wait", "duration": 31}, "30000"),
    ]:
        answer = ok(claude(api, bad, tool_use_id="toolu_bad"))
        assert answer["is_error"] is True, bad
        assert expected in answer["content"][0]["text"], answer["content"][0]["text"]
        assert answer["tool_result"]["is_error"] is True
        assert screen_of(answer).size == (1280, 720)
    assert not [e for e in page.events if e["type"] in ("mousedown", "keydown")]


def test_request_faults_are_glassdesk_errors(api, page):
    error(claude(api, {"action": "screenshot"}, version="computer_29990101"), 422, "invalid_request")
    error(api.post(ANTHROPIC, json={"tool_version": "computer_20251124", "input": {}}), 422, "invalid_request")
    error(claude(api, {"action": "screenshot"}, size=(0, 720)), 422, "invalid_request")
    error(claude(api, {"action": "screenshot"}, bogus=1), 422, "invalid_request")
    assert "names the action" in error(claude(api, {"coordinate": [5, 5]}, version="computer_toolset_20260801"),
                                       422, "invalid_request")
    error(api.post("/api/v1/sessions/nosuch/computer/anthropic",
                   json={"tool_version": "computer_20251124", "display_width_px": 1280, "display_height_px": 720,
                         "input": {"action": "screenshot"}}), 404, "session_not_found")
    error(gpt(api, {"action": {"type": "wait"}, "actions": [{"type": "wait"}]}), 422, "invalid_request")
    error(gpt(api, {}), 422, "invalid_request")
    error(api.post("/api/v1/sessions/nosuch/computer/openai", json={"action": {"type": "wait"}}), 404,
          "session_not_found")


def test_the_guards_hold_a_person_in_control_and_a_running_instruction(api, page, desk):
    ok(api.post(f"/api/v1/sessions/{SID}/takeover", json={"on": True}))
    try:
        error(claude(api, {"action": "left_click", "coordinate": [600, 600]}), 409, "operator_in_control")
        error(gpt(api, {"action": {"type": "click", "x": 600, "y": 600}}), 409, "operator_in_control")
    finally:
        ok(api.post(f"/api/v1/sessions/{SID}/takeover", json={"on": False}))
    desk.busy = True  # what a vision run sets while it drives the session
    try:
        error(claude(api, {"action": "left_click", "coordinate": [600, 600]}), 409, "session_busy")
        error(gpt(api, {"actions": [{"type": "keypress", "keys": ["CTRL", "A"]}]}), 409, "session_busy")
    finally:
        desk.busy = False
    assert not [e for e in page.events if e["type"] in ("mousedown", "keydown")]


# ------------------------------------------------------------------ OpenAI


def test_openai_mistakes_are_an_error_beside_the_screen_and_nothing_runs(api, page):
    batch = [{"type": "click", "x": 100, "y": 100}, {"type": "teleport"}]
    answer = ok(gpt(api, {"actions": batch}))
    assert answer["error"] == "action 2 (teleport): unknown action type 'teleport'"
    assert answer["output"]["type"] == "computer_screenshot"
    assert answer["output"]["image_url"].startswith("data:image/png;base64,")
    answer = ok(gpt(api, {"action": {"type": "click", "x": 1280, "y": 5}}))
    assert "off the screen" in answer["error"]
    assert not [e for e in page.events if e["type"] in ("mousedown", "keydown")]


def test_openai_safety_checks_pass_through_and_call_output_is_ready(api, page):
    checks = [{"id": "cu_sc_1", "code": "malicious_instructions", "message": "Be careful."}]
    answer = ok(gpt(api, {"action": {"type": "screenshot"}, "pending_safety_checks": checks, "call_id": "call_7"},
                    size=(1920, 1080)))
    assert answer["acknowledged_safety_checks"] == checks and answer["error"] is None
    item = answer["computer_call_output"]
    assert item == {"type": "computer_call_output", "call_id": "call_7", "acknowledged_safety_checks": checks,
                    "output": answer["output"]}
    assert image(item["output"]["image_url"].removeprefix("data:image/png;base64,")).size == (1920, 1080)


# ------------------------------------------------------------------ a team's own loop, real SDKs


def test_an_anthropic_sdk_loop_uses_the_executor_with_no_conversion(api, page):
    """The real anthropic SDK against a fake Messages API: each tool_use goes to the executor as
    it is, each tool_result back to the API as it comes."""
    import anthropic

    from tests.fakes import anthropic_fake as af
    from tests.fakes.server import FakeServer

    target = (1111, 666)
    mx, my = DECLARED.from_display(*target)
    tool = {"type": "computer_20251124", "name": "computer", "display_width_px": 1280, "display_height_px": 720}
    with FakeServer() as fake:
        fake.queue(af.reply(af.tool_use({"action": "left_click", "coordinate": [mx, my]}, id="toolu_a")),
                   af.end_turn("clicked"))
        client = anthropic.Anthropic(api_key="sk-ant-test", base_url=fake.url, max_retries=0, timeout=30)
        messages: list[dict] = [{"role": "user", "content": "click there"}]
        while True:
            message = client.beta.messages.create(model="claude-opus-4-5", max_tokens=1024, tools=[tool],
                                                  messages=messages, betas=["computer-use-2025-11-24"])
            messages.append({"role": "assistant",
                             "content": [b.model_dump(exclude_none=True) for b in message.content]})
            uses = [b for b in message.content if b.type == "tool_use"]
            if not uses:
                break
            messages.append({"role": "user", "content": [
                ok(api.post(ANTHROPIC, json={"tool_version": tool["type"], "display_width_px": 1280,
                                             "display_height_px": 720, "input": b.input,
                                             "tool_use_id": b.id}))["tool_result"] for b in uses]})
        [result] = af.tool_results(fake.requests[1].body)
    assert result["tool_use_id"] == "toolu_a" and "is_error" not in result
    assert Image.open(io.BytesIO(af.png_bytes(result["content"][-1]))).size == (1280, 720)
    event = page.wait_for(lambda e: e["type"] == "click")
    assert abs(event["screenX"] - target[0]) <= 1 and abs(event["screenY"] - target[1]) <= 1, event


def test_an_openai_sdk_loop_uses_the_executor_with_no_conversion(api, page, viewport):
    """The real openai SDK against a fake Responses API: a GA computer_call's batch goes to the
    executor as it is, the computer_call_output back as it comes."""
    import openai

    from tests.fakes import openai_fake as oa
    from tests.fakes.server import FakeServer

    x, y = declared(viewport, 300, 282)
    batch = [{"type": "click", "button": "left", "x": x, "y": y}, {"type": "type", "text": "abc"},
             {"type": "keypress", "keys": ["CTRL", "A"]}, {"type": "type", "text": "Z"}]
    with FakeServer() as fake:
        fake.queue(oa.ok(oa.computer_call(actions=batch, call_id="call_a", safety_checks=[oa.safety_check()]),
                         model="gpt-5.4"),
                   oa.ok(oa.message("done"), model="gpt-5.4"))
        client = openai.OpenAI(api_key="sk-test", base_url=fake.url + "/v1", max_retries=0, timeout=30)
        response = client.responses.create(model="gpt-5.4", tools=[{"type": "computer"}], input="replace the text")
        outputs = []
        for item in response.output:
            if item.type == "computer_call":
                call = item.to_dict()
                body = {key: call[key] for key in ("action", "actions", "call_id", "pending_safety_checks")
                        if key in call}
                outputs.append(ok(gpt(api, body))["computer_call_output"])
        client.responses.create(model="gpt-5.4", tools=[{"type": "computer"}], previous_response_id=response.id,
                                input=outputs)
        [sent] = oa.input_items(fake.requests[1], "computer_call_output")
    assert sent["call_id"] == "call_a" and sent["acknowledged_safety_checks"] == [oa.safety_check()]
    assert oa.png_size(sent["output"]["image_url"]) == (1280, 720)
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "Z")  # ctrl+a was one chord


# ------------------------------------------------------------------ Gemini


def test_a_gemini_click_on_the_grid_lands_within_a_pixel_and_answers_url_and_screen(api, page):
    target = (1333, 777)
    gx, gy = GRID.from_display(*target)
    answer = ok(gem(api, {"name": "click_at", "args": {"x": gx, "y": gy}, "id": "fc_1"},
                    screenshot_width=1440, screenshot_height=810))
    [response] = answer["function_responses"]
    assert response["name"] == "click_at" and response["id"] == "fc_1"
    # The url always; whether the click changed the screen depends on what earlier tests left in the page
    # (a focused field loses its caret: a change; otherwise none, said as no_effect).
    assert response["response"]["url"] == page.url and set(response["response"]) <= {"url", "no_effect", "output"}
    [part] = response["parts"]
    assert part["inline_data"]["mime_type"] == "image/png" and image(part["inline_data"]["data"]).size == (1440, 810)
    event = page.wait_for(lambda e: e["type"] == "click")
    assert abs(event["screenX"] - target[0]) <= 1 and abs(event["screenY"] - target[1]) <= 1, event


def test_gemini_calls_of_one_turn_run_in_order_type_text_at_clears_and_presses_enter(api, page, viewport):
    field = on_grid(viewport, 300, 282)
    answer = ok(gem(api, {"name": "type_text_at", "args": {**field, "text": "old words", "press_enter": False,
                                                          "clear_before_typing": False}},
                    {"name": "type_text_at", "args": {**field, "text": "new"}},
                    {"name": "key_combination", "args": {"keys": "Control+A"}}))
    assert [r["response"].get("error") for r in answer["function_responses"]] == [None, None, None]
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "old words")
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "new")  # cleared first, not appended
    enter = page.wait_for(lambda e: e["type"] == "keydown" and e["key"] == "Enter")

    def chords() -> list[dict]:
        return [e for e in list(page.events) if e["type"] == "keydown" and e["key"] == "a" and e["ctrlKey"]]

    until(lambda: len(chords()) == 2, "the clearing ctrl+a and the third call's chord")
    clearing, chord = sorted(chords(), key=lambda e: e["t"])
    assert clearing["t"] < enter["t"] < chord["t"]  # in order: clear, type, Enter, then the third call
    # Each response carries the screen after its own call: the first shows the old words, not yet replaced.
    first, second, _ = (image(r["parts"][0]["inline_data"]["data"]) for r in answer["function_responses"])
    assert first.tobytes() != second.tobytes()


def test_gemini_scroll_at_turns_the_wheel_by_its_magnitude(api, page, viewport):
    notch, top = one_notch(api, page)
    point = on_grid(viewport, 960, 600)
    # 200 grid units down is 216 display pixels: 2 notches of 120 (the default magnitude, 800, would be
    # 7: a burst that Chromium under load was seen to deliver short, once in three runs).
    ok(gem(api, {"name": "scroll_at", "args": {**point, "direction": "down", "magnitude": 200}}))
    down, sentinel = wheel_delta(api, page, 2 * notch)
    assert down == 2 * notch and sentinel["scrollY"] > top


def test_gemini_mistakes_are_answered_in_the_response_and_nothing_runs(api, page):
    answer = ok(gem(api, {"name": "click_at", "args": {"x": 1000, "y": 5}}, {"name": "open_app", "args": {}},
                    {"name": "type_text_at", "args": {"x": 5}}))
    errors = [r["response"]["error"] for r in answer["function_responses"]]
    assert errors[0] == "click_at: x=1000 is off the 0..999 grid"
    assert errors[1].startswith("unknown function 'open_app'")
    assert "y is required" in errors[2] and "text is required" in errors[2]
    assert all(r["parts"] for r in answer["function_responses"])
    assert not [e for e in page.events if e["type"] in ("mousedown", "keydown")]
    error(gem(api), 422, "invalid_request")
    error(api.post("/api/v1/sessions/nosuch/computer/gemini", json={"function_calls": [{"name": "go_back"}]}), 404,
          "session_not_found")


def test_a_gemini_sdk_loop_uses_the_executor_with_no_conversion(api, page, viewport):
    """The real google-genai SDK against a fake Gemini API: the function calls go to the executor as
    they are, the function responses back to the API as they come (a confirmed safety decision
    acknowledged)."""
    from google import genai
    from google.genai import types

    from tests.fakes import gemini_fake as gf
    from tests.fakes.server import FakeServer

    signin = on_grid(viewport, 1255, 142)
    with FakeServer() as fake:
        fake.queue(gf.ok(gf.function_call("click_at", {**signin, "safety_decision": gf.confirm("Signs in.")},
                                          id="fc_a")),
                   gf.ok(gf.text("signed in")))
        client = genai.Client(api_key="AIza-test", vertexai=False, http_options=types.HttpOptions(
            base_url=fake.url, timeout=30_000, retry_options=types.HttpRetryOptions(attempts=1)))
        config = types.GenerateContentConfig(tools=[types.Tool(computer_use=types.ComputerUse(
            environment=types.Environment.ENVIRONMENT_BROWSER))])
        contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="sign in")])]
        while True:
            response = client.models.generate_content(model="gemini-2.5-computer-use-preview-10-2025",
                                                      contents=contents, config=config)
            candidate = response.candidates[0]
            contents.append(candidate.content)
            calls = [p.function_call for p in candidate.content.parts if p.function_call]
            if not calls:
                break
            # (the person confirmed the safety decision here)
            answer = ok(gem(api, *[c.model_dump(exclude_none=True) for c in calls]))
            contents.append(types.Content(role="user", parts=[
                types.Part(function_response=types.FunctionResponse.model_validate(r))
                for r in answer["function_responses"]]))
        [sent] = gf.function_responses(gf.contents(fake.requests[1])[-1])
    assert sent["id"] == "fc_a" and sent["name"] == "click_at"
    assert sent["response"] == {"url": page.url, "safety_acknowledgement": "true"}
    assert gf.png_size(gf.images(gf.contents(fake.requests[1])[-1])[0]) == (1920, 1080)
    page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
