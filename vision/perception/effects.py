"""The texts a step made appear: what a tester would assert after it, and what a healed step must
still bring up (vision.qa.flow).

Read twice around a step, cheaply: in a page, the visible short texts of its elements (one script
call, desktop.browser.pages.Pages.texts); on a native window or a canvas, OCR of only the region of
the screen that changed. What is kept is bounded (MAX_KEPT texts of at most MAX_CHARS), never holds
a secret's value (a text showing one is dropped, not redacted: "[REDACTED]" asserts nothing), and
in a page only a text one element shows (an exact text locator then names exactly it).

Pure functions of lists of strings and arrays: no X, no browser.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np

MAX_KEPT = 8        # texts recorded per step
MAX_CHARS = 80      # longer is a paragraph, not a message a test waits for
MIN_CHARS = 2
PROPOSED = 3        # assertions an export proposes per step, at most
# Changed regions larger than this are not read by OCR after a step (a whole screen repainted:
# seconds of OCR on the run's path, and nothing specific to assert in it).
MAX_OCR_AREA = 1280 * 720
CHANGE_MARGIN = 8   # px around the changed pixels, so a glyph on the edge is read whole

# What a tester would not assert: a clock, a date, a count, a bare number or id. Such texts change
# from run to run, or say nothing of the step's effect.
_NUMERIC = re.compile(r"^[\W\d_]*$")
_TIME = re.compile(r"\b\d{1,2}:\d{2}(:\d{2})?\b|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b")
_LONG_NUMBER = re.compile(r"\d{5,}")
_HEXISH = re.compile(r"^[0-9a-f-]{8,}$", re.I)
_WORD = re.compile(r"[^\W\d_]{2,}")


def normalise(text: str | None) -> str:
    """Whitespace runs as one space, none at the ends (as Playwright compares a text)."""
    return " ".join((text or "").split())


def _shows_secret(text: str, secrets: Iterable[str]) -> bool:
    return any(s and s in text for s in secrets)


def appeared(before: Iterable[str], after: Sequence[str], secrets: Iterable[str] = (), *,
             unique: bool = True, limit: int = MAX_KEPT) -> list[str]:
    """The texts of ``after`` that ``before`` did not show, in ``after``'s order: each once, of
    MIN_CHARS..MAX_CHARS characters, none showing a secret's value; with ``unique``, only a text
    shown once in ``after`` (two elements reading "Delete" name no one of them) (pure)."""
    secrets = [s for s in secrets if s]
    seen = {normalise(t) for t in before}
    texts = [normalise(t) for t in after]
    counts = Counter(texts)
    out: list[str] = []
    for text in texts:
        if text in seen or text in out or not MIN_CHARS <= len(text) <= MAX_CHARS:
            continue
        if (unique and counts[text] > 1) or _shows_secret(text, secrets):
            continue
        out.append(text)
        if len(out) >= limit:
            break
    return out


def specific(text: str) -> bool:
    """A text worth asserting: words, not a number, a time, a date or an id (pure)."""
    text = normalise(text)
    if len(re.findall(r"[^\W\d_]", text)) < 2 or _NUMERIC.match(text):
        return False
    return not (_TIME.search(text) or _LONG_NUMBER.search(text) or _HEXISH.match(text))


def propose(texts: Iterable[str], limit: int = PROPOSED) -> list[str]:
    """The texts an export proposes as assertions, best first: the specific ones, a message before
    a single word (a sentence says more of the effect than a label or a window's title), in their
    order otherwise (pure)."""
    chosen = [t for t in dict.fromkeys(normalise(t) for t in texts) if t and specific(t)]
    # A message: two words or more (a window's title read with its buttons, "xmessage _ □ ×", is
    # one word and marks). Stable: among equals the page's (or the OCR's reading) order is kept.
    return sorted(chosen, key=lambda t: 0 if len(_WORD.findall(t)) >= 2 else 1)[:limit]


def changed_box(before: np.ndarray, after: np.ndarray, margin: int = CHANGE_MARGIN) -> tuple[int, int, int, int] | None:
    """The box (x0, y0, x1, y1; ends exclusive) of the pixels that differ between two screens of one
    size, grown by ``margin``; None when none differ or the sizes differ (pure)."""
    if before.shape != after.shape:
        return None
    diff = (before != after)
    if diff.ndim == 3:
        diff = diff.any(axis=2)
    rows, cols = np.flatnonzero(diff.any(axis=1)), np.flatnonzero(diff.any(axis=0))
    if rows.size == 0:
        return None
    height, width = diff.shape
    return (max(0, int(cols[0]) - margin), max(0, int(rows[0]) - margin),
            min(width, int(cols[-1]) + 1 + margin), min(height, int(rows[-1]) + 1 + margin))


def ocr_appeared(before: np.ndarray, after: np.ndarray, read: Callable[[np.ndarray], Iterable[str]],
                 secrets: Iterable[str] = (), max_area: int = MAX_OCR_AREA) -> list[str]:
    """The lines OCR reads in the changed region of ``after`` (RGB arrays of the display) that it did
    not read there in ``before``: the texts a step on a native window or a canvas made appear.
    ``read``: the OCR of an RGB crop, its lines' texts. Nothing when nothing changed or the change
    is larger than ``max_area`` (bounded cost)."""
    box = changed_box(before, after)
    if box is None or (box[2] - box[0]) * (box[3] - box[1]) > max_area:
        return []
    x0, y0, x1, y1 = box
    was = [normalise(t) for t in read(np.ascontiguousarray(before[y0:y1, x0:x1]))]
    now = read(np.ascontiguousarray(after[y0:y1, x0:x1]))
    # OCR does not read a text twice alike (a window's title read "xmessage", then "xmessag" where
    # the same title shows again): a line like one already shown in the region is not new.
    return appeared(was, [t for t in now if not any(_alike(t, w) for w in was)], secrets, unique=False)


def _alike(a: str, b: str) -> bool:
    """Two OCR readings of the same text, one letter dropped or misread (pure)."""
    import difflib

    a, b = normalise(a).casefold(), normalise(b).casefold()
    return a == b or (min(len(a), len(b)) >= 4 and (a in b or b in a)) or \
        difflib.SequenceMatcher(None, a, b).ratio() >= 0.85
