"""A trace's words and JUnit: pure functions over meta + steps (its HTML report is the run viewer's,
tests/unit/test_runview.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from vision.evidence.report import describe_action, render_junit
from vision.trace.records import StepRecord, TraceMeta

T0 = datetime(2025, 5, 1, 12, 0, 0, tzinfo=UTC)
HOSTILE = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'


def step(index: int, **fields) -> StepRecord:
    start = T0 + timedelta(seconds=2 * index)
    return StepRecord(index=index, started_at=start, finished_at=start + timedelta(seconds=1.5),
                      before_png=f"step-{index:04d}-before.png", after_png=f"step-{index:04d}-after.png", **fields)


def meta(status: str = "done", **fields) -> TraceMeta:
    return TraceMeta(trace_id="20250501T120000000000Z-abcd1234", instruction="Open the settings", model="scripted/test",
                     started_at=T0, finished_at=T0 + timedelta(seconds=9), status=status, steps=3, **fields)


STEPS = [
    step(1, text="Clicking the gear icon.", actions=[{"action": "click", "x": 960, "y": 540, "button": "left"}],
         argv=[["xdotool", "mousemove", "960", "540", "click", "--delay", "0", "1"]], model_ms=1234, exec_ms=9,
         settle_ms=77, usage={"input_tokens": 1500, "output_tokens": 42}),
    step(2, text=HOSTILE, actions=[
        {"action": "drag", "path": [{"x": 0, "y": 0}, {"x": 480, "y": 270}, {"x": 1919, "y": 1079}]},
        {"action": "type", "text": "it's a 'quote'"},
    ], argv=[["xdotool", "type", "--", "it's a 'quote'"]]),
    step(3, text="Scrolling.", actions=[{"action": "scroll", "x": 192, "y": 108, "direction": "down", "amount": 5}],
         results=[{"call_id": "c9", "ok": False, "error": "window vanished"}],
         error={"code": "action_failed", "message": "xdotool exited 1"}),
]


def test_describe_action() -> None:
    assert describe_action({"action": "click", "x": 1, "y": 2, "button": "right", "modifiers": ["ctrl"]}) == \
        "ctrl+right click at (1, 2)"
    assert describe_action({"action": "key", "keys": ["ctrl+a", "Delete"]}) == "key ctrl+a Delete"
    assert describe_action({"action": "done", "answer": "42"}) == "done — 42"


def test_junit_counts_cases_and_failures() -> None:
    root = ET.fromstring(render_junit(meta(), STEPS))
    suite = root.find("testsuite")
    assert suite is not None and len(root.findall("testsuite")) == 1
    cases = suite.findall("testcase")
    assert len(cases) == 4 and suite.get("tests") == "4"
    assert [c.find("failure") is not None for c in cases] == [False, False, True, False]
    assert suite.get("failures") == "1" and root.get("failures") == "1"
    assert cases[2].find("failure").get("type") == "action_failed"
    assert cases[0].get("name") == "step 0001: click at (960, 540)" and cases[0].get("time") == "1.500"
    assert cases[3].get("name") == "result"


def test_junit_fails_the_result_unless_done() -> None:
    xml = render_junit(meta("max_steps", error={"code": "max_steps", "message": "gave up after 3 steps"}), STEPS[:1])
    cases = ET.fromstring(xml).find("testsuite").findall("testcase")
    failure = cases[-1].find("failure")
    assert failure is not None and failure.get("message") == "max_steps: gave up after 3 steps"


def test_junit_survives_control_characters() -> None:
    hostile = [step(1, text="bell\x07 and <tags> & \x00 nul", actions=[{"action": "type", "text": "\x1b[31m"}])]
    root = ET.fromstring(render_junit(meta(), hostile))
    assert "<tags>" in root.find("testsuite/testcase/system-out").text


def test_junit_has_a_case_per_expectation_and_says_when_nothing_was_checked() -> None:
    checks = [{"check": "assert url 'http://a/'", "passed": True, "saw": "URL 'http://a/'", "duration_ms": 12},
              {"check": "assert has_value label 'Name' 'alice'", "passed": False, "saw": "saw ''", "duration_ms": 5000}]
    root = ET.fromstring(render_junit(meta("failed", verified=False, checks=checks,
                                           error={"code": "expectation_failed", "message": "1 of 2"}), STEPS[:1]))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["expect 2: assert has_value label 'Name' 'alice'"].find("failure").get("type") == "expectation_failed"
    assert cases["expect 1: assert url 'http://a/'"].find("failure") is None
    assert cases["expect 2: assert has_value label 'Name' 'alice'"].get("time") == "5.000"
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["verified"] == "failed_check" and root.get("failures") == "2"  # the check and the result
    claimed = ET.fromstring(render_junit(meta(), STEPS[:1]))
    assert {p.get("name"): p.get("value") for p in claimed.iter("property")}["verified"] == "unverified"
    result = next(c for c in claimed.iter("testcase") if c.get("name") == "result")
    assert "unverified: the run carried no expectation" in result.find("system-out").text
