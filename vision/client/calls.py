"""What a request is, apart from how it is sent: the one layer both transports share.

A route method builds a ``Call`` (method, path, query, JSON body, and how to read the answer);
``GlassdeskClient`` sends it with a blocking ``httpx2.Client``, ``AsyncGlassdeskClient`` with an
``httpx2.AsyncClient``. Everything here is pure: no I/O, testable without a server.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from vision.client.errors import ApiError, error_class, invalid_input
from vision.models import ActResult, StepSummary

__all__ = ["Call", "Image", "SseDecoder", "act_event", "body", "model", "signature_of"]


@dataclass(frozen=True)
class Call:
    """One HTTP request and how to read its answer. ``read`` takes the response (an
    ``httpx2.Response``, its body already read) and returns the typed value."""

    method: str
    path: str
    read: Callable[[Any], Any] = field(default=lambda response: None)
    params: dict[str, Any] | None = None
    json: Any = None
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class Image:
    """An image the API sent. A desktop screenshot also says how its pixels map to the display's
    (its ``X-Glassdesk-*`` headers): ``coordinates`` in words, ``scale`` and ``origin`` (the
    region's top-left corner) for ``to_display``."""

    data: bytes
    media_type: str
    coordinates: str | None = None
    scale: float | None = None
    origin: tuple[int, int] | None = None

    def to_display(self, x: float, y: float) -> tuple[int, int]:
        """A pixel of this image -> the display pixel it shows."""
        scale, (ox, oy) = self.scale or 1.0, self.origin or (0, 0)
        return ox + round(x / scale), oy + round(y / scale)


@cache
def _adapter(kind: Any) -> TypeAdapter:
    return TypeAdapter(kind)


def model(kind: Any) -> Callable[[Any], Any]:
    """A reader that validates the JSON answer as ``kind`` (a pydantic model, ``list[Model]``,
    ``dict``...): the API's own types, so a drifted answer fails loudly here."""
    return lambda response: _adapter(kind).validate_json(response.content)


def raw(response: Any) -> bytes:
    return response.content


def text(response: Any) -> str:
    return response.text


def image(response: Any) -> Image:
    headers = response.headers
    origin_x, _, origin_y = headers.get("x-glassdesk-origin", "").partition(",")
    return Image(response.content, headers.get("content-type", "application/octet-stream"),
                 headers.get("x-glassdesk-coordinates"),
                 float(headers["x-glassdesk-scale"]) if "x-glassdesk-scale" in headers else None,
                 (int(origin_x), int(origin_y)) if origin_y else None)


def body(kind: type[BaseModel], given: BaseModel | None, fields: dict[str, Any], code: str) -> dict[str, Any]:
    """The JSON body for ``kind``, from a ready model or from keyword fields.

    Fields are validated by the API's own model before anything is sent: a mistake is the same
    typed error with the same words the server would give (``code``), and nothing reaches the
    server. Only what was given is sent, so the server's defaults stay the server's."""
    if given is not None:
        if fields:
            raise TypeError("give a model or keyword fields, not both")
        if not isinstance(given, kind):
            raise TypeError(f"expected {kind.__name__}, got {type(given).__name__}")
        return given.model_dump(mode="json", exclude_unset=True)
    try:
        return kind.model_validate(fields).model_dump(mode="json", exclude_unset=True)
    except ValidationError as exc:
        raise invalid_input(exc, code) from None


def signature_of(kind: type[BaseModel], *, skip: tuple[str, ...] = ("action",)) -> inspect.Signature:
    """A method signature listing the model's fields in order (shown by help() and by editors that
    read ``__signature__``); positional up to the first required field that follows an optional one."""
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    optional_seen = keyword_only = False
    for name, info in kind.model_fields.items():
        if name in skip:
            continue
        required = info.is_required()
        keyword_only = keyword_only or (required and optional_seen)
        optional_seen = optional_seen or not required
        params.append(inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY if keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=inspect.Parameter.empty if required else info.get_default(call_default_factory=True),
            annotation=info.annotation))
    return inspect.Signature(params)


def bind(signature: inspect.Signature, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A generated method's arguments -> the fields given (defaults left to the server)."""
    return dict(list(signature.bind_partial(None, *args, **kwargs).arguments.items())[1:])


# ------------------------------------------------------------------------- server-sent events


class SseDecoder:
    """Lines of a ``text/event-stream`` -> (event, data) pairs (the subset the API sends: one
    ``event:`` and ``data:`` lines per message, a blank line ending it)."""

    def __init__(self):
        self._event, self._data = "message", []

    def feed(self, line: str) -> tuple[str, str] | None:
        line = line.rstrip("\r\n")
        if not line:
            if not self._data:
                return None
            done = self._event, "\n".join(self._data)
            self._event, self._data = "message", []
            return done
        if line.startswith(":"):  # a comment (keep-alive)
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

    def decode(self, lines: Iterator[str]) -> Iterator[tuple[str, str]]:
        for line in lines:
            message = self.feed(line)
            if message is not None:
                yield message
        end = self.feed("")  # a stream cut without its blank line still delivers its last message
        if end is not None:
            yield end


def act_event(kind: str, data: str) -> StepSummary | ActResult:
    """One event of a vision run's stream, typed: each ``step`` a StepSummary, the last one the
    ActResult; an ``error`` event (the run failed after the stream began) is raised."""
    if kind == "step":
        return StepSummary.model_validate_json(data)
    if kind == "result":
        return ActResult.model_validate_json(data)
    if kind == "error":
        error = json.loads(data).get("error", {})
        code = str(error.get("code", "internal_error"))
        raise error_class(code)(code, str(error.get("message", "")), detail=error.get("detail"))
    raise ApiError("unexpected_event", f"the run's stream sent an event of unknown kind {kind!r}")
