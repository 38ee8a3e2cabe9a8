"""Service calls over the wire: how a control plane runs a page-layer (or desktop) operation on a
session server, with its arguments, answer and typed errors as they are in Python.

The page layer lives with the browser it drives, in the session server (one per container or pod).
The control plane's ``RemotePages`` (desktop.service.remote) forwards each ``PageService`` call to
one route of the session server, ``POST /api/v1/sessions/{id}/call/{service}/{method}``, served only
by ``glassdesk up --single-session`` (desktop.http.calls). Arguments and answers are encoded by the
method's own type hints (pydantic), so both sides run the same code and nothing is written twice per
operation; the route serves only the catalogue's operations (desktop.ops).
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from typing import Any

from pydantic import Base64Bytes, TypeAdapter

from desktop.errors import InvalidRequest


def _wire(hint: Any) -> Any:
    """The type a value travels as: bytes as base64 text, everything else as pydantic dumps it."""
    return Base64Bytes if hint is bytes else hint


@functools.cache
def signature(cls: type, method: str) -> tuple[inspect.Signature, dict[str, TypeAdapter], TypeAdapter]:
    """A method's signature, an adapter per parameter and one for its answer."""
    function = getattr(cls, method)
    hints = typing.get_type_hints(function)
    params = {name: TypeAdapter(_wire(hints.get(name, Any))) for name in inspect.signature(function).parameters
              if name not in ("self", "session_id")}
    return inspect.signature(function), params, TypeAdapter(_wire(hints.get("return", Any)))


def encode_args(cls: type, method: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Python arguments (without the session id) -> a JSON object of the method's parameters."""
    sig, params, _ = signature(cls, method)
    bound = sig.bind(None, None, *args, **kwargs)  # self, session_id
    return {name: json.loads(params[name].dump_json(value)) for name, value in bound.arguments.items()
            if name in params}


def decode_args(cls: type, method: str, wire: dict[str, Any]) -> dict[str, Any]:
    _, params, _ = signature(cls, method)
    unknown = set(wire) - set(params)
    if unknown:
        raise InvalidRequest(f"{method}: unknown argument(s) {', '.join(sorted(unknown))}")
    return {name: params[name].validate_json(json.dumps(value)) for name, value in wire.items()}


def encode_result(cls: type, method: str, value: Any) -> Any:
    return json.loads(signature(cls, method)[2].dump_json(value))


def decode_result(cls: type, method: str, wire: Any) -> Any:
    return signature(cls, method)[2].validate_json(json.dumps(wire))
