"""The MCP tools of the catalogue's operations (desktop.ops), generated: each takes its request
model's fields as arguments (their bounds and descriptions included) plus ``session`` (but the
server's own operations), makes the
operation's one service call and answers with the operation's text and the answer as structured
content. Every page tool's answer but the state's ends with the page summary, as Playwright MCP
does: URL, title, an open dialog and the console errors new since the previous answer.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args, get_origin

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from desktop.models import PageSummary
from desktop.ops import Operation
from vision.mcp.answers import (
    SessionArg,
    ToolServer,
    WantShot,
    blocking,
    image_block,
    performed,
    text_block,
    tool_annotations,
)


def summary_line(summary: PageSummary) -> str:
    """The page summary as one line of text."""
    line = f"page: {summary.url or '(no tab)'}"
    if summary.title:
        line += f" - {summary.title!r}"
    if summary.dialog is not None:
        line += (f"\ndialog open: {summary.dialog.type} {summary.dialog.message[:300]!r}; answer it with "
                 "page_handle_dialog before acting on the page")
    if summary.new_console_errors:
        line += (f"\n{summary.new_console_errors} new console error(s): page_console_messages level=error "
                 "shows them")
    return line


async def with_summary(pages: Any, session: str, text: str, structured: dict[str, Any],
                       *extra: Any) -> CallToolResult:
    """A page tool's answer with the page summary appended (left out while the browser heals)."""
    summary = await blocking(pages.summary, session)
    if summary is not None:
        text += "\n" + summary_line(summary)
        structured = {**structured, "page": summary.model_dump(mode="json")}
    return CallToolResult(content=[text_block(text), *extra], structured_content={"session": session, **structured})


def _constant(field: Any) -> bool:
    """A field with one possible value (an input action's ``action``): nothing to ask for."""
    return get_origin(field.annotation) is Literal and len(get_args(field.annotation)) == 1 and not field.is_required()


def parameters(model: type[BaseModel] | None, default_session: str | None, *, performs: bool = False
               ) -> list[inspect.Parameter]:
    """The request model's fields as keyword parameters, bounds and descriptions kept (but a constant's),
    ``screenshot`` for an input (the settled screen comes back unless it is false), then ``session``
    (none for an operation of the server's: ``default_session`` None)."""
    params = []
    for name, field in (model.model_fields.items() if model is not None else ()):
        if _constant(field):
            continue
        annotation: Any = Annotated[(field.annotation, *field.metadata, Field(description=field.description))] \
            if field.description else Annotated[(field.annotation, *field.metadata)] if field.metadata \
            else field.annotation
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    if performs:
        params.append(inspect.Parameter("screenshot", inspect.Parameter.KEYWORD_ONLY, default=True,
                                        annotation=WantShot))
    if default_session is not None:
        params.append(inspect.Parameter("session", inspect.Parameter.KEYWORD_ONLY, default=default_session,
                                        annotation=SessionArg))
    return params


def _as_json(answer: Any) -> dict[str, Any]:
    if isinstance(answer, BaseModel):
        return answer.model_dump(mode="json")
    return answer if isinstance(answer, dict) else {"result": answer}


def tool_function(op: Operation, service: Any, pages: Any, default_session: str):
    tool = op.tool
    if tool is None:
        raise TypeError(f"{op.name}: declares no MCP tool")
    if (op.performs or op.service == "pages") and op.scope != "session":
        raise TypeError(f"{op.name}: acts on a session's desktop or page, but is declared the server's")

    async def call(**arguments: Any) -> CallToolResult:
        # A server operation's request may have a ``session`` of its own (session_close's).
        session: str | None = arguments.pop("session", None) if op.scope == "session" else None
        screenshot = arguments.pop("screenshot", True)
        # The request model's own checks (one way of naming an element, ...) run here, before
        # anything does: a bad request is the same refusal it is over REST.
        request = op.request(**arguments) if op.request is not None else None
        answer = await blocking(op.invoke, service, session, request)
        if op.performs:
            # A session's operation (checked above), whose tool always takes ``session`` (defaulted).
            assert session is not None
            return performed(session, answer, tool.text(request, answer), screenshot, op.action_name, request)
        text = tool.text(request, answer)
        structured = tool.structured(request, answer) if tool.structured else _as_json(answer)
        png = await blocking(tool.image, service, answer) if tool.image else None
        pictures = [image_block(png)] if png else []
        if op.service == "pages" and tool.summary:
            assert session is not None  # as for an input, above
            return await with_summary(pages, session, text, structured, *pictures)
        return CallToolResult(content=[text_block(text), *pictures],
                              structured_content=structured if session is None else {"session": session, **structured})

    call.__name__ = tool.name
    session_default = default_session if op.scope == "session" else None
    call.__signature__ = inspect.Signature(parameters(op.request, session_default, performs=op.performs),  # type: ignore[attr-defined]
                                           return_annotation=CallToolResult)
    return call


def register_operations(server: ToolServer, operations: tuple[Operation, ...], services: Mapping[str, Any],
                        default_session: str) -> None:
    """A tool for every operation of ``operations`` that declares one. One the server's settings turn
    off (``Tool.enabled``, asked of the desktop service) is not listed: it could only refuse."""
    for op in operations:
        if op.tool is None:
            continue
        fn = tool_function(op, services[op.service], services["pages"], default_session)
        server.tool(name=op.tool.name, title=op.tool.title, description=op.tool.description,
                    annotations=tool_annotations(op.tool.title, **vars(op.tool.hints)), group=op.tool.group)(fn)
        if op.tool.enabled is not None and not op.tool.enabled(services["desktop"]):
            server.unlisted.add(op.tool.name)
