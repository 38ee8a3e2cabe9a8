"""The MCP server through the SDK's own client, in memory, on the shared real desktop ("itest").

Every call passes session="itest"; the page fixtures record what the clicks and keys really did.
"""

from __future__ import annotations

import base64
import io
import os
import signal
import subprocess

import anyio
import httpx2
import numpy as np
import pytest
from jsonschema.validators import validator_for
from mcp.types import ImageContent
from PIL import Image

from desktop.session.stack import free_port
from tests.answers import mcp_tool_names, until
from tests.conftest import LiveServer
from tests.fakes.mcp_client import call, image_of, run, text_of
from tests.fakes.testpage import at
from vision.http.app import Settings, create_app
from vision.mcp import build_server

pytestmark = pytest.mark.x11

S = {"session": "itest"}
TOOLS = mcp_tool_names()
READ_ONLY = {"desktop_screenshot", "desktop_windows", "desktop_tree", "desktop_zoom", "desktop_wait",
             "desktop_cursor_position", "desktop_native_find", "desktop_marks",
             "vision_extract_visible_text", "session_list",
             "live_view_url", "page_state", "page_content", "page_console_messages", "page_network_requests",
             "page_downloads", "page_screenshot", "page_wait_for", "page_locate", "export_test", "eval_status",
             "eval_list"}


@pytest.fixture(scope="module")
def viewer(manager, services, desk):
    """The API over the shared services: it serves the live viewer the tools hand out links to."""
    port = free_port()
    with LiveServer(create_app(manager, Settings(token=None, port=port), services), port=port) as live:
        yield live


@pytest.fixture(scope="module")
def server(viewer, server):
    """The tier's MCP server (tests/e2e/conftest.py), the live viewer up first, as the tools hand
    out links to it."""
    return server


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
        if tool.name not in ("session_list", "session_create", "session_close", "export_test", "eval_start",
                             "eval_status", "eval_list"):  # the server's, not a session's
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
    # The element that was under the pixel, and the Playwright code doing the same, beside the argv.
    element = result.structured_content["element"]
    assert element["tag"] == "button" and element["locators"]
    assert result.structured_content["playwright"].endswith(".click();")
    # The sentence whole, then the code after everything else (it once split the sentence in two).
    said = text_of(result)
    assert said.index("on session 'itest': done, ") < said.index("executed:") < said.index(
        "\nPlaywright:\n") and said.rstrip().endswith(".click();"), said
    # Without x and y the click is where the pointer is, as over REST: the same button again.
    page.clear()
    again = call(server, "desktop_click", {"screenshot": False, **S})
    assert not again.is_error, text_of(again)
    event = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    assert (event["screenX"], event["screenY"]) == (x, y)
    assert text_of(again).startswith("click on button") and not any(isinstance(c, ImageContent)
                                                                     for c in again.content)


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


def decoded(result, fmt: str) -> Image.Image:
    images = [c for c in result.content if isinstance(c, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == f"image/{fmt.lower()}", result.content
    image = Image.open(io.BytesIO(base64.b64decode(images[0].data)))
    image.load()
    assert image.format == fmt
    return image.convert("RGB")


def test_screenshot_region_is_the_display_there_pixel_exact(server, page, desk):
    for _attempt in range(3):  # a repaint between the two captures would differ: retry
        result = call(server, "desktop_screenshot", {"region": [100, 200, 420, 400], **S})
        truth = desk.capture().image.crop((100, 200, 420, 400)).convert("RGB")
        if decoded(result, "PNG").tobytes() == truth.tobytes():
            break
    else:
        raise AssertionError("the region never matched the display")
    mapping = result.structured_content
    assert (mapping["origin"], mapping["scale"], mapping["region"]) == ([100, 200], 1.0, [100, 200, 420, 400])
    assert "image pixel (ix, iy) is display pixel (100 + ix / 1, 200 + iy / 1)" in text_of(result)


@pytest.mark.parametrize("fmt,quality", [("jpeg", None), ("webp", 90)])
def test_screenshot_lossy_formats_scaled_and_their_mapping(server, page, desk, fmt, quality):
    arguments = {"region": [100, 100, 900, 500], "scale": 0.5, "format": fmt, **S}
    if quality:
        arguments["quality"] = quality
    for _attempt in range(3):
        result = call(server, "desktop_screenshot", arguments)
        assert not result.is_error, text_of(result)
        image = decoded(result, fmt.upper())
        truth = desk.capture().image.crop((100, 100, 900, 500)).convert("RGB").resize((400, 200))
        diff = np.abs(np.asarray(image, dtype=np.int16) - np.asarray(truth, dtype=np.int16)).mean()
        if diff < 6:  # lossy, but the same picture: not another part of the screen
            break
    else:
        raise AssertionError(f"the {fmt} image is not the display's region (mean difference {diff:.1f})")
    assert image.size == (400, 200)
    mapping = result.structured_content
    assert (mapping["format"], mapping["media_type"]) == (fmt, f"image/{fmt}")
    assert (mapping["origin"], mapping["scale"], mapping["region"]) == ([100, 100], 0.5, [100, 100, 900, 500])
    assert "display x = 100 + image x / 0.5" in mapping["coordinates"] and mapping["coordinates"] in text_of(result)


def test_screenshot_options_are_checked_by_the_service(server):
    png_quality = call(server, "desktop_screenshot", {"quality": 50, **S})
    assert png_quality.is_error and text_of(png_quality).startswith("invalid_action: quality:")
    gif = call(server, "desktop_screenshot", {"format": "gif", **S})
    assert gif.is_error and "format" in text_of(gif)


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


# ------------------------------------------------------------------------------- strict arguments, parity tools


def test_an_unknown_argument_is_refused_and_nothing_is_clicked(server, page, viewport):
    sx, sy = at(viewport, 1260, 145)  # Sign in
    refused = call(server, "desktop_click", {"x": sx, "y": sy, "bogus": 1, **S})
    assert refused.is_error
    assert text_of(refused).startswith("invalid_action: unknown argument 'bogus'; nothing was done.")
    # A real click after it: the refused one, had it run, would have reported its events first.
    cx, cy = at(viewport, 1560, 145)  # Cancel
    assert not call(server, "desktop_click", {"x": cx, "y": cy, "screenshot": False, **S}).is_error
    page.wait_for(lambda e: e["type"] == "click" and e["target"] == "cancel")
    pointer_events = [e for e in page.events if e["type"] in ("mousedown", "mouseup", "click")]
    assert pointer_events and all(e["target"] == "cancel" for e in pointer_events), pointer_events


def test_triple_click_selects_a_line(server, page, viewport):
    x, y = at(viewport, 200, 190)  # inside "second line of text"
    misses = []
    for _attempt in range(3):  # a starved browser may count a burst as separate clicks: see test_api.multi_click
        page.clear()
        result = call(server, "desktop_triple_click", {"x": x, "y": y, "screenshot": False, **S})
        assert not result.is_error, text_of(result)
        assert "--repeat" in result.structured_content["executed"][-1]
        try:
            page.wait_for(lambda e: e["type"] == "selection" and e["selection"].strip() == "second line of text",
                          timeout=5)
            return
        except AssertionError:
            misses.append([(e["type"], e.get("detail"), e.get("selection")) for e in page.events])
            anyio.run(anyio.sleep, 0.6)  # let the browser's click count reset
    raise AssertionError(f"triple click never selected the line: {misses}")


def test_mouse_down_move_and_up_drag_the_slider(server, page, viewport):
    (sx, sy), (ex, ey) = at(viewport, 108, 372), at(viewport, 700, 372)
    down = call(server, "desktop_mouse_down", {"x": sx, "y": sy, "screenshot": False, **S})
    assert not down.is_error, text_of(down)
    pressed = page.wait_for(lambda e: e["type"] == "mousedown")
    assert (pressed["screenX"], pressed["screenY"], pressed["button"]) == (sx, sy, 0)
    assert not call(server, "desktop_move", {"x": ex, "y": ey, "screenshot": False, **S}).is_error
    up = call(server, "desktop_mouse_up", {**S})  # where the pointer is
    assert not up.is_error, text_of(up)
    assert image_of(up).size == (1920, 1080)
    released = page.wait_for(lambda e: e["type"] == "mouseup")
    assert (released["screenX"], released["screenY"]) == (ex, ey)
    assert page.last("change")["slider"] >= 95


def test_hold_key_holds_the_key(server, page, viewport):
    fx, fy = at(viewport, 1600, 900)
    call(server, "desktop_click", {"x": fx, "y": fy, "screenshot": False, **S})  # focus the page
    result = call(server, "desktop_hold_key", {"keys": "shift", "duration_ms": 300, "screenshot": False, **S})
    assert not result.is_error, text_of(result)
    assert result.structured_content["executed"] == [["xdotool", "keydown", "Shift_L", "sleep", "0.3", "keyup",
                                                      "Shift_L"]]
    page.wait_for(lambda e: e["type"] == "keydown" and e["key"] == "Shift")
    page.wait_for(lambda e: e["type"] == "keyup" and e["key"] == "Shift")
    too_long = call(server, "desktop_hold_key", {"keys": "shift", "duration_ms": 20_000, **S})
    assert too_long.is_error and "duration_ms" in text_of(too_long)


def test_wait_waits_and_does_nothing(server, page):
    result = call(server, "desktop_wait", {"duration_ms": 250, **S})
    assert not result.is_error, text_of(result)
    assert result.structured_content["executed"] == []
    assert result.structured_content["duration_ms"] >= 240  # a sleep is never shorter than asked
    assert image_of(result).size == (1920, 1080)
    assert not [e for e in page.events if e["type"] in ("mousedown", "keydown", "wheel")]


def test_cursor_position_answers_where_the_pointer_is(server):
    for x, y in ((1111, 222), (0, 0), (1919, 1079)):
        assert not call(server, "desktop_move", {"x": x, "y": y, "screenshot": False, **S}).is_error
        result = call(server, "desktop_cursor_position", S)
        assert not result.is_error, text_of(result)
        assert (result.structured_content["x"], result.structured_content["y"]) == (x, y)
        assert f"({x}, {y})" in text_of(result)


def active_window(desk) -> int:
    out = subprocess.run(["xdotool", "getactivewindow"], env=desk.stack.env(), capture_output=True, text=True,
                         timeout=10)
    return int(out.stdout.strip() or 0)


def test_focus_window_brings_chromium_back_to_the_front(server, desk):
    chromium = [w for w in call(server, "desktop_windows", S).structured_content["windows"]
                if "chromium" in w["wm_class"].lower()][0]
    launched = call(server, "desktop_launch", {"command": "xmessage", "args": ["-center", "in front"],
                                               "screenshot": False, **S})
    assert not launched.is_error, text_of(launched)
    pid = launched.structured_content["pid"]
    try:
        until(lambda: active_window(desk) not in (0, int(chromium["id"], 16)), "the launched window in front")
        result = call(server, "desktop_focus_window", {"window_id": chromium["id"], "screenshot": False, **S})
        assert not result.is_error, text_of(result)
        assert result.structured_content["executed"] == [["wmctrl", "-i", "-a", hex(int(chromium["id"], 16))]]
        until(lambda: active_window(desk) == int(chromium["id"], 16), "Chromium in front again")
        unknown = call(server, "desktop_focus_window", {"window_id": "0x0badbeef", **S})
        assert unknown.is_error and text_of(unknown).startswith("invalid_action: ")
    finally:
        os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------------------- sessions


def test_session_create_honours_id(server, manager):
    created = call(server, "session_create", {"id": "mcptmp"})
    try:
        assert not created.is_error, text_of(created)
        assert created.structured_content["id"] == "mcptmp" and "'mcptmp'" in text_of(created)
        assert "mcptmp" in manager.sessions
        listed = call(server, "session_list").structured_content["sessions"]
        assert "mcptmp" in [s["id"] for s in listed]
    finally:
        closed = call(server, "session_close", {"session": "mcptmp"})
        assert not closed.is_error, text_of(closed)
    assert "mcptmp" not in manager.sessions


def test_a_restarted_default_session_is_announced_with_its_new_link(services, viewer, manager):
    server = build_server(services)  # its own: it has seen nothing of earlier tests' sessions
    default = services.desktops.default
    first = call(server, "desktop_cursor_position")  # starts the default session when it is not running
    try:
        assert not first.is_error, text_of(first)
        assert "default_session_restarted" not in (first.structured_content or {}), "a first start is not news"
        old_url = call(server, "live_view_url").structured_content["url"]
        assert not call(server, "session_close", {"session": default}).is_error
        assert default not in manager.sessions
        again = call(server, "desktop_cursor_position")  # the default session starts again
        assert not again.is_error, text_of(again)
        notice = again.structured_content["default_session_restarted"]
        new_url = notice["live_view_url"]
        assert notice["session"] == default and new_url.startswith(f"{viewer.url}/view/{default}#token=")
        assert f"the default session {default!r} had been closed and was started again" in text_of(again)
        assert new_url in text_of(again)
        # The new link lets its holder in; the old one, to the closed desktop, no longer does.
        granted = httpx2.get(f"{viewer.url}/api/v1/sessions/{default}/viewer",
                             headers={"x-live-token": new_url.split("#token=")[1]})
        assert granted.status_code == 200, granted.text
        stale = httpx2.get(f"{viewer.url}/api/v1/sessions/{default}/viewer",
                           headers={"x-live-token": old_url.split("#token=")[1]})
        assert stale.status_code in (401, 403), stale.text
        later = call(server, "desktop_cursor_position")
        assert "default_session_restarted" not in later.structured_content, "told once"
    finally:
        if default in manager.sessions:
            manager.delete(default)
