"""Visual diff (vision/qa/diff.py): pixelmatch's decisions, vectorised; no X needed.

The cross-checks run the PyPI pure-Python port of pixelmatch on the same images: the count of
differing pixels must be exactly its count for the same options.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from pixelmatch.core import pixelmatch

from vision.qa import diff as diff_module
from vision.qa.diff import (
    DEFAULT_MAX_REGION_PIXELS,
    ImageSizeMismatch,
    Limits,
    compare,
    decode_png,
    diff_image,
    encode_png,
    find_regions,
    judge,
    mask_boxes,
)

WHITE, INK, BLUE = (255, 255, 255), (20, 20, 60), (40, 110, 220)


def _page(button_x: int = 100, width: int = 400, height: int = 120) -> np.ndarray:
    """A flat background with some text and a solid button whose left edge is at button_x."""
    image = Image.new("RGB", (width, height), WHITE)
    draw = ImageDraw.Draw(image)
    draw.text((10, 10), "Total: 42 items", fill=INK, font=ImageFont.load_default(size=14))
    draw.rectangle((button_x, 60, button_x + 80, 90), fill=BLUE)
    return np.array(image)


def _text(offset_eighths: int) -> np.ndarray:
    """Anti-aliased text rendered 8x larger and reduced (a box filter: real coverage-based
    anti-aliasing), so an offset of 1 is the same text re-rendered 1/8 pixel to the right."""
    scale = 8
    big = Image.new("RGB", (400 * scale, 60 * scale), WHITE)
    ImageDraw.Draw(big).text((10 * scale + offset_eighths, 5 * scale), "Quick brown fox 0123", fill=INK,
                             font=ImageFont.load_default(size=32 * scale))
    return np.array(big.resize((400, 60), Image.Resampling.BOX))


def _pixelmatch(a: np.ndarray, b: np.ndarray, **options) -> int:
    def rgba(image: np.ndarray) -> list[int]:
        if image.shape[2] == 3:
            image = np.dstack([image, np.full(image.shape[:2], 255, np.uint8)])
        return image.reshape(-1).tolist()
    return pixelmatch(rgba(a), rgba(b), a.shape[1], a.shape[0], **options)


def _png_pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        assert image.format == "PNG"
        return np.asarray(image.convert("RGB"))


# ------------------------------------------------------------------------------------ compare

def test_identical_images_have_no_difference():
    page = _page()
    result = compare(page, page.copy())
    assert (result.diff_pixels, result.total_pixels) == (0, 400 * 120)
    assert result.diff_fraction == 0 and result.diff_percentage == 0 and not result.changed.any()


def test_a_one_unit_colour_change_passes_but_not_at_threshold_zero():
    page = _page()
    shifted = page.copy()
    shifted[..., 2] = np.where(shifted[..., 2] < 255, shifted[..., 2] + 1, 254)  # every pixel's blue, by 1
    assert compare(page, shifted).diff_pixels == 0
    # The change is there: only the tolerance hides it.
    strict = compare(page, shifted, pixel_threshold=0, ignore_antialiasing=False)
    assert strict.diff_pixels == page.shape[0] * page.shape[1]


def test_a_moved_element_fails_and_the_diff_image_shows_red_exactly_where_it_moved():
    before, after = _page(button_x=100), _page(button_x=120)
    result = compare(before, after)
    # The button is solid: what differs is the strip it left (x 100..119) and the strip it took (181..200).
    expected = np.zeros(before.shape[:2], bool)
    expected[60:91, 100:120] = expected[60:91, 181:201] = True
    assert np.array_equal(result.changed, expected)
    assert result.diff_pixels == expected.sum() == 2 * 20 * 31
    assert result.diff_percentage == pytest.approx(100 * 1240 / (400 * 120))
    assert result.diff_pixels == _pixelmatch(before, after)

    pixels = _png_pixels(diff_image(before, after, result))
    assert pixels.shape == before.shape
    red = np.all(pixels == (255, 0, 0), axis=2)
    assert np.array_equal(red, expected)
    # Each region is boxed 1 px outside it (the strips are 620 px each: over the limit, magenta).
    boxes = _box_outlines(before.shape[:2], [(100, 60, 120, 91), (181, 60, 201, 91)])
    assert np.array_equal(np.all(pixels == (255, 0, 255), axis=2), boxes)
    assert [(r.box, r.pixels) for r in result.regions] == [((100, 60, 120, 91), 620), ((181, 60, 201, 91), 620)]
    # Elsewhere a faded grey copy of the baseline: grey, light, darker where the baseline is dark.
    rest = pixels[~expected & ~boxes]
    assert np.all(rest[:, 0] == rest[:, 1]) and np.all(rest[:, 1] == rest[:, 2])
    assert rest.min() >= 255 - 26  # 10% opacity: black fades to 230 at the darkest
    assert pixels[70, 150, 0] < pixels[5, 5, 0] == 255  # the unmoved part of the button shows, fainter


def _box_outlines(shape: tuple[int, int], boxes) -> np.ndarray:
    """Where diff_image draws the outline of each box (x0, y0, x1, y1; ends exclusive): 1 px outside."""
    out = np.zeros(shape, bool)
    for x0, y0, x1, y1 in boxes:
        out[y0 - 1, x0 - 1:x1 + 1] = out[y1, x0 - 1:x1 + 1] = True
        out[y0 - 1:y1 + 1, x0 - 1] = out[y0 - 1:y1 + 1, x1] = True
    return out


def test_anti_aliased_text_re_rendered_at_a_sub_pixel_offset_passes_only_when_anti_aliasing_is_ignored():
    baseline, current = _text(0), _text(1)
    assert np.count_nonzero(np.any(baseline != current, axis=2)) > 500  # the renderings really differ
    forgiving = compare(baseline, current)
    strict = compare(baseline, current, ignore_antialiasing=False)
    assert forgiving.diff_fraction <= 0.01 < strict.diff_fraction  # the verbs' default threshold: 1% of pixels
    assert (forgiving.antialiased is not None
            and forgiving.antialiased.sum() == strict.diff_pixels - forgiving.diff_pixels)
    assert (forgiving.diff_pixels, strict.diff_pixels) == (_pixelmatch(baseline, current),
                                                           _pixelmatch(baseline, current, includeAA=True))
    # Text that moved by whole pixels is a change, anti-aliasing or not.
    assert compare(baseline, _text(8 * 3)).diff_fraction > 0.01


def test_a_masked_changing_region_passes_and_is_left_out_of_the_count():
    clock_at_10, clock_at_11 = _page(), _page()
    for image, text in ((clock_at_10, "10:41"), (clock_at_11, "10:42")):
        pil = Image.fromarray(image)
        ImageDraw.Draw(pil).text((330, 100), text, fill=INK, font=ImageFont.load_default(size=14))
        image[...] = np.asarray(pil)
    assert compare(clock_at_10, clock_at_11).diff_pixels > 0
    mask = mask_boxes(120, 400, [(320, 95, 400, 120)])
    result = compare(clock_at_10, clock_at_11, mask=mask)
    assert result.diff_pixels == 0 and result.total_pixels == 400 * 120 - 80 * 25
    pixels = _png_pixels(diff_image(clock_at_10, clock_at_11, result))
    masked, unmasked = pixels[100, 390], pixels[5, 5]
    assert masked[2] > masked[0] and masked[2] > masked[1]  # tinted blue
    assert tuple(unmasked) == (255, 255, 255)


def test_a_mask_over_a_real_change_hides_only_what_it_covers():
    before, after = _page(button_x=100), _page(button_x=120)
    half = compare(before, after, mask=mask_boxes(120, 400, [(0, 0, 150, 120)]))  # hides the strip left behind
    assert half.diff_pixels == 20 * 31 and not half.changed[:, :150].any()


def test_images_of_different_sizes_are_refused_naming_both_sizes():
    with pytest.raises(ImageSizeMismatch, match="400x120.*400x119"):
        compare(_page(), _page()[:119])
    with pytest.raises(ValueError):  # ImageSizeMismatch is a ValueError
        diff_image(_page(), _page()[:, :399], compare(_page(), _page()))


@pytest.mark.parametrize("bad", [
    np.zeros((4, 4), np.uint8),  # no channels
    np.zeros((4, 4, 2), np.uint8),
    np.zeros((4, 4, 3), np.float32),
])
def test_what_is_not_an_image_array_is_refused(bad):
    with pytest.raises(ValueError, match="uint8"):
        compare(bad, bad)


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_a_pixel_threshold_outside_0_to_1_is_refused(threshold):
    with pytest.raises(ValueError, match="pixel_threshold"):
        compare(_page(), _page(), pixel_threshold=threshold)


def test_a_mask_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="mask"):
        compare(_page(), _page(), mask=np.zeros((10, 10), bool))


def test_rgb_and_opaque_rgba_compare_as_the_same_image_and_translucency_is_blended_over_white():
    page = _page()
    opaque = np.dstack([page, np.full(page.shape[:2], 255, np.uint8)])
    assert compare(page, opaque).diff_pixels == 0
    clear = opaque.copy()
    clear[..., 3] = 0  # fully transparent: white, as pixelmatch blends it
    white = np.full_like(page, 255)
    assert compare(white, clear).diff_pixels == 0
    assert compare(page, clear).diff_pixels == _pixelmatch(page, clear) > 0


# ------------------------------------------------------------------------------------ regions, verdict

def _blank(height: int = 200, width: int = 300) -> np.ndarray:
    return np.full((height, width, 3), 255, np.uint8)


def test_regions_are_8_connected_with_exclusive_boxes_the_largest_first():
    changed = np.zeros((10, 12), bool)
    for k in range(5):
        changed[k, k] = True  # a diagonal: one region with 8-connectivity, five with 4
    changed[7:9, 9:12] = True  # a 2x3 block at the right edge
    changed[0, 11] = True  # a lone pixel
    regions = find_regions(changed)
    assert [(r.box, r.pixels) for r in regions] == [((9, 7, 12, 9), 6), ((0, 0, 5, 5), 5), ((11, 0, 12, 1), 1)]
    assert regions[0].describe() == "a region of 6 px at [9, 7, 12, 9]"
    assert find_regions(np.zeros((4, 4), bool)) == []
    with pytest.raises(ValueError, match="HxW"):
        find_regions(np.zeros((4, 4, 3), bool))


def test_a_scatter_of_single_pixel_noise_passes_the_default_limits():
    rng = np.random.default_rng(5)
    baseline, current = _blank(), _blank()
    # 600 dark pixels, each alone in its own 3x3 cell of a grid (so no two touch, even diagonally).
    cells = rng.choice(66 * 100, 600, replace=False)
    ys, xs = 3 * (cells // 100) + 1, 3 * (cells % 100) + 1
    current[ys, xs] = (30, 30, 30)
    diff = compare(baseline, current)
    assert diff.diff_pixels == 600 and diff.diff_fraction == 0.01  # at the ratio limit, not over it
    assert len(diff.regions) == 600 and diff.regions[0].pixels == 1
    assert judge(diff, Limits()) == []
    # Playwright's strict limits still see them.
    assert judge(diff, Limits(max_diff_pixels=0)) == ["600 px differ, over max_diff_pixels 0"]
    assert judge(diff, Limits(max_region_pixels=0))[0].startswith("a region of 1 px at ")


def test_a_40_pixel_blob_fails_by_its_region_though_far_under_the_ratio():
    baseline, current = _blank(), _blank()
    current[50:55, 120:128] = (40, 110, 220)  # 5 x 8: 40 px, 0.07 % of the image
    diff = compare(baseline, current)
    assert diff.diff_pixels == 40 and diff.diff_fraction < 0.01
    assert judge(diff, Limits()) == [f"a region of 40 px at [120, 50, 128, 55] exceeds max_region_pixels "
                                     f"{DEFAULT_MAX_REGION_PIXELS}"]
    # The same pixels in specks of 16 pass: it is the size of one region that counts, not the total.
    specks = _blank()
    for k in range(10):
        specks[10 + 6 * k:14 + 6 * k, 10:14] = (40, 110, 220)  # 4x4, apart
    assert judge(compare(baseline, specks), Limits()) == []
    # Without the region limit, only the totals are judged.
    assert judge(diff, Limits(max_region_pixels=None)) == []
    assert judge(diff, Limits(max_region_pixels=None, max_diff_pixel_ratio=0.0001)) == [
        "40 px differ (ratio 0.000666667), over max_diff_pixel_ratio 0.0001"]


def test_anti_aliased_edges_re_rendered_pass_and_text_moved_by_a_pixel_fails():
    baseline = _text(0)
    for eighths in (1, 2, 4, 6):  # the same text re-rendered up to 3/4 px to the side
        diff = compare(baseline, _text(eighths))
        assert judge(diff, Limits()) == [], (eighths, diff.regions[:3])
        assert diff.diff_pixels < compare(baseline, _text(eighths), ignore_antialiasing=False).diff_pixels
    moved = compare(baseline, _text(8))  # a whole pixel
    assert judge(moved, Limits(max_diff_pixel_ratio=None))[0].startswith("a region of ")
    # An anti-aliased edge alone: the grey column between a light and a dark area changes shade.
    edge = _blank(40, 60)
    edge[10:30, 20] = (200, 200, 200)
    edge[10:30, 21:40] = (20, 20, 20)
    shifted = edge.copy()
    shifted[10:30, 20] = (120, 120, 120)  # the edge pixels' coverage changed: anti-aliasing
    diff = compare(edge, shifted)
    assert diff.antialiased is not None and diff.antialiased.sum() == 20 and diff.diff_pixels == 0
    assert judge(diff, Limits(max_diff_pixels=0, max_region_pixels=0)) == []
    assert compare(edge, shifted, ignore_antialiasing=False).regions[0].pixels == 20  # one 20-px region else


def test_the_diff_image_boxes_small_regions_in_blue_and_those_over_the_limit_in_magenta():
    baseline, current = _blank(60, 80), _blank(60, 80)
    current[10:15, 10:18] = (0, 0, 0)  # 40 px: over 16
    current[40, 60] = (0, 0, 0)  # 1 px
    diff = compare(baseline, current)
    pixels = _png_pixels(diff_image(baseline, current, diff, max_region_pixels=16))
    assert np.array_equal(np.all(pixels == (255, 0, 255), axis=2), _box_outlines((60, 80), [(10, 10, 18, 15)]))
    assert np.array_equal(np.all(pixels == (0, 160, 255), axis=2), _box_outlines((60, 80), [(60, 40, 61, 41)]))
    assert np.array_equal(np.all(pixels == (255, 0, 0), axis=2), diff.changed)
    # A region at the image's corner: its outline is clipped, nothing raises.
    corner = _blank(60, 80)
    corner[0:3, 77:80] = (0, 0, 0)
    boxed = _png_pixels(diff_image(baseline, corner, compare(baseline, corner), max_region_pixels=None))
    assert np.all(boxed[3, 76:80] == (0, 160, 255)) and np.all(boxed[0:4, 76] == (0, 160, 255))


# ------------------------------------------------------------------------------------ cross-check

def _random_pair(rng: np.random.Generator, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """A small image from a 4-colour palette (so flat areas and equal neighbours occur, as on a
    screen) and a copy with some pixels changed to palette or random colours."""
    height, width = rng.integers(1, 14, 2)
    palette = rng.integers(0, 256, (4, channels), dtype=np.uint8)
    if channels == 4 and rng.random() < 0.5:
        palette[:, 3] = 255
    a = palette[rng.integers(0, 4, (height, width))]
    b = a.copy()
    for _ in range(rng.integers(0, height * width // 2 + 1)):
        y, x = rng.integers(0, height), rng.integers(0, width)
        b[y, x] = palette[rng.integers(0, 4)] if rng.random() < 0.5 else rng.integers(0, 256, channels)
    return a, b


@pytest.mark.parametrize("chunk", [1 << 16, 3])  # small chunks: the same answer across chunk boundaries
def test_diff_pixels_equal_pixelmatch_on_random_small_images(monkeypatch, chunk):
    monkeypatch.setattr(diff_module, "_CHUNK", chunk)
    rng = np.random.default_rng(12)
    antialiasing_mattered = 0
    for trial in range(150):
        a, b = _random_pair(rng, 3 + trial % 2)
        counts = {}
        for threshold in (0.0, 0.1, 0.3):
            for ignore_aa in (True, False):
                expected = _pixelmatch(a, b, threshold=threshold, includeAA=not ignore_aa)
                got = compare(a, b, pixel_threshold=threshold, ignore_antialiasing=ignore_aa).diff_pixels
                assert got == expected, (trial, a.shape, threshold, ignore_aa)
                counts[threshold, ignore_aa] = got
        antialiasing_mattered += counts[0.1, True] != counts[0.1, False]
    assert antialiasing_mattered > 20  # the anti-aliasing test really was exercised


def test_diff_pixels_equal_pixelmatch_on_rendered_text_at_many_offsets():
    baseline = _text(0)[:, :160]
    for offset in (1, 2, 3, 5, 8, 12):
        current = _text(offset)[:, :160]
        assert compare(baseline, current).diff_pixels == _pixelmatch(baseline, current), offset
    # A change in a small part of the image: the anti-aliasing test reads around that part only.
    for x0, x1, y0, y1 in ((40, 70, 10, 30), (0, 20, 0, 60), (150, 160, 50, 60), (60, 61, 20, 21)):
        current = baseline.copy()
        current[y0:y1, x0:x1] = _text(3)[y0:y1, x0:x1]
        assert compare(baseline, current).diff_pixels == _pixelmatch(baseline, current), (x0, y0)
        assert compare(current, baseline).diff_pixels == _pixelmatch(current, baseline), (x0, y0)


# ------------------------------------------------------------------------------------ masks, PNG

def test_mask_boxes_are_clipped_to_the_image_and_ends_are_exclusive():
    mask = mask_boxes(10, 20, [(2, 3, 5, 4), (18, 8, 40, 40), (-5, -5, 1, 1), (7, 7, 7, 9), (30, 0, 40, 5)])
    expected = np.zeros((10, 20), bool)
    expected[3, 2:5] = True
    expected[8:, 18:] = True
    expected[0, 0] = True
    assert np.array_equal(mask, expected)
    assert not mask_boxes(10, 20, []).any()
    with pytest.raises(ValueError, match="x0, y0, x1, y1"):
        mask_boxes(10, 20, [(1, 2, 3)])


def test_png_round_trip_is_pixel_exact_and_garbage_is_refused():
    image = np.random.default_rng(3).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    png = encode_png(image)
    assert png.startswith(b"\x89PNG") and np.array_equal(decode_png(png), image)
    rgba = np.dstack([image, np.zeros(image.shape[:2], np.uint8)])
    assert np.array_equal(decode_png(encode_png(rgba)), image)  # alpha dropped
    grey = Image.fromarray(image[..., 0], "L")
    buffer = io.BytesIO()
    grey.save(buffer, "PNG")
    assert decode_png(buffer.getvalue()).shape == (37, 53, 3)  # any PNG comes back as RGB
    with pytest.raises(ValueError, match="not a readable image"):
        decode_png(b"not a png")
    with pytest.raises(ValueError):
        encode_png(np.zeros((4, 4), np.uint8))


# ------------------------------------------------------------------------------------ still shots

def test_a_shot_is_taken_again_until_two_in_a_row_match(monkeypatch):
    from vision.qa import visual

    frames = iter([b"spinner 1", b"spinner 2", b"loaded", b"loaded", b"never asked"])
    assert visual._still(lambda: next(frames)) == b"loaded"
    assert next(frames) == b"never asked"  # it stopped at the second "loaded"
    # A screen that never stops changing: the last shot at the time limit, not a hang.
    monkeypatch.setattr(visual, "STILL_TIMEOUT_S", 0.05)
    counter = iter(range(1_000_000))
    last = visual._still(lambda: str(next(counter)).encode(), gap_s=0.01)
    assert 1 <= int(last) < 50
