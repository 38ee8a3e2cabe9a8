"""The QA verbs over REST: thin routes over vision.qa.service.QaService.

``POST /api/v1/sessions/{id}/qa/<verb>`` for the six verbs (the session ``default`` is started on
first use, as for every other route), and the runs and baselines they leave under ``/api/v1/qa``.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

from vision.qa.models import (
    AnalyzeConsoleRequest, ApproveRequest, BaselineResult, CaptureBaselineRequest, CompareRequest, CompareResult,
    ConsoleResult, ElementResult, FlowResult, PageLoadResult, QaRun, VerifyElementRequest, VerifyPageLoadsRequest,
    VerifyReport, VerifyUserFlowRequest,
)
from vision.qa.service import QaService

_MEDIA = {"png": "image/png", "webm": "video/webm", "mp4": "video/mp4", "json": "application/json"}


def qa_router(qa: QaService) -> APIRouter:
    router = APIRouter(prefix="/api/v1", tags=["qa"])

    @router.post("/sessions/{session_id}/qa/verify_page_loads", response_model=PageLoadResult,
                 summary="load a URL in the visible browser and check status, title, console and requests")
    def verify_page_loads(session_id: str, body: VerifyPageLoadsRequest) -> PageLoadResult:
        return qa.verify_page_loads(session_id, body)

    @router.post("/sessions/{session_id}/qa/verify_element_exists", response_model=ElementResult,
                 summary="is an element there (DOM, or OCR of the screen for text), and visible")
    def verify_element_exists(session_id: str, body: VerifyElementRequest) -> ElementResult:
        return qa.verify_element_exists(session_id, body)

    @router.post("/sessions/{session_id}/qa/verify_user_flow", response_model=FlowResult,
                 summary="run steps on the visible desktop and check the outcome, with evidence per step")
    def verify_user_flow(session_id: str, body: VerifyUserFlowRequest) -> FlowResult:
        return qa.verify_user_flow(session_id, body)

    @router.post("/sessions/{session_id}/qa/capture_visual_baseline", response_model=BaselineResult,
                 summary="save the page (or the display) as a new version of a visual baseline")
    def capture_visual_baseline(session_id: str, body: CaptureBaselineRequest) -> BaselineResult:
        return qa.capture_visual_baseline(session_id, body)

    @router.post("/sessions/{session_id}/qa/compare_visual_regression", response_model=CompareResult,
                 summary="compare the page (or the display) with a baseline, pixel by pixel")
    def compare_visual_regression(session_id: str, body: CompareRequest) -> CompareResult:
        return qa.compare_visual_regression(session_id, body)

    @router.post("/sessions/{session_id}/qa/analyze_console_errors", response_model=ConsoleResult,
                 summary="the console's errors and warnings, less those ignore_patterns match")
    def analyze_console_errors(session_id: str, body: AnalyzeConsoleRequest) -> ConsoleResult:
        return qa.analyze_console_errors(session_id, body)

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

    @router.get("/qa/runs/{test_run_id}/report", response_class=HTMLResponse)
    def report(test_run_id: str) -> HTMLResponse:
        return HTMLResponse(qa.report_html(test_run_id))

    @router.get("/qa/runs/{test_run_id}/artifacts/{name}", response_class=FileResponse,
                responses={200: {"content": {"image/png": {}, "video/webm": {}}}})
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
