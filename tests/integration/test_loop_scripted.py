"""The vision loop end to end with the scripted provider on the real desktop."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from tests.fakes.testpage import at

pytestmark = pytest.mark.x11


def test_scripted_run_clicks_types_and_finishes_with_a_trace(vision_api, page, viewport, services):
    bx, by = at(viewport, 1260, 145)   # the Sign in button
    fx, fy = at(viewport, 300, 280)    # the text field
    script = [
        {"action": "click", "x": bx, "y": by},
        {"action": "click", "x": fx, "y": fy},
        {"action": "type", "text": "hi {{word}}"},
        {"action": "done", "answer": "signed in"},
    ]
    r = vision_api.post("/api/v1/sessions/itest/vision/act",
                        json={"instruction": "sign in", "model": "scripted", "script": script,
                              "secrets": {"word": "s3cr3t-value"}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done" and body["answer"] == "signed in"
    assert [s["index"] for s in body["steps"]] == [1, 2, 3, 4]
    click = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (click["screenX"], click["screenY"]) == (bx, by)
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "hi s3cr3t-value")
    assert body["steps"][0]["executed"][0][0] == "xdotool"
    shot = Image.open(io.BytesIO(base64.b64decode(body["final_screenshot"])))
    assert shot.size == (1920, 1080)
    # The typed secret reached the page, but not the response or the trace.
    assert "s3cr3t-value" not in r.text
    trace_dir = services.store.trace_dir(body["trace_id"])
    for file in trace_dir.iterdir():
        assert b"s3cr3t-value" not in file.read_bytes(), file.name
    assert services.store.verify(body["trace_id"]).ok
    trace = vision_api.get(f"/api/v1/traces/{body['trace_id']}").json()
    assert trace["meta"]["status"] == "done" and len(trace["steps"]) == 4
    # What ended each action's wait, the same in the answer and the trace; the browser was in front,
    # so it decided (its frames, then the damage they made, or the requests the input started), and
    # the done step acted on nothing.
    decided = [s["settled_by"] for s in body["steps"]]
    assert decided == [s["settled_by"] for s in trace["steps"]]
    assert [len(d) for d in decided] == [1, 1, 1, 0] and {d[0] for d in decided[:3]} <= {"damage", "network"}
    png = vision_api.get(f"/api/v1/traces/{body['trace_id']}/steps/1/after.png")
    assert png.headers["content-type"] == "image/png"
    report = vision_api.get(f"/api/v1/traces/{body['trace_id']}/report")
    assert report.status_code == 200 and "sign in" in report.text


def test_a_secret_in_the_answer_is_redacted_in_the_response_and_events(vision_api, desk, services):
    """The model may read a typed secret back off the screen: its answer leaves redacted too."""
    seen = services.bus.recent()[-1]["seq"] if services.bus.recent() else 0
    r = vision_api.post("/api/v1/sessions/itest/vision/act",
                        json={"instruction": "report", "model": "scripted", "secrets": {"pw": "s3cr3t-answer"},
                              "script": [{"action": "done", "answer": "the field shows s3cr3t-answer"}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done" and body["answer"] == "the field shows [REDACTED]"
    assert "s3cr3t-answer" not in r.text
    finished = [e for e in services.bus.recent(seen) if e["kind"] == "run_finished"]
    assert finished and finished[-1]["answer"] == "the field shows [REDACTED]"
    assert services.store.load(body["trace_id"]).meta.answer == "the field shows [REDACTED]"
