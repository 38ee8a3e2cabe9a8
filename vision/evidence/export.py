"""A run made into a test: a vision trace or a QA run exported as a ``glassdesk qa`` suite (YAML), a
Playwright Test spec in TypeScript (``@playwright/test``) or Python (pytest-playwright).

Pure functions of the records (no X, no browser, no server): ``export_trace(trace, fmt)`` and
``export_qa_run(records, fmt)``. Both first turn the run into flow steps (``vision.models.qa.FlowStep``
dicts, the QA language), each with the evidence it came from (``Op``); the three renderers read
those. So the YAML replays with ``glassdesk qa`` exactly what the specs do with Playwright.

From a trace, each pointer action becomes a step on its recorded element, named by the first of its
verified locators (desktop.browser.hit), the pixel and the other locators in a comment; one with
no element (a canvas, a native window, the browser not in front) stays a pixel step. A click on a
field followed by typing becomes one ``fill`` of that field. What the QA language has no step for
(typing with no field, a scroll, a drag, a held key) replays through the scripted model (``act``
with ``model: scripted``: the recorded action itself, no model called). A URL that changed after
a step is proposed as an assertion, and so are a few of the texts it made appear (vision.perception.effects),
which are also the step's effect a healed replay must still have. Typed text is written as the
trace holds it: secrets as their ``{{name}}`` placeholders; the specs read each from the environment variable
``GLASSDESK_SECRET_<NAME>`` and ``glassdesk qa`` does the same, so no value is ever in an export.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

from desktop.actions import PLACEHOLDER  # the one spelling of a secret's placeholder
from desktop.codegen import Lang, action_code, lit, locator, pw_key
from desktop.errors import InvalidRequest
from desktop.models import LOCATOR_FIELDS, ElementAt, Locating, NativeElement, Target
from vision.models.qa import FlowStep, VisualLimits
from vision.perception.effects import propose
from vision.trace.records import Spot, Trace

Format = Literal["yaml", "playwright-ts", "playwright-py"]
FORMATS: tuple[str, ...] = ("yaml", "playwright-ts", "playwright-py")
SECRET_ENV = "GLASSDESK_SECRET_"
# The roles a click then typing fills (typing into anything else stays typing).
FIELD_ROLES = ("textbox", "searchbox", "combobox", "spinbutton")
NOT_REPLAYED = ("done", "fail", "screenshot", "zoom", "cursor_position")
HEALABLE = ("click", "dblclick", "hover", "fill", "check", "uncheck")  # as vision.qa.flow
# The comment on every step a person did during a take-over (a trace step `by: operator`).
OPERATOR_NOTE = "done by a person (the operator, during a take-over), not by the agent"


class ExportError(InvalidRequest):
    """The run cannot be exported as asked (an unknown format, nothing to export): 422 invalid_request."""


def check_format(fmt: str) -> None:
    """An unknown format is refused before anything is read."""
    if fmt not in FORMATS:
        raise ExportError(f"format {fmt!r}: one of {', '.join(FORMATS)}")


def secret_env(name: str) -> str:
    """The environment variable a secret placeholder is read from (pure)."""
    return SECRET_ENV + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


@dataclass
class Op:
    """One flow step and what it came from."""

    step: dict                                   # a FlowStep, as its YAML
    comment: list[str] = field(default_factory=list)
    element: ElementAt | None = None             # the element under the recorded pixel
    raw: dict | None = None                      # the recorded input action (display pixels)
    url_after: str | None = None                 # the page's URL after the step it came from
    native: NativeElement | None = None          # the native control under the recorded pixel


@dataclass
class Flow:
    name: str
    source: str                                  # "trace <id>" / "QA run <id>"
    start_url: str | None
    ops: list[Op]
    notes: list[str] = field(default_factory=list)  # said at the top of the test, as comments
    # The run acted on native windows only: its replay leaves the browser as it is (clearing it would
    # bring it in front of the windows the test acts on).
    keep_state: bool = False


# --------------------------------------------------------------------------------- from a trace


def _target_fields(target: Locating) -> dict:
    data = target.model_dump(exclude_defaults=True, exclude_none=True)
    return {k: data[k] for k in LOCATOR_FIELDS if k in data}


def _is_field(element: ElementAt | None) -> TypeGuard[ElementAt]:
    return element is not None and (element.role in FIELD_ROLES or element.tag == "textarea")


# A native control of these roles says nothing a replay could find it again by unless it has a name
# (its layout, not something a person would say they clicked): the pixel step then.
NATIVE_CONTAINERS = frozenset({"panel", "filler", "frame", "window", "scroll pane", "viewport", "layered pane",
                               "split pane", "tool bar", "menu bar", "page tab list", "unknown", "section", "dialog"})


def native_target(native: NativeElement | None) -> dict | None:
    """A native control read under a pointer action as a step's structural target (pure): its
    program, role and whole name, as the desktop tree names it; None when it has neither a name nor a
    role a person would name (a bare container) or no program to look in."""
    if native is None or not native.application or (not native.name and native.role in NATIVE_CONTAINERS):
        return None
    target = {"app": native.application, "role": native.role}
    return {**target, "name": native.name, "exact": True} if native.name else target


def _where(action: dict, element: ElementAt | None, native: NativeElement | None = None) -> str:
    point = action.get("path", [action])[0] if action.get("action") == "drag" else action
    words = f"at ({point.get('x')}, {point.get('y')})" if point.get("x") is not None else "at the pointer"
    if element is None:
        return f"{native.describe()} {words}" if native is not None else words
    what = (element.role or element.tag) + (f" {element.name!r}" if element.name else "")
    also = [t.describe() for t in element.locators[1:4]]
    return f"{what} {words}" + (f"; also: {', '.join(also)}" if also else "")


def _pointer_step(verb: str, action: dict, element: ElementAt | None, spot: Spot | None = None,
                  instruction: str | None = None, native: NativeElement | None = None) -> dict:
    if element is not None and element.locators and (spot is None or element.tag != "canvas"):
        return {"action": verb, **_target_fields(element.locators[0]),
                "recorded": recorded(element, instruction=instruction)}
    # A native window's control: named by its program, role and name (found wherever its window is
    # now); else a canvas, whose point matters, or a window without accessibility: the pixel. Either
    # way with what was there for a replay to heal by (the OCR text, the template image).
    structural = native_target(native)
    step = {"action": verb, "native": structural} if structural else {"action": verb, "x": action["x"],
                                                                       "y": action["y"]}
    if spot is not None and (spot.text or spot.image):
        step["recorded"] = spotted(action["x"], action["y"], spot, instruction)
    return step


def spotted(x: int, y: int, spot: Spot, instruction: str | None = None) -> dict:
    """What a replay re-finds a pixel step from (vision.models.qa.Recorded): the text OCR read
    there, its box, the template image around it, the pixel (pure)."""
    out = {"x": x, "y": y, "text": spot.text, "text_box": spot.text_box, "image": spot.image,
           "instruction": instruction}
    return {k: v for k, v in out.items() if v not in (None, [], "")}


def recorded(element: ElementAt, own: Locating | None = None, instruction: str | None = None) -> dict:
    """What a replay heals a step from (vision.models.qa.Recorded): the element's role and name, its
    other locators, the pixel and the element's box, and the step's instruction (pure)."""
    own = own if own is not None else element.locators[0]
    others = [_target_fields(t) for t in element.locators if _target_fields(t) != _target_fields(own)]
    out = {"role": element.role, "name": element.name, "locators": others, "x": element.x, "y": element.y,
           "box": element.box or None, "instruction": instruction}
    return {k: v for k, v in out.items() if v not in (None, [], "")}


def _scripted(action: dict, why: str) -> dict:
    return {"action": "act", "instruction": f"replay the recorded {action['action']} ({why})", "model": "scripted",
            "script": [action], "max_steps": 2}


def flow_of_trace(trace: Trace) -> Flow:
    """The trace as flow steps with their evidence (pure)."""
    meta = trace.meta
    ops: list[Op] = []
    start_url = next((e.url for s in trace.steps for e in s.elements if e is not None and e.url), None)
    native_only = start_url is None and any(n is not None for s in trace.steps for n in s.natives)
    if not native_only:
        # The page the run began on, unless it acted on native windows only: the browser's tab behind
        # them is not where the test starts (opening it would bring the browser over them).
        start_url = start_url or next((s.url for s in trace.steps if s.url), None)
    url = start_url
    for step in trace.steps:
        said = " ".join((step.text or "").split())[:200]
        head = [f"trace {meta.trace_id} step {step.index}" + (f": {said}" if said else "")]
        if step.by == "operator":  # a person's input during a take-over: not the agent's, and said so
            head.append(OPERATOR_NOTE)
        # What a model re-targeting this step is asked (heal_with): the run's task and this step's words.
        instruction = " ".join(f"{meta.instruction} (this step: {said})".split())[:2000] if said \
            else meta.instruction[:2000]
        first = len(ops)
        # A type refused for want of a field sent no key: nothing of it to replay.
        refused_typing = step.error is not None and step.error.code == "typed_into_nothing"
        for i, action in enumerate(step.actions):
            name = action.get("action")
            element = step.elements[i] if i < len(step.elements) else None
            spot = step.spots[i] if i < len(step.spots) else None
            native = step.natives[i] if i < len(step.natives) else None
            if name in NOT_REPLAYED or (name == "type" and refused_typing):
                continue
            op = _op_of_action(action, element, ops, spot, instruction, native)
            if op is not None:
                ops.append(op)
        if len(ops) > first:
            ops[first].comment = head + ops[first].comment
        for op in ops[first:]:
            op.url_after = step.url
        if step.url and url and step.url != url and not step.failed and not step.no_effect:
            # The effect a healed step must still have (vision.qa.flow), and an assertion besides.
            acted = next((op for op in reversed(ops[first:]) if "recorded" in op.step), None)
            if acted is not None:
                acted.step["recorded"]["url_after"] = step.url
            ops.append(Op({"action": "assert", "assertion": {"type": "url", "expected": step.url}},
                          ["the URL changed after this step: proposed as an assertion"]))
        # A step that loaded another page shows all of that page: its texts are not what the step
        # made appear in it (the URL, asserted above, says where it went).
        navigated = (step.url and url and step.url != url) or "navigation" in step.settled_by
        if step.appeared and not step.failed and not navigated and not step.no_effect:
            ops += _appeared_ops(step.appeared, step.appeared_on, ops[first:])
        url = step.url or url
    ops = _address_bar_as_navigate(ops)
    if not ops:
        raise ExportError(f"trace {meta.trace_id} has no action to replay")
    expected = _expectation_ops(meta)
    ops += expected
    if ops[0].step["action"] == "navigate":  # the run opened its page itself: not twice
        start_url = None
    notes = [] if expected else [
        f"UNVERIFIED: trace {meta.trace_id} carried no expectation, so nothing in it was checked: its done was "
        "the model's word, and the assertions below are only what its steps made appear. Say what must hold "
        "(vision/act's expect) and export again."]
    return Flow(name=meta.instruction, source=f"trace {meta.trace_id}", start_url=start_url, ops=ops, notes=notes,
                keep_state=native_only)


def _expectation_ops(meta) -> list[Op]:
    """The run's expectations as the test's last assertions, each saying how it fared in the run (pure)."""
    outcomes = {number: check for number, check in enumerate(meta.checks)}
    ops = []
    for number, expectation in enumerate(meta.expect):
        check = outcomes.get(number)
        fared = ("not checked in the run (it ended before its model said done)" if check is None
                 else f"held in the run: {check.get('saw')}" if check.get("passed")
                 else f"FAILED in the run: {check.get('saw')}")
        ops.append(Op({"action": "assert", **expectation}, [f"expect {number + 1} of trace {meta.trace_id}: {fared}"]))
    return ops


def appeared_asserts(texts: Sequence[str], on: str | None) -> list[dict]:
    """The assertions proposed for the texts a step made appear (vision.perception.effects.propose picks the
    specific ones): in a page, the element showing exactly that text is visible (Playwright's
    ``getByText(text, { exact: true })``); on a native window or a canvas, OCR reads it (pure)."""
    if on == "screen":
        return [{"action": "assert", "assertion": {"type": "screen_text_contains", "expected": t}}
                for t in propose(texts)]
    return [{"action": "assert", "text": t, "exact": True, "assertion": {"type": "visible"}} for t in propose(texts)]


def _appeared_ops(texts: Sequence[str], on: str | None, step_ops: list[Op]) -> list[Op]:
    """The step's proposed text assertions; the texts are also the effect its last acting op must
    still have when healed (``recorded.appeared``, checked by vision.qa.flow)."""
    asserts = appeared_asserts(texts, on)
    if not asserts:
        return []
    acted = next((op for op in reversed(step_ops) if "recorded" in op.step), None)
    if acted is not None:
        acted.step["recorded"]["appeared"] = [a.get("text") or a["assertion"]["expected"] for a in asserts]
        acted.step["recorded"]["appeared_on"] = "screen" if on == "screen" else "page"
    how = "OCR read" if on == "screen" else "the page showed"
    return [Op(a, [f"{how} {a.get('text') or a['assertion']['expected']!r} after this step, not before: "
                   "proposed as an assertion"]) for a in asserts]


ADDRESS_BAR = ("ctrl+l", "alt+d", "f6")  # the chords that focus Chromium's address bar
ENTER = ("return", "enter", "kp_enter")


def _keys(op: Op) -> list[str]:
    keys = (op.raw or {}).get("keys") if (op.raw or {}).get("action") == "key" else None
    return [k.lower() for k in (keys.split() if isinstance(keys, str) else keys or [])]


def _address_bar_as_navigate(ops: list[Op]) -> list[Op]:
    """Typing a URL into the address bar (its chord, the URL, Enter: how a model opens a page) as
    one ``navigate`` to the page it reached (pure)."""
    out: list[Op] = []
    i = 0
    while i < len(ops):
        typed = ops[i + 1].raw if i + 1 < len(ops) else None
        if _keys(ops[i]) in [[k] for k in ADDRESS_BAR]:
            if typed and typed.get("action") == "type":
                ends = typed["text"].endswith("\n")
                if ends or (i + 2 < len(ops) and _keys(ops[i + 2]) and _keys(ops[i + 2])[0] in ENTER):
                    last = ops[i + 1] if ends else ops[i + 2]
                    text = typed["text"].strip()
                    url = last.url_after or (text if "://" in text else f"http://{text}")
                    out.append(Op({"action": "navigate", "url": url},
                                  ops[i].comment + [f"typed into the address bar: {typed['text'].strip()}"],
                                  None, None, url))
                    i += 2 if ends else 3
                    continue
        out.append(ops[i])
        i += 1
    return out


def _op_of_action(action: dict, element: ElementAt | None, ops: list[Op], spot: Spot | None = None,
                  instruction: str | None = None, native: NativeElement | None = None) -> Op | None:
    name = action["action"]
    located = element is not None and bool(element.locators)
    structural = not located and native_target(native) is not None
    note = [_where(action, element, native)] + (
        [] if located else ["a native window's control, by its program, role and name"] if structural
        else ["no page element: the recorded display pixel"])
    if spot is not None and spot.text:
        note.append(f"OCR read {spot.text!r} there" + ("; a template image of it is recorded" if spot.image else ""))
    if name == "type":
        last = ops[-1] if ops else None
        if last is not None and last.step["action"] == "click" and "native" in last.step \
                and last.native is not None and "editable" in last.native.states:
            # A click on a native text control, then typing: typed into that control (it is clicked).
            last.step = {"action": "type", "native": last.step["native"], "value": action["text"],
                         **({"recorded": last.step["recorded"]} if "recorded" in last.step else {})}
            last.raw = action
            return None
        if last is not None and last.step["action"] == "click" and _is_field(last.element) and last.element.locators:
            # A click on a field, then typing: one fill of that field (it clicks, clears and types).
            last.step = {"action": "fill", **_target_fields(last.element.locators[0]), "value": action["text"],
                         "recorded": last.step.get("recorded") or recorded(last.element)}
            last.raw = action
            return None
        return Op(_scripted(action, "typing with no field recorded"), ["typing where the focus was"], None, action)
    if name == "key":
        return Op({"action": "press", "keys": list(action["keys"])}, [], None, action)
    if name == "wait":
        return Op({"action": "wait", "timeout_ms": max(1, int(action.get("duration_ms", 1000)))}, [], None, action)
    if name in ("click", "double_click") and action.get("button", "left") == "left" \
            and not action.get("modifiers") and action.get("x") is not None:
        return Op(_pointer_step("click" if name == "click" else "dblclick", action, element, spot, instruction,
                                native), note, element, action, native=native)
    if name == "move" and located:
        return Op(_pointer_step("hover", action, element, None, instruction), note, element, action)
    return Op(_scripted(action, "no flow step does this"), note, element, action)


# ------------------------------------------------------------------------------- from a QA run


def flow_of_qa_run(records: Sequence[dict]) -> Flow:
    """A QA run's flow (verify_user_flow; its request as recorded) with each step's recorded element (pure)."""
    started = next((r for r in records if r.get("kind") == "started"), None)
    if started is None:
        raise ExportError("the QA run has no start record")
    run_id, verb = started.get("test_run_id"), started.get("verb")
    if verb != "verify_user_flow":
        raise ExportError(f"QA run {run_id} is a {verb}: only verify_user_flow runs are exported (their steps)")
    request = started.get("request") or {}
    details: dict[int, dict] = {}
    for record in records:
        if record.get("kind") == "case":
            for result in record.get("steps") or []:
                details[int(result.get("index", 0))] = result.get("detail") or {}
    ops = []
    for index, step in enumerate(request.get("steps") or [], 1):
        assertion = step.get("assertion")
        if isinstance(assertion, dict) and assertion.get("type") != "visual_matches":
            # The run keeps the request whole, every default included: a visual limit beside another
            # assertion is refused on the way back in, so it is left out (it was only the default).
            step = {**step, "assertion": {k: v for k, v in assertion.items() if k not in VisualLimits.model_fields}}
        try:  # as the suite would say it: the fields given, not every default
            step = FlowStep.model_validate(step).model_dump(mode="json", by_alias=True, exclude_defaults=True)
        except ValueError:
            step = {k: v for k, v in step.items() if v is not None}
        step = {"action": step.pop("action"), **step}
        found = (details.get(index) or {}).get("element")
        element = ElementAt.model_validate(found) if isinstance(found, dict) else None
        own = _target(step)
        if element is not None and element.locators and own is not None and step["action"] in HEALABLE \
                and "recorded" not in step:
            step["recorded"] = recorded(element, own)
        shown = propose((details.get(index) or {}).get("appeared") or [])
        if shown and "recorded" in step and "url_after" not in step["recorded"] \
                and "appeared" not in step["recorded"]:
            # What the step made appear: the effect a healed replay of it must still have.
            step["recorded"]["appeared"] = shown
            step["recorded"]["appeared_on"] = "page"  # a QA step's texts are read in its page
        ops.append(Op(step, [f"QA run {run_id} step {index}"], element))
    if not ops:
        raise ExportError(f"QA run {run_id} has no steps")
    return Flow(name=started.get("name") or "flow", source=f"QA run {run_id}", start_url=request.get("start_url"),
                ops=ops)


# --------------------------------------------------------------------------------------- render


def render(flow: Flow, fmt: str) -> str:
    if fmt == "yaml":
        return render_yaml(flow)
    if fmt == "playwright-ts":
        return render_playwright(flow, "ts")
    if fmt == "playwright-py":
        return render_playwright(flow, "py")
    check_format(fmt)
    raise AssertionError("unreachable")


def export_trace(trace: Trace, fmt: str) -> str:
    check_format(fmt)
    return render(flow_of_trace(trace), fmt)


def export_qa_run(records: Sequence[dict], fmt: str) -> str:
    check_format(fmt)
    return render(flow_of_qa_run(records), fmt)


def _slug(text: str, limit: int = 60) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:limit].strip("-") or "run"


def _flow_yaml(value) -> str:
    """One value as YAML on one line: a mapping in flow style; a string as JSON (a JSON string is a
    YAML double-quoted scalar, and no document-end marker follows it)."""
    import yaml

    if isinstance(value, str):
        return json.dumps(value)

    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1_000_000,
                          allow_unicode=False).strip()


def render_yaml(flow: Flow) -> str:
    """A ``glassdesk qa`` suite with one verify_user_flow test (comments: where each step came from)."""
    lines = [f"# Exported by glassdesk from {flow.source}.",
             "# Replay: glassdesk qa THIS.yaml (no model). Secrets: {{name}} is read from GLASSDESK_SECRET_<NAME>.",
             *[f"# {note}" for note in flow.notes],
             f"name: {_flow_yaml(_slug(flow.name))}", "tests:", f"  - name: {_flow_yaml(flow.name[:1000])}"]
    if flow.keep_state:
        lines.append("    keep_state: true  # native windows only: the browser, behind them, is left as it is")
    lines.append("    verify_user_flow:")
    if flow.start_url:
        lines.append(f"      start_url: {_flow_yaml(flow.start_url)}")
    lines.append("      steps:")
    for op in flow.ops:
        lines += [f"        # {c}" for c in op.comment]
        lines.append(f"        - {_flow_yaml(op.step)}")
    return "\n".join(lines) + "\n"


def _comment(lang: Lang) -> str:
    return "// " if lang == "ts" else "# "


def _text_code(text: str, lang: Lang) -> str:
    """A typed text's literal, each ``{{name}}`` read from the environment (never its value)."""
    parts = PLACEHOLDER.split(text)
    if len(parts) == 1:
        return lit(text, lang)
    pieces = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            if part:
                pieces.append(lit(part, lang))
        else:
            env = secret_env(part)
            pieces.append(f'(process.env.{env} ?? "")' if lang == "ts" else f'os.environ.get("{env}", "")')
    return " + ".join(pieces)


def _target(step: dict) -> Target | None:
    fields = {k: step[k] for k in LOCATOR_FIELDS if k in step}
    if step.get("action") != "assert" and step.get("role") is None:
        fields.pop("name", None)
    if not any(k in fields for k in ("selector", "ref", "label", "text", "role", "placeholder", "test_id", "alt",
                                     "title")):
        return None
    try:
        return Target.model_validate(fields)
    except ValueError:
        return None


def _wait(lang: Lang, ms: int) -> str:
    return f"await page.waitForTimeout({ms});" if lang == "ts" else f"page.wait_for_timeout({ms})"


def _expect(step: dict, lang: Lang) -> list[str]:
    a: dict = step.get("assertion") or {}
    kind, expected, negate = a.get("type"), a.get("expected"), a.get("not", False)
    aw, end = ("await ", ";") if lang == "ts" else ("", "")
    no = (".not" if lang == "ts" else ".not_") if negate else ""
    target = _target(step)
    subject = locator(target, lang) if target is not None else "page"

    def call(ts: str, py: str, *args: str) -> list[str]:
        return [f"{aw}expect({subject}){no}.{ts if lang == 'ts' else py}({', '.join(args)}){end}"]

    def regex(pattern: str) -> str:
        return _regex_code(pattern, lang)

    # The assertion model makes these kinds (and has_class, has_attribute's name) carry their value
    if kind == "url":
        return call("toHaveURL", "to_have_url", lit(a["expected"], lang))
    if kind == "url_matches":
        return call("toHaveURL", "to_have_url", regex(a["expected"]))
    if kind == "title":
        return call("toHaveTitle", "to_have_title", lit(a["expected"], lang))
    if target is None:
        return [f"{_comment(lang)}not exported: assertion {kind} (glassdesk-only: OCR, visual, evaluate)"]
    simple = {"visible": ("toBeVisible", "to_be_visible"), "hidden": ("toBeHidden", "to_be_hidden"),
              "enabled": ("toBeEnabled", "to_be_enabled"), "disabled": ("toBeDisabled", "to_be_disabled"),
              "editable": ("toBeEditable", "to_be_editable"), "focused": ("toBeFocused", "to_be_focused"),
              "checked": ("toBeChecked", "to_be_checked"), "exists": ("toBeAttached", "to_be_attached")}
    if kind in simple:
        return call(*simple[kind])
    if kind == "count":
        return call("toHaveCount", "to_have_count", str(a.get("count", 0)))
    valued = {"has_text": ("toHaveText", "to_have_text"), "contains_text": ("toContainText", "to_contain_text"),
              "text_contains": ("toContainText", "to_contain_text"), "has_value": ("toHaveValue", "to_have_value"),
              "value_equals": ("toHaveValue", "to_have_value"), "has_values": ("toHaveValues", "to_have_values")}
    if kind in valued:
        return call(*valued[kind], _expected_code(a, lang))
    if kind == "has_class":
        return call("toHaveClass", "to_have_class", regex(rf"(^|\s){re.escape(a['expected'])}(\s|$)"))
    if kind == "has_attribute":
        args = [lit(a["attribute"], lang)] + ([lit(expected, lang)] if expected is not None else [])
        if expected is None:
            args.append(regex(a.get("expected_regex") or ".*"))
        return call("toHaveAttribute", "to_have_attribute", *args)
    return [f"{_comment(lang)}not exported: assertion {kind}"]


def _regex_code(pattern: str, lang: Lang) -> str:
    return f"new RegExp({lit(pattern, lang)})" if lang == "ts" else f"re.compile({lit(pattern, lang)})"


def _expected_code(a: dict, lang: Lang) -> str:
    """An assertion's expectation as code (pure): expected_regex as a regular expression,
    expected_list as an array, else expected as a string."""
    if a.get("expected_regex") is not None:
        return _regex_code(a["expected_regex"], lang)
    if a.get("expected_list") is not None:
        return "[" + ", ".join(lit(v, lang) for v in a["expected_list"]) + "]"
    return lit(a.get("expected") or "", lang)


def _op_code(op: Op, lang: Lang) -> list[str]:  # noqa: C901
    step, aw, end = op.step, ("await " if lang == "ts" else ""), (";" if lang == "ts" else "")
    action = step["action"]
    target = _target(step)
    loc = locator(target, lang) if target is not None else None
    if "native" in step or action == "launch":
        return [f"{_comment(lang)}not exported: {action} on a native window (glassdesk-only: Playwright drives pages)"]
    if action == "assert":
        return _expect(step, lang)
    if action == "navigate":
        return [f"{aw}page.goto({lit(step['url'], lang)}){end}"]
    if action in ("reload", "back", "forward"):
        verb = {"reload": "reload", "back": "goBack" if lang == "ts" else "go_back",
                "forward": "goForward" if lang == "ts" else "go_forward"}[action]
        return [f"{aw}page.{verb}(){end}"]
    if action == "act":
        if step.get("model") == "scripted" and step.get("script"):
            lines = []
            for raw in step["script"]:
                text = _text_code(raw["text"], lang) if raw.get("action") == "type" else None
                lines += action_code(raw, op.element, lang, text=text)
            return lines
        return [f"{_comment(lang)}not exported: a vision step ({step.get('instruction', '')!r}) needs a model"]
    if action == "evaluate":
        return [f"{aw}page.evaluate({lit(step['expression'], lang)}){end}"]
    if action == "wait_for_request":  # Playwright waits for a request set up before the action that sends it
        return [f"{_comment(lang)}not exported: wait_for_request (glassdesk-only: a flow looks back at what was "
                "sent)"]
    if action == "type":  # at the caret, nothing cleared: pressSequentially, or the keyboard where the focus is
        typed = _text_code(step.get("value", ""), lang)
        if loc is None:
            return [f"{aw}page.keyboard.type({typed}){end}"]
        return [f"{aw}{loc}.{'pressSequentially' if lang == 'ts' else 'press_sequentially'}({typed}){end}"]
    if action == "wait" and loc is None:
        return [_wait(lang, int(step.get("timeout_ms", 1000)))]
    if action == "press" and loc is None:
        keys = step["keys"].split() if isinstance(step["keys"], str) else step["keys"]
        return [f"{aw}page.keyboard.press({lit(pw_key(k), lang)}){end}" for k in keys]
    if loc is None:  # a pixel (or an image) target: the recorded element's page pixel when known
        if "x" in step:
            raw = {"action": {"dblclick": "double_click", "hover": "move"}.get(action, "click"),
                   "x": step["x"], "y": step["y"]}
            # The element's locator where one names the target (a QA run's pixel click on a button);
            # on a canvas the point matters, and its locator would click the centre: there the element
            # only tells where the page's viewport is, for page.mouse.
            where = op.element
            if where is not None and where.tag == "canvas":
                where = where.model_copy(update={"locators": []})
            if action == "fill":
                return action_code(raw, where, lang) + [
                    f"{aw}page.keyboard.type({_text_code(step.get('value', ''), lang)}){end}"]
            return action_code(raw, where, lang)
        return [f"{_comment(lang)}not exported: {action} on an image target (glassdesk-only)"]
    if action == "fill":
        return [f"{aw}{loc}.fill({_text_code(step.get('value', ''), lang)}){end}"]
    if action in ("click", "dblclick", "hover", "check", "uncheck", "clear", "blur"):
        return [f"{aw}{loc}.{action}(){end}"]
    if action == "select":
        verb = "selectOption" if lang == "ts" else "select_option"
        return [f"{aw}{loc}.{verb}({lit(step['option'], lang)}){end}"]
    if action == "press":
        keys = step["keys"].split() if isinstance(step["keys"], str) else step["keys"]
        return [f"{aw}{loc}.press({lit(pw_key(k), lang)}){end}" for k in keys]
    if action == "scroll_into_view":
        verb = "scrollIntoViewIfNeeded" if lang == "ts" else "scroll_into_view_if_needed"
        return [f"{aw}{loc}.{verb}(){end}"]
    if action == "drag" and step.get("to"):
        to = Target.model_validate(step["to"])
        verb = "dragTo" if lang == "ts" else "drag_to"
        positions = _drag_positions(step.get("position"), step["to"].get("position"), lang)
        if positions is None:  # an edge's point depends on the element's size, known only on the page
            return [f"{_comment(lang)}not exported: a drag to an edge or with one coordinate (Playwright takes "
                    f"{{x, y}})"]
        return [f"{aw}{loc}.{verb}({', '.join([locator(to, lang), *positions])}){end}"]
    if action == "wait":
        state = step.get("state") or "visible"
        opts = f"{{ state: {lit(state, lang)} }}" if lang == "ts" else f"state={lit(state, lang)}"
        verb = "waitFor" if lang == "ts" else "wait_for"
        return [f"{aw}{loc}.{verb}({opts}){end}"]
    return [f"{_comment(lang)}not exported: {action} (glassdesk-only)"]


def _drag_positions(source: Any, target: Any, lang: Lang) -> list[str] | None:
    """dragTo's options for a step's positions (pure): none for centres, the points as Playwright's
    sourcePosition/targetPosition; None when one is an edge or leaves a coordinate out."""
    options = []
    for name, position in (("source_position", source), ("target_position", target)):
        if position is None or position == "center":
            continue
        if not isinstance(position, dict) or position.get("x") is None or position.get("y") is None:
            return None
        x, y = (f"{position[k]:g}" for k in ("x", "y"))
        options.append((name, x, y))
    if lang == "ts":
        inner = ", ".join(f"{'sourcePosition' if n == 'source_position' else 'targetPosition'}: {{ x: {x}, y: {y} }}"
                          for n, x, y in options)
        return [f"{{ {inner} }}"] if options else []
    return [f'{n}={{"x": {x}, "y": {y}}}' for n, x, y in options]


def render_playwright(flow: Flow, lang: Lang) -> str:
    """One Playwright test: TypeScript for @playwright/test, or Python for pytest-playwright."""
    c = _comment(lang)
    body: list[str] = []
    if flow.start_url:
        body += _op_code(Op({"action": "navigate", "url": flow.start_url}), lang)
    for op in flow.ops:
        body += [f"{c}{line}" for line in op.comment]
        body += _op_code(op, lang)
    head = [f"{c}Exported by glassdesk from {flow.source}.",
            f"{c}Secrets are read from GLASSDESK_SECRET_<NAME> environment variables, never written here.",
            *[f"{c}{note}" for note in flow.notes]]
    if lang == "ts":
        return "\n".join(head + ["import { test, expect } from '@playwright/test';", "",
                                 f"test({json.dumps(flow.name[:200])}, async ({{ page }}) => {{"]
                         + [f"  {line}" for line in body] + ["});", ""])
    return "\n".join(head + ["import os  # noqa: F401", "import re  # noqa: F401", "",
                             "from playwright.sync_api import Page, expect  # noqa: F401", "", "",
                             f"def test_{_slug(flow.name, 50).replace('-', '_')}(page: Page) -> None:",
                             f"    {lit(flow.name[:200], 'py')}"]
                     + [f"    {line}" for line in body] + [""])
