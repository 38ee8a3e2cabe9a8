"""The composition root: one FastAPI app serving the desktop primitives and the vision interfaces."""

from __future__ import annotations

import contextlib

from fastapi import FastAPI

from desktop.api import add_error_handlers, desktop_router
from desktop.sessions import SessionManager
from vision import VERSION
from vision.api import vision_router
from vision.auth import BearerAuth
from vision.console import install_console
from vision.mcp import mount_http, transport_security
from vision.service import Glassdesk
from vision.settings import Settings

__all__ = ["Settings", "create_app"]


def create_app(manager: SessionManager, settings: Settings, glassdesk: Glassdesk | None = None) -> FastAPI:
    """The API over ``glassdesk`` (built over ``manager`` when not given). Stopping the app closes
    every session."""
    glassdesk = glassdesk or Glassdesk.build(manager, data_dir=settings.data_dir)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        async with mcp.session_manager.run():  # the MCP route's sessions live as long as the app
            try:
                yield
            finally:
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
    local = transport_security(settings, getattr(manager.stack_config, "public_host", None))
    app.add_middleware(BearerAuth, token=settings.token, allowed_hosts=local.allowed_hosts,
                       allowed_origins=local.allowed_origins)
    return app
