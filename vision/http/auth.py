"""Bearer-token auth for everything the server exposes but /healthz, the Host/Origin policy for
every route, the per-client limit on refused live-view tokens, and the bind-address rule."""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vision.settings import Settings

OPEN_PATHS = frozenset({"/healthz"})
# The operator console's page and its static code (console JS/CSS, the noVNC client) hold no secret
# and must load before the person has typed the token; every call they then make sends it.
CONSOLE_PAGE = "/"
CONSOLE_STATIC = "/console/"
# The run viewer's page (vision/static/run.html): static, it holds no secret and reads the run
# from the API with the token, as the console does.
RUN_PAGE = re.compile(r"/runs/[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# The live viewer (vision.http.viewer): its page holds no secret, and its API and websockets check a
# live-view token themselves. A browser opening a link cannot send the bearer token.
VIEWER_PAGE = re.compile(r"/view/[a-z0-9][a-z0-9_-]{0,31}")
VIEWER_API = re.compile(r"/api/v1/sessions/[a-z0-9][a-z0-9_-]{0,31}/viewer")
VIEWER_SOCKETS = re.compile(r"/api/v1/sessions/[a-z0-9][a-z0-9_-]{0,31}/(vnc|viewer/strip)")
# The API's schema and its docs page (vision.http.openapi): the schema is no secret, and a browser
# cannot send the token to load the page; every operation they describe still needs it.
DOCS_PATHS = frozenset({"/openapi.json", "/docs"})
DOCS_STATIC = "/docs/static/"


def is_open(scope) -> bool:
    """Paths served without the bearer token: /healthz, GET/HEAD of the console page and its
    files, of the run viewer's page (its data is fetched with the token), of the API's schema and
    docs page (vision.http.openapi), and the live viewer (which needs a live-view token instead)."""
    path = scope["path"]
    if path in OPEN_PATHS:
        return True
    if scope["type"] == "websocket":
        return VIEWER_SOCKETS.fullmatch(path) is not None
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    return (path == CONSOLE_PAGE or (path.startswith(CONSOLE_STATIC) and ".." not in path) or path in DOCS_PATHS
            or RUN_PAGE.fullmatch(path) is not None
            or (path.startswith(DOCS_STATIC) and ".." not in path)
            or VIEWER_PAGE.fullmatch(path) is not None or VIEWER_API.fullmatch(path) is not None)


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
    hosts = {a.lower() for a in allowed}
    return host in hosts or (bool(colon) and port.isdigit() and f"{name}:*" in hosts)


def _name_and_port(netloc: str, default_port: str) -> tuple[str, str]:
    """("name", "port") of a Host header or an origin's authority, the scheme's port when none."""
    netloc = netloc.lower()
    name, colon, port = netloc.rpartition(":")
    if not colon or not port.isdigit() or (netloc.startswith("[") and not name.endswith("]")):
        return netloc, default_port
    return name, port


def same_origin(origin: str, host: str) -> bool:
    """Is ``origin`` (``scheme://name[:port]``) the origin this request was sent to, by its Host?

    The scheme is not compared: TLS may end at a reverse proxy, and the scheme the server then sees
    (X-Forwarded-Proto) is believed only from a proxy it was told to trust; a page cannot be served
    over both http and https on one port anyway. A missing port is the scheme's own."""
    scheme, sep, authority = origin.lower().partition("://")
    if not sep or scheme not in ("http", "https") or not authority or "/" in authority or not host:
        return False
    default = "443" if scheme == "https" else "80"
    return _name_and_port(authority, default) == _name_and_port(host, default)


def origin_allowed(headers: list[tuple[bytes, bytes]], allowed: list[str]) -> bool:
    """No Origin (not a browser, or a same-origin GET), this server's own origin (the one its Host
    names: the Host policy has already vouched for that name), or one of ``allowed`` exactly.

    Not "any port of a loopback name": a page of another local server (a dev server on
    127.0.0.1:3000, a page another session's browser was made to open) is another origin."""
    origin = next((v.decode("latin-1").lower() for k, v in headers if k == b"origin"), None)
    if origin is None:
        return True
    host = next((v.decode("latin-1") for k, v in headers if k == b"host"), "")
    return same_origin(origin, host) or origin in {a.lower().rstrip("/") for a in allowed}


def origin_problems(origins: list[str]) -> list[str]:
    """What is wrong with configured origins (pure): each ``http(s)://name[:port]``, nothing more."""
    problems = []
    for origin in origins:
        scheme, sep, authority = origin.partition("://")
        name, port = _name_and_port(authority, "80")
        if (not sep or scheme.lower() not in ("http", "https") or not authority or "/" in authority.rstrip("/")
                or not name or not port.isdigit() or "@" in authority):
            problems.append(f"--allowed-origins: {origin!r} is not an origin; write scheme://name[:port], e.g. "
                            "https://tools.example.com or http://127.0.0.1:3000")
    return problems


async def refuse(scope, send, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
    """Answer ``{"error": {code, message}}`` with ``status``: a plain HTTP response, or for a
    websocket an HTTP response instead of the upgrade where the server can send one (uvicorn can),
    so a client sees the status and the code, not just a dropped connection."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in (headers or {}).items())]
    if scope["type"] == "websocket":
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 4000 + status, "reason": f"{code}: {message}"[:120]})
            return
        await send({"type": "websocket.http.response.start", "status": status, "headers": head})
        await send({"type": "websocket.http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """ASGI middleware: the Host/Origin policy on every request, then the token.

    Host: a request whose Host is not one of ``allowed_hosts`` is refused (421), token or not: a
    web page whose name an attacker re-points at this server (DNS rebinding) must not reach it,
    and the open paths (the console's page, the live viewer) need the rule even when a token is set.
    Origin: a browser request from a page of any origin but this server's own (and the configured
    ``allowed_origins``) that could change something (POST, PUT, DELETE, PATCH) or open a websocket
    is refused (403).
    Token: every HTTP request and websocket but the open paths needs ``Authorization: Bearer``.
    """

    def __init__(self, app, token: str | None, allowed_hosts: list[str] | None = None,
                 allowed_origins: list[str] | None = None):
        self.app = app
        self.token = token
        self.allowed_hosts = allowed_hosts
        # Besides the server's own origin (same_origin), which is always allowed.
        self.check_origin = allowed_origins is not None
        self.allowed_origins = allowed_origins or []

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = scope.get("headers", [])
        if self.allowed_hosts is not None and not host_allowed(headers, self.allowed_hosts):
            return await refuse(scope, send, 421, "misdirected_request",
                                "unknown Host header; this server only answers to its loopback names, the address "
                                "it is bound to and its public host (GLASSDESK_PUBLIC_HOST / --public-host)")
        if (self.check_origin
                and (scope["type"] == "websocket" or scope.get("method") not in ("GET", "HEAD", "OPTIONS"))
                and not origin_allowed(headers, self.allowed_origins)):
            # A foreign page's form, no-cors fetch (e.g. POST .../vision/pause needs no body) or websocket.
            return await refuse(scope, send, 403, "forbidden_origin", "requests from another site's page are refused")
        if not self.token or is_open(scope) or token_ok(bearer(headers), self.token):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await refuse(scope, send, 401, "unauthorized", "send 'Authorization: Bearer <GLASSDESK_TOKEN>'")
        await refuse(scope, send, 401, "unauthorized", "send 'Authorization: Bearer <GLASSDESK_TOKEN>'",
                     {"www-authenticate": "Bearer"})


class FailureLimit:
    """Per client: after ``max_failures`` refused attempts within ``window_s`` seconds, further
    attempts are refused before they are checked, until the oldest of those failures is older
    than the window. Only that client, only that long: a holder of a valid token elsewhere is
    never locked out, and neither is this one once the window has passed."""

    def __init__(self, max_failures: int = 10, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.max_failures = max_failures
        self.window_s = window_s
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.get(client, deque())
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        return failures

    def retry_after(self, client: str) -> int | None:
        """Seconds until this client may try again, or None if it may now."""
        with self._lock:
            now = self._clock()
            failures = self._recent(client, now)
            if not failures:
                self._failures.pop(client, None)
            if len(failures) < self.max_failures:
                return None
            return max(1, math.ceil(failures[-self.max_failures] + self.window_s - now))

    def failed(self, client: str) -> None:
        with self._lock:
            now = self._clock()
            if len(self._failures) > 10_000:  # many clients: forget those whose failures have aged out
                for key in [k for k, v in self._failures.items() if not v or v[-1] <= now - self.window_s]:
                    del self._failures[key]
            failures = self._failures.setdefault(client, self._recent(client, now))
            failures.append(now)





def forwarded_problems(spec: str | None) -> list[str]:
    """What is wrong with a ``--forwarded-allow-ips`` list (pure): each entry an IP address, a
    network, or ``*`` alone. uvicorn would take a typo as a literal that never matches, silently."""
    if spec is None:
        return []
    entries = [e.strip() for e in spec.split(",")]
    if entries == ["*"]:
        return []
    problems = []
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            problems.append(f"--forwarded-allow-ips: {entry!r} is not an IP address or network "
                            "(give addresses and networks joined by commas, or * alone)")
    return problems


def uvicorn_proxy_options(settings: Settings) -> dict:
    """uvicorn's proxy-header options under ``settings``: off unless ``forwarded_allow_ips`` is set.

    uvicorn's own default trusts X-Forwarded-For from 127.0.0.1, so any local client could name
    any address as its own: the live view's per-client limit on refused tokens (FailureLimit) was
    then bypassed by a new address per attempt, and a client could lock another out by using its
    address. Only a reverse proxy the operator names is believed."""
    allowed = settings.forwarded_allow_ips
    if not allowed:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": allowed}
