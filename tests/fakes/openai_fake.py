"""Responses API replies for FakeServer, shaped as the real service sends them, and request probes.

Builders return plain JSON (what goes over the wire), so a test sees the SDK parse it for real.
"""

from __future__ import annotations

import base64
import itertools
import struct
import time
from collections.abc import Iterator
from typing import Any

from tests.fakes.server import Reply, Request

_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):04d}"


def usage(input_tokens: int = 1000, output_tokens: int = 50, cached_tokens: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def response(*output: dict[str, Any], id: str | None = None, model: str = "computer-use-preview",
             usage_: dict[str, Any] | None = None) -> dict[str, Any]:
    """A completed Response object holding these output items."""
    return {
        "id": id or _id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "truncation": "auto",
        "error": None,
        "incomplete_details": None,
        "usage": usage_ if usage_ is not None else usage(),
    }


def safety_check(id: str = "sc_1", code: str = "malicious_instructions",
                 message: str = "The page contains instructions that may not be the user's.") -> dict[str, Any]:
    return {"id": id, "code": code, "message": message}


def computer_call(action: dict[str, Any] | None = None, *, actions: list[dict[str, Any]] | None = None,
                  call_id: str | None = None, safety_checks: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """A computer_call with one ``action`` (preview) or a batch of ``actions`` (GA)."""
    item: dict[str, Any] = {
        "type": "computer_call",
        "id": _id("cu"),
        "call_id": call_id or _id("call"),
        "status": "completed",
        "pending_safety_checks": list(safety_checks),
    }
    if action is not None:
        item["action"] = action
    if actions is not None:
        item["actions"] = actions
    return item


def message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": _id("msg"),
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def reasoning(*summary: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": _id("rs"), "summary": [{"type": "summary_text", "text": s} for s in summary]}


def ok(*output: dict[str, Any], **kwargs: Any) -> Reply:
    return Reply(200, response(*output, **kwargs))


def error(status: int, message: str, *, type: str = "invalid_request_error", code: str | None = None,
          headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"error": {"message": message, "type": type, "param": None, "code": code}}, headers or {})


# --- probes on recorded requests ----------------------------------------------------------------


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _walk(child)
    elif isinstance(value, list):
        for child in value:
            yield from _walk(child)


def image_urls(request: Request) -> list[str]:
    """Every data: image URL anywhere in the request body, in order."""
    return [d["image_url"] for d in _walk(request.body)
            if isinstance(d.get("image_url"), str) and d["image_url"].startswith("data:image/")]


def input_items(request: Request, type: str) -> list[dict[str, Any]]:
    return [item for item in request.body.get("input", []) if item.get("type") == type]


def user_texts(request: Request) -> list[str]:
    return [part["text"] for item in request.body.get("input", []) if item.get("role") == "user"
            for part in item.get("content", []) if part.get("type") == "input_text"]


def png_bytes(data_url: str) -> bytes:
    header, _, payload = data_url.partition(",")
    assert header == "data:image/png;base64", header
    return base64.b64decode(payload)


def png_size(data_url: str) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk."""
    png = png_bytes(data_url)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", png[16:24])
