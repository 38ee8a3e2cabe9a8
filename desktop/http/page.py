"""The page layer's REST routes that are not one-to-one with an operation (the rest are generated
from the catalogue, desktop.http.routes): the bytes of a page screenshot and of a download."""

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, Response

from desktop.service.page import PageService


def page_router(pages: PageService) -> APIRouter:
    router = APIRouter(prefix="/api/v1/sessions/{session_id}/page", tags=["page"])

    @router.get("/downloads/{name}", response_class=FileResponse)
    def download(session_id: str, name: str) -> FileResponse:
        path = pages.download_path(session_id, name)
        return FileResponse(path, filename=path.name, media_type="application/octet-stream")

    @router.get("/screenshot", response_class=Response, responses={200: {"content": {"image/png": {}}}})
    def screenshot(session_id: str, full_page: bool = False,
                   selector: str | None = Query(None, max_length=2000)) -> Response:
        return Response(pages.screenshot(session_id, full_page=full_page, selector=selector), media_type="image/png")

    return router
