"""glassdesk's QA API as `glassdesk qa` calls it: a handler for httpx2.MockTransport, no server.

Each verb request (a POST) is a run of its own, passed unless ``fails(body, attempt)`` says
otherwise (``attempt``: how many requests for a test of that name there were, this one included),
its failure reason ``reason(body)``. A run is read back by its id; an artifact is a one-pixel PNG.
Every request is kept. A test that wants other answers sets ``on_post`` (the answer to the n-th verb
request) and ``run`` (what a run this fake did not make reads as).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import httpx2

from vision.models.qa import QaRun, TestCase

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
                       "rkJggg==")


class QaApi:
    def __init__(self, fails: Callable[[dict, int], bool] = lambda body, attempt: False,
                 reason: Callable[[dict], str] = lambda body: f"{body['name']} went wrong"):
        self.fails, self.reason = fails, reason
        self.seen: list[httpx2.Request] = []
        self.posts: list[tuple[str, dict]] = []  # each verb request's verb and body, in order
        self.runs: dict[str, dict] = {}
        self.on_post: Callable[[int], httpx2.Response] | None = None
        self.run: dict | None = None

    @property
    def bodies(self) -> list[dict]:
        return [body for _, body in self.posts]

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(request)
        if request.url.path == "/healthz":
            return httpx2.Response(200, json={"ok": True})
        if request.method == "POST":
            body = json.loads(request.content)
            verb = request.url.path.rsplit("/", 1)[1]
            self.posts.append((verb, body))
            if self.on_post is not None:
                return self.on_post(len(self.posts))
            run_id = f"20260101T000000000000Z-{len(self.posts):08x}"
            attempt = sum(1 for b in self.bodies if b["name"] == body["name"])
            status = "failed" if self.fails(body, attempt) else "passed"
            self.runs[run_id] = QaRun(
                test_run_id=run_id, verb=verb, name=body["name"], timestamp="2026-01-01T00:00:00.000Z", status=status,
                test_cases=[TestCase(name=body["name"], status=status, duration_ms=1,
                                     failure_reason=self.reason(body) if status == "failed" else None)],
            ).model_dump(mode="json")
            return httpx2.Response(200, json={"test_run_id": run_id})
        if "/artifacts/" in request.url.path:
            return httpx2.Response(200, content=PNG)
        return httpx2.Response(200, json=self.runs.get(request.url.path.rsplit("/", 1)[1], self.run))
