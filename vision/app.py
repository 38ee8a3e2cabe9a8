"""The composition root: one FastAPI app serving the desktop primitives and the vision interfaces."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

from fastapi import FastAPI

from desktop.api import add_error_handlers, desktop_router
from desktop.sessions import SessionManager
from vision.auth import BearerAuth


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = field(default_factory=lambda: os.environ.get("GLASSDESK_TOKEN") or None)
    max_sessions: int = 10
    idle_ttl_s: float = 1800


def create_app(manager: SessionManager, settings: Settings) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        try:
            yield
        finally:
            manager.close()

    app = FastAPI(title="glassdesk", version="0.1.0", lifespan=lifespan,
                  description="A visible Linux desktop for vision-mode computer-use agents.")
    add_error_handlers(app)
    app.include_router(desktop_router(manager))

    @app.get("/healthz", tags=["meta"])
    def healthz() -> dict:
        return {"ok": True, "sessions": len(manager.sessions)}

    app.add_middleware(BearerAuth, token=settings.token)
    return app
