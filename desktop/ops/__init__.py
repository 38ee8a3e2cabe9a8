"""The catalogue: one declaration per operation.

An ``Operation`` says everything every door needs, once: its name, the service call, its request
and answer models, its REST method, path and summary, its MCP tool (name, title, description,
hints, how the answer reads as text, its profile group and whether the settings allow it), and
whether it acts (the control plane refuses those while a person or a run holds the session).
Generated from it, and written nowhere else:

- the REST routes (``desktop.http.routes.operations_router``),
- the MCP tools (``vision.mcp.operations.register_operations``),
- the Python client's methods (``vision.client.routes``),
- the remote forwarding of a control plane to its session servers (``desktop.service.remote``,
  ``desktop.http.calls``),
- the operation tables of the docs (``tests/unit/test_catalogue.py`` checks they match).

Bounds live once, in the request models (``desktop.models``); a door never re-states them. The
catalogue is data: it imports models and nothing that runs.

Most operations act on one session (``Operation.scope`` "session"): the route is under
``/api/v1/sessions/{session_id}``, the tool takes ``session``, the client method is the session's. An
operation of the server's own (``"server"``: the evaluations, vision.eval.ops; the sessions' registry)
has its route under ``/api/v1``, a tool without the session argument every session's tool takes (the
tool that closes a session names it in its own request), and a method on the client itself; it is
never forwarded.

Not one-to-one, so written by hand in their door (and listed here so nobody looks for them in the
catalogue), the MCP tools with why:

- ``desktop_screenshot``: image bytes, and over REST the coordinate headers;
- ``desktop_zoom``: an image over MCP, an ``ActionResponse`` with the image inside over REST;
- ``desktop_drag``: flat start and end coordinates where REST takes the action's path;
- ``vision_act``: a whole run, with a progress notification per step (REST streams its events);
- the packs ``vision_click_anywhere``, ``vision_extract_visible_text``, ``vision_fill_form_by_label``:
  several runs each, with no REST route;
- ``page_downloads`` (a file inside the answer), ``page_screenshot`` (image bytes), ``page_tabs`` and
  ``page_dialogs`` (each merges several operations);
- ``export_test``: both kinds of run (traces and QA runs).

Also by hand, with no tool of their own: the saved states (their store is the server's, not a
session's) and the trace and QA-run readers; and the routes of the sessions' registry and of the live
view, whose tools are declared (the tool that closes a session names it ``session``, as every tool
names a session, where ``DELETE /sessions/{id}`` has it in its path; REST hands out a control link
only with a take-over).
"""

from __future__ import annotations

from desktop.ops.declare import Hints, Operation, Rest, Service, Tool
from desktop.ops.desktop import OPERATIONS as DESKTOP
from desktop.ops.page import OPERATIONS as PAGE

__all__ = ["Hints", "Operation", "Rest", "Service", "Tool", "catalogue", "forwarded", "of_service"]


def catalogue() -> tuple[Operation, ...]:
    """Every declared operation of the desktop layer, in the order the doors list them."""
    return (*DESKTOP, *PAGE)


def of_service(service: Service) -> dict[str, Operation]:
    """The operations of one service, by method name (remote forwarding)."""
    return {op.method: op for op in catalogue() if op.service == service}


def forwarded(service: Service) -> dict[str, Operation]:
    """The operations a control plane sends its session servers through their call route
    (desktop.http.calls): a session's, but its inputs, which it sends to their REST routes so that
    the settled screen comes back with the answer (desktop.service.remote). Never the server's own
    (its registry of sessions is the control plane's)."""
    return {method: op for method, op in of_service(service).items() if not op.performs and op.scope == "session"}
