"""Reading the tab in front: its text, accessibility snapshot, links or HTML, an element's presence
and boxes, an expression's value, a screenshot. Nothing here acts on the page; none of it runs
while a dialog is open (it would be swallowed, or wait for the answer)."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from desktop.browser.errors import (
    DialogOpen,
    PageTimeout,
    Refused,
    TooLarge,
    first_line,
)
from desktop.browser.locate import (
    WINDOW,
    locator_for,
    present,
    raise_for,
    viewport_origin,
)
from desktop.models import ContentFormat, PageContent, Target

if TYPE_CHECKING:
    from desktop.browser.dialogs import Dialogs
    from desktop.browser.tabs import Tabs

CONTENT_LIMIT = 200_000        # characters of text, snapshot or HTML in one answer
LINKS_LIMIT = 2000
INSPECT_LIMIT = 100           # elements an inspection describes one by one
EVALUATE_S = 10                # an expression (or its promise) that runs longer is a timeout

def bounded(text: str, limit: int = CONTENT_LIMIT) -> tuple[str, bool]:
    return (text[:limit], True) if len(text) > limit else (text, False)


# A node's box as Playwright's snapshot writes it (boxes=True): after the node's flags, before its
# text; viewport-relative CSS pixels, rounded. A text after the colon may hold the same words: only
# the first box that ends the node's key (a colon, the key's closing quote or the line's end) is it.
_BOX = re.compile(r" \[box=(-?\d+),(-?\d+),(\d+),(\d+)\](?=[:']|$)")


def boxes_on_display(snapshot: str, origin: tuple[int, int]) -> str:
    """An ARIA snapshot with boxes, each box moved from the viewport to display pixels by the
    viewport's ``origin`` on the display (pure). A box inside an ``iframe`` is the frame's own
    viewport's, wherever the frame sits (and its border): left out rather than misplaced."""
    lines: list[str] = []
    frames: list[int] = []  # the indents of the iframe nodes the line is inside
    for line in snapshot.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        while frames and indent <= frames[-1]:
            frames.pop()
        if frames:
            line = _BOX.sub("", line, count=1)
        else:
            line = _BOX.sub(lambda m: f" [box={origin[0] + int(m[1])},{origin[1] + int(m[2])},{m[3]},{m[4]}]",
                            line, count=1)
        if line.lstrip(" ").startswith("- iframe"):
            frames.append(indent)
        lines.append(line)
    return "\n".join(lines)


class Content:
    """What the tab in front holds. Every method runs on the Playwright driver's loop."""

    def __init__(self, tabs: Tabs, dialogs: Dialogs):
        self.tabs = tabs
        self.dialogs = dialogs

    async def read(self, fmt: ContentFormat, selector: str | None) -> PageContent:
        page = await self.tabs.need_front()
        self.dialogs.refuse_if_open("read")
        root = page.locator(f"css={selector}").first if selector else page.locator("body")
        try:
            await present(page, selector)
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
            raise_for(exc, Target(selector=selector) if selector else Target(selector="body"), 5000)

    async def tree(self) -> PageContent:
        """The accessibility snapshot as ``read`` gives it, with each element's box in display
        pixels (``[box=x,y,width,height]``, boxes_on_display): the page's part of the desktop tree."""
        page = await self.tabs.need_front()
        self.dialogs.refuse_if_open("read")
        try:
            snapshot, window = await asyncio.gather(
                page.locator("body").aria_snapshot(mode="ai", boxes=True, timeout=5000), page.evaluate(WINDOW))
        except Exception as exc:
            raise_for(exc, Target(selector="body"), 5000)
        text, cut = bounded(boxes_on_display(snapshot, viewport_origin(window)))
        return PageContent(format="accessibility", content=text, truncated=cut)

    async def probe(self, target: Target, state: str, timeout_ms: int) -> dict:
        """Whether an element exists and is visible, without acting on it: waits up to ``timeout_ms``
        for ``state`` (attached, visible, hidden), then reports what is there. A visible element is
        scrolled into view so its box is on the display; its text and form value come along."""
        page = await self.tabs.need_front()
        self.dialogs.refuse_if_open("look")
        locator = locator_for(page, target)
        try:
            await self.dialogs.unless_held(page, locator.first.wait_for(state=state, timeout=timeout_ms))
        except DialogOpen:
            raise
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            if not ("Timeout" in first or "Timeout" in type(exc).__name__):
                raise_for(exc, target, timeout_ms)
        matches = await locator.count()
        found = {"exists": matches > 0, "visible": False, "matches": matches, "box": None, "text": None,
                 "value": None}
        if not matches:
            return found
        element = locator.first
        try:
            found["visible"] = await element.is_visible()
            if found["visible"]:
                await element.scroll_into_view_if_needed(timeout=2000)
                box = await element.bounding_box(timeout=2000)
                if box is not None:
                    origin = viewport_origin(await page.evaluate(WINDOW))
                    found["box"] = {"x": origin[0] + round(box["x"]), "y": origin[1] + round(box["y"]),
                                    "width": round(box["width"]), "height": round(box["height"])}
            # An SVG element has no innerText (inner_text raises on it): its text content then.
            found["text"] = (await element.evaluate("e => e.innerText ?? e.textContent", timeout=2000)
                             or "")[:CONTENT_LIMIT]
            found["value"] = await element.evaluate(_VALUE, timeout=2000)
        except Exception as exc:  # detached meanwhile: what was seen stands, the rest is unknown
            if type(exc).__name__ == "TargetClosedError":
                raise
        return found

    async def inspect(self, target: Target, states: tuple[str, ...], attribute: str | None) -> dict:
        """What the target's elements are now, without waiting or acting: how many match, and for
        each (up to INSPECT_LIMIT) its text, form value (and a <select>'s selected values), classes,
        whether it has the focus and the attribute asked for; for the first match, the states asked
        for (visible, enabled, editable, checked) as Playwright decides them. What an assertion
        polls and a failure reports."""
        page = await self.tabs.need_front()
        self.dialogs.refuse_if_open("look")
        locator = locator_for(page, target)
        try:
            seen = await locator.evaluate_all(_INSPECT, [attribute, INSPECT_LIMIT])
        except Exception as exc:
            raise_for(exc, target, 0)
        seen["states"] = {}
        if seen["count"]:
            first = locator.first
            for state in states:
                try:
                    seen["states"][state] = await getattr(first, f"is_{state}")(timeout=1000)
                except Exception as exc:  # gone meanwhile, or no such state (is_checked on a <div>)
                    if type(exc).__name__ == "TargetClosedError":
                        raise
                    seen["states"][state] = None
        return seen

    async def boxes(self, selectors: list[str], space: str) -> list[list[int]]:
        """The boxes [x0, y0, x1, y1] of every element each selector matches, in the pixels of the
        viewport (``page``), of the whole page (``full_page``) or of the display (``display``)."""
        page = await self.tabs.need_front()
        self.dialogs.refuse_if_open("look")
        window = await page.evaluate(WINDOW)
        origin = viewport_origin(window)
        found: list[list[int]] = []
        for selector in selectors:
            try:
                rects = await page.locator(f"css={selector}").evaluate_all(_RECTS)
            except Exception as exc:
                raise_for(exc, Target(selector=selector), 0)
            for x, y, w, h, sx, sy in rects:
                if w <= 0 or h <= 0:
                    continue
                if space == "full_page":
                    x, y = x + sx, y + sy
                elif space == "display":
                    x, y = x + origin[0], y + origin[1]
                found.append([max(0, int(x)), max(0, int(y)), int(x + w + 0.999), int(y + h + 0.999)])
        return found

    async def evaluate(self, expression: str, limit: int = CONTENT_LIMIT) -> Any:
        """The expression's value as JSON. It is measured in the page, so a huge value is refused
        there instead of crossing the pipe."""
        import json

        page = await self.tabs.need_front()
        self.dialogs.refuse_if_open("script")
        try:
            handle = await asyncio.wait_for(self.dialogs.unless_held(page, page.evaluate_handle(expression)),
                                            EVALUATE_S)
        except DialogOpen:
            raise
        except TimeoutError:
            raise PageTimeout(f"the expression did not finish within {EVALUATE_S} s") from None
        except Exception as exc:
            raise Refused(f"the expression failed: {first_line(exc)}") from None
        try:
            answer = await asyncio.wait_for(handle.evaluate(_AS_JSON, limit), EVALUATE_S)
        except TimeoutError:
            raise PageTimeout(f"the result could not be read within {EVALUATE_S} s") from None
        except Exception as exc:
            raise Refused(f"the result is not JSON: {first_line(exc)}") from None
        finally:
            try:
                await handle.dispose()
            except Exception:
                pass
        if "too_large" in answer:
            raise TooLarge(f"the result is {answer['too_large']} characters of JSON; the limit is {limit}: "
                           "return less (a part, a count, a slice)")
        return json.loads(answer["json"])

    async def viewport(self) -> dict:
        """Where the front tab's viewport is on the display and its size (CSS px at DPR 1): what a
        caller speaking viewport pixels (Anthropic's browser toolset) maps its points through. Read
        from the window's own numbers, so it holds while a dialog is open."""
        page = await self.tabs.need_front()
        window = await page.evaluate(WINDOW)
        x, y = viewport_origin(window)
        return {"x": x, "y": y, "width": window["innerWidth"], "height": window["innerHeight"]}

    async def screenshot(self, full_page: bool, selector: str | None) -> bytes:
        page = await self.tabs.need_front()
        self.dialogs.refuse_if_open("screenshot")
        try:
            await present(page, selector)
            if selector:
                return await page.locator(f"css={selector}").first.screenshot(timeout=10_000)
            return await page.screenshot(full_page=full_page, timeout=10_000)
        except Exception as exc:
            raise_for(exc, Target(selector=selector or "html"), 10_000)


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


# inspect's look at every match: its text as Playwright's expect reads it (textContent; a form
# field's value separately), classes, focus and one attribute. Sizes are bounded: a page's text
# could be megabytes.
_INSPECT = """(els, [attribute, limit]) => ({count: els.length, elements: els.slice(0, limit).map(el => ({
  text: (el.textContent || '').slice(0, 5000),
  value: ('value' in el && ['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName)) ? String(el.value).slice(0, 5000)
         : null,
  values: el.tagName === 'SELECT' ? Array.from(el.selectedOptions).slice(0, 1000).map(o => o.value.slice(0, 5000))
          : null,
  classes: Array.from(el.classList || []).slice(0, 100),
  focused: el.getRootNode().activeElement === el,
  tag: el.tagName.toLowerCase(),
  attribute: attribute === null ? null : el.getAttribute(attribute),
}))})"""
