"""desktop.marks on trees and screenshots made here (no X): which controls get a mark, their numbers
in reading order, the list a model reads, and the boxes and numbers drawn on the screenshot."""

from __future__ import annotations

import io

from PIL import Image

from desktop.marks import COLOURS, as_text, draw, native_candidates, numbered
from desktop.models import Mark, Marks, TreeNode, TreeWindow


def node(ref, role, name, box, states=("enabled", "showing", "focusable"), children=(), actions=("click",)):
    return TreeNode(ref=ref, role=role, name=name, box=list(box) if box else None, states=list(states),
                    actions=list(actions), children=list(children))


def window(pid, nodes, application="galculator"):
    return TreeWindow(id=f"0x{pid:x}", pid=pid, x=0, y=0, width=800, height=600, wm_class="a.A", title="t",
                      focused=False, on_top=False, application=application, nodes=nodes)


def test_a_native_control_is_marked_only_where_its_program_is_on_top_and_showing():
    frame = node("n1", "frame", "calc", (0, 0, 400, 400), actions=(), states=("showing",), children=[
        node("n2", "push button", "7", (10, 10, 40, 30)),
        node("n3", "push button", "8", (300, 10, 40, 30)),             # under another program's window
        node("n4", "push button", "9", None),                          # no box: not on the screen
        node("n5", "push button", "0", (60, 10, 40, 30), states=("enabled", "focusable")),  # not showing
        node("n6", "label", "Memory", (10, 60, 80, 20), actions=(), states=("showing",)),  # not a control
    ])
    covered = lambda x, y: 999 if x > 250 else 100  # noqa: E731 - another window over the right half
    found = native_candidates([window(100, [frame])], covered)
    assert [(c["ref"], c["role"], c["name"], c["application"]) for c in found] == [
        ("n2", "push button", "7", "galculator")]


def test_marks_are_numbered_in_reading_order_and_bounded():
    candidates = [{"source": "page", "role": "button", "name": "Go", "box": [500, 305, 60, 20]},
                  {"source": "native", "role": "push button", "name": "7", "box": [10, 300, 40, 30], "ref": "n2",
                   "application": "galculator"},
                  {"source": "page", "role": "link", "name": "Home", "box": [5, 20, 50, 15]}]
    marks, more = numbered(candidates, 10)
    assert [(m.mark, m.name) for m in marks] == [(1, "Home"), (2, "7"), (3, "Go")] and more is False
    two, more = numbered(candidates, 2)
    assert len(two) == 2 and more is True
    assert as_text(marks).splitlines() == ['[1] link "Home" @5,20 50x15 (page)',
                                           '[2] push button "7" @10,300 40x30 (native n2 in galculator)',
                                           '[3] button "Go" @500,305 60x20 (page)']
    assert as_text([], False) == "no control to mark on the screen"
    assert as_text(two, True).endswith("not all are marked)")


def test_each_mark_is_drawn_as_its_box_and_number():
    blank = io.BytesIO()
    Image.new("RGB", (400, 300), (255, 255, 255)).save(blank, "PNG")
    marks, _ = numbered([{"source": "page", "role": "button", "name": "Go", "box": [100, 100, 80, 40]},
                         {"source": "page", "role": "button", "name": "Top", "box": [10, 0, 60, 30]}], 5)
    with Image.open(io.BytesIO(draw(blank.getvalue(), marks))) as drawn:
        pixels = drawn.convert("RGB")
        assert pixels.size == (400, 300)
        assert pixels.getpixel((140, 139)) != (255, 255, 255)   # the box's bottom edge
        assert pixels.getpixel((140, 120)) == (255, 255, 255)   # its inside left clear
        tag = [pixels.getpixel((x, y)) for x in range(100, 112) for y in range(86, 99)]
        assert sum(p != (255, 255, 255) for p in tag) > 60      # the number's tag, above the box
        inside = [pixels.getpixel((x, y)) for x in range(10, 22) for y in range(1, 14)]
        assert sum(p != (255, 255, 255) for p in inside) > 60   # no room above: the tag inside the box


def test_a_models_list_of_marks_gives_each_centre_in_its_own_coordinates():
    from vision import coords
    from vision.perception.marks import marks_note

    marks = Marks(marks=[Mark(mark=1, source="page", role="button", name="Sign in", box=[1200, 120, 110, 40]),
                         Mark(mark=2, source="native", role="push button", name="7", box=[1900, 1060, 60, 60],
                              application="galculator")],
                  truncated=True, error="the page's controls were not read")
    space = coords.pixels(960, 540)
    half = marks_note(marks, space)
    assert f'[1] button "Sign in" (page): centre {space.from_display(1255, 140)}' in half
    assert "960x540 pixels of the screenshot" in half
    assert '[2] push button "7" (galculator): centre (959, 539)' in half  # partly off the screen: its edge
    assert "not every one is numbered" in half and "were not read" in half
    # pointed at as listed, the model's click lands on the control's middle (within the conversion's pixel)
    landed = space.to_display(*space.from_display(1255, 140))
    assert abs(landed[0] - 1255) <= 2 and abs(landed[1] - 140) <= 2
    grid = marks_note(marks, coords.gemini())
    assert f"centre {coords.gemini().from_display(1255, 140)}" in grid and "1000x1000 grid" in grid
    assert "centre (1255, 140)" in marks_note(marks, None) and "display pixels" in marks_note(marks, None)
    assert "no control to mark" in marks_note(Marks(marks=[]), None)


def test_a_frame_with_marks_drawn_leaves_the_frame_it_was_drawn_from_as_it_was():
    from desktop.marks import drawn_frame
    from tests.fakes.desktop import solid_frame

    plain = solid_frame(3)
    marked = drawn_frame(plain, [Mark(mark=1, source="page", box=[10, 10, 50, 20])])
    assert (marked.width, marked.height) == (plain.width, plain.height) and not marked.same_pixels(plain)
    assert plain.same_pixels(solid_frame(3)) and marked.image.getpixel((10, 15)) == COLOURS[1]
