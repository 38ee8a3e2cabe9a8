"""The tabs of one browser process: their ids, their load states, the one in front, opening,
switching and closing them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from desktop.browser.errors import Crashed, NotFound, Refused
from desktop.models import Tab

if TYPE_CHECKING:
    from desktop.browser.dialogs import Dialogs


class Tabs:
    """The tabs (Playwright's pages) of one browser process. Every method runs on the Playwright
    driver's loop (desktop.browser.chromium)."""

    def __init__(self, context, dialogs: Dialogs, window_title: Callable[[], Awaitable[str | None]] | None = None):
        self.context = context
        # A page with an open dialog is in front, and runs nothing until the dialog is answered.
        self.dialogs = dialogs
        # The title of the browser window in front, as the window manager shows it: "<the active
        # tab's title> - Chromium" (desktop.browser.chromium reads it from X).
        self.window_title = window_title
        self._ids: dict[Any, str] = {}
        self._load: dict[Any, str] = {}
        self._cdp: dict[Any, Any] = {}         # page -> the page layer's own DevTools session on it
        # Pages whose renderer died, until their tab is opened again (desktop.browser.pages.Pages._crashed).
        self.crashed: set = set()
        self._recent: list = []                # pages, the most recently brought to the front last
        self._next_id = 1

    def opened(self, page) -> None:
        self._ids[page] = f"t{self._next_id}"
        self._next_id += 1
        self._load[page] = "loading"
        self._recent.append(page)  # a tab opens in front (a link to a new tab, window.open, new_tab)
        page.on("domcontentloaded", lambda: self._load.__setitem__(page, "domcontentloaded"))
        page.on("load", lambda: self._load.__setitem__(page, "load"))

        def navigated(frame) -> None:
            if frame == page.main_frame:
                self._load[page] = "loading"

        page.on("framenavigated", navigated)

    def watched(self, page, session) -> None:
        """The page layer's own DevTools session on the page (desktop.browser.pages.Pages._watch),
        where the tab's title is read."""
        if not page.is_closed():
            self._cdp[page] = session

    def devtools(self, page):
        """The page layer's own DevTools session on ``page``, or None (not watched yet, or closed)."""
        return self._cdp.get(page)

    def forget(self, page) -> None:
        for known in (self._ids, self._load, self._cdp):
            known.pop(page, None)
        self.crashed.discard(page)
        if page in self._recent:
            self._recent.remove(page)

    def activated(self, page) -> None:
        if page in self._recent:
            self._recent.remove(page)
        self._recent.append(page)

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
        dialog = self.dialogs.current
        if dialog is not None and dialog.page in pages:
            return dialog.page
        recent = [p for p in reversed(self._recent) if p in pages] + [p for p in pages if p not in self._recent]
        shown = await self.window_title() if self.window_title else None
        if shown is not None:
            titles = await asyncio.gather(*(self.title(p) for p in recent))
            matching = [p for p, title in zip(recent, titles) if title == shown]
            if matching:
                self.activated(matching[0])  # a tab switched by real input (a click on the tab strip)
                return matching[0]
        return recent[0]

    async def need_front(self):
        page = await self.front()
        if page is None:
            page = await self.context.new_page()
        if page in self.crashed:
            raise Crashed(f"the tab's page crashed ({page.url}) and is being opened again")
        return page

    def tab_id(self, page) -> str:
        return self._ids.get(page, "?")

    def page_by_id(self, tab_id: str):
        for page, known in self._ids.items():
            if known == tab_id and not page.is_closed():
                return page
        raise NotFound(f"no tab {tab_id!r}; list the tabs to see which exist")

    def load_state(self, page) -> str:
        return self._load.get(page, "unknown")

    async def title(self, page) -> str:
        """The tab's title as the tab strip shows it (the URL when the page has none), read over
        DevTools without running anything in the page."""
        session = self._cdp.get(page)
        try:
            if session is not None:
                return (await asyncio.wait_for(session.send("Target.getTargetInfo"), 1))["targetInfo"]["title"]
            dialog = self.dialogs.current
            if dialog is None or dialog.page is not page:
                return await asyncio.wait_for(page.title(), 1) or page.url
        except Exception:
            pass
        return ""

    async def listing(self, front=None) -> list[Tab]:
        front = front or await self.front()
        pages = self.open_pages()
        titles = await asyncio.gather(*(self.title(p) for p in pages))
        return [Tab(id=self.tab_id(p), url=p.url, title=title, active=p is front) for p, title in zip(pages, titles)]

    # ---------------------------------------------------------------- opening, switching, closing

    async def new(self, url: str | None) -> Tab:
        page = await self.context.new_page()
        if url:
            try:
                await page.goto(url, wait_until="commit", timeout=10_000)
            except Exception as exc:
                raise Refused(f"could not open {url}: {str(exc).splitlines()[0]}") from None
        await page.bring_to_front()
        self.activated(page)
        return Tab(id=self.tab_id(page), url=page.url, title=await self.title(page), active=True)

    async def activate(self, tab_id: str) -> None:
        page = self.page_by_id(tab_id)
        await page.bring_to_front()
        self.activated(page)

    async def close(self, tab_id: str) -> None:
        page = self.page_by_id(tab_id)
        if len(self.open_pages()) == 1:
            await self.context.new_page()  # a browser window with no tab would close: keep one
        await page.close()
