"""Typed errors: a stable code, an HTTP status, and a sentence a user can act on.

The vision layer adds its own codes by subclassing GlassdeskError; the API turns any of them into
``{"error": {"code", "message"}}`` with the status.
"""

from __future__ import annotations

from pydantic import ValidationError


class GlassdeskError(Exception):
    code = "internal_error"
    status = 500

    def __init__(self, message: str, **detail):
        super().__init__(message)
        self.message = message
        self.detail = detail

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message, **({"detail": self.detail} if self.detail else {})}


class InvalidAction(GlassdeskError):
    code, status = "invalid_action", 422


class InvalidRequest(GlassdeskError):
    """A request that is not about one action and cannot be carried out as given (a vision run's
    parameters, a network policy's patterns)."""

    code, status = "invalid_request", 422


class SessionNotFound(GlassdeskError):
    code, status = "session_not_found", 404


class SessionLimit(GlassdeskError):
    code, status = "session_limit", 429


class SessionBusy(GlassdeskError):
    code, status = "session_busy", 409


class OperatorInControl(GlassdeskError):
    """A person has taken over the desktop: an agent must not fight them for the pointer."""

    code, status = "operator_in_control", 409


class SessionUnavailable(GlassdeskError):
    code, status = "session_unavailable", 503


class ScreenshotFailed(GlassdeskError):
    code, status = "screenshot_failed", 500


class ActionFailedError(GlassdeskError):
    code, status = "action_failed", 500


class Unauthorized(GlassdeskError):
    code, status = "unauthorized", 401


def describe_validation(exc: ValidationError) -> str:
    return describe_errors(exc.errors())


def describe_errors(errors) -> str:
    """Pydantic's errors as one readable sentence: 'x: must be <= 1919; keys: unknown key ...'."""
    parts = []
    for err in errors:
        # Drop the request part ("body") and the union branch names pydantic adds to a location.
        loc = [str(p) for p in err["loc"] if p != "body" and not str(p).startswith("function-")]
        if len(loc) > 1 and loc[0] in _action_names():
            loc = loc[1:]
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc)}: {message}" if loc else message)
    return "; ".join(parts)


def _action_names() -> set[str]:
    """The tags of every action model defined so far (a discriminated union puts the tag in an
    error's location: ``click.x``), the vision layer's own actions included."""
    from desktop.actions import _Action  # here: desktop.actions imports this module's neighbours

    names, pending = set(), list(_Action.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        field = cls.model_fields.get("action")
        if field is not None and isinstance(field.default, str):
            names.add(field.default)
    return names
