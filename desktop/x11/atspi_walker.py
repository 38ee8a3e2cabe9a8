"""The session's reader of its accessibility bus: run inside the session, as its desktop user, by the
system's Python (``/usr/bin/python3``: Debian's pyatspi and gi are built for it, not for the server's
virtualenv), one process per session for the session's life (desktop.x11.atspi starts and talks to it).

Self-contained on purpose: it imports nothing of glassdesk, so it runs with ``python3 -I`` and the
session's programs (which share its account and bus) reach nothing of the server through it. It
reads one JSON request per line on stdin and writes one JSON answer per line on stdout; what it
answers is bounded by the request, and every node it hands out gets a ref (``n17``) that stays the
node's while the node (and this process) lives, for later requests to name it.

Requests: ``{"op": "tree", "pids": [..] | null, "max_depth": n, "max_nodes": n, "visible_only": b}``:
each application's windows (frames, dialogs) as node trees; ``{"op": "at", "x": x, "y": y, "pid": p}``:
the deepest showing node under a display pixel in process p's windows and the path to it; ``{"op": "ping"}``.
"""

from __future__ import annotations

import json
import sys
import time

TEXT_LIMIT = 2000  # characters of a text node's content handed out
NAME_LIMIT = 500
REFS_LIMIT = 50_000  # nodes remembered for refs; the oldest are forgotten past it
HIDDEN = -(2 ** 31)  # the box GTK gives a node that is not on the screen
DESCENT_LIMIT = 200  # nodes looked at under a container that does not say what is at a point
CALL_TIMEOUT_MS = 1000  # one call to an application; one that does not answer (stopped, busy) costs this once


def _nick(state) -> str:
    return state.value_nick.replace("-", "_")


class Walker:
    def __init__(self, pyatspi):
        self.pyatspi = pyatspi
        self.desktop = pyatspi.Registry.getDesktop(0)
        self.refs: dict[tuple[str, str], str] = {}
        self.next_ref = 1

    # ------------------------------------------------------------------ refs

    def ref(self, node) -> str:
        """The node's ref: by its name on the bus (its program's connection, its object path), which
        no other node gets while this program runs (the toolkits count object paths up)."""
        key = (node.app.bus_name, node.path)
        ref = self.refs.get(key)
        if ref is None:
            if len(self.refs) >= REFS_LIMIT:  # the oldest first (dicts keep insertion order)
                del self.refs[next(iter(self.refs))]
            ref = self.refs[key] = f"n{self.next_ref}"
            self.next_ref += 1
        return ref

    # ------------------------------------------------------------------ reading one node

    def box(self, node) -> list[int] | None:
        try:
            extents = node.queryComponent().getExtents(self.pyatspi.DESKTOP_COORDS)
        except NotImplementedError:
            return None
        if extents.x <= HIDDEN or extents.y <= HIDDEN or extents.width <= 0 or extents.height <= 0:
            return None
        return [extents.x, extents.y, extents.width, extents.height]

    def describe(self, node, states: list[str]) -> dict:
        item = {"ref": self.ref(node), "role": node.getRoleName(), "name": (node.name or "")[:NAME_LIMIT],
                "states": states, "box": self.box(node)}
        if node.description:
            item["description"] = node.description[:NAME_LIMIT]
        interfaces = set(node.get_interfaces() or ())
        if "Text" in interfaces:
            text = node.queryText()
            count = text.characterCount
            item["text"] = text.getText(0, min(count, TEXT_LIMIT))
            if count > TEXT_LIMIT:
                item["text_truncated"] = True
        if "Value" in interfaces:
            item["value"] = node.queryValue().currentValue
        if "Action" in interfaces:
            action = node.queryAction()
            item["actions"] = [action.getName(i) for i in range(action.nActions)]
        return item

    def states(self, node) -> list[str]:
        return sorted(_nick(s) for s in node.getState().getStates())

    # ------------------------------------------------------------------ the requests

    def tree(self, pids, max_depth: int, max_nodes: int, visible_only: bool) -> dict:
        budget = {"left": max_nodes, "truncated": False}
        apps = []
        for app in self.desktop:
            if app is None:
                continue
            try:
                pid = app.get_process_id()
            except Exception:  # the application went away between the listing and now
                continue
            if pids is not None and pid not in pids:
                continue
            # The first call to the application itself: one that does not answer (stopped, busy)
            # says so here, in one call's timeout, rather than in one per node.
            if app.get_child_count() < 0:
                apps.append({"name": "", "pid": pid, "windows": [
                    {"error": f"it did not answer its accessibility calls within {CALL_TIMEOUT_MS} ms"}]})
                continue
            windows = []
            try:
                for window in app:
                    if window is None:
                        continue
                    node = self._walk(window, 0, max_depth, visible_only, budget)
                    if node is not None:
                        windows.append(node)
            except Exception as exc:  # an application that stopped answering (CALL_TIMEOUT_MS): said, not hung on
                windows.append({"error": f"it did not answer: {type(exc).__name__}: {exc}"[:300]})
            apps.append({"name": app.name or "", "pid": pid, "windows": windows})
        return {"apps": apps, "truncated": budget["truncated"]}

    def _walk(self, node, depth: int, max_depth: int, visible_only: bool, budget: dict) -> dict | None:
        states = self.states(node)
        if visible_only and "showing" not in states:
            return None
        if budget["left"] <= 0:
            budget["truncated"] = True
            return None
        budget["left"] -= 1
        item = self.describe(node, states)
        count = node.childCount
        if count and depth >= max_depth:
            item["children_left"] = count
            budget["truncated"] = True
            return item
        children = []
        for child in node:
            if child is None:
                continue
            walked = self._walk(child, depth + 1, max_depth, visible_only, budget)
            if walked is not None:
                children.append(walked)
            if budget["left"] <= 0 and budget["truncated"]:
                break
        if children:
            item["children"] = children
        return item


    def at(self, x: int, y: int, pid: int) -> dict | None:
        """The deepest showing node under display pixel (x, y) in the windows of process ``pid`` (the
        one on top there: the bus knows nothing of stacking, so its newest window holding the point is
        taken), with the path down to it; None when none answers there (no accessibility, not answering)."""
        for app in self.desktop:
            if app is None or app.get_process_id() != pid or app.get_child_count() < 0:
                continue
            # The program's windows newest first: a popup menu or a dialog opened over its main
            # window holds the point too, and is the one on top there.
            for index in range(app.childCount - 1, -1, -1):
                window = app.getChildAtIndex(index)
                if window is None or "showing" not in self.states(window):
                    continue
                box = self.box(window)
                if box is None or not (box[0] <= x < box[0] + box[2] and box[1] <= y < box[1] + box[3]):
                    continue
                node, path = window, [window]
                for _ in range(64):  # a bound: a toolkit answering with a loop is not followed forever
                    inner = node.queryComponent().getAccessibleAtPoint(x, y, self.pyatspi.DESKTOP_COORDS)
                    if inner is None or inner == node:
                        # Some containers answer only for part of themselves (GTK's notebook: its
                        # tabs, not the page under a tab): their showing descendant there then.
                        chain = self._descendant_at(node, x, y, [DESCENT_LIMIT])
                        if not chain:
                            break
                        path.extend(chain[:-1])
                        inner = chain[-1]
                    node = inner
                    path.append(node)
                found = self.describe(node, self.states(node))
                found["path"] = [f"{n.getRoleName()} {n.name!r}" if n.name else n.getRoleName() for n in path]
                found["application"], found["pid"] = app.name or "", app.get_process_id()
                return found
        return None

    def _descendant_at(self, node, x: int, y: int, budget: list[int]) -> list:
        """The nodes from a child of ``node`` down to the first showing descendant whose box holds (x, y),
        topmost children first; a child whose own box does not hold it is looked into too (a notebook's
        page is the child of its tab). Empty when none does within ``budget`` nodes."""
        for index in range(node.childCount - 1, -1, -1):
            if budget[0] <= 0:
                return []
            budget[0] -= 1
            child = node.getChildAtIndex(index)
            if child is None or "showing" not in self.states(child):
                continue
            box = self.box(child)
            if box is not None and box[0] <= x < box[0] + box[2] and box[1] <= y < box[1] + box[3]:
                return [child]
            below = self._descendant_at(child, x, y, budget)
            if below:
                return [child, *below]
        return []

def serve(walker: Walker, lines, write) -> None:
    for line in lines:
        try:
            request = json.loads(line)
            op = request.get("op")
            start = time.monotonic()
            if op == "ping":
                answer = {"ok": True}
            elif op == "tree":
                answer = walker.tree(request.get("pids"), int(request.get("max_depth", 30)),
                                     int(request.get("max_nodes", 2000)), bool(request.get("visible_only", True)))
            elif op == "at":
                answer = {"node": walker.at(int(request["x"]), int(request["y"]), int(request["pid"]))}
            else:
                answer = {"error": f"unknown op {op!r}"}
            answer["ms"] = round((time.monotonic() - start) * 1000, 1)
        except Exception as exc:  # one bad answer from the bus never ends the reader
            answer = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        write(json.dumps(answer) + "\n")


def main() -> int:
    try:
        import pyatspi  # Debian's python3-pyatspi
    except ImportError as exc:
        sys.stdout.write(json.dumps({"error": f"no accessibility library: {exc}"}) + "\n")
        sys.stdout.flush()
        return 1
    from gi.repository import Atspi

    Atspi.set_timeout(CALL_TIMEOUT_MS, CALL_TIMEOUT_MS)  # the second: for an application just started
    walker = Walker(pyatspi)
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    serve(walker, sys.stdin, write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
