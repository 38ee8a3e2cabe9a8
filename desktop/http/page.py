"""The page layer over REST: thin routes over desktop.service.page.PageService."""

from typing import Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, Response

from desktop.models import ContentFormat, PageContent
from desktop.models import DialogPolicy
from desktop.models import PageState
from desktop.models import Tab
from desktop.service.page import PageService
from desktop.models import Acted

from desktop.models import (  # noqa: E402
    ActedAnswer, ClickRequest, DialogAnswer, DialogPolicyRequest, DialogRequest, EvaluateRequest, FillRequest,
    HistoryRequest, NavigateRequest, NewTabRequest, SelectRequest, UploadRequest, WaitRequest,
)
from desktop.models import target_of as _target  # noqa: E402


def page_router(pages: PageService) -> APIRouter:
    router = APIRouter(prefix="/api/v1/sessions/{session_id}/page", tags=["page"])

    @router.get("", response_model=PageState, summary="the visible browser's state")
    def state(session_id: str) -> PageState:
        return pages.state(session_id)

    @router.get("/content", response_model=PageContent)
    def content(session_id: str, format: ContentFormat = "text",
                selector: str | None = Query(None, max_length=2000)) -> PageContent:
        return pages.content(session_id, format, selector)

    def with_page(session_id: str, answer):
        """An action's answer with the page summary, as every action's answer carries it."""
        if isinstance(answer, dict):
            return {**answer, "page": pages.summary(session_id)}
        return answer.model_copy(update={"page": pages.summary(session_id)})

    def acted(session_id: str, done: Acted) -> ActedAnswer:
        return with_page(session_id, ActedAnswer(**done.model_dump()))

    @router.post("/navigate")
    def navigate(session_id: str, body: NavigateRequest) -> dict:
        return with_page(session_id, pages.navigate(session_id, "goto", body.url, body.wait_until, body.timeout_ms))

    def history(how: Literal["back", "forward", "reload"]):
        def handler(session_id: str, body: HistoryRequest | None = None) -> dict:
            body = body or HistoryRequest()
            return with_page(session_id, pages.navigate(session_id, how, None, body.wait_until, body.timeout_ms))

        handler.__name__ = f"page_{how}"
        router.add_api_route(f"/{how}", handler, methods=["POST"], summary=f"{how} in the visible browser")

    for how in ("back", "forward", "reload"):
        history(how)

    @router.post("/click", response_model=ActedAnswer, summary="a real pointer click at the element's centre")
    def click(session_id: str, body: ClickRequest) -> ActedAnswer:
        return acted(session_id, pages.click(session_id, _target(body), button=body.button,
                                             click_count=body.click_count, timeout_ms=body.timeout_ms))

    @router.post("/fill", response_model=ActedAnswer, summary="click the field and type for real; the value is checked")
    def fill(session_id: str, body: FillRequest) -> ActedAnswer:
        return acted(session_id, pages.fill(session_id, _target(body), body.value, clear=body.clear,
                                            secrets=body.secrets, timeout_ms=body.timeout_ms))

    @router.post("/select", response_model=ActedAnswer)
    def select(session_id: str, body: SelectRequest) -> ActedAnswer:
        return acted(session_id, pages.select(session_id, _target(body), body.option, body.timeout_ms))

    @router.post("/wait")
    def wait(session_id: str, body: WaitRequest) -> dict:
        return with_page(session_id, pages.wait_for(session_id, _target(body), body.state, body.timeout_ms))

    @router.post("/evaluate", summary="run JavaScript in the page (only with --allow-evaluate)")
    def evaluate(session_id: str, body: EvaluateRequest) -> dict[str, Any]:
        return {"result": pages.evaluate(session_id, body.expression)}

    @router.get("/console")
    def console(session_id: str, since: int = Query(0, ge=0),
                level: Literal["error", "warning", "info", "log", "debug"] | None = None) -> list[dict]:
        return pages.console(session_id, since, level)

    @router.get("/network")
    def network(session_id: str, since: int = Query(0, ge=0), failed_only: bool = False) -> list[dict]:
        return pages.network(session_id, since, failed_only)

    @router.post("/dialog", response_model=DialogAnswer, summary="accept or dismiss the open dialog")
    def dialog(session_id: str, body: DialogRequest) -> DialogAnswer:
        answered = pages.handle_dialog(session_id, body.accept, body.prompt_text)
        return with_page(session_id, DialogAnswer(**answered.model_dump()))

    @router.get("/dialogs", summary="the dialogs recorded, and how each was handled")
    def dialogs(session_id: str, since: int = Query(0, ge=0)) -> list[dict]:
        return pages.dialogs(session_id, since)

    @router.get("/dialog-policy", response_model=DialogPolicy, summary="how the session answers dialogs")
    def get_dialog_policy(session_id: str) -> DialogPolicy:
        return pages.dialog_policy(session_id)

    @router.put("/dialog-policy", response_model=DialogPolicy, summary="set how the session answers dialogs")
    def put_dialog_policy(session_id: str, body: DialogPolicyRequest) -> DialogPolicy:
        """For the dialogs that open from now on; one open now stays open until answered. Kept
        through a Chromium heal and a reset."""
        return pages.set_dialog_policy(session_id, body.mode)

    @router.get("/downloads")
    def downloads(session_id: str) -> list[dict]:
        return pages.downloads(session_id)

    @router.get("/downloads/{name}", response_class=FileResponse)
    def download(session_id: str, name: str) -> FileResponse:
        path = pages.download_path(session_id, name)
        return FileResponse(path, filename=path.name, media_type="application/octet-stream")

    @router.post("/upload", response_model=ActedAnswer)
    def upload(session_id: str, body: UploadRequest) -> ActedAnswer:
        return acted(session_id, pages.upload(session_id, _target(body), body.files, body.timeout_ms))

    @router.get("/tabs", response_model=list[Tab])
    def tabs(session_id: str) -> list[Tab]:
        return pages.tabs(session_id)

    @router.post("/tabs", response_model=Tab, status_code=201)
    def new_tab(session_id: str, body: NewTabRequest | None = None) -> Tab:
        return pages.new_tab(session_id, body.url if body else None)

    @router.post("/tabs/{tab_id}/activate", response_model=list[Tab])
    def activate_tab(session_id: str, tab_id: str) -> list[Tab]:
        return pages.activate_tab(session_id, tab_id)

    @router.delete("/tabs/{tab_id}", response_model=list[Tab])
    def close_tab(session_id: str, tab_id: str) -> list[Tab]:
        return pages.close_tab(session_id, tab_id)

    @router.get("/screenshot", response_class=Response, responses={200: {"content": {"image/png": {}}}})
    def screenshot(session_id: str, full_page: bool = False,
                   selector: str | None = Query(None, max_length=2000)) -> Response:
        return Response(pages.screenshot(session_id, full_page=full_page, selector=selector), media_type="image/png")

    return router
