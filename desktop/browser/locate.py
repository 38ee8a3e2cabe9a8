"""Where an element is on the display.

Targets: a CSS selector, an accessibility ``ref`` from a snapshot (``aria_snapshot(mode="ai")``),
a label, or visible text. ``locate`` scrolls the element into view and maps its box to display
pixels (the viewport's origin on the display, at device-scale-factor 1); the session then clicks
and types there with the same xdotool executor as every pixel action, so the operator sees it and
the trace records the pixel.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import NoReturn

from desktop.browser.errors import Ambiguous, BadSelector, NotFound
from desktop.models import Target


def locator_for(page, target: Target):
    """Playwright's locator for the target: its kind through page.locator / get_by_*, inside
    ``within``'s element, then filter(has_text) and nth, as Playwright Test would write it."""
    root = locator_for(page, target.within) if target.within is not None else page
    exact = target.exact or None  # None: Playwright's own default (a case-insensitive substring)
    if target.selector is not None:
        locator = root.locator(f"css={target.selector}")
    elif target.ref is not None:
        locator = root.locator(f"aria-ref={target.ref}")
    elif target.label is not None:
        locator = root.get_by_label(target.label, exact=exact)
    elif target.role is not None:
        locator = root.get_by_role(target.role, name=target.name, exact=exact)
    elif target.placeholder is not None:
        locator = root.get_by_placeholder(target.placeholder, exact=exact)
    elif target.test_id is not None:
        locator = root.get_by_test_id(target.test_id)
    elif target.alt is not None:
        locator = root.get_by_alt_text(target.alt, exact=exact)
    elif target.title is not None:
        locator = root.get_by_title(target.title, exact=exact)
    else:
        locator = root.get_by_text(target.text, exact=exact)
    if target.has_text is not None:
        locator = locator.filter(has_text=target.has_text)
    if target.nth is not None:
        locator = locator.last if target.nth == -1 else locator.nth(target.nth)
    return locator


def display_point(box: dict, origin: tuple[int, int]) -> tuple[int, int]:
    """The centre of an element's box (CSS px in the viewport, DPR 1) on the display (pure)."""
    return origin[0] + int(box["x"] + box["width"] / 2), origin[1] + int(box["y"] + box["height"] / 2)


def point_in(box: dict, position) -> tuple[int, int]:
    """The display pixel at ``position`` inside an element's display box (pure): an edge's middle
    1 px in (``top``, ``bottom``, ``left``, ``right``), the centre (``center`` or None), or an
    ElementPoint's CSS px from the top-left corner (DPR 1: CSS px are display px). ValueError
    when the point is outside the box: input there would land on something else."""
    x, y, width, height = box["x"], box["y"], box["width"], box["height"]
    inset_x, inset_y = min(1, width // 2), min(1, height // 2)
    edges = {None: (width // 2, height // 2), "center": (width // 2, height // 2),
             "top": (width // 2, inset_y), "bottom": (width // 2, height - 1 - inset_y),
             "left": (inset_x, height // 2), "right": (width - 1 - inset_x, height // 2)}
    if isinstance(position, str) or position is None:
        dx, dy = edges[position]
        return x + dx, y + dy
    dx = width // 2 if position.x is None else int(position.x)
    dy = height // 2 if position.y is None else int(position.y)
    if dx >= width or dy >= height:
        raise ValueError(f"position ({dx}, {dy}) is outside the element's {width}x{height} box: give a point "
                         "inside it, from its top-left corner")
    return x + dx, y + dy


def ambiguity(target: Target, matches: int, shown: list[str]) -> str:
    """What an action on a locator matching several elements says (pure)."""
    listed = ", ".join(shown) + (f" and {matches - len(shown)} more" if matches > len(shown) else "")
    return (f"{target.describe()} matches {matches} elements, not one: {listed}; say which (nth: 0 for the "
            "first, -1 for the last) or name it more narrowly; nothing was done")


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
  const cls = typeof top.className === 'string' && top.className\
 ? '.' + top.className.trim().split(/\\s+/).join('.') : '';
  return top.tagName.toLowerCase() + id + cls;
}"""

_HIT_TEST = f"([el, x, y]) => ({_COVERED})(el, x, y)"

# The window's own numbers, for viewport_origin.
WINDOW = "() => ({screenX, screenY, outerWidth, outerHeight, innerWidth, innerHeight})"

# The first few of the elements a locator matches, each as a person would point at it:
# tag#id.class "its text".
AMBIGUOUS_SHOWN = 3
_SAY = """(els) => els.slice(0, AMBIGUOUS_SHOWN).map((e) => {
  const id = e.id ? '#' + e.id : '';
  const cls = typeof e.className === 'string' && e.className.trim()
    ? '.' + e.className.trim().split(/\\s+/).join('.') : '';
  const typed = e.tagName === 'TEXTAREA' || (e.tagName === 'INPUT' && !['checkbox', 'radio', 'file', 'hidden']
    .includes(e.type));  // a checkbox's value is "on", not what a person reads
  const text = (e.innerText || (typed ? e.value : '') || '').trim().replace(/\\s+/g, ' ');
  return e.tagName.toLowerCase() + id + cls + (text ? ' "' + (text.length > 40 ? text.slice(0, 40) + '…' : text)
    + '"' : '');
})""".replace("AMBIGUOUS_SHOWN", str(AMBIGUOUS_SHOWN))

# Everything locate needs once the element is in view, in one call instead of six: how many
# elements match (and, when several, the first few), the first one's box (CSS px in the viewport),
# the window's numbers and what is on top at the box's centre (the pixel display_point picks, less
# the origin). null when the element is in a frame of its own: its box and window would be the
# frame's, so locate asks the page (_where_in_frame), as it does when nothing is found here.
_WHERE = f"""(els) => {{
  if (!els.length) return {{matches: 0}};
  const el = els[0], view = el.ownerDocument.defaultView;
  if (!view || view !== view.top) return null;
  const r = el.getBoundingClientRect();
  return {{matches: els.length, box: {{x: r.x, y: r.y, width: r.width, height: r.height}},
          shown: els.length > 1 ? ({_SAY})(els) : [],
          covered_by: ({_COVERED})(el, Math.trunc(r.x + r.width / 2), Math.trunc(r.y + r.height / 2)),
          window: {{screenX, screenY, outerWidth, outerHeight, innerWidth, innerHeight}}}};
}}"""


# How long the ready check waits for the page's next frame: a page that produces none (a busy
# main thread, a throttled window) goes the long way, whose waits have the action's timeout.
READY_FRAME_WAIT_MS = 100

# _WHERE's answer when the element needs nothing waited for or done first, in one call: it is there,
# visible as Playwright means it (checkVisibility and visibility: visible, a box of some size), in
# the viewport whole (so Playwright's scroll would not move it), standing still from one frame to
# the next (Playwright's stable) and on top at the pixel to use. null for anything else: a frame's
# element, one to wait for, to scroll to, that moves or is covered: locate then goes the long way.
_READY = f"""async (els) => {{
  const el = els[0], view = el && el.ownerDocument.defaultView;
  if (!view || view !== view.top || !el.checkVisibility() || getComputedStyle(el).visibility !== 'visible') {{
    return null;
  }}
  const box = (r) => [r.x, r.y, r.width, r.height].join();
  const before = el.getBoundingClientRect();
  if (!(before.width > 0 && before.height > 0) || before.left < 0 || before.top < 0
      || before.right > innerWidth || before.bottom > innerHeight) return null;
  const frame = await Promise.race([new Promise(requestAnimationFrame),
                                    new Promise((done) => setTimeout(done, {READY_FRAME_WAIT_MS}, null))]);
  if (frame === null || box(el.getBoundingClientRect()) !== box(before)) return null;
  const where = ({_WHERE})(els);
  return where.covered_by === null ? where : null;
}}"""


async def locate(page, target: Target, timeout_ms: int) -> Located:
    """Find the element an action is for, scroll it into view and say where it is on the display.
    Raises NotFound (nothing matches in time), Ambiguous (several match and ``nth`` does not say
    which: Playwright's strict mode) or BadSelector (a selector the browser cannot parse)."""
    locator = locator_for(page, target)
    started = time.monotonic()
    where = await _ready(locator, timeout_ms)
    if where is None:
        left_ms = max(1, timeout_ms - round((time.monotonic() - started) * 1000))
        where = await _waited_for(page, locator, target, left_ms, timeout_ms)
    if not where["matches"] or not where.get("box"):
        raise NotFound(f"no visible element for {target.describe()}")
    if where["matches"] > 1 and target.nth is None:
        shown = where.get("shown") or await locator.evaluate_all(_SAY)
        raise Ambiguous(ambiguity(target, where["matches"], shown))
    box = where["box"]
    origin = viewport_origin(where["window"])
    x, y = display_point(box, origin)
    display_box = {"x": origin[0] + round(box["x"]), "y": origin[1] + round(box["y"]),
                   "width": round(box["width"]), "height": round(box["height"])}
    return Located(x, y, display_box, where["matches"], where["covered_by"])


async def _ready(locator, timeout_ms: int) -> dict | None:
    """_READY's answer: most elements an action is for are there, in view and still, and one call
    finds that instead of three (Playwright's wait, its scroll, which waits two frames, and
    _WHERE): about half the time of the long way. Any error, or a page that does not answer
    within half the action's timeout, is the long way's to report."""
    try:
        return await asyncio.wait_for(locator.evaluate_all(_READY), timeout_ms / 2000)
    except Exception:
        return None


async def _waited_for(page, locator, target: Target, left_ms: int, timeout_ms: int) -> dict:
    """_WHERE's answer once the element is visible, scrolled into view and standing still, each
    waited for as Playwright's actions wait, for what is ``left_ms`` of the action's ``timeout_ms``."""
    try:
        await locator.first.wait_for(state="visible", timeout=left_ms)
    except Exception as exc:
        raise_for(exc, target, timeout_ms)
    # Playwright's scroll waits for the element to stand still (two animation frames): a pixel
    # taken from a moving element would miss it.
    await locator.first.scroll_into_view_if_needed(timeout=left_ms)
    where = await locator.evaluate_all(_WHERE)
    if where is None or not where["matches"]:  # a frame's element (a ref like f1e2 is not even seen here)
        where = await _where_in_frame(page, locator)
    return where


async def _where_in_frame(page, locator) -> dict:
    """_WHERE's answer for an element in a frame of its own, asked of Playwright and of the page
    (its box on the page, the page's window, what is on top there in the page)."""
    element = locator.first
    box = await element.bounding_box()
    if box is None:
        return {"matches": 0}
    window = await page.evaluate(WINDOW)
    origin = viewport_origin(window)
    x, y = display_point(box, origin)
    handle = await element.element_handle()
    covered_by = await page.evaluate(_HIT_TEST, [handle, x - origin[0], y - origin[1]])
    await handle.dispose()
    return {"matches": await locator.count(), "box": box, "covered_by": covered_by, "window": window}


async def present(page, selector: str | None) -> None:
    """Reading an element does not wait for it: NotFound when nothing matches now."""
    if selector and await page.locator(f"css={selector}").count() == 0:
        raise NotFound(f"no element matches selector {selector!r}")


def raise_for(exc: Exception, target: Target, timeout_ms: int) -> NoReturn:
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
