"""The accessibility reader's walk over a program's cache of its nodes (desktop/x11/atspi_walker.py),
with a bus that answers from a table: which children the cache can say in order, and which must be
asked of the node. No X, no D-Bus (the walk against real programs: tests/integration/test_desktop_tree.py)."""

from __future__ import annotations

from desktop.x11.atspi_walker import NULL_PATH, ROOT_PATH, Nodes

APP = ":1.7"


def item(path: str, parent: str, index: int, count: int, name: str = "") -> tuple:
    """A node as at-spi2's cache describes it: (self, app, parent, index, child count, interfaces,
    name, role, description, states)."""
    return ((APP, path), (APP, ROOT_PATH), (APP, parent), index, count, ["org.a11y.atspi.Accessible"], name, 0, "",
            [0, 0])


class TableBus:
    """Answers GetChildren and a node's own description from a table; counts the calls."""

    def __init__(self, children: dict[str, list[tuple[str, str]]], described: dict[str, dict] | None = None):
        self.children, self.described, self.calls = children, described or {}, []

    def call(self, name, path, interface, method, args=None, signature=None):
        self.calls.append((path, method))
        if method == "GetChildren":
            return (self.children[path],)
        return (self.described[path][method],)

    def prop(self, name, path, interface, prop):
        self.calls.append((path, prop))
        return self.described[path][prop]


def test_children_the_cache_holds_all_of_are_its_own_in_index_order_with_no_call():
    bus = TableBus({})
    nodes = Nodes(bus, APP, [item(ROOT_PATH, "/", 0, 1), item("/w", ROOT_PATH, 0, 3),
                             item("/c", "/w", 2, 0), item("/a", "/w", 0, 0), item("/b", "/w", 1, 0)], None)
    assert nodes.children(ROOT_PATH) == ["/w"] and nodes.children("/w") == ["/a", "/b", "/c"]
    assert nodes.children("/a") == [] and bus.calls == []


def test_children_the_cache_cannot_order_are_asked_of_the_node():
    """A menu's children (count -1, index -1 in GTK), a window the cache still lists after it closed,
    a child in another program and a null child: asked, and only the node's own living ones kept."""
    bus = TableBus({ROOT_PATH: [(APP, "/w")], "/menu": [(APP, "/i2"), (APP, "/i1"), (":1.9", "/x"), ("", NULL_PATH)]})
    nodes = Nodes(bus, APP, [item(ROOT_PATH, "/", 0, 1), item("/w", ROOT_PATH, 0, 0), item("/gone", ROOT_PATH, 1, 0),
                             item("/menu", "/w", 0, -1), item("/i1", "/menu", -1, 0), item("/i2", "/menu", -1, 0)],
                  None)
    assert nodes.children(ROOT_PATH) == ["/w"]
    assert nodes.children("/menu") == ["/i2", "/i1"]
    assert bus.calls == [(ROOT_PATH, "GetChildren"), ("/menu", "GetChildren")]


def test_a_child_the_cache_lacks_yet_is_described_by_calls_of_its_own():
    bus = TableBus({"/w": [(APP, "/new")]},
                   {"/new": {"ChildCount": 0, "GetInterfaces": ["org.a11y.atspi.Accessible"], "Name": "Save",
                             "GetRole": 43, "Description": "", "GetState": [1, 0]}})
    nodes = Nodes(bus, APP, [item("/w", ROOT_PATH, 0, 1)], None)
    assert nodes.children("/w") == ["/new"]
    assert nodes.nodes["/new"][6:8] == ("Save", 43) and nodes.nodes["/new"][4] == 0
    assert nodes.children("/new") == []
