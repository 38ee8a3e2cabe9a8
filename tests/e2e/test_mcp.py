"""The MCP server through the SDK's own client, in memory, on the shared real desktop ("itest").

Every call passes session="itest"; the page fixtures record what the clicks and keys really did.
"""

from __future__ import annotations

import base64
import io

import anyio
import httpx2
import pytest
from jsonschema.validators import validator_for
from mcp import Client
from mcp.types import ImageContent, TextContent
from PIL import Image

from desktop.stack import free_port
from tests.conftest import LiveServer
from tests.fakes.testpage import at
from vision.app import Settings, create_app
from vision.mcp import build_server

pytestmark = pytest.mark.x11

S = {"session": "itest"}
TOOLS = {
    "desktop_screenshot", "desktop_click", "desktop_double_click", "desktop_move", "desktop_drag", "desktop_scroll",
    "desktop_type", "desktop_key", "desktop_open_url", "desktop_launch", "desktop_windows", "desktop_zoom",
    "vision_act", "vision_click_anywhere", "vision_extract_visible_text", "vision_fill_form_by_label",
    "session_create", "session_list", "session_close", "session_reset", "live_view_url",
    "page_state", "page_content", "page_console_messages", "page_network_requests", "page_downloads",
    "page_screenshot", "page_wait_for", "page_navigate", "page_back", "page_forward", "page_reload", "page_tabs",
    "page_click", "page_fill", "page_select", "page_upload_file", "page_handle_dialog", "page_dialogs",
    "page_evaluate",
    "verify_page_loads", "verify_element_exists", "verify_user_flow", "capture_visual_baseline",
    "compare_visual_regression", "analyze_console_errors",
}
READ_ONLY = {"desktop_screenshot", "desktop_windows", "desktop_zoom", "vision_extract_visible_text", "session_list",
             "live_view_url", "page_state", "page_content", "page_console_messages", "page_network_requests",
             "page_downloads", "page_screenshot", "page_wait_for"}


@pytest.fixture(scope="module")
def viewer(manager, services, desk):
    """The API over the shared services: it serves the live viewer the tools hand out links to."""
    port = free_port()
    with LiveServer(create_app(manager, Settings(token=None, port=port), services), port=port) as live:
        yield live


@pytest.fixture(scope="module")
def server(services, desk, viewer):
    return build_server(services)


def run(server, fn):
    """Open a client on the server in memory, run ``fn(client)``, return its result."""
    async def main():
        async with Client(server) as client:
            return await fn(client)
    return anyio.run(main)


def call(server, name, arguments=None, **options):
    return run(server, lambda client: client.call_tool(name, arguments or {}, **options))


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def image_of(result) -> Image.Image:
    images = [c for c in result.content if isinstance(c, ImageContent)]
    assert len(images) == 1, result.content
    assert images[0].mime_type == "image/png"
    return Image.open(io.BytesIO(base64.b64decode(images[0].data)))


def test_catalog_names_wording_annotations_and_schemas(server):
    async def listing(client):
        return await client.list_tools(), client.instructions

    tools, instructions = run(server, listing)
    tools = tools.tools
    assert {t.name for t in tools} == TOOLS
    assert "VISIBLE" in instructions and "Chromium is already" in instructions and "live_view_url" in instructions
    for tool in tools:
        # Where it acts comes first: that is what makes an agent pick it when a person watches.
        assert tool.description.startswith(("Acts on the VISIBLE", "Looks at the VISIBLE", "Manages the VISIBLE")), \
            tool.name
        assert "VISIBLE" in tool.description
        assert tool.title and tool.annotations is not None and tool.annotations.title, tool.name
        assert tool.annotations.read_only_hint is (tool.name in READ_ONLY), tool.name
        schema = tool.input_schema
        validator_for(schema).check_schema(schema)  # a valid JSON Schema ...
        assert schema["type"] == "object"  # ... of an object
        if tool.name not in ("session_list", "session_create", "session_close"):
            assert "session" in schema["properties"] and "session" not in schema.get("required", []), tool.name
    by_name = {t.name: t for t in tools}
    assert by_name["desktop_click"].annotations.destructive_hint is True
    assert by_name["desktop_move"].annotations.destructive_hint is False
    assert by_name["session_close"].annotations.destructive_hint is True
    assert by_name["session_reset"].annotations.destructive_hint is True
    assert by_name["desktop_open_url"].annotations.open_world_hint is True
    assert by_name["vision_act"].annotations.open_world_hint is True
    assert by_name["desktop_click"].input_schema["properties"]["x"]["maximum"] == 1919


def test_screenshot_is_a_png_of_the_whole_display(server):
    result = call(server, "desktop_screenshot", S)
    assert not result.is_error, text_of(result)
    assert image_of(result).size == (1920, 1080)
    assert "image pixels = display pixels" in text_of(result)
    assert result.structured_content["session"] == "itest"


def test_screenshot_region_and_scale(server):
    result = call(server, "desktop_screenshot", {"region": [100, 200, 500, 400], "scale": 0.5, **S})
    assert not result.is_error, text_of(result)
    assert image_of(result).size == (200, 100)
    assert "display x = 100 + image x / 0.5" in text_of(result)
    zoom = call(server, "desktop_zoom", {"region": [0, 0, 300, 100], **S})
    assert image_of(zoom).size == (300, 100)  # the one zoom default of every door: the region as it is
    zoom = call(server, "desktop_zoom", {"region": [0, 0, 300, 100], "scale": 2, **S})
    assert image_of(zoom).size == (600, 200)


def test_click_lands_on_the_target_at_the_exact_pixel(server, page, viewport):
    x, y = at(viewport, 1260, 145)  # the Sign in button
    result = call(server, "desktop_click", {"x": x, "y": y, **S})
    assert not result.is_error, text_of(result)
    event = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (event["screenX"], event["screenY"]) == (x, y)
    # The settled screenshot after the action and the argv that ran.
    assert image_of(result).size == (1920, 1080)
    executed = result.structured_content["executed"]
    assert executed and all(argv[0] == "xdotool" for argv in executed)
    assert any(str(x) in argv and str(y) in argv for argv in executed)
    assert "xdotool" in text_of(result) and "settled after" in text_of(result)
    assert isinstance(result.structured_content["settle_ms"], int)


def test_type_and_key_reach_the_focused_field(server, page, viewport):
    fx, fy = at(viewport, 300, 280)
    call(server, "desktop_click", {"x": fx, "y": fy, "screenshot": False, **S})
    page.wait_for(lambda e: e["type"] == "click" and e["target"] == "field")
    result = call(server, "desktop_type", {"text": "hello from mcp", **S})
    assert not result.is_error, text_of(result)
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "hello from mcp")
    result = call(server, "desktop_key", {"keys": ["ctrl+a", "BackSpace"], "screenshot": False, **S})
    assert not result.is_error, text_of(result)
    assert not any(isinstance(c, ImageContent) for c in result.content)
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "")


def test_vision_act_with_the_scripted_model_reports_progress(server, page, viewport):
    bx, by = at(viewport, 1260, 145)
    script = [{"action": "move", "x": bx - 40, "y": by}, {"action": "click", "x": bx, "y": by},
              {"action": "done", "answer": "clicked sign in"}]
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    result = call(server, "vision_act", {"instruction": "click sign in", "model": "scripted", "script": script,
                                         "max_steps": 5, **S}, progress_callback=on_progress)
    assert not result.is_error, text_of(result)
    assert result.structured_content["status"] == "done"
    assert result.structured_content["answer"] == "clicked sign in"
    click = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (click["screenX"], click["screenY"]) == (bx, by)
    assert [p[0] for p in progress] == [1, 2, 3]
    assert all(p[1] == 5 for p in progress) and "click" in progress[1][2]
    assert image_of(result).size == (1920, 1080)
    # Called in memory there is no web server: the report is written next to the trace.
    url = result.structured_content["report_url"]
    assert url.startswith("file://") and url.endswith("/report.html")
    assert "status" in text_of(result) and url in text_of(result)


def test_vision_act_without_a_script_says_what_is_missing(server):
    result = call(server, "vision_act", {"instruction": "x", "model": "scripted", **S})
    assert result.is_error and "script" in text_of(result)


@pytest.mark.parametrize("tool,arguments,names", [
    ("desktop_click", {"x": 5000, "y": 10}, "x"),
    ("desktop_move", {"x": 10, "y": -1}, "y"),
    ("desktop_key", {"keys": ["ctrl+nosuchkey"]}, "keys"),
    ("desktop_click", {"x": 10, "y": 10, "modifiers": ["hyperdrive"]}, "modifiers"),
    ("desktop_screenshot", {"region": [500, 10, 100, 20]}, "region"),
    ("desktop_open_url", {"url": "javascript:alert(1)"}, "url"),
])
def test_bad_arguments_are_tool_errors_with_a_clear_message(server, tool, arguments, names):
    result = call(server, tool, {**arguments, **S})
    assert result.is_error
    message = text_of(result)
    assert names in message and "\n" not in message.strip(), message
    assert "validation error for" not in message and "errors.pydantic.dev" not in message


def test_an_unknown_session_is_a_tool_error(server):
    result = call(server, "desktop_screenshot", {"session": "nope"})
    assert result.is_error
    assert "session_not_found" in text_of(result) and "list the sessions" in text_of(result)


def test_session_list_and_live_view_url(server, viewer):
    listing = call(server, "session_list")
    assert not listing.is_error
    ids = [s["id"] for s in listing.structured_content["sessions"]]
    assert "itest" in ids
    assert "itest" in text_of(listing) and f"{viewer.url}/view/itest#token=itest.view." in text_of(listing)
    view = call(server, "live_view_url", S)
    assert not view.is_error
    url = view.structured_content["url"]
    assert url.startswith(f"{viewer.url}/view/itest#token=itest.view.") and url in text_of(view)
    token = url.split("#token=")[1]
    granted = httpx2.get(f"{viewer.url}/api/v1/sessions/itest/viewer", headers={"x-live-token": token}).json()
    assert granted["mode"] == "view"  # the link works on the viewer it names
    control = call(server, "live_view_url", {"control": True, **S})
    assert "#token=itest.control." in control.structured_content["url"]


def test_windows_lists_the_chromium_window(server):
    result = call(server, "desktop_windows", S)
    assert not result.is_error
    assert any("chromium" in w["wm_class"].lower() for w in result.structured_content["windows"])


def test_open_url_navigates_the_visible_chromium(server, page_server, desk):
    page_server.clear()
    result = call(server, "desktop_open_url", {"url": page_server.url, **S})
    assert not result.is_error, text_of(result)
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    assert result.structured_content["executed"] == [["browser", "goto", page_server.url]]


# ------------------------------------------------------------------------------- vision packs (ocr)


def test_click_anywhere_finds_the_button_by_its_text(server, page):
    result = call(server, "vision_click_anywhere", {"target": "Sign in", "model": "ocr", **S})
    assert not result.is_error, text_of(result)
    page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert result.structured_content["clicked"]


def test_extract_visible_text_reads_the_page(server, page):
    result = call(server, "vision_extract_visible_text", {"model": "ocr", **S})
    assert not result.is_error, text_of(result)
    assert "alpha bravo charlie delta" in result.structured_content["text"].lower()


def test_fill_form_by_label_types_into_the_labelled_field(server, page):
    result = call(server, "vision_fill_form_by_label", {"fields": {"Email": "ann@example.com"}, "model": "ocr", **S})
    assert not result.is_error, text_of(result)
    page.wait_for(lambda e: e["type"] == "input" and e["email"] == "ann@example.com")
    assert result.structured_content["fields"][0]["status"] == "done"


def test_a_pack_that_cannot_find_its_target_is_an_error(server, page):
    result = call(server, "vision_click_anywhere", {"target": "Nonexistent Zebra Button", "model": "ocr", **S})
    assert result.is_error
    assert result.structured_content["status"] == "failed"
    assert image_of(result).size == (1920, 1080)
