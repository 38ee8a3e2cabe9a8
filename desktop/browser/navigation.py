"""Moving the tab in front on (to a URL, back, forward, a reload) and waiting for an element, each
of which a dialog can hold up (desktop.browser.dialogs.Dialogs.unless_held)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from desktop.browser.errors import DialogOpen, PageTimeout, Refused
from desktop.browser.locate import locator_for, raise_for
from desktop.models import Target

if TYPE_CHECKING:
    from desktop.browser.dialogs import Dialogs
    from desktop.browser.record import PageRecord
    from desktop.browser.tabs import Tabs

ERROR_PAGE_S = 2               # at most this long for Chromium's error page after a failed navigation
PAINT_S = 1                    # at most this long for the new page's first frame (a hung renderer must not hang us)

# Resolves once the page has produced a frame: the second animation frame begins only after the
# first one (the committed page's content) has been handed to the compositor.
_TWO_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


async def painted(page) -> bool:
    """Wait (at most PAINT_S) until ``page`` has produced a frame of what it now holds. The load
    event fires before the page is painted: a screenshot of the display taken at that moment still
    shows the page before it. False when no frame came in time (a page busy in a loop)."""
    try:
        return bool(await asyncio.wait_for(page.evaluate(_TWO_FRAMES), PAINT_S))
    except Exception:  # timed out, or the page navigated again meanwhile: the display settle still follows
        return False


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


class Navigation:
    """Navigating and waiting in the tab in front. Every method runs on the Playwright driver's loop."""

    def __init__(self, tabs: Tabs, dialogs: Dialogs, record: PageRecord):
        self.tabs = tabs
        self.dialogs = dialogs
        self.record = record

    async def navigate(self, how: str, url: str | None, wait_until: str, timeout_ms: int) -> dict:
        page = await self.tabs.need_front()
        self.dialogs.refuse_if_open("navigation")  # the page cannot leave while it waits for the answer
        start = time.perf_counter()
        dialogs_before = self.record.dialogs.last_seq
        go = {"goto": lambda: page.goto(url, wait_until=wait_until, timeout=timeout_ms),
              "back": lambda: page.go_back(wait_until=wait_until, timeout=timeout_ms),
              "forward": lambda: page.go_forward(wait_until=wait_until, timeout=timeout_ms),
              "reload": lambda: page.reload(wait_until=wait_until, timeout=timeout_ms)}[how]
        try:
            response = await self.dialogs.unless_held(page, go())
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
        load_time_ms = round((time.perf_counter() - start) * 1000)
        if how == "goto":
            # The keyboard to the page, as a URL typed into the address bar leaves it: DevTools'
            # navigation leaves it wherever it was (in the address bar of a new tab), so the next
            # typing went there, not into the page's autofocused field. The API's open comes here too.
            await page.bring_to_front()
        await painted(page)
        return {"status": response.status if response else None, "url": page.url, "load_time_ms": load_time_ms}

    async def wait_for(self, target: Target, state: str, timeout_ms: int) -> dict:
        page = await self.tabs.need_front()
        self.dialogs.refuse_if_open("wait")  # nothing changes in a page while its dialog is open
        start = time.perf_counter()
        try:
            await self.dialogs.unless_held(page, locator_for(page, target).first.wait_for(state=state,
                                                                                          timeout=timeout_ms))
        except DialogOpen:
            raise
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            if "Timeout" in first or "Timeout" in type(exc).__name__:
                raise PageTimeout(f"{target.describe()} was not {state} within {timeout_ms} ms") from None
            raise_for(exc, target, timeout_ms)
        return {"state": state, "waited_ms": round((time.perf_counter() - start) * 1000)}
