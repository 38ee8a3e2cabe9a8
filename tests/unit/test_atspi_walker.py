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


class FakeAtspi:
    """What the walk asks of libatspi's enumerations: a role's name, a state's nick."""

    NAMES = {23: "frame", 39: "panel", 43: "push button", 95: "document web"}

    class Role(int):
        DOCUMENT_WEB, EXTENDED, LAST_DEFINED = 95, 200, 130

    class StateType:
        LAST_DEFINED = 1

        def __init__(self, bit: int):
            self.value_nick = "showing"

    @classmethod
    def role_get_name(cls, role) -> str:
        return cls.NAMES[int(role)]


def browser_nodes() -> Nodes:
    """A browser's frame holding its toolbar's button and its page (a web document with a button)."""
    def node(path, parent, index, count, name, role):
        return ((APP, path), (APP, ROOT_PATH), (APP, parent), index, count, ["org.a11y.atspi.Accessible"], name,
                role, "", [1, 0])
    return Nodes(TableBus({}), APP, [node(ROOT_PATH, "/", 0, 1, "", 0), node("/f", ROOT_PATH, 0, 2, "page", 23),
                                     node("/reload", "/f", 0, 0, "Reload", 43), node("/doc", "/f", 1, 1, "page", 95),
                                     node("/buy", "/doc", 0, 0, "Buy", 43)], FakeAtspi)


def walked(pages_left_out: bool) -> list[str]:
    from desktop.x11.atspi_walker import FromCache, Walker

    walker = Walker.__new__(Walker)  # no pyatspi: the walk reads the cache alone
    walker.Atspi, walker.refs, walker.next_ref = FakeAtspi, {}, 1
    source = FromCache(walker, browser_nodes(), pages_left_out)
    tree = walker._walk("/f", 0, 10, True, {"left": 100, "truncated": False}, source)

    def names(node):
        return [f"{node['role']}:{node['name']}", *(n for child in node.get("children", []) for n in names(child))]
    return names(tree)


def test_the_browsers_web_document_is_left_out_of_its_walk_and_only_there():
    """The session's browser's page is the page layer's: its nodes are not walked over the bus again;
    another program's web document (an Electron app's, a help viewer's) is its only content."""
    assert walked(pages_left_out=True) == ["frame:page", "push button:Reload"]
    assert walked(pages_left_out=False) == ["frame:page", "push button:Reload", "document web:page",
                                            "push button:Buy"]
