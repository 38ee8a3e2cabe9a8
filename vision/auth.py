"""Bearer-token auth for everything the server exposes but /healthz, and the bind-address rule."""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import TYPE_CHECKING

from mcp.server.transport_security import TransportSecuritySettings

if TYPE_CHECKING:
    from vision.settings import Settings

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


def host_allowed(headers: list[tuple[bytes, bytes]], allowed: list[str]) -> bool:
    """Is the request's Host one of ``allowed`` ("name" or "name:*" for any port)?"""
    host = next((v.decode("latin-1").lower() for k, v in headers if k == b"host"), "")
    name, colon, port = host.rpartition(":") if not host.endswith("]") else ("", "", "")
    allowed = {a.lower() for a in allowed}
    return host in allowed or (bool(colon) and port.isdigit() and f"{name}:*" in allowed)


def origin_allowed(headers: list[tuple[bytes, bytes]], allowed: list[str]) -> bool:
    """No Origin (not a browser, or same-origin GET) or one of ``allowed`` ("scheme://name:*" for any port)."""
    origin = next((v.decode("latin-1").lower() for k, v in headers if k == b"origin"), None)
    if origin is None:
        return True
    allowed = {a.lower() for a in allowed}
    base, colon, port = origin.rpartition(":")
    return origin in allowed or (bool(colon) and port.isdigit() and f"{base}:*" in allowed)


class BearerAuth:
    """ASGI middleware: every HTTP request but the open paths needs the token.

    Without a token the server listens on loopback only (check_bind); then, if ``allowed_hosts`` is
    given, a request whose Host is not one of them is refused (421): a web page whose name an
    attacker re-points at 127.0.0.1 (DNS rebinding) must not reach the API, as /mcp already refuses.
    """

    def __init__(self, app, token: str | None, allowed_hosts: list[str] | None = None,
                 allowed_origins: list[str] | None = None):
        self.app = app
        self.token = token
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins

    async def __call__(self, scope, receive, send):
        if (not self.token and self.allowed_origins is not None and scope["type"] == "http"
                and scope.get("method") not in ("GET", "HEAD", "OPTIONS")
                and not origin_allowed(scope.get("headers", []), self.allowed_origins)):
            # A foreign page's form or no-cors fetch (e.g. POST .../vision/pause needs no body).
            body = json.dumps({"error": {"code": "forbidden_origin", "message":
                                         "requests from another site's page are refused"}}).encode()
            await send({"type": "http.response.start", "status": 403, "headers": [
                (b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        if (not self.token and self.allowed_hosts is not None and scope["type"] in ("http", "websocket")
                and not host_allowed(scope.get("headers", []), self.allowed_hosts)):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4421})
                return
            body = json.dumps({"error": {"code": "misdirected_request", "message":
                                         "unknown Host header; without GLASSDESK_TOKEN this server only answers "
                                         "to its loopback names and its public host"}}).encode()
            await send({"type": "http.response.start", "status": 421, "headers": [
                (b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
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


def transport_security(settings: "Settings", public_host: str | None = None) -> TransportSecuritySettings:
    """The Host/Origin policy, for /mcp and (without a token) every other route.

    DNS-rebinding protection stays ON: a web page on evil.example whose name an attacker re-points
    at 127.0.0.1 reaches this server with ``Host: evil.example`` and is refused (421) before any
    tool runs, and a browser request from a foreign page's Origin is refused (403). Allowed are the
    loopback names on any port (so local clients and tests work), the address the server is bound
    to, and the public host name the URLs are printed with (GLASSDESK_PUBLIC_HOST / --public-host).
    The bearer token, when set, guards /mcp as it guards every other route.
    """
    hosts = {"127.0.0.1", "localhost", "[::1]"}
    for name in (settings.host, public_host):
        if name and name not in ("0.0.0.0", "::"):
            hosts.add(f"[{name}]" if ":" in name else name)
    allowed_hosts = sorted({f"{h}:*" for h in hosts} | hosts)
    allowed_origins = sorted({f"{scheme}://{h}{port}" for h in hosts for scheme in ("http", "https")
                              for port in ("", ":*")})
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts,
                                     allowed_origins=allowed_origins)
