"""The MCP catalogue is strict, without X: every input schema forbids arguments it does not name,
and a call with one is refused before anything runs (no session is started for it). Also the
notice of a re-started default session, driven by the session manager's own events."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client
from mcp.types import TextContent

from desktop.frame import IMAGE_FORMATS
from desktop.session.manager import SessionManager
from tests.answers import mcp_tool_names
from vision.app.service import Glassdesk
from vision.config import VisionConfig
from vision.mcp import build_server
from vision.mcp.server import unknown_arguments

NEW_TOOLS = {"desktop_triple_click", "desktop_mouse_down", "desktop_mouse_up", "desktop_hold_key", "desktop_wait",
             "desktop_focus_window", "desktop_cursor_position"}


@pytest.fixture
def glassdesk(tmp_path):
    (tmp_path / "sessions").mkdir()
    manager = SessionManager(root=tmp_path / "sessions", max_sessions=2)
    glassdesk = Glassdesk.build(manager, data_dir=tmp_path / "data", config=VisionConfig())
    yield glassdesk
    glassdesk.close()
    manager.close()


def run(server, fn):
    async def main():
        async with Client(server) as client:
            return await fn(client)
    return anyio.run(main)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def test_every_schema_forbids_unknown_arguments(glassdesk):
    tools = run(build_server(glassdesk), lambda client: client.list_tools()).tools
    assert NEW_TOOLS <= {t.name for t in tools}
    assert len(tools) == len(mcp_tool_names())
    loose = [t.name for t in tools if t.input_schema.get("additionalProperties") is not False]
    assert loose == []


def test_the_screenshot_takes_exactly_the_formats_the_service_encodes(glassdesk):
    """vision.mcp.tools spells the formats out (a Literal built from the dict is no type to the checker)."""
    tools = run(build_server(glassdesk, "core"), lambda client: client.list_tools()).tools
    shot = next(t for t in tools if t.name == "desktop_screenshot")
    assert shot.input_schema["properties"]["format"]["enum"] == list(IMAGE_FORMATS)


def test_a_tool_declared_without_its_profile_group_is_refused(glassdesk):
    server = build_server(glassdesk)
    with pytest.raises(TypeError, match="profile group"):
        server.tool(name="no_group", description="x")

    @server.tool(description="named by its function", group="qa")
    def extra_tool() -> str:
        return "x"
    assert server.groups["extra_tool"] == "qa"


def test_an_unknown_argument_is_refused_by_every_tool_and_nothing_runs(glassdesk):
    server = build_server(glassdesk)

    async def call_all(client):
        tools = (await client.list_tools()).tools
        return {t.name: await client.call_tool(t.name, {"bogus": 1}) for t in tools}

    results = run(server, call_all)
    for name, result in results.items():
        assert result.is_error, name
        message = text_of(result)
        assert "unknown argument 'bogus'" in message and "nothing was done" in message, (name, message)
        code = "invalid_action" if name.startswith("desktop_") else "invalid_request"
        assert message.startswith(f"{code}: "), (name, message)
    # Any of them run would have started the default session (or another): none was.
    assert glassdesk.desktops.manager.sessions == {}


def test_the_refusal_names_every_unknown_argument_and_what_the_tool_takes():
    schema = {"properties": {"x": {}, "y": {}}}
    assert unknown_arguments("desktop_click", schema, {"x": 1, "y": 2}) is None
    message = unknown_arguments("desktop_click", schema, {"x": 1, "bogus": 1, "zz": 2})
    assert message == ("invalid_action: unknown arguments 'bogus', 'zz'; nothing was done. desktop_click takes: "
                       "x, y")
    assert unknown_arguments("session_list", {"properties": {}}, {"a": 1}).endswith("takes: no arguments")


def test_session_create_refuses_two_different_names(glassdesk):
    result = run(build_server(glassdesk), lambda client: client.call_tool("session_create",
                                                                           {"id": "one", "session": "two"}))
    assert result.is_error and text_of(result).startswith("invalid_request: id: ")
    assert glassdesk.desktops.manager.sessions == {}


def test_a_restarted_default_session_is_announced_once(glassdesk):
    server = build_server(glassdesk)
    manager = glassdesk.desktops.manager
    manager._notify("created", "default")  # the first start is not news
    assert server.default_restarts.take() is False
    manager._notify("deleted", "default")
    manager._notify("created", "other")
    assert server.default_restarts.take() is False
    manager._notify("created", "default")
    assert server.default_restarts.take() is True
    assert server.default_restarts.take() is False  # told once
