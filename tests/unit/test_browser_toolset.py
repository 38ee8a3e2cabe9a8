"""Anthropic's browser toolset, without X: the pure mapping (vision.converters.anthropic_browser) and
the driver (vision.vendors.browser_toolset) over a stand-in page layer, each tool_result checked against the
anthropic SDK's own param types."""

from __future__ import annotations

import pytest
from anthropic.types.beta import BetaBrowserStateBlockParam, BetaToolResultBlockParam
from pydantic import TypeAdapter

from desktop.actions import Click, Key, Move, Scroll, Type
from desktop.errors import OperatorInControl
from desktop.models import Tab
from tests.fakes.desktop import FakeDesktop
from tests.fakes.services import FakeDesktops, FakePages
from vision import coords
from vision.converters import anthropic as computer_tool
from vision.converters import anthropic_browser as browser
from vision.models import AnthropicBrowserRequest
from vision.vendors.browser_toolset import BrowserToolsetService, request_problems

RESULT = TypeAdapter(BetaToolResultBlockParam)
STATE = TypeAdapter(BetaBrowserStateBlockParam)
DISPLAY = coords.pixels(1920, 1080)

SNAPSHOT = """- generic [ref=e1]:
  - heading "Shop" [level=1] [ref=e2]
  - search [ref=e3]:
    - searchbox "Search" [ref=e4]
    - button "Go" [ref=e5] [cursor=pointer]
  - list [ref=e6]:
    - listitem [ref=e7]:
      - link "Add to cart" [ref=e8] [cursor=pointer]
  - iframe [ref=e9]:
    - button "Inside" [ref=f1e2]"""


# --- refs and the snapshot -----------------------------------------------------------------------


@pytest.mark.parametrize("page_ref, toolset_ref", [("e12", "ref_12"), ("e1", "ref_1"), ("f1e12", "ref_f1e12")])
def test_refs_round_trip(page_ref, toolset_ref):
    assert browser.to_toolset_ref(page_ref) == toolset_ref
    assert browser.to_page_ref(toolset_ref) == page_ref


@pytest.mark.parametrize("bad", ["12", "e12", "ref_", "ref_x", "ref_12; drop", "", "ref_f1"])
def test_a_ref_read_page_never_gave_is_refused(bad):
    with pytest.raises(browser.TargetError, match="ref_12"):
        browser.to_page_ref(bad)


def test_read_page_spells_refs_as_the_toolset_does():
    text = browser.read_page_text(SNAPSHOT)
    assert '- searchbox "Search" [ref_4]' in text and "[ref_f1e2]" in text and "ref=" not in text


def test_read_page_subtree_depth_and_interactive_filter():
    sub = browser.read_page_text(SNAPSHOT, ref="ref_3")
    assert sub.splitlines() == ["  - search [ref_3]:", '    - searchbox "Search" [ref_4]',
                                '    - button "Go" [ref_5] [cursor=pointer]']
    shallow = browser.read_page_text(SNAPSHOT, depth=2)
    assert "[ref_3]" in shallow and "[ref_4]" not in shallow
    interactive = browser.read_page_text(SNAPSHOT, filter="interactive").splitlines()
    assert interactive == ['- searchbox "Search" [ref_4]', '- button "Go" [ref_5] [cursor=pointer]',
                           '- link "Add to cart" [ref_8] [cursor=pointer]', '- button "Inside" [ref_f1e2]']
    with pytest.raises(browser.TargetError, match="ref_99"):
        browser.read_page_text(SNAPSHOT, ref="ref_99")


def test_read_page_is_cut_with_advice():
    text = browser.read_page_text(SNAPSHOT, limit=40)
    assert len(text.split("\n[cut")[0]) == 40 and "narrow it with ref or a smaller depth" in text


def test_find_ranks_lines_by_shared_words():
    assert browser.find_matches(SNAPSHOT, "add to cart button")[0] == 'link "Add to cart" [ref_8] [cursor=pointer]'
    assert browser.find_matches(SNAPSHOT, "search bar")[0].startswith("search [ref_3]")
    assert browser.find_matches(SNAPSHOT, "nothing like it") == []


# --- viewport pixels -----------------------------------------------------------------------------


def test_viewport_points_land_on_the_display():
    view = browser.Viewport(x=0, y=87, width=1920, height=993)
    width, height = view.shot_size
    assert (width, height) == coords.anthropic_size(1920, 993) and width < 1920
    assert view.to_display(0, 0) == (0, 87)
    # the screenshot's last pixel is the viewport's last one
    assert view.to_display(width - 1, height - 1) == (1919, 87 + 992)
    # every screenshot pixel maps within half a display pixel of its scaled centre
    for x, y in [(100, 100), (width // 2, height // 2), (width - 10, 5)]:
        dx, dy = view.to_display(x, y)
        assert abs(dx - (x + 0.5) * 1920 / width) <= 1 and abs(dy - 87 - (y + 0.5) * 993 / height) <= 1
    with pytest.raises(browser.TargetError, match="outside"):
        view.to_display(width, 0)
    with pytest.raises(browser.TargetError, match="two numbers"):
        view.to_display("1", 2)


def test_a_small_viewport_is_not_scaled():
    view = browser.Viewport(x=10, y=100, width=800, height=600)
    assert view.shot_size == (800, 600) and view.scale == 1
    assert view.to_display(0, 0) == (10, 100) and view.to_display(799, 599) == (809, 699)
    assert view.region_to_display([0, 0, 400, 300]) == (10, 100, 410, 400)
    with pytest.raises(browser.TargetError, match="x0 < x1"):
        view.region_to_display([400, 0, 400, 300])


def test_navigate_url_defaults_to_https():
    assert browser.navigate_url("example.com/a") == "https://example.com/a"
    assert browser.navigate_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000/"
    assert browser.navigate_url("back") == "back"


@pytest.mark.parametrize("name, input, point, expected", [
    ("left_click", {"modifiers": "ctrl+shift"}, (5, 6), Click(x=5, y=6, modifiers=["ctrl", "shift"])),
    ("right_click", {}, (5, 6), Click(x=5, y=6, button="right")),
    ("hover", {}, (7, 8), Move(x=7, y=8)),
    ("scroll", {"scroll_direction": "down", "scroll_amount": 2}, (1, 2), Scroll(x=1, y=2, direction="down", amount=2)),
    ("type", {"text": "hi"}, None, Type(text="hi")),
    ("key", {"text": "ctrl+a BackSpace", "repeat": 2}, None, Key(keys=["ctrl+a", "BackSpace"] * 2)),
])
def test_members_become_the_computer_tool_s_actions(name, input, point, expected):
    action, args = browser.computer_input(name, input, point)
    assert computer_tool.to_actions(action, args, DISPLAY) == [expected]


def test_request_problems_are_all_listed():
    request = AnthropicBrowserRequest(
        tool_uses=[{"type": "text", "id": "a", "name": "navigate", "input": {}},
                   {"id": "a", "name": "fly", "input": [], "toolset_name": "computer"}],
        configs={"teleport": {"enabled": True}, "read_console": {"enabled": "yes"}, "find": {"colour": 1}})
    problems = request_problems(request)
    assert problems == [
        "tool_uses[0].type: must be \"tool_use\", got 'text'",
        "tool_uses[1].name: 'fly' is no member of browser_toolset_20260801",
        "tool_uses[1].toolset_name: must be \"browser\", got 'computer'",
        "tool_uses[1].input: must be an object",
        "tool_uses: ids must be unique (a repeated)",
        "configs.teleport: no member of browser_toolset_20260801",
        "configs.read_console: enabled and defer_loading are true or false",
        "configs.find: takes only enabled and defer_loading"]


# --- the driver over a stand-in page layer --------------------------------------------------------


def shop() -> FakePages:
    """A shop's page: its snapshot and its text; a navigation lands, and meanwhile the page opens a
    popup, a download finishes and a confirm dialog is dismissed."""
    pages = FakePages()
    pages.contents = {"accessibility": SNAPSHOT, "text": "Shop"}

    def navigated(how, url, timeout_ms):
        pages.tabs_[0] = Tab(id="t1", url=url, title="there", active=True)
        pages.tabs_.append(Tab(id="t2", url="http://127.0.0.1/pop", title="pop", active=False))
        pages.downloads_.append({"seq": 1, "name": "r.txt", "size": 12, "url": "http://127.0.0.1/r.txt",
                                 "failure": None})
        pages.dialogs_.append({"seq": 1, "type": "confirm", "message": "sure?", "handled": "dismissed"})
        return {"status": 200, "url": url}

    pages.navigate_does = navigated
    return pages


def desktops_of(pages: FakePages, *, blocked_host: str | None = None, taken_over: bool = False) -> FakeDesktops:
    desktops = FakeDesktops(pages, FakeDesktop("s"))
    desktops.blocked_host, desktops.taken_over = blocked_host, taken_over
    return desktops


def run(service, *blocks, configs=None):
    uses = [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": input, "toolset_name": "browser"}
            for i, (name, input) in enumerate(blocks)]
    results = service.run("s", AnthropicBrowserRequest(tool_uses=uses, configs=configs)).tool_results
    for result in results:
        RESULT.validate_python(result)  # the SDK's own shape, strictly
        assert result["toolset_name"] == "browser"
    return results


def test_navigate_reports_the_state_and_what_changed():
    pages = shop()
    service = BrowserToolsetService(desktops_of(pages))
    [result] = run(service, ("navigate", {"url": "127.0.0.1:8000/shop"}))
    assert pages.calls == [("navigate", "goto", "https://127.0.0.1:8000/shop")]
    texts = [b["text"] for b in result["content"] if b["type"] == "text"]
    assert texts == ["Navigated to https://127.0.0.1:8000/shop — there (HTTP 200)",
                     'A confirm dialog "sure?" was dismissed.']
    state = result["content"][-1]
    STATE.validate_python(state)
    assert state["tabs"] == [{"tab_id": "t1", "title": "there", "url": "https://127.0.0.1:8000/shop", "active": True},
                             {"tab_id": "t2", "title": "pop", "url": "http://127.0.0.1/pop", "active": False}]
    assert state["state_changes"] == [
        {"type": "tab_opened", "tab_id": "t2"},
        {"type": "download_completed", "download_id": "download_1", "url": "http://127.0.0.1/r.txt", "size_bytes": 12}]
    # reported once: the next call has nothing new
    [again] = run(service, ("list_tabs", {}))
    assert again["content"][-1]["type"] == "browser_state" and "state_changes" not in again["content"][-1]


def test_a_refused_navigation_is_an_error_the_model_reads():
    pages = shop()
    service = BrowserToolsetService(desktops_of(pages, blocked_host="blocked.test"))
    [result] = run(service, ("navigate", {"url": "http://blocked.test/"}))
    assert result["is_error"] is True and pages.calls == []
    assert "blocked.test" in result["content"][0]["text"]


def test_a_click_by_ref_is_the_page_layer_s_click_and_a_point_is_real_input():
    pages = shop()
    desktops = desktops_of(pages)
    service = BrowserToolsetService(desktops)
    first, second, third = run(service, ("left_click", {"target": {"type": "ref", "ref": "ref_8"}}),
                               ("double_click", {"target": {"type": "coordinate", "x": 0, "y": 0}}),
                               ("left_click", {"target": {"type": "ref", "ref": "nope"}}))
    assert pages.calls == [("click", "e8", "left", 1)]
    assert first["content"][0] == {"type": "text", "text": "Clicked."}
    assert second["content"][0] == {"type": "text", "text": "Double-clicked."}
    assert [a.model_dump() for a in desktops.desk.performed] == [
        {"action": "double_click", "x": 0, "y": 87, "modifiers": [], "button": "left"}]
    assert third["is_error"] is True and "ref_12" in third["content"][0]["text"]


def test_opt_in_members_need_the_configs_and_the_server():
    service = BrowserToolsetService(desktops_of(shop()))
    [off] = run(service, ("javascript_exec", {"text": "1 + 1"}))
    assert off["is_error"] is True
    [not_here] = run(service, ("javascript_exec", {"text": "1 + 1"}), configs={"javascript_exec": {"enabled": True}})
    assert not_here["is_error"] is True and "--allow-evaluate" in not_here["content"][0]["text"]


def test_read_page_and_find_answer_text_with_refs():
    service = BrowserToolsetService(desktops_of(shop()))
    read, found = run(service, ("read_page", {"filter": "interactive"}), ("find", {"query": "go button"}))
    assert read["content"][0]["text"].startswith('- searchbox "Search" [ref_4]')
    assert found["content"][0]["text"].splitlines()[0] == 'button "Go" [ref_5] [cursor=pointer]'


def test_a_person_in_control_is_the_request_s_error_and_nothing_runs():
    pages = shop()
    service = BrowserToolsetService(desktops_of(pages, taken_over=True))
    with pytest.raises(OperatorInControl):
        run(service, ("navigate", {"url": "http://127.0.0.1/"}))
    assert pages.calls == []


def test_a_browser_that_cannot_report_its_state_is_the_request_s_error():
    from desktop.errors import PageUnavailable

    pages = shop()
    service = BrowserToolsetService(desktops_of(pages))
    run(service, ("list_tabs", {}))

    def restarting(sid):
        raise PageUnavailable("the browser of session s is restarting; try again in 3 s", retry_after=3)

    pages.tabs = restarting
    with pytest.raises(PageUnavailable):
        run(service, ("get_page_text", {}))
