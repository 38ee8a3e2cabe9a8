"""How an MCP tool answers, for the hand-written tools (vision.mcp.tools, vision.mcp.page_tools) and
the catalogue's (vision.mcp.operations) alike: the server they are registered on, their annotations,
text and image blocks, the blocking call in a worker thread, and an input's outcome (what ran, the
settle, what was under the pixel and the settled screenshot)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Annotated, Any, Protocol, TypeVar

import anyio
import anyio.to_thread
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from desktop.actions import _Action
from desktop.codegen import answer_code
from desktop.ops.declare import Group
from desktop.ops.page import argv_text
from desktop.port import Performed

SessionArg = Annotated[str, Field(description="desktop session id; omit for the default session "
                                              "(started on first use)")]
WantShot = Annotated[bool, Field(description="return the settled screenshot after the action (default true)")]

ToolFn = TypeVar("ToolFn", bound=Callable[..., Any])


class ToolServer(Protocol):
    """What the tools are registered on: vision.mcp.server.GlassdeskMCP, which imports the modules
    that register them (so they name it by what they use of it)."""

    # Tools the server's settings turn off: not listed, but a call gets the service's own refusal.
    unlisted: set[str]

    def tool(self, name: str, title: str | None = None, description: str | None = None,
             annotations: ToolAnnotations | None = None, *, group: Group) -> Callable[[ToolFn], ToolFn]: ...


def tool_annotations(title: str, *, read_only: bool = False, destructive: bool = False,
                     idempotent: bool = False, open_world: bool = False) -> ToolAnnotations:
    if read_only:
        return ToolAnnotations(title=title, read_only_hint=True, open_world_hint=open_world)
    return ToolAnnotations(title=title, read_only_hint=False, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=open_world)


def text_block(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def image_block(data: bytes, mime_type: str = "image/png") -> ImageContent:
    return ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime_type)


def tool_result(text: str, png: bytes | None = None, structured: dict | None = None, *,
                error: bool = False) -> CallToolResult:
    content: list = [text_block(text)]
    if png is not None:
        content.append(image_block(png))
    return CallToolResult(content=content, structured_content=structured, is_error=error)


async def blocking(fn: Callable[..., Any], *args: Any) -> Any:
    """Run blocking desktop work (X, xdotool, process starts) in a worker thread. If the call is
    cancelled (the client cancelled it, or the server is shutting down) the caller returns at once
    and the thread finishes on its own; nothing waits for it."""
    return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)


def performed(session: str, done: Performed, what: str, screenshot: bool, action: str,
              request: BaseModel | None = None) -> CallToolResult:
    """An input's answer: ``what`` was done (and on which control or element), the settle, whether
    anything changed, the commands that ran, Playwright code doing the same, and the settled
    screenshot unless ``screenshot`` is false."""
    code = answer_code(request.model_dump(), done.element) if isinstance(request, _Action) else None
    if done.native is not None:
        what += f" on {done.native.describe()}"
    if done.element is not None:
        element = done.element
        what += (f" on {element.role or element.tag}"
                 + (f" {element.name!r}" if element.name else "")
                 + (f" ({element.locators[0].describe()})" if element.locators else ""))
    settle = (f"screen settled after {done.settle_ms} ms" if done.settled else
              f"the screen was still changing after {done.settle_ms} ms (an animation?)")
    effect = " Nothing on the screen changed: the action had no visible effect." if done.changed is False else ""
    text = (f"{what} on session {session!r}: done, {settle} "
            f"(the action took {done.duration_ms:.0f} ms).{effect}\nexecuted:\n{argv_text(done.executed)}")
    if screenshot:
        text += "\nThe image is the settled screen after it: 1920x1080, image pixels = display pixels."
    if code:
        text += f"\nPlaywright:\n{code}"
    structured = {"session": session, "action": action, "executed": done.executed,
                  "duration_ms": round(done.duration_ms, 1), "settle_ms": done.settle_ms, "settled": done.settled,
                  "changed": done.changed,
                  "element": done.element.model_dump(mode="json") if done.element else None, "playwright": code,
                  "native": done.native.model_dump(mode="json") if done.native else None, **(done.result or {})}
    return tool_result(text, done.frame.png if screenshot else None, structured)
