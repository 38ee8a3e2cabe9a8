"""The API's errors, raised in the client as the server's own typed error classes.

Every error leaves the server as ``{"error": {"code", "message"}}`` with a status (and
``Retry-After`` when trying again later is worth it). The client raises an ``ApiError`` that is
also an instance of the server's class for that code, so ``except SessionNotFound`` (from
``desktop.errors``) works on both sides of the wire, and ``err.code`` / ``err.status`` /
``err.retry_after`` are always there.
"""

from __future__ import annotations

import json
import math
from functools import cache

from pydantic import ValidationError

import vision.errors  # noqa: F401  (the vision layer's codes)
from desktop.errors import GlassdeskError, describe_validation

__all__ = ["ApiError", "error_class", "error_from_response", "invalid_input"]


class ApiError(GlassdeskError):
    """An error answer of the glassdesk API. ``code`` is the stable error code, ``status`` the
    HTTP status (None when the client refused the input before sending it), ``retry_after`` the
    seconds the server asked to wait, when it said so."""

    # None when the client refused the input before sending it (no answer, so no status): wider
    # than the int of the server's classes, which this one's subclasses also are.
    status: int | None  # type: ignore[assignment]

    def __init__(self, code: str, message: str, *, status: int | None = None, retry_after: float | None = None,
                 detail: dict | None = None):
        Exception.__init__(self, f"{code}: {message}")
        self.code, self.message, self.status = code, message, status
        # Whole seconds, as the server's errors hold it (Retry-After is an integer of seconds).
        self.retry_after = math.ceil(retry_after) if retry_after is not None else None
        self.detail = detail or {}


def _server_classes() -> dict[str, type[GlassdeskError]]:
    found: dict[str, type[GlassdeskError]] = {}
    pending = list(GlassdeskError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if not issubclass(cls, ApiError) and isinstance(cls.__dict__.get("code"), str):
            found.setdefault(cls.code, cls)
    return found


@cache
def error_class(code: str) -> type[ApiError]:
    """The ApiError subclass for ``code``: it also subclasses the server's class of that code,
    when there is one (a code the server added later is a plain ApiError)."""
    server = _server_classes().get(code)
    if server is None:
        return ApiError
    return type(server.__name__, (ApiError, server), {"__module__": __name__, "__doc__": server.__doc__})


def error_from_response(status: int, headers: dict[str, str], body: bytes) -> ApiError:
    """The exception for an error answer (pure). A body not in the API's shape (a proxy's page,
    say) still gives an ApiError, coded by its status."""
    try:
        error = json.loads(body)["error"]
        code, message = str(error["code"]), str(error.get("message", ""))
        detail = error.get("detail") if isinstance(error.get("detail"), dict) else None
    except (ValueError, KeyError, TypeError):
        code, message, detail = f"http_{status}", body[:300].decode("utf-8", "replace"), None
    retry = headers.get("retry-after")
    try:
        retry_after = float(retry) if retry is not None else None
    except ValueError:  # an HTTP date: not what glassdesk sends
        retry_after = None
    return error_class(code)(code, message, status=status, retry_after=retry_after, detail=detail)


def invalid_input(exc: ValidationError, code: str = "invalid_action") -> ApiError:
    """A request the client refused before sending it, worded as the server words the same fault."""
    return error_class(code)(code, describe_validation(exc))
