"""GeminiProvider through the real google-genai SDK against a local fake Gemini API
(``POST /{version}/models/{model}:generateContent``), alone and driven by the real loop."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from desktop.actions import Click, Key, Move, Type
from desktop.frame import Frame
from tests.fakes import gemini_fake as gf
from tests.fakes.desktop import FakeDesktop, solid_frame
from tests.fakes.server import FakeServer
from vision.actions import CallResult, Fail, SafetyCheck
from vision.config import VisionConfig, create_provider
from vision.models import ActRequest
from vision.providers.base import ModelCallError, Observation
from vision.providers.gemini import DEFAULT_MODEL, PRUNED_SCREENSHOT, GeminiProvider
from vision.run.events import EventBus
from vision.run.loop import Runner
from vision.trace.store import TraceStore

API_KEY = "AIzaTest-0123456789abcdefSECRET"
SYSTEM = "You operate a Linux desktop."
INSTRUCTION = "Buy the blue mug."
MODEL = "gemini-2.5-computer-use-preview-10-2025"
FRAME = solid_frame(0)
OBSERVATION = Observation(FRAME, url="http://shop.test/")


def provider(fake: FakeServer, model: str = MODEL, **kwargs) -> GeminiProvider:
    return GeminiProvider(INSTRUCTION, model=model, system=SYSTEM, api_key=API_KEY, base_url=fake.url, timeout=10,
                          **kwargs)


def colour(png: bytes) -> tuple[int, int, int]:
    return Image.open(io.BytesIO(png)).convert("RGB").getpixel((0, 0))


def shade(n: int) -> tuple[int, int, int]:
    """The RGB of solid_frame(n) (BGRA bytes (n*37, n*91, n*53))."""
    return ((n * 53) % 256, (n * 91) % 256, (n * 37) % 256)


# --- the request ---------------------------------------------------------------------------------


def test_first_request_declares_the_desktop_computer_and_sends_the_screen(fake):
    fake.queue(gf.ok(gf.function_call("click_at", {"x": 500, "y": 500})))
    turn = provider(fake, model=f"gemini/{MODEL}").turn(OBSERVATION, [])

    [request] = fake.requests
    assert request.method == "POST" and gf.model_of(request) == MODEL
    assert request.headers["x-goog-api-key"] == API_KEY
    assert gf.computer_use(request) == {"environment": "ENVIRONMENT_DESKTOP"}
    system = request.body["systemInstruction"]["parts"][0]["text"]
    assert "XFCE" in system and system.endswith(SYSTEM)
    [user] = gf.contents(request)
    assert user["role"] == "user" and user["parts"][0] == {"text": INSTRUCTION}
    [png] = gf.images(user)
    assert gf.png_size(png) == (1920, 1080) == turn.image_size
    assert turn.calls[0].actions == [Click(x=960, y=540)]


def test_browser_environment_excluded_functions_and_a_smaller_screenshot(fake):
    fake.queue(gf.ok(gf.text("nothing to do")))
    turn = provider(fake, environment="browser", excluded_functions=["search", "navigate"],
                    image_size=(1440, 810)).turn(OBSERVATION, [])
    assert gf.computer_use(fake.requests[0]) == {"environment": "ENVIRONMENT_BROWSER",
                                                 "excluded_predefined_functions": ["search", "navigate"]}
    assert gf.png_size(gf.images(gf.contents(fake.requests[0])[0])[0]) == (1440, 810) == turn.image_size


def test_bad_options_are_refused_all_at_once():
    with pytest.raises(ValueError) as caught:
        GeminiProvider(INSTRUCTION, model=MODEL, api_key=API_KEY, environment="mobile",
                       excluded_functions=["fly"], max_screenshot_turns=0)
    message = str(caught.value)
    assert "environment must be one of desktop, browser" in message and "'fly'" in message
    assert "max_screenshot_turns" in message


def test_key_and_base_url_from_the_environment_and_the_default_model(fake, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    fake.queue(gf.ok(gf.text("ok")))
    p = create_provider("gemini/", INSTRUCTION, VisionConfig())
    assert p.name == f"gemini/{DEFAULT_MODEL}"
    p.turn(OBSERVATION, [])
    assert fake.requests[0].headers["x-goog-api-key"] == API_KEY and gf.model_of(fake.requests[0]) == DEFAULT_MODEL


def test_missing_key_is_refused():
    with pytest.raises(ModelCallError, match="GEMINI_API_KEY"):
        GeminiProvider(INSTRUCTION, model=MODEL)


def test_config_options_reach_the_provider(fake, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    config = VisionConfig(models={f"gemini/{MODEL}": {"base_url": fake.url, "environment": "browser"}})
    fake.queue(gf.ok(gf.text("ok")))
    create_provider(config.resolve(f"gemini/{MODEL}"), INSTRUCTION, config).turn(OBSERVATION, [])
    assert gf.computer_use(fake.requests[0])["environment"] == "ENVIRONMENT_BROWSER"


# --- several calls in one turn -------------------------------------------------------------------


def test_several_calls_in_one_turn_each_answered_in_order_with_its_own_screen(fake):
    signed = {**gf.function_call("click_at", {"x": 250, "y": 250}, id="fc-1"), "thoughtSignature": "c2lnbmVk"}
    fake.queue(gf.ok(gf.text("I should open the shop.", thought=True), gf.text("Clicking, then typing."), signed,
                     gf.function_call("type_text_at", {"x": 500, "y": 100, "text": "mug", "press_enter": False}),
                     gf.function_call("hover_at", {"x": 0, "y": 999}, id="fc-3"),
                     usage_=gf.usage(prompt=1500, candidates=60, thoughts=25, cached=1000)),
               gf.ok(gf.text("Done: the mug is in the cart.")))
    p = provider(fake)
    turn = p.turn(OBSERVATION, [])

    assert [c.name for c in turn.calls] == ["click_at", "type_text_at", "hover_at"]
    first, second, third = turn.calls
    assert first.id == "fc-1" and third.id == "fc-3" and second.id  # one the API left without an id gets one
    assert first.actions == [Click(x=480, y=270)]
    assert second.actions == [Click(x=960, y=108), Key(keys=["ctrl+a", "Delete"]), Type(text="mug")]
    assert third.actions == [Move(x=0, y=1079)]
    assert turn.text == "Clicking, then typing." and turn.reasoning == "I should open the shop."
    assert (turn.usage.input_tokens, turn.usage.output_tokens, turn.usage.cache_read_tokens) == (1500, 85, 1000)
    assert turn.safety_checks == [] and not turn.done

    results = [CallResult(c.id, ok=True, screen=solid_frame(i + 1)) for i, c in enumerate(turn.calls)]
    final = p.turn(Observation(solid_frame(3), url="http://shop.test/cart"), results)
    assert final.done and final.answer == "Done: the mug is in the cart."

    user, model, answers = gf.contents(fake.requests[1])
    assert model["role"] == "model"
    # The model's turn goes back as it came, thought signature included.
    assert model["parts"][2].get("thoughtSignature", model["parts"][2].get("thought_signature")) == "c2lnbmVk"
    responses = gf.function_responses(answers)
    assert [(r["name"], r.get("id")) for r in responses] == [("click_at", "fc-1"), ("type_text_at", None),
                                                           ("hover_at", "fc-3")]
    assert all(r["response"] == {"url": "http://shop.test/cart"} for r in responses)
    assert [colour(png) for png in gf.images(answers)] == [shade(1), shade(2), shade(3)]


def test_a_wrong_call_and_an_unknown_function_are_answered_as_errors_not_crashes(fake):
    fake.queue(gf.ok(gf.function_call("click_at", {"x": 1200, "y": -5}), gf.function_call("open_app", {"app": "x"}),
                     gf.function_call("wait_5_seconds")),
               gf.ok(gf.text("ok")))
    p = provider(fake)
    turn = p.turn(OBSERVATION, [])
    off, unknown, wait = turn.calls
    assert off.actions == [] and "x=1200 is off the 0..999 grid" in off.error and "y=-5" in off.error
    assert unknown.error.startswith("unknown function 'open_app'") and wait.error is None

    results = [CallResult(off.id, ok=False, error=off.error), CallResult(unknown.id, ok=False, error=unknown.error),
               CallResult(wait.id, ok=True)]
    p.turn(OBSERVATION, results)
    responses = gf.function_responses(gf.contents(fake.requests[1])[-1])
    assert [r["response"].get("error") for r in responses] == [off.error, unknown.error, None]
    assert len(gf.images(gf.contents(fake.requests[1])[-1])) == 3  # an error's answer shows the screen too


# --- safety decisions ----------------------------------------------------------------------------


def test_a_safety_decision_is_a_check_and_its_acknowledgement_goes_back(fake):
    fake.queue(gf.ok(gf.function_call("click_at", {"x": 10, "y": 10, "safety_decision": gf.confirm("Pays $20.")},
                                      id="pay"),
                     gf.function_call("click_at", {"x": 20, "y": 20}, id="other")),
               gf.ok(gf.text("paid")))
    p = provider(fake)
    turn = p.turn(OBSERVATION, [])
    assert turn.safety_checks == [SafetyCheck(id="pay", code="require_confirmation", message="Pays $20.")]
    with pytest.raises(ValueError, match="other"):
        p.acknowledge(["other"])
    p.acknowledge(["pay"])
    p.turn(OBSERVATION, [CallResult("pay", ok=True), CallResult("other", ok=True)])
    responses = gf.function_responses(gf.contents(fake.requests[1])[-1])
    assert [r["response"] for r in responses] == [{"url": "http://shop.test/", "safety_acknowledgement": "true"},
                                                  {"url": "http://shop.test/"}]


def test_through_the_loop_a_confirmation_holds_the_run_until_the_operator_approves(fake, tmp_path):
    desktop = FakeDesktop()
    desktop.during_perform = lambda action: setattr(desktop, "url", f"http://shop.test/after-{action.action}")
    fake.queue(gf.ok(gf.function_call("click_at", {"x": 500, "y": 500, "safety_decision": gf.confirm()}, id="buy"),
                     gf.function_call("key_combination", {"keys": "Control+S"}, id="save")),
               gf.ok(gf.text("Bought.")))
    runner = Runner(desktop, TraceStore(tmp_path), VisionConfig(), EventBus())
    held = runner.act(ActRequest(instruction=INSTRUCTION), provider=provider(fake))
    assert held.status == "needs_confirmation" and desktop.performed == []
    assert [(c.id, c.code) for c in held.pending_safety_checks] == [("buy", "require_confirmation")]
    assert len(fake.requests) == 1

    result = runner.act(ActRequest(acknowledged_safety_checks=["buy"]))
    assert result.status == "done" and result.answer == "Bought."
    assert desktop.performed == [Click(x=960, y=540), Key(keys=["control+s"])]  # in order, as the model made them
    responses = gf.function_responses(gf.contents(fake.requests[1])[-1])
    assert [r["response"] for r in responses] == [  # each with the URL and the screen right after it
        {"url": "http://shop.test/after-click", "safety_acknowledgement": "true"},
        {"url": "http://shop.test/after-key"}]
    assert [colour(png) for png in gf.images(gf.contents(fake.requests[1])[-1])] == [shade(1), shade(2)]
    assert result.usage.input_tokens == 2 * 1200 and result.usage.output_tokens == 2 * 40
    assert result.steps[-2].usage.input_tokens == 1200  # the held step records its turn's usage


def test_the_loop_stops_on_the_token_budget(fake, tmp_path):
    fake.queue(gf.ok(gf.function_call("wait_5_seconds"), usage_=gf.usage(prompt=5000, candidates=10)))
    runner = Runner(FakeDesktop(), TraceStore(tmp_path), VisionConfig(), EventBus())
    result = runner.act(ActRequest(instruction=INSTRUCTION, budget_tokens=1000), provider=provider(fake))
    assert result.status == "budget_exceeded" and result.usage.total == 5010


# --- how a turn ends -----------------------------------------------------------------------------


def test_a_malformed_call_is_a_parse_error_and_a_blocked_reply_fails(fake):
    fake.queue(gf.ok(finish_reason="MALFORMED_FUNCTION_CALL"), gf.ok(gf.text("no"), finish_reason="SAFETY"))
    p = provider(fake)
    malformed = p.turn(OBSERVATION, [])
    assert "MALFORMED_FUNCTION_CALL" in malformed.parse_error and not malformed.done
    blocked = p.turn(OBSERVATION, [])
    [call] = blocked.calls
    assert call.actions == [Fail(reason="Gemini stopped its reply (SAFETY): no")]


def test_old_screenshots_are_pruned_to_the_newest_turns(fake):
    for i in range(4):
        fake.queue(gf.ok(gf.function_call("click_at", {"x": i, "y": i}, id=f"c{i}")))
    p = provider(fake, max_screenshot_turns=2)
    results: list[CallResult] = []
    for _ in range(4):
        turn = p.turn(OBSERVATION, results)
        results = [CallResult(c.id, ok=True) for c in turn.calls]
    users = [c for c in gf.contents(fake.requests[-1]) if c["role"] == "user"]
    assert [len(gf.images(c)) for c in users] == [0, 0, 1, 1]
    assert {"text": PRUNED_SCREENSHOT} in users[0]["parts"]
    # a pruned function response keeps its name, id and URL
    assert gf.function_responses(users[1])[0]["response"] == {"url": "http://shop.test/"}


# --- errors --------------------------------------------------------------------------------------


def test_rate_limit_is_transient_with_retry_after_and_the_key_never_leaks(fake):
    fake.queue(gf.error(429, f"quota for key {API_KEY}", "RESOURCE_EXHAUSTED", {"retry-after": "7"}))
    with pytest.raises(ModelCallError) as caught:
        provider(fake).turn(OBSERVATION, [])
    exc = caught.value
    assert exc.transient and exc.retry_after == 7 and exc.status == 429
    assert "RESOURCE_EXHAUSTED" in str(exc) and API_KEY not in str(exc)
    assert len(fake.requests) == 1  # the SDK did not retry on its own


def test_a_bad_request_is_not_transient_and_an_unreachable_api_is(fake):
    fake.queue(gf.error(400, "Request contains an invalid argument."), gf.error(503, "overloaded", "UNAVAILABLE"))
    with pytest.raises(ModelCallError) as caught:
        provider(fake).turn(OBSERVATION, [])
    assert not caught.value.transient and "400" in str(caught.value)
    with pytest.raises(ModelCallError) as caught:
        provider(fake).turn(OBSERVATION, [])
    assert caught.value.transient
    unreachable = GeminiProvider(INSTRUCTION, model=MODEL, api_key=API_KEY, base_url="http://127.0.0.1:9", timeout=5)
    with pytest.raises(ModelCallError) as caught:
        unreachable.turn(OBSERVATION, [])
    assert caught.value.transient and "could not reach the Gemini API" in str(caught.value)


def test_a_retried_turn_resends_the_same_contents(fake):
    fake.queue(gf.error(500, "boom", "INTERNAL"), gf.ok(gf.text("ok")))
    p = provider(fake)
    with pytest.raises(ModelCallError):
        p.turn(OBSERVATION, [])
    p.turn(OBSERVATION, [])
    assert fake.requests[0].body["contents"] == fake.requests[1].body["contents"]


def test_frames_of_another_size_are_sent_as_they_are(fake):
    fake.queue(gf.ok(gf.text("ok")))
    turn = provider(fake).turn(Observation(Frame(bytes(800 * 600 * 4), 800, 600)), [])
    assert turn.image_size == (800, 600)
