"""The desktop tree on real programs as Debian ships them (galculator, mousepad) and the session's
Chromium: the nodes' boxes are where the pixels are (a click at a button's centre presses it, as
the calculator's display then says), text typed into a node reads back from it, the browser's page
carries the page layer's refs, and a program that stops answering is said, not waited on."""

from __future__ import annotations

import os
import re
import signal
from xml.etree import ElementTree

import pytest

from desktop.actions import Click, Key, Move, Type
from desktop.models import DesktopTree, NativeTarget, TreeNode, TreeWindow
from desktop.service.desktop import DesktopService
from desktop.tree import OSWORLD_NS
from tests.answers import tree_nodes, until

pytestmark = pytest.mark.x11


@pytest.fixture(scope="module")
def tree_desk(manager):
    """A session of its own: the native windows opened here must not stay in front of the shared one's."""
    session = manager.create("tree")
    yield session
    manager.delete("tree")


@pytest.fixture(scope="module")
def desktops(manager):
    return DesktopService(manager)


def window_of(tree: DesktopTree, wm_class: str) -> TreeWindow | None:
    return next((w for w in tree.windows if wm_class in w.wm_class.lower()), None)


def launched(desktops, session, program: str, ready) -> TreeWindow:
    """``program`` started on the desktop, once its window's tree satisfies ``ready``."""
    desktops.launch(session.id, program, [])

    def shown():
        window = window_of(desktops.desktop_tree(session.id), program)
        return window if window is not None and ready(list(tree_nodes(window.nodes))) else None
    return until(shown, f"{program}'s window and its controls in the tree", 30)


def centre(node: TreeNode) -> tuple[int, int]:
    x, y, w, h = node.box
    return x + w // 2, y + h // 2


def button(nodes: list[TreeNode], name: str) -> TreeNode:
    return next(n for n in nodes if n.role in ("push button", "toggle button") and n.name == name)


def calculator_display(desktops, session) -> str:
    window = window_of(desktops.desktop_tree(session.id), "galculator")
    return " ".join((n.text or "").strip() for n in tree_nodes(window.nodes) if n.role in ("text", "label") and n.text)


@pytest.fixture(scope="module")
def calculator(desktops, tree_desk):
    return launched(desktops, tree_desk, "galculator",
                    lambda nodes: any(n.role.endswith("button") and n.name == "=" and n.box for n in nodes))


def test_a_click_at_a_buttons_box_centre_presses_it(desktops, tree_desk, calculator):
    desktops.focus(tree_desk.id, calculator.id)  # on top: another test's window may cover it
    nodes = list(tree_nodes(calculator.nodes))
    for name in ("AC", "7", "+", "2", "="):  # AC: whatever earlier tests left on the display cleared
        x, y = centre(button(nodes, name))
        tree_desk.perform(Click(x=x, y=y))
    until(lambda: "9" in calculator_display(desktops, tree_desk).split(), "the display to say 9", 10)


def test_the_calculators_window_is_one_of_the_tree_with_its_program_and_geometry(desktops, tree_desk, calculator):
    tree = desktops.desktop_tree(tree_desk.id, window=calculator.id)
    assert [w.id for w in tree.windows] == [calculator.id]
    window = tree.windows[0]
    assert window.application == "galculator" and window.pid and window.error is None
    frame = window.nodes[0]
    assert frame.role == "frame" and "showing" in frame.states
    # The window's geometry is where its content is drawn: the frame's content exactly (GTK's frame
    # box includes the window manager's title bar and borders).
    content = frame.children[0].box
    assert [window.x, window.y, window.width, window.height] == content
    fx, fy, fw, fh = frame.box
    assert fx < window.x and fy < window.y and fx + fw > window.x + window.width
    assert desktops.windows(tree_desk.id) and next(w for w in desktops.windows(tree_desk.id)
                                                   if w.id == window.id).y == window.y


def test_the_windows_read_over_x_are_wmctrls_at_the_place_their_content_is_drawn(desktops, tree_desk, calculator):
    """The windows come from the X connection the screen already holds (no wmctrl process): the same
    windows, order, programs, classes and titles as ``wmctrl -lGpx`` says, each at its content's place."""
    import subprocess

    from desktop.x11.windows import parse_wmctrl

    listed = tree_desk.list_windows()
    said = parse_wmctrl(subprocess.run(["wmctrl", "-lGpx"], env=tree_desk.stack.env(), capture_output=True,
                                       text=True, check=True).stdout)
    assert [(w.id, w.pid, w.wm_class, w.title) for w in listed] == [(w.id, w.pid, w.wm_class, w.title) for w in said]
    assert {"xfce4-panel.Xfce4-panel", "galculator.Galculator"} <= {w.wm_class for w in listed}
    ours = next(w for w in listed if w.id == calculator.id)
    assert [ours.x, ours.y, ours.width, ours.height] == [calculator.x, calculator.y, calculator.width,
                                                         calculator.height]


@pytest.fixture(scope="module")
def editor(desktops, tree_desk, calculator):
    return launched(desktops, tree_desk, "mousepad",
                    lambda nodes: any(n.role == "text" and "editable" in n.states and n.box for n in nodes))


def test_text_typed_into_the_editors_node_reads_back_from_it(desktops, tree_desk, editor):
    area = next(n for n in tree_nodes(editor.nodes) if n.role == "text" and "editable" in n.states)
    desktops.focus(tree_desk.id, editor.id)
    tree_desk.perform(Click(x=centre(area)[0], y=centre(area)[1]))
    tree_desk.perform(Key(keys=["ctrl+a"]))  # what earlier tests typed there replaced
    tree_desk.perform(Type(text="hello, tree"))

    def typed():
        tree = desktops.desktop_tree(tree_desk.id, window=editor.id)
        return next((n for n in tree_nodes(tree.windows[0].nodes) if n.ref == area.ref), None)
    node = until(lambda: (found := typed()) is not None and found.text == "hello, tree" and found,
                 "the editor's text node to hold what was typed", 10)
    assert "focused" in node.states


def test_the_tree_read_from_the_programs_caches_is_the_tree_read_node_by_node(desktops, tree_desk, calculator,
                                                                             editor):
    """The reader takes each program's nodes from the program's own cache in one call, and asks the
    rest (boxes, texts, values, action names) all at once: the same tree as a walk node by node, on
    the windows as they are and with a menu open (whose items GTK leaves out of its cache's order)."""
    def trees() -> tuple[dict, dict]:
        request = {"op": "tree", "pids": [calculator.pid, editor.pid], "max_depth": 30, "max_nodes": 2000,
                   "visible_only": True}
        cached, by_node = (tree_desk.accessibility.ask({**request, "cache": cache}, 30) for cache in (True, False))
        return {k: v for k, v in cached.items() if k != "ms"}, {k: v for k, v in by_node.items() if k != "ms"}

    cached, by_node = trees()
    assert cached == by_node
    read = [n for app in cached["apps"] for w in app["windows"] for n in walk_dicts([w])]
    assert len(read) > 40 and any(n.get("actions") == ["click"] for n in read), len(read)
    assert any(n.get("text") for n in read) and all(n["box"] for n in read if n["role"] == "push button")
    desktops.focus(tree_desk.id, calculator.id)
    tree_desk.perform(Key(keys=["F10"]))  # the menu bar's first menu, open
    try:
        cached, by_node = trees()
        menu_items = [n for app in cached["apps"] for w in app["windows"] for n in walk_dicts([w])
                      if n["role"] == "menu item"]
        assert menu_items and cached == by_node, len(menu_items)
    finally:
        tree_desk.perform(Key(keys=["Escape"]))


def walk_dicts(nodes: list[dict]):
    for node in nodes:
        yield node
        yield from walk_dicts(node.get("children", []))


def test_interactive_only_text_and_xml(desktops, tree_desk, calculator):
    flat = desktops.desktop_tree(tree_desk.id, window=calculator.id, interactive_only=True)
    roles = {n.role for n in flat.windows[0].nodes}
    assert "toggle button" in roles or "push button" in roles
    assert all(n.children == [] for n in flat.windows[0].nodes)
    text = desktops.desktop_tree(tree_desk.id, window=calculator.id, format="text").content
    seven = button(list(tree_nodes(calculator.nodes)), "7")
    assert f'{seven.role} "7" [{seven.ref}] @{seven.box[0]},{seven.box[1]} {seven.box[2]}x{seven.box[3]}' in text
    xml = ElementTree.fromstring(desktops.desktop_tree(tree_desk.id, window=calculator.id, format="xml").content)
    found = [e for e in xml.iter() if e.get("name") == "7"]
    assert found and found[0].get(f"{{{OSWORLD_NS['cp']}}}screencoord") == f"({seven.box[0]}, {seven.box[1]})"


def test_a_program_that_stops_answering_is_said_and_the_rest_still_read(desktops, tree_desk, calculator):
    pid = calculator.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        tree = desktops.desktop_tree(tree_desk.id)
    finally:
        os.kill(pid, signal.SIGCONT)
    stopped = next(w for w in tree.windows if w.pid == pid)
    assert stopped.nodes == [] and "did not answer" in stopped.error
    others = [w for w in tree.windows if w.pid != pid and w.nodes]
    assert others, [(w.wm_class, w.error) for w in tree.windows]  # the panel, the editor: still read
    # and once it answers again, it is read again
    until(lambda: window_of(desktops.desktop_tree(tree_desk.id), "galculator").nodes, "its nodes again", 10)


def test_an_unknown_window_is_refused(desktops, tree_desk):
    from desktop.errors import InvalidAction

    with pytest.raises(InvalidAction, match="no window 0x7fffffff"):
        desktops.desktop_tree(tree_desk.id, window="0x7fffffff")


def test_the_browsers_page_is_merged_with_the_page_layers_refs(desktops, tree_desk, site):
    tree_desk.run_settled(lambda: tree_desk.open_url(site.url("/form")))
    browser = tree_desk.stack.browser

    def snapshot_now() -> str:
        return browser.call(lambda pages: pages.content("accessibility", None), 10).content

    # The page adds an element 300 ms after it loads: both views are of the page once it has.
    until(lambda: "arrived late" in snapshot_now(), "the page's late element", 10)
    snapshot = snapshot_now()
    tree = desktops.desktop_tree(tree_desk.id)
    window = next(w for w in tree.windows if w.pid == browser.process.pid)
    assert window.focused and window.page is not None
    assert window.page.url.endswith("/form")
    # Chromium's own controls are read only with --browser-accessibility (test_browser_accessibility.py)
    assert window.nodes == [] and window.error.endswith("--browser-accessibility")
    # The page layer's own snapshot, each element's box added in display pixels.
    assert re.sub(r" \[box=[-\d,]+\]", "", window.page.snapshot) == snapshot and "[ref=e" in snapshot
    gift = re.search(r'checkbox "Gift wrap" \[ref=e\d+\] \[box=(\d+),(\d+),(\d+),(\d+)\]', window.page.snapshot)
    assert gift, window.page.snapshot
    x, y, width, height = map(int, gift.groups())
    site.clear()
    tree_desk.perform(Click(x=x + width // 2, y=y + height // 2))  # the box's middle, on the display
    site.wait_for(lambda e: e.get("type") == "gift" and e.get("checked") is True)


def test_a_click_on_a_native_control_names_it_in_the_answer_and_the_trace(desktops, tree_desk, calculator,
                                                                          editor, vision_api):
    desktops.focus(tree_desk.id, calculator.id)  # on top again: another test's window may cover it
    nodes = list(tree_nodes(desktops.desktop_tree(tree_desk.id, window=calculator.id).windows[0].nodes))
    five, three = button(nodes, "5"), button(nodes, "3")
    x, y = centre(five)
    answer = vision_api.post(f"/api/v1/sessions/{tree_desk.id}/desktop/click", json={"x": x, "y": y})
    assert answer.status_code == 200, answer.text
    native = answer.json()["native"]
    assert (native["ref"], native["role"], native["name"], native["application"]) == \
        (five.ref, five.role, "5", "galculator")
    assert native["path"][0] == "frame 'galculator'" and native["path"][-1] == f"{five.role} '5'"
    assert answer.json()["element"] is None  # no page there
    # A vision run's step records it per action, as it records a page's element.
    x, y = centre(three)
    run = vision_api.post(f"/api/v1/sessions/{tree_desk.id}/vision/act", json={
        "instruction": "press 3", "model": "scripted", "script": [{"action": "click", "x": x, "y": y},
                                                                  {"action": "done"}]})
    assert run.status_code == 200 and run.json()["status"] == "done", run.text
    step = vision_api.get(f"/api/v1/traces/{run.json()['trace_id']}").json()["steps"][0]
    assert [(n["role"], n["name"]) for n in step["natives"]] == [(three.role, "3")]
    # and a click where another window covers the calculator names that window's control, not its own
    desktops.focus(tree_desk.id, editor.id)
    covered = next(((cx, cy) for n in nodes if n.box and n.role.endswith("button")
                    for cx, cy in [centre(n)]
                    if editor.x <= cx < editor.x + editor.width and editor.y <= cy < editor.y + editor.height), None)
    assert covered is not None, (editor, calculator)  # XFCE centres both: the editor covers the calculator
    hidden = vision_api.post(f"/api/v1/sessions/{tree_desk.id}/desktop/move", json={"x": covered[0],
                                                                                    "y": covered[1]}).json()
    assert hidden["native"] is not None and hidden["native"]["application"] == "mousepad", hidden["native"]


# ------------------------------------------------------------------ native targets (desktop.native)


def test_a_native_target_names_one_control_by_program_role_and_name(desktops, tree_desk, calculator):
    seven = button(list(tree_nodes(desktops.desktop_tree(tree_desk.id, window=calculator.id).windows[0].nodes)), "7")
    found = desktops.native_find(tree_desk.id, NativeTarget(app="galculator", role=seven.role, name="7", exact=True))
    assert found.count == 1 and found.error is None, found
    match = found.matches[0]
    assert (match.ref, match.box, match.application, match.window, match.pid) == \
        (seven.ref, seven.box, "galculator", calculator.id, calculator.pid)
    assert match.path[0] == "frame 'galculator'" and match.path[-1] == f"{seven.role} '7'"
    by_ref = desktops.native_find(tree_desk.id, NativeTarget(ref=seven.ref))
    assert [m.ref for m in by_ref.matches] == [seven.ref]
    # A role alone matches every button, in the tree's order; nth picks one of them
    buttons = desktops.native_find(tree_desk.id, NativeTarget(app="galculator", role=seven.role))
    assert buttons.count > 10 and len(buttons.matches) == 20
    last = desktops.native_find(tree_desk.id, NativeTarget(app="galculator", role=seven.role, nth=-1))
    assert last.count == 1 and last.matches[0].ref not in {m.ref for m in buttons.matches[:1]}
    inside = desktops.native_find(tree_desk.id, NativeTarget(name="7", exact=True, within=NativeTarget(
        app="galculator", role="frame")))
    assert seven.ref in [m.ref for m in inside.matches]
    assert desktops.native_find(tree_desk.id, NativeTarget(app="mousepad-not-running", name="7")).count == 0


def test_clicks_on_native_targets_press_the_calculators_buttons(desktops, tree_desk, calculator):
    desktops.focus(tree_desk.id, calculator.id)  # on top: another test's window may cover it
    role = button(list(tree_nodes(calculator.nodes)), "7").role
    for name in ("AC", "6", "*", "7", "="):  # AC: whatever earlier tests left on the display cleared
        done = desktops.native_click(tree_desk.id, NativeTarget(app="galculator", role=role, name=name, exact=True))
        assert done.result["landed"] is True, done.result
        assert done.result["node"]["name"] == name and done.native is not None and done.native.name == name
    until(lambda: "42" in calculator_display(desktops, tree_desk).split(), "the display to say 42", 10)


def test_a_native_target_that_is_ambiguous_missing_or_covered_is_refused_and_nothing_is_clicked(
        desktops, tree_desk, calculator, editor):
    from desktop.errors import AmbiguousElement, ElementCovered, ElementNotFound

    desktops.focus(tree_desk.id, calculator.id)
    role = button(list(tree_nodes(calculator.nodes)), "7").role
    before = calculator_display(desktops, tree_desk)
    with pytest.raises(AmbiguousElement, match=r"matches \d+ controls .*pick one with nth"):
        desktops.native_click(tree_desk.id, NativeTarget(app="galculator", role=role))
    with pytest.raises(ElementNotFound, match="no control on the screen matches"):
        desktops.native_click(tree_desk.id, NativeTarget(app="galculator", name="no such button"))
    # the editor in front, over a button of the calculator: real input there would land on the editor
    desktops.focus(tree_desk.id, editor.id)
    listed = {w.id: w for w in desktops.windows(tree_desk.id)}
    over = listed[editor.id]
    covered = next(n for n in tree_nodes(calculator.nodes) if n.role == role and n.box
                   and over.x <= centre(n)[0] < over.x + over.width and over.y <= centre(n)[1] < over.y + over.height)
    with pytest.raises(ElementCovered, match="covered at .* by .*mousepad"):
        desktops.native_click(tree_desk.id, NativeTarget(ref=covered.ref))
    desktops.focus(tree_desk.id, calculator.id)
    assert calculator_display(desktops, tree_desk) == before


def test_a_control_its_own_programs_dialog_covers_is_refused_before_anything_is_typed(desktops, tree_desk, editor):
    """The other-program check cannot see this one (the dialog is the same program's): the bus is
    asked what is at the control's middle before acting, and names the dialog's control there."""
    from desktop.errors import ElementCovered

    area = NativeTarget(app="mousepad", role="text")
    desktops.focus(tree_desk.id, editor.id)
    desktops.native_type(tree_desk.id, area, "kept", clear=True)
    tree_desk.perform(Key(keys=["ctrl+o"]))  # the open-file dialog, over the editor
    dialog = until(lambda: next((w for w in desktops.windows(tree_desk.id) if "mousepad" in w.wm_class.lower()
                                 and w.id != editor.id), None), "mousepad's open-file dialog", 15)
    try:
        with pytest.raises(ElementCovered, match=r"covered at .* of the same program"):
            desktops.native_type(tree_desk.id, area, "lost", clear=True)
    finally:
        desktops.focus(tree_desk.id, dialog.id)
        tree_desk.perform(Key(keys=["Escape"]))
    until(lambda: all(w.id != dialog.id for w in desktops.windows(tree_desk.id)), "the dialog closed", 10)
    text = next(n for n in tree_nodes(window_of(desktops.desktop_tree(tree_desk.id), "mousepad").nodes)
                if n.role == "text" and "editable" in n.states).text
    assert text == "kept"  # nothing reached the editor while the dialog was over it


def test_text_typed_into_a_native_target_replaces_what_it_held_and_reads_back(desktops, tree_desk, editor,
                                                                             vision_api):
    desktops.focus(tree_desk.id, editor.id)
    area = NativeTarget(app="mousepad", role="text")
    desktops.native_type(tree_desk.id, area, "first words")
    answer = vision_api.post(f"/api/v1/sessions/{tree_desk.id}/desktop/native/type",
                             json={"target": {"app": "mousepad", "role": "text"}, "text": "native typing",
                                   "clear": True})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["result"]["node"]["role"] == "text" and body["result"]["landed"] is True, body["native"]
    # the click, then ctrl+a, then the text (xdotool's argv, each its own process)
    assert [argv[:2] for argv in body["executed"]][:2] == [["xdotool", "mousemove"], ["xdotool", "key"]]
    until(lambda: desktops.native_find(tree_desk.id, area).matches[0].text == "native typing",
          "the editor's text node to hold only what was typed last", 10)
    for target, said in (({"role": "text", "bogus": 1}, "bogus"), ({"app": "mousepad"}, "name the control"),
                         ({"role": "text", "ref": "e1"}, "role: not with a ref")):
        refused = vision_api.post(f"/api/v1/sessions/{tree_desk.id}/desktop/native/click", json={"target": target})
        assert refused.status_code == 422 and said in refused.text, refused.text


# ------------------------------------------------------------------ set-of-marks (desktop.marks)


def test_marks_number_the_calculators_buttons_and_are_drawn_where_they_are(desktops, tree_desk, calculator):
    import base64
    import io

    from PIL import Image

    desktops.focus(tree_desk.id, calculator.id)
    marks = desktops.marks(tree_desk.id)
    seven = next(m for m in marks.marks if m.source == "native" and m.name == "7" and m.application == "galculator")
    node = button(list(tree_nodes(desktops.desktop_tree(tree_desk.id, window=calculator.id).windows[0].nodes)), "7")
    assert (seven.ref, seven.box, seven.role) == (node.ref, node.box, node.role)
    assert [m.mark for m in marks.marks] == list(range(1, len(marks.marks) + 1))
    with Image.open(io.BytesIO(base64.b64decode(marks.image))) as drawn, \
            Image.open(io.BytesIO(tree_desk.capture().png)) as plain:
        x, y, width, height = seven.box
        edge = (x + width // 2, y + height - 1)
        assert drawn.size == (1920, 1080) and drawn.convert("RGB").getpixel(edge) != plain.convert("RGB").getpixel(edge)
    # the panel's buttons are marked too (they are on the screen); the page's controls only where no
    # native window covers them
    assert any(m.application == "xfce4-panel" for m in marks.marks if m.source == "native")
    over = next(w for w in desktops.windows(tree_desk.id) if w.id == calculator.id)
    for page in (m for m in marks.marks if m.source == "page"):
        cx, cy = page.box[0] + page.box[2] // 2, page.box[1] + page.box[3] // 2
        assert not (over.x <= cx < over.x + over.width and over.y <= cy < over.y + over.height), page
    assert desktops.marks(tree_desk.id, image=False, limit=3).image is None


def test_the_pages_marks_are_where_a_click_finds_their_elements(desktops, tree_desk, site):
    tree_desk.run_settled(lambda: tree_desk.open_url(site.url("/form")))
    marks = until(lambda: [m for m in desktops.marks(tree_desk.id, image=False).marks if m.source == "page"],
                  "the page's controls marked", 10)
    assert {m.role for m in marks} & {"textbox", "button"}, marks
    for mark in [m for m in marks if m.role in ("textbox", "button")][:3]:
        x, y, width, height = mark.box
        element = tree_desk.perform(Move(x=x + width // 2, y=y + height // 2)).element
        assert element is not None and (element.role, element.name) == (mark.role, mark.name), (mark, element)
