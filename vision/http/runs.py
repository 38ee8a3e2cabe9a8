"""HTTP for the vision loop (act, cancel, pause) and for traces (JSON, images, report, JUnit, export)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

from anyio import to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, Response, StreamingResponse

from desktop.errors import GlassdeskError
from vision.app.service import Glassdesk
from vision.evidence.runview import offline_html, vision_run_view
from vision.models import ActRequest, ActResult, Recording, RunControl
from vision.trace.records import Trace, TraceMeta, VerifyResult

# The media type and file name of each export format (vision.evidence.export).
EXPORT_MEDIA = {"yaml": ("application/yaml", "yaml"), "playwright-ts": ("text/plain", "spec.ts"),
                "playwright-py": ("text/x-python", "py")}
EXPORT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/yaml": {}, "text/plain": {}, "text/x-python": {}}}}
ExportFormat = Literal["yaml", "playwright-ts", "playwright-py"]
FormatQuery = Query("yaml", description="yaml: a glassdesk qa suite that replays it; playwright-ts: an "
                                        "@playwright/test spec; playwright-py: a pytest-playwright test")


def export_response(text: str, fmt: str, stem: str) -> Response:
    media, suffix = EXPORT_MEDIA[fmt]
    name = f"test_{stem}.{suffix}" if fmt == "playwright-py" else f"{stem}.{suffix}"
    return Response(text, media_type=f"{media}; charset=utf-8",
                    headers={"content-disposition": f'attachment; filename="{name}"'})


def vision_router(glassdesk: Glassdesk) -> APIRouter:  # noqa: C901
    router = APIRouter(prefix="/api/v1")

    @router.post("/sessions/{session_id}/vision/act", response_model=ActResult, tags=["vision"],
                 responses={200: {"content": {"text/event-stream": {}}}})
    async def act(session_id: str, body: ActRequest, request: Request):
        """Run an instruction on the visible desktop until done, a budget or a cancel.

        With ``Accept: text/event-stream`` one ``step`` event is sent per step, then ``result``."""
        if "text/event-stream" not in request.headers.get("accept", ""):
            return await to_thread.run_sync(glassdesk.act, session_id, body)
        if await to_thread.run_sync(glassdesk.active, session_id):  # refuse before the stream starts, with a status
            await to_thread.run_sync(glassdesk.act, session_id, body)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        def on_step(step) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, ("step", step.model_dump(mode="json")))

        async def run() -> None:
            try:
                result = await to_thread.run_sync(
                    lambda: glassdesk.act(session_id, body, on_step, wait_out_pauses=True))
                await queue.put(("result", result.model_dump(mode="json")))
            except Exception as exc:  # reported in the stream: the status line is already sent
                error = exc.to_dict() if isinstance(exc, GlassdeskError) else {
                    "code": "internal_error",
                    "message": f"unexpected {type(exc).__name__}; the server log has the details"}
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
                    glassdesk.cancel(session_id)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"cache-control": "no-store"})

    @router.post("/sessions/{session_id}/vision/cancel", response_model=RunControl, tags=["vision"])
    def cancel(session_id: str) -> RunControl:
        return RunControl(ok=glassdesk.cancel(session_id), active=glassdesk.active(session_id))

    @router.post("/sessions/{session_id}/vision/pause", response_model=RunControl, tags=["vision"])
    def pause(session_id: str) -> RunControl:
        glassdesk.pause(session_id)
        return RunControl(ok=True, active=glassdesk.active(session_id))

    @router.post("/sessions/{session_id}/vision/resume", response_model=RunControl, tags=["vision"])
    def resume(session_id: str) -> RunControl:
        glassdesk.resume(session_id)
        return RunControl(ok=True, active=glassdesk.active(session_id))

    # -------------------------------------------------------------------------------- traces

    @router.get("/traces", response_model=list[TraceMeta], tags=["traces"])
    def list_traces(limit: int = 100) -> list[TraceMeta]:
        return glassdesk.traces(limit)

    @router.get("/traces/{trace_id}", response_model=Trace, tags=["traces"])
    def get_trace(trace_id: str) -> Trace:
        return glassdesk.trace(trace_id)

    @router.get("/traces/{trace_id}/verify", response_model=VerifyResult, tags=["traces"])
    def verify_trace(trace_id: str) -> VerifyResult:
        return glassdesk.verify(trace_id)

    @router.get("/traces/{trace_id}/steps/{index}/{which}.png", tags=["traces"], response_class=FileResponse,
                responses={200: {"content": {"image/png": {}}}})
    def step_image(trace_id: str, index: int, which: Literal["before", "after"]):
        return FileResponse(glassdesk.step_image(trace_id, index, which), media_type="image/png")

    @router.get("/traces/{trace_id}/video/{name}", tags=["traces"], response_class=FileResponse,
                responses={200: {"content": {"video/mp4": {}, "video/webm": {}, "text/vtt": {}}}})
    def video_file(trace_id: str, name: str):
        """A filmed run's video receipt: the video, chapters.vtt, captions.vtt (names in the trace's ``video``)."""
        path = glassdesk.video_file(trace_id, name)
        media = {".mp4": "video/mp4", ".webm": "video/webm", ".vtt": "text/vtt"}.get(path.suffix,
                                                                                     "application/octet-stream")
        return FileResponse(path, media_type=media)

    @router.get("/recordings/{recording_id}", response_model=Recording, tags=["recordings"])
    def get_recording(recording_id: str) -> Recording:
        """A session recording: filming, or stopped with its receipt (the files and their SHA-256)."""
        return glassdesk.recordings.get(recording_id)

    @router.get("/recordings/{recording_id}/{name}", tags=["recordings"], response_class=FileResponse,
                responses={200: {"content": {"video/mp4": {}, "video/webm": {}, "text/vtt": {}}}})
    def recording_file(recording_id: str, name: str):
        """A stopped session recording's file: the video, chapters.vtt, captions.vtt."""
        path = glassdesk.recordings.file(recording_id, name)
        media = {".mp4": "video/mp4", ".webm": "video/webm", ".vtt": "text/vtt"}.get(path.suffix,
                                                                                     "application/octet-stream")
        return FileResponse(path, media_type=media)

    @router.get("/traces/{trace_id}/report", response_class=HTMLResponse, tags=["traces"])
    def report(trace_id: str) -> HTMLResponse:
        """The run viewer's offline form: one self-contained file (images and chapters inlined)."""
        return HTMLResponse(offline_html(vision_run_view(glassdesk, trace_id, mode="inline")))

    @router.get("/traces/{trace_id}/junit.xml", tags=["traces"], response_class=Response,
                responses={200: {"content": {"application/xml": {}}}})
    def junit(trace_id: str) -> Response:
        return Response(glassdesk.junit(trace_id), media_type="application/xml")

    @router.get("/traces/{trace_id}/export", tags=["traces"], response_class=Response,
                summary="the run as a test: a glassdesk qa suite (yaml), or a Playwright spec (playwright-ts, "
                        "playwright-py)", responses=EXPORT_RESPONSES)
    def export(trace_id: str, format: ExportFormat = FormatQuery) -> Response:
        return export_response(glassdesk.export_trace(trace_id, format), format, trace_id)

    return router
