"""docs/clients.md's code blocks, run as written against the live API on a real desktop, with the
real openai-agents and anthropic SDKs talking to local fake model servers (tests/fakes).

The SDKs' own loops run end to end (Runner with a ComputerTool; messages.create with the computer
tool); the effects are read off the test page's DOM events: a click declared at 1280x720 lands
within a pixel, CTRL+A as one keypress selects the field (typing then replaces it), a 240 px
scroll is two wheel notches. The blocks name the session "default", which this module starts and
deletes.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from desktop.errors import InvalidAction
from tests.fakes import anthropic_fake as an
from tests.fakes import openai_fake as oa
from tests.fakes.server import FakeServer
from vision.client import AnthropicToolRunner, AsyncGlassdeskClient, GlassdeskClient, SyncGlassdeskComputer

pytestmark = pytest.mark.x11

DOC = Path(__file__).parents[2] / "docs" / "clients.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
FIELD = (300, 280)  # the test page's text field, CSS px


def run_block(index: int) -> None:
    exec(compile(BLOCKS[index], f"docs/clients.md block {index + 1}", "exec"), {"__name__": "__main__"})


@pytest.fixture(scope="module")
def gd(vision_api):
    with GlassdeskClient(str(vision_api.base_url)) as client:
        yield client


@pytest.fixture(scope="module")
def default_desk(gd, page_server):
    """The session "default" the blocks use, with the test page loaded, and where the page's
    (0, 0) is on its display (clicked and measured)."""
    desk = gd.session("default")
    page_server.clear()
    desk.open(url=page_server.url)  # starts the session: first use
    page_server.wait_for(lambda e: e.get("type") == "loaded", timeout=60)
    desk.click(960, 700)
    click = page_server.wait_for(lambda e: e.get("type") == "click")
    yield desk, (click["screenX"] - click["clientX"], click["screenY"] - click["clientY"])
    desk.delete()


@pytest.fixture
def test_page(default_desk, page_server):
    desk, origin = default_desk
    page_server.clear()
    desk.open(url=page_server.url)
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    page_server.clear()
    return page_server, origin


@pytest.fixture
def fake(monkeypatch, vision_api):
    import agents

    agents.set_tracing_disabled(True)  # nothing may reach api.openai.com
    with FakeServer() as server:
        monkeypatch.setenv("GLASSDESK_URL", str(vision_api.base_url))
        monkeypatch.delenv("GLASSDESK_TOKEN", raising=False)
        monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-fake")
        yield server


def display_point(origin, css: tuple[int, int]) -> tuple[int, int]:
    return origin[0] + css[0], origin[1] + css[1]


def declared(point: tuple[int, int], size: tuple[int, int]) -> tuple[int, int]:
    return round(point[0] * size[0] / SCREEN_WIDTH), round(point[1] * size[1] / SCREEN_HEIGHT)


def field_events(page, value: str) -> dict:
    return page.wait_for(lambda e: e["type"] == "input" and e["field"] == value)


def wheel_turned(page, desk, at_least: float) -> float:
    """How far the wheel turned since the log was cleared: the sum of the wheel events' deltaY
    (Chromium merges wheel events when the page is busy, never their distance), once it is at
    least ``at_least``, and after a sentinel click has arrived, so that a notch too many would
    have too. Events travel by concurrent fetches: waited for, never timed."""
    def turned() -> float:
        return sum(e["deltaY"] for e in list(page.events) if e["type"] == "wheel")

    page.wait_for(lambda _: turned() >= at_least)
    clicks = len([e for e in page.events if e["type"] == "click"])
    desk.click(1800, 500)  # on nothing
    page.wait_for(lambda _: len([e for e in page.events if e["type"] == "click"]) > clicks)
    page.last("click")  # and the stragglers of its burst
    return turned()


def test_the_plain_client_block(test_page, fake, capsys):
    page, _ = test_page
    run_block(0)
    click = page.wait_for(lambda e: e["type"] == "click")
    assert (click["screenX"], click["screenY"]) == (960, 540)
    def letters() -> list[str]:  # in page order: events travel by concurrent fetches
        keys = sorted((e for e in list(page.events) if e["type"] == "keydown"), key=lambda e: e["t"])
        return [e["key"] for e in keys if e["key"] in "helo"]

    page.wait_for(lambda _: len(letters()) >= 5)
    assert letters()[:5] == list("hello")
    out = capsys.readouterr().out
    assert "ActResult" in out and "done" in out and "session_not_found 404" in out


def test_the_openai_agents_block_drives_the_desktop_through_the_sdks_own_loop(default_desk, test_page, fake, capsys):
    page, origin = test_page
    desk, _ = default_desk
    size = (1280, 720)
    fx, fy = declared(display_point(origin, FIELD), size)

    def call(action):
        return lambda request: oa.ok(oa.computer_call(action))

    fake.queue(call({"type": "click", "button": "left", "x": fx, "y": fy}),
               call({"type": "type", "text": "hello world"}),
               call({"type": "keypress", "keys": ["CTRL", "A"]}),
               call({"type": "type", "text": "X"}),
               call({"type": "scroll", "x": 640, "y": 500, "scroll_x": 0, "scroll_y": 240}),
               lambda request: oa.ok(oa.message("The field now says X.")))
    run_block(1)
    assert "The field now says X." in capsys.readouterr().out

    click = page.wait_for(lambda e: e["type"] == "click")
    assert abs(click["screenX"] - fx * 1.5) <= 1 and abs(click["screenY"] - fy * 1.5) <= 1
    field_events(page, "hello world")
    chord = page.wait_for(lambda e: e["type"] == "keydown" and e["key"] == "a")
    assert chord["ctrlKey"], "CTRL+A was pressed as one chord"
    field_events(page, "X")  # all of it was selected, so typing replaced it
    assert not [e for e in page.events if e["type"] == "input" and "A" in e["field"]]
    scrolled = wheel_turned(page, desk, at_least=1)
    page.clear()
    desk.scroll(960, 750, direction="down", amount=1)  # one notch through the desktop's own scroll, to compare
    assert scrolled == 2 * wheel_turned(page, desk, at_least=1) and scrolled > 0

    first, *later = [r for r in fake.requests if r.path == "/v1/responses"]
    [tool] = first.body["tools"]
    assert tool == {"type": "computer_use_preview", "environment": "ubuntu", "display_width": 1280,
                    "display_height": 720}
    outputs = [oa.input_items(r, "computer_call_output")[-1] for r in later]
    assert len(outputs) == 5
    assert all(oa.png_size(o["output"]["image_url"]) == size for o in outputs)


def test_the_anthropic_block_runs_tool_use_blocks_of_a_real_sdk_message(test_page, fake, capsys):
    page, origin = test_page
    size = (1429, 804)
    fx, fy = declared(display_point(origin, FIELD), size)
    fake.queue(an.reply(an.text("Clicking the field."), an.tool_use({"action": "left_click", "coordinate": [fx, fy]})),
               an.reply(an.tool_use({"action": "type", "text": "claude"})),
               an.reply(an.tool_use({"action": "key", "text": "ctrl+a"}), an.tool_use({"action": "type", "text": "Y"})),
               an.reply(an.tool_use({"action": "left_click", "coordinate": [5000, 10]})),  # off the declared screen
               an.end_turn("The field now says Y."))
    run_block(2)
    assert "The field now says Y." in capsys.readouterr().out

    click = page.wait_for(lambda e: e["type"] == "click")
    assert abs(click["screenX"] - fx * SCREEN_WIDTH / size[0]) <= 1
    assert abs(click["screenY"] - fy * SCREEN_HEIGHT / size[1]) <= 1
    field_events(page, "claude")
    field_events(page, "Y")
    requests = [r for r in fake.requests if r.path == "/v1/messages"]
    assert requests[0].body["tools"] == [{"type": "computer_20251124", "name": "computer", "display_width_px": 1429,
                                          "display_height_px": 804, "enable_zoom": True}]
    assert requests[0].headers["anthropic-beta"] == "computer-use-2025-11-24"
    two_calls = an.tool_results(requests[3].body)
    assert [r["tool_use_id"] for r in two_calls] == [b["id"] for b in requests[3].body["messages"][-2]["content"]
                                                     if b["type"] == "tool_use"]
    assert all(an.png_size(an.last_image({"messages": [{"content": [r]}]})) == size for r in two_calls)
    [refused] = an.tool_results(requests[4].body)
    assert refused["is_error"] is True and an.png_size(refused["content"][-1]) == size
    assert "5000" in refused["content"][0]["text"]


def test_the_sync_computer_runs_a_ga_batch_and_raises_what_the_model_got_wrong(test_page, fake, gd):
    from agents import Agent, ComputerTool, Runner

    page, origin = test_page
    fx, fy = display_point(origin, FIELD)
    batch = [{"type": "click", "button": "left", "x": fx, "y": fy}, {"type": "type", "text": "batch"},
             {"type": "keypress", "keys": ["CTRL", "A"]}, {"type": "type", "text": "Z"}]
    fake.queue(lambda r: oa.ok(oa.computer_call(actions=batch), model="gpt-5.5"),
               lambda r: oa.ok(oa.computer_call({"type": "click", "button": "left", "x": 5000, "y": 1}),
                               model="gpt-5.5"))
    computer = SyncGlassdeskComputer(gd, "default")
    agent = Agent(name="operator", model="gpt-5.5", tools=[ComputerTool(computer=computer)])
    with pytest.raises(InvalidAction) as refused:
        Runner.run_sync(agent, "Replace the text with Z", max_turns=5)
    assert "5000" in refused.value.message
    field_events(page, "batch")
    field_events(page, "Z")
    assert fake.requests[0].body["tools"] == [{"type": "computer"}]


def test_the_async_runner_answers_a_screenshot_at_the_declared_size(default_desk, vision_api):
    message = an.message(an.tool_use({"action": "screenshot"}, id="toolu_1"),
                         an.tool_use({"action": "zoom"}, name="other"))

    async def scenario():
        async with AsyncGlassdeskClient(str(vision_api.base_url)) as client:
            return await AnthropicToolRunner(client, "default", display=(1280, 720)).run(message)

    [result] = asyncio.run(scenario())  # the other tool's call is the caller's to run
    assert result["tool_use_id"] == "toolu_1" and not result.get("is_error")
    assert an.png_size(result["content"][-1]) == (1280, 720)
