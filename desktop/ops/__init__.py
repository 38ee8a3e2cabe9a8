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
  ``desktop.remote.calls``),
- the operation tables of the docs (``tests/unit/test_catalogue.py`` checks they match).

Bounds live once, in the request models (``desktop.models``); a door never re-states them. The
catalogue is data: it imports models and nothing that runs.

Not one-to-one, so written by hand in their door (and listed here so nobody looks for them in the
catalogue): the desktop screenshot (image bytes and the coordinate headers), the page screenshot
and a download's bytes (REST), ``page_downloads`` (a file inside an MCP answer), ``page_tabs`` and
``page_dialogs`` (MCP tools that merge several operations), the input actions' MCP tools (they take
flat coordinates where REST takes the action model), ``vision_act`` and its progress stream, the
packs (``vision_*``), the live view and take-over, the saved states (REST and the client: their
store is the server's, not a session's), and the trace and QA-run readers (their
exports too: the MCP tool ``export_test`` serves both kinds of run).
"""

from __future__ import annotations

from desktop.ops.declare import Hints, Operation, Rest, Service, Tool
from desktop.ops.desktop import OPERATIONS as DESKTOP
from desktop.ops.page import OPERATIONS as PAGE

__all__ = ["Hints", "Operation", "Rest", "Service", "Tool", "catalogue", "of_service"]


def catalogue() -> tuple[Operation, ...]:
    """Every declared operation of the desktop layer, in the order the doors list them."""
    return (*DESKTOP, *PAGE)


def of_service(service: Service) -> dict[str, Operation]:
    """The operations of one service, by method name (remote forwarding)."""
    return {op.method: op for op in catalogue() if op.service == service}
