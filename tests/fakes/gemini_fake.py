"""Gemini API replies for FakeServer (``POST /{version}/models/{model}:generateContent``), shaped as
the real service sends them (camelCase JSON), and probes on the requests the SDK sent.

Builders return plain JSON, so a test sees the google-genai SDK parse it for real.
"""

from __future__ import annotations

import base64
import itertools
import re
import struct
from typing import Any

from tests.fakes.server import Reply, Request

_ids = itertools.count(1)
PATH = re.compile(r"^/(?P<version>v[0-9a-z]+)/models/(?P<model>[^/:]+):generateContent$")


def usage(prompt: int = 1200, candidates: int = 40, thoughts: int = 0, cached: int = 0) -> dict[str, Any]:
    data = {"promptTokenCount": prompt, "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates + thoughts}
    if thoughts:
        data["thoughtsTokenCount"] = thoughts
    if cached:
        data["cachedContentTokenCount"] = cached
    return data


def function_call(name: str, args: dict[str, Any] | None = None, *, id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": args or {}}
    if id is not None:
        call["id"] = id
    return {"functionCall": call}


def text(value: str, *, thought: bool = False) -> dict[str, Any]:
    return {"text": value, "thought": True} if thought else {"text": value}


def confirm(explanation: str = "The model is about to submit a payment.") -> dict[str, Any]:
    """A safety_decision that requires the user's confirmation, as the model puts it in args."""
    return {"decision": "require_confirmation", "explanation": explanation}


def response(*parts: dict[str, Any], finish_reason: str = "STOP", usage_: dict[str, Any] | None = None,
             model: str = "gemini-2.5-computer-use-preview-10-2025") -> dict[str, Any]:
    """A GenerateContentResponse with one candidate holding these parts."""
    return {
        "candidates": [{"content": {"role": "model", "parts": list(parts)}, "finishReason": finish_reason,
                        "index": 0}],
        "usageMetadata": usage_ if usage_ is not None else usage(),
        "modelVersion": model,
        "responseId": f"resp-{next(_ids):04d}",
    }


def ok(*parts: dict[str, Any], **kwargs: Any) -> Reply:
    return Reply(200, response(*parts, **kwargs))


def error(status: int, message: str, reason: str = "INVALID_ARGUMENT", headers: dict[str, str] | None = None) -> Reply:
    """An error as Google's APIs send it: {"error": {code, message, status}}."""
    return Reply(status, {"error": {"code": status, "message": message, "status": reason}}, headers or {})


# --- probes on recorded requests ----------------------------------------------------------------


def model_of(request: Request) -> str:
    match = PATH.match(request.path)
    assert match, f"not a generateContent call: {request.method} {request.path}"
    return match["model"]


def _get(d: dict[str, Any], camel: str) -> Any:
    """A field by its camelCase name or its snake_case one (the SDK sends nested parts in either)."""
    snake = re.sub(r"([A-Z])", lambda m: "_" + m[1].lower(), camel)
    return d.get(camel, d.get(snake))


def contents(request: Request) -> list[dict[str, Any]]:
    return request.body["contents"]


def function_responses(content: dict[str, Any]) -> list[dict[str, Any]]:
    return [_get(p, "functionResponse") for p in content["parts"] if _get(p, "functionResponse") is not None]


def b64(data: str) -> bytes:
    """Bytes as the SDK sends them: pydantic's URL-safe base64 (the API takes both alphabets)."""
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def images(content: dict[str, Any]) -> list[bytes]:
    """Every PNG of a content, in order: inline parts and those inside function responses."""
    found = []
    for part in content["parts"]:
        if (inline := _get(part, "inlineData")) is not None:
            found.append(b64(inline["data"]))
        if (fr := _get(part, "functionResponse")) is not None:
            for inner in fr.get("parts") or []:
                blob = _get(inner, "inlineData")
                assert _get(blob, "mimeType") == "image/png", blob
                found.append(b64(blob["data"]))
    return found


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", png[16:24])


def computer_use(request: Request) -> dict[str, Any]:
    [tool] = request.body["tools"]
    return _get(tool, "computerUse")
