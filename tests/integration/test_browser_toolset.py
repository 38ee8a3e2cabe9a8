"""Anthropic's browser toolset through the real API on the real desktop, against the page layer's
local site (tests/fakes/site.py). What happened is read from the site's record of its pages'
events; each tool_result is checked against the anthropic SDK's own param type."""

from __future__ import annotations

import base64
import io
import re
import time

import pytest
from anthropic.types.beta import BetaToolResultBlockParam
from PIL import Image
from pydantic import TypeAdapter

from tests.answers import error, ok

pytestmark = pytest.mark.x11

S = "/api/v1/sessions/itest"
BROWSER = f"{S}/computer/anthropic-browser"
ANTHROPIC_KEY = "sk-ant-test-loop-0123456789abcdef"  # the fake Messages API takes any key
RESULT = TypeAdapter(BetaToolResultBlockParam)


@pytest.fixture(autouse=True)
def one_quiet_tab(api, desk):
    """Each test starts and ends with one tab, no dialog and the default network policy."""
    def tidy():
        if ok(api.get(f"{S}/page"))["dialog"] is not None:
            ok(api.post(f"{S}/page/dialog", json={"accept": False}))
        tabs = ok(api.get(f"{S}/page/tabs"))
        for tab in tabs[1:]:
            ok(api.delete(f"{S}/page/tabs/{tab['id']}"))
        if len(tabs) > 1:
            ok(api.post(f"{S}/page/tabs/{tabs[0]['id']}/activate"))
        ok(api.put(f"{S}/network-policy", json={"allow": [], "deny": []}))
    tidy()
    yield
    tidy()


def call(api, *members, configs=None) -> list[dict]:
    uses = [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": input, "toolset_name": "browser"}
            for i, (name, input) in enumerate(members)]
    body = {"tool_uses": uses, **({"configs": configs} if configs else {})}
    results = ok(api.post(BROWSER, json=body))["tool_results"]
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses]
    for result in results:
        RESULT.validate_python(result)
        assert result["toolset_name"] == "browser"
    return results


def texts(result: dict) -> list[str]:
    return [b["text"] for b in result["content"] if b["type"] == "text"]


def state(result: dict) -> dict:
    block = result["content"][-1]
    assert block["type"] == "browser_state", result
    return block


def ref_of(snapshot: str, pattern: str) -> str:
    found = re.search(pattern + r".*?\[(ref_\w+)\]", snapshot)
    assert found, snapshot
    return found.group(1)


def test_navigate_read_page_click_by_ref_and_form_input(api, site):
    site.clear()
    [nav] = call(api, ("navigate", {"url": site.url("/form")}))
    assert texts(nav)[0].startswith(f"Navigated to {site.url('/form')} — form (HTTP 200)")
    [tab] = [t for t in state(nav)["tabs"] if t["active"]]
    assert tab["url"] == site.url("/form") and tab["title"] == "form"

    [read] = call(api, ("read_page", {"filter": "interactive"}))
    snapshot = texts(read)[0]
    qty, gift, colour = (ref_of(snapshot, 'textbox "Quantity"'), ref_of(snapshot, 'checkbox "Gift wrap"'),
                         ref_of(snapshot, 'combobox "Colour"'))

    filled, checked, chosen = call(api, ("form_input", {"target": {"type": "ref", "ref": qty}, "value": 12}),
                                   ("form_input", {"target": {"type": "ref", "ref": gift}, "value": True}),
                                   ("form_input", {"target": {"type": "ref", "ref": colour}, "value": "Blue"}))
    assert texts(filled) == [f"Set the value of {qty}."]
    # real typing into the field: the page saw the keys
    assert site.wait_for(lambda e: e.get("type") == "key" and e.get("key") == "2")
    assert site.wait_for(lambda e: e.get("type") == "gift")["checked"] is True
    assert texts(chosen) == [f"Set the value of {colour}."], (chosen, snapshot)
    assert site.wait_for(lambda e: e.get("type") == "change")["value"] == "b"
    [text] = call(api, ("get_page_text", {}))
    assert "chosen b" in texts(text)[0]


def test_click_by_ref_and_by_viewport_pixel_change_the_page(api, site):
    call(api, ("navigate", {"url": site.url("/")}))
    [read] = call(api, ("read_page", {}))
    form_link = ref_of(texts(read)[0], 'link "form"')
    [clicked] = call(api, ("left_click", {"target": {"type": "ref", "ref": form_link}}))
    assert texts(clicked) == ["Clicked."]
    assert [t for t in state(clicked)["tabs"] if t["active"]][0]["url"] == site.url("/form")

    # the screenshot is the viewport in the image budget; a pixel of it is where a click lands: the
    # link at the page's (100, 100) opens a tab, which the state reports
    call(api, ("navigate", {"url": site.url("/newtab")}))
    [shot] = call(api, ("screenshot", {}))
    picture = Image.open(io.BytesIO(base64.b64decode(shot["content"][0]["source"]["data"])))
    assert picture.width * picture.height <= 1_150_000 and picture.width <= 1568
    scale = picture.width / 1920  # the maximised window's viewport is the display's width
    [opened] = call(api, ("left_click", {"target": {"type": "coordinate", "x": round(112 * scale),
                                                     "y": round(108 * scale)}}))
    assert texts(opened) == ["Clicked."]
    # The new tab is reported by the call that opened it, or (Chromium still creating it when the
    # click settled) by the next one: once either way.
    # (Chromium opens it a moment after the click, under load a while after: polled, not timed.)
    reports = [state(opened)]
    deadline = time.monotonic() + 15
    while len(reports[-1]["tabs"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        reports.append(state(call(api, ("list_tabs", {}))[0]))
    tabs = reports[-1]["tabs"]
    [active] = [t for t in tabs if t["active"]]
    assert len(tabs) == 2 and active["url"] == site.url("/form")
    changes = [change for report in reports for change in report.get("state_changes", [])]
    assert changes == [{"type": "tab_opened", "tab_id": active["tab_id"]}]


def test_tabs_new_switch_close(api, site):
    call(api, ("navigate", {"url": site.url("/")}))
    first = [t for t in state(call(api, ("list_tabs", {}))[0])["tabs"] if t["active"]][0]["tab_id"]
    [opened] = call(api, ("new_tab", {}))
    tabs = state(opened)["tabs"]
    new = [t for t in tabs if t["active"]][0]["tab_id"]
    assert new != first and len(tabs) == 2
    assert state(opened).get("state_changes") == [{"type": "tab_opened", "tab_id": new}]
    [switched] = call(api, ("switch_tab", {"tab_id": first}))
    assert [t["tab_id"] for t in state(switched)["tabs"] if t["active"]] == [first]
    [closed] = call(api, ("close_tab", {"tab_id": new}))
    assert [t["tab_id"] for t in state(closed)["tabs"]] == [first]
    [gone] = call(api, ("switch_tab", {"tab_id": new}))
    assert gone["is_error"] is True


def test_a_refused_navigation_is_reported_and_nothing_loads(api, site):
    ok(api.put(f"{S}/network-policy", json={"deny": ["blocked.test"]}))
    call(api, ("navigate", {"url": site.url("/")}))
    [refused] = call(api, ("navigate", {"url": "http://blocked.test/"}))
    assert refused["is_error"] is True
    assert "network policy blocks blocked.test" in texts(refused)[0]
    [tabs] = call(api, ("list_tabs", {}))
    assert [t["url"] for t in state(tabs)["tabs"] if t["active"]] == [site.url("/")]


def test_javascript_exec_is_refused_while_evaluate_is_off(api, site):
    call(api, ("navigate", {"url": site.url("/")}))
    [not_enabled] = call(api, ("javascript_exec", {"text": "document.title"}))
    assert not_enabled["is_error"] is True
    [server_off] = call(api, ("javascript_exec", {"text": "document.title"}),
                        configs={"javascript_exec": {"enabled": True}})
    assert server_off["is_error"] is True and "--allow-evaluate" in texts(server_off)[0]


def test_file_upload_of_a_staged_file_and_read_console_when_enabled(api, site):
    call(api, ("navigate", {"url": site.url("/upload")}))
    [read] = call(api, ("find", {"query": "choose file button"}))
    file_input = re.search(r"\[(ref_\w+)\]", texts(read)[0]).group(1)
    upload = {"target": {"type": "ref", "ref": file_input}, "document_ids": ["doc_1"]}
    [off] = call(api, ("file_upload", upload))
    assert off["is_error"] is True  # not enabled in the configs: the SDK's refusal
    site.clear()
    body = {"tool_uses": [{"type": "tool_use", "id": "u1", "name": "file_upload", "input": upload,
                           "toolset_name": "browser"},
                          {"type": "tool_use", "id": "u2", "name": "file_upload",
                           "input": {**upload, "paths": ["/etc/passwd"], "document_ids": None},
                           "toolset_name": "browser"}],
            "configs": {"file_upload": {"enabled": True}},
            "files": {"doc_1": {"name": "notes.txt", "content_base64": base64.b64encode(b"staged").decode()}}}
    uploaded, refused = ok(api.post(BROWSER, json=body))["tool_results"]
    assert texts(uploaded) == ["Uploaded."], uploaded
    assert site.wait_for(lambda e: e.get("type") == "files")["files"] == [
        {"name": "notes.txt", "size": 6, "text": "staged"}]
    assert refused["is_error"] is True  # a path of the server's disk is never handed over

    call(api, ("navigate", {"url": site.url("/console")}))
    [console] = call(api, ("read_console", {}), configs={"read_console": {"enabled": True}})
    lines = texts(console)[0]
    assert "[error] site: console error number 1" in lines and "Uncaught Error: site: uncaught boom" in lines
    [again] = call(api, ("read_console", {}), configs={"read_console": {"enabled": True}})
    assert texts(again) == ["(empty)"]  # read since the last read


def test_bad_requests_list_every_problem(api):
    message = error(api.post(BROWSER, json={"tool_uses": [{"id": "a", "name": "fly", "input": {}},
                                                          {"type": "tool_use", "name": "navigate"}],
                                            "configs": {"teleport": {"enabled": True}}}), 422, "invalid_request")
    assert "'fly' is no member" in message and "tool_uses[1].id" in message and "configs.teleport" in message
    error(api.post(BROWSER, json={"tool_uses": []}), 422, "invalid_request")
    error(api.post("/api/v1/sessions/nosuch/computer/anthropic-browser",
                   json={"tool_uses": [{"id": "a", "name": "list_tabs", "input": {}}]}), 404, "session_not_found")


# --- the vision loop offering the toolset to Claude (the anthropic SDK against a fake Messages API)


@pytest.fixture
def claude(services):
    """A fake Messages API configured as anthropic/claude-opus-5-5, the config restored after."""
    from tests.fakes.server import FakeModel, FakeServer

    saved = {name: dict(options) for name, options in services.config.models.items()}
    with FakeServer() as server:
        services.config.models["anthropic/claude-opus-5-5"] = {"base_url": server.url, "api_key": ANTHROPIC_KEY,
                                                               "timeout": 10}
        yield FakeModel(server)
    services.config.models.clear()
    services.config.models.update(saved)


@pytest.mark.usefixtures("no_paused_run")
def test_a_run_offers_the_toolset_and_its_members_run_on_the_browser(vision_api, site, claude):
    from tests.fakes import anthropic_fake as af

    def use(id: str, name: str, input: dict) -> dict:
        return {"type": "tool_use", "id": id, "name": name, "input": input, "toolset_name": "browser"}

    seen = {}

    def first(request):
        tools = request.body["tools"]
        assert [t["type"] for t in tools] == ["computer_toolset_20260801", "browser_toolset_20260801"], tools
        assert "anthropic-beta" not in request.headers
        return af.reply(use("b1", "navigate", {"url": site.url("/form")}),
                        use("b2", "read_page", {"filter": "interactive"}))

    def second(request):
        navigated, read = af.tool_results(request.body)
        for result in (navigated, read):
            RESULT.validate_python(result)
            assert result["toolset_name"] == "browser" and not result.get("is_error"), result
        assert texts(navigated)[0].startswith(f"Navigated to {site.url('/form')}")
        assert state(navigated)["tabs"][0]["url"] == site.url("/form")
        seen["qty"] = ref_of(texts(read)[0], 'textbox "Quantity"')
        assert request.body["messages"][-1]["content"][-1]["type"] == "image"  # the screen, after the results
        return af.reply(use("b3", "form_input", {"target": {"type": "ref", "ref": seen["qty"]}, "value": "7"}))

    def third(request):
        (filled,) = af.tool_results(request.body)
        assert texts(filled) == [f"Set the value of {seen['qty']}."], filled
        return af.end_turn("filled")

    site.clear()
    claude.turns(first, second, third)
    r = vision_api.post(f"{S}/vision/act", json={"instruction": "fill the quantity", "tools": ["computer", "browser"],
                                                 "model": "anthropic/claude-opus-5-5", "max_steps": 5})
    assert r.status_code == 200, r.text
    assert not claude.problems, claude.problems
    assert r.json()["status"] == "done", r.json()
    assert site.wait_for(lambda e: e.get("type") == "key" and e.get("key") == "7")


def test_only_anthropic_models_take_the_browser_toolset(vision_api):
    message = error(vision_api.post(f"{S}/vision/act", json={"instruction": "x", "model": "scripted",
                                                             "tools": ["browser"]}), 422, "invalid_request")
    assert "only anthropic/ models" in message
