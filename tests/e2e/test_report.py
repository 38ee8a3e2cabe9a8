"""The trace report as a person sees it: served by the live API, rendered by headless Chromium.

Also the trace's machine-readable sides (JUnit XML, verify) and tamper evidence: one byte edited in
steps.jsonl on disk breaks the chain at that record.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.fakes.testpage import at

pytestmark = pytest.mark.x11

SESSION = "itest"
ARTIFACTS = Path(os.environ.get("GLASSDESK_ARTIFACTS") or "artifacts")


@pytest.fixture
def scripted_trace(vision_api, page, viewport):
    """A finished scripted run with pointer actions, typing and an answer: its response body."""
    bx, by = at(viewport, 1260, 145)
    fx, fy = at(viewport, 300, 280)
    script = [
        {"action": "click", "x": bx, "y": by},
        {"action": "click", "x": fx, "y": fy},
        {"action": "type", "text": "report me"},
        {"action": "drag", "path": [{"x": fx, "y": fy}, {"x": fx + 200, "y": fy}]},
        {"action": "done", "answer": "the report is ready"},
    ]
    r = vision_api.post(f"/api/v1/sessions/{SESSION}/vision/act",
                        json={"instruction": "render a report", "model": "scripted", "script": script})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done"
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "report me")
    return body


def test_report_renders_in_chromium_with_every_image_and_marker(vision_api, scripted_trace, browser):
    trace_id = scripted_trace["trace_id"]
    steps = len(scripted_trace["steps"])
    assert steps == 5
    base = str(vision_api.base_url).rstrip("/")

    html = vision_api.get(f"/api/v1/traces/{trace_id}/report")
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert "Evidence verified" in html.text and "the report is ready" in html.text

    tab = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        failed: list[str] = []
        tab.on("requestfailed", lambda req: failed.append(req.url))
        bad_status: list[str] = []
        tab.on("response", lambda resp: bad_status.append(f"{resp.status} {resp.url}") if resp.status >= 400 else None)

        response = tab.goto(f"{base}/api/v1/traces/{trace_id}/report", wait_until="load")
        assert response is not None and response.ok
        # The run viewer's offline form: rendered by its inlined script from the embedded run.
        tab.wait_for_function("() => document.body.dataset.ready === 'true'")
        images = tab.locator("img")
        count = images.count()
        # Before and after per step; a "before" equal to the previous "after" is the same file.
        assert count == 2 * steps, count
        for i in range(count):  # lazy images load once near the viewport
            images.nth(i).scroll_into_view_if_needed()
        tab.wait_for_function("() => [...document.images].every(i => i.complete)", timeout=30_000)
        sizes = tab.evaluate("() => [...document.images].map(i => [i.naturalWidth, i.naturalHeight, i.src])")
        assert all(w == 1920 and h == 1080 and src.startswith("data:image/png") for w, h, src in sizes), sizes
        assert failed == [] and bad_status == [] and errors == []

        # A marker where each pointer action landed, on both screenshots of its step.
        for index, expected in ((1, 1), (2, 1), (3, 0), (4, 2)):
            marks = tab.locator(f"#step-{index} .mark")
            assert marks.count() == 2 * expected, (index, marks.count())
        assert tab.locator("#step-4 polyline").count() == 2  # the drag's path
        # The first marker sits over the Sign in click: left/top are percentages of the display.
        x, y = scripted_trace["steps"][0]["actions"][0]["x"], scripted_trace["steps"][0]["actions"][0]["y"]
        first = tab.locator("#step-1 .mark").first
        assert (first.get_attribute("data-x"), first.get_attribute("data-y")) == (str(x), str(y))
        style = first.get_attribute("style")
        assert f"left: {x / 1920 * 100:.3f}%" in style and f"top: {y / 1080 * 100:.3f}%" in style, style
        box = tab.locator("#step-1 .mark").first.bounding_box()
        shot = tab.locator("#step-1 .shot img").first.bounding_box()
        assert box and shot
        centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expected = (shot["x"] + x / 1920 * shot["width"], shot["y"] + y / 1080 * shot["height"])
        assert abs(centre[0] - expected[0]) <= 2 and abs(centre[1] - expected[1]) <= 2, (centre, expected)

        assert tab.locator("section.step").count() == steps
        assert "xdotool" in tab.locator("#step-1").inner_text()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        tab.locator("#step-1").scroll_into_view_if_needed()
        tab.screenshot(path=str(ARTIFACTS / "report.png"), full_page=False)
        tab.screenshot(path=str(ARTIFACTS / "report-full.png"), full_page=True)
    finally:
        tab.close()
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


def test_junit_verify_and_a_one_byte_edit_breaks_the_chain(vision_api, scripted_trace, services):
    trace_id = scripted_trace["trace_id"]
    steps = len(scripted_trace["steps"])

    junit = vision_api.get(f"/api/v1/traces/{trace_id}/junit.xml")
    assert junit.status_code == 200 and "xml" in junit.headers["content-type"]
    root = ET.fromstring(junit.content)
    cases = root.findall(".//testcase")
    assert len(cases) == steps + 1  # one per step plus the run's result
    assert int(root.get("tests")) == steps + 1 and root.get("failures") == "0"
    assert cases[-1].get("name") == "result" and cases[-1].find("failure") is None
    assert cases[-1].findtext("system-out") == ("the report is ready\nunverified: the run carried no expectation, so "
                                                "its done is the model's word")
    assert cases[0].get("name").startswith("step 0001: click at")

    ok = vision_api.get(f"/api/v1/traces/{trace_id}/verify").json()
    assert ok == {"ok": True, "steps_checked": steps, "broken_index": None, "reason": None, "partial_tail": False}

    # Edit one byte inside record 3 (the typed text), keeping the line valid JSON.
    path = services.store.trace_dir(trace_id) / "steps.jsonl"
    data = path.read_bytes()
    lines = data.split(b"\n")
    assert json.loads(lines[2])["index"] == 3
    at = lines[2].index(b"report me")
    start = sum(len(line) + 1 for line in lines[:2]) + at
    tampered = data[:start] + b"R" + data[start + 1:]
    assert len(tampered) == len(data) and sum(a != b for a, b in zip(data, tampered)) == 1
    path.write_bytes(tampered)

    broken = vision_api.get(f"/api/v1/traces/{trace_id}/verify").json()
    assert broken["ok"] is False and broken["broken_index"] == 3, broken
    assert "hash" in broken["reason"]
    assert broken["steps_checked"] == 2
    report = vision_api.get(f"/api/v1/traces/{trace_id}/report").text
    assert "Evidence broken at step 3" in report


def test_verify_reports_a_record_that_no_longer_parses(vision_api, scripted_trace, services):
    """Tampering that breaks a line's JSON is evidence too: verify says where, it does not fail."""
    trace_id = scripted_trace["trace_id"]
    path = services.store.trace_dir(trace_id) / "steps.jsonl"
    original = path.read_bytes()
    lines = original.split(b"\n")
    lines[2] = lines[2][:-1]  # drop record 3's closing brace
    path.write_bytes(b"\n".join(lines))
    try:
        response = vision_api.get(f"/api/v1/traces/{trace_id}/verify")
    finally:
        path.write_bytes(original)  # the store is shared: later tests list and load this trace
    assert response.status_code == 200, response.text
    broken = response.json()
    assert broken["ok"] is False and broken["broken_index"] == 3 and broken["steps_checked"] == 2, broken
    assert "JSON" in broken["reason"]
    assert vision_api.get("/api/v1/traces/nope-nope/verify").json()["error"]["code"] == "trace_not_found"
