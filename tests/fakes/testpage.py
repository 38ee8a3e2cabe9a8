"""Serves the event-recording test page on 127.0.0.1 and keeps every DOM event it reports."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PAGE = Path(__file__).parent.parent / "assets" / "testpage.html"


def at(viewport: tuple[int, int], cx: int, cy: int) -> tuple[int, int]:
    """A point of the page (CSS px) on the display, given the ``viewport`` fixture's offset."""
    return viewport[0] + cx, viewport[1] + cy


class TestPage:
    def __init__(self):
        self.events: list[dict] = []
        self.current_load: str | None = None  # the id of the latest page load
        self._cond = threading.Condition()
        page = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = PAGE.read_bytes()
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                event = json.loads(self.rfile.read(length) or b"{}")
                with page._cond:
                    if event.get("type") == "loaded":
                        page.current_load = event.get("load")
                    if event.get("load") == page.current_load:  # drop stragglers of older loads
                        page.events.append(event)
                    page._cond.notify_all()
                self.send_response(204)
                self.end_headers()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/"

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
                    types = [e.get("type") for e in self.events][-30:]
                    raise AssertionError(f"no matching event within {timeout}s; recent events: {types}")
                self._cond.wait(remaining)

    def last(self, type_: str, timeout: float = 10.0) -> dict:
        """Wait until an event of this type arrives, then return the latest one by page time.

        Events travel by concurrent fetches and may arrive out of order; ``t`` is their order."""
        self.wait_for(lambda e: e.get("type") == type_, timeout)
        time.sleep(0.2)  # let stragglers of the same burst arrive
        with self._cond:
            return max((e for e in self.events if e.get("type") == type_), key=lambda e: e.get("t", 0))

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
