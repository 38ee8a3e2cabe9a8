"""One session's desktop tree, gathered: its windows (the window manager's list and stacking), what
their applications say over the session's accessibility bus (desktop.x11.atspi), and the browser's
page in front (the page layer's accessibility snapshot). desktop.tree joins them; desktop.native finds
a native target's controls in them."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable

from desktop.errors import ElementCovered
from desktop.marks import draw, native_candidates, numbered
from desktop.models import (
    DesktopTree,
    Marks,
    NativeFound,
    NativeMatch,
    NativeTarget,
    PageTree,
    TreeQuery,
    Window,
)
from desktop.native import centre, find, landed, the_one
from desktop.tree import build, merge
from desktop.x11.atspi import AccessibilityReader, AccessibilityUnavailable
from desktop.x11.screen import Screen
from desktop.x11.windows import window_number

log = logging.getLogger("glassdesk.tree")

TREE_TIMEOUT_S = 10.0   # the accessibility bus's answer for the whole desktop
PAGE_TIMEOUT_S = 5.0    # the page's snapshot
COVER_TIMEOUT_S = 1.0   # what is at a native control's middle, asked before acting on it


def read_tree(query: TreeQuery, list_windows: Callable[[], list[Window]], screen: Screen,
              accessibility: AccessibilityReader, browser_pid: int | None,
              browser_in_front: Callable[[], object | None]) -> DesktopTree:
    """The tree ``query`` asks for. ``browser_in_front``: the session's browser when it is the window
    in front (its page is read then), else None."""
    listed = list_windows()
    if query.window is not None:
        wanted = window_number(query.window)
        listed = [w for w in listed if int(w.id, 16) == wanted]
    pids = sorted({w.pid for w in listed if w.pid})
    apps, truncated, error = None, False, None
    try:
        answer = accessibility.ask({"op": "tree", "pids": pids, "max_depth": query.max_depth,
                                    "max_nodes": query.max_nodes, "visible_only": query.visible_only,
                                    "page_of": browser_pid}, TREE_TIMEOUT_S)
        apps, truncated = answer.get("apps", []), bool(answer.get("truncated"))
    except AccessibilityUnavailable as exc:
        error = f"no native nodes: {exc}"
    page = _page(browser_in_front()) if browser_pid in pids else None
    merged = merge(listed, screen.stacking(), screen.active_window(), apps, page, browser_pid)
    return build(merged, truncated=truncated or (page is not None and page.truncated),
                 interactive_only=query.interactive_only, fmt=query.format, error=error)


def _page(browser) -> PageTree | None:
    """The page in front of the browser (None: the browser is not the window in front)."""
    if browser is None:
        return None
    try:
        summary = browser.call(lambda pages: pages.summary(), PAGE_TIMEOUT_S)
        content = browser.call(lambda pages: pages.tree(), PAGE_TIMEOUT_S)
    except Exception as exc:  # a dialog open, a page navigating, a browser healing: the window without its page
        log.debug("no page in the tree: %s", exc)
        return None
    return PageTree(url=summary.url or "", title=summary.title or "", snapshot=str(content.content),
                    truncated=content.truncated)


def find_native(target: NativeTarget, list_windows: Callable[[], list[Window]], screen: Screen,
                accessibility: AccessibilityReader, browser_pid: int | None) -> NativeFound:
    """The showing controls ``target`` names now (the native windows only: the page is not read); of a
    named program, only its windows are read when its window class says which they are (the rest of the
    desktop costs the bus a call per node and cannot match)."""
    program = next((t.app for t in _chain(target) if t.app is not None), None)
    if program is not None:
        listed = list_windows()
        theirs = [w for w in listed if program.casefold() in (part.casefold() for part in w.wm_class.split("."))]
        list_windows = (lambda: theirs) if theirs else (lambda: listed)  # noqa: E731 - one listing, read once
    tree = read_tree(TreeQuery(), list_windows, screen, accessibility, browser_pid, lambda: None)
    return find(tree.windows, target, truncated=tree.truncated, error=tree.error)


def _chain(target: NativeTarget | None):
    """The target, then what it is looked for within, and so on."""
    while target is not None:
        yield target
        target = target.within


def native_target(target: NativeTarget, list_windows: Callable[[], list[Window]], screen: Screen,
                  accessibility: AccessibilityReader, browser_pid: int | None) -> NativeMatch:
    """The one control an action on ``target`` acts on (desktop.native.the_one), refused (ElementCovered)
    when something else lies over the middle of its box, where real input would land instead: another
    program's window, or a window of its own program (a dialog, a menu), which the bus tells when it
    names another control at that pixel. A bus that cannot say in time refuses nothing: the action's
    ``landed`` still says where the input went."""
    match = the_one(find_native(target, list_windows, screen, accessibility, browser_pid))
    x, y = centre(match)
    on_top = screen.pid_at(x, y)
    if match.pid is not None and on_top is not None and on_top != match.pid:
        covering = next((w for w in list_windows() if w.pid == on_top), None)
        raise ElementCovered(f"{match.role} {match.name!r} ({match.ref}) is covered at ({x}, {y}) by "
                             + (f"{covering.wm_class} {covering.title!r} ({covering.id})" if covering
                                else f"another program's window (pid {on_top})")
                             + ": bring its window to the front first (desktop focus)")
    try:
        there = accessibility.node_at(x, y, match.pid, COVER_TIMEOUT_S) if match.pid is not None else None
    except (AccessibilityUnavailable, ValueError):  # it cannot say in time: refused for nothing
        there = None
    if there is not None and landed(match, there) is False:
        raise ElementCovered(f"{match.role} {match.name!r} ({match.ref}) is covered at ({x}, {y}) by "
                             f"{there.describe()} of the same program: close or answer it first")
    return match


def read_marks(limit: int, image: bool, list_windows: Callable[[], list[Window]], screen: Screen,
               accessibility: AccessibilityReader, browser, browser_pid: int | None) -> Marks:
    """Set-of-marks now (desktop.marks): the native windows' uncovered interactive controls and the
    browser's page's, each where its own window is on top (a page's control under a native window is
    not marked); ``image``: the screen captured after them, the marks drawn on it."""
    tree = read_tree(TreeQuery(), list_windows, screen, accessibility, browser_pid, lambda: None)
    candidates = native_candidates(tree.windows, screen.pid_at)
    problems = [tree.error] if tree.error else []
    more = False
    if browser is not None and browser_pid is not None:
        try:
            read = browser.call(lambda pages: pages.marks(limit), PAGE_TIMEOUT_S)
        except Exception as exc:  # a dialog, a navigation, a healing browser: the native marks still
            problems.append(f"the page's controls were not read: {exc}")
            read = None
        if read:
            shown = [m for m in read["marks"] if screen.pid_at(m["box"][0] + m["box"][2] // 2,
                                                               m["box"][1] + m["box"][3] // 2) == browser_pid]
            candidates += [{"source": "page", "role": m.get("role"), "name": m.get("name"), "box": m["box"]}
                           for m in shown]
            more = bool(read.get("more"))
    marks, cut = numbered(candidates, limit)
    drawn = base64.b64encode(draw(screen.capture().png, marks)).decode() if image else None
    return Marks(marks=marks, truncated=cut or more, image=drawn, error="; ".join(problems) or None)
