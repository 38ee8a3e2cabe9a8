"""Serves the event-recording test page on 127.0.0.1 and keeps every DOM event it reports."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.fakes.events import EventServer, read_event

PAGE = Path(__file__).parent.parent / "assets" / "testpage.html"
NOTES = PAGE.with_name("notes.html")  # /notes: a textarea for the typing tests


def at(viewport: tuple[int, int], cx: int, cy: int) -> tuple[int, int]:
    """A point of the page (CSS px) on the display, given the ``viewport`` fixture's offset."""
    return viewport[0] + cx, viewport[1] + cy


class TestPage(EventServer):
    def __init__(self):
        super().__init__()
        self.current_load: str | None = None  # the id of the latest page load
        page = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.startswith("/slow"):  # an answer 300 ms late: #later's click handler fetches it
                    time.sleep(0.3)
                    self.send_response(200)
                    self.send_header("content-length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                    return
                body = (NOTES if self.path.startswith("/notes") else PAGE).read_bytes()
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                page.record(read_event(self))

        self.serve(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def notes_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/notes"

    def record(self, event: dict) -> None:
        with self._cond:
            if event.get("type") == "loaded":
                self.current_load = event.get("load")
            if event.get("load") == self.current_load:  # drop stragglers of older loads
                self.events.append(event)
            self._cond.notify_all()

    def last(self, type_: str, timeout: float = 10.0) -> dict:
        """Wait until an event of this type arrives, then return the latest one by page time.

        Events travel by concurrent fetches and may arrive out of order; ``t`` is their order."""
        self.wait_for(lambda e: e.get("type") == type_, timeout)
        time.sleep(0.2)  # let stragglers of the same burst arrive
        with self._cond:
            return max((e for e in self.events if e.get("type") == type_), key=lambda e: e.get("t", 0))
