"""A tiny scriptable HTTP server on 127.0.0.1 for protocol tests of the real SDKs.

The SDKs talk httpx2, which respx cannot intercept, so tests run a real server and point the SDK's
``base_url`` at it. A test queues replies (status, JSON body, headers) or a function that builds
the reply from the request; every request is recorded for assertions on its shape.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[Request], Reply]


class FakeServer:
    def __init__(self):
        self.requests: list[Request] = []
        self._replies: list[Reply | Responder] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _handle(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                request = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = fake._next(request)
                payload = json.dumps(reply.body).encode() if reply.body is not None else b""
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_DELETE = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def queue(self, *replies: Reply | Responder) -> None:
        with self._lock:
            self._replies.extend(replies)

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if not self._replies:
                return Reply(500, {"error": {"type": "fake_server", "message": "no reply queued"}})
            item = self._replies.pop(0)
        return item(request) if callable(item) else item

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class FakeModel:
    """A FakeServer whose queued turns check the request and build the reply."""

    def __init__(self, server: FakeServer):
        self.server = server
        self.problems: list[str] = []

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def requests(self) -> list[Request]:
        return self.server.requests

    def turns(self, *turns: Callable[[Request], Reply] | Reply) -> None:
        for turn in turns:
            self.server.queue(self._checked(turn))

    def _checked(self, turn):
        def responder(request: Request) -> Reply:
            if isinstance(turn, Reply):
                return turn
            try:
                return turn(request)
            except Exception as exc:  # an assert on the request shape: stop the run, say why
                where = f"request {len(self.server.requests)} ({getattr(turn, '__name__', 'turn')})"
                self.problems.append(f"{where}: {type(exc).__name__}: {exc}")
                return Reply(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                              "message": f"fake model: {exc}"}})
        return responder
