"""Pixel comparison of two screenshots, pixelmatch's algorithm vectorised with numpy (no X).

pixelmatch (mapbox's, and its pure-Python port on PyPI) walks every pixel in an interpreted loop:
seconds for one 1920x1080 frame in Python. Here the same decisions are made on arrays:

1. pixels whose bytes differ are found with one comparison per channel (most of a screenshot
   pair is byte-identical, so everything after this works on a small subset);
2. their colour distance is pixelmatch's: the squared YIQ difference (Kotsarenko & Ramos), over
   the limit ``35215 * t * t`` (35215 is the largest possible value, so ``t`` is 0..1);
3. each pixel over the limit is tested for anti-aliasing (Vysniauskas 2009, as pixelmatch does),
   in both images, with the 8 neighbours gathered as arrays instead of visited one by one.

Every step is computed in float64 with pixelmatch's constants and operation order, so the count
of differing pixels equals pixelmatch's own for the same options (tests/unit/test_qa_diff.py
checks it against the PyPI port), while a 1920x1080 pair takes milliseconds.

The verdict (``judge``) is not pixelmatch's: besides a limit on the total, the differing pixels are
grouped into 8-connected regions and a region larger than ``max_region_pixels`` fails the
comparison. A total of 1 % of a page lets a renamed button (a few hundred pixels) through; a
region limit catches such a change wherever it is on however large a page, while what re-rendering
leaves once anti-aliasing is discounted is a scatter of single pixels and small specks.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
from PIL import Image, UnidentifiedImageError

from desktop.frame import png_from_scanlines
from vision.models.qa import DEFAULT_MAX_DIFF_PIXEL_RATIO, DEFAULT_MAX_REGION_PIXELS, Limits

__all__ = ["DEFAULT_MAX_DIFF_PIXEL_RATIO", "DEFAULT_MAX_REGION_PIXELS", "Diff", "ImageSizeMismatch", "Limits",
           "MAX_YIQ_DELTA", "Region", "compare", "decode_png", "diff_image", "encode_png", "find_regions", "judge",
           "mask_boxes"]

# The largest squared YIQ distance two colours can have (black against white with pixelmatch's
# weights): pixel_threshold is a fraction of its square root, as in pixelmatch.
MAX_YIQ_DELTA = 35215

# The 8 neighbours in the order pixelmatch visits them (x outer, y inner): the darkest and the
# brightest neighbour it remembers are the first ones met with that value, so the order matters.
_NEIGHBOURS = [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if (dx, dy) != (0, 0)]

# How the diff image draws things (pixelmatch's colours, and its 0.1 opacity for the background).
_CHANGED_RGB = (255, 0, 0)
_ANTIALIASED_RGB = (255, 255, 0)
_MASK_RGB = (64, 128, 255)
_MASK_TINT = 0.35
_BACKGROUND_ALPHA = 0.1
# The boxes drawn around the regions of differing pixels: a region over max_region_pixels (what
# failed) in magenta, the others in a light blue; 1 px outside the region, so no red is covered.
_REGION_OVER_RGB = (255, 0, 255)
_REGION_RGB = (0, 160, 255)
# Boxes drawn at most (the largest regions): a scatter of thousands of single pixels would only
# cover the picture, and each box is a few array writes in Python.
_MAX_BOXES = 1000

class ImageSizeMismatch(ValueError):
    """The two images do not have the same size: a comparison would mean nothing."""


@dataclass(frozen=True)
class Diff:
    diff_pixels: int
    total_pixels: int  # pixels compared: the masked ones are not
    changed: np.ndarray  # bool HxW, True where a real difference is
    # For the diff image (optional, so a Diff can be made from the first three alone):
    ignored: np.ndarray | None = None  # bool HxW, the mask (True = not compared)
    antialiased: np.ndarray | None = None  # bool HxW, over the threshold but judged anti-aliasing

    @property
    def diff_fraction(self) -> float:
        return self.diff_pixels / max(self.total_pixels, 1)

    @property
    def diff_percentage(self) -> float:
        return 100 * self.diff_fraction

    @cached_property
    def regions(self) -> list[Region]:
        """The 8-connected regions of ``changed``, the largest first."""
        return find_regions(self.changed)


class Region(NamedTuple):
    """A connected region of differing pixels: its bounding box (x0, y0, x1, y1; ends exclusive, as
    a mask box, so it can be masked as given) and how many of its pixels differ. A NamedTuple: a
    scatter makes hundreds of thousands of them, three times faster than frozen dataclasses."""

    box: tuple[int, int, int, int]
    pixels: int

    def describe(self) -> str:
        return f"a region of {self.pixels} px at {list(self.box)}"


def find_regions(changed: np.ndarray) -> list[Region]:
    """The 8-connected regions of True pixels in a bool HxW array, the largest first (then top to
    bottom, left to right). 8-connectivity: a glyph's diagonal stroke is one region, not a staircase
    of single pixels."""
    changed = np.asarray(changed, dtype=bool)
    if changed.ndim != 2:
        raise ValueError(f"changed must be a bool HxW array, not of shape {changed.shape}")
    if not changed.any():
        return []
    import cv2  # opencv comes with rapidocr; imported late like the OCR engine (only when pixels differ)

    _, _, stats, _ = cv2.connectedComponentsWithStats(changed.view(np.uint8), connectivity=8, ltype=cv2.CV_32S)
    stats = stats[1:]  # label 0 is the background
    # Sorted and converted as whole columns: a scatter of half a million single pixels takes a
    # fraction of a second this way, seconds row by row.
    stats = stats[np.lexsort((stats[:, 0], stats[:, 1], -stats[:, 4]))]
    x, y, w, h, area = (stats[:, k].tolist() for k in range(5))
    return [Region((x0, y0, x0 + dx, y0 + dy), n) for x0, y0, dx, dy, n in zip(x, y, w, h, area, strict=True)]


def judge(diff: Diff, limits: Limits) -> list[str]:
    """Why ``diff`` fails ``limits``: one sentence per limit passed, none when it matches (pure)."""
    reasons = []
    if limits.max_region_pixels is not None:
        over = [r for r in diff.regions if r.pixels > limits.max_region_pixels]
        if over:
            more = f" ({len(over) - 1} more region(s) over it)" if len(over) > 1 else ""
            reasons.append(f"{over[0].describe()} exceeds max_region_pixels {limits.max_region_pixels}{more}")
    if limits.max_diff_pixels is not None and diff.diff_pixels > limits.max_diff_pixels:
        reasons.append(f"{diff.diff_pixels} px differ, over max_diff_pixels {limits.max_diff_pixels}")
    if limits.max_diff_pixel_ratio is not None and diff.diff_fraction > limits.max_diff_pixel_ratio:
        reasons.append(f"{diff.diff_pixels} px differ (ratio {diff.diff_fraction:.6g}), over max_diff_pixel_ratio "
                       f"{limits.max_diff_pixel_ratio:g}")
    return reasons


def _pixels(image: np.ndarray, what: str) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(f"{what} must be an HxWx3 (RGB) or HxWx4 (RGBA) uint8 array, "
                         f"not {image.dtype} of shape {image.shape}")
    return image


def _with_alpha(image: np.ndarray) -> np.ndarray:
    """RGB -> RGBA with alpha 255 (only when one image has alpha and the other has not)."""
    if image.shape[2] == 4:
        return image
    out = np.empty(image.shape[:2] + (4,), np.uint8)
    out[..., :3] = image
    out[..., 3] = 255
    return out


def _rgb(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(r, g, b) float64 of (..., 3|4) uint8 pixels, a translucent one blended over white as
    pixelmatch blends it (``255 + (c - 255) * a``; with a = 1 that is c exactly)."""
    r, g, b = (pixels[..., c].astype(np.float64) for c in range(3))
    if pixels.shape[-1] == 4:
        a = pixels[..., 3] / 255
        r, g, b = 255 + (r - 255) * a, 255 + (g - 255) * a, 255 + (b - 255) * a
    return r, g, b


def _brightness(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    return r * 0.29889531 + g * 0.58662247 + b * 0.11448223


def _colour_delta(p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
    """pixelmatch's squared YIQ distance between pixels p1[k] and p2[k]."""
    r1, g1, b1 = _rgb(p1)
    r2, g2, b2 = _rgb(p2)
    y = _brightness(r1, g1, b1) - _brightness(r2, g2, b2)
    i = (r1 * 0.59597799 - g1 * 0.27417610 - b1 * 0.32180189) - (r2 * 0.59597799 - g2 * 0.27417610 - b2 * 0.32180189)
    q = (r1 * 0.21147017 - g1 * 0.52261711 + b1 * 0.31114694) - (r2 * 0.21147017 - g2 * 0.52261711 + b2 * 0.31114694)
    return 0.5053 * y * y + 0.299 * i * i + 0.1957 * q * q


class _Region:
    """The part of both images that the anti-aliasing test of some pixels can reach (their
    bounding box and 2 pixels around it), padded by one pixel all round, flattened: the 8
    neighbours of a pixel are then fixed offsets from it, and outside the image is the padding,
    which never matches anything (the test reaches 2 pixels out: a neighbour's neighbours).

    Brightness is computed once here per pixel instead of once per visit: pixelmatch recomputes a
    pixel's brightness for each of the up to 9 tests it takes part in."""

    def __init__(self, a: np.ndarray, b: np.ndarray, index: np.ndarray):
        height, width = a.shape[:2]
        self.height, self.width = height, width
        rows, columns = index // width, index % width
        self.top, self.left = max(int(rows.min()) - 2, 0), max(int(columns.min()) - 2, 0)
        bottom, right = min(int(rows.max()) + 3, height), min(int(columns.max()) + 3, width)
        self.stride = right - self.left + 2
        self.offsets = np.array([dy * self.stride + dx for dx, dy in _NEIGHBOURS])
        crops = [image[self.top:bottom, self.left:right] for image in (a, b)]
        self.brightness = [self._padded(_brightness(*_rgb(crop)), np.nan) for crop in crops]
        self.codes = [self._padded(self._pixel_codes(crop), -1) for crop in crops]

    def _padded(self, values: np.ndarray, fill) -> np.ndarray:
        out = np.full((values.shape[0] + 2, values.shape[1] + 2), fill, values.dtype)
        out[1:-1, 1:-1] = values
        return out.ravel()

    @staticmethod
    def _pixel_codes(pixels: np.ndarray) -> np.ndarray:
        """One int64 per pixel, equal exactly when all of its bytes are (pixelmatch compares RGBA)."""
        code = pixels[..., 0].astype(np.int64)
        for c in range(1, pixels.shape[2]):
            code = (code << 8) | pixels[..., c]
        return code

    def padded_index(self, index: np.ndarray) -> np.ndarray:
        """Flat image index -> flat index in the padded region."""
        return (index // self.width - self.top + 1) * self.stride + index % self.width - self.left + 1

    def edge(self, padded: np.ndarray) -> np.ndarray:
        """1 for a pixel on the image's edge (pixelmatch starts its count of equal neighbours at 1
        there), else 0."""
        y, x = padded // self.stride - 1 + self.top, padded % self.stride - 1 + self.left
        return ((x == 0) | (x == self.width - 1) | (y == 0) | (y == self.height - 1)).astype(np.int64)

    def many_siblings(self, padded: np.ndarray) -> np.ndarray:
        """pixelmatch's has_many_siblings, in both images at once (it is always asked of both): 3
        or more neighbours with exactly the same bytes, the image's edge counting as one."""
        edge = self.edge(padded)
        result = np.ones(padded.size, bool)
        for codes in self.codes:
            same = codes[padded[:, None] + self.offsets] == codes[padded][:, None]
            result &= edge + same.sum(axis=1) > 2
        return result

    def antialiased(self, image: int, padded: np.ndarray) -> np.ndarray:
        """pixelmatch's antialiased(img, x, y, ..., img2) for each pixel at once, ``img`` being
        image 0 (a) or 1 (b).

        A pixel is anti-aliasing when at most 2 of its neighbours have its brightness, it has a
        darker and a brighter neighbour, and the darkest or the brightest of them sits in a flat
        area (3+ identical neighbours) in both images."""
        brightness = self.brightness[image]
        # The centre's brightness minus each neighbour's; NaN outside the image, never equal.
        delta = brightness[padded][:, None] - brightness[padded[:, None] + self.offsets]
        equal = self.edge(padded) + (delta == 0).sum(axis=1)
        # Outside the image counts as 0, where pixelmatch's running minimum and maximum start.
        np.nan_to_num(delta, copy=False, nan=0.0)
        darkest, brightest = delta.argmin(axis=1), delta.argmax(axis=1)  # the first of equals, as pixelmatch
        rows = np.arange(padded.size)
        candidate = np.flatnonzero((equal <= 2) & (delta[rows, darkest] < 0) & (delta[rows, brightest] > 0))
        result = np.zeros(padded.size, bool)
        for extreme in (darkest, brightest):
            result[candidate] |= self.many_siblings(padded[candidate] + self.offsets[extreme[candidate]])
        return result


# Pixels tested for anti-aliasing at once: bounds the working arrays (about 200 bytes a pixel).
_CHUNK = 1 << 16


def _antialiased_either(a: np.ndarray, b: np.ndarray, index: np.ndarray) -> np.ndarray:
    """For each flat index, whether pixelmatch calls it anti-aliasing in a or in b."""
    region = _Region(a, b, index)
    result = np.empty(index.size, bool)
    for start in range(0, index.size, _CHUNK):
        padded = region.padded_index(index[start:start + _CHUNK])
        aa = region.antialiased(0, padded)
        aa[~aa] = region.antialiased(1, padded[~aa])
        result[start:start + _CHUNK] = aa
    return result


def compare(baseline: np.ndarray, current: np.ndarray, *, pixel_threshold: float = 0.1,
            ignore_antialiasing: bool = True, mask: np.ndarray | None = None) -> Diff:
    """Count the pixels that really differ between two same-size images.

    ``pixel_threshold`` (0..1) is pixelmatch's ``threshold``: how far two colours may be apart
    and still match, as a fraction of the largest YIQ distance. ``ignore_antialiasing`` is the
    opposite of pixelmatch's ``includeAA``. ``mask`` (bool HxW, True = ignored) leaves pixels out
    of the comparison and of ``total_pixels``.
    """
    a, b = _pixels(baseline, "baseline"), _pixels(current, "current")
    if a.shape[:2] != b.shape[:2]:
        raise ImageSizeMismatch(f"the images differ in size: baseline is {a.shape[1]}x{a.shape[0]}, "
                                f"current is {b.shape[1]}x{b.shape[0]} (width x height)")
    if not 0 <= pixel_threshold <= 1:
        raise ValueError(f"pixel_threshold must be between 0 and 1, not {pixel_threshold}")
    height, width = a.shape[:2]
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (height, width):
            raise ValueError(f"the mask is {mask.shape[1::-1]} but the images are {(width, height)} (width, height)")
    if a.shape[2] != b.shape[2]:
        a, b = _with_alpha(a), _with_alpha(b)
    channels = a.shape[2]
    flat_a, flat_b = a.reshape(-1, channels), b.reshape(-1, channels)

    # 1. Pixels whose bytes differ (one comparison per channel: far faster than .any(axis=2)).
    differs = a[..., 0] != b[..., 0]
    for c in range(1, channels):
        differs |= a[..., c] != b[..., c]
    if mask is not None:
        differs &= ~mask
    index = np.flatnonzero(differs)
    # 2. Of those, the ones too far apart in colour.
    over = index[_colour_delta(flat_a[index], flat_b[index]) > MAX_YIQ_DELTA * pixel_threshold * pixel_threshold]
    # 3. Less the anti-aliasing, judged in either image as pixelmatch does.
    antialiased = None
    if ignore_antialiasing and over.size:
        aa = _antialiased_either(a, b, over)
        antialiased = np.zeros(height * width, bool)
        antialiased[over[aa]] = True
        antialiased = antialiased.reshape(height, width)
        over = over[~aa]
    changed = np.zeros(height * width, bool)
    changed[over] = True
    total = height * width - (int(np.count_nonzero(mask)) if mask is not None else 0)
    return Diff(diff_pixels=int(over.size), total_pixels=total, changed=changed.reshape(height, width),
                ignored=mask, antialiased=antialiased)


def mask_boxes(height: int, width: int, boxes: Iterable[Sequence[float]]) -> np.ndarray:
    """A bool HxW mask, True inside each box ``(x0, y0, x1, y1)`` (ends exclusive), clipped to the
    image; a box wholly outside (or empty) masks nothing."""
    mask = np.zeros((height, width), bool)
    for box in boxes:
        if len(box) != 4:
            raise ValueError(f"a mask box is [x0, y0, x1, y1], not {list(box)}")
        x0, y0, x1, y1 = (int(v) for v in box)
        x0, x1 = max(0, min(x0, width)), max(0, min(x1, width))
        y0, y1 = max(0, min(y0, height)), max(0, min(y1, height))
        if x1 > x0 and y1 > y0:
            mask[y0:y1, x0:x1] = True
    return mask


def diff_image(baseline: np.ndarray, current: np.ndarray, diff: Diff, *,
               max_region_pixels: int | None = DEFAULT_MAX_REGION_PIXELS) -> bytes:
    """A PNG for a person: the baseline in faded grey (pixelmatch's look), real changes in red,
    pixels forgiven as anti-aliasing in yellow, masked areas tinted blue, and each region of
    changes boxed (1 px outside it): magenta when it has more than ``max_region_pixels``, light
    blue otherwise."""
    a, b = _pixels(baseline, "baseline"), _pixels(current, "current")
    if a.shape[:2] != b.shape[:2] or a.shape[:2] != diff.changed.shape:
        raise ImageSizeMismatch(f"baseline {a.shape[1]}x{a.shape[0]}, current {b.shape[1]}x{b.shape[0]} and the "
                                f"diff {diff.changed.shape[1]}x{diff.changed.shape[0]} must be the same size")
    # pixelmatch's draw_gray_pixel: brightness blended with white at 10% opacity (times alpha).
    opacity = _BACKGROUND_ALPHA * (a[..., 3] / 255 if a.shape[2] == 4 else 1.0)
    grey = 255 + (_brightness(*(a[..., c].astype(np.float32) for c in range(3))) - 255) * opacity
    out = np.repeat(grey.astype(np.uint8)[..., None], 3, axis=2)
    if diff.ignored is not None and diff.ignored.any():
        tinted = out[diff.ignored] * (1 - _MASK_TINT) + np.array(_MASK_RGB) * _MASK_TINT
        out[diff.ignored] = tinted.astype(np.uint8)
    if diff.antialiased is not None:
        out[diff.antialiased] = _ANTIALIASED_RGB
    for region in reversed(diff.regions[:_MAX_BOXES]):  # the largest last: on top where boxes cross
        over = max_region_pixels is not None and region.pixels > max_region_pixels
        _draw_box(out, region.box, _REGION_OVER_RGB if over else _REGION_RGB)
    out[diff.changed] = _CHANGED_RGB  # over the boxes: every changed pixel stays red
    return encode_png(out)


def _draw_box(out: np.ndarray, box: tuple[int, int, int, int], rgb: tuple[int, int, int]) -> None:
    """A 1 px rectangle just outside ``box`` (ends exclusive), clipped to the image."""
    height, width = out.shape[:2]
    x0, y0, x1, y1 = box[0] - 1, box[1] - 1, box[2], box[3]  # the outline's own pixels, inclusive
    left, right, top, bottom = max(x0, 0), min(x1, width - 1), max(y0, 0), min(y1, height - 1)
    if y0 >= 0:
        out[y0, left:right + 1] = rgb
    if y1 < height:
        out[y1, left:right + 1] = rgb
    if x0 >= 0:
        out[top:bottom + 1, x0] = rgb
    if x1 < width:
        out[top:bottom + 1, x1] = rgb


def decode_png(data: bytes) -> np.ndarray:
    """PNG (or any image pillow reads) -> HxWx3 RGB uint8. Raises ValueError if it is no image."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"))
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise ValueError(f"not a readable image ({len(data)} bytes): {exc}") from exc


def encode_png(image: np.ndarray) -> bytes:
    """HxWx3 RGB uint8 (an alpha channel is dropped) -> PNG, with the screenshots' fast encoder."""
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(f"an image to encode must be HxWx3 uint8, not {image.dtype} of shape {image.shape}")
    height, width = image.shape[:2]
    rows = np.empty((height, 1 + width * 3), np.uint8)
    rows[:, 0] = 0  # filter type "none" on every scanline
    rows[:, 1:].reshape(height, width, 3)[...] = image[..., :3]
    return png_from_scanlines(rows, width, height)
