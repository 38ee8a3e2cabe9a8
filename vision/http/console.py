"""The operator console: a web page to watch, steer and audit the agent, and the API it uses.

``install_console(app, glassdesk)`` adds:

- ``GET /``                         the console page (static HTML; holds no secret, loads without auth)
- ``GET  /api/v1/console/info``     what the start form offers (models), feature switches
- ``GET  /api/v1/console/sessions`` every session with its current or last run (a snapshot)
- ``GET  /api/v1/sessions/{id}/live``      a view-only live-view token (and link) for the session
- ``POST /api/v1/sessions/{id}/takeover``  {"on": true}: pause the agent, get a control token (every
                                           control token issued before is revoked);
                                           {"on": false}: revoke it, resume the agent, get a view token
- ``GET  /api/v1/events``           Server-Sent Events from the EventBus, replaying recent ones
- ``GET  /api/v1/stats``            per-model statistics computed from the trace store
- ``GET  /runs/{id}``                the run viewer (static page; vision/static/run.js), for a vision or QA run
- ``GET  /api/v1/runs/{id}``         that run as the viewer's document (vision.evidence.runview)
- ``GET  /api/v1/console/qa-runs``   the latest QA runs, for the console's QA runs tab
- ``GET  /metrics``                 Prometheus exposition (vision.app.metrics)

Auth: with GLASSDESK_TOKEN set, everything but ``/``, ``/console/*`` (public code) and /healthz
needs ``Authorization: Bearer``. The page asks for the token, keeps it in sessionStorage and sends
it on every fetch, the event stream included (a fetch-read stream, not EventSource, which cannot
send headers). Live-view tokens reach the browser only as answers to those authenticated calls; a
control token only when the operator takes over. The live view itself goes through the server's
RFB relay (vision.http.viewer), and its JS and CSS, like noVNC's, are served by vision.http.viewer.mount_static.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse

from desktop.errors import StackError
from desktop.models import LiveView
from desktop.session.stack import novnc_dir
from vision import VERSION
from vision.app.service import Glassdesk
from vision.config import DEFAULT_ANTHROPIC, DEFAULT_GEMINI, DEFAULT_OPENAI
from vision.evidence.runview import qa_run_list, run_etag, run_view
from vision.models import MAX_STEPS_CAP, RunView, TakeoverRequest
from vision.run.observers import latest_seq
from vision.trace.records import FINAL_STATUSES, TraceMeta
from vision.trace.store import TraceStore

log = logging.getLogger("glassdesk.console")

STATIC = Path(__file__).parent.parent / "static"
KEEPALIVE_S = 15.0
# The console page talks to its own origin only (the live view is relayed by the server, so its
# websocket is same-origin too). No inline script, no framing. Inline style is still allowed: the
# trace report used to open as a blob: document of this page, styled inline; the console now opens
# the run viewer (/runs/{id}) instead, and dropping 'unsafe-inline' is a change of its own to test.
# The console builds its DOM with textContent only, so no markup is injected.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' blob: data:; "
       "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
       "form-action 'none'; frame-ancestors 'none'")
PAGE_HEADERS = {"content-security-policy": CSP, "cache-control": "no-store", "referrer-policy": "no-referrer",
                "x-content-type-options": "nosniff", "x-frame-options": "DENY"}
# The run viewer's page: the console's policy, and a film played from a blob: URL (fetched with the
# token, which a <video src> cannot send), its chapter and caption tracks too.
RUN_CSP = CSP.replace("img-src 'self' blob: data:;", "img-src 'self' blob: data:; media-src 'self' blob: data:;")
RUN_PAGE_HEADERS = {**PAGE_HEADERS, "content-security-policy": RUN_CSP}


# ------------------------------------------------------------------------------------ statistics


def trace_summary(meta: TraceMeta, steps: list) -> dict[str, Any]:
    """What the statistics need from one finished trace."""
    timed = [s for s in steps if s.model_ms is not None]
    return {
        "model": meta.model, "status": meta.status, "steps": meta.steps,
        "tokens": meta.usage.input_tokens + meta.usage.output_tokens,
        "step_ms": [(s.model_ms or 0) + (s.exec_ms or 0) + (s.settle_ms or 0) for s in timed],
        "model_ms": [s.model_ms or 0 for s in timed if s.model_ms],
        "exec_ms": [s.exec_ms or 0 for s in timed],
        "settle_ms": [s.settle_ms or 0 for s in timed],
        "duration_s": meta.duration_s,
    }


def model_stats(summaries: list[dict[str, Any]], running: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Per model: runs, done rate, mean steps / tokens / step latency. Pure; newest model first."""
    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 1) if values else None

    by_model: dict[str, list[dict]] = {}
    for summary in summaries:
        by_model.setdefault(summary["model"], []).append(summary)
    out = []
    for model in sorted(set(by_model) | set(running or {})):
        runs = by_model.get(model, [])
        statuses: dict[str, int] = {}
        for r in runs:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        done = statuses.get("done", 0)
        step_ms = [v for r in runs for v in r["step_ms"]]
        out.append({
            "model": model, "runs": len(runs), "running": (running or {}).get(model, 0), "done": done,
            "done_rate": round(done / len(runs), 3) if runs else None, "statuses": statuses,
            "mean_steps": mean([r["steps"] for r in runs]), "mean_tokens": mean([r["tokens"] for r in runs]),
            "mean_step_ms": mean(step_ms), "steps_timed": len(step_ms),
            "mean_model_ms": mean([v for r in runs for v in r["model_ms"]]),
            "mean_exec_ms": mean([v for r in runs for v in r["exec_ms"]]),
            "mean_settle_ms": mean([v for r in runs for v in r["settle_ms"]]),
            "mean_duration_s": mean([r["duration_s"] for r in runs if r["duration_s"] is not None]),
        })
    return out


class StatsCache:
    """Finished traces never change: summarise each once."""

    def __init__(self, store: TraceStore):
        self.store = store
        self._done: dict[str, dict] = {}
        self._lock = threading.Lock()

    def compute(self) -> list[dict[str, Any]]:
        summaries: list[dict[str, Any]] = []
        running: dict[str, int] = {}
        for meta in self.store.list_traces():
            if meta.status in ("running", "needs_confirmation"):
                running[meta.model] = running.get(meta.model, 0) + 1
                continue
            with self._lock:
                summary = self._done.get(meta.trace_id)
            if summary is None:
                try:
                    summary = trace_summary(meta, self.store.load(meta.trace_id).steps)
                except Exception:  # an unreadable trace: count the run, not its steps
                    summary = trace_summary(meta, [])
                with self._lock:
                    self._done[meta.trace_id] = summary
            summaries.append(summary)
        return model_stats(summaries, running)


# ------------------------------------------------------------------------------------ HTTP


def _run_view(view: RunView | None, meta: TraceMeta | None) -> dict[str, Any] | None:
    """The run in this process if there is one, else the session's last trace on disk."""
    if view is not None:
        return view.model_dump(mode="json")
    if meta is None:
        return None
    return RunView(trace_id=meta.trace_id, status=meta.status, instruction=meta.instruction, model=meta.model,
                   step=meta.steps, max_steps=meta.max_steps, tokens=meta.usage.input_tokens + meta.usage.output_tokens,
                   active=False, answer=meta.answer,
                   error=meta.error.model_dump() if meta.error else None).model_dump(mode="json")


def _model_choices(config) -> tuple[list[str], str | None]:
    choices = ["scripted", "ocr"]
    if os.environ.get("ANTHROPIC_API_KEY"):
        choices.append(DEFAULT_ANTHROPIC)
    if os.environ.get("OPENAI_API_KEY"):
        choices.append(DEFAULT_OPENAI)
    if os.environ.get("GEMINI_API_KEY"):
        choices.append(DEFAULT_GEMINI)
    choices += list(config.aliases) + list(config.models)
    try:
        default = config.resolve(None)
    except Exception:
        default = None
    if default:
        choices.insert(0, default)
    return list(dict.fromkeys(choices)), default


def console_router(glassdesk: Glassdesk) -> APIRouter:  # noqa: C901
    bus = glassdesk.bus
    stats_cache = StatsCache(glassdesk.store)
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "console.html", media_type="text/html", headers=PAGE_HEADERS)

    @router.get("/runs/{run_id}", include_in_schema=False)
    def run_page(run_id: str) -> FileResponse:
        """The run viewer (static: it reads the run from ``/api/v1/runs/{id}`` with the token)."""
        return FileResponse(STATIC / "run.html", media_type="text/html", headers=RUN_PAGE_HEADERS)

    @router.get("/api/v1/runs/{run_id}", tags=["console"], responses={
        200: {"content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
              "headers": {"ETag": {"schema": {"type": "string"}, "description": "for If-None-Match"}}},
        304: {"description": "unchanged since the ETag sent in If-None-Match"}})
    def run_document(run_id: str, request: Request) -> Response:
        """A vision run or a QA run as the run viewer shows it: steps, chapters, images with their
        marks, evidence, exports, visual comparisons (vision.evidence.runview). With ``If-None-Match`` set
        to the ETag of an earlier answer, a 304 while the run's files are unchanged: how the
        viewer follows a running run."""
        # The validator is taken before the document is built: a file written in between makes
        # the next poll's validator differ, so a viewer may fetch once more, never miss a change.
        etag = run_etag(glassdesk, run_id)
        headers = {"cache-control": "no-cache"} | ({"etag": etag} if etag else {})
        if etag and etag in [t.strip() for t in request.headers.get("if-none-match", "").split(",")]:
            return Response(status_code=304, headers=headers)
        return JSONResponse(jsonable_encoder(run_view(glassdesk, run_id)), headers=headers)

    @router.get("/api/v1/console/qa-runs", tags=["console"])
    def qa_runs(limit: int = 50) -> list[dict[str, Any]]:
        """The latest QA runs, newest first, for the console's QA runs tab (each opens in the run viewer)."""
        return qa_run_list(glassdesk.qa, limit)

    @router.get("/api/v1/console/info", tags=["console"])
    def info() -> dict[str, Any]:
        models, default = _model_choices(glassdesk.config)
        seen = {m.model for m in glassdesk.store.list_traces(limit=200)}
        return {
            "version": VERSION, "models": models + sorted(seen - set(models)), "default_model": default,
            "overlay": glassdesk.narrator.enabled, "novnc": _novnc_path() is not None,
            "max_steps_cap": MAX_STEPS_CAP, "final_statuses": list(FINAL_STATUSES),
        }

    @router.get("/api/v1/console/sessions", tags=["console"])
    def sessions() -> dict[str, Any]:
        seq = latest_seq(bus, glassdesk.listener.processed_seq)
        latest: dict[str, TraceMeta] = {}
        for meta in glassdesk.store.list_traces(limit=500):
            if meta.session_id and meta.session_id not in latest:
                latest[meta.session_id] = meta
        views = glassdesk.views()
        out = []
        for session in glassdesk.desktops.list():
            view = views.get(session.id)
            pause_reason = view.pause_reason if view else None
            out.append({
                "id": session.id, "status": session.status, "display": session.display,
                "created_at": session.created_at.isoformat(),
                "paused": pause_reason is not None, "pause_reason": pause_reason,
                "takeover": session.takeover,
                "run": _run_view(view, latest.get(session.id)),
                "last_action": glassdesk.last_action.get(session.id),
            })
        return {"seq": seq, "sessions": out}

    @router.get("/api/v1/sessions/{session_id}/live", response_model=LiveView, tags=["console"])
    def live_view(session_id: str) -> LiveView:
        """A view-only live-view token and link (control only via takeover)."""
        return glassdesk.desktops.live_view(session_id, control=False)

    @router.post("/api/v1/sessions/{session_id}/takeover", response_model=LiveView, tags=["console"])
    def takeover(session_id: str, body: TakeoverRequest) -> LiveView:
        """Hand mouse and keyboard to the operator (the agent pauses between steps), or give them back.
        Either way the control tokens issued before are revoked and their connections closed."""
        return glassdesk.takeover(session_id, body.on)

    @router.get("/api/v1/events", tags=["console"], response_class=StreamingResponse,
                responses={200: {"content": {"text/event-stream": {}}}})
    async def events(request: Request, after: int = 0, session_id: str | None = None):
        """Server-Sent Events: every loop event (``id`` = seq). Events after ``after`` (or the
        Last-Event-ID header) still in the recent buffer are replayed first."""
        try:
            after = max(after, int(request.headers.get("last-event-id") or 0))
        except ValueError:
            pass

        def frame(event: dict) -> str:
            return f"id: {event['seq']}\nevent: {event['kind']}\ndata: {json.dumps(event, default=str)}\n\n"

        async def stream():
            # Subscribed here, not before: a stream that never starts (the client left before the
            # headers went out) never runs its ``finally``, and its queue would stay on the bus.
            queue = bus.subscribe()
            try:
                last = after
                yield ": glassdesk events\n\n"
                for event in bus.recent(after):
                    last = event["seq"]
                    if session_id in (None, event.get("session_id")):
                        yield frame(event)
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    if event["seq"] <= last:
                        continue
                    last = event["seq"]
                    if session_id in (None, event.get("session_id")):
                        yield frame(event)
            finally:
                bus.unsubscribe(queue)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    @router.get("/api/v1/stats", tags=["console"])
    def stats() -> dict[str, Any]:
        """Per model, from the trace store: runs, done rate, mean steps, tokens and step latency."""
        return {"models": stats_cache.compute(), "computed_at": time.time()}

    @router.get("/metrics", tags=["meta"], response_class=Response,
                responses={200: {"content": {"text/plain": {}}}})
    def metrics() -> Response:
        """Prometheus metrics. Needs the bearer token when GLASSDESK_TOKEN is set."""
        glassdesk.listener.caught_up()
        return Response(glassdesk.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return router


def _novnc_path() -> Path | None:
    try:
        return novnc_dir()
    except StackError:
        return None


def install_console(app: FastAPI, glassdesk: Glassdesk) -> None:
    """Serve the console and its API from ``app`` (its static files: vision.http.viewer.mount_static)."""
    app.include_router(console_router(glassdesk))
