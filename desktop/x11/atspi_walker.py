"""The session's reader of its accessibility bus: run inside the session, as its desktop user, by the
system's Python (``/usr/bin/python3``: Debian's pyatspi and gi are built for it, not for the server's
virtualenv), one process per session for the session's life (desktop.x11.atspi starts and talks to it).

Self-contained on purpose: it imports nothing of glassdesk, so it runs with ``python3 -I`` and the
session's programs (which share its account and bus) reach nothing of the server through it. It
reads one JSON request per line on stdin and writes one JSON answer per line on stdout; what it
answers is bounded by the request, and every node it hands out gets a ref (``n17``) that stays the
node's while the node (and this process) lives, for later requests to name it.

Requests: ``{"op": "tree", "pids": [..] | null, "max_depth": n, "max_nodes": n, "visible_only": b,
"cache": b, "page_of": pid | null}``: each application's windows (frames, dialogs) as node trees, read
from each program's own cache of its nodes where it keeps one (``cache``, the default), else node by
node; in process ``page_of`` (the session's browser) a web document's nodes are left out: its page is
the page layer's to read, faster and with its refs, and only its own controls are wanted here;
``{"op": "at", "x": x, "y": y, "pid": p, "page_of": pid | null}``: the deepest showing node under a
display pixel in process p's windows and the path to it (none on a web document of ``page_of``); ``{"op": "ping"}``.
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
MESSAGES_KEPT = 10_000  # kinds of call whose parameters are kept made (Bus.message): a GetText's count varies


def _readable(text: str) -> str:
    """A node's text without the object replacement characters that stand for its children in it
    (Chromium's containers are made of nothing else; the children are listed as nodes)."""
    return text.replace("\ufffc", "")


def _nick(state) -> str:
    return state.value_nick.replace("-", "_")


# The shape of at-spi2's cache (org.a11y.atspi.Cache.GetItems): each node's reference, its
# application's and its parent's, its index among its parent's children and its child count (-1:
# not said), interfaces, name, role, description and states.
CACHE_ITEMS = "(a((so)(so)(so)iiassusau))"
ROOT_PATH = "/org/a11y/atspi/accessible/root"  # an application's own node, whose children are its windows
REGISTRY = "org.a11y.atspi.Registry"  # whose root node's children are the applications
# What a node's description takes beyond the cache, by interface: its box (screen coordinates), the
# count of its text's characters, its value, the count of its actions (the text and the action
# names then, bounded by those counts). Not Action.GetActions, one call for them all: it gives the
# names localized (GTK's "Click" for "click").
DETAILS = {"Component": ("Component", "GetExtents", (0,), "(u)"), "Text": ("Text", "Get", "CharacterCount", None),
           "Value": ("Value", "Get", "CurrentValue", None), "Action": ("Action", "Get", "NActions", None)}
ATSPI = "org.a11y.atspi."


def cache_items(reply) -> list[tuple]:
    """A GetItems reply (CACHE_ITEMS) as tuples of its fields, its application's reference left out
    (None): read field by field, several times faster than GLib's generic unpacking of so many."""
    array = reply.get_child_value(0)
    items = []
    for index in range(array.n_children()):
        item = array.get_child_value(index)
        node, parent, states = item.get_child_value(0), item.get_child_value(2), item.get_child_value(9)
        items.append(((node.get_child_value(0).get_string(), node.get_child_value(1).get_string()), None,
                      (parent.get_child_value(0).get_string(), parent.get_child_value(1).get_string()),
                      item.get_child_value(3).get_int32(), item.get_child_value(4).get_int32(),
                      item.get_child_value(5).get_strv(), item.get_child_value(6).get_string(),
                      item.get_child_value(7).get_uint32(), item.get_child_value(8).get_string(),
                      [states.get_child_value(i).get_uint32() for i in range(states.n_children())]))
    return items


class Bus:
    """The accessibility bus over Gio, for what pyatspi asks one call at a time: an application's
    nodes in one call (its cache, ``org.a11y.atspi.Cache.GetItems``), and the rest many calls at once."""

    def __init__(self, Gio, GLib):
        self.Gio, self.GLib = Gio, GLib
        self.messages: dict[tuple, tuple[str, object]] = {}
        session = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        address = session.call_sync("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress", None, None,
                                    Gio.DBusCallFlags.NONE, CALL_TIMEOUT_MS, None).unpack()[0]
        self.connection = Gio.DBusConnection.new_for_address_sync(
            address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)

    def message(self, interface: str, method: str, args, signature: str | None) -> tuple[str, object]:
        """A call's interface and parameters: AT-SPI's ``interface``, or for ``method`` "Get" its
        property ``args`` through the D-Bus properties interface. Made once for each kind of call and
        kept (a tree asks the same few hundreds of times, and making a GLib.Variant through
        PyGObject's overrides costs ~0.1 ms of CPU: a sixth of the reader's for a window's tree)."""
        key = (interface, method, args, signature)
        made = self.messages.get(key)
        if made is None:
            if method == "Get":
                made = "org.freedesktop.DBus.Properties", self.GLib.Variant("(ss)", (ATSPI + interface, args))
            else:
                made = ATSPI + interface, self.GLib.Variant(signature, args) if signature else None
            if len(self.messages) < MESSAGES_KEPT:
                self.messages[key] = made
        return made

    def call(self, name: str, path: str, interface: str, method: str, args=None, signature: str | None = None):
        interface, parameters = self.message(interface, method, args, signature)
        return self.connection.call_sync(name, path, interface, method, parameters, None,
                                         self.Gio.DBusCallFlags.NONE, CALL_TIMEOUT_MS, None).unpack()

    def items(self, names: list[str]) -> dict[str, list | None]:
        """Every node each application has made, described (its cache), asked of them all at once; None
        for one that keeps none, did not answer, or answers in another shape than at-spi2's (role,
        name, states... of each, and its parent)."""
        calls = [(name, "/org/a11y/atspi/cache", "Cache", "GetItems", None, None, CACHE_ITEMS) for name in names]
        return {name: None if isinstance(reply, Exception) else cache_items(reply)
                for name, reply in zip(names, self.sent(calls))}

    def many(self, name: str, calls: list[tuple]) -> list:
        """The answers of many calls to one application, (path, interface, method, args, signature)
        each, sent at once (``sent``); a property's (asked as ("Get", prop) of its interface) is its
        value. Raises what the first failed call raised."""
        answers = []
        for call, reply in zip(calls, self.sent([(name, *call) for call in calls])):
            if isinstance(reply, Exception):
                raise reply
            answers.append(reply.unpack()[0] if call[2] == "Get" else reply.unpack())
        return answers

    def sent(self, calls: list[tuple]) -> list:
        """The replies to many calls, (name, path, interface, method, args, signature[, reply type])
        each, sent at once and waited for together: one round trip's wait for all of them, where one
        at a time each waits for its own. A call that failed answers with what it raised."""
        replies: list = [None] * len(calls)
        left = [len(calls)]

        def done(connection, result, index):
            try:
                replies[index] = connection.call_finish(result)
            except Exception as exc:  # the caller's to judge
                replies[index] = exc
            left[0] -= 1

        for index, (name, path, interface, method, args, signature, *reply) in enumerate(calls):
            interface, parameters = self.message(interface, method, args, signature)
            reply_type = self.GLib.VariantType(reply[0]) if reply else None
            self.connection.call(name, path, interface, method, parameters, reply_type, self.Gio.DBusCallFlags.NONE,
                                 CALL_TIMEOUT_MS, None, done, index)
        context = self.GLib.MainContext.default()
        while left[0]:
            context.iteration(True)
        return replies

    def prop(self, name: str, path: str, interface: str, prop: str):
        return self.call(name, path, interface, "Get", prop)[0]


NULL_PATH = "/org/a11y/atspi/null"


class Nodes:
    """An application's nodes, described, by object path: as its cache describes them (Bus.items),
    read with no call per node. Where the cache cannot say a node's children in order (it leaves
    out a menu's, or those of a container that manages its descendants; it adds a new node a moment
    after the toolkit makes it), they are asked of the node, and any child the cache lacks is
    described by calls of its own: the walk sees what a walk node by node sees."""

    def __init__(self, bus: Bus, name: str, items: list, Atspi):
        self.bus, self.name, self.Atspi = bus, name, Atspi
        self.nodes = {item[0][1]: item for item in items if item[0][0] == name}
        self.cached_children: dict[str, list[tuple[int, str]]] = {}
        for path, item in self.nodes.items():
            self.cached_children.setdefault(item[2][1], []).append((item[3], path))

    def children(self, path: str) -> list[str]:
        item = self.nodes.get(path)
        cached = sorted(self.cached_children.get(path, ()))
        if item is not None and item[4] >= 0 and [index for index, _ in cached] == list(range(item[4])):
            return [child for _, child in cached]
        children = []
        for name, child in self.bus.call(self.name, path, "Accessible", "GetChildren")[0]:
            if name != self.name or child == NULL_PATH:  # a child in another program is walked with it
                continue
            if child not in self.nodes:
                self.nodes[child] = self.asked(child)
            children.append(child)
        return children

    def asked(self, path: str) -> tuple:
        """A node the cache lacks, described by calls of its own, in the cache's shape."""
        call, prop = self.bus.call, self.bus.prop
        return ((self.name, path), None, None, -1, prop(self.name, path, "Accessible", "ChildCount"),
                call(self.name, path, "Accessible", "GetInterfaces")[0], prop(self.name, path, "Accessible", "Name"),
                call(self.name, path, "Accessible", "GetRole")[0], prop(self.name, path, "Accessible", "Description"),
                call(self.name, path, "Accessible", "GetState")[0])

    def states(self, path: str) -> list[str]:
        low, high = (list(self.nodes[path][9]) + [0, 0])[:2]
        bits = low | high << 32
        last = int(self.Atspi.StateType.LAST_DEFINED)
        return sorted(_nick(self.Atspi.StateType(bit)) for bit in range(last) if bits >> bit & 1)


class ByNode:
    """The walk's reads of a program's nodes one call at a time, through pyatspi."""

    def __init__(self, walker: Walker, pages_left_out: bool = False):
        self.walker, self.pages_left_out = walker, pages_left_out

    def states(self, node) -> list[str]:
        return self.walker.states(node)

    def describe(self, node, states: list[str]) -> dict:
        return self.walker.describe(node, states)

    def child_count(self, node) -> int:
        return node.childCount

    def children(self, node):
        return iter(node)  # each asked as the walk gets to it: a walk cut short asks no more

    def is_page(self, node) -> bool:
        return self.walker.is_page(node)


class FromCache:
    """The walk's reads of a program's nodes from its cache (Nodes), by object path: each node kept
    is outlined and listed in ``kept`` for the walker's ``fill`` to complete."""

    def __init__(self, walker: Walker, nodes: Nodes, pages_left_out: bool = False):
        self.walker, self.nodes, self.pages_left_out = walker, nodes, pages_left_out
        self.kept: list[tuple[str, dict]] = []

    def states(self, path: str) -> list[str]:
        return self.nodes.states(path)

    def describe(self, path: str, states: list[str]) -> dict:
        item = self.walker.outline(self.nodes, path, states)
        self.kept.append((path, item))
        return item

    def child_count(self, path: str) -> int:
        return self.nodes.nodes[path][4]

    def children(self, path: str) -> list[str]:
        return self.nodes.children(path)

    def is_page(self, path: str) -> bool:
        return self.nodes.nodes[path][7] == int(self.walker.Atspi.Role.DOCUMENT_WEB)


class Walker:
    def __init__(self, pyatspi, bus: Bus | None = None, Atspi=None):
        self.pyatspi = pyatspi
        self.desktop = pyatspi.Registry.getDesktop(0)
        self.bus, self.Atspi = bus, Atspi
        self.refs: dict[tuple[str, str], str] = {}
        self.next_ref = 1
        self.apps: list = []  # the applications last met (pyatspi's), and their names on the bus
        self.app_names: list[str] = []

    # ------------------------------------------------------------------ refs

    def ref(self, node) -> str:
        """The node's ref: by its name on the bus (its program's connection, its object path), which
        no other node gets while this program runs (the toolkits count object paths up)."""
        return self.ref_of((node.app.bus_name, node.path))

    def ref_of(self, key: tuple[str, str]) -> str:
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
            item["text"] = _readable(text.getText(0, min(count, TEXT_LIMIT)))
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

    def is_page(self, node) -> bool:
        """A web document (pyatspi's node): a browser's page."""
        return node.getRole() == self.pyatspi.ROLE_DOCUMENT_WEB

    # ------------------------------------------------------------------ the requests

    def applications(self) -> list:
        """The applications on the bus (pyatspi's), in the registry's order. The registry is asked for
        their names in one call and the ones met before are reused while it lists the same: pyatspi
        asks for each application by its index, a call each, a sixth of a small window's read."""
        if self.bus is not None:
            try:
                listed = [name for name, _ in self.bus.call(REGISTRY, ROOT_PATH, "Accessible", "GetChildren")[0]]
            except Exception:  # the registry did not say: asked the long way
                listed = None
            if listed is not None and listed == self.app_names:
                return self.apps
        self.apps = [app for app in self.desktop if app is not None]
        self.app_names = [app.app.bus_name for app in self.apps]
        return self.apps

    def tree(self, pids, max_depth: int, max_nodes: int, visible_only: bool, cache: bool = True,
             page_of: int | None = None) -> dict:
        """``cache``: read each application's nodes from its cache where it keeps one (Nodes; all the
        applications' asked at once), else node by node as pyatspi walks them (the same tree, slower:
        a toolkit's cache that lies is told by comparing the two). ``page_of``: the process whose web
        documents are left out (the module's docstring)."""
        budget = {"left": max_nodes, "truncated": False}
        apps, read = [], []
        for app in self.applications():
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
            apps.append({"name": app.name or "", "pid": pid, "windows": []})
            read.append((app, apps[-1]["windows"], pid == page_of))
        bus = self.bus if cache else None
        caches = bus.items([app.app.bus_name for app, _, _ in read]) if bus is not None else {}
        for app, windows, pages_left_out in read:
            items = caches.get(app.app.bus_name)
            try:
                if items and bus is not None:  # bus: no items without it (caches are asked of it)
                    cached = FromCache(self, Nodes(bus, app.app.bus_name, items, self.Atspi), pages_left_out)
                    self._walk_windows(cached, ROOT_PATH, windows, max_depth, visible_only, budget)
                    self.fill(cached.nodes, cached.kept)
                else:
                    self._walk_windows(ByNode(self, pages_left_out), app, windows, max_depth, visible_only, budget)
            except Exception as exc:  # an application that stopped answering (CALL_TIMEOUT_MS): said, not hung on
                windows.append({"error": f"it did not answer: {type(exc).__name__}: {exc}"[:300]})
        return {"apps": apps, "truncated": budget["truncated"]}

    def _walk_windows(self, source: FromCache | ByNode, app, windows: list, max_depth: int, visible_only: bool,
                      budget: dict) -> None:
        """The walked trees of an application's windows (the children of ``app``, its node as ``source``
        names it), added to ``windows``."""
        for window in source.children(app):
            if window is None:
                continue
            node = self._walk(window, 0, max_depth, visible_only, budget, source)
            if node is not None:
                windows.append(node)

    def _walk(self, node, depth: int, max_depth: int, visible_only: bool, budget: dict, source) -> dict | None:
        """A node and what it holds, as ``source`` reads them (ByNode or FromCache): showing ones only
        when ``visible_only``, within the depth and the budget of nodes; none of a web document
        where ``source.pages_left_out``."""
        if source.pages_left_out and source.is_page(node):
            return None
        states = source.states(node)
        if visible_only and "showing" not in states:
            return None
        if budget["left"] <= 0:
            budget["truncated"] = True
            return None
        budget["left"] -= 1
        item = source.describe(node, states)
        count = source.child_count(node)
        if count and depth >= max_depth:
            item["children_left"] = count
            budget["truncated"] = True
            return item
        children = []
        for child in source.children(node):
            if child is None:
                continue
            walked = self._walk(child, depth + 1, max_depth, visible_only, budget, source)
            if walked is not None:
                children.append(walked)
            if budget["left"] <= 0 and budget["truncated"]:
                break
        if children:
            item["children"] = children
        return item

    def outline(self, cached: Nodes, path: str, states: list[str]) -> dict:
        """``describe`` of a cached node but for what the cache leaves out (``fill``)."""
        node, Atspi = cached.nodes[path], self.Atspi
        role = Atspi.Role(node[7]) if node[7] < Atspi.Role.LAST_DEFINED else Atspi.Role.EXTENDED
        role_name = (Atspi.role_get_name(role) if role != Atspi.Role.EXTENDED
                     else cached.bus.call(cached.name, path, "Accessible", "GetRoleName")[0])
        item = {"ref": self.ref_of((cached.name, path)), "role": role_name, "name": (node[6] or "")[:NAME_LIMIT],
                "states": states, "box": None}
        if node[8]:
            item["description"] = node[8][:NAME_LIMIT]
        return item

    def fill(self, cached: Nodes, kept: list[tuple[str, dict]]) -> None:
        """What the cache leaves out of the outlined nodes (their box, text, value and action names),
        asked of the application in two waves of calls sent at once (Bus.many): the counts, then
        the texts and names they bound. The fields come in ``describe``'s order."""
        first = [(path, item, interface) for path, item in kept for interface in DETAILS
                 if ATSPI + interface in cached.nodes[path][5]]
        answers = cached.bus.many(cached.name, [(path, *DETAILS[interface]) for path, _, interface in first])
        second: list[tuple[dict, tuple]] = []
        for (path, item, interface), answer in zip(first, answers):
            if interface == "Component":
                x, y, width, height = answer[0]
                if x > HIDDEN and y > HIDDEN and width > 0 and height > 0:
                    item["box"] = [x, y, width, height]
            elif interface == "Value":
                item["value"] = answer
            elif interface == "Text":
                item["text"] = ""  # its place among the fields; the text itself in the second wave
                if answer > TEXT_LIMIT:
                    item["text_truncated"] = True
                second.append((item, (path, "Text", "GetText", (0, min(answer, TEXT_LIMIT)), "(ii)")))
            else:
                item["actions"] = []
                second += [(item, (path, "Action", "GetName", (i,), "(i)")) for i in range(answer)]
        for (item, call), answer in zip(second, cached.bus.many(cached.name, [call for _, call in second])):
            if call[1] == "Text":
                item["text"] = _readable(answer[0])
            else:
                item["actions"].append(answer[0])

    def at(self, x: int, y: int, pid: int, page_of: int | None = None) -> dict | None:
        """The deepest showing node under display pixel (x, y) in the windows of process ``pid`` (the
        one on top there: the bus knows nothing of stacking, so its newest window holding the point is
        taken), with the path down to it; None when none answers there (no accessibility, not
        answering), or when the point is on a web document of process ``page_of`` (the page layer's)."""
        for app in self.applications():
            if app.get_process_id() != pid or app.get_child_count() < 0:
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
                    if pid == page_of and self.is_page(node):
                        return None
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
        answer: dict[str, object]
        try:
            request = json.loads(line)
            op = request.get("op")
            start = time.monotonic()
            if op == "ping":
                answer = {"ok": True}
            elif op == "tree":
                answer = walker.tree(request.get("pids"), int(request.get("max_depth", 30)),
                                     int(request.get("max_nodes", 2000)), bool(request.get("visible_only", True)),
                                     bool(request.get("cache", True)), request.get("page_of"))
            elif op == "at":
                answer = {"node": walker.at(int(request["x"]), int(request["y"]), int(request["pid"]),
                                            request.get("page_of"))}
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
    from gi.repository import Atspi, Gio, GLib

    Atspi.set_timeout(CALL_TIMEOUT_MS, CALL_TIMEOUT_MS)  # the second: for an application just started
    try:
        bus = Bus(Gio, GLib)
    except Exception:  # no bus address to ask: every application walked node by node
        bus = None
    walker = Walker(pyatspi, bus, Atspi)
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    serve(walker, sys.stdin, write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
