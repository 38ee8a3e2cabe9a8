"""Runs made into tests (vision/evidence/export.py) and the Playwright code of locators and actions
(desktop/codegen.py), from records built here: no X, no browser."""

from __future__ import annotations

import ast
from datetime import UTC, datetime

import pytest
import yaml

from desktop.browser.hit import css_ident, rank_locators
from desktop.codegen import action_code, answer_code, locator, pw_key
from desktop.models import ElementAt, Target
from vision.cli.qa import REQUESTS
from vision.evidence.export import ExportError, Op, _op_code, export_qa_run, export_trace, flow_of_trace, secret_env
from vision.trace.records import ErrorInfo, StepRecord, Trace, TraceMeta

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ORIGIN = (0, 87)  # where the viewport is on the display in these records


def element(x, y, role, name, *locators, tag="input", url="http://127.0.0.1:8000/signup") -> ElementAt:
    return ElementAt(x=x, y=y, css_x=x - ORIGIN[0], css_y=y - ORIGIN[1], tag=tag, role=role, name=name,
                     box={"x": x - 10, "y": y - 10, "width": 20, "height": 20}, locators=list(locators), url=url)


def step(index, actions, elements=(), url=None, text="") -> StepRecord:
    return StepRecord(index=index, started_at=NOW, finished_at=NOW, actions=actions, elements=list(elements),
                      url=url, text=text)


def signup_trace() -> Trace:
    email = element(300, 200, "textbox", "Email", Target(role="textbox", name="Email", exact=True),
                    Target(label="Email", exact=True), Target(selector="#email"))
    pw = element(300, 260, "textbox", "Password", Target(role="textbox", name="Password", exact=True),
                 Target(placeholder="Password", exact=True))
    create = element(200, 380, "button", "Create account", Target(role="button", name="Create account", exact=True),
                     tag="button")
    canvas = element(1000, 200, None, None, Target(selector="#pad"), tag="canvas")
    url = "http://127.0.0.1:8000/signup"
    DONE_URL = "http://127.0.0.1:8000/signed-up?email=ada"
    return Trace(meta=TraceMeta(trace_id="20260101T000000Z-abcd1234", instruction="sign up as ada", model="scripted",
                                started_at=NOW, status="done"),
                 steps=[step(1, [{"action": "click", "x": 300, "y": 200}], [email], url, "the email field"),
                        step(2, [{"action": "type", "text": "ada@example.com"}], [None], url),
                        step(3, [{"action": "click", "x": 300, "y": 260}], [pw], url),
                        step(4, [{"action": "type", "text": "{{pw}}"}], [None], url),
                        step(5, [{"action": "click", "x": 1000, "y": 200}], [canvas], url),
                        step(6, [{"action": "click", "x": 5, "y": 5}], [None], url),
                        step(7, [{"action": "scroll", "x": 500, "y": 500, "direction": "down", "amount": 2}], [None],
                             url),
                        step(8, [{"action": "click", "x": 200, "y": 380}], [create], DONE_URL),
                        step(9, [{"action": "done", "answer": "ok"}], [], DONE_URL)])


# ------------------------------------------------------------------------------------ locators


def test_rank_locators_puts_what_a_user_perceives_first_and_css_last():
    info = {"tag": "button", "role": "button", "name": "Cancel sign-up", "text": "x", "test_id": "cancel-btn",
            "id": "c1", "css": "form > p:nth-of-type(4) > button"}
    assert [t.describe() for t in rank_locators(info)] == [
        "role button named 'Cancel sign-up' (exact)", "test_id 'cancel-btn'", "text 'x' (exact)",
        "selector '#c1'", "selector 'form > p:nth-of-type(4) > button'"]


def test_rank_locators_skips_what_cannot_name_an_element():
    info = {"tag": "input", "role": "textbox", "name": None, "text": None, "label": None,
            "placeholder": "Password", "css": "#pw"}
    assert [t.describe() for t in rank_locators(info)] == [
        "placeholder 'Password' (exact)", "role 'textbox'", "selector '#pw'"]
    # a role Playwright does not know is no candidate; a paragraph is not a text locator
    assert rank_locators({"tag": "x-widget", "role": "widgetish", "name": "W", "text": "a" * 200}) == []


def test_css_ident_escapes_what_css_would_misread():
    assert css_ident("email") == "email"
    assert css_ident("1st") == "\\31 st"
    assert css_ident("a.b:c") == "a\\.b\\:c"


# ---------------------------------------------------------------------------------------- codegen


@pytest.mark.parametrize("target, ts, py", [
    (Target(role="button", name="Save", exact=True), 'page.getByRole("button", { name: "Save", exact: true })',
     "page.get_by_role('button', name='Save', exact=True)"),
    (Target(test_id="cancel-btn"), 'page.getByTestId("cancel-btn")', "page.get_by_test_id('cancel-btn')"),
    (Target(label="Email"), 'page.getByLabel("Email")', "page.get_by_label('Email')"),
    (Target(selector="#a", nth=-1), 'page.locator("#a").last()', "page.locator('#a').last"),
    (Target(role="listitem", has_text="milk", within=Target(selector="ul")),
     'page.locator("ul").getByRole("listitem").filter({ hasText: "milk" })',
     "page.locator('ul').get_by_role('listitem').filter(has_text='milk')"),
])
def test_locators_are_spelled_as_playwright_writes_them(target, ts, py):
    assert locator(target, "ts") == ts
    assert locator(target, "py") == py
    ast.parse(py)  # valid Python


def test_every_action_answers_with_playwright_code():
    save = element(200, 380, "button", "Save", Target(role="button", name="Save", exact=True), tag="button")
    assert answer_code({"action": "click", "x": 200, "y": 380}, save) == \
        'await page.getByRole("button", { name: "Save", exact: true }).click();'
    assert answer_code({"action": "click", "x": 200, "y": 380, "button": "right", "modifiers": ["ctrl"]}, save) == \
        'await page.getByRole("button", { name: "Save", exact: true }).click({ button: "right", ' \
        'modifiers: ["Control"] });'
    # no element: the display pixel, said so
    assert answer_code({"action": "click", "x": 5, "y": 6}, None).splitlines() == [
        "// no page element recorded: a display pixel, as recorded (the page's own pixel was not known)",
        "await page.mouse.click(5, 6);"]
    # an element without a locator (a canvas's point): page.mouse at the page's own pixel
    canvas = element(1000, 200, None, None, tag="canvas")
    assert answer_code({"action": "double_click", "x": 1000, "y": 200}, canvas) == \
        "await page.mouse.click(1000, 113, { clickCount: 2 });"
    assert answer_code({"action": "key", "keys": ["ctrl+a", "Return"]}, None) == \
        'await page.keyboard.press("Control+a");\nawait page.keyboard.press("Enter");'
    assert action_code({"action": "scroll", "x": 500, "y": 500, "direction": "up", "amount": 2}, canvas, "py") == [
        "page.mouse.move(500, 413)", "page.mouse.wheel(0, -200)"]
    assert pw_key("shift+Tab") == "Shift+Tab"


# ------------------------------------------------------------------------------------------ export


def test_a_trace_exports_as_a_suite_glassdesk_qa_accepts():
    text = export_trace(signup_trace(), "yaml")
    suite = yaml.safe_load(text)
    test = suite["tests"][0]
    assert test["name"] == "sign up as ada"
    flow = test["verify_user_flow"]
    REQUESTS["verify_user_flow"].model_validate(flow)  # the QA language takes every step as it is
    assert flow["start_url"] == "http://127.0.0.1:8000/signup"
    steps = flow["steps"]
    # what a replay heals from: the element's role, name, other locators and pixel
    # (and its box, drawn in a heal's images; and the step's words, for a model asked to re-target it)
    assert steps[0].pop("recorded") == {"role": "textbox", "name": "Email", "x": 300, "y": 200,
                                        "locators": [{"label": "Email", "exact": True}, {"selector": "#email"}],
                                        "box": {"x": 290, "y": 190, "width": 20, "height": 20},
                                        "instruction": "sign up as ada (this step: the email field)"}
    assert steps[1].pop("recorded")["locators"] == [{"placeholder": "Password", "exact": True}]
    assert steps[2].pop("recorded") == {"x": 1000, "y": 200, "box": {"x": 990, "y": 190, "width": 20, "height": 20},
                                        "instruction": "sign up as ada"}
    # the URL changed after the click: the effect a healed replay of it must still have
    assert steps[5].pop("recorded") == {"role": "button", "name": "Create account", "x": 200, "y": 380,
                                        "box": {"x": 190, "y": 370, "width": 20, "height": 20},
                                        "instruction": "sign up as ada",
                                        "url_after": "http://127.0.0.1:8000/signed-up?email=ada"}
    assert steps[0] == {"action": "fill", "role": "textbox", "name": "Email", "exact": True,
                        "value": "ada@example.com"}
    assert steps[1] == {"action": "fill", "role": "textbox", "name": "Password", "exact": True, "value": "{{pw}}"}
    assert steps[2] == {"action": "click", "selector": "#pad"}                 # the canvas: its locator
    assert steps[3] == {"action": "click", "x": 5, "y": 5}                     # nothing recorded: the pixel
    assert steps[4]["action"] == "act" and steps[4]["model"] == "scripted"     # a scroll: replayed as recorded
    assert steps[5] == {"action": "click", "role": "button", "name": "Create account", "exact": True}
    assert steps[6] == {"action": "assert", "assertion": {"type": "url",
                                                          "expected": "http://127.0.0.1:8000/signed-up?email=ada"}}
    assert len(steps) == 7  # done replays nothing
    # the evidence, as comments: the trace, its step, the pixel and the other locators
    assert "# trace 20260101T000000Z-abcd1234 step 1: the email field" in text
    assert "also: label 'Email' (exact), selector '#email'" in text


def test_a_trace_exports_as_playwright_specs():
    ts = export_trace(signup_trace(), "playwright-ts")
    assert "import { test, expect } from '@playwright/test';" in ts
    assert 'test("sign up as ada", async ({ page }) => {' in ts
    assert 'await page.getByRole("textbox", { name: "Email", exact: true }).fill("ada@example.com");' in ts
    assert 'fill((process.env.GLASSDESK_SECRET_PW ?? ""));' in ts
    assert 'await page.locator("#pad").click();' in ts
    assert "await page.mouse.click(5, 5);" in ts and "no page element recorded" in ts
    assert "await page.mouse.wheel(0, 200);" in ts
    assert 'await expect(page).toHaveURL("http://127.0.0.1:8000/signed-up?email=ada");' in ts
    assert "// trace 20260101T000000Z-abcd1234 step 8" in ts
    py = export_trace(signup_trace(), "playwright-py")
    ast.parse(py)
    assert "def test_sign_up_as_ada(page: Page) -> None:" in py
    assert "page.get_by_role('textbox', name='Email', exact=True).fill('ada@example.com')" in py
    assert 'fill(os.environ.get("GLASSDESK_SECRET_PW", ""))' in py
    assert "expect(page).to_have_url('http://127.0.0.1:8000/signed-up?email=ada')" in py


def test_this_rounds_steps_and_assertions_export_as_playwright_says_them():
    def code(step: dict, lang: str = "ts") -> list[str]:
        return _op_code(Op(step), lang)

    drag = {"action": "drag", "selector": "#a", "position": {"x": 3, "y": 0},
            "to": {"selector": "#b", "position": {"x": 10, "y": 12.5}}}
    assert code(drag) == ['await page.locator("#a").dragTo(page.locator("#b"), { sourcePosition: { x: 3, y: 0 }, '
                          'targetPosition: { x: 10, y: 12.5 } });']
    assert code(drag, "py") == ["page.locator('#a').drag_to(page.locator('#b'), source_position={\"x\": 3, \"y\": 0}, "
                                'target_position={"x": 10, "y": 12.5})']
    centred = {"action": "drag", "selector": "#a", "to": {"selector": "#b", "position": "center"}}
    assert code(centred) == ['await page.locator("#a").dragTo(page.locator("#b"));']
    for edge in ("top", {"y": 3}):  # a point Playwright cannot be told without the element's size
        assert "not exported: a drag to an edge" in code(centred | {"to": {"selector": "#b", "position": edge}})[0]
    assert code({"action": "evaluate", "expression": "window.x = 1"}) == ['await page.evaluate("window.x = 1");']
    assert code({"action": "type", "selector": "#q", "value": " more"}) == \
        ['await page.locator("#q").pressSequentially(" more");']
    assert code({"action": "type", "value": "x"}, "py") == ["page.keyboard.type('x')"]
    assert code({"action": "blur", "selector": "#q"}) == ['await page.locator("#q").blur();']
    assert code({"action": "wait_for_request", "request": {"url_matches": "x"}}) == [
        "// not exported: wait_for_request (glassdesk-only: a flow looks back at what was sent)"]

    def expect(assertion: dict, lang: str = "ts") -> str:
        [line] = code({"action": "assert", "selector": "#s", "assertion": assertion}, lang)
        return line

    assert expect({"type": "has_text", "expected_regex": "^a+$"}) == \
        'await expect(page.locator("#s")).toHaveText(new RegExp("^a+$"));'
    assert expect({"type": "has_attribute", "attribute": "class", "expected_regex": "on"}, "py") == \
        "expect(page.locator('#s')).to_have_attribute('class', re.compile('on'))"
    assert expect({"type": "has_values", "expected_list": ["a", "b"]}) == \
        'await expect(page.locator("#s")).toHaveValues(["a", "b"]);'
    assert expect({"type": "has_value", "expected": ""}) == 'await expect(page.locator("#s")).toHaveValue("");'


def test_no_secret_value_reaches_an_export():
    """The trace holds placeholders (the loop records the model's text, the writer redacts values);
    an export writes placeholders and environment variables, and a value redacted before stays so."""
    trace = signup_trace()
    trace.steps[1].actions[0]["text"] = "[REDACTED]"
    for fmt in ("yaml", "playwright-ts", "playwright-py"):
        out = export_trace(trace, fmt)
        assert "{{pw}}" in out or "GLASSDESK_SECRET_PW" in out
        assert "right-horse-battery" not in out
    assert secret_env("api-key") == "GLASSDESK_SECRET_API_KEY"


def test_what_cannot_be_exported_is_a_typed_error():
    empty = Trace(meta=TraceMeta(trace_id="t", instruction="x", model="m", started_at=NOW), steps=[
        step(1, [{"action": "done"}])])
    with pytest.raises(ExportError, match="no action"):
        flow_of_trace(empty)
    with pytest.raises(ExportError, match="one of yaml"):
        export_trace(signup_trace(), "selenium")
    with pytest.raises(ExportError, match="verify_page_loads"):
        export_qa_run([{"kind": "started", "test_run_id": "r", "verb": "verify_page_loads", "request": {}}], "yaml")


def test_a_qa_run_exports_its_flow_with_the_elements_its_steps_found():
    button = element(200, 380, "button", "Sign in", Target(role="button", name="Sign in", exact=True), tag="button")
    records = [
        {"kind": "started", "test_run_id": "run1", "verb": "verify_user_flow", "name": "login works",
         "request": {"start_url": "http://127.0.0.1:8000/login", "secrets": {"pw": "[REDACTED]"},
                     "steps": [{"action": "fill", "label": "User", "value": "ada"},
                               {"action": "fill", "selector": "#pw", "value": "{{pw}}"},
                               {"action": "click", "x": 200, "y": 380},
                               {"action": "assert", "role": "heading", "assertion": {"type": "has_text",
                                                                                     "expected": "Welcome"}}]}},
        {"kind": "case", "steps": [{"index": 3, "detail": {"element": button.model_dump(mode="json")}}]},
    ]
    suite = yaml.safe_load(export_qa_run(records, "yaml"))
    steps = suite["tests"][0]["verify_user_flow"]["steps"]
    assert steps[0] == {"action": "fill", "label": "User", "value": "ada"}
    assert steps[1] == {"action": "fill", "selector": "#pw", "value": "{{pw}}"}  # no element recorded: as asked
    assert steps[2] == {"action": "click", "x": 200, "y": 380}  # a pixel step keeps its pixel
    ts = export_qa_run(records, "playwright-ts")
    assert 'await page.getByLabel("User").fill("ada");' in ts
    assert 'await page.locator("#pw").fill((process.env.GLASSDESK_SECRET_PW ?? ""));' in ts
    assert 'await page.getByRole("button", { name: "Sign in", exact: true }).click();' in ts  # the pixel's element
    assert 'await expect(page.getByRole("heading")).toHaveText("Welcome");' in ts
    assert "[REDACTED]" not in ts


# ------------------------------------------------------------------------------------------ heals


@pytest.mark.parametrize("seen, recorded, heals", [
    ("E-mail", "Email", True), ("Create an account", "Create account", True), ("Sign-in", "Sign in", True),
    ("Your password", "Password", True), ("Delete account", "Create account", False),
    ("Don't save", "Save", False), ("Cancel", "Create account", False),
])
def test_a_heal_takes_a_reworded_name_never_another_meaning(seen, recorded, heals):
    from vision.qa.healing import similar_names

    assert similar_names(seen, recorded) is heals


def test_a_heal_never_lands_on_another_role():
    from vision.models.qa import Recorded
    from vision.qa.healing import closest_name, same_element_kind

    rec = Recorded(role="button", name="Create account")
    assert same_element_kind(element(1, 100, "button", "Create an account", tag="button"), rec)
    assert not same_element_kind(element(1, 100, "link", "Create account", tag="a"), rec)
    assert not same_element_kind(element(1, 100, "button", "Delete account", tag="button"), rec)
    assert not same_element_kind(None, rec)
    snapshot = '- main:\n  - link "Create account" [ref=e2]\n  - button "Create an account" [ref=e3]\n' \
               '  - button "Cancel" [ref=e4]'
    assert closest_name(snapshot, "button", "Create account") == "Create an account"
    assert closest_name(snapshot, "button", "Delete everything") is None


def test_a_url_typed_into_the_address_bar_is_one_navigate():
    """How a model opens a page (the OCR model's `open`: ctrl+l, the URL, Enter) replays as a navigate."""
    page = "http://127.0.0.1:8000/login.html"
    user = element(400, 230, "textbox", "User", Target(role="textbox", name="User", exact=True), url=page)
    trace = Trace(meta=TraceMeta(trace_id="t1", instruction="open then type", model="ocr", started_at=NOW), steps=[
        step(1, [{"action": "key", "keys": ["ctrl+l"]}, {"action": "type", "text": "127.0.0.1:8000/login.html"},
                 {"action": "key", "keys": ["enter"]}], [None, None, None], page),
        step(2, [{"action": "click", "x": 400, "y": 230}, {"action": "type", "text": "ada"}], [user, None], page)])
    steps = yaml.safe_load(export_trace(trace, "yaml"))["tests"][0]["verify_user_flow"]["steps"]
    assert steps[0] == {"action": "navigate", "url": page}
    assert "start_url" not in yaml.safe_load(export_trace(trace, "yaml"))["tests"][0]["verify_user_flow"]
    assert steps[1]["action"] == "fill" and steps[1]["value"] == "ada"
    assert len(steps) == 2
    assert 'await page.goto("http://127.0.0.1:8000/login.html");' in export_trace(trace, "playwright-ts")


def test_a_persons_clicks_export_on_their_elements_and_a_canvas_point_stays_a_point():
    """A take-over's steps (by: operator) carry the elements read under the person's clicks: they
    export as locators, said to be a person's; a click on a canvas with its spot is the point on it,
    in the suite and in both specs (the canvas's locator would click its centre)."""
    from vision.trace.records import Spot

    email = element(300, 200, "textbox", "Email", Target(role="textbox", name="Email", exact=True))
    canvas = element(1000, 200, None, None, Target(selector="#pad"), tag="canvas")
    start = Spot(text="START", text_box=[980, 190, 1040, 210], image="iVBORw0KGgo=")
    steps = [step(1, [{"action": "click", "x": 300, "y": 200, "button": "left"}], [email]),
             step(2, [{"action": "type", "text": "ada"}]),
             step(3, [{"action": "click", "x": 1010, "y": 205, "button": "left"}], [canvas]),
             step(4, [{"action": "click", "x": 5, "y": 5, "button": "left"}])]  # not known for sure: none
    steps[2].spots = [start]
    for s in steps:
        s.by = "operator"
    trace = Trace(meta=TraceMeta(trace_id="20260101T000000Z-abcd1234", instruction="with help", model="scripted",
                                 started_at=NOW, status="done"), steps=steps)
    text = export_trace(trace, "yaml")
    flow = yaml.safe_load(text)["tests"][0]["verify_user_flow"]["steps"]
    assert [(s["action"], s.get("role"), s.get("x")) for s in flow] == [
        ("fill", "textbox", None), ("click", None, 1010), ("click", None, 5)]
    assert flow[1]["recorded"]["text"] == "START"
    assert text.count("done by a person (the operator, during a take-over), not by the agent") == 3
    ts, py = export_trace(trace, "playwright-ts"), export_trace(trace, "playwright-py")
    assert 'await page.getByRole("textbox", { name: "Email", exact: true }).fill("ada");' in ts
    # the canvas's point, in the page's own pixels (the viewport is at ORIGIN on the display)
    assert f"await page.mouse.click(1010, {205 - ORIGIN[1]});" in ts and "#pad" not in ts
    assert f"page.mouse.click(1010, {205 - ORIGIN[1]})" in py and "#pad" not in py
    assert "page.mouse.click(5, 5)" in py and "done by a person" in py


def test_a_runs_expectations_become_the_tests_last_assertions_and_a_run_without_says_nothing_was_verified():
    trace = signup_trace()
    expect = [{"assertion": {"type": "has_text", "expected": "Welcome, ada"}, "selector": "h1"},
              {"assertion": {"type": "url_matches", "expected": "signed-up"}, "timeout_ms": 2000}]
    trace.meta = trace.meta.model_copy(update={"expect": expect, "verified": True, "checks": [
        {"check": "assert has_text selector 'h1' 'Welcome, ada'", "passed": True, "saw": "1 match", "duration_ms": 4},
        {"check": "assert url_matches 'signed-up'", "passed": True, "saw": "URL 'x'", "duration_ms": 1}]})
    text = export_trace(trace, "yaml")
    steps = yaml.safe_load(text)["tests"][0]["verify_user_flow"]["steps"]
    assert steps[-2:] == [{"action": "assert", **e} for e in expect]
    assert "# expect 1 of trace 20260101T000000Z-abcd1234: held in the run: 1 match" in text
    assert "UNVERIFIED" not in text
    ts = export_trace(trace, "playwright-ts")
    assert 'await expect(page.locator("h1")).toHaveText("Welcome, ada");' in ts
    assert 'await expect(page).toHaveURL(new RegExp("signed-up"));' in ts
    unchecked = export_trace(signup_trace(), "playwright-py")
    assert "# UNVERIFIED: trace 20260101T000000Z-abcd1234 carried no expectation" in unchecked.splitlines()[2]


def test_a_type_refused_as_typed_into_nothing_is_not_replayed():
    trace = signup_trace()
    refused = trace.steps[1].model_copy(update={"error": ErrorInfo(code="typed_into_nothing", message="nothing was "
                                                                   "typed: the keyboard focus is on the page itself")})
    trace.steps[1] = refused
    steps = yaml.safe_load(export_trace(trace, "yaml"))["tests"][0]["verify_user_flow"]["steps"]
    assert not any(s.get("value") == "ada@example.com" for s in steps)  # neither a fill nor a type of its text


def test_a_step_that_changed_nothing_proposes_no_assertion():
    trace = signup_trace()
    last = len(trace.steps) - 2  # the click that went to /signed-up
    assert trace.steps[last].url != trace.steps[last - 1].url
    flagged = trace.steps[last].model_copy(update={"no_effect": True, "appeared": ["Welcome, ada"]})
    trace.steps[last] = flagged
    steps = yaml.safe_load(export_trace(trace, "yaml"))["tests"][0]["verify_user_flow"]["steps"]
    assert not any(s["action"] == "assert" for s in steps), steps


def test_clicks_on_native_controls_export_by_program_role_and_name_and_typing_into_one_is_typed_into_it():
    """A native window's control read under a click (the trace's natives) is the step's structural
    target, with what OCR read there for a heal; a bare container, or no program, stays a pixel; a
    click on an editable control then typing is one type step into it; Playwright says it cannot."""
    from desktop.models import NativeElement
    from vision.trace.records import Spot

    seven = NativeElement(ref="n57", role="toggle button", name="7", application="galculator",
                          states=["enabled", "showing"])
    text = NativeElement(ref="n80", role="text", application="mousepad", states=["editable", "focused", "showing"])
    panel = NativeElement(ref="n2", role="panel", application="galculator")
    nameless = NativeElement(ref="n9", role="push button", name="Quit")  # no program said: not findable by it
    steps = [step(1, [{"action": "click", "x": 830, "y": 566}], url="about:blank"),  # the tab behind the windows
             step(2, [{"action": "click", "x": 700, "y": 500},
                                                                         {"action": "type", "text": "Dear Ada"}]),
             step(3, [{"action": "click", "x": 10, "y": 10}]), step(4, [{"action": "click", "x": 20, "y": 20}])]
    steps[0].natives, steps[0].spots = [seven], [Spot(text="7", text_box=[825, 558, 835, 574])]
    steps[1].natives = [text, None]
    steps[2].natives, steps[3].natives = [panel], [nameless]
    trace = Trace(meta=TraceMeta(trace_id="20260101T000000Z-abcd1234", instruction="native", model="scripted",
                                 started_at=NOW, status="done"), steps=steps)
    suite = yaml.safe_load(export_trace(trace, "yaml"))
    # native windows only: no page to start on, and the browser behind them is not cleared (brought in front)
    assert suite["tests"][0]["keep_state"] is True and "start_url" not in suite["tests"][0]["verify_user_flow"]
    flow = suite["tests"][0]["verify_user_flow"]["steps"]
    assert flow[0] == {"action": "click", "native": {"app": "galculator", "role": "toggle button", "name": "7",
                                                     "exact": True},
                       "recorded": {"x": 830, "y": 566, "text": "7", "text_box": [825, 558, 835, 574],
                                    "instruction": "native"}}
    assert flow[1] == {"action": "type", "native": {"app": "mousepad", "role": "text"}, "value": "Dear Ada"}
    assert [(s["action"], s.get("x")) for s in flow[2:]] == [("click", 10), ("click", 20)]
    assert "not exported: click on a native window" in export_trace(trace, "playwright-ts")
    REQUESTS["verify_user_flow"].model_validate(yaml.safe_load(export_trace(trace, "yaml"))["tests"][0]
                                                ["verify_user_flow"])
