"""The composition root: one FastAPI app serving the desktop primitives and the vision interfaces."""

from __future__ import annotations

import contextlib

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from desktop.api import desktop_router
from desktop.errors import GlassdeskError, describe_errors
from desktop.sessions import SessionManager
from vision import VERSION
from vision.api import vision_router
from vision.auth import BearerAuth, transport_security
from vision.limits import BodyLimit
from vision.console import install_console
from vision.mcp import mount_http
from vision.service import Glassdesk
from vision.settings import Settings

__all__ = ["Settings", "create_app"]


def create_app(manager: SessionManager, settings: Settings, glassdesk: Glassdesk | None = None) -> FastAPI:
    """The API over ``glassdesk`` (built over ``manager`` when not given). Stopping the app closes
    every session."""
    owned = glassdesk is None
    glassdesk = glassdesk or Glassdesk.from_settings(manager, settings)
    # The API's own port is control plane: no browser of the sessions it drives may reach it
    # (desktop.netpolicy). A server that serves the app on another port adds that one to the set.
    glassdesk.desktops.manager.protected_ports.add(settings.port)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        async with mcp.session_manager.run():  # the MCP route's sessions live as long as the app
            try:
                yield
            finally:
                if owned:
                    glassdesk.close()
                else:  # a service it was given stays its owner's; the sessions of ``manager`` end here
                    manager.close()

    app = FastAPI(title="glassdesk", version=VERSION, lifespan=lifespan,
                  description="A visible Linux desktop for vision-mode computer-use agents.")
    app.state.glassdesk = glassdesk
    add_error_handlers(app)
    app.include_router(desktop_router(glassdesk.desktops))
    app.include_router(vision_router(glassdesk))
    install_console(app, glassdesk)  # GET / (operator console), its API, /metrics, static files
    mcp = app.state.mcp = mount_http(app, glassdesk, settings)  # POST/GET/DELETE /mcp, streamable HTTP

    @app.get("/healthz", tags=["meta"])
    def healthz() -> dict:
        return {"ok": True, "sessions": len(manager.sessions)}

    # Without a token, refuse foreign Host names (DNS rebinding) and foreign pages' Origin on
    # state-changing requests (cross-site POSTs), on every route, as /mcp does.
    local = transport_security(settings, glassdesk.desktops.public_host)
    app.add_middleware(BearerAuth, token=settings.token, allowed_hosts=local.allowed_hosts,
                       allowed_origins=local.allowed_origins)
    app.add_middleware(BodyLimit)  # outermost: an oversized body is refused before anything reads it
    return app


def add_error_handlers(app: FastAPI) -> None:
    """Every error leaves as ``{"error": {"code", "message"}}`` with the right status."""

    @app.exception_handler(GlassdeskError)
    async def glassdesk_error(_: Request, exc: GlassdeskError) -> JSONResponse:
        return JSONResponse({"error": exc.to_dict()}, status_code=exc.status)

    @app.exception_handler(Exception)
    async def unexpected_error(_: Request, exc: Exception) -> JSONResponse:
        # A bug, not a user error: the shape stays the same; the server log has the traceback.
        message = f"unexpected {type(exc).__name__}; the server log has the details"
        return JSONResponse({"error": {"code": "internal_error", "message": message}}, status_code=500)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own 404 (no such route) and 405 (wrong method), in the same shape as ours.
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse({"error": {"code": code, "message": str(exc.detail)}}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        # A bad desktop action is invalid_action; any other bad body (a vision run, a session) is
        # invalid_request.
        code = "invalid_action" if "/desktop/" in request.url.path else "invalid_request"
        return JSONResponse({"error": {"code": code, "message": describe_errors(exc.errors())}}, status_code=422)
