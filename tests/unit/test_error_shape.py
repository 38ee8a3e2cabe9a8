"""Every error leaves the API in one shape, a bug's included (no X needed)."""

from __future__ import annotations

import httpx2
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict

from desktop.errors import SessionNotFound
from tests.conftest import LiveServer
from vision.http.app import add_error_handlers


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int


def test_typed_and_unexpected_errors_share_the_error_shape():
    app = FastAPI()
    add_error_handlers(app)

    @app.get("/typed")
    def typed():
        raise SessionNotFound("no session 'x'")

    @app.get("/bug")
    def bug():
        raise RuntimeError("secret internals")

    with LiveServer(app) as server, httpx2.Client(base_url=server.url) as client:
        typed_reply = client.get("/typed")
        assert typed_reply.status_code == 404
        assert typed_reply.json() == {"error": {"code": "session_not_found", "message": "no session 'x'"}}
        bug_reply = client.get("/bug")
        assert bug_reply.status_code == 500
        error = bug_reply.json()["error"]
        assert error["code"] == "internal_error" and "RuntimeError" in error["message"]
        assert "secret internals" not in bug_reply.text  # details stay in the server log


def test_a_body_that_cannot_be_read_is_a_typed_422_in_the_error_shape():
    """Not UTF-8, not JSON, not sent as JSON: invalid_json on every route, naming the Content-Type to
    send. JSON but not an object, or missing: the route's bad-body code (invalid_action under
    /desktop/, invalid_request elsewhere). Each with a sentence saying what to send."""
    app = FastAPI()
    add_error_handlers(app)
    ran: list[int] = []

    @app.post("/api/v1/sessions/s/desktop/click")
    def click(body: Body):
        ran.append(body.x)
        return {"ok": True}

    @app.post("/api/v1/sessions/s/vision/act")
    def act(body: Body):
        ran.append(body.x)
        return {"ok": True}

    json_type = {"content-type": "application/json"}
    not_json = "Content-Type: application/json"
    cases = [  # (body, headers, what the message says, whether it is invalid_json)
        (b'{"x": "\xff"}', json_type, "must be UTF-8", not_json),
        (b'{"\xc3\x28": 1}', json_type, "must be UTF-8", not_json),
        (b"{not json", json_type, "not valid JSON (Expecting property name", not_json),
        (b'{"x": 1}', {"content-type": "text/plain"}, "(this request's Content-Type: text/plain)", not_json),
        (b'{"x": 1}', {}, "(this request's Content-Type: none)", not_json),
        (b"x=1", {"content-type": "application/x-www-form-urlencoded"}, "Content-Type: application/x-www-form",
         not_json),
        (b"[1]", json_type, "must be a JSON object", None),
        (b"", json_type, "missing", None),
        (b'{"x": ' + b"9" * 5000 + b"}", json_type, "could not be read as JSON (Exceeds the limit", not_json),
        (b"[" * 100_000 + b"]" * 100_000, json_type, "could not be read as JSON (maximum recursion depth", not_json),
    ]
    with LiveServer(app) as server, httpx2.Client(base_url=server.url) as client:
        for path, code in (("/api/v1/sessions/s/desktop/click", "invalid_action"),
                           ("/api/v1/sessions/s/vision/act", "invalid_request")):
            for content, headers, says, names_type in cases:
                reply = client.post(path, content=content, headers=headers)
                assert reply.status_code == 422, (content, reply.text)
                error = reply.json()["error"]
                assert error["code"] == ("invalid_json" if names_type else code), (content, error)
                assert says in error["message"] and error["message"].startswith("body: "), (content, error)
                assert names_type is None or names_type in error["message"], (content, error)
        assert client.post("/api/v1/sessions/s/desktop/click", json={"x": 1}).json() == {"ok": True}
    assert ran == [1]  # none of the bad bodies reached a handler


def test_a_retry_hint_is_a_retry_after_header_over_rest_and_words_over_mcp():
    from desktop.errors import SessionBusy, SessionUnavailable
    from vision.mcp.server import error_message

    app = FastAPI()
    add_error_handlers(app)

    @app.get("/busy")
    def busy():
        raise SessionBusy("session s is busy with a wait action (about 26.2 s left)", retry_after=26.2)

    @app.get("/gone")
    def gone():
        raise SessionUnavailable("session s is restarting")

    with LiveServer(app) as server, httpx2.Client(base_url=server.url) as client:
        reply = client.get("/busy")
        assert reply.status_code == 409 and reply.headers["retry-after"] == "27"  # rounded up, whole seconds
        assert reply.json() == {"error": {"code": "session_busy",
                                          "message": "session s is busy with a wait action (about 26.2 s left)"}}
        assert "retry-after" not in client.get("/gone").headers  # no hint, no header
    assert SessionBusy("a run is going on").retry_after == 1  # busy always says when to look again
    assert error_message(SessionBusy("busy", retry_after=3)) == "session_busy: busy; retry after 3 s"
    assert error_message(SessionUnavailable("restarting")) == "session_unavailable: restarting"
