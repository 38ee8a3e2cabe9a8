"""Calibration's pure parts: where the targets go, how errors add up, the page's markup, the
provider wrapper that ends a target's run once the model has clicked, the full-screen bubble check."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw

from desktop.actions import Click, Drag, Move, Scroll
from desktop.browser.targets import RADIUS, page_html
from vision.actions import ToolCall
from vision.calibration.layout import MARGIN, layout, summary
from vision.calibration.service import UntilClick, same_band
from vision.providers.base import Observation
from vision.providers.function import FunctionProvider, calls


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 9, 12, 16, 20, 33, 48])
def test_the_targets_are_as_many_as_asked_distinct_on_screen_and_spread_to_the_edges(count):
    points = layout(count)
    assert len(points) == count == len(set(points))
    assert all(MARGIN <= x <= 1919 - MARGIN and MARGIN <= y <= 1079 - MARGIN for x, y in points)
    if count >= 4:  # the corners, where a scaling error is largest, are measured
        assert {(MARGIN, MARGIN), (1919 - MARGIN, MARGIN), (MARGIN, 1079 - MARGIN),
                (1919 - MARGIN, 1079 - MARGIN)} <= set(points)
    # Far enough apart that a click can be told from its neighbour's: two radii and then some.
    if count > 1:
        closest = min(max(abs(a[0] - b[0]), abs(a[1] - b[1])) for i, a in enumerate(points) for b in points[i + 1:])
        assert closest > 2 * RADIUS + 40


def test_a_single_target_sits_in_the_middle_and_no_target_is_refused():
    assert layout(1) == [(959, 539)]
    with pytest.raises(ValueError):
        layout(0)


def test_the_summary_is_mean_worst_and_the_bias_on_each_axis():
    assert summary([(3, 4), (0, 0), (-6, 8)]) == {"mean_error_px": 5.0, "worst_error_px": 10.0,
                                                   "mean_dx": -1.0, "mean_dy": 4.0}
    assert summary([]) == {"mean_error_px": None, "worst_error_px": None, "mean_dx": None, "mean_dy": None}


def test_the_page_puts_each_numbered_target_at_its_pixel_and_escapes_labels():
    html = page_html([(30, 30), (1889, 1049)], labels=["1", "<b>"])
    assert 'data-x="30" data-y="30"' in html and 'data-x="1889" data-y="1049"' in html
    assert "&lt;b&gt;" in html and "<b>" not in html.split("<body>")[1].split("<script>")[0]
    assert f"width: {2 * RADIUS + 1}px" in html  # an odd width: the centre is a whole pixel
    assert "<title>glassdesk calibration</title>" in html


def _observation():
    from desktop.frame import Frame

    return Observation(frame=Frame(bgra=bytes(4 * 4 * 4), width=4, height=4))


def test_until_click_passes_turns_through_until_a_press_then_ends_the_run_without_the_model():
    turns = [calls(Move(x=5, y=5), text="looking"), calls(Scroll(x=1, y=1, direction="down")),
             calls(Click(x=100, y=200)), calls(Click(x=1, y=1))]
    inner = FunctionProvider(lambda ctx: turns[ctx.turn - 1])
    wrapped = UntilClick(inner)
    for _ in range(3):
        wrapped.turn(_observation(), [])
    assert wrapped.clicked and wrapped.aimed == (100, 200)
    done = wrapped.turn(_observation(), [])
    assert done.done and inner.turns == 3  # the model was not asked again
    assert [len(a) for a in wrapped.answers] == [1, 1, 1]
    assert wrapped.answers[2][0].input == Click(x=100, y=200).model_dump()
    assert wrapped.texts == ["looking"]


def test_until_click_takes_a_drag_as_a_press_and_ignores_a_call_in_error():
    from vision.providers.base import ModelTurn

    bad = ModelTurn(calls=[ToolCall("c1", "computer", {"x": 9000}, actions=[], error="off the screen")])
    drag = calls(Drag(path=[{"x": 10, "y": 20}, {"x": 30, "y": 40}]))
    turns = [bad, drag]
    wrapped = UntilClick(FunctionProvider(lambda ctx: turns[ctx.turn - 1]))
    wrapped.turn(_observation(), [])
    assert not wrapped.clicked and wrapped.answers[0][0].error == "off the screen"
    wrapped.turn(_observation(), [])
    assert wrapped.clicked and wrapped.aimed == (10, 20)


def test_the_bubble_check_tells_the_browsers_bubble_from_the_page():
    page = Image.new("RGB", (1920, 1080), "white")
    ImageDraw.Draw(page).ellipse((938, 8, 982, 52), fill="yellow", outline="red")
    screen = page.copy()
    assert same_band(screen, page)
    ImageDraw.Draw(screen).rectangle((760, 45, 1160, 95), fill=(140, 140, 140))  # "To exit full screen..."
    assert not same_band(screen, page)
    nearly = page.copy()
    nearly.putpixel((960, 30), (0, 0, 0))  # a few pixels rendered apart are not a bubble
    assert same_band(nearly, page)
