"""The QA runs and baselines over REST, under ``/api/v1/qa``: thin routes over
vision.qa.service.QaService. The six verbs' routes (``POST /api/v1/sessions/{id}/qa/<verb>``) are the
catalogue's (vision.qa.ops), generated with the others."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

from vision.evidence.runview import offline_html, qa_run_view
from vision.http.runs import EXPORT_RESPONSES, ExportFormat, FormatQuery, export_response
from vision.models.qa import (
    ApproveRequest,
    BaselineResult,
    QaRun,
    VerifyReport,
)
from vision.qa.service import QaService

_MEDIA = {"png": "image/png", "webm": "video/webm", "mp4": "video/mp4", "json": "application/json", "vtt": "text/vtt"}


def qa_router(qa: QaService) -> APIRouter:
    router = APIRouter(prefix="/api/v1", tags=["qa"])

    # -------------------------------------------------------------------------------- runs

    @router.get("/qa/runs/{test_run_id}", response_model=QaRun)
    def run(test_run_id: str) -> QaRun:
        return qa.run(test_run_id)

    @router.get("/qa/runs/{test_run_id}/verify", response_model=VerifyReport,
                summary="check the run's hash chain, meta and every file's SHA-256")
    def verify(test_run_id: str) -> VerifyReport:
        return qa.verify(test_run_id)

    @router.get("/qa/runs/{test_run_id}/junit.xml", response_class=Response,
                responses={200: {"content": {"application/xml": {}}}})
    def junit(test_run_id: str) -> Response:
        return Response(qa.junit(test_run_id), media_type="application/xml")

    @router.get("/qa/runs/{test_run_id}/export", response_class=Response, responses=EXPORT_RESPONSES,
                summary="a verify_user_flow run as a test: a glassdesk qa suite (yaml), or a Playwright spec "
                        "(playwright-ts, playwright-py)")
    def export(test_run_id: str, format: ExportFormat = FormatQuery) -> Response:
        return export_response(qa.export(test_run_id, format), format, test_run_id)

    @router.get("/qa/runs/{test_run_id}/report", response_class=HTMLResponse)
    def report(test_run_id: str) -> HTMLResponse:
        """The run viewer's offline form: one self-contained file (images and chapters inlined)."""
        return HTMLResponse(offline_html(qa_run_view(qa, test_run_id, mode="inline")))

    @router.get("/qa/runs/{test_run_id}/artifacts/{name}", response_class=FileResponse,
                responses={200: {"content": {"image/png": {}, "video/mp4": {}, "video/webm": {}, "text/vtt": {}}}})
    def artifact(test_run_id: str, name: str) -> FileResponse:
        path = qa.artifact(test_run_id, name)
        return FileResponse(path, media_type=_MEDIA.get(path.suffix.lstrip("."), "application/octet-stream"))

    # -------------------------------------------------------------------------------- baselines

    @router.get("/qa/baselines", summary="every baseline's latest version")
    def baselines() -> list[dict]:
        return [meta.model_dump(mode="json") for meta in qa.baseline_list()]

    @router.post("/qa/baselines/{baseline_id}/approve", response_model=BaselineResult,
                 summary="promote a failed comparison's current images to the baseline's next version")
    def approve(baseline_id: str, body: ApproveRequest) -> BaselineResult:
        return qa.approve(baseline_id, body.test_run_id)

    return router
