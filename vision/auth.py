"""Bearer-token auth for everything the server exposes but /healthz, and the bind-address rule."""

from __future__ import annotations

import hmac
import ipaddress
import json

OPEN_PATHS = frozenset({"/healthz"})
# The operator console's page and its static code (console JS/CSS, the noVNC client) hold no secret
# and must load before the person has typed the token; every call they then make sends it.
CONSOLE_PAGE = "/"
CONSOLE_STATIC = "/console/"


def is_open(scope) -> bool:
    """Paths served without the token: /healthz, and GET/HEAD of the console page and its files."""
    path = scope["path"]
    if path in OPEN_PATHS:
        return True
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    return path == CONSOLE_PAGE or (path.startswith(CONSOLE_STATIC) and ".." not in path)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token: the desktop would be anyone's."""
    if not is_loopback(host) and not token:
        raise SystemExit(
            f"refusing to listen on {host} without a token: anyone who can reach it could drive the "
            "desktop. Set GLASSDESK_TOKEN (clients then send 'Authorization: Bearer <token>'), or bind "
            "to 127.0.0.1."
        )


def token_ok(presented: str | None, token: str) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), token.encode())


def bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    for key, value in headers:
        if key == b"authorization":
            scheme, _, credential = value.decode("latin-1").partition(" ")
            return credential.strip() if scheme.lower() == "bearer" else None
    return None


class BearerAuth:
    """ASGI middleware: every HTTP request but the open paths needs the token."""

    def __init__(self, app, token: str | None):
        self.app = app
        self.token = token

    async def __call__(self, scope, receive, send):
        if not self.token or scope["type"] not in ("http", "websocket") or is_open(scope):
            return await self.app(scope, receive, send)
        if token_ok(bearer(scope.get("headers", [])), self.token):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4401})
            return
        body = json.dumps({"error": {"code": "unauthorized", "message":
                                     "send 'Authorization: Bearer <GLASSDESK_TOKEN>'"}}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})
