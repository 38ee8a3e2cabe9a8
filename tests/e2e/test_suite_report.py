"""`glassdesk qa --report` opened in a real browser (Playwright driving /usr/bin/chromium): a suite
of a passing test and a filmed flow whose visual step fails, run by the command line against the
real server and desktop. The report, opened from a file with every request but the file's own
blocked and recorded, lists both tests with their verdicts; the failing one opens in the run
viewer's layout with its steps, its film and the failure's message, and back; nothing is fetched.

Screenshots: artifacts/suite-report-*.png.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reports import embedded_document
from vision.cli import main

pytestmark = pytest.mark.x11

SESSION = "itest"
ARTIFACTS = Path(os.environ.get("GLASSDESK_ARTIFACTS") or "artifacts")
WAIT_MS = 30_000


def shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"suite-report-{name}.png"
    page.screenshot(path=str(path))
    return path


def test_the_suite_report_lists_every_test_and_opens_each_in_the_viewer_offline(vision_api, browser, qa_site,
                                                                                 tmp_path):
    captured = vision_api.post(f"/api/v1/sessions/{SESSION}/qa/capture_visual_baseline",
                               json={"url": qa_site.url("/visual"), "name": "suite-card"})
    assert captured.status_code == 200, captured.text
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"""name: suite report
session: {SESSION}
tests:
  - name: the card page loads
    verify_page_loads: {{url: "{qa_site.url('/visual')}", expected_title: "visual"}}
  - name: the card has not moved
    verify_user_flow:
      record_video: true
      start_url: "{qa_site.url('/visual')}"
      steps:
        - {{action: navigate, url: "{qa_site.url('/visual?left=300')}"}}
        - {{action: click, selector: "#card"}}
        - {{action: assert, assertion: {{type: visual_matches, baseline_id: suite-card}}}}
""")
    report = tmp_path / "out" / "report.html"
    report.parent.mkdir()
    assert main(["qa", str(suite), "--url", str(vision_api.base_url).rstrip("/"), "--report", str(report)]) == 1
    # One file: a two-test suite is far under the bounds, so nothing is beside it.
    assert [p.name for p in report.parent.iterdir()] == ["report.html"]
    doc = embedded_document(report)
    failing_id = doc["runs"][doc["cases"][1]["run"]]["id"]

    context = browser.new_context(viewport={"width": 1500, "height": 950})
    requests: list[str] = []
    blocked: list[str] = []

    def only_the_file(route):
        # Every request the page makes is recorded; only the report file itself may load.
        url = route.request.url
        if url == report.as_uri():
            route.continue_()
        else:
            blocked.append(url)
            route.abort()

    context.route("**/*", only_the_file)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(report.as_uri())
        page.wait_for_function("() => document.body.dataset.ready === 'true'")
        # The suite page: both tests, in order, with their verdicts; the failure's message under it.
        assert page.locator("#suite-status").inner_text() == "failed"
        rows = page.locator("#cases li.case")
        assert rows.count() == 2
        assert [rows.nth(i).locator(".name").inner_text() for i in range(2)] == [
            "the card page loads", "the card has not moved"]
        assert [rows.nth(i).get_attribute("data-status") for i in range(2)] == ["passed", "failed"]
        assert rows.nth(0).locator(".badge").first.inner_text() == "passed"
        assert rows.nth(0).locator(".message").count() == 0
        message = rows.nth(1).locator(".message").inner_text()
        assert message.startswith("step 3") and "exceeds max_region_pixels" in message, message
        shot(page, "list")

        # The failing test opens in the viewer's layout: its steps, the failed one's message, its film.
        rows.nth(1).locator("a.case-link").click()
        page.wait_for_function("() => document.body.dataset.view === 'run-2'")  # numbered as the list is
        assert page.url.endswith("#run-2")
        assert page.locator("#suite").is_hidden() and page.locator("#run").is_visible()
        assert page.locator("#run-head h1").inner_text() == "the card has not moved"
        assert page.locator("#run-status").inner_text() == "failed"
        assert failing_id in page.locator("#run-head .sub").first.inner_text()
        steps = page.locator("section.step")
        assert steps.count() == 3
        assert [steps.nth(i).get_attribute("class").split()[1] for i in range(3)] == ["st-passed", "st-passed",
                                                                                       "st-failed"]
        assert "exceeds max_region_pixels" in page.locator("#step-3 .box.error").inner_text()
        assert page.locator("#step-3 .review figcaption").count() == 3
        assert page.locator("#evidence").inner_text().startswith("Evidence verified")
        page.wait_for_function("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
        srcs = page.evaluate("() => [...document.images].map(i => i.src)")
        assert srcs and all(src.startswith("data:image/png") for src in srcs)
        page.wait_for_function("() => { const v = document.querySelector('#film'); "
                               "return v && v.readyState >= 1 && v.duration > 0; }")
        assert page.locator("#chapters li").count() == 3
        page.locator("#step-3").scroll_into_view_if_needed()
        shot(page, "failing")
        page.locator("#run-head").scroll_into_view_if_needed()
        shot(page, "failing-head")

        # Back to the list, and the passing test opens too, with the film of the other run gone.
        page.locator("#back").click()
        page.wait_for_function("() => document.body.dataset.view === 'suite'")
        assert page.locator("#run").is_hidden() and rows.count() == 2
        rows.nth(0).locator("a.case-link").click()
        page.wait_for_function("() => document.body.dataset.view === 'run-1'")
        assert page.locator("#run-status").inner_text() == "passed"
        assert page.locator("section.step").count() == 1 and page.locator("#film").count() == 0
        page.go_back()
        page.wait_for_function("() => document.body.dataset.view === 'suite'")
    finally:
        context.close()
    assert not errors, errors
    assert not blocked, blocked
    assert all(url.startswith(("file:", "data:", "blob:")) for url in requests), requests
