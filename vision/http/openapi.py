"""The OpenAPI schema as the server really answers, and the docs page that renders it offline.

FastAPI's generated schema says every 422 is ``{"detail": [...]}`` and declares no other error; the
real answer to every error is ``{"error": {"code", "message"}}`` (``vision.http.app.add_error_handlers``,
``vision.http.auth.refuse``). ``truthful_openapi`` rewrites the generated schema once: the one error
model on every operation (401, 404, 409, 422, 429, 503 by name, any other status as ``default``),
each status described with the codes that answer with it, and the bearer scheme the server checks
(so Swagger UI's Authorize button works). What the server lets through without the token is
declared with no security. The input rules its validators and services enforce beyond the models'
own schema are written in by ``vision.http.input_rules``.

The docs page is Swagger UI from the ``fastapi-swagger`` package (pinned in constraints.txt),
served by this app, never from a CDN: a machine with no internet shows the same page. Why that
package: it is Swagger UI's own dist re-packaged for Python on each upstream release (0.4.64 carries
swagger-ui 5.34.0, against 5.35.0 on npm), so `pip install` on a fresh clone (CI, the Docker
image) has it without Node.js. The alternatives were older or not offline: swagger-ui-bundle
(last release 2023, swagger-ui 4.15), fastapi-offline (swagger-ui 5.32), scalar-fastapi (loads
its script from a CDN), and swagger-ui-dist from npm (current, but it would need npm at install
time, which `make setup` does not install). Only its static files are used, not its
``patch_fastapi``: that one also redirects ``/`` (the console) and reads the 1.5 MB bundle on every
request.
"""

from __future__ import annotations

from collections import defaultdict
from importlib import resources
from typing import Any, TypeVar

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field
from starlette.staticfiles import StaticFiles

from desktop.errors import GlassdeskError
from vision.http.input_rules import document as document_input_rules

DOCS_URL = "/docs"
OPENAPI_URL = "/openapi.json"
DOCS_STATIC = "/docs/static"
SECURITY_SCHEME = "bearer"

T = TypeVar("T")

# The statuses every operation declares by name (the ones a client most needs to tell apart);
# whatever else an operation may answer (403, 405, 408, 413, 421, 500) is its "default" response.
NAMED_STATUSES = (401, 404, 409, 422, 429, 503)

# Codes the server answers outside the GlassdeskError classes (auth, limits, FastAPI's own).
_OTHER_CODES = {401: ["unauthorized"], 403: ["forbidden_origin"], 404: ["not_found"], 405: ["method_not_allowed"],
                413: ["body_too_large"], 421: ["misdirected_request"], 422: ["invalid_json"],
                500: ["internal_error"]}


class ErrorBody(BaseModel):
    code: str = Field(description="stable, machine-readable: e.g. session_not_found, session_busy")
    message: str = Field(description="a sentence a person can act on")
    detail: dict[str, Any] | None = Field(None, description="extra facts, for some codes")


class Error(BaseModel):
    """Every error the server answers, whatever the route and the status."""

    error: ErrorBody


def _subclasses(cls: type[T]) -> list[type[T]]:
    found: list[type[T]] = []
    pending = list(cls.__subclasses__())
    while pending:
        sub = pending.pop()
        found.append(sub)
        pending += sub.__subclasses__()
    return found


def codes_by_status() -> dict[int, list[str]]:
    """Which error codes answer with which status: the error classes loaded now (desktop's and
    vision's), plus the few answered by the middleware and FastAPI itself."""
    import vision.errors  # noqa: F401  (its classes count too)

    codes: dict[int, set[str]] = defaultdict(set)
    for cls in _subclasses(GlassdeskError):
        codes[cls.status].add(cls.code)
    for status, names in _OTHER_CODES.items():
        codes[status].update(names)
    return {status: sorted(names) for status, names in sorted(codes.items())}


def _open_operation(path: str) -> bool:
    """Operations the bearer token does not guard (vision.http.auth.is_open): /healthz, and the live
    viewer's API, which checks a live-view token instead."""
    from vision.http.auth import OPEN_PATHS, VIEWER_API

    return path in OPEN_PATHS or VIEWER_API.fullmatch(path.replace("{session_id}", "s")) is not None


def truthful(schema: dict) -> dict:
    """``schema`` (FastAPI's) with the real errors and the security scheme (in place, returned)."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas["Error"] = Error.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(schemas["Error"].pop("$defs"))  # ErrorBody
    components["securitySchemes"] = {SECURITY_SCHEME: {
        "type": "http", "scheme": "bearer",
        "description": "the server's token (GLASSDESK_TOKEN); when the server runs without one, any value works"}}
    schema["security"] = [{SECURITY_SCHEME: []}]

    codes = codes_by_status()
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}

    def described(status: int | None) -> str:
        if status is None:
            others = [s for s in codes if s not in NAMED_STATUSES and s >= 400]
            return "another error, in the same shape: " + "; ".join(
                f"{s}: {', '.join(codes[s])}" for s in others)
        return ", ".join(codes.get(status, [])) or "an error"

    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            is_open = _open_operation(path)
            if is_open:
                operation["security"] = []
            for status in NAMED_STATUSES:
                if status == 401 and is_open:
                    continue
                responses[str(status)] = {"description": described(status), "content": error}
            responses["default"] = {"description": described(None), "content": error}
            operation["responses"] = dict(sorted(responses.items(), key=lambda item: (not item[0].isdigit(), item[0])))
    return schema


def install_docs(app: FastAPI) -> None:
    """The truthful schema at /openapi.json and Swagger UI at /docs, both from this app alone.
    The app must be created with ``docs_url=None, redoc_url=None`` (FastAPI's pages use a CDN)."""

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = truthful(get_openapi(title=app.title, version=app.version, description=app.description,
                                          routes=app.routes))
            app.openapi_schema = document_input_rules(schema, app.routes)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    static = resources.files("fastapi_swagger") / "resources"
    app.mount(DOCS_STATIC, StaticFiles(directory=str(static)), name="docs-static")

    @app.get(DOCS_URL, include_in_schema=False)
    def docs() -> HTMLResponse:
        # Relative to the app's root, like the schema's URL: works behind any host name.
        return get_swagger_ui_html(
            openapi_url=OPENAPI_URL, title=f"{app.title} API", swagger_favicon_url=f"{DOCS_STATIC}/favicon-32x32.png",
            swagger_js_url=f"{DOCS_STATIC}/swagger-ui-bundle.js", swagger_css_url=f"{DOCS_STATIC}/swagger-ui.css",
            # The token typed into Authorize survives a reload of the page (kept in the browser).
            swagger_ui_parameters={"persistAuthorization": True, "displayRequestDuration": True})
