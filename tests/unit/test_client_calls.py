"""The client's pure layer (vision.client.calls, .errors): bodies, signatures, SSE, errors.

And the two transports over one in-memory server (httpx2.MockTransport): the same route method
sends the same request from both, so the async client is not a second copy to keep in step."""

from __future__ import annotations

import asyncio
import inspect
import json
import re

import httpx2
import pytest

from desktop.actions import INPUT_ACTIONS, Click
from desktop.errors import InvalidAction, InvalidRequest, SessionBusy, SessionNotFound
from vision.app.ops import catalogue
from vision.client import ApiError, AsyncGlassdeskClient, GlassdeskClient
from vision.client.calls import SseDecoder, act_event, body
from vision.client.errors import error_class, error_from_response
from vision.client.routes import SessionClient
from vision.models import ActResult, StepSummary


def test_a_body_sends_only_what_was_given_validated_by_the_apis_model():
    assert body(Click, None, {"x": 10, "y": 20}, "invalid_action") == {"x": 10, "y": 20}
    assert body(Click, Click(x=1, y=2, button="right"), {}, "invalid_action") == {"x": 1, "y": 2, "button": "right"}
    with pytest.raises(InvalidAction) as refused:
        body(Click, None, {"x": 1920, "y": 0}, "invalid_action")
    assert refused.value.code == "invalid_action" and refused.value.status is None
    assert refused.value.message.startswith("x: ")
    with pytest.raises(TypeError):
        body(Click, Click(x=1, y=2), {"x": 3}, "invalid_action")


def test_generated_primitives_take_the_models_fields_positionally_in_order():
    params = list(inspect.signature(SessionClient.click).parameters)
    assert params == ["self", "x", "y", "modifiers", "button", "screenshot"]
    assert list(inspect.signature(SessionClient.type).parameters)[1] == "text"


def test_an_error_answer_becomes_the_servers_typed_error():
    busy = error_from_response(409, {"retry-after": "3"},
                               b'{"error": {"code": "session_busy", "message": "a run drives it"}}')
    assert isinstance(busy, SessionBusy) and isinstance(busy, ApiError)
    assert (busy.code, busy.status, busy.retry_after, busy.message) == ("session_busy", 409, 3, "a run drives it")
    # Whole seconds, as the server's own errors hold them (a proxy's fraction is rounded up).
    assert type(busy.retry_after) is int
    assert error_from_response(503, {"retry-after": "2.5"}, b"").retry_after == 3
    new = error_from_response(409, {}, b'{"error": {"code": "a_code_added_later", "message": "m"}}')
    assert type(new) is ApiError and new.code == "a_code_added_later"
    proxy = error_from_response(502, {}, b"<html>Bad gateway</html>")
    assert proxy.code == "http_502" and "Bad gateway" in proxy.message
    assert issubclass(error_class("invalid_request"), InvalidRequest)


def test_sse_lines_become_events_and_a_cut_stream_still_delivers_its_last():
    lines = ["event: step", 'data: {"index": 1}', "", ": keep-alive", "event: result", "data: {", "data: }"]
    assert list(SseDecoder().decode(iter(lines))) == [("step", '{"index": 1}'), ("result", "{\n}")]


def test_run_events_are_typed_and_an_error_event_is_raised():
    assert isinstance(act_event("step", '{"index": 2}'), StepSummary)
    with pytest.raises(SessionNotFound):
        act_event("error", '{"error": {"code": "session_not_found", "message": "gone"}}')
    with pytest.raises(ApiError):
        act_event("surprise", "{}")


def _server(seen: list):
    result = {"trace_id": "t1", "status": "done", "steps": [], "usage": {}, "report_url": "/r"}

    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append((request.method, request.url.raw_path.decode(), request.headers.get("authorization"),
                     request.headers.get("accept"), request.content.decode()))
        if request.url.path.endswith("/vision/act"):
            stream = f"event: step\ndata: {json.dumps({'index': 1})}\n\nevent: result\ndata: {json.dumps(result)}\n\n"
            return httpx2.Response(200, content=stream.encode(), headers={"content-type": "text/event-stream"})
        if request.url.path.endswith("/cursor"):
            return httpx2.Response(200, json={"x": 4, "y": 5})
        return httpx2.Response(404, json={"error": {"code": "session_not_found", "message": "no"}})

    return handle


def test_both_transports_send_the_same_requests():
    sync_seen, async_seen = [], []
    with GlassdeskClient("http://gd", token="t0k", http_client=httpx2.Client(
            base_url="http://gd", headers={"authorization": "Bearer t0k"},
            transport=httpx2.MockTransport(_server(sync_seen)))) as gd:
        desk = gd.session("s/1")
        assert desk.cursor().x == 4
        sync_events = list(desk.act_stream("go", model="scripted"))
        with pytest.raises(SessionNotFound):
            desk.info()

    async def run():
        transport = httpx2.MockTransport(_server(async_seen))
        async with AsyncGlassdeskClient("http://gd", http_client=httpx2.AsyncClient(
                base_url="http://gd", headers={"authorization": "Bearer t0k"}, transport=transport)) as gd:
            desk = gd.session("s/1")
            assert (await desk.cursor()).y == 5
            events = [e async for e in desk.act_stream("go", model="scripted")]
            with pytest.raises(SessionNotFound):
                await desk.info()
            return events

    async_events = asyncio.run(run())
    assert sync_seen == async_seen
    assert sync_seen[0][1] == "/api/v1/sessions/s%2F1/desktop/cursor"  # an id cannot reach another route
    assert sync_seen[1][3] == "text/event-stream" and json.loads(sync_seen[1][4]) == {"instruction": "go",
                                                                                     "model": "scripted"}
    assert [type(e) for e in sync_events] == [type(e) for e in async_events] == [StepSummary, ActResult]


# Routes that are not the client's: the operator console's own (the run viewer's document among
# them: a page's rendering of records the client reads whole), the viewer page's token check, and
# the network policy's second path (one operation: desk.network_policy, desk.set_network_policy).
NOT_THE_CLIENTS = {("GET", "/api/v1/console/info"), ("GET", "/api/v1/console/sessions"),
                   ("GET", "/api/v1/runs/{run_id}"), ("GET", "/api/v1/console/qa-runs"),
                   ("GET", "/api/v1/sessions/{session_id}/viewer"),
                   ("GET", "/api/v1/sessions/{session_id}/page/network-policy"),
                   ("PUT", "/api/v1/sessions/{session_id}/page/network-policy")}


def every_route(gd) -> None:
    """Each client method once, with placeholder arguments (the fake server refuses them all); the
    catalogue's with a request model carrying only what the path needs."""
    desk = gd.session("s")
    calls = [
        gd.health, gd.sessions, lambda: gd.create_session(id="s"), desk.info, desk.delete, desk.reset,
        lambda: desk.save_state("alice"), gd.states, lambda: gd.delete_state("alice"),
        lambda: gd.start_eval(tasks="miniwob:click-test", models=["oracle"]), gd.evals, lambda: gd.eval_status("e"),
        desk.screenshot, lambda: desk.zoom((0, 0, 10, 10)), lambda: desk.launch("xterm"),
        lambda: desk.open("about:blank"),
        lambda: desk.focus("0x1"), desk.cursor, desk.live_view, desk.takeover,
        lambda: desk.act("x"), lambda: list(desk.act_stream("x")), desk.cancel, desk.pause, desk.resume,
        lambda: desk.computer_openai(action={"type": "wait"}),
        lambda: desk.computer_gemini(function_calls=[{"name": "wait_5_seconds"}]),
        lambda: desk.computer_anthropic(tool_version="computer_20250124", display_width_px=10, display_height_px=10,
                                        input={}),
        lambda: desk.computer_anthropic_browser(tool_uses=[{"id": "t", "name": "list_tabs", "input": {}}]),
        lambda: desk.page.download("f"), desk.page.screenshot,
        lambda: list(gd.events()), gd.stats, gd.traces, lambda: gd.trace("t"), lambda: gd.verify_trace("t"),
        lambda: gd.trace_image("t", 1), lambda: gd.trace_report("t"), lambda: gd.trace_junit("t"),
        lambda: gd.trace_video("t", "video.mp4"), lambda: gd.recording("r"), lambda: gd.recording_file("r", "x.vtt"),
        lambda: gd.export_trace("t"),
        lambda: gd.qa_run("r"), lambda: gd.verify_qa_run("r"), lambda: gd.qa_junit("r"),
        lambda: gd.export_qa_run("r", "playwright-ts"), lambda: gd.qa_report("r"),
        lambda: gd.qa_artifact("r", "a.png"), gd.baselines, lambda: gd.approve_baseline("b", "r"),
    ]
    calls += [lambda name=name: getattr(desk, name)(**({"x": 1, "y": 1} if name == "move" else
                                                       {"keys": ["a"]} if name == "key" else
                                                       {"keys": "a"} if name == "hold_key" else
                                                       {"text": "a"} if name == "type" else
                                                       {"path": [{"x": 1, "y": 1}, {"x": 2, "y": 2}]} if name == "drag"
                                                       else {}))
              for name in INPUT_ACTIONS]
    owners = {"desktop": desk, "pages": desk.page, "qa": desk.qa, "recordings": desk, "calibration": desk, "evals": gd}
    for op in catalogue():  # each with a request that carries what its path needs
        if op.rest is not None:
            method = getattr(owners[op.service], op.rest.client or op.method)
            request = op.request.model_construct(**dict.fromkeys(op.rest.path_fields, "t")) if op.request else None
            calls.append(lambda method=method, request=request: method(request) if request is not None else method())
    for call in calls:
        try:
            call()
        except ApiError as exc:
            assert exc.status == 404, exc  # the fake refused it: the client built a valid request
        except Exception as exc:  # pragma: no cover - names the call that failed
            raise AssertionError(f"{call}: {exc!r}") from exc


def test_every_route_of_the_api_has_a_client_method(tmp_path):
    from desktop.session.manager import SessionManager
    from vision.http.app import Settings, create_app

    spec = create_app(SessionManager(root=tmp_path, max_sessions=1), Settings(token=None, port=1)).openapi()
    routes = {(method.upper(), path) for path, ops in spec["paths"].items() if path.startswith("/api/v1")
              for method in ops} - NOT_THE_CLIENTS
    sent: set[tuple[str, str]] = set()

    def refuse(request: httpx2.Request) -> httpx2.Response:
        sent.add((request.method, request.url.path))
        return httpx2.Response(404, json={"error": {"code": "not_found", "message": "recorded"}})

    with GlassdeskClient("http://gd", http_client=httpx2.Client(base_url="http://gd",
                                                                transport=httpx2.MockTransport(refuse))) as gd:
        every_route(gd)
    patterns = {route: re.compile(re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(route[1])) + "$") for route in routes}
    missing = sorted(route for route, pattern in patterns.items()
                     if not any(method == route[0] and pattern.match(path) for method, path in sent))
    assert not missing, f"routes with no client method: {missing}"


def test_the_server_and_token_come_from_the_arguments_then_the_environment(monkeypatch):
    monkeypatch.delenv("GLASSDESK_URL", raising=False)
    monkeypatch.delenv("GLASSDESK_PORT", raising=False)
    monkeypatch.delenv("GLASSDESK_TOKEN", raising=False)
    with GlassdeskClient() as gd:
        assert gd.base_url == "http://127.0.0.1:8080" and "authorization" not in gd._http.headers
    monkeypatch.setenv("GLASSDESK_PORT", "9001")
    monkeypatch.setenv("GLASSDESK_TOKEN", "from-env")
    with GlassdeskClient() as gd:
        assert gd.base_url == "http://127.0.0.1:9001" and gd._http.headers["authorization"] == "Bearer from-env"
    monkeypatch.setenv("GLASSDESK_URL", "http://desk.example:8000/")
    with GlassdeskClient(token="given") as gd:
        assert gd.base_url == "http://desk.example:8000" and gd._http.headers["authorization"] == "Bearer given"
    with GlassdeskClient("http://other:1") as gd:
        assert gd.base_url == "http://other:1"


def test_a_printed_result_gives_its_screenshot_s_size_not_its_base64():
    result = ActResult(trace_id="t", status="done", steps=[], usage={}, report_url="/r", final_screenshot="A" * 80_000)
    assert "final_screenshot='<base64 PNG, 80,000 characters>'" in repr(result) and len(repr(result)) < 1000
    assert result.final_screenshot == "A" * 80_000  # the value itself is whole
