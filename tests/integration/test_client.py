"""The Python client (vision.client), blocking and async, against the real API on a real desktop:
effects are read off the test page's DOM events, not off the client's own answers."""

from __future__ import annotations

import asyncio
import io
import time

import pytest
from PIL import Image as PILImage

from desktop.actions import Click, Key
from desktop.errors import InvalidAction, SessionNotFound, Unauthorized
from desktop.models import ActionResponse, SessionInfo
from desktop.session.stack import free_port
from tests.conftest import LiveServer
from tests.fakes.testpage import at
from vision.client import ApiError, AsyncGlassdeskClient, GlassdeskClient
from vision.models import ActResult, StepSummary
from vision.models.qa import PageLoadResult
from vision.trace.records import Trace

pytestmark = pytest.mark.x11


@pytest.fixture
def gd(vision_api):
    with GlassdeskClient(str(vision_api.base_url)) as client:
        yield client


def test_primitives_act_on_the_page_as_typed_answers(gd, page, viewport):
    desk = gd.session("itest")
    info = desk.info()
    assert isinstance(info, SessionInfo) and info.id == "itest"
    assert desk.live_view().mode == "view"
    fx, fy = at(viewport, 300, 280)  # the text field
    answer = desk.click(fx, fy)
    assert isinstance(answer, ActionResponse) and answer.executed[0][0] == "xdotool"
    click = page.wait_for(lambda e: e["type"] == "click" and e["target"] == "field")
    assert (click["screenX"], click["screenY"]) == (fx, fy)
    desk.type("alpha beta")
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "alpha beta")
    desk.perform(Key(keys=["ctrl+a"]))  # a model instance, as the API defines it
    chord = page.wait_for(lambda e: e["type"] == "keydown" and e["key"] == "a" and e["ctrlKey"])
    assert chord["field"] == "alpha beta"
    desk.key(["BackSpace"])
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "")  # all of it was selected
    desk.move(fx + 5, fy + 3)
    assert desk.cursor().model_dump() == {"x": fx + 5, "y": fy + 3}
    with_shot = desk.perform(Click(x=fx, y=fy), screenshot=True)
    assert with_shot.screenshot and with_shot.page is not None


def test_screenshots_are_images_with_their_coordinate_note(gd, desk):
    full = gd.session("itest").screenshot()
    assert full.media_type == "image/png"
    assert PILImage.open(io.BytesIO(full.data)).size == (1920, 1080)
    part = gd.session("itest").screenshot(region=(100, 200, 500, 400), scale=0.5, format="jpeg", quality=70)
    assert part.media_type == "image/jpeg"
    assert PILImage.open(io.BytesIO(part.data)).size == (200, 100)
    assert part.coordinates and part.to_display(10, 20) == (120, 240)


def test_errors_are_the_servers_typed_errors_with_code_and_status(gd, page):
    with pytest.raises(SessionNotFound) as missing:
        gd.session("no-such-session").info()
    assert isinstance(missing.value, ApiError)
    assert (missing.value.code, missing.value.status) == ("session_not_found", 404)
    # Refused before sending, in the server's words: no event reaches the page.
    with pytest.raises(InvalidAction) as bad:
        gd.session("itest").click(5000, 10)
    assert bad.value.status is None and "x:" in bad.value.message
    with pytest.raises(ApiError) as unknown_key:  # only the server knows: sent, refused, typed
        gd.session("itest").key(["NoSuchKey"])
    assert unknown_key.value.code == "invalid_action"
    assert not [e for e in page.events if e["type"] in ("click", "keydown")]


def test_a_vision_run_streams_its_steps_then_its_result_and_leaves_a_trace(gd, page, viewport):
    fx, fy = at(viewport, 300, 280)
    script = [{"action": "click", "x": fx, "y": fy}, {"action": "type", "text": "streamed"},
              {"action": "done", "answer": "typed"}]
    events = list(gd.session("itest").act_stream("type it", model="scripted", script=script))
    assert [type(e) for e in events] == [StepSummary, StepSummary, StepSummary, ActResult]
    result = events[-1]
    assert result.status == "done" and result.answer == "typed"
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "streamed")
    trace = gd.trace(result.trace_id)
    assert isinstance(trace, Trace) and len(trace.steps) == 3
    assert gd.verify_trace(result.trace_id).ok
    assert gd.trace_image(result.trace_id, 1).media_type == "image/png"
    assert "type it" in gd.trace_report(result.trace_id)
    assert "<testsuite" in gd.trace_junit(result.trace_id)
    assert result.trace_id in [meta.trace_id for meta in gd.traces(limit=5)]
    # Endless: the bus's recent events (up to its 500) are replayed first, and this run's are among
    # them, oldest first, after whatever earlier tests did on the same session.
    events = gd.events(session_id="itest")
    assert any(e.get("trace_id") == result.trace_id for e, _ in zip(events, range(500)))
    events.close()


def test_the_page_layer_and_a_qa_verb(gd, page_server):
    desk = gd.session("itest")
    desk.page.navigate(page_server.url)
    filled = desk.page.fill("#email", value="me@example.com")
    assert filled.verified is True
    page_server.wait_for(lambda e: e["type"] == "input" and e["email"] == "me@example.com")
    state = desk.page.state()
    assert state.title == "glassdesk test page" and state.url == page_server.url
    assert "alpha bravo" in desk.page.content().content
    assert desk.page.screenshot().data[:8] == b"\x89PNG\r\n\x1a\n"
    loaded = desk.qa.verify_page_loads(url=page_server.url, expected_title="glassdesk test page")
    assert isinstance(loaded, PageLoadResult) and loaded.success, loaded.reason
    assert gd.qa_run(loaded.test_run_id).test_run_id == loaded.test_run_id
    assert gd.verify_qa_run(loaded.test_run_id).ok


def test_the_async_client_is_the_same_api_awaited(vision_api, page, viewport):
    fx, fy = at(viewport, 300, 280)

    async def scenario():
        async with AsyncGlassdeskClient(str(vision_api.base_url)) as gd:
            desk = gd.session("itest")
            assert (await desk.info()).id == "itest"
            await desk.click(fx, fy)
            await desk.type("async")
            with pytest.raises(SessionNotFound):
                await gd.session("no-such-session").info()
            script = [{"action": "key", "keys": ["ctrl+a"]}, {"action": "done", "answer": "ok"}]
            return [e async for e in desk.act_stream("select", model="scripted", script=script)]

    events = asyncio.run(scenario())
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "async")
    page.wait_for(lambda e: e["type"] == "keydown" and e["key"] == "a" and e["ctrlKey"])
    assert isinstance(events[-1], ActResult) and events[-1].status == "done"


def test_the_token_is_sent_and_without_it_the_answer_is_unauthorized(manager, desk):
    from vision.http.app import Settings, create_app

    port = free_port()
    with LiveServer(create_app(manager, Settings(token="s3cret-client-token", port=port)), port=port) as server:
        with GlassdeskClient(server.url, token="s3cret-client-token") as gd:
            assert "itest" in [s.id for s in gd.sessions()]
        with GlassdeskClient(server.url, token="") as gd, pytest.raises(Unauthorized) as refused:
            gd.sessions()
        assert (refused.value.code, refused.value.status) == ("unauthorized", 401)


def test_leaving_a_run_stream_early_cancels_the_run(gd, desk):
    script = [{"action": "wait", "duration_ms": 1000}] * 20 + [{"action": "done", "answer": "too late"}]
    stream = gd.session("itest").act_stream("wait a long time", model="scripted", script=script, max_steps=30)
    first = next(stream)
    assert isinstance(first, StepSummary) and first.index == 1
    stream.close()  # what leaving a for loop does to the generator
    trace_id = gd.traces(limit=1)[0].trace_id
    for _ in range(60):  # the run stops at its next step boundary
        meta = gd.trace(trace_id).meta
        if meta.status != "running":
            break
        time.sleep(0.5)
    assert meta.status == "cancelled" and len(gd.trace(trace_id).steps) < 21
