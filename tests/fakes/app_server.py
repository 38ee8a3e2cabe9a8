"""The API on loopback with its lifespan on: the lifespan runs the MCP session manager, which the
MCP-over-HTTP door needs (LiveServer leaves it off)."""

from __future__ import annotations

from desktop.session.manager import SessionManager
from tests.conftest import LiveServer
from vision.http.app import Settings, create_app


class AppServer(LiveServer):
    def __init__(self, app, port: int | None = None):
        super().__init__(app, port, lifespan="on")

    @classmethod
    def over(cls, services, token: str | None) -> AppServer:
        """The app over the shared services. The lifespan closes the manager given to create_app
        when the server stops, so the app gets a manager of its own with no sessions, while the MCP
        tools work on the shared services (whose manager holds the test desktop "itest")."""
        return cls(create_app(SessionManager(max_sessions=1), Settings(token=token), services))
