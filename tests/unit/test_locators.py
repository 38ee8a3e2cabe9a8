"""The flow language without a browser: Playwright's locators as targets (desktop.models.Target,
desktop.browser.locate.locator_for), a flow step's actions and assertions as validated, and the
assertions judged on what an inspection saw (vision.qa.expect)."""

from __future__ import annotations

import base64
import typing

import pytest
from pydantic import ValidationError

from desktop.browser.locate import locator_for
from desktop.models import ROLES, ClickRequest, DragRequest, PressRequest, Target, css_string, target_of
from vision.cli.qa import load_suite, with_files_read
from vision.models.qa import Assertion, FlowStep, VerifyUserFlowRequest, retarget_test_ids
from vision.qa.expect import closest, judge, normalise, wanted


def test_the_roles_are_playwrights_own():
    from playwright.async_api import Page

    assert ROLES == typing.get_type_hints(Page.get_by_role)["role"].__args__


class Recorder:
    """A stand-in page and locator: each call is recorded and returns a locator."""

    def __init__(self, calls=None, path=""):
        self.calls = calls if calls is not None else []
        self.path = path

    def _record(self, method, /, *args, **kwargs):
        self.calls.append((self.path, method, args, {k: v for k, v in kwargs.items() if v is not None}))
        return Recorder(self.calls, f"{self.path}.{method}")

    def __getattr__(self, name):
        if name == "last":
            return self._record("last")
        return lambda *args, **kwargs: self._record(name, *args, **kwargs)


@pytest.mark.parametrize("fields, call", [
    ({"selector": "li"}, ("locator", ("css=li",), {})),
    ({"ref": "e3"}, ("locator", ("aria-ref=e3",), {})),
    ({"label": "Email"}, ("get_by_label", ("Email",), {})),
    ({"text": "Go", "exact": True}, ("get_by_text", ("Go",), {"exact": True})),
    ({"role": "button", "name": "Add"}, ("get_by_role", ("button",), {"name": "Add"})),
    ({"placeholder": "What needs to be done?"}, ("get_by_placeholder", ("What needs to be done?",), {})),
    ({"test_id": "todo-item"}, ("get_by_test_id", ("todo-item",), {})),
    ({"alt": "logo"}, ("get_by_alt_text", ("logo",), {})),
    ({"title": "Close", "exact": True}, ("get_by_title", ("Close",), {"exact": True})),
])
def test_each_kind_is_playwrights_locator(fields, call):
    page = Recorder()
    locator_for(page, Target(**fields))
    assert page.calls == [("", *call)]


def test_modifiers_chain_as_playwright_test_writes_them():
    page = Recorder()
    locator_for(page, Target(role="checkbox", has_text="milk", nth=-1,
                             within={"test_id": "list", "within": {"selector": "main"}}))
    assert [(path, name, args) for path, name, args, _ in page.calls] == [
        ("", "locator", ("css=main",)),
        (".locator", "get_by_test_id", ("list",)),
        (".locator.get_by_test_id", "get_by_role", ("checkbox",)),
        (".locator.get_by_test_id.get_by_role", "filter", ()),
        (".locator.get_by_test_id.get_by_role.filter", "last", ()),
    ]
    page = Recorder()
    locator_for(page, Target(selector="li", nth=2))
    assert page.calls[-1][1:3] == ("nth", (2,))


@pytest.mark.parametrize("fields, says", [
    ({}, "exactly one of selector, ref, label, text, role"),
    ({"role": "button", "test_id": "x"}, "got role, test_id"),
    ({"role": "buton"}, "did you mean 'button'"),
    ({"role": "nonsense-role-x"}, "the roles: alert"),
    ({"selector": "a", "name": "x"}, "give role too"),
    ({"ref": "e1", "nth": 1}, "nth: not with a target by ref"),
    ({"test_id": "a", "exact": True}, "exact: only with"),
    ({"selector": "a", "within": {"role": "lst"}}, "did you mean 'list'"),
])
def test_a_bad_target_says_what_is_wrong(fields, says):
    with pytest.raises(ValidationError, match=says):
        Target(**fields)


def test_every_problem_of_a_target_is_listed_at_once():
    with pytest.raises(ValidationError) as caught:
        Target(role="buton", name="x", ref="e1", nth=0)
    message = str(caught.value)
    assert "got ref, role" in message and "did you mean 'button'" in message
    with pytest.raises(ValidationError, match="greater than or equal to -1"):
        Target(selector="li", nth=-2)


def test_requests_carry_the_new_fields_to_the_page_service():
    click = ClickRequest(role="listitem", has_text="Buy", nth=1, within={"selector": "ul"})
    target = target_of(click)
    assert target == Target(role="listitem", has_text="Buy", nth=1, within=Target(selector="ul"))
    assert target.describe() == "role 'listitem' (has_text 'Buy', nth 1) within selector 'ul'"
    assert DragRequest(selector="#a", to={"text": "Done"}).to.text == "Done"
    assert PressRequest(placeholder="x", keys="Enter").keys == ["Enter"]
    with pytest.raises(ValidationError, match="unknown key"):
        PressRequest(placeholder="x", keys=["Entr"])
    with pytest.raises(ValidationError, match="to"):
        DragRequest(selector="#a")


def test_css_string_and_test_ids_on_another_attribute():
    assert css_string('a"b\\c') == '"a\\"b\\\\c"'
    target = Target(test_id="row", within={"test_id": "list"})
    assert retarget_test_ids(target, "data-testid") is target
    moved = retarget_test_ids(target, "data-qa")
    assert moved.selector == '[data-qa="row"]' and moved.test_id is None
    assert moved.within.selector == '[data-qa="list"]'


# ------------------------------------------------------------------------------ steps

TODO = [
    {"action": "fill", "placeholder": "What needs to be done?", "value": "buy some cheese"},
    {"action": "press", "placeholder": "What needs to be done?", "keys": "Enter"},
    {"action": "dblclick", "role": "listitem", "nth": 1},
    {"action": "assert", "role": "listitem", "assertion": {"type": "count", "count": 3}},
    {"action": "assert", "selector": ".todo-list li", "nth": 0,
     "assertion": {"type": "has_class", "expected": "completed", "not": True}},
    {"action": "reload"}, {"action": "back"}, {"action": "forward"},
    {"action": "hover", "test_id": "x"}, {"action": "check", "role": "checkbox", "name": "done"},
    {"action": "uncheck", "label": "done"}, {"action": "clear", "placeholder": "p"},
    {"action": "drag", "selector": "#a", "to": {"selector": "#b"}}, {"action": "scroll_into_view", "alt": "a"},
    {"action": "upload", "selector": "input", "files": [{"name": "a.txt", "content_base64": "aGk="}]},
    {"action": "wait", "selector": "#gone", "state": "detached"},
    {"action": "assert", "selector": "#v", "assertion": {"type": "has_value", "expected": ""}},
    {"action": "assert", "selector": "li", "assertion": {"type": "has_text", "expected_list": ["a", "b"]}},
    {"action": "assert", "selector": "a", "assertion": {"type": "has_attribute", "attribute": "href"}},
    {"action": "assert", "assertion": {"type": "title", "expected": "Todos"}},
    {"action": "assert", "assertion": {"type": "evaluate", "expected": "1 === 1"}},
    {"action": "drag", "selector": "#a", "position": "top", "to": {"selector": "#b", "position": {"y": 10}}},
    {"action": "evaluate", "expression": "Sortable.get(list1).option('group', null)"},
    {"action": "type", "selector": "#q", "value": " more"}, {"action": "type", "value": "{{password}}"},
    {"action": "blur", "selector": "#q"},
]


def test_the_languages_steps_validate_and_read_as_words():
    steps = [FlowStep.model_validate(step) for step in TODO]
    assert [s.heading() for s in steps][:5] == [
        "fill placeholder 'What needs to be done?' (15 characters)",
        "press Enter on placeholder 'What needs to be done?'",
        "dblclick role 'listitem' (nth 1)",
        "assert count role 'listitem' 3",
        "assert not has_class selector '.todo-list li' (nth 0) 'completed'"]
    check = steps[9]
    assert check.dom_target() == Target(role="checkbox", name="done")  # beside role, name is the element's
    assert check.heading() == "check role checkbox named 'done'"
    named = FlowStep(action="click", selector="#go", name="sign in")
    assert named.heading() == "sign in" and named.dom_target().name is None
    assert steps[4].assertion.negate and steps[4].assertion.kind == "has_class"
    assert FlowStep.model_validate({"action": "assert", "selector": "a", "assertion": {
        "type": "value_equals", "expected": "x"}}).assertion.kind == "has_value"
    assert [s.heading() for s in steps][-5:] == [
        "drag selector '#a' at its top edge to selector '#b' at (middle, 10)",
        "evaluate Sortable.get(list1).option('group', null)",
        "type selector '#q' (5 characters)", "type ({{password}})", "blur selector '#q'"]
    # A secret's length is never told: the placeholder's name, and the plain characters beside it.
    assert FlowStep(action="fill", selector="#pw", value="{{pw}}").heading() == "fill selector '#pw' ({{pw}})"
    assert FlowStep(action="fill", selector="#u", value="id-{{a}}{{ b }}").heading() == \
        "fill selector '#u' (3 characters and {{a}}, {{b}})"
    long = FlowStep(action="evaluate", expression="(() => {\n  " + "x = 1;" * 40 + "\n})()")
    assert long.heading().startswith("evaluate (() => { x = 1;") and long.heading().endswith("…")


def test_a_flow_with_bad_steps_is_refused_with_every_problem():
    bad = [{"action": "drag", "selector": "#a"},
           {"action": "assert", "role": "listitem", "assertion": {"type": "count", "count": -1}},
           {"action": "assert", "selector": "a", "assertion": {"type": "url_matches", "expected": "("}},
           {"action": "click", "selector": "a", "glyph": "x"},
           {"action": "assert", "role": "buton", "assertion": {"type": "visible"}},
           {"action": "wait", "state": "gone", "selector": "a"},
           {"action": "assert", "selector": "a", "assertion": {"type": "has_attribute"}},
           {"action": "check", "x": 1, "y": 2},
           {"action": "reload", "selector": "a"},
           {"action": "click", "selector": "a", "to": {"selector": "b"}},
           {"action": "evaluate"},
           {"action": "click", "selector": "a", "position": "top", "expression": "1"},
           {"action": "drag", "selector": "a", "to": {"selector": "b", "position": "middle"}},
           {"action": "blur"}, {"action": "type", "selector": "a"}, {"action": "type", "x": 3, "y": 4, "value": "v"}]
    with pytest.raises(ValidationError) as caught:
        VerifyUserFlowRequest(start_url="http://127.0.0.1/", steps=bad)
    errors = caught.value.errors()
    where = {e["loc"][1] for e in errors}
    assert where == set(range(len(bad))), errors
    text = str(caught.value)
    for says in ("drag needs `to`", "greater than or equal to 0", "not a regular expression", "glyph",
                 "did you mean 'button'", "'attached', 'detached', 'visible' or 'hidden'", "needs `attribute`",
                 "x,y: this takes a target by", "this takes a target by nothing", "to: only with action drag",
                 "evaluate needs `expression`", "position: only with action drag",
                 "expression: only with action evaluate", "'center', 'top', 'bottom', 'left' or 'right'",
                 "type needs `value`"):
        assert says in text, (says, text)


@pytest.mark.parametrize("assertion, says", [
    ({"type": "count"}, "needs `count`"),
    ({"type": "has_text", "expected": "a", "expected_list": ["a"]}, "one of `expected`, `expected_list` or `ex"),
    ({"type": "visible", "expected": "x"}, "takes none"),
    ({"type": "has_class"}, "needs `expected`"),
    ({"type": "url", "count": 1}, "only with assertion count"),
    ({"type": "visual_matches", "baseline_id": "b", "not": True}, "cannot be negated"),
    ({"type": "exists", "attribute": "x"}, "only with assertion has_attribute"),
    ({"type": "has_text", "expected": "a", "expected_regex": "a"}, r"\(not expected and expected_regex\)"),
    ({"type": "has_value", "expected": "a", "expected_regex": "a"}, "`expected` or `expected_regex`, not both"),
    ({"type": "has_class", "expected_regex": "a"}, "expected_regex: only with has_text"),
    ({"type": "has_attribute", "attribute": "href", "expected_regex": "("}, "not a regular expression"),
    ({"type": "has_value"}, "needs `expected` or `expected_regex`"),
    ({"type": "has_values"}, "has_values needs `expected_list`"),
    ({"type": "has_value", "expected_list": ["a"]}, "expected_list: only with has_text, contains_text or has_values"),
])
def test_a_bad_assertion_says_what_is_wrong(assertion, says):
    with pytest.raises(ValidationError, match=says):
        Assertion.model_validate(assertion)


# ------------------------------------------------------------------------------ judging


def seen(*elements, count=None, **states):
    filled = [{"text": "", "value": None, "classes": [], "focused": False, "tag": "li", "attribute": None, **e}
              for e in elements]
    return {"count": len(filled) if count is None else count, "elements": filled, "states": states}


def a(kind, **fields):
    return Assertion.model_validate({"type": kind, **fields})


@pytest.mark.parametrize("assertion, saw, holds, words", [
    (a("count", count=2), seen({}, {}), True, "2 matches"),
    (a("count", count=3), seen({}), False, "1 match"),
    (a("exists"), seen(), False, "0 matches"),
    (a("hidden"), seen(), True, "no match"),
    (a("hidden"), seen({}, visible=True), False, "visible"),
    (a("visible"), seen({}, visible=False), False, "hidden (not visible)"),
    (a("enabled"), seen({}, enabled=False), False, "disabled"),
    (a("disabled"), seen({}, enabled=False), True, "disabled"),
    (a("editable"), seen({"tag": "div"}, editable=None), False, "not editable (a <div>)"),
    (a("checked"), seen({}, checked=False), False, "unchecked"),
    (a("checked"), seen({"tag": "p"}, checked=None), False, "no checked state (a <p>)"),
    (a("focused"), seen({"focused": True}), True, "focused"),
    (a("has_class", expected="completed"), seen({"classes": ["todo", "completed"]}), True, "classes 'todo completed'"),
    (a("has_class", expected="done"), seen({"classes": []}), False, "no class"),
    (a("has_text", expected="Buy  milk "), seen({"text": "\n Buy milk"}), True, "text 'Buy milk'"),
    (a("has_text", expected="Buy"), seen({"text": "Buy milk"}), False, "text 'Buy milk'"),
    (a("contains_text", expected="milk"), seen({"text": "Buy milk"}), True, "text 'Buy milk'"),
    (a("has_text", expected_list=["a", "b"]), seen({"text": "a"}, {"text": " b"}), True, "2 matches: ['a', 'b']"),
    (a("has_text", expected_list=["a", "b"]), seen({"text": "b"}, {"text": "a"}), False, "2 matches: ['b', 'a']"),
    (a("contains_text", expected_list=["a", "c"]), seen({"text": "xa"}, {"text": "b"}, {"text": "cc"}), True,
     "3 matches"),
    (a("has_value", expected=""), seen({"value": ""}), True, "value ''"),
    (a("has_value", expected="x"), seen({"tag": "div"}), False, "no value (a <div>, not a form field)"),
    (a("has_attribute", attribute="href"), seen({"attribute": "/x"}), True, "href='/x'"),
    (a("has_attribute", attribute="href", expected="/y"), seen({"attribute": "/x"}), False, "href='/x'"),
    (a("has_attribute", attribute="href"), seen({}), False, "no attribute href"),
    (a("has_class", expected="x"), seen(), False, "no element matches"),
    (a("has_text", expected="200"), seen({"text": "Code"}, {"text": "200"}), False, "text 'Code' (the first of 2 "
                                                                                  "matches)"),
    (a("visible"), seen({}, {}, {}, visible=True), True, "visible (the first of 3 matches)"),
    (a("has_text", expected_regex=r"^Item \d\.1$"), seen({"text": " Item  2.1"}), True, "text 'Item 2.1'"),
    (a("contains_text", expected_regex="[0-9]+ items? left"), seen({"text": "3 item left"}), True, "text"),
    (a("has_value", expected_regex="@example\\.org$"), seen({"value": "a@example.com"}), False, "value"),
    (a("has_attribute", attribute="class", expected_regex=r"\bselected\b"), seen({"attribute": "tab selected"}),
     True, "class='tab selected'"),
    (a("has_attribute", attribute="class", expected_regex="x"), seen({}), False, "no attribute class"),
    (a("has_values", expected_list=["ham", "olives"]), seen({"values": ["ham", "olives"]}), True, "values ['ham'"),
    (a("has_values", expected_list=["ham"]), seen({"values": ["ham", "olives"]}), False, "values ['ham', 'olives']"),
    (a("has_values", expected_list=[]), seen({"tag": "input"}), False, "no selected values (a <input>, not a select)"),
])
def test_judge_says_whether_it_holds_and_what_was_seen(assertion, saw, holds, words):
    held, said = judge(assertion, saw)
    assert held is holds and words in said, said


def test_wanted_and_closest():
    assert wanted(a("has_class", expected="completed", **{"not": True})) == "not class 'completed'"
    assert wanted(a("count", count=3)) == "count 3"
    assert wanted(a("has_attribute", attribute="href", expected_regex="^/x")) == "attribute href matching /^/x/"
    assert wanted(a("has_text", expected_regex="a+", **{"not": True})) == "not text matching /a+/"
    assert closest("Buy milk", ["Buy milc", "Walk the dog"]) == "Buy milc"
    assert closest("Buy milk", ["something else entirely"]) is None
    assert normalise("  a \n b ") == "a b"


# ------------------------------------------------------------------------------ suites


def test_a_suite_reads_upload_paths_and_sets_the_test_id_attribute(tmp_path):
    (tmp_path / "hello.txt").write_bytes(b"hi")
    body, problems = with_files_read({"steps": [{"action": "upload", "selector": "input",
                                                 "files": ["hello.txt", "missing.txt"]}]}, tmp_path)
    assert body["steps"][0]["files"][0] == {"name": "hello.txt", "content_base64": base64.b64encode(b"hi").decode()}
    assert problems and "missing.txt" in problems[0]
    suite = tmp_path / "suite.yaml"
    suite.write_text("test_id_attribute: data-qa\ntests:\n  - name: t\n    verify_user_flow:\n"
                     "      start_url: http://127.0.0.1/\n      steps:\n"
                     "        - {action: upload, selector: input, files: [hello.txt]}\n")
    loaded = load_suite(suite)
    assert loaded.tests[0].body["test_id_attribute"] == "data-qa"
    assert loaded.tests[0].body["steps"][0]["files"][0]["name"] == "hello.txt"


def test_the_language_references_examples_are_valid_steps():
    """docs/qa.md's example of each locator, action and assertion is a step the model takes."""
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).parents[2] / "docs" / "qa.md").read_text()
    section = doc[doc.index("## Flow steps"):doc.index("## Visual baselines")]
    examples = [line for block in re.findall(r"```yaml\n(.*?)```", section, re.S) for line in block.splitlines()
                if line.startswith("- {")]
    steps = [yaml.safe_load(line)[0] for line in examples]
    assert len(steps) > 40
    for step in steps:
        if step["action"] == "upload":  # a suite's paths, read by glassdesk qa before validation
            step["files"] = [{"name": "a.txt", "content_base64": "aGk="}]
        if step.get("image"):
            continue  # a placeholder, not a PNG
        FlowStep.model_validate(step)
    kinds = {step["assertion"]["type"] for step in steps if step["action"] == "assert"}
    actions = {step["action"] for step in steps}
    assert kinds == set(Assertion.model_fields["type"].annotation.__args__) - {"text_contains", "value_equals"}
    assert actions == set(FlowStep.model_fields["action"].annotation.__args__)
