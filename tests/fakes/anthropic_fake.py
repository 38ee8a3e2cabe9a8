"""Messages API replies for FakeServer, shaped as the real service sends them, and request probes.

Builders return plain JSON (what goes over the wire), so a test sees the SDK parse it for real.
"""

from __future__ import annotations

import base64
import itertools
import struct
from typing import Any

from tests.fakes.server import Reply

_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):04d}"


# --- replies -------------------------------------------------------------------------------------


def usage(input_tokens: int = 1000, output_tokens: int = 50, cache_read: int = 0,
          cache_write: int = 0) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write}


def tool_use(input: dict[str, Any], id: str | None = None, *, name: str = "computer") -> dict[str, Any]:
    """A computer_2025xxxx call: one ``computer`` tool, the action inside ``input``."""
    return {"type": "tool_use", "id": id or _id("toolu"), "name": name, "input": input}


def toolset_use(name: str, input: dict[str, Any] | None = None, id: str | None = None) -> dict[str, Any]:
    """A computer_toolset member call: the action is the tool name."""
    return {"type": "tool_use", "id": id or _id("toolu"), "name": name, "input": input or {},
            "toolset_name": "computer"}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "c2lnbmF0dXJl"}


def message(*content: dict[str, Any], stop_reason: str = "tool_use", model: str = "claude-opus-4-5",
            usage_: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": _id("msg"), "type": "message", "role": "assistant", "model": model, "content": list(content),
            "stop_reason": stop_reason, "stop_sequence": None, "usage": usage_ or usage()}


def reply(*content: dict[str, Any], **kwargs: Any) -> Reply:
    """A 200 reply whose stop_reason is tool_use unless one is given."""
    return Reply(200, message(*content, **kwargs))


def end_turn(answer: str, **kwargs: Any) -> Reply:
    return Reply(200, message(text(answer), stop_reason="end_turn", **kwargs))


def error(status: int, type: str, msg: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": type, "message": msg}}, headers or {})


# --- request probes ------------------------------------------------------------------------------


def images(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every image block in the request's messages, oldest first (top level and inside tool_results)."""
    found = []
    for msg in body["messages"]:
        if not isinstance(msg["content"], list):
            continue
        for block in msg["content"]:
            if block["type"] == "image":
                found.append(block)
            elif block["type"] == "tool_result":
                found.extend(b for b in block.get("content") or [] if b["type"] == "image")
    return found


def last_image(body: dict[str, Any]) -> dict[str, Any]:
    return images(body)[-1]


def png_bytes(image: dict[str, Any]) -> bytes:
    assert image["source"]["media_type"] == "image/png"
    return base64.b64decode(image["source"]["data"])


def png_size(image: dict[str, Any]) -> tuple[int, int]:
    """(width, height) from the PNG's IHDR chunk."""
    png = png_bytes(image)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the request's last (user) message."""
    return [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]


def cache_breakpoints(body: dict[str, Any]) -> int:
    """How many blocks carry cache_control, across tools, system and messages."""
    blocks = [*body.get("tools", []), *(body["system"] if isinstance(body.get("system"), list) else [])]
    for msg in body["messages"]:
        if isinstance(msg["content"], list):
            blocks += msg["content"]
            blocks += [inner for b in msg["content"] if b["type"] == "tool_result" for inner in b.get("content") or []]
    return sum("cache_control" in b for b in blocks)
