"""HTTP for the vision loop (act, cancel, pause) and for traces (JSON, images, report, JUnit)."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, Response, StreamingResponse
from pydantic import BaseModel

from vision.errors import TraceCorruptError, TraceNotFoundError
from vision.loop import ActRequest, ActResult, Runners
from vision.report import render_html, render_junit
from vision.trace import InvalidTraceId, Trace, TraceCorrupt, TraceMeta, TraceNotFound, TraceStore, VerifyResult


class RunControl(BaseModel):
    ok: bool
    active: bool


def _trace_error(exc: Exception) -> TraceNotFoundError:
    return TraceNotFoundError(f"{exc}; GET /api/v1/traces lists them" if isinstance(exc, TraceNotFound)
                              else str(exc))


def vision_router(runners: Runners, store: TraceStore) -> APIRouter:
    router = APIRouter(prefix="/api/v1")

    @router.post("/sessions/{session_id}/vision/act", response_model=ActResult, tags=["vision"],
                 responses={200: {"content": {"text/event-stream": {}}}})
    async def act(session_id: str, body: ActRequest, request: Request):
        """Run an instruction on the visible desktop until done, a budget or a cancel.

        With ``Accept: text/event-stream`` one ``step`` event is sent per step, then ``result``."""
        runner = runners.get(session_id)
        if "text/event-stream" not in request.headers.get("accept", ""):
            return await to_thread.run_sync(runner.act, body)
        if runner.active:  # refuse before the stream starts, with a proper status
            runner.act(body)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        def on_step(step) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, ("step", step.model_dump(mode="json")))

        async def run() -> None:
            try:
                result = await to_thread.run_sync(runner.act, body, on_step)
                await queue.put(("result", result.model_dump(mode="json")))
            except Exception as exc:  # reported in the stream: the status line is already sent
                error = getattr(exc, "to_dict", lambda: {"code": "internal_error", "message": str(exc)})()
                await queue.put(("error", {"error": error}))

        task = asyncio.create_task(run())

        async def stream():
            try:
                while True:
                    kind, data = await queue.get()
                    yield f"event: {kind}\ndata: {json.dumps(data)}\n\n"
                    if kind in ("result", "error"):
                        return
            finally:
                if not task.done():  # the client went away: stop the run rather than orphan it
                    runner.cancel()

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"cache-control": "no-store"})

    @router.post("/sessions/{session_id}/vision/cancel", response_model=RunControl, tags=["vision"])
    def cancel(session_id: str) -> RunControl:
        runner = runners.get(session_id)
        return RunControl(ok=runner.cancel(), active=runner.active)

    @router.post("/sessions/{session_id}/vision/pause", response_model=RunControl, tags=["vision"])
    def pause(session_id: str) -> RunControl:
        runner = runners.get(session_id)
        runner.pause()
        return RunControl(ok=True, active=runner.active)

    @router.post("/sessions/{session_id}/vision/resume", response_model=RunControl, tags=["vision"])
    def resume(session_id: str) -> RunControl:
        runner = runners.get(session_id)
        runner.resume()
        return RunControl(ok=True, active=runner.active)

    # -------------------------------------------------------------------------------- traces

    def load(trace_id: str) -> Trace:
        try:
            return store.load(trace_id)
        except (TraceNotFound, InvalidTraceId) as exc:
            raise _trace_error(exc) from exc
        except TraceCorrupt as exc:
            raise TraceCorruptError(f"{exc}; GET /api/v1/traces/{trace_id}/verify says where") from exc

    @router.get("/traces", response_model=list[TraceMeta], tags=["traces"])
    def list_traces(limit: int = 100) -> list[TraceMeta]:
        return store.list_traces(limit=max(1, min(limit, 1000)))

    @router.get("/traces/{trace_id}", response_model=Trace, tags=["traces"])
    def get_trace(trace_id: str) -> Trace:
        return load(trace_id)

    @router.get("/traces/{trace_id}/verify", response_model=VerifyResult, tags=["traces"])
    def verify_trace(trace_id: str) -> VerifyResult:
        # Not load(): a record that no longer parses is what verify exists to report, not a 500.
        try:
            return store.verify(trace_id)
        except (TraceNotFound, InvalidTraceId) as exc:
            raise _trace_error(exc) from exc

    @router.get("/traces/{trace_id}/steps/{index}/{which}.png", tags=["traces"], response_class=FileResponse,
                responses={200: {"content": {"image/png": {}}}})
    def step_image(trace_id: str, index: int, which: Literal["before", "after"]):
        load(trace_id)
        try:
            return FileResponse(store.image_path(trace_id, index, which), media_type="image/png")
        except TraceNotFound as exc:
            raise TraceNotFoundError(str(exc)) from exc

    @router.get("/traces/{trace_id}/report", response_class=HTMLResponse, tags=["traces"])
    def report(trace_id: str) -> HTMLResponse:
        trace = load(trace_id)
        return HTMLResponse(render_html(trace.meta, trace.steps, verification=store.verify(trace_id)))

    @router.get("/traces/{trace_id}/junit.xml", tags=["traces"], response_class=Response,
                responses={200: {"content": {"application/xml": {}}}})
    def junit(trace_id: str) -> Response:
        trace = load(trace_id)
        return Response(render_junit(trace.meta, trace.steps), media_type="application/xml")

    return router
