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
    assert "FAILED at step 2" in flow.content[0].text and "no element for selector '#nothing'" in flow.content[0].text
    assert bad.is_error and bad.content[0].text.startswith("invalid_request: steps.0: ") and "name the target" in \
        bad.content[0].text
