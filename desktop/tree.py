"""The desktop tree (pure): the windows on the display merged with what their applications say over
the accessibility bus (desktop.x11.atspi) and the browser's page, filtered and written as text or
as OSWorld's accessibility-tree XML. Session.desktop_tree gathers the parts; this only joins them."""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree

from desktop.models import DesktopTree, PageTree, TreeNode, TreeWindow, Window

# A node a person can act on: it has an action, takes the focus or takes text.
INTERACTIVE_STATES = frozenset({"focusable", "editable"})
# What the text outline says of a node's states (the rest are in the JSON): the ones that change
# what acting on it does, or that a check asks.
TOLD_STATES = ("focused", "checked", "pressed", "selected", "expanded", "editable")
TOLD_ABSENT = ("enabled",)  # said when missing: "disabled"

# OSWorld's accessibility-tree XML (its guest's /accessibility): each node an element named by its
# role, with states, component and value in namespaces of their own.
OSWORLD_NS = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}


_NS = {key: f"{{{uri}}}" for key, uri in OSWORLD_NS.items()}  # each prefix as ElementTree spells it: {uri}


def _overlap(box: list[int] | None, window: Window) -> int:
    """The area a node's box shares with a window's geometry."""
    if box is None:
        return 0
    x, y, w, h = box
    width = min(x + w, window.x + window.width) - max(x, window.x)
    height = min(y + h, window.y + window.height) - max(y, window.y)
    return max(0, width) * max(0, height)


def merge(windows: list[Window], stacking: list[int], active: int | None, apps: list[dict] | None,
          page: PageTree | None = None, browser_pid: int | None = None) -> list[TreeWindow]:
    """The display's windows (bottom to top as ``stacking`` lists X ids; those it lacks first), each
    with the accessibility windows of its process that lie on it (each given to the window it
    overlaps most), and ``page`` under the browser's window in front. ``apps``: the reader's answer
    (None: not read)."""
    order = {wid: i for i, wid in enumerate(stacking)}
    listed = sorted(windows, key=lambda w: order.get(int(w.id, 16), -1))
    top = max((int(w.id, 16) for w in listed if int(w.id, 16) in order), key=lambda wid: order[wid], default=None)
    merged = [TreeWindow(**w.model_dump(), focused=active is not None and int(w.id, 16) == active,
                         on_top=int(w.id, 16) == top) for w in listed]
    for app in apps or []:
        for node in app.get("windows", []):
            mine = [w for w in merged if w.pid == app.get("pid")]
            if "error" in node:
                for window in mine:
                    window.application, window.error = app.get("name"), node["error"]
                continue
            best = max(mine, key=lambda w: _overlap(node.get("box"), w), default=None)
            if best is None or _overlap(node.get("box"), best) == 0:
                continue  # not on any window of the listing (a closed dialog, another workspace)
            best.application = app.get("name") or None
            best.nodes.append(TreeNode.model_validate(node))
    for window in merged:
        if page is not None and window.focused and window.pid == browser_pid:
            window.page = page
        if not window.nodes and window.error is None and apps is not None:
            window.error = ("its page only: the browser's own controls are read with --browser-accessibility"
                            if window.page is not None
                            else "its application said nothing over the accessibility bus")
    return merged


def interactive(node: TreeNode) -> bool:
    return bool(node.actions) or bool(INTERACTIVE_STATES & set(node.states))


def only_interactive(nodes: list[TreeNode]) -> list[TreeNode]:
    """The interactive nodes under ``nodes``, in order, flattened (their containers left out)."""
    found: list[TreeNode] = []
    for node in nodes:
        if interactive(node):
            found.append(node.model_copy(update={"children": []}))
        found.extend(only_interactive(node.children))
    return found


def build(windows: list[TreeWindow], *, truncated: bool, interactive_only: bool, fmt: str,
          error: str | None = None) -> DesktopTree:
    if interactive_only:
        windows = [w.model_copy(update={"nodes": only_interactive(w.nodes)}) for w in windows]
    tree = DesktopTree(windows=windows, truncated=truncated, format=fmt, error=error)
    if fmt == "text":
        tree.content = as_text(tree)
    elif fmt == "xml":
        tree.content = as_xml(tree)
    return tree


# ------------------------------------------------------------------------------------- text


def node_line(node: TreeNode) -> str:
    """One node as the text outline writes it: role \"name\" [ref] @x,y wxh (states) = text."""
    parts = [node.role]
    if node.name:
        parts.append(f'"{node.name}"')
    parts.append(f"[{node.ref}]")
    if node.box:
        x, y, w, h = node.box
        parts.append(f"@{x},{y} {w}x{h}")
    told = [s for s in TOLD_STATES if s in node.states] + \
           [f"not {s}" for s in TOLD_ABSENT if s not in node.states]
    if told:
        parts.append("(" + ", ".join(told) + ")")
    if node.text:
        text = node.text if len(node.text) <= 200 else node.text[:200] + "..."
        parts.append(f"= {text!r}")
    elif node.value is not None:
        parts.append(f"= {node.value:g}")
    if node.children_left:
        parts.append(f"({node.children_left} children not listed)")
    return " ".join(parts)


def _outline(nodes: list[TreeNode], depth: int, lines: list[str]) -> None:
    for node in nodes:
        # A nameless, textless container adds nothing to read: its children are told in its place.
        if not node.name and not node.text and not interactive(node) and node.children and depth > 1:
            _outline(node.children, depth, lines)
            continue
        lines.append("  " * depth + "- " + node_line(node))
        _outline(node.children, depth + 1, lines)


def as_text(tree: DesktopTree) -> str:
    """A compact outline for models: a line per window, then its nodes, indented."""
    lines = []
    for window in tree.windows:
        flags = ", ".join(f for f, on in (("focused", window.focused), ("on top", window.on_top)) if on)
        lines.append(f'window {window.id} "{window.title}" {window.wm_class} pid {window.pid} '
                     f"@{window.x},{window.y} {window.width}x{window.height}" + (f" ({flags})" if flags else ""))
        _outline(window.nodes, 1, lines)
        if window.page is not None:
            lines.append(f'  - page "{window.page.title}" {window.page.url}')
            lines.extend("    " + line for line in window.page.snapshot.splitlines())
        elif window.error and not window.nodes:
            lines.append(f"  ({window.error})")
    if tree.truncated:
        lines.append("(truncated: more nodes than max_nodes, or deeper than max_depth)")
    if tree.error:
        lines.append(f"({tree.error})")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- OSWorld's XML


def _tag(role: str) -> str:
    tag = "".join(c if c.isalnum() or c == "-" else "-" for c in role.replace(" ", "-")) or "unknown"
    return tag if tag[0].isalpha() else f"x-{tag}"


def _xml_node(parent: ElementTree.Element, node: TreeNode) -> None:
    element = ElementTree.SubElement(parent, _tag(node.role), {"name": node.name})
    for state in node.states:
        element.set(f"{_NS['st']}{state}", "true")
    if node.box:
        x, y, w, h = node.box
        element.set(f"{_NS['cp']}screencoord", f"({x}, {y})")
        element.set(f"{_NS['cp']}size", f"({w}, {h})")
    if node.value is not None:
        element.set(f"{_NS['val']}value", f"{node.value:g}")
    for index, action in enumerate(node.actions):
        element.set(f"{_NS['act']}action{index}_name", action)
    element.set(f"{_NS['attr']}ref", node.ref)
    if node.text:
        element.text = node.text
    for child in node.children:
        _xml_node(element, child)


# The page's ARIA roles as AT-SPI names them, which is how Chromium's own page nodes appear in
# OSWorld's trees (an entry, a push-button...); a role not listed keeps its ARIA name.
ATSPI_ROLES = {
    "textbox": "entry", "searchbox": "entry", "button": "push-button", "checkbox": "check-box",
    "radio": "radio-button", "combobox": "combo-box", "listbox": "list-box", "listitem": "list-item",
    "option": "list-item", "img": "image", "row": "table-row", "cell": "table-cell", "gridcell": "table-cell",
    "columnheader": "table-column-header", "rowheader": "table-row-header", "menuitem": "menu-item",
    "tab": "page-tab", "tablist": "page-tab-list", "tabpanel": "scroll-pane", "generic": "section",
    "text": "static", "spinbutton": "spin-button", "slider": "slider", "switch": "toggle-button",
}
_ARIA_LINE = re.compile(r'^(?P<indent>\s*)- (?P<role>[\w/-]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?'
                        r'(?P<flags>(?: \[[^\]]*\])*)(?::(?: (?P<text>.*))?)?$')


def aria_nodes(snapshot: str) -> list[dict]:
    """The page layer's accessibility snapshot (Playwright's ARIA snapshot: ``- role "name" [flag]
    [key=value]: text``, nested by indent) as nodes (pure): role, name, flags, properties, text,
    children. A ``/url``-like property line is its parent's property; a line it cannot read is left out."""
    roots: list[dict] = []
    stack: list[tuple[int, dict]] = []
    for line in snapshot.splitlines():
        found = _ARIA_LINE.match(_unquoted_line(line))
        if found is None:
            continue
        indent, role = len(found["indent"]), found["role"]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if role.startswith("/"):  # a property of the node above: - /url: https://...
            if stack:
                stack[-1][1]["properties"][role[1:]] = found["text"] or ""
            continue
        flags, properties = [], {}
        for flag in re.findall(r"\[([^\]]*)\]", found["flags"] or ""):
            key, _, value = flag.partition("=")
            if value:
                properties[key] = value
            else:
                flags.append(key)
        name = found["name"]
        node = {"role": role, "name": json.loads(f'"{name}"') if name else "", "flags": flags,
                "properties": properties, "text": _yaml_scalar(found["text"]), "children": []}
        (stack[-1][1]["children"] if stack else roots).append(node)
        stack.append((indent, node))
    return roots


def _yaml_scalar(text: str | None) -> str | None:
    """A YAML scalar as the snapshot writes it (pure): plain, 'single-quoted' or "double-quoted"."""
    if text and len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if text and len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _unquoted_line(line: str) -> str:
    """A snapshot line whose node YAML had to quote (a name with ": " in it: ``- 'heading "a: b"
    [ref=e5]'``) written as the others are (pure)."""
    indent, dash, body = line.partition("- ")
    if not dash or indent.strip() or not body.startswith("'"):
        return line
    end = 1
    while end < len(body):
        if body[end] == "'":
            if body[end + 1:end + 2] == "'":
                end += 2
                continue
            break
        end += 1
    return f"{indent}- {_yaml_scalar(body[:end + 1])}{body[end + 1:]}"


def _xml_page_node(parent: ElementTree.Element, node: dict) -> None:
    element = ElementTree.SubElement(parent, _tag(ATSPI_ROLES.get(node["role"], node["role"])), {"name": node["name"]})
    for flag in node["flags"]:
        element.set(f"{_NS['st']}{'focused' if flag == 'active' else _tag(flag)}", "true")
    for key, value in node["properties"].items():
        if key == "box":  # [box=x,y,width,height] in display pixels: where OSWorld's trees say it
            x, y, width, height = value.split(",")
            element.set(f"{_NS['cp']}screencoord", f"({x}, {y})")
            element.set(f"{_NS['cp']}size", f"({width}, {height})")
        else:
            element.set(f"{_NS['attr']}{_tag(key)}", value)
    if node["text"]:
        element.text = node["text"]
    for child in node["children"]:
        _xml_page_node(element, child)


def as_xml(tree: DesktopTree) -> str:
    """The tree as OSWorld's guest writes its accessibility tree: a ``desktop-frame`` root, an
    ``application`` per window, each node an element named by its role; the browser's page in front
    as a ``document-web`` under its window, its nodes named by their AT-SPI roles, with their boxes
    in display pixels where the page gives them and the page layer's refs (``attr:ref``)."""
    for key, uri in OSWORLD_NS.items():
        ElementTree.register_namespace(key, uri)
    root = ElementTree.Element("desktop-frame", {"name": "main"})
    for window in tree.windows:
        app = ElementTree.SubElement(root, "application", {"name": window.application or window.wm_class})
        app.set(f"{_NS['attr']}window", window.id)
        for node in window.nodes:
            _xml_node(app, node)
        if window.page is not None:
            document = ElementTree.SubElement(app, "document-web", {"name": window.page.title})
            document.set(f"{_NS['attr']}url", window.page.url)
            for page_node in aria_nodes(window.page.snapshot):
                _xml_page_node(document, page_node)
    return ElementTree.tostring(root, encoding="unicode")
