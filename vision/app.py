"""The composition root: one FastAPI app serving the desktop primitives and the vision interfaces."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

from fastapi import FastAPI

from desktop.api import add_error_handlers, desktop_router
from desktop.service import DEFAULT_SESSION, DesktopService
from desktop.sessions import SessionManager
from vision.api import vision_router
from vision.auth import BearerAuth
from vision.config import VisionConfig
from vision.console import install_console
from vision.events import EventBus
from vision.loop import Runners
from vision.mcp import mount_http, transport_security
from vision.trace import TraceStore


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = field(default_factory=lambda: os.environ.get("GLASSDESK_TOKEN") or None)
    max_sessions: int = 10
    idle_ttl_s: float = 1800
    data_dir: str | None = None  # default: $GLASSDESK_DATA_DIR, else ./data


@dataclass
class Services:
    """Everything the interfaces (HTTP, MCP, console) share."""

    desktops: DesktopService
    store: TraceStore
    config: VisionConfig
    bus: EventBus
    runners: Runners

    @property
    def manager(self) -> SessionManager:
        return self.desktops.manager

    @classmethod
    def build(cls, manager: SessionManager, settings: Settings, config: VisionConfig | None = None, *,
              default_session: str = DEFAULT_SESSION) -> "Services":
        store = TraceStore(settings.data_dir)
        config = config or VisionConfig.load()
        bus = EventBus()
        manager.listeners.append(lambda what, session_id: bus.publish(f"session_{what}", session_id=session_id))
        return cls(DesktopService(manager, default_session=default_session), store, config, bus,
                   Runners(manager, store, config, bus))


def create_app(manager: SessionManager, settings: Settings, services: Services | None = None) -> FastAPI:
    services = services or Services.build(manager, settings)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        async with mcp.session_manager.run():  # the MCP route's sessions live as long as the app
            try:
                yield
            finally:
                manager.close()

    app = FastAPI(title="glassdesk", version="0.1.0", lifespan=lifespan,
                  description="A visible Linux desktop for vision-mode computer-use agents.")
    app.state.services = services
    add_error_handlers(app)
    app.include_router(desktop_router(services.desktops))
    app.include_router(vision_router(services.runners, services.store))
    install_console(app, services)  # GET / (operator console), its API, /metrics, static files
    mcp = app.state.mcp = mount_http(app, services, settings)  # POST/GET/DELETE /mcp, streamable HTTP

    @app.get("/healthz", tags=["meta"])
    def healthz() -> dict:
        return {"ok": True, "sessions": len(manager.sessions)}

    # Without a token, refuse foreign Host names (DNS rebinding) and foreign pages' Origin on
    # state-changing requests (cross-site POSTs), on every route, as /mcp does.
    local = transport_security(settings, getattr(manager.stack_config, "public_host", None))
    app.add_middleware(BearerAuth, token=settings.token, allowed_hosts=local.allowed_hosts,
                       allowed_origins=local.allowed_origins)
    return app
