"""The live viewer: a page to watch (or drive) one session, and the websockets behind it.

``install_viewer(app, glassdesk)`` adds:

- ``GET /view/{id}#token=...``               the page (static, no secret; the token stays in the
                                             URL's fragment, which browsers never send anywhere)
- ``GET /api/v1/sessions/{id}/viewer``       what a token grants (header ``X-Live-Token``), and the
                                             status strip now; the page asks first, to say clearly
                                             why a link does not work
- ``WS  /api/v1/sessions/{id}/vnc``          RFB, relayed to the session's x11vnc on loopback
- ``WS  /api/v1/sessions/{id}/viewer/strip`` the status strip, pushed as it changes
- ``/console/assets/*``, ``/console/novnc/*`` the page's code, and Debian's noVNC client

Both websockets take the live-view token as a subprotocol (``glassdesk.token.<token>``, offered
next to the real one): a browser cannot set headers on a websocket, and a token in the URL would
be written to access logs. The relay logs in to x11vnc itself, with the view-only password for a
view token (x11vnc then ignores input from it, whatever the client sends) and the control
password for a control token (desktop.session.liveview), and offers the browser RFB without
authentication: the VNC passwords never leave the server.

Refused tokens (and unknown sessions) count against the client's address (vision.http.auth.FailureLimit):
after 10 in a minute it gets 429 with Retry-After, before its tokens are even checked, until the
window passes.

Why one relay in the server instead of a websockify per session: the server is the one port to
expose; its Host/Origin policy and tokens apply to the live view as to everything else; no VNC
password appears in any URL; and ``glassdesk mcp`` serves this same viewer on loopback (it has
no API to serve it from otherwise), so there is one live view to secure and test, not two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from fastapi import APIRouter, FastAPI, Header, Request, WebSocket
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.websockets import WebSocketDisconnect, WebSocketState

from desktop.errors import (
    GlassdeskError,
    LiveTokenExpired,
    LiveTokenInvalid,
    LiveTokenRevoked,
    LiveTokenWrongSession,
    SessionNotFound,
    SessionUnavailable,
    StackError,
    TooManyAttempts,
)
from desktop.session.liveview import (
    CLIENT_SECURITY_TYPES,
    RFB_VERSION,
    SECURITY_NONE,
    SECURITY_OK,
    Grant,
    RFBError,
    pointer_at_rest,
    token_from_protocols,
)
from desktop.session.stack import novnc_dir
from vision.app.service import Glassdesk
from vision.http.auth import FailureLimit

log = logging.getLogger("glassdesk.viewer")

STATIC = Path(__file__).parent.parent / "static"
REFUSED = (LiveTokenInvalid, LiveTokenExpired, LiveTokenRevoked, LiveTokenWrongSession, SessionNotFound)
HANDSHAKE_TIMEOUT_S = 10.0
WATCH_EVERY_S = 0.2  # how often an open connection checks it is still granted, and the strip for news
# The viewer talks only to its own origin (websockets included). No inline script, no framing.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
PAGE_HEADERS = {"content-security-policy": CSP, "cache-control": "no-store", "referrer-policy": "no-referrer",
                "x-content-type-options": "nosniff", "x-frame-options": "DENY"}


def _client(scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


def viewer_router(glassdesk: Glassdesk, limit: FailureLimit) -> APIRouter:
    desktops = glassdesk.desktops
    router = APIRouter()

    def grant_for(scope, session_id: str, token: str | None) -> Grant:
        """The token's grant, or a typed refusal; refusals count against the client."""
        client = _client(scope)
        wait = limit.retry_after(client)
        if wait is not None:
            raise TooManyAttempts(f"too many refused live-view tokens from {client}; try again in {wait} s", wait)
        try:
            return desktops.live_grant(session_id, token)
        except REFUSED:
            limit.failed(client)
            raise

    def strip_state(grant: Grant) -> dict:
        session = desktops.peek(grant.session_id)
        strip = glassdesk.narrator.current(grant.session_id)
        return {"strip": strip.as_json() if strip else None,
                "takeover": bool(session and session.takeover_since is not None)}

    @router.get("/view/{session_id}", include_in_schema=False)
    def page(session_id: str) -> FileResponse:
        return FileResponse(STATIC / "viewer.html", media_type="text/html", headers=PAGE_HEADERS)

    @router.get("/api/v1/sessions/{session_id}/viewer", tags=["live view"])
    def viewer(request: Request, session_id: str,
               x_live_token: str | None = Header(None, description="the live-view token")) -> dict:
        """What a live-view token grants on this session (mode, expiry), and the status strip now."""
        grant = grant_for(request.scope, session_id, x_live_token)
        return {"session_id": grant.session_id, "mode": grant.mode, "expires": grant.expires, **strip_state(grant)}

    @router.websocket("/api/v1/sessions/{session_id}/vnc")
    async def vnc(websocket: WebSocket, session_id: str) -> None:
        token, protocol = token_from_protocols(websocket.scope.get("subprotocols", []))
        try:
            grant = grant_for(websocket.scope, session_id, token)
            reader, writer = await desktops.open_rfb(grant)
        except GlassdeskError as exc:
            return await _deny(websocket, exc)
        except (OSError, RFBError, asyncio.IncompleteReadError, TimeoutError) as exc:
            log.warning("live view of %s: x11vnc did not let the relay in: %s", session_id, exc)
            return await _deny(websocket, SessionUnavailable(
                f"the live view of session {session_id} is not reachable now (its VNC server may be restarting); "
                "try again in a few seconds"))
        try:
            await websocket.accept(subprotocol=protocol)
            # A control connection's input is read (a copy, nothing held back) for the record.
            tap = glassdesk.operator_tap(grant.session_id) if grant.control else None
            pointer = await _pointer(desktops, grant.session_id) if grant.control else None
            await _relay(websocket, reader, writer, lambda: desktops.grant_current(grant), tap, pointer)
        finally:
            writer.close()

    @router.websocket("/api/v1/sessions/{session_id}/viewer/strip")
    async def strip(websocket: WebSocket, session_id: str) -> None:
        token, protocol = token_from_protocols(websocket.scope.get("subprotocols", []))
        try:
            grant = grant_for(websocket.scope, session_id, token)
        except GlassdeskError as exc:
            return await _deny(websocket, exc)
        await websocket.accept(subprotocol=protocol)

        async def push() -> None:
            last = None
            while desktops.peek(session_id) is not None:
                state = strip_state(grant)
                if state != last:
                    await websocket.send_json(state)
                    last = state
                await asyncio.sleep(WATCH_EVERY_S)

        await _until_first(push(), _drain(websocket))
        await _close(websocket, 1000, "the session ended")

    return router


async def _deny(websocket: WebSocket, exc: GlassdeskError) -> None:
    """Refuse a websocket with glassdesk's error: an HTTP response instead of the upgrade (status,
    ``{"error": ...}``, Retry-After for 429), or a close code where the server cannot send one."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse({"error": exc.to_dict()}, exc.status,
                                                          headers=getattr(exc, "headers", None)))
    else:
        await websocket.close(code=4000 + exc.status, reason=f"{exc.code}: {exc.message}"[:120])


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    if websocket.application_state == WebSocketState.CONNECTED and websocket.client_state == WebSocketState.CONNECTED:
        with contextlib.suppress(Exception):
            await websocket.close(code=code, reason=reason)


async def _until_first(*coroutines) -> None:
    """Run the coroutines until the first of them ends; cancel the rest."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _drain(websocket: WebSocket) -> None:
    """Read (and drop) what the client sends, until it goes away."""
    while (await websocket.receive())["type"] != "websocket.disconnect":
        pass


async def _receive_bytes(websocket: WebSocket) -> bytes | None:
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        return None
    return message.get("bytes") or (message.get("text") or "").encode("latin-1", "replace")


async def _pointer(desktops, session_id: str) -> tuple[int, int] | None:
    """Where the X pointer is now, for x11vnc to be told as control begins; None when it cannot
    be read (the person's input is relayed all the same)."""
    try:
        # existing(): never the default session's start-on-demand (it may have gone since the grant).
        return await asyncio.to_thread(lambda: desktops.existing(session_id).cursor())
    except Exception as exc:
        log.debug("live view of %s: the pointer could not be read: %s", session_id, exc)
        return None


async def _relay(websocket: WebSocket, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, granted,  # noqa: C901
                 tap=None, pointer: tuple[int, int] | None = None) -> None:
    """Greet the browser as an RFB server with no authentication, then pass bytes both ways until
    either side closes or ``granted()`` turns false (a take-over revoked a control token). With
    ``pointer``, x11vnc is told the X pointer is there right after the browser's ClientInit
    (desktop.session.liveview.pointer_at_rest); the record (``tap``) reads only the browser's bytes."""
    pending = bytearray()

    async def read_exactly(n: int) -> bytes | None:
        while len(pending) < n:
            data = await _receive_bytes(websocket)
            if data is None:
                return None
            pending.extend(data)
        out = bytes(pending[:n])
        del pending[:n]
        return out

    try:
        async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
            await websocket.send_bytes(RFB_VERSION)
            if await read_exactly(12) != RFB_VERSION:
                return await _close(websocket, 1002, "speak RFB 3.8")
            await websocket.send_bytes(CLIENT_SECURITY_TYPES)
            if await read_exactly(1) != bytes([SECURITY_NONE]):
                return await _close(websocket, 1002, "choose security type None (1)")
            await websocket.send_bytes(SECURITY_OK)
    except (TimeoutError, WebSocketDisconnect, RuntimeError, OSError):  # slow, gone, or closed meanwhile
        return await _close(websocket, 1002, "the RFB handshake did not finish")
    def read(data: bytes) -> None:
        if tap is None:
            return
        try:
            tap.feed(data)
        except Exception:  # the record is worth less than the person's control: relay on regardless
            log.exception("live view: the operator's input could not be read for the record")
            tap.broken = "failed"

    at_rest = pointer_at_rest(*pointer) if pointer is not None else b""

    def to_vnc(data: bytes) -> None:
        nonlocal at_rest
        if at_rest and data:  # the browser's first byte is its ClientInit: messages may follow it
            writer.write(data[:1] + at_rest + data[1:])
            at_rest = b""
        else:
            writer.write(data)
        read(data)

    if pending:
        to_vnc(bytes(pending))

    async def browser_to_vnc() -> None:
        while (data := await _receive_bytes(websocket)) is not None:
            to_vnc(data)
            await writer.drain()

    async def vnc_to_browser() -> None:
        while data := await reader.read(1 << 16):
            await websocket.send_bytes(data)

    async def revoked() -> None:
        while granted():
            await asyncio.sleep(WATCH_EVERY_S)

    watcher = asyncio.ensure_future(revoked())
    await _until_first(browser_to_vnc(), vnc_to_browser(), watcher)
    if watcher.done() and not watcher.cancelled():
        await _close(websocket, 4403, "live_token_revoked: a take-over revoked this control link")
    else:
        await _close(websocket, 1000, "the desktop closed the connection")


class DenialLogFilter(logging.Filter):
    """uvicorn (0.54, websockets-sansio) logs "ASGI callable returned without completing handshake"
    as an ERROR after every websocket refused with an HTTP response, though that is a completed
    exchange; each refused live-view token would otherwise read as a server fault in the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


_DENIAL_LOG_FILTER = DenialLogFilter()


def mount_static(app: FastAPI) -> None:
    """The web clients' public code: console and viewer assets, and Debian's noVNC client."""
    app.mount("/console/assets", StaticFiles(directory=STATIC), name="console-assets")
    try:
        app.mount("/console/novnc", StaticFiles(directory=novnc_dir()), name="console-novnc")
    except StackError as exc:
        log.warning("no live view in the browser: %s", exc)


def install_viewer(app: FastAPI, glassdesk: Glassdesk, limit: FailureLimit | None = None) -> None:
    """Serve the live viewer from ``app`` (its routes, and the web clients' static files)."""
    app.state.live_limit = limit = limit or FailureLimit()
    app.include_router(viewer_router(glassdesk, limit))
    mount_static(app)
    logging.getLogger("uvicorn.error").addFilter(_DENIAL_LOG_FILTER)  # once: a filter is kept by identity
