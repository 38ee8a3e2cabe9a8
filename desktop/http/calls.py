"""The call route of a session server (``glassdesk up --single-session``): what its control plane's
``RemotePages`` and ``RemoteDesktopService`` (desktop.service.remote) send it, one service method a
call, its arguments and answer encoded by the method's own type hints (desktop.remote.calls)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body

from desktop.errors import InvalidRequest, SessionNotFound
from desktop.ops import forwarded
from desktop.remote.calls import decode_args, encode_result
from desktop.service.desktop import DesktopService
from desktop.service.page import PageService


def calls_router(desktops) -> APIRouter:
    """The call route of a single-session server. Its session is the only one, so the id in the path
    must be it; the bearer token guards it like every other route."""
    router = APIRouter(prefix="/api/v1")
    # What a control plane may call: the catalogue's operations of each service (desktop.ops), its
    # readers for the QA verbs included, but its inputs (desktop.ops.forwarded). Not download_path
    # (a path on this server's disk: the control plane fetches the file instead), nor any private helper.
    services = {"pages": (PageService, frozenset(forwarded("pages")), desktops.pages),
                "desktop": (DesktopService, frozenset(forwarded("desktop")), desktops)}

    @router.post("/sessions/{session_id}/call/{service}/{method}", include_in_schema=False)
    def call(session_id: str, service: str, method: str, args: dict[str, Any] = Body(default_factory=dict, embed=True)
             ) -> dict:
        if session_id != desktops.default:
            raise SessionNotFound(f"no session {session_id!r}: this server runs the one session {desktops.default!r}")
        known = services.get(service)
        if known is None or method not in known[1]:
            raise InvalidRequest(f"{service}.{method}: not an operation a control plane may call")
        cls, _allowed, target = known
        result = getattr(target, method)(session_id, **decode_args(cls, method, args))
        return {"result": encode_result(cls, method, result)}

    return router
