"""vision.coords: every model space round-trips to within 1 display pixel, and off-space is refused."""

from __future__ import annotations

import pytest

from vision import coords
from vision.coords import OffScreen, Space

# Every convention, at the sizes the providers actually send.
SPACES: dict[str, Space] = {
    "anthropic 1429x804": coords.anthropic(),
    "openai preview 1280x720": coords.pixels(1280, 720),
    "openai GA 1920x1080": coords.pixels(1920, 1080),
    "openai 1024x768": coords.pixels(1024, 768),
    "relative 0..1000": coords.relative(),
    "gemini 0..999": coords.gemini(),
    "smart-resized 1932x1092": coords.smart_resized(),
    "smart-resized from 1280x720": coords.smart_resized(1280, 720),
}


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
def test_every_display_pixel_round_trips_within_one_pixel(space: Space):
    # Axes are independent, so every column and every row covers every point.
    for x in range(1920):
        back, _ = space.to_display(*space.from_display(x, 0))
        assert abs(back - x) <= 1, (x, back)
    for y in range(1080):
        _, back = space.to_display(*space.from_display(0, y))
        assert abs(back - y) <= 1, (y, back)


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
@pytest.mark.parametrize("point", [(0, 0), (1919, 0), (0, 1079), (1919, 1079), (960, 540), (1, 1), (1918, 1078)])
def test_corners_and_centre_round_trip(space: Space, point: tuple[int, int]):
    model = space.from_display(*point)
    assert 0 <= model[0] <= space.max_x and 0 <= model[1] <= space.max_y
    x, y = space.to_display(*model)
    assert abs(x - point[0]) <= 1 and abs(y - point[1]) <= 1


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
def test_model_corners_land_on_the_display(space: Space):
    assert space.to_display(0, 0) == (0, 0)
    x, y = space.to_display(space.max_x, space.max_y)
    assert 1917 <= x <= 1919 and 1077 <= y <= 1079


def test_smart_resize_known_values():
    assert coords.smart_resize(1080, 1920) == (1092, 1932)
    assert coords.smart_resized().image_size == (1932, 1092)
    assert coords.smart_resize(720, 1280) == (728, 1288)
    # Over max_pixels: scaled down, still multiples of 28, within the bound.
    h, w = coords.smart_resize(1080, 1920, max_pixels=1280 * 28 * 28)
    assert h % 28 == 0 and w % 28 == 0 and h * w <= 1280 * 28 * 28
    # Under min_pixels: scaled up.
    h, w = coords.smart_resize(20, 30, min_pixels=56 * 56)
    assert h % 28 == 0 and w % 28 == 0 and h * w >= 56 * 56


def test_smart_resize_refuses_absurd_aspect():
    with pytest.raises(ValueError):
        coords.smart_resize(10, 3000)


def test_anthropic_size_obeys_both_limits_and_keeps_aspect():
    w, h = coords.anthropic_size()
    assert (w, h) == (1429, 804)
    assert w * h <= 1_150_000 and max(w, h) <= 1568
    assert abs(w / h - 1920 / 1080) / (1920 / 1080) < 0.01
    # Largest: one more pixel on either side breaks the pixel budget.
    assert (w + 1) * (h + 1) > 1_150_000


def test_anthropic_size_long_edge_limit_and_small_images():
    w, h = coords.anthropic_size(3000, 500)  # few pixels but a long edge
    assert w == 1568 and abs(w / h - 6) < 0.06
    assert coords.anthropic_size(800, 600) == (800, 600)  # never upscaled


@pytest.mark.parametrize("space, point", [
    (coords.relative(), (1001, 500)),
    (coords.relative(), (500, -1)),
    (coords.gemini(), (1000, 10)),
    (coords.pixels(1280, 720), (1280, 10)),
    (coords.pixels(1280, 720), (10, 720)),
    (coords.anthropic(), (1429, 0)),
    (coords.smart_resized(), (1932, 0)),
    (coords.relative(), (float("nan"), 0)),
])
def test_off_space_model_coordinates_raise(space: Space, point):
    with pytest.raises(OffScreen):
        space.to_display(*point)


def test_off_screen_is_a_value_error_with_a_clear_message():
    with pytest.raises(ValueError, match=r"x=1200 is off the screen: valid x is 0..1000"):
        coords.relative().to_display(1200, 5)


def test_off_display_pixels_raise():
    with pytest.raises(OffScreen):
        coords.relative().from_display(1920, 0)
    with pytest.raises(OffScreen):
        coords.relative().from_display(0, -1)


def test_full_scale_relative_is_valid_and_clamped_to_the_last_pixel():
    assert coords.relative().to_display(1000, 1000) == (1919, 1079)
    assert coords.relative().to_display(500, 500) == (960, 540)
    assert coords.gemini().to_display(999, 999) == (1918, 1079)


def test_fractional_model_coordinates_are_accepted():
    assert coords.relative().to_display(500.4, 250.6) == (961, 271)


def test_image_size_only_for_pixel_spaces():
    assert coords.pixels(1280, 720).image_size == (1280, 720)
    assert coords.relative().image_size is None


def test_describe_states_the_size():
    assert "1280x720" in coords.pixels(1280, 720).describe()
    assert "1000" in coords.relative().describe()
