"""The desktop tree joined and written (desktop.tree, pure): windows matched to their applications'
accessibility windows, the browser's page under the browser, the interactive filter, text and XML."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest
from pydantic import ValidationError

from desktop.browser.content import boxes_on_display
from desktop.models import PageTree, TreeQuery, Window
from desktop.tree import OSWORLD_NS, as_text, build, merge, only_interactive

CALC = Window(id="0x01a00003", pid=41, x=100, y=100, width=331, height=343, wm_class="galculator.Galculator",
              title="galculator")
EDITOR = Window(id="0x01c00003", pid=42, x=500, y=100, width=640, height=480, wm_class="mousepad.Mousepad",
                title="Untitled 1 - Mousepad")
BROWSER = Window(id="0x00e00002", pid=43, x=0, y=0, width=1920, height=1051, wm_class="chromium.Chromium",
                 title="Login - Chromium")


def node(ref, role, name="", box=None, states=("enabled", "showing"), children=(), **more):
    return {"ref": ref, "role": role, "name": name, "box": box, "states": list(states),
            "children": list(children), **more}


def calculator_frame(x=100, y=100):
    seven = node("n7", "push button", "7", [x + 6, y + 183, 59, 34], actions=["click"],
                 states=("enabled", "focusable", "showing"))
    display = node("n3", "text", "", [x + 7, y + 32, 317, 52], text="0", states=("enabled", "showing"))
    panel = node("n2", "panel", "", [x, y, 331, 343], children=[display, seven])
    return node("n1", "frame", "galculator", [x, y, 331, 343], children=[panel])


APPS = [
    {"name": "galculator", "pid": 41, "windows": [calculator_frame()]},
    {"name": "mousepad", "pid": 42, "windows": [
        node("n20", "frame", "Untitled 1 - Mousepad", [500, 100, 640, 480], children=[
            node("n21", "text", "", [501, 152, 638, 425], text="hello", states=("editable", "enabled", "focused",
                                                                               "showing"))]),
        # a dialog of the editor's: under the editor's window, beside its frame
        node("n30", "dialog", "Save As", [520, 150, 300, 200]),
    ]},
]
PAGE = PageTree(url="http://127.0.0.1:8000/login.html", title="Login", truncated=False,
                snapshot='- heading "Login" [ref=e2]\n- button "Sign in" [ref=e5]')


def test_each_window_gets_its_applications_nodes_stacked_bottom_to_top():
    merged = merge([EDITOR, CALC, BROWSER], [0x00e00002, 0x01a00003, 0x01c00003], 0x01c00003, APPS)
    assert [w.id for w in merged] == ["0x00e00002", "0x01a00003", "0x01c00003"]
    browser, calc, editor = merged
    assert [n.ref for n in calc.nodes] == ["n1"] and calc.application == "galculator"
    assert [n.ref for n in editor.nodes] == ["n20", "n30"]
    assert editor.focused and editor.on_top and not calc.focused and not calc.on_top
    # the browser said nothing over the bus: said so, not left blank
    assert browser.nodes == [] and browser.error == "its application said nothing over the accessibility bus"


def test_a_node_is_never_given_to_another_processs_window_and_one_on_no_window_is_left_out():
    far = {"name": "galculator", "pid": 41, "windows": [calculator_frame(x=3000, y=3000)]}
    merged = merge([CALC, EDITOR], [], None, [far])
    assert [w.nodes for w in merged] == [[], []]


def test_the_page_goes_under_the_browser_window_in_front_only():
    merged = merge([BROWSER, CALC], [0x01a00003, 0x00e00002], 0x00e00002, [], PAGE, browser_pid=43)
    assert merged[1].page == PAGE and merged[1].error == (
        "its page only: the browser's own controls are read with --browser-accessibility")
    behind = merge([BROWSER, CALC], [0x00e00002, 0x01a00003], 0x01a00003, [], PAGE, browser_pid=43)
    assert all(w.page is None for w in behind)


def test_an_application_that_did_not_answer_is_said_per_window():
    stuck = [{"name": "mousepad", "pid": 42, "windows": [{"error": "Timeout: no reply"}]}]
    merged = merge([EDITOR, CALC], [], None, stuck)
    assert merged[0].error == "Timeout: no reply" and merged[0].nodes == []
    assert merged[1].error == "its application said nothing over the accessibility bus"


def test_unread_accessibility_leaves_no_per_window_claim():
    merged = merge([CALC], [], None, None)
    assert merged[0].error is None and merged[0].nodes == []


def test_interactive_only_keeps_what_can_be_acted_on_flattened_in_order():
    merged = merge([CALC, EDITOR], [], None, APPS)
    kept = [[n.ref for n in only_interactive(w.nodes)] for w in merged]
    assert kept == [["n7"], ["n21"]]
    tree = build(merged, truncated=False, interactive_only=True, fmt="json")
    assert [n.ref for n in tree.windows[0].nodes] == ["n7"] and tree.windows[0].nodes[0].children == []


def test_the_text_outline_names_roles_refs_boxes_states_and_texts():
    tree = build(merge([CALC, EDITOR, BROWSER], [0x01a00003, 0x01c00003, 0x00e00002], 0x00e00002, APPS, PAGE, 43),
                 truncated=True, interactive_only=False, fmt="text")
    text = tree.content
    assert text == as_text(tree)
    lines = text.splitlines()
    assert lines[0] == 'window 0x01a00003 "galculator" galculator.Galculator pid 41 @100,100 331x343'
    assert '    - push button "7" [n7] @106,283 59x34' in lines
    assert "    - text [n3] @107,132 317x52 = '0'" in lines
    assert "    - text [n21] @501,152 638x425 (focused, editable) = 'hello'" in lines
    assert 'window 0x00e00002 "Login - Chromium" chromium.Chromium pid 43 @0,0 1920x1051 (focused, on top)' in lines
    assert '    - button "Sign in" [ref=e5]' in lines  # the page's own refs, as page content gives them
    assert lines[-1] == "(truncated: more nodes than max_nodes, or deeper than max_depth)"


def test_a_nameless_container_is_told_through_its_children():
    lines = as_text(build(merge([CALC], [], None, APPS), truncated=False, interactive_only=False,
                          fmt="json")).splitlines()
    assert not any("panel" in line for line in lines)  # n2: no name, no text, not interactive


def test_the_xml_is_osworlds_shape():
    tree = build(merge([CALC], [], None, APPS), truncated=False, interactive_only=False, fmt="xml")
    root = ElementTree.fromstring(tree.content)
    assert root.tag == "desktop-frame"
    app = root.find("application")
    assert app.get("name") == "galculator" and app.get(f"{{{OSWORLD_NS['attr']}}}window") == "0x01a00003"
    button = root.find(".//push-button")
    assert button.get("name") == "7"
    assert button.get(f"{{{OSWORLD_NS['cp']}}}screencoord") == "(106, 283)"
    assert button.get(f"{{{OSWORLD_NS['cp']}}}size") == "(59, 34)"
    assert button.get(f"{{{OSWORLD_NS['st']}}}focusable") == "true"
    assert button.get(f"{{{OSWORLD_NS['act']}}}action0_name") == "click"
    assert root.find(".//text").text == "0"


def test_the_page_in_front_is_a_document_in_the_xml_with_osworlds_role_names():
    page = PAGE.model_copy(update={"snapshot": (
        '- generic [ref=e1]:\n  - text: Name\n  - textbox "Name" [active] [ref=e3]: alice\n'
        '  - button "Say \\"hi\\"" [disabled] [ref=e4]\n  - heading "Not saved" [level=1] [ref=e5]\n'
        '  - link "Home" [ref=e6]:\n    - /url: /index.html\n  - checkbox "Keep me" [checked] [ref=e7]\n'
        "  - 'heading \"Saved: it''s\" [level=2] [ref=e8]'\n  - textbox \"Note\" [ref=e9]: 'a: b'")})
    merged = merge([BROWSER, CALC], [0x01a00003, 0x00e00002], 0x00e00002, [], page, browser_pid=43)
    root = ElementTree.fromstring(build(merged, truncated=False, interactive_only=False, fmt="xml").content)
    st, attr = f"{{{OSWORLD_NS['st']}}}", f"{{{OSWORLD_NS['attr']}}}"
    document = root.find("application/document-web")
    assert document.get("name") == "Login" and document.get(f"{attr}url") == PAGE.url
    entry = root.find(".//document-web/section/entry")
    assert (entry.get("name"), entry.text, entry.get(f"{st}focused"), entry.get(f"{attr}ref")) == \
        ("Name", "alice", "true", "e3")
    assert root.find(".//push-button").get("name") == 'Say "hi"'
    assert root.find(".//push-button").get(f"{st}disabled") == "true"
    assert root.find(".//heading[@name='Not saved']").get(f"{attr}level") == "1"
    assert root.find(".//link").get(f"{attr}url") == "/index.html" and not list(root.find(".//link"))
    assert root.find(".//check-box").get(f"{st}checked") == "true"
    assert root.find(".//static").text == "Name"
    # YAML quotes a line whose name or text holds ": ": read as the others are
    assert root.find(".//heading[@name=\"Saved: it's\"]").get(f"{attr}level") == "2"
    assert root.find(".//entry[@name='Note']").text == "a: b"
    # A page behind another window is not in the tree: its nodes are not on the screen.
    behind = merge([BROWSER, CALC], [0x00e00002, 0x01a00003], 0x01a00003, [], page, browser_pid=43)
    assert "document-web" not in build(behind, truncated=False, interactive_only=False, fmt="xml").content


def test_a_page_nodes_box_is_in_display_pixels_and_one_inside_a_frame_is_left_out():
    # Playwright's snapshot with boxes=True: viewport-relative CSS pixels, after the flags, before the text.
    snapshot = ('- generic [ref=e1] [box=0,0,1920,964]:\n'
                '  - button "Save" [ref=e2] [cursor=pointer] [box=100,200,80,24]\n'
                '  - paragraph [ref=e3] [box=10,-40,300,20]: see [box=1,2,3,4]\n'
                "  - 'heading \"a: b\" [level=2] [ref=e4] [box=5,6,7,8]'\n"
                '  - iframe [ref=e5] [box=400,300,200,100]:\n'
                '    - button "Inside" [ref=f1e2] [box=3,4,50,20]\n'
                '  - link "After" [ref=e6] [box=20,30,40,10]')
    moved = boxes_on_display(snapshot, (0, 87)).splitlines()
    assert moved[0] == '- generic [ref=e1] [box=0,87,1920,964]:'
    assert moved[1] == '  - button "Save" [ref=e2] [cursor=pointer] [box=100,287,80,24]'
    assert moved[2] == '  - paragraph [ref=e3] [box=10,47,300,20]: see [box=1,2,3,4]'  # the text is the page's
    assert moved[3] == "  - 'heading \"a: b\" [level=2] [ref=e4] [box=5,93,7,8]'"
    assert moved[4] == '  - iframe [ref=e5] [box=400,387,200,100]:'
    assert moved[5] == '    - button "Inside" [ref=f1e2]'  # the frame's own viewport: no box rather than a wrong one
    assert moved[6] == '  - link "After" [ref=e6] [box=20,117,40,10]'


def test_a_page_nodes_box_is_where_osworlds_xml_says_a_nodes_place_and_size():
    page = PAGE.model_copy(update={"snapshot": '- button "Sign in" [ref=e5] [box=100,287,80,24]'})
    merged = merge([BROWSER], [0x00e00002], 0x00e00002, [], page, browser_pid=43)
    root = ElementTree.fromstring(build(merged, truncated=False, interactive_only=False, fmt="xml").content)
    button = root.find(".//document-web/push-button")
    cp, attr = f"{{{OSWORLD_NS['cp']}}}", f"{{{OSWORLD_NS['attr']}}}"
    assert (button.get(f"{cp}screencoord"), button.get(f"{cp}size")) == ("(100, 287)", "(80, 24)")
    assert button.get(f"{attr}box") is None and button.get(f"{attr}ref") == "e5"


def test_a_window_id_is_read_as_the_windows_listing_and_focus_accept_it():
    from desktop.x11.windows import window_number

    # "047" passes WINDOW_ID's pattern; int("047", 0) raised ValueError (a 500 the API fuzz found)
    assert [window_number(t) for t in ("047", "0x01A00003", "0X1f", "27262979")] == [47, 0x01A00003, 31, 27262979]


def test_a_bad_query_lists_every_problem():
    with pytest.raises(ValidationError) as caught:
        TreeQuery(window="main", max_depth=0, max_nodes=10**6, format="yaml")
    assert sorted(e["loc"][0] for e in caught.value.errors()) == ["format", "max_depth", "max_nodes", "window"]
