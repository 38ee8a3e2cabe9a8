"""The flow language (issue 21, item 4) on the real desktop, against the QA site's /lang page
(tests/fakes/qa_site.py): every action, locator and assertion in one passing flow over REST, each
assertion kind failing with what it saw, bad flows refused before anything runs."""

from __future__ import annotations

import base64
import time

import pytest

from vision.models.qa import FlowStep
from vision.qa.driver import AssertionFailed

pytestmark = pytest.mark.x11

QA = "/api/v1/sessions/itest/qa"
NEW = "What needs to be done?"


def run_ids(services) -> set[str]:
    runs_dir = services.qa.runs.runs_dir
    return {p.name for p in runs_dir.iterdir()} if runs_dir.is_dir() else set()


def test_every_action_locator_and_assertion_in_one_flow(vision_api, qa_site):
    qa_site.clear()
    lang = qa_site.url("/lang")
    first_item = {"test_id": "todo-item", "nth": 0}
    steps = [
        {"action": "assert", "assertion": {"type": "title", "expected": "Todos lang"}},
        {"action": "assert", "assertion": {"type": "url", "expected": lang}},
        {"action": "fill", "placeholder": NEW, "value": "buy some cheese"},
        {"action": "press", "placeholder": NEW, "keys": "Enter"},
        {"action": "assert", "role": "listitem", "assertion": {"type": "count", "count": 3}},
        {"action": "assert", "test_id": "todo-item",
         "assertion": {"type": "has_text", "expected_list": ["Buy milk", "Walk the dog", "buy some cheese"]}},
        {"action": "assert", "selector": ".todo-list li", "nth": 0,
         "assertion": {"type": "has_class", "expected": "completed", "not": True}},
        {"action": "check", "role": "checkbox", "within": first_item},                       # 8
        {"action": "assert", "role": "checkbox", "name": "done", "within": first_item,
         "assertion": {"type": "checked"}},
        {"action": "assert", "selector": ".todo-list li", "nth": 0,
         "assertion": {"type": "has_class", "expected": "completed"}},
        {"action": "check", "label": "done", "nth": 0},                                      # 11: already checked
        {"action": "uncheck", "label": "done", "exact": True, "nth": 1},
        {"action": "assert", "label": "done", "nth": 1, "assertion": {"type": "checked", "not": True}},
        {"action": "dblclick", "text": "buy some cheese", "exact": True},                     # 14
        {"action": "assert", "selector": "li.editing .edit", "assertion": {"type": "focused"}},
        {"action": "assert", "selector": ".edit", "assertion": {"type": "has_value", "expected": "buy some cheese"}},
        {"action": "clear", "selector": ".edit"},
        {"action": "assert", "selector": ".edit", "assertion": {"type": "value_equals", "expected": ""}},
        {"action": "fill", "selector": ".edit", "value": "buy brie"},
        {"action": "press", "selector": ".edit", "keys": ["Enter"]},
        {"action": "assert", "role": "listitem", "nth": -1, "assertion": {"type": "has_text", "expected": "buy brie"}},
        {"action": "assert", "test_id": "list", "assertion": {"type": "contains_text", "expected": "brie"}},
        {"action": "assert", "role": "listitem", "has_text": "brie", "assertion": {"type": "count", "count": 1}},
        {"action": "assert", "test_id": "list", "assertion": {"type": "text_contains", "expected": "Walk"}},
        {"action": "assert", "role": "button", "name": "Disabled", "assertion": {"type": "disabled"}},
        {"action": "assert", "placeholder": NEW, "assertion": {"type": "enabled"}},
        {"action": "assert", "placeholder": NEW, "assertion": {"type": "editable"}},
        {"action": "assert", "selector": "#ro", "assertion": {"type": "editable", "not": True}},
        {"action": "assert", "selector": "#hidden-one", "assertion": {"type": "hidden"}},
        {"action": "assert", "selector": "#hidden-one", "assertion": {"type": "exists"}},
        {"action": "assert", "selector": "#hidden-one", "assertion": {"type": "visible", "not": True}},
        {"action": "assert", "title": "Close this", "assertion": {"type": "has_attribute", "attribute": "href",
                                                                 "expected": "#/closed"}},
        {"action": "assert", "alt": "company logo", "assertion": {"type": "visible"}},
        {"action": "assert", "alt": "company logo", "assertion": {"type": "has_attribute", "attribute": "width"}},
        {"action": "hover", "selector": "#hoverme"},                                          # 35
        {"action": "assert", "selector": "#tip", "assertion": {"type": "visible"}},
        {"action": "click", "role": "button", "name": "Remove"},
        {"action": "wait", "selector": "#soon-gone", "state": "detached"},
        {"action": "assert", "selector": "#soon-gone", "assertion": {"type": "exists", "not": True}},
        {"action": "click", "selector": "#later"},
        {"action": "assert", "selector": "#late", "assertion": {"type": "has_class", "expected": "arrived"}},
        {"action": "drag", "selector": "#drag-src", "to": {"selector": "#drop"}},           # 42
        {"action": "assert", "selector": "#drop", "assertion": {"type": "has_text", "expected": "dropped"}},
        {"action": "upload", "selector": "#file",
         "files": [{"name": "a.txt", "content_base64": base64.b64encode(b"hello").decode()}]},
        {"action": "assert", "selector": "#files", "assertion": {"type": "has_text", "expected": "a.txt"}},
        {"action": "scroll_into_view", "selector": "#file"},
        {"action": "clear", "selector": "#note"},                                             # contenteditable
        {"action": "assert", "selector": "#note", "assertion": {"type": "has_text", "expected": ""}},
        {"action": "click", "title": "Close this"},
        {"action": "assert", "assertion": {"type": "url_matches", "expected": "#/closed$"}},
        {"action": "back"},
        {"action": "assert", "assertion": {"type": "url", "expected": lang}},
        {"action": "forward"},
        {"action": "assert", "assertion": {"type": "url", "expected": lang + "#/closed"}},
        {"action": "reload"},
        {"action": "assert", "role": "listitem", "assertion": {"type": "count", "count": 2}},
        {"action": "wait", "selector": "#hidden-one", "state": "hidden"},
        {"action": "wait", "selector": "#hidden-one", "state": "attached"},
    ]
    r = vision_api.post(f"{QA}/verify_user_flow", json={"start_url": lang, "steps": steps, "timeout_ms": 240_000})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True, (body["failure_reason"], body["steps"][-1])
    assert body["steps_completed"] == len(steps)
    by_index = {s["index"]: s for s in body["steps"]}
    assert by_index[8]["detail"]["clicked"] is True and by_index[11]["detail"]["clicked"] is False
    assert by_index[41]["detail"]["waited_ms"] > 0  # the class came ~700 ms after the click
    # What the page saw was real input: trusted events, the pointer at a display position.
    for kind in ("added", "toggle", "dblclick", "hover", "drop"):
        event = qa_site.wait_for(lambda e, kind=kind: e.get("type") == kind)
        assert event["trusted"] is True, event
    assert qa_site.wait_for(lambda e: e.get("type") == "dblclick")["screenX"] > 0


def test_a_drop_is_released_at_the_point_or_edge_asked_for(vision_api, qa_site):
    """#drop is 200x50 with no border: the drop event's offset is the point inside it."""
    at = {"action": "assert", "selector": "#drop", "assertion": {"type": "has_attribute", "attribute": "data-at"}}
    steps = [
        {"action": "drag", "selector": "#drag-src", "to": {"selector": "#drop", "position": {"x": 7, "y": 30}}},
        at | {"assertion": at["assertion"] | {"expected": "7,30"}},
        {"action": "drag", "selector": "#drag-src", "position": "left",
         "to": {"selector": "#drop", "position": "bottom"}},
        at | {"assertion": at["assertion"] | {"expected": "100,48"}},  # the middle, 1 px inside the bottom edge
        {"action": "drag", "selector": "#drag-src", "to": {"selector": "#drop", "position": {"y": 3}}},
        at | {"assertion": at["assertion"] | {"expected": "100,3"}},
    ]
    r = vision_api.post(f"{QA}/verify_user_flow", json={"start_url": qa_site.url("/lang"), "steps": steps})
    assert r.status_code == 200 and r.json()["success"], r.text
    assert [s["name"] for s in r.json()["steps"]][2] == \
        "drag selector '#drag-src' at its left edge to selector '#drop' at its bottom edge"
    # A point outside the target is refused before the pointer moves: nothing is dropped.
    r = vision_api.post("/api/v1/sessions/itest/page/drag",
                        json={"selector": "#drag-src", "to": {"selector": "#drop", "position": {"x": 200, "y": 10}}})
    assert r.status_code == 422 and "outside the element's 200x50 box" in r.text, r.text
    r = vision_api.post(f"{QA}/verify_user_flow", json={"steps": [at | {"assertion": at["assertion"] | {
        "expected": "100,3"}}]})
    assert r.json()["success"], r.text  # the last drop's point still: the refused drag dropped nothing


def test_an_action_names_one_element_and_an_assertion_says_which_match_it_saw(vision_api, qa_site):
    """Playwright's strict mode for actions; assertions look at the first match and say so."""
    lang = qa_site.url("/lang")
    r = vision_api.post(f"{QA}/verify_user_flow", json={"start_url": lang, "steps": [
        {"action": "click", "selector": ".todo-list li label"}]})
    assert r.status_code == 200 and not r.json()["success"], r.text
    assert "selector '.todo-list li label' matches 2 elements, not one: label \"Buy milk\", label \"Walk the dog\"; " \
           "say which (nth: 0 for the first, -1 for the last)" in r.json()["failure_reason"], r.text
    r = vision_api.post("/api/v1/sessions/itest/page/click", json={"selector": ".toggle"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "ambiguous_element", r.text
    assert 'not one: input.toggle, input.toggle; say which' in r.json()["error"]["message"], r.text

    r = vision_api.post(f"{QA}/verify_user_flow", json={"start_url": lang, "steps": [
        {"action": "assert", "selector": ".todo-list li label", "timeout_ms": 300,
         "assertion": {"type": "has_text", "expected": "Walk the dog"}}]})
    assert "expected text 'Walk the dog'; saw text 'Buy milk' (the first of 2 matches); the closest match: " \
           "'Walk the dog' (match 2 of 2)" in r.json()["failure_reason"], r.text

    r = vision_api.post(f"{QA}/verify_user_flow", json={"start_url": lang, "steps": [
        {"action": "click", "selector": ".todo-list li label", "nth": -1},      # nth says which: no refusal
        {"action": "assert", "label": "Toppings", "assertion": {"type": "has_values", "expected_list": ["ham", "egg"]}},
        {"action": "select", "label": "Toppings", "option": "Olives"},
        {"action": "assert", "label": "Toppings", "assertion": {"type": "has_values", "expected_list": ["olives"]}},
        {"action": "assert", "selector": ".todo-list li", "nth": 1,
         "assertion": {"type": "has_attribute", "attribute": "class", "expected_regex": r"\bcompleted\b"}},
        {"action": "assert", "selector": ".todo-list li", "nth": 0,
         "assertion": {"type": "has_attribute", "attribute": "class", "expected_regex": r"\bcompleted\b",
                       "not": True}},
        {"action": "assert", "selector": "#soon-gone", "assertion": {"type": "has_text", "expected_regex": "^here"}},
        {"action": "assert", "selector": "#ro", "assertion": {"type": "has_value", "expected_regex": "^fix"}},
        {"action": "fill", "placeholder": NEW, "value": "buy"},
        {"action": "type", "placeholder": NEW, "value": " oat milk"},          # at the caret: nothing cleared
        {"action": "assert", "placeholder": NEW, "assertion": {"type": "has_value", "expected": "buy oat milk"}},
        {"action": "blur", "placeholder": NEW},
        {"action": "assert", "placeholder": NEW, "assertion": {"type": "focused", "not": True}},
    ]})
    assert r.status_code == 200 and r.json()["success"], r.text


def test_a_request_the_page_sent_is_waited_for_and_checked_and_its_token_never_shown(vision_api, qa_site):
    token = "t0k3n-of-ada"  # the page's own (tests/fakes/qa_site.py's Sync button)
    sync = {"action": "click", "selector": "#sync"}
    check = {"url_matches": "/api/sync$", "method": "POST", "status": 204,
             "headers": {"Authorization": "Bearer {{token}}", "content-type": "application/json"},
             "body": {"user.name": "ada", "items.1": 2}}
    r = vision_api.post(f"{QA}/verify_user_flow", json={
        "start_url": qa_site.url("/lang"), "secrets": {"token": token},
        "steps": [sync, {"action": "wait_for_request", "request": check}]})
    assert r.status_code == 200 and r.json()["success"], r.text
    seen = r.json()["steps"][1]["detail"]["request"]
    assert seen["status"] == 204 and "authorization: Bearer [REDACTED]" in seen["headers"], seen
    wrong = check | {"headers": {"authorization": "Bearer not-it"}, "body": {"user.name": "bob", "items.5": 1}}
    r = vision_api.post(f"{QA}/verify_user_flow", json={"start_url": qa_site.url("/lang"), "steps": [
        sync, {"action": "wait_for_request", "request": wrong, "timeout_ms": 3000}]})
    assert r.status_code == 200 and not r.json()["success"], r.text
    reason = r.json()["failure_reason"]
    for says in ("header authorization: sent 'Bearer [REDACTED]'", 'body user.name: "ada", expected "bob"',
                 "body items.5: not in the body"):
        assert says in reason, reason
    run = vision_api.get(f"/api/v1/qa/runs/{r.json()['test_run_id']}").text
    assert token not in r.text + run and "not-it" not in reason
    # Each step takes its own request: a second wait for one click waits in vain.
    r = vision_api.post(f"{QA}/verify_user_flow", json={"start_url": qa_site.url("/lang"), "steps": [
        sync, {"action": "wait_for_request", "request": {"url_matches": "/api/sync$"}},
        {"action": "wait_for_request", "request": {"url_matches": "/api/sync$"}, "timeout_ms": 1000}]})
    assert "step 3" in r.json()["failure_reason"] and "no request to //api/sync$/ within 1000 ms" in \
        r.json()["failure_reason"], r.text


def test_test_ids_on_another_attribute_and_a_failing_step_over_rest(vision_api, qa_site):
    flow = {"start_url": qa_site.url("/lang"), "test_id_attribute": "data-qa",
            "steps": [{"action": "assert", "test_id": "row", "within": {"test_id": "list"},
                       "assertion": {"type": "count", "count": 2}},
                      {"action": "assert", "test_id": "row", "nth": 1, "timeout_ms": 500,
                       "assertion": {"type": "has_class", "expected": "completed", "not": True}}]}
    body = vision_api.post(f"{QA}/verify_user_flow", json=flow).json()
    assert body["success"] is False and body["failure_step"] == 2, body
    assert "expected not class 'completed'; saw classes 'todo completed'" in body["failure_reason"]


FAILING = [
    ({"selector": "#nope"}, {"type": "exists"}, "saw 0 matches"),
    ({"selector": "#hidden-one"}, {"type": "visible"}, "saw hidden (not visible)"),
    ({"placeholder": NEW}, {"type": "hidden"}, "saw visible"),
    ({"selector": "#ghost-btn"}, {"type": "enabled"}, "saw disabled"),
    ({"placeholder": NEW}, {"type": "disabled"}, "saw enabled"),
    ({"selector": "#ro"}, {"type": "editable"}, "saw read-only or disabled"),
    ({"placeholder": NEW}, {"type": "focused"}, "saw not focused"),
    ({"label": "done", "nth": 0}, {"type": "checked"}, "saw unchecked"),
    ({"role": "listitem"}, {"type": "count", "count": 5}, "saw 2 matches"),
    ({"selector": "li", "nth": 0}, {"type": "has_class", "expected": "completed"}, "saw classes 'todo'"),
    ({"selector": "li label"}, {"type": "has_text", "expected": "Walk the dog"},
     "saw text 'Buy milk' (the first of 2 matches); the closest match: 'Walk the dog' (match 2 of 2)"),
    ({"selector": "li label"}, {"type": "has_text", "expected_list": ["Buy milk"]},
     "saw 2 matches: ['Buy milk', 'Walk the dog']"),
    ({"selector": "li label"}, {"type": "text_contains", "expected": "cheese"}, "saw text 'Buy milk'"),
    ({"text": "Buy mlik", "exact": True}, {"type": "visible"},
     "saw no element matches; the closest text on the page: 'Buy milk'"),
    ({"selector": "#ro"}, {"type": "has_value", "expected": "other"}, "saw value 'fixed'"),
    ({"selector": "#hoverme"}, {"type": "has_value", "expected": ""}, "saw no value (a <span>, not a form field)"),
    ({"selector": "#close"}, {"type": "has_attribute", "attribute": "href", "expected": "/x"}, "saw href='#/closed'"),
    ({"selector": "li", "nth": 0}, {"type": "has_class", "expected": "todo", "not": True}, "saw classes 'todo'"),
    ({}, {"type": "url", "expected": "http://127.0.0.1/elsewhere"}, "saw URL 'http://127.0.0.1:"),
    ({}, {"type": "url_matches", "expected": "elsewhere$"}, "saw URL 'http://127.0.0.1:"),
    ({}, {"type": "title", "expected": "Todos"}, "saw title 'Todos lang'"),
    ({}, {"type": "title", "expected": "Todos lang", "not": True}, "saw title 'Todos lang'"),
]


def test_each_assertion_fails_saying_what_it_saw_and_a_passing_one_answers_at_once(desk, services, qa_site,
                                                                                   monkeypatch):
    session = services.desktops.session("itest")
    pages, flows = services.desktops.pages, services.qa._flows
    pages.navigate("itest", "goto", qa_site.url("/lang"), "load", 10_000)
    for target, assertion, says in FAILING:
        step = FlowStep.model_validate({"action": "assert", **target, "assertion": assertion})
        with pytest.raises(AssertionFailed) as caught:
            flows.check_assertion(session, step, time.monotonic() + 0.3)
        reason = str(caught.value)
        assert says in reason, (assertion, reason)
        assert "Call log" not in reason and "waiting for" not in reason
    # evaluate, where the server allows it.
    monkeypatch.setattr(pages, "allow_evaluate", True)
    holds = FlowStep.model_validate({"action": "assert", "assertion": {
        "type": "evaluate", "expected": "document.querySelectorAll('.todo-list li').length === 2"}})
    assert flows.check_assertion(session, holds, time.monotonic() + 2)["saw"] == "the expression's value true"
    fails = FlowStep.model_validate({"action": "assert", "assertion": {
        "type": "evaluate", "expected": "document.title === 'x'"}})
    with pytest.raises(AssertionFailed, match="saw the expression's value false"):
        flows.check_assertion(session, fails, time.monotonic() + 0.3)
    # A passing assertion answers once its condition holds, however late (how soon after is a
    # figure of make bench: tests/bench_qa.py, assertion_lags): the class arrives 700 ms after the click.
    arrived = FlowStep.model_validate({"action": "assert", "selector": "#late",
                                       "assertion": {"type": "has_class", "expected": "arrived"}})
    pages.navigate("itest", "reload", None, "load", 10_000)
    pages.click("itest", FlowStep(action="click", selector="#later").dom_target())
    assert "arrived" in flows.check_assertion(session, arrived, time.monotonic() + 5)["saw"]


def test_bad_flows_are_refused_before_anything_runs(vision_api, services, qa_site):
    before = run_ids(services)
    bad = {"start_url": qa_site.url("/lang"), "steps": [
        {"action": "drag", "selector": "#a"},
        {"action": "assert", "role": "buton", "assertion": {"type": "visible"}},
        {"action": "assert", "selector": "li", "assertion": {"type": "count", "count": -1}},
        {"action": "assert", "assertion": {"type": "url_matches", "expected": "("}},
        {"action": "click", "locator": "#x"},
    ]}
    r = vision_api.post(f"{QA}/verify_user_flow", json=bad)
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    for says in ("drag needs `to`", "did you mean 'button'", "greater than or equal to 0",
                 "not a regular expression", "locator"):
        assert says in message, (says, message)
    evaluate = {"start_url": qa_site.url("/lang"), "steps": [
        {"action": "assert", "assertion": {"type": "evaluate", "expected": "true"}}]}
    r = vision_api.post(f"{QA}/verify_user_flow", json=evaluate)
    assert r.status_code == 403 and r.json()["error"]["code"] == "evaluate_disabled", r.text
    script = {"start_url": qa_site.url("/lang"), "steps": [{"action": "evaluate", "expression": "window.x = 1"}]}
    r = vision_api.post(f"{QA}/verify_user_flow", json=script)
    assert r.status_code == 403 and "step(s) 1: an evaluate step or assertion" in r.text, r.text
    r = vision_api.post("/api/v1/sessions/itest/page/check", json={"role": "chekbox", "nth": -3})
    assert r.status_code == 422 and "nth" in r.text, r.text
    r = vision_api.post("/api/v1/sessions/itest/page/press", json={"placeholder": NEW, "keys": ["Entr"]})
    assert r.status_code == 422 and "Entr" in r.text, r.text
    assert run_ids(services) == before
