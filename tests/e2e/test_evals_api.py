"""POST /api/v1/evals: an evaluation run by the server in the background, its progress, its result
kept where `glassdesk eval --baseline` finds it; a bad request refused whole (vision.eval.service)."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.x11


def test_an_evaluation_runs_in_the_background_and_its_result_is_kept(vision_api, services):
    refused = vision_api.post("/api/v1/evals", json={"tasks": [{"id": "a", "instruction": "x"}],
                                                     "models": ["oracle", "oracle"]})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_request"
    message = refused.json()["error"]["message"]
    for problem in ("oracle solves MiniWoB++'s tasks only", "each once", "task 1 (a): expect"):
        assert problem in message, message  # every problem at once
    assert vision_api.get("/api/v1/evals/eval-2026-01-01-abcdef").json()["error"]["code"] == "eval_not_found"

    started = vision_api.post("/api/v1/evals", json={"tasks": "miniwob:click-test,focus-text", "models": ["oracle"],
                                                     "episodes": 2, "fresh": "clear"})
    assert started.status_code == 202, started.text
    eval_id = started.json()["eval_id"]
    assert started.json()["episodes_total"] == 4 and started.json()["status"] == "running"
    deadline = time.monotonic() + 240
    while (status := vision_api.get(f"/api/v1/evals/{eval_id}").json())["status"] == "running":
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    assert status["status"] == "done", status
    result = status["result"]
    assert [(r["task"], r["successes"], r["episodes"]) for r in result["rates"]] == [
        ("click-test", 2, 2), ("focus-text", 2, 2), (None, 4, 4)]
    assert all(e["reward"]["raw"] == 1.0 and e["trace_id"] for e in result["episodes"])
    assert (services.store.root / "evals" / eval_id / "result.json").is_file()
    assert eval_id in [e["eval_id"] for e in vision_api.get("/api/v1/evals").json()]
    metrics = vision_api.get("/metrics").text  # each model's episodes, for a success rate watched over time
    for task in ("click-test", "focus-text"):
        assert f'glassdesk_eval_episodes_total{{model="oracle",outcome="success",task="{task}"}} 2.0' in metrics
