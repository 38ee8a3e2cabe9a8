"""The e2e tier's shared fixtures: the MCP server over the shared services, in memory and over HTTP."""

from __future__ import annotations

import pytest

from tests.fakes.app_server import AppServer


@pytest.fixture(scope="module")
def server(services, desk):
    """The MCP server over the shared services, called in memory (tests/fakes/mcp_client.py). The
    modules whose ``server`` is an HTTP server define their own."""
    from vision.mcp import build_server

    return build_server(services)


@pytest.fixture(scope="module")
def open_server(services, desk):
    """The API with the MCP door over HTTP, on loopback, with no token."""
    with AppServer.over(services, token=None) as live:
        yield live
