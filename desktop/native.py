"""Native targets found in the desktop tree (pure): the controls of the windows on the screen that a
``NativeTarget`` names (by ref, or by program, role and name, inside another control, the nth), and
the one an action acts on. Session.native_find reads the tree; this only looks in it.

Matching is the page layer's habit (Playwright's get_by_role): a role is compared whole and a name as
a case-insensitive part of it, or whole and case-sensitive with ``exact``; both whitespace-normalised.
"""

from __future__ import annotations

from collections.abc import Iterator

from desktop.errors import AmbiguousElement, ElementNotFound
from desktop.models import NativeElement, NativeFound, NativeMatch, NativeTarget, TreeNode, TreeWindow

SHOWN = 20  # matches handed back in a NativeFound


def _words(text: str | None) -> str:
    return " ".join((text or "").split())


def _role(text: str) -> str:
    return _words(text.replace("_", " ").replace("-", " ")).casefold()


def _said(node: TreeNode) -> str:
    return f"{node.role} {node.name!r}" if node.name else node.role


def _of_app(window: TreeWindow, app: str) -> bool:
    wanted = app.casefold()
    names = [window.application or "", *window.wm_class.split(".")]
    return any(name.casefold() == wanted for name in names if name)


def _walk(nodes: list[TreeNode], path: list[str]) -> Iterator[tuple[TreeNode, list[str]]]:
    for node in nodes:
        here = [*path, _said(node)]
        yield node, here
        yield from _walk(node.children, here)


def _named(node: TreeNode, target: NativeTarget) -> bool:
    if target.ref is not None:
        return node.ref == target.ref
    if target.role is not None and _role(node.role) != _role(target.role):
        return False
    if target.name is not None:
        if target.exact:
            return _words(node.name) == _words(target.name)
        return _words(target.name).casefold() in _words(node.name).casefold()
    return True


def _scopes(windows: list[TreeWindow], target: NativeTarget) -> list[tuple[TreeWindow, list[TreeNode], list[str]]]:
    """Where ``target`` is looked for: each window's nodes (of its program only, with ``app``), or
    inside each match of ``within``."""
    if target.within is None:
        return [(w, w.nodes, []) for w in windows if target.app is None or _of_app(w, target.app)]
    return [(window, node.children, path) for window, node, path in _all(windows, target.within)]


def _all(windows: list[TreeWindow], target: NativeTarget) -> list[tuple[TreeWindow, TreeNode, list[str]]]:
    found, seen = [], set()
    for window, nodes, path in _scopes(windows, target):
        for node, here in _walk(nodes, path):
            if node.ref not in seen and _named(node, target):
                seen.add(node.ref)
                found.append((window, node, here))
    if target.nth is not None:
        index = target.nth if target.nth >= 0 else len(found) + target.nth
        found = found[index:index + 1] if 0 <= index < len(found) else []
    return found


def find(windows: list[TreeWindow], target: NativeTarget, *, truncated: bool = False,
         error: str | None = None) -> NativeFound:
    """The showing controls ``target`` names among ``windows`` (the tree's, bottom to top), in order."""
    found = _all(windows, target)
    matches = [NativeMatch(**node.model_dump(exclude={"children"}), window=window.id, pid=window.pid,
                           on_top=window.on_top, application=window.application or "", path=path)
               for window, node, path in found[:SHOWN]]
    return NativeFound(target=target.describe(), count=len(found), matches=matches, truncated=truncated, error=error)


def the_one(found: NativeFound) -> NativeMatch:
    """The control an action acts on: exactly one match with a box on the screen. Raises
    ElementNotFound (none, or none on the screen) or AmbiguousElement (several: nothing is done on a guess)."""
    if found.count == 0:
        why = (f"; the accessibility bus: {found.error}" if found.error
               else "; the tree was cut at its node bound: name the program with app" if found.truncated else "")
        raise ElementNotFound(f"no control on the screen matches {found.target}{why} (read the desktop tree to see "
                              "what its programs name their controls)")
    if found.count > 1:
        listed = "; ".join(f"{m.ref}: {' > '.join(m.path[-2:])} in {m.application or m.window}"
                           for m in found.matches[:5])
        more = "; ..." if found.count > 5 else ""
        raise AmbiguousElement(f"{found.target} matches {found.count} controls ({listed}{more}): name it more "
                               "closely (app, exact, within) or pick one with nth")
    match = found.matches[0]
    if match.box is None:
        raise ElementNotFound(f"{found.target} ({match.ref}) has no box on the screen to act on")
    return match


def centre(match: NativeMatch) -> tuple[int, int]:
    """The display pixel at the middle of a control's box."""
    assert match.box is not None
    x, y, width, height = match.box
    return x + width // 2, y + height // 2


def landed(match: NativeMatch, native: NativeElement | None) -> bool | None:
    """Whether real input at the control's middle reached it: the control read under the pointer just
    before the press (desktop.session.settle.native_reads) is it or lies inside it. None: nothing was read
    there in time (the answer cannot say)."""
    if native is None:
        return None
    return native.ref == match.ref or _said(match) in native.path[:-1]


def native_result(match: NativeMatch, native: NativeElement | None) -> dict:
    """What an action on a native target answers besides its effect: the control, and whether the
    pointer landed on it."""
    return {"node": match.model_dump(exclude_none=True), "landed": landed(match, native),
            "landed_on": native.describe() if native is not None else None}
