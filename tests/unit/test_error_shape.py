"""Every error leaves the API in one shape, a bug's included (no X needed)."""

from __future__ import annotations

import httpx2
from fastapi import FastAPI

from vision.app import add_error_handlers
from desktop.errors import SessionNotFound
from tests.conftest import LiveServer


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
