"""Clearing what the browser keeps between pages, without restarting it: what a test that must start
clean needs (a QA verb's ``fresh``). The session's reset (desktop.session.stack.DesktopStack.reset)
gets there too, with a new Chromium on a new profile, but ends the programs launched on the desktop,
empties the session's record and costs two to three times as long (0.7-0.9 s against a median of
0.3 s here, on a shared 2-core machine), and its new browser's first cache clear is slow (warm_up).

What is cleared, for every origin the browser has seen:

- cookies (all of them, whatever their domain: ``BrowserContext.clear_cookies``);
- each origin's storage: localStorage, IndexedDB, Cache Storage, service worker registrations,
  file systems, shared storage and storage buckets (DevTools' ``Storage.clearDataForOrigin`` with
  ``all``). DevTools has no call for every origin at once, so the origins come from three places:
  every request the session's recorder saw (``PageRecord.origins``), every frame open now, and the
  cookies' domains. A page can write the storage of an origin only once a document or worker of
  that origin has loaded, which is a request, so the list holds every origin that can have any;
- sessionStorage, which lives with a tab, not an origin: the tabs are closed and one new tab is
  left, at about:blank, with a new, empty session store;
- the HTTP cache (``Network.clearBrowserCache``; skipped when no origin was seen since the last
  clear, as nothing can be cached then);
- permissions granted through DevTools (``BrowserContext.clear_permissions``).

What is not: Chromium's HTTP authentication cache (a Basic-auth login the browser remembers), a
permission a person granted by clicking a site's permission prompt (a content setting of the
profile, which DevTools does not reach; the clean profile blocks notifications and geolocation
outright), history, and the session's settings (dialog and network policy) and record.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from desktop.browser.record import PageRecord, origin_of

if TYPE_CHECKING:
    from desktop.browser.tabs import Tabs

WARM_UP_WAIT_S = 10  # at most this long for the warm-up (warm_up) before clearing anyway


def cookie_origins(cookies: list[dict]) -> set[str]:
    """The origins a cookie jar's domains may belong to: http and https of each (pure). A cookie
    set for ``.example.com`` came from some page of that domain; its own storage is cleared too."""
    origins = set()
    for cookie in cookies:
        domain = (cookie.get("domain") or "").lstrip(".").lower()
        if domain:
            origins |= {f"http://{domain}", f"https://{domain}"}
    return origins


async def clear_state(context, tabs: Tabs, record: PageRecord, warming: asyncio.Future | None = None) -> dict:
    """Clear the browser's state (see the module's doc) and leave one tab, at about:blank, in front.
    Runs on the Playwright driver's loop; the answer: the origins cleared, the tabs closed, the
    time taken, and the tab left."""
    started = time.perf_counter()
    # A new tab first: closing the last tab of a window would close the window, and a new tab has
    # a new sessionStorage, which no DevTools call clears for an origin.
    keep = await context.new_page()
    old = [page for page in context.pages if page is not keep and not page.is_closed()]
    origins = set(record.origins)
    for page in old:
        for frame in page.frames:
            origin = origin_of(frame.url)
            if origin:
                origins.add(origin)
    origins |= cookie_origins(await context.cookies())
    if warming is not None and not warming.done():
        # The warm-up's tab must stay open until its cache clear is through: closed under it, the
        # next cache clear pays the ~5 s again (measured).
        await asyncio.wait([warming], timeout=WARM_UP_WAIT_S)
    # The old tabs go before their storage is cleared: a page still open could write it again. No
    # beforeunload: a page that asks before it is left must not hold a fresh start up.
    await asyncio.gather(*(page.close(run_before_unload=False) for page in old), return_exceptions=True)
    await keep.bring_to_front()
    tabs.activated(keep)
    cdp = await context.new_cdp_session(keep)
    try:
        await asyncio.gather(*(cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
                               for origin in sorted(origins)))
        # Only what was fetched can be cached: with no origin seen since the last clear (a new
        # session's clean profile), there is nothing to clear.
        if origins:
            await cdp.send("Network.clearBrowserCache")
    finally:
        try:
            await cdp.detach()
        except Exception:  # the tab closed meanwhile: the session went with it
            pass
    await context.clear_cookies()
    await context.clear_permissions()
    for origin in origins:  # cleared: a later visit records it again
        record.origins.pop(origin, None)
    return {"origins": sorted(origins), "closed_tabs": len(old),
            "duration_ms": round((time.perf_counter() - started) * 1000), "page": keep}


async def warm_up(context) -> None:
    """Clear the (still empty) HTTP cache once as the browser starts, in the background: Chromium's
    first cache clear after a start waits for something it sets up lazily, ~5 s on an idle browser
    here (measured; every later clear takes ~10 ms). Started at launch, it is done, or nearly, when
    the first clear_state comes, which waits for the rest of it (3.2 s once, measured right after a
    session was created). Best effort: a failure costs only that."""
    try:
        cdp = await context.new_cdp_session(context.pages[0])
        await cdp.send("Network.clearBrowserCache")
        await cdp.detach()
    except Exception:
        pass
