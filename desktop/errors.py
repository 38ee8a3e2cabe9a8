"""Typed errors: a stable code, an HTTP status, and a sentence a user can act on.

The vision layer adds its own codes by subclassing GlassdeskError; the API turns any of them into
``{"error": {"code", "message"}}`` with the status.
"""

from __future__ import annotations

import errno
import math
import os
import shutil

from pydantic import ValidationError


class GlassdeskError(Exception):
    code = "internal_error"
    status = 500

    def __init__(self, message: str, *, retry_after: float | None = None, **detail):
        super().__init__(message)
        self.message = message
        self.detail = detail
        # Whole seconds after which trying again is worth it, when that is known: REST sends it as
        # Retry-After, MCP adds it to the error text.
        self.retry_after = max(1, math.ceil(retry_after)) if retry_after is not None else None

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


class SessionExists(GlassdeskError):
    """A session is asked for under a name one already has: a conflict with what exists, not a
    malformed request."""

    code, status = "session_exists", 409


class StateNotFound(GlassdeskError):
    """No saved state of that name (desktop.session.states)."""

    code, status = "state_not_found", 404


class GuestNotOpen(GlassdeskError):
    """A session's OSWorld guest is asked about while none is open (desktop.osworld)."""

    code, status = "osworld_guest_not_open", 404


class StateTampered(GlassdeskError):
    """A saved state whose files no longer are what was saved: refused, nothing restored."""

    code, status = "state_tampered", 409


class SessionLimit(GlassdeskError):
    code, status = "session_limit", 429


class SessionBusy(GlassdeskError):
    """Someone else is acting on the session: a vision run, or an action still running after a
    request waited QUEUE_WAIT_S for it. Always carries a retry hint (1 s when nothing better is known)."""

    code, status = "session_busy", 409

    def __init__(self, message: str, *, retry_after: float = 1, **detail):
        super().__init__(message, retry_after=retry_after, **detail)


class OperatorInControl(GlassdeskError):
    """A person has taken over the desktop: an agent must not fight them for the pointer."""

    code, status = "operator_in_control", 409


class SessionUnavailable(GlassdeskError):
    code, status = "session_unavailable", 503


class ScreenshotFailed(GlassdeskError):
    code, status = "screenshot_failed", 500


class TypedIntoNothing(GlassdeskError):
    """A ``type`` refused before a key was sent: the page in front has the keyboard focus on
    something that takes no text (desktop.browser.focus)."""

    code, status = "typed_into_nothing", 409


class ActionFailedError(GlassdeskError):
    code, status = "action_failed", 500


class SingleSessionOnly(GlassdeskError):
    """A session server (`glassdesk up --single-session`, one per container or pod) runs its one
    session for its whole life: its control plane creates and deletes sessions, not it."""

    code, status = "single_session", 409


class Unauthorized(GlassdeskError):
    code, status = "unauthorized", 401


class LiveTokenInvalid(GlassdeskError):
    """A live-view token that is not ours: forged, mistyped, or signed by another server run."""

    code, status = "live_token_invalid", 403


class LiveTokenWrongSession(GlassdeskError):
    code, status = "live_token_wrong_session", 403


class LiveTokenExpired(GlassdeskError):
    code, status = "live_token_expired", 403


class LiveTokenRevoked(GlassdeskError):
    """A control token issued before the last take-over."""

    code, status = "live_token_revoked", 403


class TooManyAttempts(GlassdeskError):
    """Too many refused live-view tokens from one client in a short time; ``retry_after`` seconds."""

    code, status = "too_many_attempts", 429

    def __init__(self, message: str, retry_after: int):
        super().__init__(message, retry_after_s=retry_after)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"retry-after": str(self.retry_after)}


# ------------------------------------------------------------------------- the page layer


class ElementNotFound(GlassdeskError):
    code, status = "element_not_found", 404


class InvalidSelector(GlassdeskError):
    code, status = "invalid_selector", 422


class AmbiguousElement(GlassdeskError):
    """An action's locator matches several elements (Playwright's strict mode); nothing was done."""

    code, status = "ambiguous_element", 422


class ElementCovered(GlassdeskError):
    """Real input at the element's pixel would land on something else; nothing was done."""

    code, status = "element_covered", 409


class PageTimeoutError(GlassdeskError):
    code, status = "timeout", 408


class DialogOpenError(GlassdeskError):
    code, status = "dialog_open", 409


class NoDialogError(GlassdeskError):
    code, status = "no_dialog", 409


class PageUnavailable(GlassdeskError):
    """The browser is restarting (a heal, a reset) or not answering; try again shortly."""

    code, status = "page_unavailable", 503


class EvaluateDisabled(GlassdeskError):
    code, status = "evaluate_disabled", 403


class ResultTooLarge(GlassdeskError):
    """What the page gave back is over the size one answer may carry; nothing is cut silently."""

    code, status = "result_too_large", 422


class UploadTooLarge(GlassdeskError):
    code, status = "upload_too_large", 413


def describe_validation(exc: ValidationError) -> str:
    return describe_errors(exc.errors())


# An answer lists every problem of a request, but a bounded number of them and each bounded:
# a 1 MB body of 70,000 unknown keys was answered with a 2.9 MB message (one part per key, each
# echoing its key). Past MAX_LISTED problems the rest are counted, not listed; a part longer than
# MAX_PART_CHARS (a key or a value echoed back) is cut, saying by how much.
MAX_LISTED = 20
MAX_PART_CHARS = 300


def clip(text: str, limit: int = MAX_PART_CHARS) -> str:
    """``text``, or its start and how many characters were left out (pure)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def describe_errors(errors) -> str:
    """Pydantic's errors as one readable sentence: 'x: must be <= 1919; keys: unknown key ...'.
    At most MAX_LISTED of them, each clipped, then a count of those left out."""
    errors = list(errors)
    parts = [clip(part) for part in _parts(errors[:MAX_LISTED])]
    if len(errors) > MAX_LISTED:
        parts.append(f"and {len(errors) - MAX_LISTED:,} more problems ({len(errors):,} in all; the first "
                     f"{MAX_LISTED} are listed)")
    return "; ".join(parts)


def _parts(errors) -> list[str]:
    parts = []
    for err in errors:
        kind = err.get("type")
        if kind == "json_invalid":  # FastAPI's: the body is not JSON at all
            where = f" at position {err['loc'][-1]}" if isinstance(err["loc"][-1], int) else ""
            parts.append(f"body: not valid JSON ({err.get('ctx', {}).get('error', 'decode error')}{where}); "
                         "send a JSON object with Content-Type: application/json")
            continue
        if tuple(err["loc"]) == ("body",) and kind == "missing":
            parts.append("body: missing; send a JSON object")
            continue
        if tuple(err["loc"]) == ("body",) and kind in ("model_attributes_type", "dict_type", "model_type"):
            # The body as a whole is not an object: FastAPI hands over the raw bytes when the
            # request did not say it was JSON.
            parts.append("body: send a JSON object with Content-Type: application/json"
                         if isinstance(err.get("input"), (bytes, bytearray)) else "body: must be a JSON object")
            continue
        # Drop the request part ("body") and the union branch names pydantic adds to a location.
        loc = [str(p) for p in err["loc"] if p != "body" and not str(p).startswith("function-")]
        if len(loc) > 1 and loc[0] in _action_names():
            loc = loc[1:]
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc)}: {message}" if loc else message)
    return parts


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



class StorageFull(GlassdeskError):
    """The disk under the data directory (traces, QA runs, films) or a session's files is full: a
    507, not a 500 (nothing is wrong with the server), with what is full and how much is free."""

    code, status = "storage_full", 507

    @classmethod
    def of(cls, path: str | os.PathLike[str], needed: int | None = None) -> StorageFull:
        try:
            free = f"{shutil.disk_usage(path).free / 2**20:.1f} MiB free"
        except OSError:
            free = "free space unknown"
        wants = f", {needed / 2**20:.0f} MiB needed" if needed else ""
        return cls(f"the disk holding {path} is full ({free}{wants}): free space there, or start the server "
                   "with another --data-dir", path=str(path))


def disk_full(exc: BaseException) -> bool:
    """Is this the disk (or a quota) being full, not some other failure to write?"""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def typed_os_error(exc: BaseException) -> GlassdeskError | None:
    """The typed error a door answers for an OSError that escaped its operation: a full disk is
    storage_full (507) naming where, whatever wrote; anything else stays a crash (None)."""
    if not disk_full(exc):
        return None
    filename = getattr(exc, "filename", None)
    where = os.path.dirname(os.fsdecode(filename)) if filename else "the data directory"
    return StorageFull.of(where or ".")


class RecorderError(GlassdeskError):
    """No video could be made: ffmpeg is missing, would not start, or left no file."""

    code, status = "recording_failed", 500


class RecorderUnavailable(RecorderError):
    """This server cannot record at all: ffmpeg is not installed. Checked before anything is made."""

    code, status = "recording_unavailable", 503

class StackError(RuntimeError):
    """A part of the desktop failed to start; the message names it and quotes its log. Not a
    GlassdeskError: DesktopService maps it to the operation's own error (session_unavailable, a
    start failure), which is why it lives here, below everything that raises it."""


class DesktopUsersExhausted(StackError, GlassdeskError):
    """Every account of the desktop-user pool (desktop.x11.user) runs a session already: one account
    per session is what keeps sessions apart, so no session starts on a shared one. A StackError
    (raised while a desktop starts) with its own code, kept as it is by DesktopService."""

    code, status = "desktop_users_exhausted", 503

    def __init__(self, message: str):
        GlassdeskError.__init__(self, message)
