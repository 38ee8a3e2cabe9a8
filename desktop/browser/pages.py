"""The page layer: what the visible Chromium knows, recorded and read over the session's one
DevTools connection (desktop.browser.chromium), and where its elements are on the display.

Recording: console messages, uncaught exceptions, network requests, dialogs and downloads are kept
per session from its start in bounded rings with sequence numbers (a client asks for everything
since N). The record belongs to the session, not to one browser process: a healed or reset
Chromium goes on writing into it, and it is cleared with the session.

Targets: a CSS selector, an accessibility ``ref`` from a snapshot (``aria_snapshot(mode="ai")``),
a label, or visible text. ``locate`` scrolls the element into view and maps its box to display
pixels (the viewport's origin on the display, at device-scale-factor 1); the session then clicks
and types there with the same xdotool executor as every pixel action, so the operator sees it and
the trace records the pixel.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal, TypeVar

from pydantic import BaseModel, Field, model_validator

CONSOLE_RING = 1000
NETWORK_RING = 2000
DIALOG_RING = 100
DOWNLOAD_RING = 200
CONTENT_LIMIT = 200_000        # characters of text, snapshot or HTML in one answer
LINKS_LIMIT = 2000
EVALUATE_S = 10                # an expression (or its promise) that runs longer is a timeout
ERROR_PAGE_S = 2               # at most this long for Chromium's error page after a failed navigation
T = TypeVar("T")
DIALOG_MODES = ("manual", "accept", "dismiss")
DialogMode = Literal["manual", "accept", "dismiss"]
REF = re.compile(r"^(f[0-9]{1,6})?e[0-9]{1,7}$")
SAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")
NAME_LIMIT = 120               # characters of a download's or upload's file name


# ------------------------------------------------------------------------------------- the record


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


def dialog_mode(value: str) -> DialogMode:
    """A dialog policy's mode, checked (pure); ValueError names the modes there are."""
    if value not in DIALOG_MODES:
        raise ValueError(f"dialog policy {value!r}: use one of {', '.join(DIALOG_MODES)}")
    return value  # type: ignore[return-value]


def safe_file_name(name: str) -> str:
    """A download's or upload's name reduced to one harmless path component (pure)."""
    name = SAFE_NAME.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    return name[:NAME_LIMIT].strip(" .") or "file"


# ------------------------------------------------------------------------------------- targets


class Target(BaseModel):
    """Exactly one way of naming an element."""

    selector: str | None = Field(None, min_length=1, max_length=2000, description="a CSS selector")
    ref: str | None = Field(None, description="a ref from the accessibility snapshot (page content, format "
                                              "accessibility), e.g. e12")
    label: str | None = Field(None, min_length=1, max_length=500, description="the text of the field's label")
    text: str | None = Field(None, min_length=1, max_length=500, description="text visible in the element")

    @model_validator(mode="after")
    def _exactly_one(self):
        given = [name for name in ("selector", "ref", "label", "text") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("name the element one way: exactly one of selector, ref, label, text"
                             + (f" (got {', '.join(given)})" if given else ""))
        if self.ref is not None and not REF.match(self.ref):
            raise ValueError(f"ref {self.ref!r}: refs look like e12 or f1e12 (take them from the accessibility snapshot)")
        return self

    def describe(self) -> str:
        for name in ("selector", "ref", "label", "text"):
            value = getattr(self, name)
            if value is not None:
                return f"{name} {value!r}"
        return "nothing"


def locator_for(page, target: Target):
    if target.selector is not None:
        return page.locator(f"css={target.selector}")
    if target.ref is not None:
        return page.locator(f"aria-ref={target.ref}")
    if target.label is not None:
        return page.get_by_label(target.label)
    return page.get_by_text(target.text)


def display_point(box: dict, origin: tuple[int, int]) -> tuple[int, int]:
    """The centre of an element's box (CSS px in the viewport, DPR 1) on the display (pure)."""
    return origin[0] + int(box["x"] + box["width"] / 2), origin[1] + int(box["y"] + box["height"] / 2)


def viewport_origin(metrics: dict) -> tuple[int, int]:
    """Where the viewport's (0, 0) is on the display, from the window's own numbers (pure): the
    window's position plus the browser's frame around the viewport (tab strip and toolbar above,
    borders at the sides; the frame below the viewport is none in a maximised window)."""
    side = (metrics["outerWidth"] - metrics["innerWidth"]) // 2
    top = metrics["outerHeight"] - metrics["innerHeight"] - side
    return metrics["screenX"] + side, metrics["screenY"] + top


@dataclass
class Located:
    """An element found on the page and where it is: its box on the display and the pixel to use."""

    x: int
    y: int
    box: dict                # display px: x, y, width, height
    matches: int
    covered_by: str | None   # what is on top at the pixel, when it is not the element itself


# What is on top at a viewport point: null when it is the target element or inside it, else a
# label like "div#overlay.modal".
_COVERED = """(el, x, y) => {
  const top = document.elementFromPoint(x, y);
  if (!top || el === top || el.contains(top)) return null;
  const id = top.id ? '#' + top.id : '';
  const cls = typeof top.className === 'string' && top.className ? '.' + top.className.trim().split(/\\s+/).join('.') : '';
  return top.tagName.toLowerCase() + id + cls;
}"""

_HIT_TEST = f"([el, x, y]) => ({_COVERED})(el, x, y)"

_WINDOW = "() => ({screenX, screenY, outerWidth, outerHeight, innerWidth, innerHeight})"

# Everything locate needs once the element is in view, in one call instead of six: how many
# elements match, the first one's box (CSS px in the viewport), the window's numbers and what is on
# top at the box's centre (the pixel display_point picks, less the origin). null when the element
# is in a frame of its own: its box and window would be the frame's, so locate asks the page
# (_where_in_frame), as it does when nothing is found here.
_WHERE = f"""(els) => {{
  if (!els.length) return {{matches: 0}};
  const el = els[0], view = el.ownerDocument.defaultView;
  if (!view || view !== view.top) return null;
  const r = el.getBoundingClientRect();
  return {{matches: els.length, box: {{x: r.x, y: r.y, width: r.width, height: r.height}},
          covered_by: ({_COVERED})(el, Math.trunc(r.x + r.width / 2), Math.trunc(r.y + r.height / 2)),
          window: {{screenX, screenY, outerWidth, outerHeight, innerWidth, innerHeight}}}};
}}"""


async def locate(page, target: Target, timeout_ms: int) -> Located:
    """Find the element, scroll it into view and say where it is on the display. Raises
    NotFound (nothing matches in time) or BadSelector (a selector the browser cannot parse)."""
    locator = locator_for(page, target)
    try:
        await locator.first.wait_for(state="visible", timeout=timeout_ms)
    except Exception as exc:
        _raise_for(exc, target, timeout_ms)
    element = locator.first
    # Playwright's scroll waits for the element to stand still (two animation frames): a pixel
    # taken from a moving element would miss it.
    await element.scroll_into_view_if_needed(timeout=timeout_ms)
    where = await locator.evaluate_all(_WHERE)
    if where is None or not where["matches"]:  # a frame's element (a ref like f1e2 is not even seen here)
        where = await _where_in_frame(page, locator)
    if not where["matches"] or not where.get("box"):
        raise NotFound(f"no visible element for {target.describe()}")
    box = where["box"]
    origin = viewport_origin(where["window"])
    x, y = display_point(box, origin)
    display_box = {"x": origin[0] + round(box["x"]), "y": origin[1] + round(box["y"]),
                   "width": round(box["width"]), "height": round(box["height"])}
    return Located(x, y, display_box, where["matches"], where["covered_by"])


async def _where_in_frame(page, locator) -> dict:
    """_WHERE's answer for an element in a frame of its own, asked of Playwright and of the page
    (its box on the page, the page's window, what is on top there in the page)."""
    element = locator.first
    box = await element.bounding_box()
    if box is None:
        return {"matches": 0}
    window = await page.evaluate(_WINDOW)
    origin = viewport_origin(window)
    x, y = display_point(box, origin)
    handle = await element.element_handle()
    covered_by = await page.evaluate(_HIT_TEST, [handle, x - origin[0], y - origin[1]])
    await handle.dispose()
    return {"matches": await locator.count(), "box": box, "covered_by": covered_by, "window": window}


async def _present(page, selector: str | None) -> None:
    """Reading an element does not wait for it: NotFound when nothing matches now."""
    if selector and await page.locator(f"css={selector}").count() == 0:
        raise NotFound(f"no element matches selector {selector!r}")


def _raise_for(exc: Exception, target: Target, timeout_ms: int):
    """An element lookup's failure as NotFound (nothing matches) or BadSelector; a page or
    browser that closed meanwhile goes on as it is (the service says: unavailable, try again)."""
    if isinstance(exc, (NotFound, BadSelector)):
        raise exc
    text = str(exc)
    first = text.splitlines()[0] if text else type(exc).__name__
    if type(exc).__name__ == "TargetClosedError" or "has been closed" in first:
        raise exc
    if "Timeout" in type(exc).__name__ or "Timeout" in first:
        raise NotFound(f"no visible element for {target.describe()} within {timeout_ms} ms") from None
    if any(k in text for k in ("Unexpected token", "is not a valid selector", "Unknown engine", "malformed",
                                "SyntaxError", "Invalid selector", "while parsing")):
        raise BadSelector(f"{target.describe()}: the browser cannot parse it ({first})") from None
    raise NotFound(f"{target.describe()}: {first}") from None


# ------------------------------------------------------------------------------------- answers


class DialogInfo(BaseModel):
    type: str
    message: str
    default_prompt: str = ""


class Tab(BaseModel):
    id: str
    url: str
    title: str
    active: bool


class PageState(BaseModel):
    url: str | None
    title: str | None
    load_state: Literal["loading", "domcontentloaded", "load", "unknown"]
    tabs: list[Tab]
    dialog: DialogInfo | None
    dialog_policy: DialogMode = Field("manual", description="how the session answers dialogs: manual (left open), "
                                                            "accept or dismiss (at once)")
    console_errors: int = Field(description="console errors and uncaught exceptions recorded so far")


class DialogPolicy(BaseModel):
    session_id: str
    mode: DialogMode = Field(description="manual: a dialog stays open for the model or the operator to answer; "
                                         "accept / dismiss: it is answered at once (a prompt accepted with its "
                                         "default text), and recorded with how")


class PageSummary(BaseModel):
    """The short account of the page that comes with every page tool's answer."""

    url: str | None
    title: str | None
    dialog: DialogInfo | None
    new_console_errors: int = Field(0, description="console errors and uncaught exceptions since the previous "
                                                   "summary")


# Every answer of a desktop or page action carries the summary, over REST (this field) and MCP.
PAGE_FIELD = ("the visible browser after the action: url, title, the open dialog, console errors since the "
              "previous summary; null while the browser restarts")

ContentFormat = Literal["text", "accessibility", "links", "html"]


class PageContent(BaseModel):
    format: ContentFormat
    content: str | list[dict]
    truncated: bool


def bounded(text: str, limit: int = CONTENT_LIMIT) -> tuple[str, bool]:
    return (text[:limit], True) if len(text) > limit else (text, False)



# ------------------------------------------------------------------------------------- one browser


async def _error_page_committed(page, exc: Exception) -> None:
    """Chromium commits its error page (chrome-error://chromewebdata/) for a navigation that failed
    on the network a moment AFTER Playwright has reported the failure; a navigation started in that
    moment fails too, "interrupted by another navigation". So a failed navigation is reported once
    its error page is there (waiting at most ERROR_PAGE_S). An aborted one (net::ERR_ABORTED: a
    download, a navigation replaced by another) leaves no error page to wait for."""
    message = str(exc)
    if "net::ERR_" not in message or "net::ERR_ABORTED" in message:
        return
    deadline = time.monotonic() + ERROR_PAGE_S
    while not page.url.startswith("chrome-error://") and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


class Pages:
    """The pages (tabs) of one browser process: recording into the session's PageRecord, the tab
    in front, the open dialog. Every method runs on the Playwright driver's loop (desktop.browser.chromium)."""

    def __init__(self, context, record: PageRecord, downloads,
                 window_title: Callable[[], Awaitable[str | None]] | None = None, blocks=None):
        self.context = context
        self.record = record
        # The session's policy proxy's record of what it refused (desktop.network.policy.BlockLog), to
        # mark those requests ``blocked: "policy"`` in the network log.
        self.blocks = blocks
        self.downloads = downloads
        # The title of the browser window in front, as the window manager shows it: "<the active
        # tab's title> - Chromium" (desktop.browser.chromium reads it from X).
        self.window_title = window_title
        self.dialog = None                     # the open JavaScript dialog, if any
        # page -> the record's entry of the dialog left open on it, until someone answers it
        self._unanswered: dict[Any, int] = {}
        # (page, future) of operations that stop waiting when a dialog opens on their page and holds it
        self._held: list[tuple[Any, asyncio.Future]] = []
        self._ids: dict[Any, str] = {}
        self._load: dict[Any, str] = {}
        self._cdp: dict[Any, Any] = {}         # page -> this layer's own DevTools session on it
        self._recent: list = []                # pages, the most recently brought to the front last
        self._requests: dict[Any, tuple[int, float]] = {}   # request -> its entry's seq and start
        self._next_id = 1
        self._recorders = False
        self._recording(True)
        # Playwright dismisses dialogs nobody listens for. On a visible desktop a dialog is part of
        # what the model and the operator see and answer, so: listen, record, and leave it open or
        # answer it as the session's dialog policy says.
        context.on("dialog", self._on_dialog)
        context.on("page", self._on_page)
        for page in context.pages:
            self._on_page(page)

    # ---------------------------------------------------------------- recording

    def _recording(self, on: bool) -> None:
        """Attach (or detach) the console and network recorders. Playwright's driver sends these
        events over the pipe only while the context has a listener for them (but uncaught errors and
        a navigation's own request), so detached they cost a page load next to nothing. Always on
        in service; off only for the benchmark's comparison of page loads with and without
        recording (tests/bench_page.py)."""
        if on == self._recorders:
            return  # attached twice, each event would be recorded twice
        self._recorders = on
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

    def _on_page(self, page) -> None:
        self._ids[page] = f"t{self._next_id}"
        self._next_id += 1
        self._load[page] = "loading"
        self._recent.append(page)  # a tab opens in front (a link to a new tab, window.open, new_tab)
        page.on("domcontentloaded", lambda: self._load.__setitem__(page, "domcontentloaded"))
        page.on("load", lambda: self._load.__setitem__(page, "load"))
        page.on("framenavigated", lambda frame: frame == page.main_frame and self._load.__setitem__(page, "loading"))
        page.on("download", self._on_download)
        page.on("close", lambda: self._forget(page))
        asyncio.ensure_future(self._watch(page))

    def _forget(self, page) -> None:
        for known in (self._ids, self._load, self._cdp):
            known.pop(page, None)
        if page in self._recent:
            self._recent.remove(page)
        if self.dialog is not None and self.dialog.page is page:
            self.dialog = None
        self._unanswered.pop(page, None)

    def _activated(self, page) -> None:
        if page in self._recent:
            self._recent.remove(page)
        self._recent.append(page)

    async def _watch(self, page) -> None:
        """This layer's own DevTools session on the page: a dialog answered on the screen (a click
        on its OK) closes without Playwright saying so, DevTools does; and the tab's title, as the
        tab strip shows it, is read there without running anything in the page (which a dialog
        blocks)."""
        def closed(params) -> None:
            if self.dialog is not None and self.dialog.page is page:
                self.dialog = None
            seq = self._unanswered.pop(page, None)
            if seq is not None:  # not answered through this layer: on the screen, by a click or a key
                self.record.dialogs.update(seq, handled="accepted" if params.get("result") else "dismissed",
                                           by="screen")

        try:
            session = await self.context.new_cdp_session(page)
            session.on("Page.javascriptDialogClosed", closed)
            await session.send("Page.enable")
            if not page.is_closed():
                self._cdp[page] = session
        except Exception:  # the page closed meanwhile
            pass

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
        entry = self.record.network.add({"method": request.method, "url": request.url[:4000],
                                         "resource_type": request.resource_type, "status": None,
                                         "duration_ms": None, "size": None, "failure": None, "blocked": None})
        self._requests[request] = (entry["seq"], entry["ts"])
        if len(self._requests) > NETWORK_RING:  # requests that never end (long polls) must not pile up
            self._requests.pop(next(iter(self._requests)))

    def _on_response(self, response) -> None:
        # The status is known when the headers arrive: a body the page never reads (a fetch whose
        # response is only looked at for its status) may never "finish".
        seq, started = self._requests.get(response.request, (None, 0))
        if seq is not None:
            size = response.headers.get("content-length")
            # A plain-HTTP request the policy refused gets the proxy's 403.
            blocked = self._blocked(response.request, started) if response.status == 403 else None
            self.record.network.update(seq, status=response.status, size=int(size) if size and size.isdigit() else None,
                                       **({"blocked": blocked} if blocked else {}))

    def _on_request_finished(self, request) -> None:
        seq, _ = self._requests.pop(request, (None, 0))
        if seq is not None:
            self.record.network.update(seq, duration_ms=_duration(request))

    def _on_request_failed(self, request) -> None:
        seq, started = self._requests.pop(request, (None, 0))
        if seq is not None:
            # An HTTPS or WebSocket connection the policy refused fails as a refused tunnel.
            self.record.network.update(seq, failure=request.failure or "failed", duration_ms=_duration(request),
                                       blocked=self._blocked(request, started))

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

    async def _on_dialog(self, dialog) -> None:
        mode = self.record.dialog_policy
        entry = self.record.dialogs.add({"type": dialog.type, "message": dialog.message[:10_000],
                                         "default_prompt": dialog.default_value,
                                         "url": dialog.page.url if dialog.page else "",
                                         "handled": None, "by": None, "failure": None})
        if mode == "manual":
            self.dialog = dialog
            self._unanswered[dialog.page] = entry["seq"]
            for page, held in self._held:
                if page is dialog.page and not held.done():
                    held.set_result(dialog)
            return
        # Recorded before it is answered: the dialog's closing (above, in _watch) must find it answered.
        self.record.dialogs.update(entry["seq"], handled="accepted" if mode == "accept" else "dismissed",
                                   by="policy")
        try:
            if mode == "accept":
                # What OK does: a prompt gives the text its field holds, the default.
                await dialog.accept(dialog.default_value)
            else:
                await dialog.dismiss()
        except Exception as exc:  # the page or the browser went away meanwhile
            self.record.dialogs.update(entry["seq"], failure=_first_line(exc))

    async def _unless_held(self, page, work: Awaitable[T]) -> T:
        """``work``, unless a dialog left open on ``page`` holds it up first: a navigation away from
        a page that asks before leaving (beforeunload), a page that opens an alert as it loads, an
        expression that calls confirm(). Then DialogOpen at once, rather than a wait for a timeout
        that only an answer can end; the work goes on, and finishes if the dialog is accepted."""
        task = asyncio.ensure_future(work)
        held = asyncio.get_running_loop().create_future()
        waiting = (page, held)
        self._held.append(waiting)
        try:
            await asyncio.wait({task, held}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the caller's own timeout: the work ends with it
            task.cancel()
            raise
        finally:
            self._held.remove(waiting)
            held.cancel()
        if task.done():
            return task.result()
        task.add_done_callback(lambda done: done.cancelled() or done.exception())  # its outcome is nobody's now
        dialog = held.result()
        raise DialogOpen(f"a {dialog.type} dialog opened ({dialog.message[:200]!r}) and holds the page; answer it "
                         "(page dialog: accept or dismiss)" + (": accepting leaves the page, dismissing stays"
                                                               if dialog.type == "beforeunload" else ""))

    async def _on_download(self, download) -> None:
        name = safe_file_name(download.suggested_filename)
        try:
            source = await download.path()
            stored = await asyncio.to_thread(store_download, source, self.downloads, name)
        except Exception as exc:
            self.record.downloads.add({"name": name, "size": 0, "sha256": None, "url": download.url,
                                       "failure": (str(exc).splitlines() or [type(exc).__name__])[0]})
            return
        try:
            await download.delete()  # Playwright's own copy, under .incoming
        except Exception:
            pass
        self.record.downloads.add({**stored, "url": download.url, "failure": None})

    # ---------------------------------------------------------------- reading

    def open_pages(self) -> list:
        return [p for p in self.context.pages if not p.is_closed()]

    async def front(self):
        """The tab a person sees. Every tab's document says it is visible (Playwright's focus
        emulation keeps them so), so the browser window's own title decides: it is the active tab's
        title. Among tabs of the same title, and when the window in front is not the browser's,
        the one most recently brought to the front wins. A page with an open dialog is in front."""
        pages = self.open_pages()
        if len(pages) <= 1:
            return pages[0] if pages else None
        if self.dialog is not None and self.dialog.page in pages:
            return self.dialog.page
        recent = [p for p in reversed(self._recent) if p in pages] + [p for p in pages if p not in self._recent]
        shown = await self.window_title() if self.window_title else None
        if shown is not None:
            titles = await asyncio.gather(*(self._title(p) for p in recent))
            matching = [p for p, title in zip(recent, titles) if title == shown]
            if matching:
                self._activated(matching[0])  # a tab switched by real input (a click on the tab strip)
                return matching[0]
        return recent[0]

    def tab_id(self, page) -> str:
        return self._ids.get(page, "?")

    def page_by_id(self, tab_id: str):
        for page, known in self._ids.items():
            if known == tab_id and not page.is_closed():
                return page
        raise NotFound(f"no tab {tab_id!r}; list the tabs to see which exist")

    async def _title(self, page) -> str:
        """The tab's title as the tab strip shows it (the URL when the page has none), read over
        DevTools without running anything in the page."""
        session = self._cdp.get(page)
        try:
            if session is not None:
                return (await asyncio.wait_for(session.send("Target.getTargetInfo"), 1))["targetInfo"]["title"]
            if self.dialog is None or self.dialog.page is not page:
                return await asyncio.wait_for(page.title(), 1) or page.url
        except Exception:
            pass
        return ""

    async def tabs(self, front=None) -> list[Tab]:
        front = front or await self.front()
        pages = self.open_pages()
        titles = await asyncio.gather(*(self._title(p) for p in pages))
        return [Tab(id=self.tab_id(p), url=p.url, title=title, active=p is front) for p, title in zip(pages, titles)]

    async def state(self) -> PageState:
        front = await self.front()
        tabs = await self.tabs(front)
        errors = len(self.record.console.since(0, lambda e: e["level"] == "error"))
        dialog = self.dialog
        return PageState(
            url=front.url if front else None,
            title=next((t.title for t in tabs if t.active), None) if front else None,
            load_state=self._load.get(front, "unknown") if front else "unknown",
            tabs=tabs,
            dialog=DialogInfo(type=dialog.type, message=dialog.message, default_prompt=dialog.default_value)
            if dialog is not None else None,
            dialog_policy=self.record.dialog_policy,
            console_errors=errors,
        )

    async def summary(self) -> PageSummary:
        front = await self.front()
        dialog = self.dialog
        return PageSummary(url=front.url if front else None, title=await self._title(front) if front else None,
                           dialog=DialogInfo(type=dialog.type, message=dialog.message,
                                             default_prompt=dialog.default_value) if dialog is not None else None)

    # ---------------------------------------------------------------- operations on the tab in front

    async def need_front(self):
        page = await self.front()
        if page is None:
            page = await self.context.new_page()
        return page

    def refuse_if_dialog(self, doing: str) -> None:
        if self.dialog is not None:
            raise DialogOpen(f"a {self.dialog.type} dialog is open ({self.dialog.message[:200]!r}): it would swallow "
                             f"the {doing}; answer it first (page dialog: accept or dismiss)")

    async def content(self, fmt: ContentFormat, selector: str | None) -> PageContent:
        page = await self.need_front()
        self.refuse_if_dialog("read")
        root = page.locator(f"css={selector}").first if selector else page.locator("body")
        try:
            await _present(page, selector)
            if fmt == "text":
                text, cut = bounded(await root.inner_text(timeout=5000))
                return PageContent(format=fmt, content=text, truncated=cut)
            if fmt == "accessibility":
                text, cut = bounded(await root.aria_snapshot(mode="ai", timeout=5000))
                return PageContent(format=fmt, content=text, truncated=cut)
            if fmt == "html":
                text, cut = bounded(await root.evaluate("e => e.outerHTML", timeout=5000))
                return PageContent(format=fmt, content=text, truncated=cut)
            links = await root.evaluate(
                "(e, n) => Array.from(e.querySelectorAll('a[href]')).slice(0, n + 1).map("
                "a => ({text: (a.innerText || a.title || '').trim().slice(0, 300), href: a.href}))", LINKS_LIMIT)
            return PageContent(format=fmt, content=links[:LINKS_LIMIT], truncated=len(links) > LINKS_LIMIT)
        except Exception as exc:
            _raise_for(exc, Target(selector=selector) if selector else Target(selector="body"), 5000)

    async def navigate(self, how: str, url: str | None, wait_until: str, timeout_ms: int) -> dict:
        page = await self.need_front()
        self.refuse_if_dialog("navigation")  # the page cannot leave while it waits for the answer
        start = time.perf_counter()
        dialogs_before = self.record.dialogs.last_seq
        go = {"goto": lambda: page.goto(url, wait_until=wait_until, timeout=timeout_ms),
              "back": lambda: page.go_back(wait_until=wait_until, timeout=timeout_ms),
              "forward": lambda: page.go_forward(wait_until=wait_until, timeout=timeout_ms),
              "reload": lambda: page.reload(wait_until=wait_until, timeout=timeout_ms)}[how]
        try:
            response = await self._unless_held(page, go())
        except DialogOpen:
            raise
        except Exception as exc:
            await _error_page_committed(page, exc)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            verb = "open" if how == "goto" else f"go {how}" if how != "reload" else "reload"
            if self.record.dialogs.since(dialogs_before, lambda e: e["type"] == "beforeunload" and e["by"] == "policy"
                                         and e["handled"] == "dismissed"):
                raise Refused(f"Chromium did not {verb}{' ' + url if url else ''}: the page asked before leaving "
                                 "(a beforeunload dialog) and the session's dialog policy, dismiss, stayed") from None
            if "Timeout" in first or "Timeout" in type(exc).__name__:
                raise PageTimeout(f"{url or how}: not {wait_until} within {timeout_ms} ms") from None
            raise Refused(f"Chromium could not {verb}{' ' + url if url else ''}: {first}") from None
        return {"status": response.status if response else None, "url": page.url,
                "load_time_ms": round((time.perf_counter() - start) * 1000)}

    async def wait_for(self, target: Target, state: str, timeout_ms: int) -> dict:
        page = await self.need_front()
        self.refuse_if_dialog("wait")  # nothing changes in a page while its dialog is open
        start = time.perf_counter()
        try:
            await self._unless_held(page, locator_for(page, target).first.wait_for(state=state, timeout=timeout_ms))
        except DialogOpen:
            raise
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            if "Timeout" in first or "Timeout" in type(exc).__name__:
                raise PageTimeout(f"{target.describe()} was not {state} within {timeout_ms} ms") from None
            _raise_for(exc, target, timeout_ms)
        return {"state": state, "waited_ms": round((time.perf_counter() - start) * 1000)}

    async def probe(self, target: Target, state: str, timeout_ms: int) -> dict:
        """Whether an element exists and is visible, without acting on it: waits up to ``timeout_ms``
        for ``state`` (attached, visible, hidden), then reports what is there. A visible element is
        scrolled into view so its box is on the display; its text and form value come along."""
        page = await self.need_front()
        self.refuse_if_dialog("look")
        locator = locator_for(page, target)
        try:
            await self._unless_held(page, locator.first.wait_for(state=state, timeout=timeout_ms))
        except DialogOpen:
            raise
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            if not ("Timeout" in first or "Timeout" in type(exc).__name__):
                _raise_for(exc, target, timeout_ms)
        matches = await locator.count()
        found = {"exists": matches > 0, "visible": False, "matches": matches, "box": None, "text": None,
                 "value": None}
        if not matches:
            return found
        element = locator.first
        try:
            found["visible"] = await element.is_visible()
            found["text"] = (await element.inner_text(timeout=2000))[:CONTENT_LIMIT]
            found["value"] = await element.evaluate(_VALUE, timeout=2000)
            if found["visible"]:
                await element.scroll_into_view_if_needed(timeout=2000)
                box = await element.bounding_box(timeout=2000)
                if box is not None:
                    origin = viewport_origin(await page.evaluate(_WINDOW))
                    found["box"] = {"x": origin[0] + round(box["x"]), "y": origin[1] + round(box["y"]),
                                    "width": round(box["width"]), "height": round(box["height"])}
        except Exception as exc:  # detached meanwhile: what was seen stands, the rest is unknown
            if type(exc).__name__ == "TargetClosedError":
                raise
        return found

    async def boxes(self, selectors: list[str], space: str) -> list[list[int]]:
        """The boxes [x0, y0, x1, y1] of every element each selector matches, in the pixels of the
        viewport (``page``), of the whole page (``full_page``) or of the display (``display``)."""
        page = await self.need_front()
        self.refuse_if_dialog("look")
        window = await page.evaluate(_WINDOW)
        origin = viewport_origin(window)
        found: list[list[int]] = []
        for selector in selectors:
            try:
                rects = await page.locator(f"css={selector}").evaluate_all(_RECTS)
            except Exception as exc:
                _raise_for(exc, Target(selector=selector), 0)
            for x, y, w, h, sx, sy in rects:
                if w <= 0 or h <= 0:
                    continue
                if space == "full_page":
                    x, y = x + sx, y + sy
                elif space == "display":
                    x, y = x + origin[0], y + origin[1]
                found.append([max(0, int(x)), max(0, int(y)), int(x + w + 0.999), int(y + h + 0.999)])
        return found

    async def handle_dialog(self, accept: bool, prompt_text: str | None) -> DialogInfo:
        dialog = self.dialog
        if dialog is None:
            raise NoDialog("no dialog is open")
        info = DialogInfo(type=dialog.type, message=dialog.message, default_prompt=dialog.default_value)
        seq = self._unanswered.pop(dialog.page, None)
        if seq is not None:  # before the answer: the dialog's closing must find it answered (_watch)
            self.record.dialogs.update(seq, handled="accepted" if accept else "dismissed", by="request")
        try:
            if accept:
                await dialog.accept(prompt_text) if prompt_text is not None else await dialog.accept()
            else:
                await dialog.dismiss()
        finally:
            # Only this one: the page may have opened the next dialog while the answer was on its way.
            if self.dialog is dialog:
                self.dialog = None
        return info

    async def evaluate(self, expression: str, limit: int = CONTENT_LIMIT) -> Any:
        """The expression's value as JSON. It is measured in the page, so a huge value is refused
        there instead of crossing the pipe."""
        import json

        page = await self.need_front()
        self.refuse_if_dialog("script")
        try:
            handle = await asyncio.wait_for(self._unless_held(page, page.evaluate_handle(expression)), EVALUATE_S)
        except DialogOpen:
            raise
        except asyncio.TimeoutError:
            raise PageTimeout(f"the expression did not finish within {EVALUATE_S} s") from None
        except Exception as exc:
            raise Refused(f"the expression failed: {_first_line(exc)}") from None
        try:
            answer = await asyncio.wait_for(handle.evaluate(_AS_JSON, limit), EVALUATE_S)
        except asyncio.TimeoutError:
            raise PageTimeout(f"the result could not be read within {EVALUATE_S} s") from None
        except Exception as exc:
            raise Refused(f"the result is not JSON: {_first_line(exc)}") from None
        finally:
            try:
                await handle.dispose()
            except Exception:
                pass
        if "too_large" in answer:
            raise TooLarge(f"the result is {answer['too_large']} characters of JSON; the limit is {limit}: "
                           "return less (a part, a count, a slice)")
        return json.loads(answer["json"])

    async def screenshot(self, full_page: bool, selector: str | None) -> bytes:
        page = await self.need_front()
        self.refuse_if_dialog("screenshot")
        try:
            await _present(page, selector)
            if selector:
                return await page.locator(f"css={selector}").first.screenshot(timeout=10_000)
            return await page.screenshot(full_page=full_page, timeout=10_000)
        except Exception as exc:
            _raise_for(exc, Target(selector=selector or "html"), 10_000)

    async def new_tab(self, url: str | None) -> Tab:
        page = await self.context.new_page()
        if url:
            try:
                await page.goto(url, wait_until="commit", timeout=10_000)
            except Exception as exc:
                raise Refused(f"could not open {url}: {str(exc).splitlines()[0]}") from None
        await page.bring_to_front()
        self._activated(page)
        return Tab(id=self.tab_id(page), url=page.url, title=await self._title(page), active=True)

    async def activate_tab(self, tab_id: str) -> None:
        page = self.page_by_id(tab_id)
        await page.bring_to_front()
        self._activated(page)

    async def close_tab(self, tab_id: str) -> None:
        page = self.page_by_id(tab_id)
        if len(self.open_pages()) == 1:
            await self.context.new_page()  # a browser window with no tab would close: keep one
        await page.close()


# A form field's value, or null for an element that has none.
_VALUE = "e => ('value' in e && typeof e.value === 'string') ? e.value : null"
# Each element's box in the viewport and the page's scroll offsets.
_RECTS = ("els => els.map(e => { const r = e.getBoundingClientRect(); "
          "return [r.x, r.y, r.width, r.height, window.scrollX, window.scrollY]; })")

# The value of an evaluated expression as JSON text, measured in the page.
_AS_JSON = """(value, limit) => {
  const text = JSON.stringify(value);
  if (text === undefined) return {json: 'null'};
  return text.length > limit ? {too_large: text.length} : {json: text};
}"""


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def numbered(name: str, n: int) -> str:
    """``name`` for n = 1, else ``stem-n.ext`` (pure); still a name safe_file_name leaves as it is."""
    if n == 1:
        return name
    stem, dot, ext = name.rpartition(".")
    if dot and stem and len(ext) + 12 < NAME_LIMIT:
        base, suffix = stem, f"-{n}.{ext}"
    else:
        base, suffix = name, f"-{n}"
    return base[: NAME_LIMIT - len(suffix)].rstrip(" .") + suffix


def _open_download(source: Path):
    """Chromium's file, opened following no link: its directory is the desktop user's, who could
    have put a link to a file of the server's in its place."""
    import os
    import stat

    from desktop.x11.user import open_without_links

    fd = open_without_links(source.parent, source.name)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused("the downloaded file is not a regular file")
    return os.fdopen(fd, "rb")


def store_download(source, directory, name: str) -> dict:
    """Copy a finished download into ``directory`` under ``name`` (already safe), or ``name-2``...
    when taken, and hash it. The name is claimed with an exclusive create, so two downloads of the
    same name never share a file."""
    import hashlib

    for n in itertools.count(1):
        candidate = numbered(name, n)
        try:
            out = open(directory / candidate, "xb")
        except FileExistsError:
            continue
        break
    digest, size = hashlib.sha256(), 0
    with out, _open_download(Path(source)) as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    return {"name": candidate, "size": size, "sha256": digest.hexdigest()}


def _duration(request) -> int | None:
    """Milliseconds from the request's start to the end of its response, where Chromium says."""
    end = request.timing.get("responseEnd", -1)
    return round(end) if end and end > 0 else None


class NotFound(LookupError):
    """No element (or tab) answers to what was named."""


class Refused(ValueError):
    """The page or the browser would not do what was asked (a navigation that failed, an
    expression that threw, an option that is not there); the message says why."""


class TooLarge(Refused):
    """A value larger than one answer may carry."""


class BadSelector(Refused):
    """A selector the browser cannot parse."""


class DialogOpen(RuntimeError):
    """An open JavaScript dialog would swallow the action."""


class NoDialog(RuntimeError):
    """There is no dialog to answer."""


class PageTimeout(TimeoutError):
    """What was waited for did not happen in time."""
