"""The field of a label, found by asking the page (vision.perception.fields.field_by_page): a page
is a set of boxes here, each an element; the points asked about, their order and the choice are
pure, so the same screen gives the same field."""

from __future__ import annotations

import pytest

from desktop.models import ElementAt
from vision.perception.fields import editable, field_by_page, probe_points
from vision.perception.grounding import GroundingError
from vision.perception.ocr import Box, Line


def element(tag: str, box: tuple[int, int, int, int], role: str | None = None, name: str | None = None) -> ElementAt:
    x0, y0, x1, y1 = box
    return ElementAt(x=0, y=0, css_x=0, css_y=0, tag=tag, role=role, name=name,
                     box={"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0})


class Page:
    """Elements as boxes, the topmost last; anything else is the form, then the page itself."""

    def __init__(self, *elements: ElementAt, form: tuple[int, int, int, int] = (50, 50, 900, 600)):
        self.elements = [element("body", (0, 0, 1920, 1080)), element("form", form, role="form"), *elements]
        self.asked: list[tuple[int, int]] = []

    def __call__(self, x: int, y: int) -> ElementAt:
        self.asked.append((x, y))
        return next(e for e in reversed(self.elements) if e.box["x"] <= x < e.box["x"] + e.box["width"]
                    and e.box["y"] <= y < e.box["y"] + e.box["height"])


NAME = Line("Name", Box(100, 100, 160, 120))  # the label's OCR box
FIELD_BELOW = element("input", (100, 126, 400, 156), role="textbox", name="Name")
FIELD_RIGHT = element("input", (180, 96, 480, 124), role="textbox", name="Name")


@pytest.mark.parametrize("layout,page,expected", [
    ("label above its field", Page(element("label", (100, 100, 160, 120)), FIELD_BELOW), (250, 141, "field-below")),
    ("label left of its field", Page(element("label", (100, 100, 160, 120)), FIELD_RIGHT), (330, 110, "field-right")),
    ("placeholder only", Page(element("input", (90, 95, 400, 125), role="textbox")), (245, 110, "field-at")),
    ("floating label over its field", Page(element("input", (90, 90, 400, 130), role="textbox"),
                                           element("label", (100, 100, 160, 120))), (245, 110, "field-right")),
    ("a password field (no role)", Page(element("input", (100, 126, 400, 156))), (250, 141, "field-below")),
    ("a text area below", Page(element("textarea", (100, 130, 500, 230))), (300, 180, "field-below")),
])
def test_the_first_editable_element_near_the_label_is_the_field_in_its_middle(layout, page, expected):
    spot = field_by_page([NAME], NAME.box, page)
    assert (spot.x, spot.y, spot.how) == expected, layout


def test_a_button_below_the_label_is_never_taken_for_its_field_and_the_step_fails_saying_what_was_there():
    page = Page(element("button", (100, 130, 220, 160), role="button", name="Sign in"))
    with pytest.raises(GroundingError, match=r"no editable field next to it \(the page has <form>, "
                                             r"<button> 'Sign in' there\)"):
        field_by_page([NAME], NAME.box, page, label_text="Name")


def test_the_next_labels_field_is_not_reached_past_its_label():
    """A grid: labels in a row above their fields. The scan right stops at the next label."""
    email = Line("Email", Box(500, 100, 560, 120))
    page = Page(element("input", (500, 126, 800, 156), role="textbox", name="Email"), FIELD_BELOW)
    assert all(x < 500 for x, _, how in probe_points([NAME, email], NAME.box) if how == "field-right")
    spot = field_by_page([NAME, email], NAME.box, page)
    assert (spot.x, spot.how) == (250, "field-below")


def test_the_same_screen_asks_the_same_points_and_gets_the_same_field():
    first, second = Page(FIELD_BELOW), Page(FIELD_BELOW)
    assert field_by_page([NAME], NAME.box, first) == field_by_page([NAME], NAME.box, second)
    assert first.asked == second.asked and len(first.asked) <= 80


def test_a_browser_that_cannot_say_leaves_it_to_the_pixels():
    assert field_by_page([NAME], NAME.box, lambda x, y: None) is None


@pytest.mark.parametrize("tag,role,takes", [
    ("input", "textbox", True), ("input", None, True), ("textarea", None, True), ("div", "textbox", True),
    ("input", "checkbox", False), ("input", "button", False), ("form", "form", False), ("label", None, False),
    ("button", "button", False), ("select", "combobox", True),
])
def test_what_takes_typed_text(tag, role, takes):
    assert editable(element(tag, (0, 0, 10, 10), role=role)) is takes
