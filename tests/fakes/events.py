"""What the local test servers share: pages that report events by POST, kept in order, and a
test that waits for the one it expects (tests/fakes: testpage, site, qa_site)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def read_event(handler: BaseHTTPRequestHandler) -> dict:
    """The JSON event a page POSTed, answered with 204."""
    length = int(handler.headers.get("content-length") or 0)
    event = json.loads(handler.rfile.read(length) or b"{}")
    handler.send_response(204)
    handler.end_headers()
    return event


class EventServer:
    """A local HTTP server (started by ``serve``) and the events its pages reported."""

    def __init__(self):
        self.events: list[dict] = []
        self._cond = threading.Condition()

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def record(self, event: dict) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self.events.clear()

    def wait_for(self, predicate, timeout: float = 10.0) -> dict:
        """The first recorded event matching ``predicate``; waits for it to arrive."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no matching event within {timeout}s; recent events: "
                                         f"{repr(self.events[-20:])[:3000]}")
                self._cond.wait(remaining)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
