"""The run viewer (/runs/{id}) in a real browser (Playwright driving /usr/bin/chromium) against the
real server and desktop: a filmed vision run with a take-over in the middle, and a filmed QA flow
whose visual step fails. Each is played with its chapters (a step clicked puts the film at its
chapter's start, as chapters.vtt has it), its marks sit on the recorded pixels, the operator's
steps are shown as theirs, the chain verifies, a failed comparison is approved from the page (and
a stale one shows the approval API's conflict, every region of differing pixels boxed), and the
offline report, opened from a file with no server, holds the same steps, images and chapters. A
vision run and a QA flow opened while they run (held by gates the test opens) are followed: each
step appears as it is recorded, and the end arrives, without a reload.

Screenshots: artifacts/viewer-*.png.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx2
import pytest

from tests.conftest import LiveServer
from tests.fakes.rfb import RfbControl
from tests.fakes.testpage import at
from vision.actions import Click, Done
from vision.evidence.qa_runs import QaRunNotFound
from vision.evidence.runview import parse_vtt
from vision.http.app import Settings, create_app
from vision.models import ActRequest
from vision.providers.function import Context, FunctionProvider, calls

pytestmark = pytest.mark.x11

SESSION = "itest"
ARTIFACTS = Path(os.environ.get("GLASSDESK_ARTIFACTS") or "artifacts")
QA = f"/api/v1/sessions/{SESSION}/qa"
WAIT_MS = 30_000
TOKEN = "viewer-test-token-81d2"


class Viewer:
    """One browser page on a run's viewer (live or a report file), collecting its errors."""

    def __init__(self, browser, url: str):
        self.context = browser.new_context(viewport={"width": 1600, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(WAIT_MS)
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(url)
        self.page.wait_for_function("() => document.body.dataset.ready === 'true'")

    def images_loaded(self) -> list[list]:
        """Every image scrolled to and loaded: their natural sizes and sources."""
        p = self.page
        for i in range(p.locator("img").count()):
            p.locator("img").nth(i).scroll_into_view_if_needed()
        p.wait_for_function("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
        return p.evaluate("() => [...document.images].map(i => [i.naturalWidth, i.naturalHeight, i.src])")

    def film_ready(self) -> None:
        self.page.wait_for_function("() => { const v = document.querySelector('#film'); "
                                    "return v && v.readyState >= 1 && v.duration > 0; }")

    def seek_by_step(self, step_id: str) -> float:
        """Click a step's head; the film's currentTime once it has seeked there."""
        self.page.locator(f"#{step_id} .head h2").click()
        self.page.wait_for_function("() => !document.querySelector('#film').seeking")
        return self.page.evaluate("() => document.querySelector('#film').currentTime")

    def mark_centre_error(self, selector: str, x: int, y: int, size=(1920, 1080)) -> float:
        """How far (CSS px) the mark's centre is from where pixel (x, y) of its image is shown."""
        mark = self.page.locator(selector).first
        img = mark.locator("xpath=ancestor::div[contains(@class,'shot')]/img")
        box, shot = mark.bounding_box(), img.bounding_box()
        assert box and shot
        centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expected = (shot["x"] + x / size[0] * shot["width"], shot["y"] + y / size[1] * shot["height"])
        return max(abs(centre[0] - expected[0]), abs(centre[1] - expected[1]))

    def shot(self, name: str, *, full: bool = False) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"viewer-{name}.png"
        self.page.screenshot(path=str(path), full_page=full)
        return path

    def close(self) -> list[str]:
        errors = list(self.errors)
        self.context.close()
        return errors


def report_file(vision_api, path: str, tmp_path: Path, name: str) -> Path:
    response = vision_api.get(path)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html"), response.text
    out = tmp_path / f"{name}.html"
    out.write_bytes(response.content)
    return out


# ------------------------------------------------------------------------------------ a vision run


@pytest.fixture(scope="module")
def taken_over_run(vision_api, desk, page_server, viewport, services):
    """A filmed scripted run: the agent clicks, the person takes over (a click, typing, a chord),
    hands back, and the agent finishes. Returns (trace id, the agent's click, the person's click)."""
    page_server.clear()
    desk.run_settled(lambda: desk.open_url(page_server.url))
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    bx, by = at(viewport, 1260, 145)   # the Sign in button
    fx, fy = at(viewport, 300, 280)    # the text field
    run = {"instruction": "sign in, with a person's help", "model": "scripted", "record_video": True,
           "autopilot": False,
           "script": [{"action": "click", "x": bx, "y": by}, {"action": "done", "answer": "helped"}]}
    first = vision_api.post(f"/api/v1/sessions/{SESSION}/vision/act", json=run)
    assert first.status_code == 200 and first.json()["status"] == "running", first.text
    control = vision_api.post(f"/api/v1/sessions/{SESSION}/takeover", json={"on": True})
    assert control.status_code == 200, control.text
    person = RfbControl(str(vision_api.base_url).rstrip("/"), control.json()["token"])
    try:
        person.click(fx, fy)
        person.sync()
        page_server.wait_for(lambda e: e["type"] == "click" and e["target"] == "field")
        person.key(0x68)
        person.key(0x69)  # "hi"
        person.sync()
        page_server.wait_for(lambda e: e["type"] == "input" and e["field"] == "hi")
    finally:
        person.close()
        assert vision_api.post(f"/api/v1/sessions/{SESSION}/takeover", json={"on": False}).status_code == 200
    done = vision_api.post(f"/api/v1/sessions/{SESSION}/vision/act", json={**run, "autopilot": True})
    assert done.status_code == 200 and done.json()["status"] == "done", done.text
    trace_id = first.json()["trace_id"]
    assert [s.by for s in services.store.load(trace_id).steps] == ["agent", "operator", "operator", "agent"]
    return trace_id, (bx, by), (fx, fy)


def test_a_taken_over_vision_run_plays_with_its_chapters_marks_and_the_persons_steps(
        vision_api, browser, taken_over_run, services, tmp_path):
    trace_id, (bx, by), _ = taken_over_run
    trace_dir = services.store.trace_dir(trace_id)
    chapters = parse_vtt((trace_dir / "chapters.vtt").read_text())
    assert [c["title"][:7] for c in chapters] == ["step 1:", "step 2:", "step 3:", "step 4:"], chapters
    base = str(vision_api.base_url).rstrip("/")

    viewer = Viewer(browser, f"{base}/runs/{trace_id}")
    try:
        p = viewer.page
        assert p.locator("#evidence").inner_text().startswith("Evidence verified"), p.locator("#evidence").inner_text()
        assert p.locator("section.step").count() == 4
        assert [p.locator("section.step").nth(i).get_attribute("data-by") for i in range(4)] == \
            ["agent", "operator", "operator", "agent"]
        assert "by the operator" in p.locator("#step-2 h2").inner_text()
        assert p.locator("#step-2 .badge.operator").is_visible()
        # Screenshots: the agent's steps' before and after (the person's steps have none).
        sizes = viewer.images_loaded()
        assert len(sizes) == 4 and all(w == 1920 and h == 1080 for w, h, _ in sizes), sizes
        assert all(src.startswith("blob:") for _, _, src in sizes)
        # The agent's click is marked where it landed, on the picture's pixel.
        assert viewer.mark_centre_error("#step-1 figure[data-which=before] .mark.point", bx, by) <= 2
        viewer.film_ready()
        assert p.locator("#chapters li").count() == 4
        # Step -> film: each step clicked puts the film at its chapter's start.
        for number, chapter in enumerate(chapters, 1):
            at_time = viewer.seek_by_step(f"step-{number}")
            assert abs(at_time - chapter["start"]) < 0.05, (number, at_time, chapter)
            assert p.locator(f"#step-{number}").get_attribute("class").split().count("playing") == 1
            assert p.locator("section.step.playing").count() == 1
        # Film -> step: the chapter playing marks its step.
        p.evaluate(f"() => {{ document.querySelector('#film').currentTime = {chapters[1]['start'] + 0.05}; }}")
        p.wait_for_function("() => document.querySelector('#step-2').classList.contains('playing')")
        exports = [p.locator("#exports a").nth(i).get_attribute("href") for i in range(p.locator("#exports a").count())]
        assert f"/api/v1/traces/{trace_id}/export?format=yaml" in exports
        assert f"/api/v1/traces/{trace_id}/export?format=playwright-ts" in exports
        viewer.seek_by_step("step-2")
        p.locator("#step-1").scroll_into_view_if_needed()
        viewer.shot("vision")
        viewer.shot("vision-full", full=True)
    finally:
        errors = viewer.close()
    assert not errors, errors

    # The offline form: the same page from a file, nothing fetched from any server.
    path = report_file(vision_api, f"/api/v1/traces/{trace_id}/report", tmp_path, "vision")
    offline = Viewer(browser, path.as_uri())
    try:
        p = offline.page
        assert p.locator("section.step").count() == 4
        assert p.locator("#step-3 h2").inner_text().startswith("Step 3 · by the operator")
        assert p.locator("#evidence").inner_text().startswith("Evidence verified")
        sizes = offline.images_loaded()
        assert len(sizes) == 4 and all(src.startswith("data:image/png") for _, _, src in sizes)
        assert offline.mark_centre_error("#step-1 figure[data-which=before] .mark.point", bx, by) <= 2
        offline.film_ready()
        assert p.locator("#chapters li").count() == 4
        assert abs(offline.seek_by_step("step-4") - chapters[3]["start"]) < 0.05
        assert all(url.startswith(("file:", "data:", "blob:")) for url in offline.requests), offline.requests
        offline.shot("vision-offline")
    finally:
        errors = offline.close()
    assert not errors, errors

    # report.html beside the trace: the same page, its files linked by name, the film played from there.
    beside = Viewer(browser, (trace_dir / "report.html").as_uri())
    try:
        sizes = beside.images_loaded()
        assert len(sizes) == 4 and all(src.startswith(trace_dir.as_uri()) and w == 1920 for w, _, src in sizes)
        beside.film_ready()
        assert beside.page.locator("#chapters li").count() == 4
        assert abs(beside.seek_by_step("step-3") - chapters[2]["start"]) < 0.05
    finally:
        errors = beside.close()
    assert not errors, errors


# ------------------------------------------------------------------------------------ a running run


def until(check, what: str, timeout_s: float = 60.0):
    """``check()``'s first truthy answer, asked until it comes (bounded: a hang fails, with what)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if answer := check():
            return answer
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_running_run_is_followed_live_until_its_end(vision_api, browser, services, desk, page_server, viewport,
                                                      tmp_path):
    """The viewer opened on a run still running: the model is held between steps by gates the test
    opens, so what the page shows at each point is known. A step recorded appears without a reload,
    the steps already shown stay as they are, and the end (status, answer, evidence over the sealed
    film, the film, exports) arrives by itself."""
    page_server.clear()
    desk.run_settled(lambda: desk.open_url(page_server.url))
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    fx, fy = at(viewport, 300, 280)  # the page's text field: a click there changes nothing else
    second, last = threading.Event(), threading.Event()
    instruction = f"followed live {time.monotonic_ns()}"

    def model(ctx: Context):
        if ctx.turn == 1:
            return calls(Click(x=fx, y=fy), text="the first click")
        if ctx.turn == 2:
            second.wait(120)
            return calls(Click(x=fx + 40, y=fy), text="the second click")
        last.wait(120)
        return calls(Done(answer="seen as it happened"), text="done")

    outcome: dict = {}

    def run() -> None:
        outcome["result"] = services.act(SESSION, ActRequest(instruction=instruction, max_steps=5, record_video=True),
                                         provider=FunctionProvider(model))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    viewer = None
    try:
        trace_id = until(lambda: next((m.trace_id for m in services.store.list_traces(limit=20)
                                       if m.instruction == instruction), None), "the run's trace")
        until(lambda: len(services.store.load(trace_id).steps) == 1, "step 1 to be recorded")
        base = str(vision_api.base_url).rstrip("/")
        viewer = Viewer(browser, f"{base}/runs/{trace_id}")
        p = viewer.page
        assert p.locator("#run-status").inner_text() == "running"
        assert p.locator("#run-live").is_visible() and p.evaluate("() => document.body.dataset.live") == "true"
        assert p.locator("section.step").count() == 1 and p.locator("#film").count() == 0
        viewer.images_loaded()
        # Marks on this document and on step 1's node: a reload, or step 1 rebuilt, would lose them.
        p.evaluate("() => { window.sameDocument = true; document.querySelector('#step-1').kept = true; }")
        viewer.shot("live-running")
        # The offline form of the running run: says so, and follows nothing (no request at all).
        offline = Viewer(browser, report_file(vision_api, f"/api/v1/traces/{trace_id}/report", tmp_path,
                                              "running").as_uri())
        try:
            assert "still running when this report was made" in offline.page.locator("#run-head").inner_text()
            assert offline.page.locator("#run-live").count() == 0 and offline.page.evaluate(
                "() => document.body.dataset.live === undefined")
            offline.images_loaded()
            assert all(u.startswith(("file:", "data:", "blob:")) for u in offline.requests), offline.requests
        finally:
            offline_errors = offline.close()
        assert not offline_errors, offline_errors

        second.set()
        p.wait_for_function("() => document.querySelectorAll('section.step').length === 2")
        assert "the second click" in p.locator("#step-2 h2").inner_text()
        assert p.evaluate("() => window.sameDocument === true && document.querySelector('#step-1').kept === true")
        assert p.locator("#run-status").inner_text() == "running"
        # The facts in the header follow too: 2 steps of at most 5.
        assert p.locator("ul.facts li").first.inner_text().split()[0] == "2"
        viewer.images_loaded()
        p.locator("#step-2").scroll_into_view_if_needed()
        viewer.shot("live-new-step")

        last.set()
        worker.join(120)
        assert outcome["result"].status == "done", outcome
        # done by the model's word only (the run carried no expect): never shown as a checked success
        p.wait_for_function("() => document.querySelector('#run-status').textContent === 'unverified'")
        assert p.locator("#verdict").inner_text().startswith("Unverified: the run carried no expectation")
        p.wait_for_function("() => document.body.dataset.live === 'false'")
        assert p.evaluate("() => window.sameDocument === true")
        assert p.locator("section.step").count() == 3 and p.locator("#run-live").count() == 0
        assert p.locator("#run-head .box", has_text="Answer: seen as it happened").count() == 1
        evidence = p.locator("#evidence").inner_text()
        assert evidence.startswith("Evidence verified") and "the video's" in evidence, evidence
        exports = [p.locator("#exports a").nth(i).get_attribute("href") for i in range(p.locator("#exports a").count())]
        assert f"/api/v1/traces/{trace_id}/export?format=yaml" in exports and \
            f"/api/v1/traces/{trace_id}/junit.xml" in exports, exports
        viewer.film_ready()  # the sealed film, with a chapter per step
        assert p.locator("#chapters li").count() == 3
        assert p.evaluate("() => document.querySelector('#film').src").startswith("blob:")
        # Followed by asking for the document again (the first load and at least one poll), nothing else.
        polls = [u for u in viewer.requests if u.endswith(f"/api/v1/runs/{trace_id}")]
        assert len(polls) >= 2 and not [u for u in viewer.requests if "/api/v1/events" in u], viewer.requests
        p.evaluate("() => window.scrollTo(0, 0)")
        viewer.shot("live-done")
    finally:
        second.set()
        last.set()
        worker.join(120)
        errors = viewer.close() if viewer else []
    assert not errors, errors


def test_a_running_qa_flow_is_followed_live_until_its_end(vision_api, browser, qa_site, services):
    """A QA flow held at its navigations (the site answers /held when the test opens its gate): the
    steps it has recorded are shown while its case is not written yet, each next one appears, and
    the end arrives with the run's own record of its steps. The held navigations may wait as long
    as a step may (the default 10 s is about what opening the viewer can take on a loaded machine)."""
    run_name = f"held {time.monotonic_ns()}"
    body = {"start_url": qa_site.url("/visual"), "steps": [
        {"action": "click", "selector": "#card"},
        {"action": "navigate", "url": qa_site.url(f"/held?gate={run_name}-a"), "timeout_ms": 110_000},
        {"action": "navigate", "url": qa_site.url(f"/held?gate={run_name}-b"), "timeout_ms": 110_000},
        {"action": "assert", "selector": "#released", "assertion": {"type": "visible"}}]}
    outcome: dict = {}
    worker = threading.Thread(target=lambda: outcome.setdefault(
        "answer", vision_api.post(f"{QA}/verify_user_flow", json=body)), daemon=True)
    worker.start()
    viewer = None
    try:
        def ours():
            for run_id in services.qa.runs.list_ids()[:10]:
                try:
                    records = services.qa.runs.records(run_id)  # ours: its steps name our gates
                except QaRunNotFound:  # made this instant: its first record is not written yet
                    continue
                if records and run_name in str(records[0].get("request")):
                    return run_id
            return None

        run_id = until(ours, "the flow's run")
        until(lambda: sum(r.get("kind") == "step" for r in services.qa.runs.records(run_id)) == 1, "step 1")
        viewer = Viewer(browser, f"{str(vision_api.base_url).rstrip('/')}/runs/{run_id}")
        p = viewer.page
        assert p.locator("#run-status").inner_text() == "running" and p.locator("#run-live").is_visible()
        assert p.locator("section.step").count() == 1 and "click" in p.locator("#step-1 h2").inner_text()
        p.evaluate("() => { window.sameDocument = true; }")
        viewer.shot("live-qa-running")

        qa_site.gate(f"{run_name}-a").set()
        p.wait_for_function("() => document.querySelectorAll('section.step').length === 2")
        assert "navigate" in p.locator("#step-2 h2").inner_text()
        assert p.locator("#run-status").inner_text() == "running"
        assert p.locator("ul.facts li").first.inner_text().split("\n") == ["2", "steps so far"]

        qa_site.gate(f"{run_name}-b").set()
        worker.join(120)
        answer = outcome["answer"].json()
        assert answer["success"] is True, answer
        p.wait_for_function("() => document.querySelector('#run-status').textContent === 'passed'")
        p.wait_for_function("() => document.body.dataset.live === 'false'")
        assert p.evaluate("() => window.sameDocument === true")
        assert p.locator("section.step").count() == 4 and p.locator("#run-live").count() == 0
        assert p.locator("#evidence").inner_text().startswith("Evidence verified")
        p.evaluate("() => window.scrollTo(0, 0)")
        viewer.shot("live-qa-done")
    finally:
        qa_site.gate(f"{run_name}-a").set()
        qa_site.gate(f"{run_name}-b").set()
        worker.join(120)
        errors = viewer.close() if viewer else []
    assert not errors, errors


# ------------------------------------------------------------------------------------ a QA run


def test_a_failed_visual_step_is_reviewed_and_approved_from_the_viewer(vision_api, browser, qa_site, services,
                                                                       tmp_path):
    base = str(vision_api.base_url).rstrip("/")
    captured = vision_api.post(f"{QA}/capture_visual_baseline",
                               json={"url": qa_site.url("/visual"), "name": "viewer-card"})
    assert captured.status_code == 200, captured.text
    version = captured.json()["version"]
    flow = vision_api.post(f"{QA}/verify_user_flow", json={
        "start_url": qa_site.url("/visual"), "record_video": True,
        "steps": [{"action": "navigate", "url": qa_site.url("/visual?left=300")},
                  {"action": "click", "selector": "#card"},
                  {"action": "assert", "assertion": {"type": "visual_matches", "baseline_id": "viewer-card"}}]}).json()
    assert flow["success"] is False and flow["failure_step"] == 3, flow
    point = flow["steps"][1]["detail"]["point"]
    compared = flow["steps"][2]["detail"]
    # The card moved 200 px to the right over its own width of 300: where it was and where it is now
    # differ, the 100 px both cover do not. Two separate regions, both recorded, the largest first.
    regions = [r["box"] for r in compared["diff_regions"]]
    assert compared["shots"][0]["regions"] == 2 and compared["diff_regions_omitted"] == 0, compared
    assert len(regions) == 2, compared
    assert regions[0] == compared["largest_region"]["box"] and regions[0][2] <= regions[1][0], regions
    # A second failed comparison against the same version: stale once the first is approved.
    stale = vision_api.post(f"{QA}/compare_visual_regression",
                            json={"baseline_id": "viewer-card", "url": qa_site.url("/visual?left=300"),
                                  "record_video": True}).json()
    assert stale["passed"] is False, stale
    run_id = flow["test_run_id"]
    chapters = parse_vtt((services.qa.runs.run_dir(run_id) / "chapters.vtt").read_text())
    assert [c["title"][:7] for c in chapters] == ["step 1:", "step 2:", "step 3:"], chapters

    viewer = Viewer(browser, f"{base}/runs/{run_id}")
    try:
        p = viewer.page
        assert p.locator("#evidence").inner_text().startswith("Evidence verified")
        assert p.locator("#run-status").inner_text() == "failed"
        assert p.locator("section.step").count() == 3
        viewer.images_loaded()
        # The click's mark on the pixel the flow clicked.
        assert viewer.mark_centre_error("#step-2 figure[data-which=before] .mark.point", *point) <= 2
        # The review: baseline, current and diff side by side, every region boxed on each.
        review = p.locator("#step-3 .review")
        assert [review.locator("figcaption").nth(i).inner_text() for i in range(3)] == \
            ["Baseline", "Current", "Difference"]
        assert "in 2 region(s); each boxed" in review.locator(".review-shot h3").inner_text()
        # Each box sits on its region's pixels of its shot (the shot's own size, not the display's):
        # its corners read back in image pixels, every rectangle measured at the same moment.
        corners = p.evaluate("""() => [...document.querySelectorAll('#step-3 .review .shot')].map(s => {
            const img = s.querySelector('img').getBoundingClientRect();
            const k = s.querySelector('img').naturalWidth / img.width;
            return [...s.querySelectorAll('.mark.rect')].map(m => {
                const r = m.getBoundingClientRect();
                return [(r.left - img.left) * k, (r.top - img.top) * k, (r.right - img.left) * k,
                        (r.bottom - img.top) * k, k, m.dataset.box];
            });
        })""")
        assert len(corners) == 3, corners  # baseline, current, diff
        for shown in corners:
            assert [box for *_, box in shown] == [",".join(map(str, r)) for r in regions], (shown, regions)
            for (x0, y0, x1, y1, k, _), region in zip(shown, regions):
                assert all(abs(a - b) <= 2 * k for a, b in zip((x0, y0, x1, y1), region)), (shown, region)
        assert "exceeds max_region_pixels" in p.locator("#step-3 .box.error").inner_text()
        viewer.film_ready()
        for number, chapter in enumerate(chapters, 1):
            assert abs(viewer.seek_by_step(f"step-{number}") - chapter["start"]) < 0.05
        review.scroll_into_view_if_needed()
        viewer.shot("qa-review")
        viewer.shot("live-two-regions")
        # The baseline widened to its row (a click), both boxes on it, for a person to look at.
        review.locator(".shot").first.click()
        review.locator("figure.big").screenshot(path=str(ARTIFACTS / "viewer-live-two-regions-baseline.png"))
        review.locator(".shot").first.click()
        review.locator("button.approve").click()
        status = review.locator(".review-status")
        p.wait_for_function("(el) => el.textContent.startsWith('Approved')", arg=status.element_handle())
        assert f"is now version {version + 1}" in status.inner_text()
        assert review.locator("button.approve").is_disabled() and review.locator("button.reject").is_disabled()
        status.scroll_into_view_if_needed()
        viewer.shot("qa-approved")
    finally:
        errors = viewer.close()
    assert not errors, errors
    listed = {b["id"]: b for b in vision_api.get("/api/v1/qa/baselines").json()}
    assert listed["viewer-card"]["version"] == version + 1 and listed["viewer-card"]["approved_from"] == run_id

    # The stale comparison: its approve answers the API's conflict, and the page says it.
    viewer = Viewer(browser, f"{base}/runs/{stale['test_run_id']}")
    try:
        p = viewer.page
        viewer.film_ready()
        assert p.locator("#chapters li").count() == 1
        assert abs(viewer.seek_by_step("step-1")) < 0.5
        review = p.locator("#step-1 .review")
        review.locator("button.approve").click()
        status = review.locator(".review-status")
        p.wait_for_function("(el) => el.textContent.startsWith('baseline_conflict')", arg=status.element_handle())
        assert f"is at version {version + 1} now" in status.inner_text()
        review.scroll_into_view_if_needed()
        viewer.shot("qa-conflict")
    finally:
        errors = viewer.close()
    # The conflict's 409 is the page's expected answer, logged by Chromium as a failed resource.
    assert all("409" in e for e in errors), errors
    assert {b["id"]: b for b in vision_api.get("/api/v1/qa/baselines").json()}["viewer-card"]["version"] == version + 1
    # The console lists QA runs beside the vision runs; each opens in the run viewer.
    console = browser.new_context(viewport={"width": 1600, "height": 1000})
    try:
        page = console.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(f"{base}/#session={SESSION}")
        page.click(".tab[data-tab='qa']")
        row = page.locator(f"#qa-runs-table tr[data-run='{run_id}']")
        row.wait_for()
        assert "verify_user_flow" in row.inner_text() and "failed" in row.inner_text()
        assert page.locator("#qa-runs-table tbody tr").first.get_attribute("data-run") == stale["test_run_id"]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "viewer-console-qa-runs.png"))
        with page.expect_popup() as popup:
            row.locator("button").click()
        opened = popup.value
        opened.wait_for_url("**/runs/*", timeout=WAIT_MS)  # a popup starts as about:blank
        opened.wait_for_function("() => document.body && document.body.dataset.ready === 'true'",
                                 timeout=WAIT_MS)
        assert opened.url.endswith(f"/runs/{run_id}") and opened.locator("section.step").count() == 3
    finally:
        console.close()

    # Damaged evidence still has its report: a file gone is shown missing, and the check says which.
    gone = stale["diff_image"]["name"]
    (services.qa.runs.run_dir(stale["test_run_id"]) / gone).unlink()
    damaged = vision_api.get(f"/api/v1/qa/runs/{stale['test_run_id']}/report")
    assert damaged.status_code == 200 and "Evidence broken" in damaged.text and gone in damaged.text

    # The offline report of the flow: the same steps, images and chapters, no buttons.
    path = report_file(vision_api, f"/api/v1/qa/runs/{run_id}/report", tmp_path, "qa")
    offline = Viewer(browser, path.as_uri())
    try:
        p = offline.page
        assert p.locator("section.step").count() == 3
        sizes = offline.images_loaded()
        assert sizes and all(src.startswith("data:image/png") for _, _, src in sizes)
        assert p.locator("#step-3 .review figcaption").count() == 3
        assert p.locator("#step-3 .review .mark.rect").count() == 6  # both regions, on each of the three
        assert p.locator("#step-3 .review button").count() == 0
        # Approved since: the report says which version it became, and offers nothing.
        assert p.locator("#step-3 .review .approved").inner_text() == \
            f"Approved: this run's images are version {version + 1} of baseline viewer-card."
        offline.film_ready()
        assert p.locator("#chapters li").count() == 3
        assert abs(offline.seek_by_step("step-2") - chapters[1]["start"]) < 0.05
        assert all(url.startswith(("file:", "data:", "blob:")) for url in offline.requests), offline.requests
        offline.page.locator("#step-3").scroll_into_view_if_needed()
        offline.shot("qa-offline")
    finally:
        errors = offline.close()
    assert not errors, errors


def test_the_viewer_needs_the_token_and_works_after_it(manager, desk, services, browser, taken_over_run):
    trace_id = taken_over_run[0]
    with LiveServer(create_app(manager, Settings(token=TOKEN), services)) as live:
        # The console's rules: the page is public code, its document needs the token, and neither
        # answers another Host (DNS rebinding) or a write from another site's page.
        with httpx2.Client(base_url=live.url, timeout=30) as client:
            page_answer = client.get(f"/runs/{trace_id}")
            assert page_answer.status_code == 200 and "media-src 'self' blob:" in \
                page_answer.headers["content-security-policy"]
            assert client.get(f"/api/v1/runs/{trace_id}").status_code == 401
            bearer = {"authorization": f"Bearer {TOKEN}"}
            answer = client.get(f"/api/v1/runs/{trace_id}", headers=bearer)
            assert answer.json()["id"] == trace_id and answer.headers["etag"], answer.headers
            # The live viewer's conditional poll: 304 with the token, and without it the 401 still,
            # never a 304 that would tell a stranger the run exists and whether it changed.
            etag = {"if-none-match": answer.headers["etag"]}
            unchanged = client.get(f"/api/v1/runs/{trace_id}", headers={**bearer, **etag})
            assert unchanged.status_code == 304 and unchanged.content == b"", unchanged
            assert client.get(f"/api/v1/runs/{trace_id}", headers=etag).status_code == 401
            assert client.get(f"/api/v1/runs/{trace_id}", headers={**bearer, "if-none-match": '"x"'}).status_code == 200
            assert client.get(f"/runs/{trace_id}", headers={"host": "evil.example:8080"}).status_code == 421
            assert client.get(f"/api/v1/runs/{trace_id}", headers={**bearer, "host": "evil.example"}).status_code == 421
            assert client.post("/api/v1/qa/baselines/viewer-card/approve", json={"test_run_id": trace_id},
                               headers={**bearer, "origin": "https://evil.example"}).status_code == 403
        context = browser.new_context()
        try:
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(f"{live.url}/runs/{trace_id}")  # the page itself is public code
            page.locator("#token-input").wait_for(state="visible")
            assert page.locator("#run").is_hidden()
            page.fill("#token-input", TOKEN)
            page.locator("#login-form button").click()
            page.wait_for_function("() => document.body.dataset.ready === 'true'")
            assert page.locator("section.step").count() == 4
            page.wait_for_function("() => [...document.images].length === 4 && "
                                   "[...document.images].every(i => i.complete && i.naturalWidth === 1920)")
            # A tab this one opens (as the console opens the viewer) has the token already.
            with page.expect_popup() as popup:
                page.evaluate(f"() => window.open('/runs/{trace_id}', '_blank')")
            opened = popup.value
            opened.wait_for_url("**/runs/*", timeout=WAIT_MS)  # a popup starts as about:blank
            opened.wait_for_function("() => document.body && document.body.dataset.ready === 'true'",
                                     timeout=WAIT_MS)
            assert opened.locator("#login").is_hidden() and opened.locator("section.step").count() == 4
        finally:
            context.close()
