"""desktop.native on trees made by hand (no bus, no X): which controls a native target names, the one an
action acts on, and whether the pointer landed on it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from desktop.errors import AmbiguousElement, ElementNotFound
from desktop.models import NativeElement, NativeTarget, TreeNode, TreeWindow
from desktop.native import centre, find, landed, the_one


def node(ref: str, role: str, name: str = "", box=(0, 0, 10, 10), children=()) -> TreeNode:
    return TreeNode(ref=ref, role=role, name=name, states=["enabled", "showing"], box=list(box) if box else None,
                    children=list(children))


def window(wid: str, application: str, wm_class: str, nodes, pid: int = 100, on_top: bool = False) -> TreeWindow:
    return TreeWindow(id=wid, pid=pid, x=0, y=0, width=500, height=500, wm_class=wm_class, title=application,
                      focused=on_top, on_top=on_top, application=application, nodes=nodes)


CALCULATOR = window("0x01", "galculator", "galculator.Galculator", [
    node("n1", "frame", "galculator", (0, 0, 300, 300), [
        node("n2", "panel", "", (0, 0, 300, 300), [
            node("n3", "toggle button", "7", (10, 10, 40, 30)),
            node("n4", "toggle button", "8", (60, 10, 40, 30)),
            node("n5", "toggle button", "MS", (110, 10, 40, 30)),
            node("n6", "label", "Memory", (10, 60, 80, 20)),
        ]),
    ]),
], pid=100)
EDITOR = window("0x02", "mousepad", "mousepad.Mousepad", [
    node("n10", "frame", "Untitled 1 - Mousepad", (0, 0, 400, 400), [
        node("n11", "menu bar", "", (0, 0, 400, 20), [node("n12", "menu", "File", (0, 0, 30, 20))]),
        node("n13", "text", "", (0, 20, 400, 380)),
        node("n14", "toggle button", "7 up", None),
    ]),
], pid=200, on_top=True)
WINDOWS = [CALCULATOR, EDITOR]


def refs(target: NativeTarget) -> list[str]:
    return [m.ref for m in find(WINDOWS, target).matches]


def test_role_is_compared_whole_and_name_as_a_case_insensitive_part_unless_exact():
    assert refs(NativeTarget(role="toggle button", name="7")) == ["n3", "n14"]
    assert refs(NativeTarget(role="Toggle_Button", name="7", exact=True)) == ["n3"]
    assert refs(NativeTarget(name="m")) == ["n5", "n6", "n10"]  # MS, Memory, Mousepad's frame, in the tree's order
    assert refs(NativeTarget(role="button")) == []  # a role is whole: "toggle button" is not "button"


def test_app_is_the_bus_name_or_either_part_of_the_window_class():
    for app in ("galculator", "GALCULATOR", "Galculator"):
        assert refs(NativeTarget(app=app, role="toggle button")) == ["n3", "n4", "n5"]
    assert refs(NativeTarget(app="Mousepad", role="toggle button")) == ["n14"]
    assert refs(NativeTarget(app="gedit", role="toggle button")) == []


def test_within_looks_inside_its_matches_only_and_nth_picks_from_the_matches():
    assert refs(NativeTarget(name="7", within=NativeTarget(role="panel"))) == ["n3"]
    assert refs(NativeTarget(role="menu", within=NativeTarget(role="menu bar", app="mousepad"))) == ["n12"]
    assert refs(NativeTarget(role="toggle button", nth=1)) == ["n4"]
    assert refs(NativeTarget(role="toggle button", nth=-1)) == ["n14"]
    assert refs(NativeTarget(role="toggle button", nth=9)) == []
    assert refs(NativeTarget(ref="n13")) == ["n13"]
    found = find(WINDOWS, NativeTarget(ref="n4"))
    match = found.matches[0]
    assert (match.window, match.pid, match.application, match.on_top) == ("0x01", 100, "galculator", False)
    assert match.path == ["frame 'galculator'", "panel", "toggle button '8'"] and match.children == []


def test_an_action_needs_exactly_one_match_with_a_box():
    assert the_one(find(WINDOWS, NativeTarget(app="galculator", name="7"))).ref == "n3"
    listed = r"\(n3: panel > toggle button '7' in galculator; .*; n14: .*\)"
    with pytest.raises(AmbiguousElement, match=rf"matches 4 controls {listed}: name it more closely"):
        the_one(find(WINDOWS, NativeTarget(role="toggle button")))
    with pytest.raises(ElementNotFound, match="no control on the screen matches push button 'Save' in mousepad"):
        the_one(find(WINDOWS, NativeTarget(app="mousepad", role="push button", name="Save")))
    with pytest.raises(ElementNotFound, match="cut at its node bound"):
        the_one(find(WINDOWS, NativeTarget(name="Save"), truncated=True))
    with pytest.raises(ElementNotFound, match="the accessibility bus: no bus"):
        the_one(find([], NativeTarget(name="Save"), error="no bus"))
    with pytest.raises(ElementNotFound, match=r"\(n14\) has no box on the screen"):
        the_one(find(WINDOWS, NativeTarget(name="7 up")))
    assert centre(the_one(find(WINDOWS, NativeTarget(ref="n3")))) == (30, 25)
    assert find(WINDOWS, NativeTarget(role="toggle button")).count == 4


def test_landed_is_the_control_or_one_inside_it_and_unknown_when_nothing_was_read():
    panel = the_one(find(WINDOWS, NativeTarget(role="panel")))
    seven = the_one(find(WINDOWS, NativeTarget(ref="n3")))
    read = NativeElement(ref="n3", role="toggle button", name="7",
                         path=["frame 'galculator'", "panel", "toggle button '7'"], application="galculator")
    assert landed(seven, read) is True
    assert landed(panel, read) is True  # inside the panel
    assert landed(the_one(find(WINDOWS, NativeTarget(ref="n4"))), read) is False
    assert landed(seven, None) is None


def test_a_target_is_named_one_way_with_every_problem_said():
    with pytest.raises(ValidationError) as refused:
        NativeTarget(ref="e12", role="text", exact=True)
    said = str(refused.value)
    assert "native refs look like n17" in said and "role, exact: not with a ref" in said
    with pytest.raises(ValidationError, match="name the control"):
        NativeTarget(app="mousepad")
    with pytest.raises(ValidationError, match="exact: only with a name"):
        NativeTarget(role="text", exact=True)
    with pytest.raises(ValidationError, match="Extra inputs"):
        NativeTarget.model_validate({"role": "text", "label": "x"})
    assert NativeTarget(app="mousepad", role="push button", name="Save", nth=1,
                        within=NativeTarget(role="dialog")).describe() == \
        "push button 'Save' in mousepad (nth 1) within dialog"
