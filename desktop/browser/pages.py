"""The page layer: what the visible Chromium knows, recorded and read over the session's one
DevTools connection (desktop.browser.chromium), and where its elements are on the display.

``Pages`` is what the rest of the code uses; it puts together one browser process's parts, each
in a module of its own job:

- record.py: the session's PageRecord (console, network, dialogs, downloads, in rings) and the
  console and network recorders
- dialogs.py: the open dialog, its answer (by request, on the screen or by the session's dialog
  policy), and the operations a dialog holds up
- downloads.py: finished downloads copied out under safe names, and recorded
- tabs.py: the tabs, the one in front, opening, switching and closing them
- navigation.py: going to a URL, back, forward, reload; waiting for an element
- state.py: clearing cookies, storage, cache and permissions for every origin, one blank tab left
- content.py: reading the page (text, snapshot, links, HTML, probe, boxes, evaluate, screenshot)
- locate.py: targets and where an element is on the display
- targets.py: the calibration page (numbered targets, full screen) and what the pointer did on it
- errors.py: the page layer's failures
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from desktop.browser.content import CONTENT_LIMIT, Content
from desktop.browser.dialogs import Dialogs, dialog_info
from desktop.browser.downloads import Downloads
from desktop.browser.errors import first_line
from desktop.browser.focus import typing_focus
from desktop.browser.hit import hit_test, page_marks
from desktop.browser.navigation import Navigation
from desktop.browser.record import PageRecord, Recorder
from desktop.browser.settle import (
    InputCount,
    InputMark,
    SettledBy,
    after_input,
    arrived,
    count_input,
    stop_counting,
)
from desktop.browser.state import clear_state, warm_up
from desktop.browser.tabs import Tabs
from desktop.browser.targets import Targets
from desktop.models import (
    ClearedState,
    ContentFormat,
    DialogInfo,
    ElementAt,
    PageContent,
    PageState,
    PageSummary,
    Tab,
    Target,
)

# The visible texts of a page, in document order: for each text, the line it is part of, the nearest
# element around it that is not a mere inline run of text (<p>Hello <b>ada</b></p> reads "Hello ada";
# TodoMVC's counter, its words in spans of their own, "1 item left"; a <label>, a link or a button
# is a text of its own, not merged into its form), read once (its innerText, so what it shows,
# never a field's value). Bounded: the text nodes walked, the texts kept and their length,
# so a huge page costs a few ms more, not seconds. Only the viewport: what was seen.
VISIBLE_TEXTS = """() => {
  const out = [], seen = new Set(), W = innerWidth, H = innerHeight;
  const PHRASING = /^(SPAN|B|I|EM|STRONG|SMALL|CODE|MARK|SUB|SUP|U|S|ABBR|TIME|FONT|Q|CITE|KBD|SAMP|VAR|BDI|BDO|DATA)$/;
  const root = document.body || document.documentElement;
  if (!root) return out;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  let walked = 0;
  while (walker.nextNode() && walked++ < 5000 && out.length < 1000) {
    let el = walker.currentNode.parentElement;
    if (!el || !walker.currentNode.nodeValue.trim()) continue;
    while (el !== root && el.parentElement && PHRASING.test(el.tagName) && getComputedStyle(el).display === 'inline')
      el = el.parentElement;
    if (seen.has(el)) continue;
    seen.add(el);
    if (/^(SCRIPT|STYLE|NOSCRIPT|TEXTAREA|OPTION|TITLE)$/.test(el.tagName) || el.isContentEditable) continue;
    const text = (el.innerText || '').replace(/\\s+/g, ' ').trim();
    if (text.length < 2 || text.length > 80) continue;
    const r = el.getBoundingClientRect();
    if (r.width < 1 || r.height < 1 || r.bottom <= 0 || r.right <= 0 || r.top >= H || r.left >= W) continue;
    if (el.checkVisibility && !el.checkVisibility({opacityProperty: true, visibilityProperty: true})) continue;
    out.push(text);
  }
  return out;
}"""


# How long a crashed tab's page may take to load again before it is left at about:blank.
REOPEN_TIMEOUT_MS = 15_000


class Pages:
    """The pages (tabs) of one browser process: recording into the session's PageRecord, the tab
    in front, the open dialog. Every method runs on the Playwright driver's loop (desktop.browser.chromium)."""

    def __init__(self, context, record: PageRecord, downloads,
                 window_title: Callable[[], Awaitable[str | None]] | None = None, blocks=None):
        self.context = context
        self.record = record
        self._recorder = Recorder(context, record, blocks)
        self._dialogs = Dialogs(record)
        self._downloads = Downloads(record, downloads)
        self._tabs = Tabs(context, self._dialogs, window_title)
        self._navigation = Navigation(self._tabs, self._dialogs, record)
        self._content = Content(self._tabs, self._dialogs)
        self._targets = Targets(context, self._tabs)
        self._recorder.attach(True)
        # Playwright dismisses dialogs nobody listens for. On a visible desktop a dialog is part of
        # what the model and the operator see and answer, so: listen, record, and leave it open or
        # answer it as the session's dialog policy says.
        context.on("dialog", self._dialogs.on_dialog)
        context.on("page", self._on_page)
        for page in context.pages:
            self._on_page(page)
        # The first cache clear after a start is slow; paid here, in the background (state.warm_up).
        self._warming = asyncio.ensure_future(warm_up(context)) if context.pages else None

    # ---------------------------------------------------------------- a page's events, to the parts

    def _on_page(self, page) -> None:
        self._tabs.opened(page)
        page.on("download", self._downloads.on_download)
        page.on("close", lambda: self._forget(page))
        page.on("crash", lambda: self._crashed(page))
        asyncio.ensure_future(self._watch(page))

    def _forget(self, page) -> None:
        self._tabs.forget(page)
        self._dialogs.forget(page)

    def _crashed(self, page) -> None:
        """A tab's renderer died (Chromium shows "Aw, Snap!"): healed as a dead Chromium is. The tab
        is opened again at its last URL in a new page (a crashed one takes no navigation), the old
        one closed; meanwhile its operations answer that the page is unavailable, not that the
        request was wrong. The session's record says so (``heals``: a run in progress gets a
        ``desktop_healed`` step), and the console shows what happened."""
        if page in self._tabs.crashed or page.is_closed():
            return
        self._tabs.crashed.add(page)
        asyncio.ensure_future(self._reopen(page, page.url))

    async def _reopen(self, crashed, url: str) -> None:
        fresh = await self.context.new_page()
        where = url
        if url and url != "about:blank":
            try:
                await fresh.goto(url, wait_until="load", timeout=REOPEN_TIMEOUT_MS)
            except Exception as exc:  # the page itself may be what crashes it: keep the tab, say so
                where = f"about:blank ({url} did not load again: {first_line(exc)})"
                await fresh.goto("about:blank")
        await fresh.bring_to_front()
        self._tabs.activated(fresh)
        try:
            await crashed.close()
        except Exception:
            pass
        self._forget(crashed)
        self.record.console.add({"level": "error", "text": f"glassdesk: the tab's page crashed and was opened "
                                                           f"again at {where}", "url": url, "line": 0})
        self.record.heals.append("tab")

    async def _watch(self, page) -> None:
        """This layer's own DevTools session on the page: a dialog answered on the screen (a click
        on its OK) closes without Playwright saying so, DevTools does; and the tab's title, as the
        tab strip shows it, is read there without running anything in the page (which a dialog
        blocks)."""
        try:
            session = await self.context.new_cdp_session(page)
            session.on("Page.javascriptDialogClosed", lambda params: self._dialogs.closed(page, params))
            await session.send("Page.enable")
            self._tabs.watched(page, session)
        except Exception:  # the page closed meanwhile
            pass

    # ---------------------------------------------------------------- reading

    async def front(self):
        return await self._tabs.front()

    async def tabs(self, front=None) -> list[Tab]:
        return await self._tabs.listing(front)

    async def state(self) -> PageState:
        front = await self.front()
        tabs = await self.tabs(front)
        errors = len(self.record.console.since(0, lambda e: e["level"] == "error"))
        dialog = self._dialogs.current
        return PageState(
            url=front.url if front else None,
            title=next((t.title for t in tabs if t.active), None) if front else None,
            load_state=self._tabs.load_state(front) if front else "unknown",
            tabs=tabs,
            dialog=dialog_info(dialog),
            dialog_policy=self.record.dialog_policy,
            console_errors=errors,
        )

    async def summary(self) -> PageSummary:
        front = await self.front()
        dialog = self._dialogs.current
        return PageSummary(url=front.url if front else None, title=await self._tabs.title(front) if front else None,
                           dialog=dialog_info(dialog))

    async def content(self, fmt: ContentFormat, selector: str | None) -> PageContent:
        return await self._content.read(fmt, selector)

    async def tree(self) -> PageContent:
        return await self._content.tree()

    async def probe(self, target: Target, state: str, timeout_ms: int) -> dict:
        return await self._content.probe(target, state, timeout_ms)

    async def inspect(self, target: Target, states: tuple[str, ...], attribute: str | None) -> dict:
        return await self._content.inspect(target, states, attribute)

    async def boxes(self, selectors: list[str], space: str) -> list[list[int]]:
        return await self._content.boxes(selectors, space)

    async def evaluate(self, expression: str, limit: int = CONTENT_LIMIT) -> Any:
        return await self._content.evaluate(expression, limit)

    async def screenshot(self, full_page: bool, selector: str | None) -> bytes:
        return await self._content.screenshot(full_page, selector)

    async def hit(self, x: int, y: int, front=None) -> ElementAt | None:
        """What is under display pixel (x, y) in the tab in front (desktop.browser.hit; ``front``
        when the caller has it); None when no tab is in front or a dialog holds it (a page with a
        dialog open runs no script)."""
        if self._dialogs.current is not None:
            return None
        if front is None:
            front = await self.front()
        return await hit_test(front, x, y) if front is not None else None

    async def texts(self) -> list[str] | None:
        """The short visible texts of the tab in front, one per element that holds text in the viewport
        (vision.perception.effects compares two readings); None with no tab in front or a dialog open."""
        if self._dialogs.current is not None:
            return None
        front = await self.front()
        if front is None:
            return None
        texts = await front.evaluate(VISIBLE_TEXTS)
        return [t for t in texts if isinstance(t, str)] if isinstance(texts, list) else None

    async def marks(self, limit: int) -> dict | None:
        """The interactive elements showing in the tab in front, boxes in display px (desktop.marks);
        None with no tab in front or a dialog open (a page with a dialog runs no script)."""
        if self._dialogs.current is not None:
            return None
        front = await self.front()
        return await page_marks(front, limit) if front is not None else None

    async def viewport(self) -> dict:
        return await self._content.viewport()

    async def after_input(self, mark: InputMark, budget_ms: int) -> SettledBy:
        return await after_input(self._tabs, self.record, self._recorder, mark, budget_ms)

    async def count_input(self, kind: Literal["keys", "presses"]) -> InputCount | None:
        return await count_input(await self.front(), kind)

    async def before_input(self, point: tuple[int, int] | None, kind: Literal["keys", "presses"] | None,
                           hit_timeout_s: float) -> tuple:
        """What an input is about to act on (``hit`` at ``point``, within ``hit_timeout_s``) and the
        page's count of its ``kind`` of input (``count_input``), read side by side: one wait on the
        page instead of two. Each is None when not asked, or what it raised; both None while a
        dialog holds the page (it runs no script: the count would wait out its bound). Presses are
        counted only for a click on an element of the page."""
        async def nothing() -> None:
            return None

        if self._dialogs.current is not None:
            return None, None
        # The tab in front, once for both: with several tabs it costs the window's title (an xdotool
        # process) and a DevTools call per tab.
        front = await self.front()
        hit = asyncio.wait_for(self.hit(*point, front), hit_timeout_s) if point is not None else nothing()
        counting = count_input(front, kind) if kind is not None else nothing()
        element, count = await asyncio.gather(hit, counting, return_exceptions=True)
        if kind == "presses" and not isinstance(element, ElementAt) and isinstance(count, InputCount):
            await stop_counting(count)  # over the browser's own frame, or no element said: nothing to count in
            count = None
        return element, count

    async def typing_focus(self) -> dict | None:
        return await typing_focus(self._tabs)

    async def arrived(self, count: InputCount, expected: int, budget_ms: int,
                      mark: InputMark | None = None) -> bool | None:
        return await arrived(count, expected, budget_ms, self.record, mark)

    # ---------------------------------------------------------------- operations on the tab in front

    async def need_front(self):
        return await self._tabs.need_front()

    def refuse_if_dialog(self, doing: str) -> None:
        self._dialogs.refuse_if_open(doing)

    async def navigate(self, how: str, url: str | None, wait_until: str, timeout_ms: int) -> dict:
        return await self._navigation.navigate(how, url, wait_until, timeout_ms)

    async def wait_for(self, target: Target, state: str, timeout_ms: int) -> dict:
        return await self._navigation.wait_for(target, state, timeout_ms)

    async def handle_dialog(self, accept: bool, prompt_text: str | None) -> DialogInfo:
        return await self._dialogs.handle(accept, prompt_text)

    async def new_tab(self, url: str | None) -> Tab:
        return await self._tabs.new(url)

    async def activate_tab(self, tab_id: str) -> None:
        await self._tabs.activate(tab_id)

    async def close_tab(self, tab_id: str) -> None:
        await self._tabs.close(tab_id)

    async def show_targets(self, points: list[tuple[int, int]], labels: list[str] | None) -> dict:
        return await self._targets.show(points, labels)

    async def target_events(self, since: int) -> list[dict]:
        return await self._targets.events(since)

    async def hide_targets(self) -> None:
        await self._targets.hide()

    async def storage_state(self) -> dict:
        """The cookies and each origin's local storage and IndexedDB, as Playwright's storage state (a login)."""
        return await self.context.storage_state(indexed_db=True)

    async def set_storage_state(self, state: dict) -> None:
        await self.context.set_storage_state(state)

    async def clear_state(self) -> ClearedState:
        done = await clear_state(self.context, self._tabs, self.record, self._warming)
        page = done.pop("page")
        tab = Tab(id=self._tabs.tab_id(page), url=page.url, title=await self._tabs.title(page), active=True)
        return ClearedState(**done, tab=tab)
