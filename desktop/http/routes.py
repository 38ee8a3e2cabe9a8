"""The REST routes of the catalogue's operations (desktop.ops), generated: one route per operation
(and per extra path it is also served at), each parsing its request, making the operation's one
service call and answering, with the page summary when the operation says so.

No ``from __future__ import annotations`` here: FastAPI reads the generated endpoints' signatures,
whose annotations are the request models themselves.
"""

import base64
import inspect
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel

from desktop.actions import _Action
from desktop.codegen import answer_code
from desktop.models import ActionResponse, PageSummary
from desktop.ops import Operation
from desktop.ops.declare import PREFIXES
from desktop.port import Performed


def with_page(answer: Any, summary: Any, shape: Any) -> Any:
    """An action's answer with the page summary, as every action's answer carries it."""
    if isinstance(answer, dict):
        return {**answer, "page": summary}
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        return shape.model_validate({**answer.model_dump(), "page": summary})
    return answer


def action_response(action: str, performed: Performed, screenshot: bool, page: PageSummary | None,
                    request: BaseModel | None = None) -> ActionResponse:
    """An input's answer: what ran, the settle, what was under the pixel, the page summary, and
    the settled screen as base64 PNG when asked (``?screenshot=true``)."""
    return ActionResponse(
        action=action, executed=performed.executed, duration_ms=round(performed.duration_ms, 1),
        settle_ms=performed.settle_ms, settled=performed.settled, settled_by=performed.settled_by,
        changed=performed.changed, native=performed.native, result=performed.result,
        page=page, element=performed.element,
        playwright=answer_code(request.model_dump(), performed.element) if isinstance(request, _Action) else None,
        screenshot=base64.b64encode(performed.frame.png).decode() if screenshot else None,
    )


def endpoint(op: Operation, service: Any, summary: Any) -> Any:
    """The route's handler: its signature says FastAPI where each part of the request comes from."""
    rest = op.rest
    if rest is None:
        raise TypeError(f"{op.name}: no REST route to serve")
    in_path = rest.path_fields
    params = [inspect.Parameter("session_id", inspect.Parameter.KEYWORD_ONLY, annotation=str)] \
        if op.scope == "session" else []
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str) for name in in_path]
    # The request model when some of its fields travel outside the path (the query or the body).
    rest_of_request = op.request if op.request is not None and any(
        name not in in_path for name in op.request.model_fields) else None
    if in_path and rest_of_request is not None:  # the body would have to repeat the path's fields: not supported yet
        raise TypeError(f"{op.name}: a request with fields both in the path ({', '.join(in_path)}) and elsewhere")
    if rest_of_request is not None and rest.method == "GET":
        params.append(inspect.Parameter("query", inspect.Parameter.KEYWORD_ONLY,
                                        annotation=Annotated[rest_of_request, Query()]))
    elif rest_of_request is not None and rest.optional_body:
        params.append(inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation=Annotated[rest_of_request | None, Body()]))
    elif rest_of_request is not None:
        params.append(inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY, annotation=rest_of_request))
    if op.performs:
        shot = Annotated[bool, Query(description="include the settled screenshot as base64 PNG")]
        params.append(inspect.Parameter("screenshot", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=shot))

    def handler(**arguments: Any) -> Any:
        session_id = arguments.pop("session_id", None)
        screenshot = arguments.pop("screenshot", False)
        request = arguments.pop("query", None) or arguments.pop("body", None)
        if request is None and op.request is not None:
            request = op.request(**arguments)  # the path's fields, or every field's default
        answer = op.invoke(service, session_id, request)
        if op.performs:
            return action_response(op.action_name, answer, screenshot, summary(session_id), request)
        return with_page(answer, summary(session_id), rest.answer) if op.page else answer

    handler.__name__ = rest.name or op.method
    handler.__doc__ = None  # FastAPI would take a docstring as the description
    handler.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return handler


def operations_router(operations: tuple[Operation, ...], services: Mapping[str, Any]) -> APIRouter:
    """Every operation of ``operations`` that has a REST route, served over ``services`` (by the
    operation's ``service``: ``desktop``, ``pages``, ``qa``...)."""
    router = APIRouter()
    summary = services["pages"].summary
    for op in operations:
        if op.rest is None:
            continue
        handler = endpoint(op, services[op.service], summary)
        for path, tags in ((op.rest.path, op.rest.tags), *op.rest.also):
            router.add_api_route(PREFIXES[op.scope] + path, handler, methods=[op.rest.method],
                                 response_model=op.rest.answer or op.answer,
                                 status_code=op.rest.status_code, tags=list(tags), summary=op.rest.summary,
                                 description=op.rest.description, name=op.rest.name or op.method)
    return router
