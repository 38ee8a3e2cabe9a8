"""The QA verbs over REST on the real desktop, against a local site of their own
(tests/fakes/qa_site.py): page loads, flows passing and failing at step k, console errors, an act
step with the scripted provider, evidence that verifies (and stops verifying when a byte flips),
JUnit that parses, bad input refused with nothing created."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.fakes.qa_site import QaSite

pytestmark = pytest.mark.x11

QA = "/api/v1/sessions/itest/qa"


@pytest.fixture(scope="module")
def qa_site():
    served = QaSite()
    yield served
    served.close()


@pytest.fixture
def runs_dir(services):
    return services.qa.runs.runs_dir


def run_ids(runs_dir) -> set[str]:
    return {p.name for p in runs_dir.iterdir()} if runs_dir.is_dir() else set()


def test_a_page_that_loads_passes_with_its_evidence(vision_api, qa_site, services):
    r = vision_api.post(f"{QA}/verify_page_loads", json={"url": qa_site.url("/"), "expected_title": "qa home"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True and body["status_code"] == 200 and body["title"] == "qa home", body
    assert body["reason"] is None and body["load_time_ms"] >= 0
    assert body["screenshot"]["sha256"] and body["screenshot"]["path"].endswith(".png")
    png = vision_api.get(body["screenshot"]["path"])
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    import hashlib

    assert hashlib.sha256(png.content).hexdigest() == body["screenshot"]["sha256"]
    run = vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}").json()
    assert run["status"] == "passed" and run["summary"] == {"total": 1, "passed": 1, "failed": 0, "error": 0,
                                                            "skipped": 0}
    assert run["timestamp"].endswith("Z") and run["duration_ms"] >= body["load_time_ms"]
    assert vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}/verify").json() == {
        "ok": True, "problems": [], "records_checked": 4, "files_checked": 1}


@pytest.mark.parametrize("path, title, why", [
    ("/", "another title", "title 'qa home', expected 'another title'"),
    ("/nothing-here", None, "HTTP 404"),
])
def test_a_page_that_does_not_load_as_expected_is_a_200_with_the_reason(vision_api, qa_site, path, title, why):
    r = vision_api.post(f"{QA}/verify_page_loads", json={"url": qa_site.url(path), "expected_title": title})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is False and why in body["reason"], body
    run = vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}").json()
    assert run["status"] == "failed" and run["test_cases"][0]["failure_reason"] == body["reason"]


def test_an_unreachable_host_is_a_200_with_the_reason(vision_api):
    r = vision_api.post(f"{QA}/verify_page_loads", json={"url": "http://127.0.0.1:9/", "timeout_ms": 5000})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is False and "did not load" in body["reason"] and "ERR_" in body["reason"], body


def test_a_flow_passes_with_real_input_and_a_screenshot_per_step(vision_api, qa_site, services):
    qa_site.clear()
    flow = {"start_url": qa_site.url("/login"), "name": "login works", "secrets": {"pw": "right"},
            "steps": [{"action": "fill", "selector": "#user", "value": "ada"},
                      {"action": "fill", "label": "Password", "value": "{{pw}}"},
                      {"action": "click", "text": "Sign in"},
                      {"action": "assert", "assertion": {"type": "url_matches", "expected": "/welcome"}},
                      {"action": "assert", "selector": "#who", "assertion": {"type": "text_contains",
                                                                               "expected": "ada"}}],
            "success_condition": {"text": "Welcome"}}
    r = vision_api.post(f"{QA}/verify_user_flow", json=flow)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True, body
    assert body["steps_completed"] == 5 and body["failure_step"] is None and body["failure_reason"] is None
    assert len(body["screenshots"]) >= 5 and body["trace_id"] == body["test_run_id"]
    signed_in = qa_site.wait_for(lambda e: e.get("type") == "signin")
    assert signed_in["user"] == "ada" and signed_in["pw"] == "right"
    # The click on the button was real input at the button's pixel, found in the DOM.
    assert body["steps"][2]["detail"]["found_by"] == "dom"
    # The secret reached the page, but neither the answer nor the evidence.
    assert '"right"' not in r.text
    run_dir = services.qa.runs.run_dir(body["test_run_id"])
    for file in run_dir.iterdir():
        assert b'"right"' not in file.read_bytes(), file.name
    run = vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}").json()
    case = run["test_cases"][0]
    assert case["name"] == "login works" and case["status"] == "passed" and len(case["steps"]) == 5
    assert all(s["before"] and s["after"] for s in case["steps"])
    assert vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}/verify").json()["ok"] is True
    report = vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}/report")
    assert report.status_code == 200 and "login works" in report.text and "Evidence verified" in report.text


def test_a_flow_failing_at_step_k_says_k_and_leaves_the_failure(vision_api, qa_site):
    flow = {"start_url": qa_site.url("/login"),
            "steps": [{"action": "fill", "selector": "#user", "value": "ada"},
                      {"action": "assert", "selector": "#user", "timeout_ms": 500,
                       "assertion": {"type": "value_equals", "expected": "grace"}},
                      {"action": "click", "selector": "#go"}]}
    r = vision_api.post(f"{QA}/verify_user_flow", json=flow)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is False and body["failure_step"] == 2 and body["steps_completed"] == 1, body
    assert "value 'ada'" in body["failure_reason"] and "grace" in body["failure_reason"]
    failing = body["steps"][1]
    assert failing["status"] == "failed" and failing["attempts"] == 1  # an assertion is never retried
    assert failing["after"].startswith("step-002-failure") and "console" in failing["detail"]
    assert len(body["steps"]) == 2  # step 3 never ran
    run_id = body["test_run_id"]
    junit = vision_api.get(f"/api/v1/qa/runs/{run_id}/junit.xml")
    suite = ET.fromstring(junit.text).find("testsuite")
    assert suite.get("tests") == "1" and suite.get("failures") == "1"
    failure = suite.find("testcase").find("failure")
    assert "step 2" in failure.get("message") and "grace" in failure.get("message")
    assert f"/api/v1/qa/runs/{run_id}/artifacts/{failing['after']}" in suite.find("testcase").find("system-out").text


def test_verify_catches_a_flipped_byte_in_a_screenshot(vision_api, qa_site, services):
    body = vision_api.post(f"{QA}/verify_page_loads", json={"url": qa_site.url("/")}).json()
    run_id = body["test_run_id"]
    path = services.qa.runs.run_dir(run_id) / body["screenshot"]["name"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x80
    path.write_bytes(bytes(data))
    check = vision_api.get(f"/api/v1/qa/runs/{run_id}/verify").json()
    assert check["ok"] is False and check["problems"] == [f"artifact {body['screenshot']['name']}: does not match "
                                                          "its SHA-256"]
    assert "Evidence broken" in vision_api.get(f"/api/v1/qa/runs/{run_id}/report").text


@pytest.mark.parametrize("old, new", [(b'"ts":"20', b'"ts":"X0'), (b'"status":"passed"', b'"status":"passex"')])
def test_an_edited_manifest_is_verify_problems_and_a_typed_error_never_a_5xx(vision_api, qa_site, services, old, new):
    run_id = vision_api.post(f"{QA}/verify_page_loads", json={"url": qa_site.url("/")}).json()["test_run_id"]
    manifest = services.qa.runs.run_dir(run_id) / "manifest.jsonl"
    manifest.write_bytes(manifest.read_bytes().replace(old, new, 1))
    check = vision_api.get(f"/api/v1/qa/runs/{run_id}/verify")
    assert check.status_code == 200 and check.json()["ok"] is False and check.json()["problems"], check.text
    for path in ("", "/junit.xml", "/report"):
        answer = vision_api.get(f"/api/v1/qa/runs/{run_id}{path}")
        assert answer.status_code == 409 and answer.json()["error"]["code"] == "qa_run_corrupt", (path, answer.text)


def test_console_errors_with_and_without_ignore_patterns(vision_api, qa_site):
    r = vision_api.post(f"{QA}/analyze_console_errors", json={"url": qa_site.url("/console")})
    assert r.status_code == 200, r.text
    body = r.json()
    messages = [e["message"] for e in body["errors"]]
    assert body["has_errors"] is True and body["ignored"] == 0
    assert any("analytics: tracker blocked" in m for m in messages)
    assert any("qa: real failure number 1" in m for m in messages)
    assert any("qa: uncaught boom" in m for m in messages)
    assert [w["message"] for w in body["warnings"]] == ["qa: a warning"]
    assert all(e["source"].startswith(qa_site.url("/")) or e["source"] == "" for e in body["errors"])
    ignored = vision_api.post(f"{QA}/analyze_console_errors",
                              json={"url": qa_site.url("/console"), "ignore_patterns": ["^analytics:", "warning"]})
    body = ignored.json()
    assert body["ignored"] == 2 and body["warnings"] == []
    assert not any("analytics" in e["message"] for e in body["errors"]) and len(body["errors"]) == 2
    quiet = vision_api.post(f"{QA}/analyze_console_errors",
                            json={"url": qa_site.url("/quiet"), "ignore_patterns": ["^analytics:"]}).json()
    assert quiet["has_errors"] is False and quiet["errors"] == [] and quiet["ignored"] == 1
    run = vision_api.get(f"/api/v1/qa/runs/{quiet['test_run_id']}").json()
    assert run["status"] == "passed"


def test_an_act_step_runs_the_vision_loop_with_the_scripted_provider(vision_api, qa_site, services):
    flow = {"start_url": qa_site.url("/login"),
            "steps": [{"action": "click", "selector": "#user"},
                      {"action": "act", "instruction": "type the user name", "model": "scripted",
                       "script": [{"action": "type", "text": "from-act"}, {"action": "done", "answer": "typed"}]},
                      {"action": "assert", "selector": "#user",
                       "assertion": {"type": "value_equals", "expected": "from-act"}}]}
    r = vision_api.post(f"{QA}/verify_user_flow", json=flow)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True, body
    assert len(body["act_traces"]) == 1 and body["steps"][1]["detail"]["answer"] == "typed"
    trace_id = body["act_traces"][0]
    assert services.store.verify(trace_id).ok
    run = vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}").json()
    assert run["artifacts"]["traces"][0]["trace_id"] == trace_id


@pytest.mark.parametrize("verb, body, status, code", [
    ("verify_user_flow", {"start_url": "http://x/", "steps": [{"action": "jump"}]}, 422, "invalid_request"),
    ("compare_visual_regression", {"baseline_id": "home", "threshold": -0.5}, 422, "invalid_request"),
    ("capture_visual_baseline", {"name": "../escape"}, 422, "invalid_request"),
    ("verify_page_loads", {"url": "gopher://example.test/"}, 422, "invalid_action"),
    ("verify_element_exists", {}, 422, "invalid_request"),
])
def test_bad_input_is_a_clear_4xx_and_creates_nothing(vision_api, runs_dir, verb, body, status, code):
    before = run_ids(runs_dir)
    r = vision_api.post(f"{QA}/{verb}", json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code, r.text
    assert run_ids(runs_dir) == before


def test_unknown_runs_and_artifacts_are_404_and_bad_names_422(vision_api, qa_site):
    assert vision_api.get("/api/v1/qa/runs/nope").json()["error"]["code"] == "qa_run_not_found"
    body = vision_api.post(f"{QA}/verify_page_loads", json={"url": qa_site.url("/")}).json()
    missing = vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}/artifacts/other.png")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "qa_run_not_found"
    for bad in ("..%2Fmeta.json", ".hidden", "manifest.jsonl"):
        answer = vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}/artifacts/{bad}")
        assert 400 <= answer.status_code < 500, (bad, answer.text)
    assert vision_api.get("/api/v1/qa/runs/..%2F..%2Fetc/verify").status_code in (404, 422)


def test_the_verbs_are_mcp_tools_with_the_same_answers(services, desk, qa_site):
    import anyio
    from mcp import Client
    from mcp.types import ImageContent

    from vision.mcp import build_server

    server = build_server(services)

    async def calls():
        async with Client(server) as client:
            loaded = await client.call_tool("verify_page_loads", {"url": qa_site.url("/"), "expected_title": "qa home",
                                                                  "session": "itest"})
            flow = await client.call_tool("verify_user_flow", {
                "start_url": qa_site.url("/login"), "session": "itest",
                "steps": [{"action": "click", "selector": "#user"},
                          {"action": "assert", "selector": "#nothing", "timeout_ms": 300,
                           "assertion": {"type": "exists"}}]})
            bad = await client.call_tool("verify_user_flow", {"start_url": qa_site.url("/"), "session": "itest",
                                                              "steps": [{"action": "click"}]})
            return loaded, flow, bad

    loaded, flow, bad = anyio.run(calls)
    assert not loaded.is_error and loaded.structured_content["success"] is True
    assert loaded.content[0].text.startswith("loaded: HTTP 200, title 'qa home'")
    assert isinstance(loaded.content[1], ImageContent)
    assert services.qa.runs.verify(loaded.structured_content["test_run_id"]).ok
    assert not flow.is_error and flow.structured_content["failure_step"] == 2
    assert "FAILED at step 2" in flow.content[0].text
    assert "selector '#nothing': expected exists; saw 0 matches" in flow.content[0].text
    assert bad.is_error and bad.content[0].text.startswith("invalid_request: steps.0: ") and "name the target" in \
        bad.content[0].text


# ------------------------------------------------------------------------------- OCR and visual


def test_a_flow_clicks_text_drawn_on_a_canvas_found_by_ocr(vision_api, qa_site):
    qa_site.clear()
    flow = {"start_url": qa_site.url("/canvas"),
            "steps": [{"action": "click", "text": "Launch", "timeout_ms": 15_000},
                      {"action": "assert", "selector": "#state",
                       "assertion": {"type": "text_contains", "expected": "launched"}}],
            "success_condition": {"screen_text": "launched"}}
    r = vision_api.post(f"{QA}/verify_user_flow", json=flow)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True, body
    clicked = body["steps"][0]["detail"]
    assert clicked["found_by"] == "ocr"  # no DOM element has the word
    hit = qa_site.wait_for(lambda e: e.get("type") == "canvas_click")
    assert hit["hit"] is True and [hit["screenX"], hit["screenY"]] == clicked["point"]


def test_visual_text_not_on_screen_says_what_was_read(vision_api, qa_site):
    flow = {"start_url": qa_site.url("/canvas"), "steps": [{"action": "click", "text": "Takeoff", "timeout_ms": 2500}]}
    body = vision_api.post(f"{QA}/verify_user_flow", json=flow).json()
    assert body["success"] is False and body["failure_step"] == 1
    assert "nor on the screen" in body["failure_reason"] and "Launch" in body["failure_reason"], body


def capture(vision_api, name, url, **extra):
    r = vision_api.post(f"{QA}/capture_visual_baseline", json={"name": name, "url": url, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def compare(vision_api, baseline_id, url, **extra):
    r = vision_api.post(f"{QA}/compare_visual_regression", json={"baseline_id": baseline_id, "url": url, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_one_unit_colour_change_passes_and_a_moved_element_fails_with_a_diff(vision_api, qa_site, services):
    import io

    import numpy as np
    from PIL import Image

    base = capture(vision_api, "card", qa_site.url("/visual?red=200"))
    assert base["version"] >= 1 and [s["name"] for s in base["screenshots"]] == ["page"]
    same = compare(vision_api, "card", qa_site.url("/visual?red=201"))
    assert same["passed"] is True and same["diff_image"] is None
    assert same["baseline_sha256"] != same["current_sha256"]  # the pixels did change, by one unit
    moved = compare(vision_api, "card", qa_site.url("/visual?left=160"))
    assert moved["passed"] is False and moved["diff_pixels"] > 1000, moved
    diff = Image.open(io.BytesIO(vision_api.get(moved["diff_image"]["path"]).content)).convert("RGB")
    pixels = np.asarray(diff)
    red = (pixels[:, :, 0] > 200) & (pixels[:, :, 1] < 80) & (pixels[:, :, 2] < 80)
    ys, xs = np.nonzero(red)
    # The card moved 60 px right: the changes are its left and right edges' strips, and nothing else.
    assert 95 <= xs.min() <= 105 and 455 <= xs.max() <= 465 and 145 <= ys.min() and ys.max() <= 355, \
        (xs.min(), xs.max(), ys.min(), ys.max())
    report = vision_api.get(f"/api/v1/qa/runs/{moved['test_run_id']}/report").text
    assert "Baseline" in report and "Current" in report and "Difference" in report
    # The review loop: the failed comparison's current image becomes the next version.
    approved = vision_api.post("/api/v1/qa/baselines/card/approve", json={"test_run_id": moved["test_run_id"]})
    assert approved.status_code == 200, approved.text
    assert approved.json()["version"] == base["version"] + 1
    assert approved.json()["screenshots"][0]["sha256"] == moved["current_sha256"]
    listed = {b["id"]: b for b in vision_api.get("/api/v1/qa/baselines").json()}
    assert listed["card"]["version"] == base["version"] + 1 and listed["card"]["approved_from"] == moved["test_run_id"]
    assert compare(vision_api, "card", qa_site.url("/visual?left=160"))["passed"] is True
    again = vision_api.post("/api/v1/qa/baselines/card/approve", json={"test_run_id": same["test_run_id"]})
    assert again.status_code == 422 and again.json()["error"]["code"] == "invalid_request"
    twice = vision_api.post("/api/v1/qa/baselines/card/approve", json={"test_run_id": moved["test_run_id"]})
    assert twice.status_code == 409 and twice.json()["error"]["code"] == "baseline_conflict", twice.text


def test_a_changing_clock_fails_unmasked_and_passes_once_masked(vision_api, qa_site):
    # threshold 0: a clock's few changed digits are well under the default 1 % of the viewport.
    capture(vision_api, "clock-bare", qa_site.url("/visual?clock=1"))
    bare = compare(vision_api, "clock-bare", qa_site.url("/visual?clock=1"), threshold=0)
    assert bare["passed"] is False and bare["diff_pixels"] > 0
    masked = capture(vision_api, "clock-masked", qa_site.url("/visual?clock=1"), mask=["#clock"])
    assert len(masked["mask_boxes"]) == 1
    assert compare(vision_api, "clock-masked", qa_site.url("/visual?clock=1"), threshold=0)["passed"] is True
    # A mask given at comparison time works the same.
    assert compare(vision_api, "clock-bare", qa_site.url("/visual?clock=1"), threshold=0,
                   mask=["#clock"])["passed"] is True


def test_a_display_baseline_masks_the_panel_and_its_clock(vision_api, qa_site):
    base = capture(vision_api, "whole-display", qa_site.url("/visual"), display=True)
    assert base["scope"] == "display" and [0, 1051, 1920, 1080] in base["mask_boxes"]
    assert compare(vision_api, "whole-display", qa_site.url("/visual"))["passed"] is True


def test_visual_matches_in_a_flow_and_a_missing_baseline_is_404(vision_api, qa_site, runs_dir):
    capture(vision_api, "flow-card", qa_site.url("/visual"))
    flow = {"start_url": qa_site.url("/visual?left=300"),
            "steps": [{"action": "navigate", "url": qa_site.url("/visual")},
                      {"action": "assert", "assertion": {"type": "visual_matches", "baseline_id": "flow-card"}},
                      {"action": "navigate", "url": qa_site.url("/visual?left=300")},
                      {"action": "assert", "assertion": {"type": "visual_matches", "baseline_id": "flow-card"}}]}
    body = vision_api.post(f"{QA}/verify_user_flow", json=flow).json()
    assert body["failure_step"] == 4 and "of pixels differ" in body["failure_reason"], body
    before = run_ids(runs_dir)
    r = vision_api.post(f"{QA}/compare_visual_regression", json={"baseline_id": "no-such-baseline"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "baseline_not_found", r.text
    assert run_ids(runs_dir) == before


def test_text_re_rendered_at_a_sub_pixel_offset_passes_only_with_anti_aliasing_ignored(vision_api, qa_site):
    # Half a pixel moves every glyph edge (its anti-aliasing); a tolerance of 0.01 % of the page
    # (about 180 pixels) is far below that and far above what is left once anti-aliasing is ignored.
    capture(vision_api, "heading", qa_site.url("/visual?heading=100"))
    shifted = qa_site.url("/visual?heading=100.5")
    strict = compare(vision_api, "heading", shifted, threshold=0.0001, ignore_antialiasing=False)
    loose = compare(vision_api, "heading", shifted, threshold=0.0001)
    assert strict["passed"] is False and loose["passed"] is True, (strict["diff_pixels"], loose["diff_pixels"])
    assert loose["diff_pixels"] * 20 < strict["diff_pixels"]


def test_record_video_films_the_display_and_lists_it_with_its_hash(vision_api, qa_site, services):
    import hashlib
    import json
    import subprocess

    body = vision_api.post(f"{QA}/verify_user_flow", json={
        "start_url": qa_site.url("/visual"), "record_video": True,
        "steps": [{"action": "navigate", "url": qa_site.url("/visual?left=400")},
                  {"action": "navigate", "url": qa_site.url("/visual?left=700")}]}).json()
    assert body["success"] is True and body["video"]["name"] == "video.webm", body
    run = vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}").json()
    assert run["artifacts"]["videos"] == [body["video"]]
    path = services.qa.runs.run_dir(body["test_run_id"]) / "video.webm"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == body["video"]["sha256"]
    probe = json.loads(subprocess.run(["ffprobe", "-v", "error", "-show_streams", "-of", "json", str(path)],
                                      capture_output=True, text=True, check=True).stdout)
    stream = probe["streams"][0]
    assert (stream["width"], stream["height"]) == (1920, 1080)
    assert vision_api.get(f"/api/v1/qa/runs/{body['test_run_id']}/verify").json()["ok"] is True
    # Off by default: no video, nothing started.
    plain = vision_api.post(f"{QA}/verify_page_loads", json={"url": qa_site.url("/")}).json()
    assert vision_api.get(f"/api/v1/qa/runs/{plain['test_run_id']}").json()["artifacts"]["videos"] == []
