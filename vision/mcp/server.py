"""The MCP server: glassdesk's typed errors as tool errors, and serving it over streamable HTTP."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, Icon, ListToolsResult, ToolAnnotations
from pydantic import ValidationError
from starlette.routing import Route

from desktop.errors import GlassdeskError, describe_validation, typed_os_error
from desktop.ops.declare import GROUPS, Group
from desktop.service.desktop import DesktopService
from vision import VERSION
from vision.app.ops import catalogue, services
from vision.app.service import Glassdesk
from vision.mcp.answers import ToolFn, text_block
from vision.mcp.operations import register_operations
from vision.mcp.page_tools import register_page_tools
from vision.mcp.profiles import compact_schema, parse_profile, profile_name
from vision.mcp.tools import INSTRUCTIONS, register_tools
from vision.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("glassdesk.mcp")


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """The Host/Origin policy, for /mcp and every other route.

    DNS-rebinding protection stays ON: a web page on evil.example whose name an attacker re-points
    at 127.0.0.1 reaches this server with ``Host: evil.example`` and is refused (421) before any
    tool runs. Allowed Hosts are the loopback names on any port (so local clients and tests work),
    the address the server is bound to, and the public host name the URLs are printed with
    (GLASSDESK_PUBLIC_HOST / --public-host).

    Origins: ``BearerAuth`` (in front of every route, /mcp included) lets through the server's own
    origin - the one the request's Host names - and ``settings.allowed_origins``, nothing else.
    The list here is for the MCP library's own, second check behind it, which matches origins by
    name with any port: it holds those names and the configured origins, so it refuses nothing
    the first check let through.
    The bearer token, when set, guards /mcp as it guards every other route.
    """
    hosts = {"127.0.0.1", "localhost", "[::1]"}
    for name in (settings.host, settings.public_host):
        if name and name not in ("0.0.0.0", "::"):
            hosts.add(f"[{name}]" if ":" in name else name)
    allowed_hosts = sorted({f"{h}:*" for h in hosts} | hosts)
    allowed_origins = sorted({f"{scheme}://{h}{port}" for h in hosts for scheme in ("http", "https")
                              for port in ("", ":*")} | {o.lower().rstrip("/") for o in settings.allowed_origins})
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts,
                                     allowed_origins=allowed_origins)


def argument_code(tool: str) -> str:
    """The code of a bad argument: the one REST gives the same bad body, invalid_action for a
    desktop action, else invalid_request."""
    return "invalid_action" if tool.startswith("desktop_") else "invalid_request"


def error_message(exc: BaseException, tool: str = "") -> str | None:
    """The clear sentence for a failure the caller can correct, or None for a crash. A bad argument
    gets the code REST gives the same bad body: invalid_action for a desktop action, else
    invalid_request."""
    if isinstance(exc, ValidationError):
        return f"{argument_code(tool)}: {describe_validation(exc)}"
    exc = typed_os_error(exc) or exc
    if isinstance(exc, GlassdeskError):
        hint = f"; retry after {exc.retry_after} s" if exc.retry_after else ""
        return f"{exc.code}: {exc.message}{hint}"
    return None


def unknown_arguments(tool: str, schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """The refusal of arguments the tool's input schema does not name, or None when all are known;
    the code is that of a bad value of a known argument."""
    known = schema.get("properties", {})
    unknown = [key for key in arguments if key not in known]
    if not unknown:
        return None
    code = argument_code(tool)
    names = ", ".join(repr(key) for key in unknown)
    takes = ", ".join(known) or "no arguments"
    return (f"{code}: unknown argument{'s' if len(unknown) > 1 else ''} {names}; nothing was done. "
            f"{tool} takes: {takes}")


class GlassdeskMCP(MCPServer):
    """MCPServer whose tool errors carry glassdesk's typed messages, that refuses arguments a tool
    does not name, and that announces a re-started default session.

    The SDK reports a bad argument as pydantic's multi-line dump and any other exception as a bare
    "Error executing tool"; the agent needs the one sentence that says what to change, e.g.
    ``invalid_action: x: Input should be less than or equal to 1919``.
    """

    default_restarts: DefaultRestarts | None = None
    # The groups listed when a request does not choose (stdio always; /mcp without ?tools=).
    profile: frozenset[Group] = frozenset(GROUPS)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.groups: dict[str, Group] = {}  # tool name -> its profile group
        # Tools the server's settings turn off (page_evaluate without --allow-evaluate): never listed,
        # so no model spends context on them, but a call still gets the service's own refusal, which
        # says how to turn it on (evaluate_disabled), as over REST.
        self.unlisted: set[str] = set()

    def tool(self, name: str | None = None, title: str | None = None, description: str | None = None,
             annotations: ToolAnnotations | None = None, icons: list[Icon] | None = None,
             meta: dict[str, Any] | None = None, structured_output: bool | None = None, *,
             group: Group | None = None) -> Callable[[ToolFn], ToolFn]:
        """The SDK's decorator, with the tool's profile group said where it is declared (required:
        a tool no profile names would be listed by none; optional only in the signature, which is
        the SDK's). The modules that declare tools see this as ``ToolServer.tool``, which requires it."""
        if group is None:
            raise TypeError(f"tool {name!r}: give its profile group (group=): a tool no profile names is listed "
                            "by none")
        register = super().tool(name, title, description, annotations, icons, meta, structured_output)

        def decorator(fn: ToolFn) -> ToolFn:
            self.groups[name or fn.__name__] = group
            return register(fn)
        return decorator

    def add_tool(self, fn, name=None, *args, **kwargs) -> None:
        """Register a tool whose input schema says what it enforces: no argument it does not name
        (``call_tool`` refuses them), and no title pydantic derived from a name (they cost context
        and say nothing: ``compact_schema``). Every tool comes through here, the decorator included."""
        super().add_tool(fn, name, *args, **kwargs)
        tool = self._tool_manager.get_tool(name or fn.__name__)
        if tool is None:  # the SDK's manager registers every tool it is given under that name
            raise RuntimeError(f"tool {name or fn.__name__!r} was added but is not registered")
        tool.parameters = {**compact_schema(tool.parameters), "additionalProperties": False}

    def profile_of(self, request: Any) -> frozenset[Group]:
        """The groups one request sees: ``?tools=`` of its HTTP request, else the server's profile."""
        query = getattr(request, "query_params", None)
        if query is not None and query.get("tools"):
            return parse_profile(query["tools"])
        return self.profile

    async def _handle_list_tools(self, ctx, params) -> ListToolsResult:
        groups = self.profile_of(ctx.request)
        return ListToolsResult(tools=[t for t in await self.list_tools()
                                      if self.groups.get(t.name) in groups and t.name not in self.unlisted])

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None):
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            groups = self.profile_of(_http_request(context))
            if self.groups.get(name) not in groups:
                # Listed by another profile only: as unknown as a tool this server does not have,
                # but the agent learns where it is.
                return CallToolResult(content=[text_block(
                    f"invalid_request: {name} is not in this connection's tool profile ({profile_name(groups)}); "
                    f"nothing was done. It is in the {self.groups.get(name)!r} profile (and in all): "
                    "`glassdesk mcp --tools`, or /mcp?tools=")], is_error=True)
            # The SDK drops arguments its model does not know, so `desktop_click {"bogus": 1}`
            # would click: a misspelt option must be the agent's error to read, before anything runs.
            refused = unknown_arguments(name, tool.parameters, arguments)
            if refused:
                log.info("tool %s refused: %s", name, refused)
                return CallToolResult(content=[text_block(refused)], is_error=True)
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            message = error_message(exc.__cause__, name) if exc.__cause__ is not None else None
            if message is None:
                raise
            log.info("tool %s refused: %s", name, message)
            result = CallToolResult(content=[text_block(message)], is_error=True)
        restarts = self.default_restarts
        if restarts is not None and isinstance(result, CallToolResult) and restarts.take():
            result = await anyio.to_thread.run_sync(restarts.announce, result)
        return result


def _http_request(context: Context | None) -> Any:
    """The HTTP request a tool call came in (None over stdio and in memory)."""
    try:
        return context.request_context.request if context is not None else None
    except ValueError:  # no request context: a call made outside a session
        return None


class DefaultRestarts:
    """Notices the default session starting again after it was closed. A tool without ``session``
    then acts on a new desktop (its windows, pages and logins gone) behind a new live-view link, and
    the person watching the old link sees nothing: the next tool result says so, with the new link."""

    def __init__(self, desktops: DesktopService):
        self.desktops = desktops
        self._lock = threading.Lock()
        self._closed = False
        self._restarted = False
        desktops.on_change(self._on_change)

    def _on_change(self, what: str, session_id: str) -> None:
        if session_id != self.desktops.default:
            return
        with self._lock:
            if what == "deleted":
                self._closed = True
            elif what == "created" and self._closed:
                self._closed, self._restarted = False, True

    def take(self) -> bool:
        """Whether the default session started again since the last time this was asked."""
        with self._lock:
            restarted, self._restarted = self._restarted, False
            return restarted

    def announce(self, result: CallToolResult) -> CallToolResult:
        """``result`` with the announcement added (text, and ``default_session_restarted``)."""
        name = self.desktops.default
        try:
            url: str | None = self.desktops.live_view(name).novnc_url
        except GlassdeskError as exc:  # closed again meanwhile, or no viewer served in this process
            url, where = None, f"no live-view link: {exc.message}"
        else:
            where = f"its live view (view-only) is now {url} ; earlier live-view links show nothing"
        note = (f"note: the default session {name!r} had been closed and was started again: a new desktop "
                f"(earlier windows, pages and logins are gone); {where}")
        structured = {**(result.structured_content or {}),
                      "default_session_restarted": {"session": name, "live_view_url": url}}
        return result.model_copy(update={"content": [*result.content, text_block(note)],
                                         "structured_content": structured})


def build_server(glassdesk: Glassdesk, tools: str | None = None) -> GlassdeskMCP:
    """The MCP server over the application service, listing the tool profile ``tools`` (core, desktop,
    page, qa, all or several joined by commas; default all: vision.mcp.profiles) less the tools the
    service's settings turn off."""
    server = GlassdeskMCP("glassdesk", title="glassdesk: a visible desktop", instructions=INSTRUCTIONS,
                          version=VERSION)
    server.profile = parse_profile(tools)
    server.default_restarts = DefaultRestarts(glassdesk.desktops)
    register_tools(server, glassdesk)
    register_operations(server, catalogue(), services(glassdesk), glassdesk.desktops.default)
    register_page_tools(server, glassdesk)
    return server


def mount_http(app: FastAPI, glassdesk: Glassdesk, settings: Settings) -> GlassdeskMCP:
    """Serve the MCP server at /mcp on the API app; enter ``server.session_manager.run()`` in the
    app's lifespan (a mounted app's own lifespan does not run).

    The route is added at exactly /mcp (a Starlette Mount would answer /mcp/ and redirect /mcp).
    """
    server = build_server(glassdesk, settings.mcp_tools)
    mcp_app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=transport_security(settings))
    app.router.routes.extend(Route(r.path, endpoint=ProfileChecked(r.endpoint))
                             if isinstance(r, Route) and r.path == "/mcp" else r for r in mcp_app.routes)
    return server


class ProfileChecked:
    """The /mcp endpoint, refusing a ``?tools=`` that names no profile before the MCP transport sees
    it: 422 invalid_request, as a bad query is on every route (the app's handlers render it), rather
    than a tool listing that fails once connected."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            from urllib.parse import parse_qs

            tools = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("tools")
            if tools:
                parse_profile(tools[-1])  # InvalidRequest -> 422 through the app's handlers
        await self.app(scope, receive, send)


