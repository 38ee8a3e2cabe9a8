"""The desktop REST routes written by hand: sessions, saved states, the screenshot and the zoom (the
input actions, opening, focusing, launching and the rest are the catalogue's: desktop.ops,
desktop.http.routes).

No ``from __future__ import annotations`` here: FastAPI reads the handlers' annotations.

Handlers are plain ``def``: they block on X and xdotool, and FastAPI runs them in its threadpool.
"""

import base64
from typing import Literal

from fastapi import APIRouter, Query, Response, status
from pydantic import ValidationError

from desktop.actions import Region, Zoom
from desktop.errors import InvalidAction, describe_validation
from desktop.frame import IMAGE_FORMATS
from desktop.models import (
    ActionResponse,
    CreateSession,
    NetworkPolicyBody,
    SavedState,
    SaveStateRequest,
    SessionInfo,
)
from desktop.service.desktop import DesktopService, Shot

# How a screenshot's pixels map to display pixels: display x = origin x + image x / scale.
SHOT_HEADERS = {
    "X-Glassdesk-Coordinates": {"description": "the conversion to display pixels, in one sentence",
                                "schema": {"type": "string"}},
    "X-Glassdesk-Scale": {"description": "image pixels per display pixel", "schema": {"type": "number"}},
    "X-Glassdesk-Origin": {"description": "x,y: the display pixel at the image's top-left corner",
                           "schema": {"type": "string", "example": "0,0"}},
    "X-Glassdesk-Region": {"description": "x0,y0,x1,y1: the part of the display the image shows",
                           "schema": {"type": "string", "example": "0,0,1920,1080"}},
}


def shot_headers(shot: Shot) -> dict[str, str]:
    return {"x-glassdesk-coordinates": shot.note, "x-glassdesk-scale": f"{shot.scale:g}",
            "x-glassdesk-origin": "{},{}".format(*shot.origin),
            "x-glassdesk-region": ",".join(map(str, shot.bounds))}


def _state_routes(router: APIRouter, desktops: DesktopService) -> None:
    """Saved states (desktop.session.states): a session's browser login kept, listed, deleted."""

    @router.post("/sessions/{session_id}/states", status_code=status.HTTP_201_CREATED, response_model=SavedState,
                 tags=["sessions"],
                 summary="save the browser's cookies and local storage, and named home files, as a named state")
    def save_state(session_id: str, body: SaveStateRequest) -> SavedState:
        """A later session starts from it with POST /sessions {state}: logged in where this one was.
        It holds secrets: kept in the server's data dir only, never logged or exported, and refused
        on restore when changed since (its manifest is signed)."""
        return desktops.save_state(session_id, body.name, body.files)

    @router.get("/states", response_model=list[SavedState], tags=["sessions"], summary="the saved states")
    def list_states() -> list[SavedState]:
        return desktops.saved_states()

    @router.delete("/states/{name}", status_code=status.HTTP_204_NO_CONTENT, tags=["sessions"],
                   summary="delete a saved state")
    def delete_state(name: str) -> Response:
        desktops.delete_state(name)
        return Response(status_code=status.HTTP_204_NO_CONTENT)


def desktop_router(desktops: DesktopService) -> APIRouter:
    router = APIRouter(prefix="/api/v1")

    @router.post("/sessions", status_code=status.HTTP_201_CREATED, response_model=SessionInfo, tags=["sessions"])
    def create_session(body: CreateSession | None = None) -> SessionInfo:
        network = body.network if body and body.network else NetworkPolicyBody()
        return desktops.create(body.id if body else None, allow=network.allow, deny=network.deny,
                               dialogs=body.dialogs if body else "manual", state=body.state if body else None)

    @router.get("/sessions", response_model=list[SessionInfo], tags=["sessions"])
    def list_sessions() -> list[SessionInfo]:
        return desktops.list()

    @router.get("/sessions/{session_id}", response_model=SessionInfo, tags=["sessions"])
    def get_session(session_id: str) -> SessionInfo:
        return desktops.info(session_id)

    @router.delete("/sessions/{session_id}", status_code=status.HTTP_204_NO_CONTENT, tags=["sessions"])
    def delete_session(session_id: str) -> Response:
        desktops.delete(session_id)
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    _state_routes(router, desktops)

    @router.get("/sessions/{session_id}/desktop/screenshot", tags=["desktop"], response_class=Response,
                summary="the screen, whole or a region, scaled, as PNG, JPEG or WebP",
                responses={200: {"description": "the image; its headers say how its pixels map to display pixels",
                                 "content": {media: {"schema": {"type": "string", "format": "binary"}}
                                             for media in IMAGE_FORMATS.values()},
                                 "headers": SHOT_HEADERS}})
    def screenshot(session_id: str,
                   region: str | None = Query(None, description="x0,y0,x1,y1 in display pixels; omit for the whole "
                                                                "screen", examples=["0,0,960,540"]),
                   scale: float = Query(1.0, gt=0, le=4, description="resize factor; the X-Glassdesk-* headers say "
                                                                     "how to convert back"),
                   format: Literal["png", "jpeg", "webp"] = Query("png", description="png (lossless) or jpeg/webp"),
                   quality: int | None = Query(None, ge=1, le=100, description="jpeg/webp quality (refused with "
                                                                               "png, which is lossless); default "
                                                                               "85 (jpeg), 80 (webp)")) -> Response:
        shot = desktops.screenshot(session_id, region=_region(region), scale=scale, format=format, quality=quality)
        return Response(shot.image, media_type=shot.media_type, headers=shot_headers(shot))

    @router.post("/sessions/{session_id}/desktop/zoom", response_model=ActionResponse, tags=["desktop"])
    def zoom(session_id: str, body: Zoom) -> ActionResponse:
        shot = desktops.zoom(session_id, body)
        return ActionResponse(action="zoom", executed=[], duration_ms=0, settle_ms=0,
                              result={"image": base64.b64encode(shot.png).decode(), "width": shot.width,
                                      "height": shot.height, "coordinates": shot.note})

    return router


def _region(text: str | None) -> Region | None:
    """``?region=x0,y0,x1,y1`` -> a validated Region (bounds are checked there, once)."""
    if text is None:
        return None
    try:
        return Region.model_validate([int(v) for v in text.split(",")])
    except ValueError as exc:  # not four integers, or off the screen
        message = describe_validation(exc) if isinstance(exc, ValidationError) else "use four integers x0,y0,x1,y1"
        raise InvalidAction(f"region: {message}") from exc
