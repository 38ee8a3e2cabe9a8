"""The calibration page: numbered targets at given display pixels, shown full screen in a tab of its
own, and what the pointer did on it, in display pixels.

glassdesk renders the page itself (``set_content`` on a new tab: no URL, no server, nothing the
network policy or the URL fences have to let through), puts the browser window in full screen over
DevTools so the targets can reach every corner of the display (the tab strip, the toolbar and the
panel would otherwise hide its top and bottom), and places each target from the viewport's origin on
the display, read off the window, so a target is where it was asked to be even if the window
manager kept the window elsewhere. The page records every press, release, move and wheel the
browser delivers, with the event's ``screenX``/``screenY``: where the input landed, as the page saw
it, at device-scale-factor 1 (Chromium's own input path, not the pixel glassdesk meant).

``hide`` gives the window its state back and closes the tab: the tab that was in front is again.
"""

from __future__ import annotations

import asyncio
import html
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from desktop.browser.errors import Refused

if TYPE_CHECKING:
    from playwright.async_api import Page

TITLE = "glassdesk calibration"
RADIUS = 22  # a target's radius, CSS px: its number stays legible in a screenshot scaled to 2/3
EVENT_LIMIT = 20_000  # the page keeps at most this many events (a model that drags for long)
FULLSCREEN_WAIT_S = 3.0

# Runs in the page: record what the pointer does, in display pixels; keep the page still (no
# context menu, no middle-click autoscroll, no selection, no scroll or zoom) so every screenshot the
# model sees is the same page.
_SCRIPT = """
window.__glassdesk_events = [];
const record = (kind) => (e) => {
  const log = window.__glassdesk_events;
  if (kind === 'move') {
    const last = log.length ? log[log.length - 1] : null;
    if (last && last.kind === 'move' && last.x === e.screenX && last.y === e.screenY) return;
  }
  if (log.length < %(limit)d) log.push({kind, x: e.screenX, y: e.screenY, button: e.button ?? 0,
                                         t: Math.round(performance.now())});
  if (kind !== 'move') e.preventDefault();
};
addEventListener('mousedown', record('down'), {capture: true});
addEventListener('mouseup', record('up'), {capture: true});
addEventListener('mousemove', record('move'), {capture: true});
addEventListener('wheel', record('wheel'), {capture: true, passive: false});
addEventListener('contextmenu', (e) => e.preventDefault(), {capture: true});
addEventListener('keydown', (e) => e.preventDefault(), {capture: true});
window.__glassdesk_place = (ox, oy) => {
  for (const el of document.querySelectorAll('.target')) {
    el.style.left = (Number(el.dataset.x) - ox - %(radius)d) + 'px';
    el.style.top = (Number(el.dataset.y) - oy - %(radius)d) + 'px';
  }
};
"""


def page_html(points: list[tuple[int, int]], labels: list[str] | None = None, radius: int = RADIUS) -> str:
    """The page: one numbered circle per point (display pixels), its centre pixel marked (pure).
    Each circle is 2*radius+1 CSS px wide, so its centre is a whole pixel: the point."""
    labels = labels or [str(i) for i in range(1, len(points) + 1)]
    size = 2 * radius + 1
    targets = "\n".join(
        f'<div class="target" data-x="{x}" data-y="{y}"><span>{html.escape(label)}</span><i></i></div>'
        for (x, y), label in zip(points, labels))
    script = _SCRIPT % {"limit": EVENT_LIMIT, "radius": radius}
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{TITLE}</title>
<style>
html, body {{ margin: 0; width: 100%; height: 100%; overflow: hidden; background: #fff; user-select: none;
             font-family: sans-serif; cursor: default; }}
.target {{ position: fixed; width: {size}px; height: {size}px; box-sizing: border-box; border-radius: 50%;
          border: 3px solid #c00; background: #ffe08a; }}
.target span {{ position: absolute; left: 0; right: 0; top: -1px; text-align: center; line-height: {size - 6}px;
               font-size: 20px; font-weight: bold; color: #000; }}
.target i {{ position: absolute; left: {radius - 3}px; top: {radius - 3}px; width: 1px; height: 1px;
            background: #c00; }}
</style></head>
<body>
{targets}
<script>{script}</script>
</body></html>"""


@dataclass
class Shown:
    """The calibration page while it is shown: its tab, and the window state to give back."""

    page: Page
    tab_id: str
    window_id: int
    state: str


WINDOW = "() => ({screenX, screenY, innerWidth, innerHeight, width: screen.width, height: screen.height})"


class Targets:
    """Shows and hides the calibration page of one browser process; reads what the pointer did.
    Every method runs on the Playwright driver's loop (desktop.browser.chromium)."""

    def __init__(self, context, tabs):
        self.context = context
        self.tabs = tabs
        self.shown: Shown | None = None

    async def show(self, points: list[tuple[int, int]], labels: list[str] | None = None) -> dict:
        if self.shown is not None:
            await self.hide()
        tab = await self.tabs.new(None)
        page = self.tabs.page_by_id(tab.id)
        await page.set_content(page_html(points, labels))
        cdp = await self.context.new_cdp_session(page)
        try:
            window = await cdp.send("Browser.getWindowForTarget")
            state = window["bounds"].get("windowState", "normal")
            self.shown = Shown(page, self.tabs.tab_id(page), window["windowId"], state)
            await cdp.send("Browser.setWindowBounds", {"windowId": window["windowId"],
                                                       "bounds": {"windowState": "fullscreen"}})
        finally:
            await cdp.detach()
        # Full screen takes a few frames: wait until the viewport is the screen (or give up and place
        # the targets in whatever the viewport is, then say which fell outside).
        deadline = asyncio.get_running_loop().time() + FULLSCREEN_WAIT_S
        while True:
            metrics = await page.evaluate(WINDOW)
            full = metrics["innerWidth"] >= metrics["width"] and metrics["innerHeight"] >= metrics["height"]
            if full or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        # A window left framed: its viewport starts below the tab strip and toolbar.
        origin = (metrics["screenX"], metrics["screenY"]) if full else await self._viewport_origin(page)
        await page.evaluate(f"() => window.__glassdesk_place({origin[0]}, {origin[1]})")
        outside = [i + 1 for i, (x, y) in enumerate(points)
                   if not (origin[0] + RADIUS <= x < origin[0] + metrics["innerWidth"] - RADIUS
                           and origin[1] + RADIUS <= y < origin[1] + metrics["innerHeight"] - RADIUS)]
        if outside:
            await self.hide()
            raise Refused(f"the calibration page could not be shown full screen (its viewport is "
                          f"{metrics['innerWidth']}x{metrics['innerHeight']} at {origin[0]},{origin[1]}): "
                          f"targets {', '.join(map(str, outside))} would be off the page")
        # Two animation frames: the targets are painted before anyone looks.
        await page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        return {"tab_id": self.shown.tab_id, "origin": list(origin),
                "viewport": [metrics["innerWidth"], metrics["innerHeight"]]}

    async def _viewport_origin(self, page) -> tuple[int, int]:
        from desktop.browser.locate import viewport_origin

        metrics = await page.evaluate("() => ({screenX, screenY, outerWidth, outerHeight, innerWidth, innerHeight})")
        return viewport_origin(metrics)

    async def events(self, since: int = 0) -> list[dict]:
        """What the pointer did on the page since the ``since``-th event: ``{kind: down|up|move|wheel,
        x, y, button, t}`` in display pixels, oldest first."""
        if self.shown is None or self.shown.page.is_closed():
            raise Refused("the calibration page is not shown")
        events = await self.shown.page.evaluate(f"() => window.__glassdesk_events.slice({int(since)})")
        return json.loads(json.dumps(events))

    async def hide(self) -> None:
        """The window's state back as it was, and the page's tab closed."""
        shown, self.shown = self.shown, None
        if shown is None or shown.page.is_closed():
            return
        cdp = await self.context.new_cdp_session(shown.page)
        try:
            # Chromium leaves full screen only for "normal"; from there the window takes its old state.
            await cdp.send("Browser.setWindowBounds", {"windowId": shown.window_id,
                                                       "bounds": {"windowState": "normal"}})
            if shown.state != "normal":
                await cdp.send("Browser.setWindowBounds", {"windowId": shown.window_id,
                                                           "bounds": {"windowState": shown.state}})
        finally:
            await cdp.detach()
        await self.tabs.close(shown.tab_id)
