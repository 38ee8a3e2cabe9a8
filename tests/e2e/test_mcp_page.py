"""The page tools through the SDK's own MCP client, in memory, on the shared real desktop ("itest"),
against the local test site (tests/fakes/site.py): each tool once, the page summary every answer
carries, and the errors the service gives (the same codes as REST)."""

from __future__ import annotations

import base64
import io

import anyio
import pytest
from mcp import Client
from mcp.types import EmbeddedResource, ImageContent
from PIL import Image

from tests.answers import until
from tests.fakes import mcp_client
from tests.fakes.mcp_client import text_of
from tests.fakes.site import REPORT_TEXT
from vision.mcp import build_server

pytestmark = pytest.mark.x11

S = {"session": "itest"}


@pytest.fixture(scope="module")
def evaluating_server(manager, desk):
    """The tools over a service built with evaluate allowed (as `glassdesk mcp --allow-evaluate`)."""
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig

    return build_server(Glassdesk.build(manager, config=VisionConfig(), allow_evaluate=True))


async def _names(server) -> set[str]:
    async with Client(server) as client:
        return {t.name for t in (await client.list_tools()).tools}


def call(server, name, arguments=None):
    """A tool called on the shared desktop: every call here names session "itest"."""
    return mcp_client.call(server, name, {**S, **(arguments or {})})


def done(result) -> dict:
    assert not result.is_error, text_of(result)
    return result.structured_content


def refused(result, code: str) -> str:
    text = text_of(result)
    assert result.is_error and text.startswith(f"{code}: "), text
    return text


@pytest.fixture(autouse=True)
def one_quiet_tab(server):
    """Each test ends with no open dialog and one tab."""
    yield
    state = done(call(server, "page_state"))
    if state["dialog"] is not None:
        done(call(server, "page_handle_dialog", {"accept": False}))
    for tab in state["tabs"][1:]:
        done(call(server, "page_tabs", {"action": "close", "tab_id": tab["id"]}))


def navigate(server, site, path: str) -> dict:
    site.clear()
    answer = done(call(server, "page_navigate", {"url": site.url(path)}))
    assert answer["url"] == site.url(path) and answer["status"] == 200
    return answer


def test_reading_tools_and_the_page_summary_on_every_answer(server, site):
    navigated = call(server, "page_navigate", {"url": site.url("/console")})
    new_errors = done(navigated)["page"]["new_console_errors"]
    assert f"page: {site.url('/console')} - 'console errors'" in text_of(navigated)

    def both_errors():
        nonlocal new_errors
        answer = done(call(server, "page_console_messages", {"level": "error"}))
        new_errors += answer["page"]["new_console_errors"]
        texts = {m["text"] for m in answer["messages"]}
        return {"site: console error number 1", "Uncaught Error: site: uncaught boom"} <= texts

    until(both_errors, "the console errors over MCP")
    assert new_errors >= 2, "the summaries counted the new errors"
    quiet = call(server, "page_state")
    assert done(quiet)["console_errors"] >= 2 and done(quiet)["url"] == site.url("/console")
    again = done(call(server, "page_content", {"format": "text"}))
    assert again["page"]["new_console_errors"] == 0, "errors are new once"
    assert "this page logs and throws" in text_of(call(server, "page_content", {"format": "text"}))
    messages = done(call(server, "page_console_messages", {}))["messages"]
    newest = done(call(server, "page_console_messages", {"since": messages[-1]["seq"]}))["messages"]
    assert newest == []

    navigate(server, site, "/fetch404")
    site.wait_for(lambda e: e["type"] == "fetched")
    failed = until(lambda: [r for r in done(call(server, "page_network_requests", {"failed_only": True}))["requests"]
                            if r["url"] == site.url("/missing.json") and r["status"] == 404], "the 404")
    assert failed[0]["method"] == "GET"

    navigate(server, site, "/")
    links = done(call(server, "page_content", {"format": "links"}))["links"]
    assert {"text": "tall", "href": site.url("/tall")} in links
    tree = text_of(call(server, "page_content", {"format": "accessibility"}))
    assert 'link "tall" [ref=' in tree
    html = call(server, "page_content", {"format": "html", "selector": "h1"})
    assert "<h1>site index</h1>" in text_of(html)


def test_navigation_history_and_tabs(server, site):
    navigate(server, site, "/form")
    navigate(server, site, "/tall")
    assert done(call(server, "page_back", {}))["url"] == site.url("/form")
    assert done(call(server, "page_forward", {}))["url"] == site.url("/tall")
    assert done(call(server, "page_reload", {"wait_until": "domcontentloaded"}))["url"] == site.url("/tall")
    opened = done(call(server, "page_tabs", {"action": "new", "url": site.url("/form")}))["tabs"]
    assert [t["active"] for t in opened] == [False, True] and opened[1]["url"] == site.url("/form")
    first = opened[0]["id"]
    tabs = done(call(server, "page_tabs", {"action": "activate", "tab_id": first}))
    assert tabs["page"]["url"] == site.url("/tall")
    left = done(call(server, "page_tabs", {"action": "close", "tab_id": opened[1]["id"]}))["tabs"]
    assert [t["id"] for t in left] == [first]
    refused(call(server, "page_tabs", {"action": "activate"}), "invalid_request")
    refused(call(server, "page_tabs", {"action": "close", "tab_id": "t999"}), "element_not_found")
    refused(call(server, "page_navigate", {"url": "gopher://x.test/"}), "invalid_action")


def test_clear_state_leaves_one_blank_tab_and_says_what_it_cleared(server, site):
    navigate(server, site, "/form")
    done(call(server, "page_tabs", {"action": "new", "url": site.url("/tall")}))
    result = call(server, "page_clear_state", {})
    cleared = done(result)
    origin = site.url("/").rstrip("/")
    assert origin in cleared["origins"] and cleared["closed_tabs"] == 2
    assert cleared["tab"]["url"] == "about:blank" and cleared["tab"]["active"] is True
    assert "closed 2 tab(s)" in text_of(result) and origin in text_of(result)
    assert [t["url"] for t in done(call(server, "page_tabs", {"action": "list"}))["tabs"]] == ["about:blank"]


def test_click_fill_select_wait_upload_with_real_input(server, site):
    navigate(server, site, "/tall")
    located = done(call(server, "page_locate", {"selector": "#far"}))  # scrolled into view, where a click hits
    assert located["exists"] and located["visible"] and located["matches"] == 1
    clicked = done(call(server, "page_click", {"selector": "#far"}))
    event = site.wait_for(lambda e: e["type"] == "click" and e["target"] == "far")
    assert (event["screenX"], event["screenY"]) == (clicked["x"], clicked["y"])
    box = located["box"]
    assert (box["x"] + box["width"] // 2, box["y"] + box["height"] // 2) == (clicked["x"], clicked["y"])
    assert done(call(server, "page_locate", {"selector": "#never", "timeout_ms": 100}))["exists"] is False
    assert clicked["dispatched"] == "pointer" and clicked["executed"][0][0] == "xdotool"

    navigate(server, site, "/form")
    filled = done(call(server, "page_fill", {"label": "Quantity", "value": "{{n}}", "secrets": {"n": "Q77"}}))
    assert filled["verified"] is True and filled["executed"][-1] == ["xdotool", "type", "{{n}}"]
    assert "Q77" not in str(filled), "a secret is never echoed"
    chosen = done(call(server, "page_select", {"selector": "#colour", "option": "Blue"}))
    assert chosen["verified"] is True and chosen["dispatched"] == "devtools"
    assert site.wait_for(lambda e: e["type"] == "change")["value"] == "b"
    assert done(call(server, "page_wait_for", {"text": "arrived late"}))["state"] == "visible"
    assert "#never" in refused(call(server, "page_wait_for", {"selector": "#never", "timeout_ms": 200}), "timeout")

    navigate(server, site, "/upload")
    data = base64.b64encode(b"from mcp").decode()
    done(call(server, "page_upload_file",
              {"selector": "#file", "files": [{"name": "../m.txt", "content_base64": data}]}))
    assert site.wait_for(lambda e: e["type"] == "files")["files"] == [{"name": "m.txt", "size": 8, "text": "from mcp"}]


def test_check_and_press_with_playwrights_locators(server, site):
    navigate(server, site, "/form")
    checked = done(call(server, "page_check", {"role": "checkbox", "name": "Gift wrap"}))
    assert checked["verified"] is True and checked["executed"]
    assert site.wait_for(lambda e: e["type"] == "gift")["checked"] is True
    again = done(call(server, "page_check", {"label": "Gift wrap", "exact": True}))
    assert again["verified"] is True and again["executed"] == []  # checked already: not clicked
    done(call(server, "page_check", {"label": "Gift wrap", "checked": False}))
    site.wait_for(lambda e: e["type"] == "gift" and e["checked"] is False)
    done(call(server, "page_press", {"role": "textbox", "name": "Quantity", "keys": ["x"]}))
    assert site.wait_for(lambda e: e["type"] == "key")["key"] == "x"
    assert "did you mean 'checkbox'" in refused(call(server, "page_check", {"role": "chekbox"}), "invalid_request")
    assert "not a checkbox" in refused(call(server, "page_check", {"selector": "#qty"}), "invalid_action")


def test_targets_are_checked_like_rest(server, site):
    navigate(server, site, "/tall")
    assert "exactly one of" in refused(call(server, "page_click", {}), "invalid_request")
    refused(call(server, "page_click", {"selector": "#far", "text": "Far below"}), "invalid_request")
    refused(call(server, "page_click", {"ref": "not a ref"}), "invalid_request")
    assert "#nope" in refused(call(server, "page_click", {"selector": "#nope", "timeout_ms": 200}), "element_not_found")
    refused(call(server, "page_click", {"selector": "a[[[", "timeout_ms": 200}), "invalid_selector")
    assert not [e for e in site.events if e["type"] == "click"], "nothing was clicked"


def test_dialogs_over_mcp(server, site):
    navigate(server, site, "/dialogs")
    done(call(server, "page_click", {"selector": "#prompt"}))
    dialog = until(lambda: done(call(server, "page_state"))["dialog"], "the prompt")
    assert dialog["type"] == "prompt"
    answer = call(server, "page_console_messages", {})
    assert "dialog open: prompt 'site prompt: your name?'" in text_of(answer)
    assert done(answer)["page"]["dialog"]["type"] == "prompt"
    assert "prompt" in refused(call(server, "page_fill", {"selector": "#name", "value": "x"}), "dialog_open")
    handled = done(call(server, "page_handle_dialog", {"accept": True, "prompt_text": "Grace"}))
    assert handled["dialog"]["type"] == "prompt" and handled["page"]["dialog"] is None
    assert site.wait_for(lambda e: e["type"] == "answered")["value"] == "Grace"
    refused(call(server, "page_handle_dialog", {}), "no_dialog")


def test_the_dialog_policy_over_mcp(server, site, manager):
    listed = done(call(server, "page_dialogs", {}))
    assert listed["policy"] == "manual" and "dialog policy: manual" in text_of(call(server, "page_state"))
    since = listed["dialogs"][-1]["seq"] if listed["dialogs"] else 0
    try:
        assert done(call(server, "page_dialogs", {"policy": "accept"}))["policy"] == "accept"
        assert done(call(server, "page_state"))["dialog_policy"] == "accept"
        navigate(server, site, "/dialogs")
        done(call(server, "page_click", {"selector": "#confirm"}))
        assert site.wait_for(lambda e: e["type"] == "answered")["value"] is True
        answer = call(server, "page_dialogs", {"since": since})
        assert [(d["type"], d["handled"], d["by"]) for d in done(answer)["dialogs"]] == [
            ("confirm", "accepted", "policy")]
        assert "confirm 'site confirm: proceed?': accepted by policy" in text_of(answer)
        assert done(answer)["page"]["dialog"] is None, "nothing stays open"
        assert "dismiss" in refused(call(server, "page_dialogs", {"policy": "sometimes"}), "invalid_request")
        assert done(call(server, "page_dialogs", {}))["policy"] == "accept", "a bad mode changes nothing"
    finally:
        done(call(server, "page_dialogs", {"policy": "manual"}))
    before = set(manager.sessions)
    async def create(arguments):
        async with Client(server) as client:
            return await client.call_tool("session_create", arguments)
    refused(anyio.run(create, {"session": "mcpbad", "dialogs": "always"}), "invalid_request")
    assert set(manager.sessions) == before, "no session was started"
    created = anyio.run(create, {"session": "mcpdialogs", "dialogs": "dismiss"})
    try:
        assert not created.is_error, text_of(created)
        assert done(call(server, "page_dialogs", {"session": "mcpdialogs"}))["policy"] == "dismiss"
    finally:
        manager.delete("mcpdialogs")


def test_screenshots_and_downloads(server, site, monkeypatch):
    navigate(server, site, "/tall")
    shot = call(server, "page_screenshot", {"full_page": True})
    images = [c for c in shot.content if isinstance(c, ImageContent)]
    assert len(images) == 1 and Image.open(io.BytesIO(base64.b64decode(images[0].data))).size[1] == 4000
    element = call(server, "page_screenshot", {"selector": "#far"})
    image = [c for c in element.content if isinstance(c, ImageContent)][0]
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (200, 50)

    navigate(server, site, "/downloads")
    done(call(server, "page_click", {"selector": "#report"}))
    listed = until(lambda: [d for d in done(call(server, "page_downloads", {}))["downloads"]
                            if d["url"] == site.url("/files/report.txt")], "the download")
    fetched = call(server, "page_downloads", {"name": listed[-1]["name"]})
    blobs = [c for c in fetched.content if isinstance(c, EmbeddedResource)]
    assert len(blobs) == 1 and base64.b64decode(blobs[0].resource.blob) == REPORT_TEXT
    refused(call(server, "page_downloads", {"name": "..."}), "invalid_action")
    # A file bigger than one answer carries is refused whole, not cut: REST serves it.
    monkeypatch.setattr("vision.mcp.page_tools.DOWNLOAD_IN_ANSWER_MAX", len(REPORT_TEXT) - 1)
    assert "/page/downloads/" in refused(call(server, "page_downloads", {"name": listed[-1]["name"]}),
                                         "result_too_large")


def test_evaluate_is_off_unless_allowed(server, evaluating_server, site):
    navigate(server, site, "/form")
    # Off: not listed (no model spends context on a tool that can only refuse), and a call anyway
    # gets the service's refusal, which says how to turn it on.
    listed = anyio.run(lambda: _names(server)), anyio.run(lambda: _names(evaluating_server))
    assert "page_evaluate" not in listed[0] and "page_evaluate" in listed[1]
    assert "--allow-evaluate" in refused(call(server, "page_evaluate", {"expression": "1 + 1"}), "evaluate_disabled")
    assert done(call(evaluating_server, "page_evaluate", {"expression": "document.title"}))["result"] == "form"
    refused(call(evaluating_server, "page_evaluate", {"expression": "'x'.repeat(300000)"}), "result_too_large")
