"""FakeDesktops and FakePages: DesktopService and PageService with no X and no browser, for the
services built over them (ComputerService, QaService, BrowserToolsetService).

Each method keeps the real one's signature (desktop/service/desktop.py, desktop/service/page.py).
What it answers is a plain attribute a test sets to the behaviour it needs; what the code under
test did is recorded. The desktop behind FakeDesktops is a FakeDesktop (tests/fakes/desktop.py):
its frames, its pointer, the actions performed on it.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from types import SimpleNamespace

from PIL import Image

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Region, Zoom, _Action
from desktop.errors import ElementNotFound, GlassdeskError, InvalidAction, InvalidSelector, OperatorInControl
from desktop.models import Acted, PageContent, Tab
from desktop.service.desktop import Shot
from tests.fakes.desktop import FakeDesktop


def one_pixel_png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (1, 1), "white").save(out, "PNG")
    return out.getvalue()


class FakePages:
    """The page layer of one tab set. Records carry a ``seq`` as the real ones do: ``since`` reads
    what came after it. The console's cursor is always 0, so a test's console lines read as
    printed during whatever the code under test did."""

    allow_evaluate = False  # as a service built without --allow-evaluate

    def __init__(self):
        self.tabs_ = [Tab(id="t1", url="http://127.0.0.1/", title="home", active=True)]
        self.console_: list[dict] = []
        self.network_: list[dict] = []
        self.downloads_: list[dict] = []
        self.dialogs_: list[dict] = []
        self.contents: dict[str, str] = {}  # the page's content by format ("accessibility", "text", ...)
        self.image = one_pixel_png()  # what a page screenshot shows
        self.absent: set[str] = set()  # selectors no element matches
        self.network_fails: GlassdeskError | None = None  # raised by network: the record cannot be read
        # What a navigation answers (or raises), given (how, url, timeout_ms).
        self.navigate_does: Callable[[str, str | None, int], dict] = \
            lambda how, url, timeout_ms: {"status": 200, "url": url}
        self.calls: list[tuple] = []  # the acts, in order: ("navigate", how, url), ("click", ref, button, count)
        self.navigations: list[int] = []  # each navigation's timeout_ms

    # ------------------------------------------------------------------ reads

    def state(self, session_id):
        active = next(t for t in self.tabs_ if t.active)
        return SimpleNamespace(title=active.title, url=active.url)

    def content(self, session_id, fmt, selector=None):
        return PageContent(format=fmt, content=self.contents.get(fmt, ""), truncated=False)

    def cursors(self, session_id):
        return 0, max((e["seq"] for e in self.network_), default=0)

    def console(self, session_id, since=0, level=None):
        return [e for e in self.console_ if e["seq"] > since and (level is None or e["level"] == level)]

    def network(self, session_id, since=0, failed_only=False):
        if self.network_fails is not None:
            raise self.network_fails

        def failed(e):
            return bool(e.get("failure")) or (e.get("status") or 0) >= 400 or bool(e.get("blocked"))

        return [e for e in self.network_ if e["seq"] > since and (not failed_only or failed(e))]

    def downloads(self, session_id):
        return list(self.downloads_)

    def dialogs(self, session_id, since=0):
        return [e for e in self.dialogs_ if e["seq"] > since]

    def tabs(self, session_id):
        return list(self.tabs_)

    def viewport(self, session_id):
        return {"x": 0, "y": 87, "width": 1920, "height": 993}

    def boxes(self, session_id, selectors, space="page"):
        for selector in selectors:
            if selector.startswith("(("):  # one the browser cannot parse
                raise InvalidSelector(f"selector {selector!r}: the browser cannot parse it")
        return []

    def screenshot(self, session_id, *, full_page=False, selector=None):
        if selector in self.absent:
            raise ElementNotFound(f"no element matches selector {selector!r}")
        return self.image

    # ------------------------------------------------------------------ acts

    def navigate(self, session_id, how, url=None, wait_until="load", timeout_ms=30_000):
        self.calls.append(("navigate", how, url))
        self.navigations.append(timeout_ms)
        return self.navigate_does(how, url, timeout_ms)

    def click(self, session_id, target, *, button="left", click_count=1, timeout_ms=5000):
        self.calls.append(("click", target.ref, button, click_count))
        return Acted(x=1, y=2, box={}, matches=1, executed=[], settle_ms=0)


class FakeDesktops:
    """The desktop service over one FakeDesktop (whatever session id is asked for), with the page
    layer as ``pages``."""

    def __init__(self, pages: FakePages | None = None, desk: FakeDesktop | None = None):
        self.pages = pages if pages is not None else FakePages()
        self.desk = desk if desk is not None else FakeDesktop("s1")
        self.refusal: GlassdeskError | None = None  # what perform raises instead of acting
        self.taken_over = False  # a person is in control: check_agent refuses
        self.blocked_host: str | None = None  # the session's network policy blocks URLs naming it
        self.screenshot_fails: GlassdeskError | None = None
        self.screen: bytes | None = None  # a fixed image screenshots show instead of the desk's frame

    def session(self, session_id=None):
        return self.desk

    def wait_ready(self, session_id, timeout_s):
        return True

    def check_agent(self, session_id):
        if self.taken_over:
            raise OperatorInControl("a person has taken over this session")

    def check_url(self, url, session=None):
        if self.blocked_host and self.blocked_host in url:
            raise InvalidAction(f"url {url!r}: the session's network policy blocks {self.blocked_host}:80 (denied)")

    def perform(self, session_id, action: _Action):
        if self.refusal is not None:
            raise self.refusal
        return self.desk.perform(action)

    def cursor(self, session_id=None):
        return self.desk.cursor()

    def screenshot(self, session_id=None, *, region: Region | None = None, scale: float = 1.0, **_) -> Shot:
        if self.screenshot_fails is not None:
            raise self.screenshot_fails
        if self.screen is not None:
            return Shot(self.desk.id, self.screen, *Image.open(io.BytesIO(self.screen)).size, region, scale)
        frame = self.desk.capture()
        if region is None:
            width, height = max(1, round(SCREEN_WIDTH * scale)), max(1, round(SCREEN_HEIGHT * scale))
            data = frame.png if scale == 1.0 else frame.scaled_png(width, height)
        else:
            width, height = max(1, round(region.width * scale)), max(1, round(region.height * scale))
            data = frame.crop_png(region, scale)
        return Shot(self.desk.id, data, width, height, region, scale)

    def zoom(self, session_id, zoom: Zoom) -> Shot:
        return self.screenshot(session_id, region=zoom.region, scale=zoom.scale)
