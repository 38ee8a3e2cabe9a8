"""The MCP server: glassdesk's typed errors as tool errors, and serving it over streamable HTTP."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import ValidationError

from desktop.errors import GlassdeskError, describe_validation
from vision import VERSION
from vision.auth import transport_security
from vision.mcp.page_tools import register_page_tools
from vision.mcp.qa_tools import register_qa_tools
from vision.mcp.tools import INSTRUCTIONS, _text, register_tools
from vision.service import Glassdesk
from vision.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("glassdesk.mcp")


def error_message(exc: BaseException, tool: str = "") -> str | None:
    """The clear sentence for a failure the caller can correct, or None for a crash. A bad argument
    gets the code REST gives the same bad body: invalid_action for a desktop action, else
    invalid_request."""
    if isinstance(exc, ValidationError):
        code = "invalid_action" if tool.startswith("desktop_") else "invalid_request"
        return f"{code}: {describe_validation(exc)}"
    if isinstance(exc, GlassdeskError):
        hint = f"; retry after {exc.retry_after} s" if exc.retry_after else ""
        return f"{exc.code}: {exc.message}{hint}"
    return None


class GlassdeskMCP(MCPServer):
    """MCPServer whose tool errors carry glassdesk's typed messages.

    The SDK reports a bad argument as pydantic's multi-line dump and any other exception as a bare
    "Error executing tool"; the agent needs the one sentence that says what to change, e.g.
    ``invalid_action: x: Input should be less than or equal to 1919``.
    """

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            message = error_message(exc.__cause__, name) if exc.__cause__ is not None else None
            if message is None:
                raise
            log.info("tool %s refused: %s", name, message)
            return CallToolResult(content=[_text(message)], is_error=True)


def build_server(glassdesk: Glassdesk) -> GlassdeskMCP:
    """The MCP server over the application service."""
    server = GlassdeskMCP("glassdesk", title="glassdesk: a visible desktop", instructions=INSTRUCTIONS,
                          version=VERSION)
    register_tools(server, glassdesk)
    register_page_tools(server, glassdesk)
    register_qa_tools(server, glassdesk)
    return server


def mount_http(app: "FastAPI", glassdesk: Glassdesk, settings: Settings) -> GlassdeskMCP:
    """Serve the MCP server at /mcp on the API app; enter ``server.session_manager.run()`` in the
    app's lifespan (a mounted app's own lifespan does not run).

    The route is added at exactly /mcp (a Starlette Mount would answer /mcp/ and redirect /mcp).
    """
    server = build_server(glassdesk)
    mcp_app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=transport_security(settings))
    app.router.routes.extend(mcp_app.routes)
    return server


