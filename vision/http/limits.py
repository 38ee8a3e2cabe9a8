"""Request limits, enforced before anything parses a body.

Without a cap, five concurrent 100 MB bodies took the server from 143 to 945 MiB. The largest
legitimate body (20,000 characters to type, a script of actions, an instruction) is far below
MAX_BODY_BYTES.
"""

from __future__ import annotations

import json

from starlette.responses import JSONResponse

MAX_BODY_BYTES = 1024 * 1024


class BodyTooLarge(Exception):
    """Raised by BodyLimit's receive once a body passes the limit (its one argument)."""

    @property
    def limit(self) -> int:
        return self.args[0] if self.args else MAX_BODY_BYTES


def _too_large_body(limit: int) -> dict:
    return {"error": {"code": "body_too_large", "message": f"the request body is over the {limit}-byte limit"}}


def too_large_response(limit: int = MAX_BODY_BYTES) -> JSONResponse:
    """The 413, for a route that found the limit while its body was read (vision.http.app)."""
    return JSONResponse(_too_large_body(limit), status_code=413, headers={"connection": "close"})


def _too_large_response(limit: int) -> tuple[dict, dict]:
    body = json.dumps(_too_large_body(limit)).encode()
    return ({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"application/json"),
                                                                         (b"connection", b"close")]},
            {"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: a body over ``max_bytes`` is answered 413 ``body_too_large``, whether its
    Content-Length says so up front or a chunked body grows past the limit while it is read."""

    def __init__(self, app, max_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = next((v for k, v in scope.get("headers", []) if k == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            for message in _too_large_response(self.max_bytes):
                await send(message)
            return
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracked_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except BodyTooLarge:
            if not started:
                for message in _too_large_response(self.max_bytes):
                    await send(message)
