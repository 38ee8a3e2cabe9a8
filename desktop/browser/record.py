"""The record of a session's browser: console messages, uncaught exceptions, network requests,
dialogs and downloads, kept per session from its start in bounded rings with sequence numbers (a
client asks for everything since N). The record belongs to the session, not to one browser
process: a healed or reset Chromium goes on writing into it, and it is cleared with the session.

Here too the recorders of the console and the network; dialogs are recorded by
desktop.browser.dialogs, downloads by desktop.browser.downloads.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from desktop.models import DialogMode

CONSOLE_RING = 1000
NETWORK_RING = 2000
NAVIGATIONS_KEPT = 16  # the main frame's latest navigations, for the settle of the input that started one
DETAILED_REQUESTS = 500  # the latest requests whose headers and body a flow's check may still read
HEADERS_LIMIT = 8_000  # characters of a request's headers kept for a flow's checks
BODY_LIMIT = 20_000    # characters of its body
DIALOG_RING = 100
DOWNLOAD_RING = 200
ORIGINS = 5000  # origins remembered for a clear (each costs a DevTools call then: ~1 ms)


DEFAULT_PORTS = {"http": "80", "https": "443"}


def origin_of(url: str) -> str | None:
    """The web origin of an http(s) URL, ``scheme://host[:port]`` as the browser writes it (default
    port left out, user info dropped), or None for any other URL (about:, data:, blob:, chrome:),
    which keeps no storage of its own (pure). Cheap: the recorder calls it for every request."""
    if url.startswith("http://"):
        scheme, rest = "http", url[7:]
    elif url.startswith("https://"):
        scheme, rest = "https", url[8:]
    else:
        return None
    end = len(rest)
    for stop in "/?#":
        at = rest.find(stop)
        if 0 <= at < end:
            end = at
    host = rest[:end].rpartition("@")[2].lower()
    if not host:
        return None
    if host.endswith(f":{DEFAULT_PORTS[scheme]}") and not host.endswith("]"):
        host = host[: -len(DEFAULT_PORTS[scheme]) - 1]
    return f"{scheme}://{host}"


class Ring:
    """A bounded, thread-safe log whose entries carry a sequence number and a timestamp (pure)."""

    def __init__(self, size: int):
        self._entries: deque[dict] = deque(maxlen=size)
        self._seq = 0
        self._lock = threading.Lock()

    def add(self, entry: dict) -> dict:
        with self._lock:
            self._seq += 1
            entry = {"seq": self._seq, "ts": time.time(), **entry}
            self._entries.append(entry)
            return entry

    def update(self, seq: int, **changes) -> None:
        with self._lock:
            for entry in reversed(self._entries):
                if entry["seq"] == seq:
                    entry.update(changes)
                    return

    def since(self, seq: int = 0, where: Callable[[dict], bool] | None = None) -> list[dict]:
        with self._lock:
            return [dict(e) for e in self._entries if e["seq"] > seq and (where is None or where(e))]

    @property
    def last_seq(self) -> int:
        return self._seq

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass
class PageRecord:
    """Everything recorded about one session's browser, across its heals and resets."""

    console: Ring = field(default_factory=lambda: Ring(CONSOLE_RING))
    network: Ring = field(default_factory=lambda: Ring(NETWORK_RING))
    dialogs: Ring = field(default_factory=lambda: Ring(DIALOG_RING))
    downloads: Ring = field(default_factory=lambda: Ring(DOWNLOAD_RING))
    # The console's sequence number up to which page summaries have counted errors: each summary
    # reports the errors that are new since the one before.
    errors_reported: int = 0
    # How the session answers JavaScript dialogs: "manual" leaves each open for the model or the
    # operator to see and answer; "accept" and "dismiss" answer it at once. A setting of the session,
    # not of one browser process, so it lives here with the record and outlives a heal and a reset.
    dialog_policy: DialogMode = "manual"
    # Every web origin the browser has requested something from since its state was last cleared
    # (desktop.browser.state.clear_state): DevTools clears storage one origin at a time, and has no
    # list of the origins that keep some. In the order first seen; at most ORIGINS, the oldest
    # forgotten first.
    origins: dict[str, None] = field(default_factory=dict)
    # What was healed under the session, in order: "chromium", "desktop" (the supervisor's), "tab" (a
    # tab whose renderer died, opened again by the page layer). The session's Desktop.heals() is this
    # list: a run learns each heal from it, whichever part noticed.
    heals: list[str] = field(default_factory=list)
    # The last DETAILED_REQUESTS requests themselves (Playwright's), by their network entry's seq:
    # their headers and body are read from them for a QA flow's request checks
    # (PageService.request_detail) and nothing else. Kept beside the network ring, never in it: its
    # entries are answered to anyone reading the page's network, and headers carry tokens.
    requests: dict[int, Any] = field(default_factory=dict)

    def saw(self, origin: str) -> None:
        if origin not in self.origins:
            self.origins[origin] = None
            if len(self.origins) > ORIGINS:
                del self.origins[next(iter(self.origins))]


def request_detail(headers: dict[str, str], body: str | None) -> dict:
    """What is kept of a request for a flow's checks (pure): its headers by lower-case name and its
    body, each bounded (HEADERS_LIMIT, BODY_LIMIT characters)."""
    kept: dict[str, str] = {}
    room = HEADERS_LIMIT
    for name, value in headers.items():
        if room <= 0:
            break
        kept[name.lower()] = value[:room]
        room -= len(name) + len(value)
    return {"headers": kept, "body": body[:BODY_LIMIT] if body is not None else None}


async def read_request(request) -> dict | None:
    """A kept request's headers (all of them: the ones Playwright's ``headers`` leaves out, such as
    Authorization and Cookie, included) and body; None once the browser has let it go."""
    try:
        headers = await request.all_headers()
    except Exception:  # its page or browser gone since (a heal, a reset): nothing left to read
        return None
    return request_detail(headers, post_data(request))


def post_data(request) -> str | None:
    try:
        return request.post_data
    except Exception:  # a body that is not text (an upload): nothing a check reads
        return None


class Recorder:
    """The console and network recorders of one browser process, writing into the session's
    PageRecord. Every handler runs on the Playwright driver's loop (desktop.browser.chromium)."""

    def __init__(self, context, record: PageRecord, blocks=None):
        self.context = context
        self.record = record
        # The session's policy proxy's record of what it refused (desktop.network.policy.BlockLog), to
        # mark those requests ``blocked: "policy"`` in the network log.
        self.blocks = blocks
        self._requests: dict[Any, tuple[int, float]] = {}   # request -> its entry's seq and start
        self._answered: set = set()  # the requests among them whose response has arrived
        # The main frame's navigation requests, by seq: when each ended (monotonic), None while it runs.
        self._navigations: dict[int, float | None] = {}
        self._attached = False

    def attach(self, on: bool) -> None:
        """Attach (or detach) the console and network recorders. Playwright's driver sends these
        events over the pipe only while the context has a listener for them (but uncaught errors and
        a navigation's own request), so detached they cost a page load next to nothing. Always on
        in service; off only for the benchmark's comparison of page loads with and without
        recording (tests/bench_page.py)."""
        if on == self._attached:
            return  # attached twice, each event would be recorded twice
        self._attached = on
        # On Playwright's implementation object beneath the public one: the public ``on`` wraps a
        # handler in a function that, at every event, reads the handler's signature
        # (inspect.signature) and maps the event's objects to their public wrappers. That was a
        # quarter of recording's CPU per page load (tests/bench_page.py). The objects handed over
        # here have the properties the handlers read (url, method, resource_type, timing, failure;
        # status, headers, request; type, text, location; error, page); a Playwright without
        # ``_impl_obj`` gets the public object, and the same handlers.
        events = getattr(self.context, "_impl_obj", self.context)
        for event, handler in (("console", self._on_console), ("weberror", self._on_weberror),
                               ("request", self._on_request), ("response", self._on_response),
                               ("requestfinished", self._on_request_finished),
                               ("requestfailed", self._on_request_failed)):
            if on:
                events.on(event, handler)
            else:
                events.remove_listener(event, handler)

    def _on_console(self, message) -> None:
        where = message.location or {}
        level = {"warning": "warning", "error": "error", "assert": "error", "debug": "debug",
                 "info": "info", "trace": "debug"}.get(message.type, "log")
        self.record.console.add({"level": level, "text": message.text[:10_000], "url": where.get("url", ""),
                                 "line": where.get("lineNumber", 0), "column": where.get("columnNumber", 0)})

    def _on_weberror(self, web_error) -> None:
        error = web_error.error
        self.record.console.add({"level": "error", "text": f"Uncaught {error.name}: {error.message}"[:10_000],
                                 "url": web_error.page.url if web_error.page else "", "line": 0, "column": 0,
                                 "exception": True})

    def _on_request(self, request) -> None:
        origin = origin_of(request.url)
        if origin is not None:
            self.record.saw(origin)
        entry = self.record.network.add({"method": request.method, "url": request.url[:4000],
                                         "resource_type": request.resource_type, "status": None,
                                         "duration_ms": None, "size": None, "failure": None, "blocked": None})
        self._requests[request] = (entry["seq"], entry["ts"])
        if _navigates(request):
            self._navigations[entry["seq"]] = None
            if len(self._navigations) > NAVIGATIONS_KEPT:
                self._navigations.pop(next(iter(self._navigations)))
        if len(self._requests) > NETWORK_RING:  # requests that never end (long polls) must not pile up
            self._answered.discard(self._requests.pop(next(iter(self._requests))))
        kept = self.record.requests
        kept[entry["seq"]] = request
        if len(kept) > DETAILED_REQUESTS:
            kept.pop(next(iter(kept)))

    def _on_response(self, response) -> None:
        # The status is known when the headers arrive: a body the page never reads (a fetch whose
        # response is only looked at for its status) may never "finish".
        seq, started = self._requests.get(response.request, (None, 0))
        if seq is not None:
            self._answered.add(response.request)
            size = response.headers.get("content-length")
            # A plain-HTTP request the policy refused gets the proxy's 403.
            blocked = self._blocked(response.request, started) if response.status == 403 else None
            self.record.network.update(seq, status=response.status, size=int(size) if size and size.isdigit() else None,
                                       **({"blocked": blocked} if blocked else {}))

    def _on_request_finished(self, request) -> None:
        self._answered.discard(request)
        seq, _ = self._requests.pop(request, (None, 0))
        self._ended(seq)
        if seq is not None:
            self.record.network.update(seq, duration_ms=_duration(request))

    def _on_request_failed(self, request) -> None:
        self._answered.discard(request)
        seq, started = self._requests.pop(request, (None, 0))
        self._ended(seq)
        if seq is not None:
            # An HTTPS or WebSocket connection the policy refused fails as a refused tunnel.
            self.record.network.update(seq, failure=request.failure or "failed", duration_ms=_duration(request),
                                       blocked=self._blocked(request, started))

    def _ended(self, seq: int | None) -> None:
        if seq in self._navigations:
            self._navigations[seq] = time.monotonic()

    def main_navigation(self, since_seq: int) -> tuple[int, float | None] | None:
        """The last navigation of the main frame started after entry ``since_seq``: its entry's seq
        and when its request ended (None while it runs); None when there was none."""
        last = next(reversed(list(self._navigations.items())), None)
        return last if last is not None and last[0] > since_seq else None

    def awaiting_response(self, since_seq: int) -> list[str]:
        """The resource types of the requests started after entry ``since_seq`` that have no
        response yet (desktop.browser.settle waits for them). A response's headers are the end of
        the wait, not its body: a body the page never reads (a beacon, an event report) never
        finishes loading."""
        return [request.resource_type for request, (seq, _) in list(self._requests.items())
                if seq > since_seq and request not in self._answered]

    def _blocked(self, request, started: float) -> str | None:
        """"policy" when the session's policy proxy refused this request: a refusal of its URL
        (plain HTTP), or of its host and port (a tunnel), since shortly before it started."""
        if self.blocks is None:
            return None
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(request.url)
            host = (parts.hostname or "").lower()
            port = parts.port or {"https": 443, "wss": 443, "http": 80, "ws": 80}.get(parts.scheme)
        except ValueError:
            return None
        for entry in self.blocks.since(0):
            if entry.ts >= started - 1 and (entry.url == request.url
                                            or (entry.url is None and entry.host == host and entry.port == port)):
                return "policy"
        return None


def _navigates(request) -> bool:
    """Whether ``request`` loads a new document into a page's main frame."""
    try:
        return request.is_navigation_request() and request.frame.parent_frame is None
    except Exception:  # a service worker's request has no frame
        return False


def _duration(request) -> int | None:
    """Milliseconds from the request's start to the end of its response, where Chromium says."""
    end = request.timing.get("responseEnd", -1)
    return round(end) if end and end > 0 else None
