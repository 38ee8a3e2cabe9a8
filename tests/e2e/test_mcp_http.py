"""The MCP server over streamable HTTP at /mcp on the real API server, behind the bearer token."""

from __future__ import annotations

import base64
import io

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ImageContent
from PIL import Image

from tests.answers import mcp_tool_names
from tests.fakes.app_server import AppServer

pytestmark = pytest.mark.x11

TOKEN = "mcp-test-token"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def token_server(services, desk):
    with AppServer.over(services, token=TOKEN) as server:
        yield server


def _png_size(result) -> tuple[int, int]:
    images = [c for c in result.content if isinstance(c, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    return Image.open(io.BytesIO(base64.b64decode(images[0].data))).size


def test_list_tools_and_screenshot_over_http(open_server):
    async def main():
        async with Client(f"{open_server.url}/mcp") as client:
            tools = (await client.list_tools()).tools
            shot = await client.call_tool("desktop_screenshot", {"session": "itest"})
            return tools, shot

    tools, shot = anyio.run(main)
    assert len(tools) == len(mcp_tool_names()) and all("VISIBLE" in t.description for t in tools)
    assert not shot.is_error
    assert _png_size(shot) == (1920, 1080)


def test_vision_act_over_http_reports_progress_and_an_http_report_url(open_server):
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    async def main():
        async with Client(f"{open_server.url}/mcp") as client:
            return await client.call_tool(
                "vision_act", {"instruction": "look", "model": "scripted", "session": "itest",
                               "script": [{"action": "screenshot"}, {"action": "done", "answer": "seen"}]},
                progress_callback=on_progress)

    result = anyio.run(main)
    assert not result.is_error
    assert result.structured_content["status"] == "done" and result.structured_content["answer"] == "seen"
    assert progress == [1, 2]
    trace_id = result.structured_content["trace_id"]
    assert result.structured_content["report_url"] == f"{open_server.url}/api/v1/traces/{trace_id}/report"


def test_a_missing_token_gets_401(token_server):
    r = httpx2.post(f"{token_server.url}/mcp", json=INIT, headers=MCP_HEADERS, timeout=30)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    wrong = httpx2.post(f"{token_server.url}/mcp", json=INIT, headers={**MCP_HEADERS, "authorization": "Bearer no"},
                        timeout=30)
    assert wrong.status_code == 401


def test_with_the_token_the_tools_work(token_server):
    async def main():
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"},
                                      timeout=httpx2.Timeout(30, read=300)) as http:
            async with Client(streamable_http_client(f"{token_server.url}/mcp", http_client=http)) as client:
                tools = (await client.list_tools()).tools
                listing = await client.call_tool("session_list", {})
                shot = await client.call_tool("desktop_screenshot", {"session": "itest", "scale": 0.5})
                return tools, listing, shot

    tools, listing, shot = anyio.run(main)
    assert len(tools) == len(mcp_tool_names())
    assert "itest" in [s["id"] for s in listing.structured_content["sessions"]]
    assert _png_size(shot) == (960, 540)


def test_dns_rebinding_protection_refuses_a_foreign_host(open_server):
    """A page on a foreign name re-pointed at 127.0.0.1 arrives with its own Host: refused."""
    r = httpx2.post(f"{open_server.url}/mcp", json=INIT, headers={**MCP_HEADERS, "host": "evil.example"}, timeout=30)
    assert r.status_code == 421
    r = httpx2.post(f"{open_server.url}/mcp", json=INIT,
                    headers={**MCP_HEADERS, "origin": "http://evil.example"}, timeout=30)
    assert r.status_code == 403
    ok = httpx2.post(f"{open_server.url}/mcp", json=INIT,
                     headers={**MCP_HEADERS, "host": f"localhost:{open_server.port}"}, timeout=30)
    assert ok.status_code == 200, ok.text
