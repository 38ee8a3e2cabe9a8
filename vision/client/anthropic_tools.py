"""Run the computer ``tool_use`` blocks of an Anthropic message on glassdesk.

``AnthropicToolRunner.run(message)`` sends each ``tool_use`` of the computer tool to
``POST /sessions/{id}/computer/anthropic`` verbatim and returns the ``tool_result`` blocks, in
order, ready to be the next user message's content. glassdesk converts coordinates from the
declared display, scales the screenshot to it, splits modifier strings, repeats keys and turns
seconds into milliseconds (the vision loop's own converter); a call the model got wrong comes back
as an ``is_error`` tool_result for the model to read.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from vision import coords
from vision.client.calls import Call
from vision.client.routes import SessionClient
from vision.converters.anthropic import TOOL_VERSIONS, TOOLSET_NAME

__all__ = ["AnthropicToolRunner"]


def _field(block: Any, name: str) -> Any:
    """A block's field, whether the SDK's model or a plain dict."""
    return block.get(name) if isinstance(block, dict) else getattr(block, name, None)


class AnthropicToolRunner:
    """The computer tool of one glassdesk session, for a loop of ``messages.create`` calls.

    ``tool`` goes in ``tools=[...]`` and ``betas`` in ``betas=[...]``; ``run(message)`` executes the
    message's computer calls and returns their tool_result blocks. With a blocking client it
    returns the list; with an async client, an awaitable of it."""

    def __init__(self, client: Any, session: str = "default", *, tool_version: str = "computer_20251124",
                 display: tuple[int, int] | None = None):
        """``display``: the size the model is told and sent; by default the largest the API
        does not downsize again (1429x804 for 1920x1080), so no coordinate drifts."""
        if tool_version not in TOOL_VERSIONS:
            raise ValueError(f"tool_version: one of {', '.join(TOOL_VERSIONS)}")
        self.desk: SessionClient = client.session(session)
        self.version = TOOL_VERSIONS[tool_version]
        self.display = display or coords.anthropic_size(SCREEN_WIDTH, SCREEN_HEIGHT)

    @property
    def tool(self) -> dict[str, Any]:
        if self.version.toolset:  # every member on by default; no display size is declared
            return {"type": self.version.type}
        tool = {"type": self.version.type, "name": "computer", "display_width_px": self.display[0],
                "display_height_px": self.display[1]}
        return {**tool, "enable_zoom": True} if self.version.zoom else tool

    @property
    def betas(self) -> list[str]:
        return [self.version.beta] if self.version.beta else []

    def owns(self, block: Any) -> bool:
        """A tool_use of this computer tool (others are the caller's to run)."""
        if _field(block, "type") != "tool_use":
            return False
        if self.version.toolset:
            return _field(block, "toolset_name") == TOOLSET_NAME
        return _field(block, "name") == "computer"

    def run(self, message: Any):
        """The tool_result blocks for the message's computer calls (a ``Message`` or its dict)."""
        return self.desk._client._drive(self._plan(message))

    def _plan(self, message: Any) -> Generator[Call, Any, list[dict[str, Any]]]:
        results = []
        for block in _field(message, "content") or []:
            if self.owns(block):
                answer = yield self.desk.computer_anthropic_call(
                    tool_version=self.version.type, display_width_px=self.display[0],
                    display_height_px=self.display[1], input=dict(_field(block, "input") or {}),
                    name=_field(block, "name"), tool_use_id=_field(block, "id"))
                results.append(answer.tool_result)
        return results
