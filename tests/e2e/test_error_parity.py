"""One fault, one error code: the same mistake made over REST and over MCP (streamable HTTP, the
real MCP client) is refused with the same code, because both doors call the same service."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest
from mcp import Client

pytestmark = pytest.mark.x11

SID = "itest"
PAGE = f"/api/v1/sessions/{SID}/page"
QA = f"/api/v1/sessions/{SID}/qa"
BIG = {"name": "big.bin", "content_base64": "A" * (700 * 1024)}  # 525 KiB decoded: over 512 KiB, under the body cap


@contextmanager
def nothing() -> Iterator[None]:
    yield


@contextmanager
def not_ready(desk) -> Iterator[None]:
    saved, desk.status = desk.status, "restarting"
    try:
        yield
    finally:
        desk.status = saved


@contextmanager
def taken_over(services) -> Iterator[None]:
    services.takeover(SID, True)
    try:
        yield
    finally:
        services.takeover(SID, False)


@contextmanager
def busy_with_a_wait(desk) -> Iterator[None]:
    """A 10 s wait action running on the session (longer than a request queues for it)."""
    from desktop.actions import Wait

    waiter = threading.Thread(target=desk.perform, args=(Wait(duration_ms=10_000),))
    waiter.start()
    deadline = time.monotonic() + 30
    while desk._running is None:
        assert time.monotonic() < deadline and waiter.is_alive(), "the wait did not start"
        time.sleep(0.02)
    try:
        yield
    finally:
        waiter.join(60)


# (fault, REST method+path+body, MCP tool+arguments, expected code, HTTP status, setup)
CASES = [
    ("unknown session", ("POST", "/api/v1/sessions/nope/desktop/click", {"x": 10, "y": 10}),
     ("desktop_click", {"x": 10, "y": 10, "session": "nope"}), "session_not_found", 404, "none"),
    ("session not ready", ("POST", f"/api/v1/sessions/{SID}/desktop/click", {"x": 10, "y": 10}),
     ("desktop_click", {"x": 10, "y": 10, "session": SID}), "session_unavailable", 503, "not_ready"),
    ("coordinates off screen", ("POST", f"/api/v1/sessions/{SID}/desktop/click", {"x": 5000, "y": 10}),
     ("desktop_click", {"x": 5000, "y": 10, "session": SID}), "invalid_action", 422, "none"),
    ("an unknown argument", ("POST", f"/api/v1/sessions/{SID}/desktop/click", {"x": 10, "y": 10, "bogus": 1}),
     ("desktop_click", {"x": 10, "y": 10, "bogus": 1, "session": SID}), "invalid_action", 422, "none"),
    ("zoom region off screen", ("POST", f"/api/v1/sessions/{SID}/desktop/zoom", {"region": [0, 0, 1921, 10]}),
     ("desktop_zoom", {"region": [0, 0, 1921, 10], "session": SID}), "invalid_action", 422, "none"),
    ("launch of a missing program", ("POST", f"/api/v1/sessions/{SID}/desktop/launch",
                                     {"command": "no-such-program-here"}),
     ("desktop_launch", {"command": "no-such-program-here", "session": SID}), "invalid_action", 422, "none"),
    ("bad URL scheme", ("POST", f"/api/v1/sessions/{SID}/desktop/open", {"url": "gopher://example.test/"}),
     ("desktop_open_url", {"url": "gopher://example.test/", "session": SID}), "invalid_action", 422, "none"),
    ("a bad network policy pattern", ("POST", "/api/v1/sessions", {"id": "np-bad", "network": {"deny": ["http://x/"]}}),
     ("session_create", {"id": "np-bad", "network": {"deny": ["http://x/"]}}), "invalid_request", 422, "none"),
    ("an action during a take-over", ("POST", f"/api/v1/sessions/{SID}/desktop/click", {"x": 10, "y": 10}),
     ("desktop_click", {"x": 10, "y": 10, "session": SID}), "operator_in_control", 409, "takeover"),
    ("a screenshot of a session not ready", ("GET", f"/api/v1/sessions/{SID}/desktop/screenshot", None),
     ("desktop_screenshot", {"session": SID}), "session_unavailable", 503, "not_ready"),
    ("an action behind a long one", ("POST", f"/api/v1/sessions/{SID}/desktop/key", {"keys": ["shift"]}),
     ("desktop_key", {"keys": ["shift"], "session": SID}), "session_busy", 409, "busy"),
    # the page layer
    ("no element matches", ("POST", f"{PAGE}/click", {"selector": "#nothing-has-this-id", "timeout_ms": 100}),
     ("page_click", {"selector": "#nothing-has-this-id", "timeout_ms": 100, "session": SID}),
     "element_not_found", 404, "none"),
    ("a selector the browser cannot parse", ("POST", f"{PAGE}/click", {"selector": "a[[[", "timeout_ms": 100}),
     ("page_click", {"selector": "a[[[", "timeout_ms": 100, "session": SID}), "invalid_selector", 422, "none"),
    ("no element named", ("POST", f"{PAGE}/click", {}), ("page_click", {"session": SID}), "invalid_request", 422,
     "none"),
    ("a wait that runs out", ("POST", f"{PAGE}/wait", {"selector": "#never-there", "timeout_ms": 100}),
     ("page_wait_for", {"selector": "#never-there", "timeout_ms": 100, "session": SID}), "timeout", 408, "none"),
    ("no dialog to answer", ("POST", f"{PAGE}/dialog", {"accept": True}),
     ("page_handle_dialog", {"accept": True, "session": SID}), "no_dialog", 409, "none"),
    ("evaluate while it is off", ("POST", f"{PAGE}/evaluate", {"expression": "1"}),
     ("page_evaluate", {"expression": "1", "session": SID}), "evaluate_disabled", 403, "none"),
    ("a page navigation to a bad scheme", ("POST", f"{PAGE}/navigate", {"url": "gopher://example.test/"}),
     ("page_navigate", {"url": "gopher://example.test/", "session": SID}), "invalid_action", 422, "none"),
    ("an unknown tab", ("POST", f"{PAGE}/tabs/t999/activate", None),
     ("page_tabs", {"action": "activate", "tab_id": "t999", "session": SID}), "element_not_found", 404, "none"),
    ("the page of a session not ready", ("GET", PAGE, None), ("page_state", {"session": SID}), "page_unavailable",
     503, "not_ready"),
    ("a page click during a take-over", ("POST", f"{PAGE}/click", {"selector": "body"}),
     ("page_click", {"selector": "body", "session": SID}), "operator_in_control", 409, "takeover"),
    ("a dialog policy that is none", ("PUT", f"{PAGE}/dialog-policy", {"mode": "sometimes"}),
     ("page_dialogs", {"policy": "sometimes", "session": SID}), "invalid_request", 422, "none"),
    ("a new session's dialog policy that is none", ("POST", "/api/v1/sessions", {"id": "dp-bad", "dialogs": "yes"}),
     ("session_create", {"session": "dp-bad", "dialogs": "yes"}), "invalid_request", 422, "none"),
    ("an upload over the limit", ("POST", f"{PAGE}/upload", {"selector": "input", "files": [BIG]}),
     ("page_upload_file", {"selector": "input", "files": [BIG], "session": SID}), "upload_too_large", 413, "none"),
    # the QA verbs
    ("a flow step that does not exist", ("POST", f"{QA}/verify_user_flow", {"start_url": "http://127.0.0.1:9/",
                                                                           "steps": [{"action": "jump"}]}),
     ("verify_user_flow", {"start_url": "http://127.0.0.1:9/", "steps": [{"action": "jump"}], "session": SID}),
     "invalid_request", 422, "none"),
    ("an unknown argument to a QA verb", ("POST", f"{QA}/verify_page_loads", {"url": "http://127.0.0.1:9/",
                                                                             "bogus": 1}),
     ("verify_page_loads", {"url": "http://127.0.0.1:9/", "bogus": 1, "session": SID}), "invalid_request", 422,
     "none"),
    ("a negative threshold", ("POST", f"{QA}/compare_visual_regression", {"baseline_id": "home", "threshold": -1}),
     ("compare_visual_regression", {"baseline_id": "home", "threshold": -1, "session": SID}), "invalid_request", 422,
     "none"),
    ("a baseline name that leaves its folder", ("POST", f"{QA}/capture_visual_baseline", {"name": "../up"}),
     ("capture_visual_baseline", {"name": "../up", "session": SID}), "invalid_request", 422, "none"),
    ("a baseline that does not exist", ("POST", f"{QA}/compare_visual_regression", {"baseline_id": "no-such-one"}),
     ("compare_visual_regression", {"baseline_id": "no-such-one", "session": SID}), "baseline_not_found", 404, "none"),
    ("a page check during a take-over", ("POST", f"{QA}/verify_page_loads", {"url": "http://127.0.0.1:9/"}),
     ("verify_page_loads", {"url": "http://127.0.0.1:9/", "session": SID}), "operator_in_control", 409, "takeover"),
]


@pytest.mark.parametrize("fault, rest, tool, code, status, setup", CASES, ids=[c[0] for c in CASES])
def test_one_fault_one_error_code(open_server, services, desk, fault, rest, tool, code, status, setup):
    import httpx2

    guard = {"none": nothing, "not_ready": lambda: not_ready(desk), "takeover": lambda: taken_over(services),
             "busy": lambda: busy_with_a_wait(desk)}[setup]
    method, path, body = rest
    with guard():
        with httpx2.Client(base_url=open_server.url, timeout=60) as http:
            answer = http.request(method, path, json=body)

        async def call():
            async with Client(f"{open_server.url}/mcp") as client:
                return await client.call_tool(*tool)

        result = anyio.run(call)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code, answer.text
    text = result.content[0].text
    assert result.is_error and text.startswith(f"{code}: "), text
    if code in ("session_busy", "session_unavailable"):  # when to come back, through either door
        seconds = int(answer.headers["retry-after"])
        assert seconds >= 1 and text.endswith(" s") and "; retry after " in text, (answer.headers, text)
    if setup == "busy":  # the estimate comes from the wait still running: at most its 10 s and the settling
        assert seconds <= 11 and "wait action" in answer.json()["error"]["message"], answer.text


def test_takeover_is_session_state_seen_by_every_door(open_server, services, desk):
    import httpx2

    async def listing():
        async with Client(f"{open_server.url}/mcp") as client:
            return await client.call_tool("session_list", {})

    with taken_over(services), httpx2.Client(base_url=open_server.url, timeout=60) as http:
        info = http.get(f"/api/v1/sessions/{SID}").json()
        mcp_sessions = anyio.run(listing).structured_content["sessions"]
        during = services.runner(SID).pause_reason
    assert info["takeover"] is True and info["takeover_since"]
    assert next(s for s in mcp_sessions if s["id"] == SID)["takeover"] is True
    assert during == "operator took over"
    with httpx2.Client(base_url=open_server.url, timeout=60) as http:
        info = http.get(f"/api/v1/sessions/{SID}").json()
    assert info["takeover"] is False and info["takeover_since"] is None
    assert services.runner(SID).pause_reason is None


def test_controls_never_start_a_session(open_server, services):
    import httpx2

    before = {s.id for s in services.desktops.list()}
    with httpx2.Client(base_url=open_server.url, timeout=60) as http:
        for path in ("vision/cancel", "vision/pause", "vision/resume"):
            answer = http.post(f"/api/v1/sessions/ghost/{path}")
            assert answer.status_code == 404 and answer.json()["error"]["code"] == "session_not_found", answer.text
        answer = http.post("/api/v1/sessions/ghost/takeover", json={"on": True})
        assert answer.status_code == 404, answer.text
        assert http.get("/api/v1/sessions/ghost").status_code == 404
    assert {s.id for s in services.desktops.list()} == before
