"""The page layer on the visible Chromium, through HTTP: state, content, selector actions as real
input (pixel-exact against the page's own event log), console and network recording."""

from __future__ import annotations

import pytest

from tests.answers import error, ok
from tests.fakes.testpage import at

pytestmark = pytest.mark.x11

P = "/api/v1/sessions/itest/page"


def test_page_state_names_the_visible_tab(api, page):
    state = ok(api.get(P))
    assert state["url"] == page.url and state["title"] == "glassdesk test page"
    assert state["dialog"] is None
    active = [t for t in state["tabs"] if t["active"]]
    assert len(active) == 1 and active[0]["url"] == page.url


def test_a_selector_click_is_a_real_click_at_the_element_centre(api, page, viewport):
    acted = ok(api.post(f"{P}/click", json={"selector": "#signin"}))
    click = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (click["screenX"], click["screenY"]) == (acted["x"], acted["y"])
    box = acted["box"]
    assert box["x"] <= acted["x"] < box["x"] + box["width"] and box["y"] <= acted["y"] < box["y"] + box["height"]
    assert acted["dispatched"] == "pointer" and acted["executed"][0][0] == "xdotool"
    # the box is where the page says the button is
    left, top = at(viewport, 1200, 120)
    assert (box["x"], box["y"]) == (left, top)


def test_a_click_glides_there_as_the_server_is_set_or_goes_at_once_when_asked(api, page):
    """The glide shows a person where an agent acts (the tests' server: the default 150 ms); a step
    nobody needs to watch (an evaluation's setup) asks for none. Both land pixel-exact."""
    for glide in (False, True):
        ok(api.post("/api/v1/sessions/itest/desktop/move", json={"x": 5, "y": 1000}))  # far: worth a glide
        page.clear()
        acted = ok(api.post(f"{P}/click", json={"selector": "#signin", "glide": glide}))
        assert any("sleep" in argv for argv in acted["executed"]) is glide, acted["executed"]
        click = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
        assert (click["screenX"], click["screenY"]) == (acted["x"], acted["y"])
    error(api.post(f"{P}/click", json={"selector": "#signin", "glide": "sometimes"}), 422, "invalid_request")


def test_fill_by_label_types_for_real_and_checks_the_value(api, page):
    acted = ok(api.post(f"{P}/fill", json={"label": "Email", "value": "{{mail}}", "secrets": {"mail": "a@b.test"}}))
    assert acted["verified"] is True
    assert "a@b.test" not in str(acted), "a secret is never echoed"
    page.wait_for(lambda e: e["type"] == "input" and e.get("field") == "a@b.test" or e.get("target") == "email"
                  and e["type"] == "input")


def test_an_unknown_element_and_a_bad_selector_are_typed_errors(api, page):
    missing = error(api.post(f"{P}/click", json={"selector": "#nope", "timeout_ms": 300}), 404, "element_not_found")
    assert "#nope" in missing and "within 300 ms" in missing  # the time asked for, whatever went before the wait
    error(api.post(f"{P}/click", json={"selector": "a[[[", "timeout_ms": 300}), 422, "invalid_selector")
    error(api.post(f"{P}/click", json={"selector": "#signin", "text": "Sign in"}), 422, "invalid_request")
    assert not [e for e in page.events if e["type"] == "click"], "nothing was clicked"


def test_content_formats(api, page):
    text = ok(api.get(f"{P}/content", params={"format": "text"}))
    assert "alpha bravo charlie delta" in text["content"] and text["truncated"] is False
    tree = ok(api.get(f"{P}/content", params={"format": "accessibility"}))
    assert 'button "Sign in" [ref=' in tree["content"]
    ref = tree["content"].split('button "Sign in" [ref=')[1].split("]")[0]
    acted = ok(api.post(f"{P}/click", json={"ref": ref}))
    click = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (click["screenX"], click["screenY"]) == (acted["x"], acted["y"])


def test_console_and_network_are_recorded_with_sequence_numbers(api, page):
    before = ok(api.get(f"{P}/network"))
    last = before[-1]["seq"] if before else 0
    ok(api.post(f"{P}/reload", json={"wait_until": "load"}))
    entries = ok(api.get(f"{P}/network", params={"since": last}))
    documents = [e for e in entries if e["resource_type"] == "document"]
    assert documents and documents[0]["url"] == page.url and documents[0]["status"] == 200
    assert all(e["seq"] > last for e in entries)
    evaluate = api.post(f"{P}/evaluate", json={"expression": "1+1"})
    error(evaluate, 403, "evaluate_disabled")
