"""Chromium's own controls in the desktop tree (--browser-accessibility): its toolbar, address bar,
tabs and the dialogs it draws for a page are native nodes whose boxes are where the pixels are (the
address bar typed into by its node opens the page; a page's alert answered by a click on its OK
node lets the page go on), and the page itself is read once, by the page layer, not again over the bus."""

from __future__ import annotations

import re

import pytest

from desktop.actions import Click, Key
from desktop.models import NativeTarget, TreeWindow
from desktop.service.desktop import DesktopService
from desktop.session.manager import SessionManager
from desktop.session.stack import StackConfig
from tests.answers import tree_nodes, until
from tests.conftest import session_files

pytestmark = pytest.mark.x11

ADDRESS_BAR = NativeTarget(app="chromium", role="entry", name="Address and search bar", exact=True)


@pytest.fixture(scope="module")
def manager():
    with session_files() as root:
        manager = SessionManager(root=root, max_sessions=1, stack_config=StackConfig(browser_accessibility=True))
        yield manager
        manager.close()


@pytest.fixture(scope="module")
def session(manager):
    return manager.create("ui")


@pytest.fixture(scope="module")
def desktops(manager):
    return DesktopService(manager)


def browser_window(desktops, session) -> TreeWindow:
    pid = session.stack.browser.process.pid
    return next(w for w in desktops.desktop_tree(session.id).windows if w.pid == pid)


def test_the_toolbar_address_bar_and_tab_are_nodes_and_the_page_is_read_once(desktops, session, site):
    session.run_settled(lambda: session.open_url(site.url("/form")))
    window = until(lambda: (w := browser_window(desktops, session)).page is not None and w.nodes and w,
                   "the browser's window with its controls and its page", 15)
    nodes = list(tree_nodes(window.nodes))
    address = next(n for n in nodes if n.role == "entry" and n.name == "Address and search bar")
    assert address.text.endswith("/form") and "editable" in address.states
    assert {"Back", "Reload"} <= {n.name for n in nodes if n.role == "push button"}
    tab = next(n for n in nodes if n.role == "page tab")
    assert tab.name == "form" and "selected" in tab.states
    # Inside the browser's window, below its toolbar: where the window's pixels are.
    for node in (address, tab):
        x, y, width, height = node.box
        assert window.x <= x and x + width <= window.x + window.width and window.y <= y < window.y + 100
    # The page is the page layer's (with its refs), not its nodes over the bus a second time. A ref
    # is Playwright's: "e4", or "f4e4" once Chromium has made the tab's main frame anew (a URL typed
    # into the address bar by an earlier test does: seen in a random-order run).
    assert re.search(r'checkbox "Gift wrap" \[ref=(f\d+)?e\d+\]', window.page.snapshot), window.page.snapshot
    assert not [n for n in nodes if n.role == "document web" or n.name == "Gift wrap"]
    assert window.error is None


def test_a_url_typed_into_the_address_bar_by_its_node_opens_the_page(desktops, session, site):
    session.run_settled(lambda: session.open_url(site.url("/form")))
    until(lambda: desktops.native_find(session.id, ADDRESS_BAR).count == 1, "the address bar's node", 15)
    typed = desktops.native_type(session.id, ADDRESS_BAR, site.url("/dialogs"), clear=True)
    assert typed.result["landed"] is True, typed.result
    session.perform(Key(keys=["Return"]))
    until(lambda: (session.page_url() or "").endswith("/dialogs"), "the page typed into the address bar", 15)


def test_a_pages_alert_is_a_dialog_of_nodes_and_a_click_on_its_ok_answers_it(desktops, session, site):
    session.run_settled(lambda: session.open_url(site.url("/dialogs")))
    alert = re.compile(r'button "Alert" \[ref=\w+\] \[box=(\d+),(\d+),(\d+),(\d+)\]')
    found = until(lambda: (page := browser_window(desktops, session).page) and alert.search(page.snapshot),
                  "the dialogs page's Alert button in the tree", 15)
    x, y, width, height = map(int, found.groups())
    site.clear()
    session.perform(Click(x=x + width // 2, y=y + height // 2))
    ok = NativeTarget(app="chromium", role="push button", name="OK", exact=True)
    until(lambda: desktops.native_find(session.id, ok).count == 1, "the alert's OK button", 15)
    dialog = next(n for n in tree_nodes(browser_window(desktops, session).nodes) if n.role == "dialog")
    assert any(n.text == "site alert: hello" for n in tree_nodes(dialog.children))
    assert not [e for e in site.events if e.get("type") == "answered"]  # the page waits on the dialog
    clicked = desktops.native_click(session.id, ok)
    assert clicked.result["landed"] is True, clicked.result
    site.wait_for(lambda e: e.get("type") == "answered" and e.get("kind") == "alert")
    until(lambda: not [n for n in tree_nodes(browser_window(desktops, session).nodes) if n.role == "dialog"],
          "the dialog gone from the tree", 10)


def test_marks_number_the_toolbars_buttons_beside_the_pages_controls(desktops, session, site):
    session.run_settled(lambda: session.open_url(site.url("/dialogs")))
    marks = until(lambda: (m := desktops.marks(session.id, image=False)).marks and
                  any(k.source == "page" for k in m.marks) and m, "the page's marks", 15).marks
    native = {(k.role, k.name) for k in marks if k.source == "native"}
    assert ("push button", "Reload") in native and ("entry", "Address and search bar") in native
    page = {k.name for k in marks if k.source == "page"}
    assert {"Alert", "Confirm", "Prompt"} <= page
    # The page's buttons are marked once, as the page's, not again as the browser's nodes.
    assert not {"Alert", "Confirm", "Prompt"} & {name for _, name in native}
