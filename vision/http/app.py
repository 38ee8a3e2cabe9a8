"""The composition root: one FastAPI app serving the desktop primitives and the vision interfaces."""

from __future__ import annotations

import contextlib
import difflib

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException

from desktop.errors import GlassdeskError, describe_errors, typed_os_error
from desktop.http.desktop import desktop_router
from desktop.http.page import page_router
from desktop.http.routes import operations_router
from desktop.session.manager import SessionRegistry
from vision import VERSION
from vision.app.memory import Trimmer
from vision.app.ops import catalogue, services
from vision.app.service import Glassdesk
from vision.http.auth import BearerAuth
from vision.http.computer import computer_router
from vision.http.console import install_console
from vision.http.limits import BodyLimit, BodyTooLarge, too_large_response
from vision.http.openapi import install_docs
from vision.http.qa import qa_router
from vision.http.runs import vision_router
from vision.http.viewer import install_viewer
from vision.mcp import mount_http
from vision.mcp.server import transport_security
from vision.settings import Settings

__all__ = ["Settings", "create_app", "create_viewer_app"]


def create_app(manager: SessionRegistry, settings: Settings, glassdesk: Glassdesk | None = None) -> FastAPI:
    """The API over ``glassdesk`` (built over ``manager`` when not given). Stopping the app closes
    every session."""
    owned = glassdesk is None
    glassdesk = glassdesk or Glassdesk.from_settings(manager, settings)
    # The API's own port is control plane: no browser of the sessions it drives may reach it
    # (desktop.network.policy). A server that serves the app on another port adds that one to the set.
    glassdesk.desktops.manager.protect(settings.port)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        trimmer = Trimmer().start()  # freed frames given back to the system (vision.app.memory)
        async with mcp.session_manager.run():  # the MCP route's sessions live as long as the app
            try:
                yield
            finally:
                trimmer.stop()
                if owned:
                    glassdesk.close()
                else:  # a service it was given stays its owner's; the sessions of ``manager`` end here
                    manager.close()

    # FastAPI's own /docs and /redoc load their scripts from a CDN: vision.http.openapi serves the docs.
    app = FastAPI(title="glassdesk", version=VERSION, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="A visible Linux desktop for vision-mode computer-use agents.")
    app.state.glassdesk = glassdesk
    install_docs(app)  # GET /docs (Swagger UI, offline) and the truthful /openapi.json
    add_error_handlers(app)
    app.include_router(desktop_router(glassdesk.desktops))
    app.include_router(page_router(glassdesk.desktops.pages))
    # Every operation of the catalogue with a REST route (desktop.ops)
    app.include_router(operations_router(catalogue(), services(glassdesk)))
    app.include_router(vision_router(glassdesk))
    app.include_router(qa_router(glassdesk.qa))
    # /computer/anthropic, /openai, /gemini and /anthropic-browser
    app.include_router(computer_router(glassdesk.computer, glassdesk.browser_toolset))
    if settings.single_session:  # a session server: its control plane calls the page layer here
        from desktop.http.calls import calls_router

        app.include_router(calls_router(glassdesk.desktops))
    install_console(app, glassdesk)  # GET / (operator console), its API, /metrics
    install_viewer(app, glassdesk)  # GET /view/{id}, the RFB relay and strip websockets, static files
    glassdesk.desktops.serve_viewer(settings.public_url)  # live-view links point here
    mcp = app.state.mcp = mount_http(app, glassdesk, settings)  # POST/GET/DELETE /mcp, streamable HTTP

    @app.get("/healthz", tags=["meta"])
    def healthz() -> dict:
        # How sessions are kept apart on this host, and what is degraded (docs/isolation.md).
        return {"ok": True, "sessions": len(manager.sessions), "isolation": manager.isolation}

    _guard(app, settings)
    app.add_middleware(BodyLimit)  # outermost: an oversized body is refused before anything reads it
    return app


def create_viewer_app(glassdesk: Glassdesk, settings: Settings) -> FastAPI:
    """The live viewer alone, for `glassdesk mcp`: it has no API to serve the viewer from, so it
    serves this on loopback. Every route in it checks a live-view token (settings.token unused)."""
    app = FastAPI(title="glassdesk viewer", version=VERSION, openapi_url=None, docs_url=None, redoc_url=None)
    add_error_handlers(app)
    install_viewer(app, glassdesk)
    glassdesk.desktops.serve_viewer(settings.public_url)
    glassdesk.desktops.manager.protect(settings.port)  # no session's browser, here or on another server, may reach it
    _guard(app, settings, token=None)
    return app


def _guard(app: FastAPI, settings: Settings, **override) -> None:
    """Foreign Host names (DNS rebinding) and any Origin but the server's own (and the configured
    ones) on state-changing requests and websockets are refused on every route, token or not; then
    the bearer token."""
    local = transport_security(settings)
    app.add_middleware(BearerAuth, token=override.get("token", settings.token), allowed_hosts=local.allowed_hosts,
                       allowed_origins=list(settings.allowed_origins))


def add_error_handlers(app: FastAPI) -> None:
    """Every error leaves as ``{"error": {"code", "message"}}`` with the right status."""

    @app.exception_handler(GlassdeskError)
    async def glassdesk_error(_: Request, exc: GlassdeskError) -> JSONResponse:
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.retry_after:
            headers["retry-after"] = str(exc.retry_after)
        return JSONResponse({"error": exc.to_dict()}, status_code=exc.status, headers=headers or None)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        if (typed := typed_os_error(exc)) is not None:  # a full disk is no bug: 507 storage_full, saying where
            return await glassdesk_error(request, typed)
        # A bug, not a user error: the shape stays the same; the server log has the traceback.
        message = f"unexpected {type(exc).__name__}; the server log has the details"
        return JSONResponse({"error": {"code": "internal_error", "message": message}}, status_code=500)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and isinstance(exc.__cause__, BodyTooLarge):
            # A chunked body that grew past the cap while FastAPI read it: FastAPI turns whatever its
            # read raised into this 400, so BodyLimit never sees it; the same 413 as a declared length.
            return too_large_response(exc.__cause__.limit)
        if exc.status_code == 400:
            # FastAPI's only 400: a body its JSON parser gave up on (not UTF-8, a number of over 4300
            # digits, nesting too deep). A bad body like any other.
            return JSONResponse({"error": {"code": "invalid_json", "message": unreadable(exc.__cause__)}},
                                status_code=422)
        # FastAPI's own 404 (no such route) and 405 (wrong method), in the same shape as ours.
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        headers = dict(getattr(exc, "headers", None) or {})
        message = str(exc.detail)
        if exc.status_code == 405:
            # Starlette's Allow names the methods of the first route of the path only (GET of
            # /sessions/{id} when DELETE is another route's): every route of the path counts.
            # A mounted app's own 405 (the static files') keeps the Allow it gave.
            allowed = allowed_methods(request.app.router.routes, request.scope) or \
                [m.strip() for m in headers.get("Allow", "").split(",") if m.strip()]
            headers["Allow"] = ", ".join(allowed)
            message = f"{request.method} is not allowed here; this path takes {', '.join(allowed)}"
        if exc.status_code == 404 and message == "Not Found":  # no route: say what there is beside it
            message = no_route_message(request.app.router.routes, request.scope)
        return JSONResponse({"error": {"code": code, "message": message}}, status_code=exc.status_code,
                            headers=headers or None)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if body_not_json(errors):  # nothing in it was read: say what to send, and what was sent
            sent = request.headers.get("content-type") or "none"
            message = f"{describe_errors(errors)} (this request's Content-Type: {sent})"
            return JSONResponse({"error": {"code": "invalid_json", "message": message}}, status_code=422)
        return JSONResponse({"error": {"code": bad_body_code(request), "message": describe_errors(errors)}},
                            status_code=422)


SEND_JSON = "send a JSON object with Content-Type: application/json"


def allowed_methods(routes, scope) -> list[str]:
    """Every method some route of ``scope``'s path answers. FastAPI keeps an included router's
    routes inside it (``iter_route_contexts`` walks them, as its OpenAPI does)."""
    root = scope.get("root_path", "")
    path = scope["path"].removeprefix(root) if root else scope["path"]
    methods: set[str] = set()
    for route in iter_route_contexts(routes):
        regex = getattr(route, "path_regex", None)
        if route.methods and regex is not None and regex.match(path):
            methods |= route.methods
    return sorted(methods)


def no_route_message(routes, scope) -> str:
    """A 404 for a path no route has: the routes beside it (the same path with another last part,
    e.g. the desktop's actions for /desktop/clickk) and the closest, when there are any."""
    root = scope.get("root_path", "")
    path = scope["path"].removeprefix(root) if root else scope["path"]
    parent, _, last = path.rstrip("/").rpartition("/")
    beside: set[str] = set()
    for route in iter_route_contexts(routes):
        regex, template = getattr(route, "path_regex", None), getattr(route, "path", "")
        name = template.rpartition("/")[2]
        if regex is not None and name and "{" not in name and regex.match(f"{parent}/{name}"):
            beside.add(name)
    if not beside:
        return f"no route {path}"
    near = difflib.get_close_matches(last, sorted(beside), n=1)
    return (f"no route {path}" + (f"; did you mean {near[0]!r}?" if near else "")
            + f" Beside it: {', '.join(sorted(beside))}")


def body_not_json(errors) -> bool:
    """Was the body not JSON at all: unparseable, or not sent as JSON (then FastAPI hands the raw
    bytes to validation)? A JSON body with wrong fields is the route's own bad-body code."""
    return any(e.get("type") == "json_invalid"
               or (tuple(e.get("loc", ())) == ("body",) and isinstance(e.get("input"), (bytes, bytearray)))
               for e in errors)


def unreadable(cause: BaseException | None) -> str:
    if isinstance(cause, UnicodeDecodeError):
        return f"body: not valid JSON: it must be UTF-8 encoded; {SEND_JSON}"
    return f"body: could not be read as JSON ({str(cause)[:120] or type(cause).__name__}); {SEND_JSON}"


def bad_body_code(request: Request) -> str:
    """A bad desktop action is invalid_action; any other bad body (a vision run, a session) is
    invalid_request. A body that is not JSON at all is invalid_json, whatever the route."""
    return "invalid_action" if "/desktop/" in request.url.path else "invalid_request"
