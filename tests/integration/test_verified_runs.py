"""A run's done is checked, not claimed (vision/act's expect), on the real desktop: a scripted model
signs in on a real form and the run is verified by what the page then shows; the same done after
typing into nothing fails with expectation_failed and says what it saw; the trace, JUnit, /metrics
and the export say which it was."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import yaml

from tests.fakes.qa_site import pixel

pytestmark = pytest.mark.x11

SIGNED_IN = [{"assertion": {"type": "url_matches", "expected": "/welcome\\?user=alice$"}},
             {"assertion": {"type": "has_text", "expected": "alice"}, "selector": "#who"}]
NAME_FILLED = [{"assertion": {"type": "has_value", "expected": "alice"}, "label": "User", "timeout_ms": 1000}]


def act(vision_api, script: list[dict], expect: list[dict]) -> dict:
    r = vision_api.post("/api/v1/sessions/itest/vision/act", json={
        "instruction": "sign in as alice", "model": "scripted", "script": script, "expect": expect})
    assert r.status_code == 200, r.text
    return r.json()


def verdicts(vision_api) -> dict[str, float]:
    lines = vision_api.get("/metrics").text.splitlines()
    return {verdict: next((float(line.split()[-1]) for line in lines if line.startswith(
        f'glassdesk_run_verdicts_total{{model="scripted",verdict="{verdict}"}}')), 0.0)
        for verdict in ("verified", "failed_check")}


def test_a_sign_in_whose_page_shows_the_user_is_verified_and_exported_with_its_checks(vision_api, desk, qa_site):
    desk.run_settled(lambda: desk.open_url(qa_site.url("/login")))
    (ux, uy), (px, py), (gx, gy) = (pixel(desk, s) for s in ("#user", "#pw", "#go"))
    before = verdicts(vision_api)
    body = act(vision_api, [{"action": "click", "x": ux, "y": uy}, {"action": "type", "text": "alice"},
                            {"action": "click", "x": px, "y": py}, {"action": "type", "text": "right"},
                            {"action": "click", "x": gx, "y": gy}, {"action": "done", "answer": "signed in"}],
               SIGNED_IN)
    assert body["status"] == "done" and body["verified"] is True and body["error"] is None
    assert [(c["check"], c["passed"]) for c in body["checks"]] == [
        ("assert url_matches '/welcome\\\\?user=alice$'", True), ("assert has_text selector '#who' 'alice'", True)]
    assert "alice" in body["checks"][1]["saw"] or body["checks"][1]["saw"] == "1 match"
    trace = vision_api.get(f"/api/v1/traces/{body['trace_id']}").json()
    assert trace["meta"]["verified"] is True and trace["meta"]["expect"] == SIGNED_IN
    assert vision_api.get(f"/api/v1/traces/{body['trace_id']}/verify").json()["ok"]
    junit = ET.fromstring(vision_api.get(f"/api/v1/traces/{body['trace_id']}/junit.xml").text)
    assert junit.get("failures") == "0" and {p.get("name"): p.get("value") for p in junit.iter("property")}[
        "verified"] == "verified"
    steps = yaml.safe_load(vision_api.get(f"/api/v1/traces/{body['trace_id']}/export",
                                          params={"format": "yaml"}).text)["tests"][0]["verify_user_flow"]["steps"]
    assert steps[-2:] == [{"action": "assert", **e} for e in SIGNED_IN]
    assert verdicts(vision_api)["verified"] == before["verified"] + 1


def test_a_done_after_typing_into_the_wrong_field_fails_its_expectation_and_says_what_it_saw(
        vision_api, desk, qa_site):
    desk.run_settled(lambda: desk.open_url(qa_site.url("/login")))
    px, py = pixel(desk, "#pw")
    before = verdicts(vision_api)
    body = act(vision_api, [{"action": "click", "x": px, "y": py}, {"action": "type", "text": "alice"},
                            {"action": "done", "answer": "typed alice into the User field"}], NAME_FILLED)
    assert [s["error"] for s in body["steps"]] == [None, None, None]  # every action worked: only the check can tell
    assert body["status"] == "failed" and body["verified"] is False
    assert body["error"]["code"] == "expectation_failed"
    check = body["checks"][0]
    assert check["passed"] is False and check["check"] == "assert has_value label 'User' 'alice'"
    assert "''" in check["saw"] and check["duration_ms"] >= 1000  # looked at for its whole timeout
    assert body["answer"] == "typed alice into the User field"  # the model's word is kept, not believed
    assert verdicts(vision_api)["failed_check"] == before["failed_check"] + 1
    text = vision_api.get(f"/api/v1/traces/{body['trace_id']}/export", params={"format": "yaml"}).text
    assert "FAILED in the run" in text


def test_a_run_whose_expectation_could_never_be_checked_is_refused_before_it_starts(vision_api, services):
    count = len(services.store.list_traces())
    r = vision_api.post("/api/v1/sessions/itest/vision/act", json={
        "instruction": "x", "model": "scripted", "script": [{"action": "done"}],
        "expect": [{"assertion": {"type": "visual_matches", "baseline_id": "no-such-baseline"}}]})
    assert r.status_code == 404, r.text
    r = vision_api.post("/api/v1/sessions/itest/vision/act", json={
        "instruction": "x", "model": "scripted", "script": [{"action": "done"}],
        "expect": [{"assertion": {"type": "visible"}, "selector": "a[["}]})
    assert r.status_code == 422 and "selector" in r.text, r.text
    assert len(services.store.list_traces()) == count  # no run was made


# ------------------------------------------------------------------ typing into nothing is refused


def focus(desk, selector: str | None) -> None:
    """Give the keyboard focus to ``selector`` (None: to nobody: the page itself)."""
    in_page(desk, "s => s ? document.querySelector(s).focus() : document.activeElement.blur()", selector)


def in_page(desk, script: str, arg=None):
    async def work(pages):
        return await (await pages.front()).evaluate(script, arg)

    return desk.stack.browser.call(work, 10)


def test_a_type_with_no_field_focused_is_refused_before_a_key_is_sent_and_the_model_is_told(
        vision_api, desk, qa_site):
    desk.run_settled(lambda: desk.open_url(qa_site.url("/login")))
    ux, uy = pixel(desk, "#user")
    body = act(vision_api, [{"action": "click", "x": ux, "y": uy + 60}, {"action": "type", "text": "alice"},
                            {"action": "done", "answer": "typed alice"}], [])
    typed = body["steps"][1]
    assert typed["error"]["code"] == "typed_into_nothing"
    assert "the page itself" in typed["error"]["message"] and "click the field" in typed["error"]["message"]
    # the model's done after it does not make the run done
    assert body["status"] == "failed" and body["error"]["code"] == "last_step_failed"
    trace = vision_api.get(f"/api/v1/traces/{body['trace_id']}").json()
    assert trace["steps"][1]["results"][0]["error"].startswith("typed_into_nothing: ")  # what the model was sent
    assert in_page(desk, "() => document.querySelector('#user').value") == ""  # no key reached the field


@pytest.mark.parametrize("path,selector,below,refused", [
    ("/login", "#user", 60, True),                         # beside the fields: the page itself has the focus
    ("/widgets", "#inc", 0, True),                         # a button (its Enter would press it)
    ("/login", "#user", 0, False), ("/login", "#pw", 0, False),  # text fields
    ("/signup", "canvas", 0, False),                       # a canvas may take keys: not judged
])
def test_the_desktop_type_door_refuses_only_a_focus_that_takes_no_text(vision_api, desk, qa_site, path, selector,
                                                                       below, refused):
    desk.run_settled(lambda: desk.open_url(qa_site.url(path)))
    x, y = pixel(desk, selector)
    assert vision_api.post("/api/v1/sessions/itest/desktop/click", json={"x": x, "y": y + below}).status_code == 200
    r = vision_api.post("/api/v1/sessions/itest/desktop/type", json={"text": "abc"})
    if refused:
        assert r.status_code == 409 and r.json()["error"]["code"] == "typed_into_nothing", r.text
        assert r.json()["error"]["detail"]["focused"]
    else:
        assert r.status_code == 200, r.text


def test_after_a_key_that_may_move_the_focus_a_type_is_not_judged(vision_api, desk, qa_site):
    """Tab past the last field goes to the browser's toolbar: where the keys go is not known, and
    the keys are sent as asked."""
    desk.run_settled(lambda: desk.open_url(qa_site.url("/login")))
    x, y = pixel(desk, "#user")
    assert vision_api.post("/api/v1/sessions/itest/desktop/click", json={"x": x, "y": y + 60}).status_code == 200
    assert vision_api.post("/api/v1/sessions/itest/desktop/key", json={"keys": ["Tab"]}).status_code == 200
    focus(desk, None)
    assert vision_api.post("/api/v1/sessions/itest/desktop/type", json={"text": "abc"}).status_code == 200


def test_typing_into_the_address_bar_after_a_click_beside_a_field_is_not_refused(vision_api, desk, qa_site):
    desk.run_settled(lambda: desk.open_url(qa_site.url("/login")))
    x, y = pixel(desk, "#user")
    assert vision_api.post("/api/v1/sessions/itest/desktop/click", json={"x": x, "y": y + 60}).status_code == 200
    assert vision_api.post("/api/v1/sessions/itest/desktop/key", json={"keys": ["ctrl+l"]}).status_code == 200
    r = vision_api.post("/api/v1/sessions/itest/desktop/type", json={"text": qa_site.url("/welcome?user=bo")})
    assert r.status_code == 200, r.text
    assert vision_api.post("/api/v1/sessions/itest/desktop/key", json={"keys": ["Return"]}).status_code == 200
    wait = vision_api.post("/api/v1/sessions/itest/page/wait", json={"text": "bo", "timeout_ms": 10000})
    assert wait.status_code == 200, wait.text


# ----------------------------------------------------- the vendor executors say it to their models

VENDORS = ("anthropic", "openai", "gemini")


def _call(vision_api, vendor: str, x: int, y: int, text: str | None = None) -> tuple[bool, str]:
    """A click at (x, y), or with ``text`` a type (Gemini's clicks at (x, y) first), through one
    vendor's executor declaring the display's own size (Gemini: its 0..999 grid): its no_effect
    and what its model reads."""
    from vision import coords

    grid = coords.gemini().from_display(x, y)
    body = {
        "anthropic": {"tool_version": "computer_20251124", "display_width_px": 1920, "display_height_px": 1080,
                      "input": {"action": "type", "text": text} if text else
                      {"action": "left_click", "coordinate": [x, y]}},
        "openai": {"action": {"type": "type", "text": text} if text else
                   {"type": "click", "x": x, "y": y, "button": "left"}},
        "gemini": {"function_calls": [
            {"name": "type_text_at", "args": {"x": grid[0], "y": grid[1], "text": text, "press_enter": False,
                                              "clear_before_typing": False}} if text else
            {"name": "click_at", "args": {"x": grid[0], "y": grid[1]}}]},
    }[vendor]
    r = vision_api.post(f"/api/v1/sessions/itest/computer/{vendor}", json=body)
    assert r.status_code == 200, (vendor, r.text)
    return _said(vendor, r.json())


def _said(vendor: str, answer: dict) -> tuple[bool, str]:
    """(no_effect, what the model reads) of one executor's answer."""
    if vendor == "anthropic":
        return answer["no_effect"], " ".join(b["text"] for b in answer["content"] if b["type"] == "text")
    if vendor == "openai":
        return answer["no_effect"], answer["error"] or ""
    response = answer["function_responses"][0]["response"]
    return response.get("no_effect", False), response.get("output") or response.get("error") or ""


def test_each_vendors_model_is_told_of_a_click_that_changed_nothing_and_of_typing_into_nothing(
        vision_api, desk, qa_site):
    from desktop.actions import Click

    desk.run_settled(lambda: desk.open_url(qa_site.url("/login")))
    ux, uy = pixel(desk, "#user")
    # The page itself, right of the form: a click there changes nothing once no field has the focus.
    # Each vendor clicks its own spot, 150 px apart: a second click on one spot would be a double
    # click, which selects the nearest word (a visible change, rightly reported).
    blank = [(ux + 700 + 150 * k, uy + 60) for k in range(4)]
    desk.perform(Click(x=blank[3][0], y=blank[3][1]))  # whatever had the focus loses it (maybe a change)
    for k, vendor in enumerate(VENDORS):
        no_effect, text = _call(vision_api, vendor, *blank[k])
        assert no_effect, (vendor, text)
        if vendor != "openai":
            assert "changed nothing on the screen" in text, (vendor, text)
    # Nothing focused that takes text: each model is answered typed_into_nothing, and no key went out.
    for vendor in VENDORS:
        no_effect, text = _call(vision_api, vendor, *blank[0], text="alice")
        assert not no_effect and text.startswith("typed_into_nothing: nothing was typed"), (vendor, text)
    assert in_page(desk, "() => document.querySelector('#user').value") == ""
    # A click into the field changes the screen (the caret, the focus ring): nothing of the kind is said.
    for k, vendor in enumerate(VENDORS):
        desk.perform(Click(x=blank[k + 1][0], y=blank[k + 1][1]))  # the field loses the focus again
        no_effect, text = _call(vision_api, vendor, ux, uy)
        assert not no_effect and "changed nothing" not in text, (vendor, text)
