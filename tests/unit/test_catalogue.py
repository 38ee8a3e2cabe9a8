"""The catalogue (desktop.ops): each declaration is whole, no two claim the same route or tool, the
doors generated from it serve exactly it, and the docs list every operation it declares."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from desktop.http.routes import operations_router
from desktop.ops import of_service
from desktop.ops.declare import PREFIXES
from desktop.service.desktop import DesktopService
from desktop.service.page import PageService
from vision.app.ops import catalogue
from vision.calibration.service import CalibrationService
from vision.client import PageClient, QaClient, SessionClient
from vision.client.routes import Routes
from vision.eval.service import EvalService
from vision.qa.service import QaService
from vision.recordings.service import SessionRecordings

ROOT = Path(__file__).resolve().parents[2]
DOCS = {"pages": ROOT / "docs" / "page.md", "desktop": ROOT / "docs" / "desktop-api.md", "qa": ROOT / "docs" / "qa.md",
        "recordings": ROOT / "docs" / "vision.md", "calibration": ROOT / "docs" / "calibration.md",
        "evals": ROOT / "docs" / "eval.md"}
SERVICES = {"pages": PageService, "desktop": DesktopService, "qa": QaService, "recordings": SessionRecordings,
            "calibration": CalibrationService, "evals": EvalService}
CLIENTS = {"pages": PageClient, "desktop": SessionClient, "qa": QaClient, "recordings": SessionClient,
           "calibration": SessionClient, "evals": Routes}


def routes():
    return [(op.rest.method, PREFIXES[op.scope] + path) for op in catalogue() if op.rest
            for path in (op.rest.path, *(also for also, _ in op.rest.also))]


def test_no_two_operations_claim_a_route_a_tool_or_a_client_method():
    assert len(routes()) == len(set(routes()))
    tools = [op.tool.name for op in catalogue() if op.tool]
    assert len(tools) == len(set(tools))
    methods = [(op.service, op.rest.client or op.method) for op in catalogue() if op.rest]
    assert len(methods) == len(set(methods))


@pytest.mark.parametrize("op", catalogue(), ids=lambda op: f"{op.name}:{op.rest.path if op.rest else '-'}")
def test_every_declaration_names_a_real_service_method_and_a_well_formed_route(op):
    assert callable(getattr(SERVICES[op.service], op.method, None)), f"{op.name}: no such service method"
    if op.rest is None:
        return
    for name in op.rest.path_fields:  # a path parameter is a field of the request
        assert op.request is not None and name in op.request.model_fields, (op.name, name)
    if op.tool is not None:
        assert "VISIBLE" in op.tool.description, f"{op.tool.name}: say where it acts"


def test_the_generated_router_serves_each_route_once_over_its_service():
    class Service:
        def summary(self, _session):
            return None

    router = operations_router(catalogue(), {name: Service() for name in SERVICES})
    served = [(method, route.path) for route in router.routes if isinstance(route, APIRoute)
              for method in route.methods]
    assert sorted(served) == sorted(routes())


def test_the_client_has_a_method_per_route_with_the_request_fields_as_arguments():
    for op in catalogue():
        if op.rest is None:
            continue
        method = getattr(CLIENTS[op.service], op.rest.client or op.method)
        parameters = list(inspect.signature(method).parameters)[1:]
        fields = [name for name in (op.request.model_fields if op.request else []) if name != "action"]
        # An input's ``action`` is its route; it also takes ``screenshot`` (the settled screen in the answer).
        assert parameters == fields + (["screenshot"] if op.performs else []), op.name


@pytest.mark.parametrize("service", sorted(DOCS))
def test_the_docs_list_every_operation_with_its_route_and_tool(service):
    """The operation tables of docs/page.md and docs/desktop-api.md are the catalogue's, row for row:
    a new operation is one line there, and forgetting it fails here."""
    text = DOCS[service].read_text()
    missing = []
    for op in of_service_ops(service):
        if op.rest is not None and service == "qa":  # one line for the six: POST .../qa/<verb>
            if "/qa/<verb>" not in text:
                missing.append(op.rest.path)
        elif op.rest is not None:
            # ``GET /page/content?format=``, ``GET /sessions/{id}/network-policy``, ``GET .../desktop/windows``
            route = re.escape(op.rest.method) + r" \S*?" + re.escape(op.rest.path) + r"(?=[\s`{?])"
            if not re.search(route, text):
                missing.append(f"{op.rest.method} {op.rest.path}")
        if op.tool is not None and f"`{op.tool.name}`" not in text:
            missing.append(op.tool.name)
    assert missing == []


def of_service_ops(service):
    return [op for op in catalogue() if op.service == service]


def test_of_service_indexes_the_service_methods():
    assert set(of_service("pages")) == {op.method for op in catalogue() if op.service == "pages"}


def test_a_client_method_without_a_request_refuses_arguments_it_does_not_take():
    from vision.client import GlassdeskClient

    with GlassdeskClient("http://127.0.0.1:9") as client:
        with pytest.raises(TypeError):
            client.session("s").page.state("other")


def test_a_route_with_fields_in_both_path_and_body_is_refused_when_generated():
    """Not supported yet: the generated route would take the path's fields from the body too."""
    from dataclasses import replace

    from desktop.http.routes import endpoint
    from desktop.ops.page import OPERATIONS

    click = next(op for op in OPERATIONS if op.method == "click")
    with pytest.raises(TypeError, match="both in the path"):
        endpoint(replace(click, rest=replace(click.rest, path="/page/{selector}/click")), object(), None)


def test_every_operation_names_a_service_the_declaration_knows():
    from typing import get_args

    from desktop.ops.declare import Service

    assert {op.service for op in catalogue()} <= set(get_args(Service)) == set(SERVICES)


def test_the_hand_written_tools_are_the_ones_desktop_ops_lists_with_why():
    """desktop.ops names each MCP tool written by hand and why it is not declared; the list and the
    tools the server has beside the catalogue's are the same."""
    import desktop.ops
    from tests.answers import HAND_WRITTEN_TOOLS

    listed = set(re.findall(r"``((?:desktop|vision|session|live|page|export)_\w+)``", desktop.ops.__doc__))
    assert listed == HAND_WRITTEN_TOOLS
    assert not listed & {op.tool.name for op in catalogue() if op.tool}
