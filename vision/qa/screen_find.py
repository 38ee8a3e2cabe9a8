"""Finding things on a screenshot of the display, without the DOM: text by OCR, an image by
template matching. Pure given the image (a PNG of the display); every answer is in display pixels.

This is what lets a QA step target text drawn on a ``<canvas>`` or in a native window, where there
is no DOM to ask, and a picture (an icon, a logo) that has no text at all.

- Text: the OCR engine and matcher of ``vision.perception``, the ones the ocr provider grounds
  with: the one rapidocr engine of the process (``shared_engine``: loaded once, calls serialised,
  so threads share it safely), and ``find_text``'s tiers (whole line, run of words, fuzzy) with
  its ambiguity rule.
  The lines read from one screenshot are kept for the next few calls, so a flow that finds a text
  and then asserts ``screen_text_contains`` on the same screen pays for one OCR; and the engine
  reads a new screenshot only where it differs from a recent one (``vision.perception.ocr``,
  ``IncrementalReader``: the step after a click pays for the repainted region, not the screen).
- Images: pyautogui's locate function (``pyscreeze.locate``, pyautogui's own module; pyautogui
  itself needs a display at import) with OpenCV for ``confidence``, in colour (a red icon is not
  a green one). pyscreeze answers the first place above the confidence in reading order; the
  answer is then refined to the best-scoring position around it, so the box is the template's
  real place, not a neighbouring pixel that also clears the threshold.
"""

from __future__ import annotations

import hashlib
import io
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import numpy as np
from PIL import Image, UnidentifiedImageError

from desktop.errors import InvalidRequest
from vision.perception.grounding import GroundingError, find_text
from vision.perception.ocr import Line, read_text, shared_engine

__all__ = ["AmbiguousOnScreen", "Found", "NotOnScreen", "find_image_on_screen", "find_text_on_screen",
           "ocr_lines", "screen_text"]

DEFAULT_CONFIDENCE = 0.9
_CACHE_SIZE = 4


@dataclass(frozen=True)
class Found:
    """Where something is on the display: its centre (x, y) and its box (x0, y0, x1, y1; exclusive
    ends), in display pixels; ``score`` 1.0 for an exact text match, else the fuzzy ratio or the
    template's correlation."""

    x: int
    y: int
    box: tuple[int, int, int, int]
    how: Literal["ocr", "image"]
    score: float


class NotOnScreen(LookupError):
    """What was looked for is not on the screen; the message says what, and for text a sample of
    what is visible."""


class AmbiguousOnScreen(NotOnScreen):
    """The text is on the screen at more than one place, equally well: nothing is picked. A kind of
    NotOnScreen, so a step that needs one place fails with the message naming the places."""


# ---------------------------------------------------------------------------------------------
# Decoding


def _decode(png: bytes, what: str) -> np.ndarray:
    """PNG (or any format pillow reads) -> a contiguous H x W x 3 BGR array (OpenCV's and rapidocr's
    channel order). Transparent pixels of a template are composed over nothing: alpha is dropped."""
    if not isinstance(png, (bytes, bytearray, memoryview)) or not png:
        raise InvalidRequest(f"the {what} is empty: give the bytes of a PNG image")
    try:
        with Image.open(io.BytesIO(png)) as image:
            rgb = np.asarray(image.convert("RGB"))
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise InvalidRequest(f"the {what} is not a readable image ({exc})") from None
    return np.ascontiguousarray(rgb[:, :, ::-1])


# ---------------------------------------------------------------------------------------------
# Text by OCR

_lines_cache: OrderedDict[str, tuple[Line, ...]] = OrderedDict()
_cache_lock = threading.Lock()


def ocr_lines(png: bytes) -> tuple[Line, ...]:
    """The OCR lines of a screenshot, in its pixels. The last few screenshots' lines are kept
    (keyed by the PNG's SHA-256), so asking twice about one screen runs OCR once."""
    key = hashlib.sha256(png).hexdigest() if isinstance(png, (bytes, bytearray, memoryview)) else ""
    with _cache_lock:
        if key in _lines_cache:
            _lines_cache.move_to_end(key)
            return _lines_cache[key]
    lines = tuple(shared_engine().read(_decode(png, "screenshot")))
    with _cache_lock:
        _lines_cache[key] = lines
        while len(_lines_cache) > _CACHE_SIZE:
            _lines_cache.popitem(last=False)
    return lines


def screen_text(png: bytes) -> str:
    """All the text OCR reads on the screenshot, in reading order: one row per line."""
    return read_text(ocr_lines(png))


def find_text_on_screen(png: bytes, text: str) -> Found:
    """Where ``text`` is on the screenshot, by OCR, grounded exactly as the ocr provider grounds a
    click (``vision.perception.grounding.find_text``). Raises NotOnScreen (with a sample of the visible
    text), AmbiguousOnScreen, or InvalidRequest for an empty text or an unreadable image."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("nothing to look for: the text is empty")
    lines = ocr_lines(png)
    try:
        match = find_text(lines, text)
    except GroundingError as exc:
        # Not found, or (the text being non-empty, checked above) found at several places.
        raise (NotOnScreen if exc.not_found else AmbiguousOnScreen)(str(exc)) from None
    box = match.box
    x, y = match.point
    return Found(x=x, y=y, box=(math.floor(box.x0), math.floor(box.y0), math.ceil(box.x1), math.ceil(box.y1)),
                 how="ocr", score=float(match.score))


# ---------------------------------------------------------------------------------------------
# Images by template matching


def _correlations(haystack: np.ndarray, needle: np.ndarray) -> np.ndarray:
    import cv2  # opencv comes with rapidocr; imported late like the OCR engine

    return cv2.matchTemplate(haystack, needle, cv2.TM_CCOEFF_NORMED)


def find_image_on_screen(png: bytes, template_png: bytes, confidence: float = DEFAULT_CONFIDENCE) -> Found:
    """Where the template image is on the screenshot, matched in colour with a normalised
    correlation of at least ``confidence`` (0 < confidence <= 1). The first place in reading order
    wins, refined to its best position. Raises NotOnScreen, or InvalidRequest for a bad confidence,
    an unreadable image, a template larger than the screen or one of a single flat colour (which
    would match anywhere)."""
    import pyscreeze

    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence <= 1:
        raise InvalidRequest(f"confidence must be a number above 0 and at most 1, not {confidence!r}")
    screen = _decode(png, "screenshot")
    needle = _decode(template_png, "template image")
    (sh, sw), (th, tw) = screen.shape[:2], needle.shape[:2]
    if th > sh or tw > sw:
        raise InvalidRequest(f"the template image ({tw}x{th}) is larger than the screen ({sw}x{sh})")
    if (needle == needle[0, 0]).all():
        raise InvalidRequest("the template image is a single flat colour: it would match anywhere; "
                             "crop it so that it shows an edge or a detail")
    try:
        first = pyscreeze.locate(needle, screen, grayscale=False, confidence=float(confidence))
    except pyscreeze.ImageNotFoundException as exc:
        raise NotOnScreen(f"could not find the {tw}x{th} template image on the screen at confidence "
                          f"{confidence:g} ({str(exc).rstrip('.')})") from None
    # The first position above the threshold may be a pixel off the best one (a smooth template
    # correlates well when shifted): look around it for the peak.
    left, top = int(first.left), int(first.top)
    x0, y0 = max(0, left - tw), max(0, top - th)
    x1, y1 = min(sw, left + 2 * tw), min(sh, top + 2 * th)
    scores = _correlations(screen[y0:y1, x0:x1], needle)
    dy, dx = np.unravel_index(int(np.argmax(scores)), scores.shape)
    left, top, score = x0 + int(dx), y0 + int(dy), float(scores[dy, dx])
    return Found(x=left + tw // 2, y=top + th // 2, box=(left, top, left + tw, top + th), how="image",
                 score=round(min(score, 1.0), 4))
