"""The local, offline provider: "ocr" (name "ocr/rapidocr"). No model, no API key, no network.

It understands a small set of imperative instructions and grounds them on the text that OCR
(rapidocr, whose PP-OCR models ship inside the wheel) reads on the screenshot. It never guesses:
an instruction it cannot parse, or a text it cannot find exactly once, ends the run with a message
that says why.

Grammar (case-insensitive; quotes -- "...", '...', “...” -- are optional where the text is
unambiguous; several clauses joined by "then", ",", ";", "and" or ". " run in order)::

    click "<text>"            also: click on ..., left-click, tap "<text>", press the "<text>" button
    double-click "<text>"
    right-click "<text>"
    type "<text>"             types into whatever has the focus
    type "<text>" into "<label>"   also: in "<label>", enter/write ... into ...,
                                   fill "<label>" with "<text>"
    press <keys>              press enter, press ctrl+a, press ctrl+shift+t, press tab tab enter
    open <url>                also: go to / navigate to / visit <url>; in the focused Chromium
    scroll up|down|left|right [N]   N wheel notches (default 5), at the centre of the screen
    read the screen           also: what does the screen say, what is on the screen

Grounding (pure functions on OCR lines, see ``find_text``): an exact case-insensitive match of the
whole text of an OCR line first, then an exact match of a run of adjacent words inside a line, then
a fuzzy match (difflib ratio >= 0.8). The best tier with any match wins; two different places
in it are reported as ambiguous, never picked between. The click lands on the centre of the
matched box -- a word-level box when the target is part of a longer line.

Fields (``field_point``): OCR sees no empty input box, so "type ... into <label>" finds the label and
then looks at the pixels for the nearest box-like region (a vertical border with a horizontal edge
at its end) to the right of the label on its middle row, else below it on its middle column, and
clicks inside it. Without a detected box it falls back to a fixed offset: right of the label by
twice its height, or below it. See ``field_point`` for the limits.

One intent runs per turn, so the loop settles and screenshots between steps and each target is
grounded on the fresh screen; OCR runs at most once per turn, only for intents that need it.
"""

from __future__ import annotations

import difflib
import logging
import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from desktop import keys as keynames
from desktop.actions import Click, DoubleClick, Key, Scroll, Type, Wait
from vision.actions import Action, Done, Fail
from vision.providers.base import CallResult, ModelTurn, Observation, Provider, ToolCall

log = logging.getLogger(__name__)

FUZZY_THRESHOLD = 0.8
DEFAULT_SCROLL = 5

SUPPORTED_FORMS = """\
Supported instructions (join several with "then", ",", ";" or "and"):
  click "<text>"  (also: double-click, right-click, tap "<text>", press the "<text>" button)
  type "<text>"  or  type "<text>" into "<label>"
  press <keys>  (e.g. press enter, press ctrl+a)
  open <url>  (e.g. open example.com)
  scroll up|down [N]
  read the screen  (or: what does the screen say)
Put text in quotes when it contains "and", "then", "in" or a comma."""


# ---------------------------------------------------------------------------------------------
# Geometry and OCR results


@dataclass(frozen=True)
class Box:
    """An axis-aligned rectangle in display pixels."""

    x0: float
    y0: float
    x1: float
    y1: float

    @classmethod
    def from_quad(cls, points: Iterable[Sequence[float]]) -> "Box":
        xs, ys = zip(*((float(p[0]), float(p[1])) for p in points))
        return cls(min(xs), min(ys), max(xs), max(ys))

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2

    @property
    def centre(self) -> tuple[int, int]:
        return round(self.cx), round(self.cy)

    def contains(self, x: float, y: float) -> bool:
        return self.x0 <= x <= self.x1 and self.y0 <= y <= self.y1

    def union(self, other: "Box") -> "Box":
        return Box(min(self.x0, other.x0), min(self.y0, other.y0), max(self.x1, other.x1), max(self.y1, other.y1))

    def v_overlap(self, other: "Box") -> float:
        """Shared height as a fraction of the smaller height (0..1)."""
        shared = min(self.y1, other.y1) - max(self.y0, other.y0)
        return max(0.0, shared) / max(1.0, min(self.height, other.height))


@dataclass(frozen=True)
class Word:
    text: str
    box: Box


@dataclass(frozen=True)
class Line:
    """One OCR detection: a line of text, its box, and its words with their own boxes."""

    text: str
    box: Box
    score: float = 1.0
    words: tuple[Word, ...] = ()

    def __post_init__(self):
        if not self.words:  # no word boxes from the engine: share the line out by characters
            object.__setattr__(self, "words", split_words(self.text, self.box))


def split_words(text: str, box: Box) -> tuple[Word, ...]:
    """Word boxes estimated from the line box, in proportion to character positions."""
    if not text:
        return ()
    per_char = box.width / len(text)
    return tuple(Word(m.group(), Box(box.x0 + m.start() * per_char, box.y0, box.x0 + m.end() * per_char, box.y1))
                 for m in re.finditer(r"\S+", text))


def lines_from_rapidocr(result: Any) -> list[Line]:
    """A RapidOCROutput -> Lines with word boxes.

    rapidocr drops the word list of a line that has no word boxes, so its ``word_results`` may not
    line up with ``txts`` by index: each word is given to the line whose box holds its centre, and
    a line whose words do not spell its text gets proportional word boxes instead.
    """
    if getattr(result, "txts", None) is None or getattr(result, "boxes", None) is None:
        return []
    boxes = [Box.from_quad(quad) for quad in result.boxes]
    words: list[list[Word]] = [[] for _ in boxes]
    for group in result.word_results or ():
        for item in group or ():
            if not (isinstance(item, (tuple, list)) and len(item) == 3 and item[2] is not None):
                continue
            word = Word(str(item[0]), Box.from_quad(item[2]))
            holders = [i for i, b in enumerate(boxes) if b.contains(word.box.cx, word.box.cy)]
            if holders:
                best = min(holders, key=lambda i: abs(boxes[i].cy - word.box.cy))
                words[best].append(word)
    lines = []
    for text, box, score, own in zip(result.txts, boxes, result.scores, words):
        own.sort(key=lambda w: w.box.x0)
        spelled = "".join(w.text for w in own) == re.sub(r"\s+", "", text)
        lines.append(Line(str(text), box, float(score), tuple(own) if spelled else ()))
    return lines


def reading_order(lines: Iterable[Line]) -> list[list[Line]]:
    """Lines grouped into rows (top to bottom), each row left to right.

    A line joins a row when it shares at least half of the smaller height with the row's first line.
    """
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda l: (l.box.cy, l.box.x0)):
        for row in rows:
            if row[0].box.v_overlap(line.box) >= 0.5:
                row.append(line)
                break
        else:
            rows.append([line])
    for row in rows:
        row.sort(key=lambda l: l.box.x0)
    rows.sort(key=lambda r: min(l.box.y0 for l in r))
    return rows


def read_text(lines: Iterable[Line]) -> str:
    """The screen's text in reading order: one row per line, items in a row two spaces apart."""
    return "\n".join("  ".join(l.text for l in row) for row in reading_order(lines))


# ---------------------------------------------------------------------------------------------
# Grounding text: exact line, exact words, fuzzy


class GroundingError(ValueError):
    """The target is not on the screen (``not_found``), or is there more than once."""

    def __init__(self, message: str, *, not_found: bool = False):
        super().__init__(message)
        self.not_found = not_found


@dataclass(frozen=True)
class Match:
    text: str           # the OCR text that matched
    box: Box            # where to act: the whole line, or the matched words
    line: Line          # the line it is in (the first one, for a run across lines)
    score: float        # 1.0 for exact
    how: Literal["line", "words", "fuzzy"]

    @property
    def point(self) -> tuple[int, int]:
        return self.box.centre


_EDGE_PUNCT = "\"'“”‘’.,:;!?()[]{}<>…*·•|"


def normalise(text: str) -> str:
    """Lower case, single spaces, punctuation trimmed from each word's ends ("Email:" -> "email").
    A text made only of punctuation ("+", "×") is kept as it is."""
    words = [w.strip(_EDGE_PUNCT) for w in text.lower().split()]
    words = [w for w in words if w]
    return " ".join(words) if words else " ".join(text.lower().split())


def _chains(lines: Sequence[Line]) -> list[list[Line]]:
    """Runs of lines in one row that sit close together (the detector sometimes splits a phrase)."""
    chains = []
    for row in reading_order(lines):
        chain = [row[0]]
        for line in row[1:]:
            gap = line.box.x0 - chain[-1].box.x1
            if gap <= max(line.box.height, chain[-1].box.height):
                chain.append(line)
            else:
                chains.append(chain)
                chain = [line]
        chains.append(chain)
    return chains


def _candidates(lines: Sequence[Line], sizes: Iterable[int]) -> Iterable[tuple[str, Box, Line, bool]]:
    """(text, box, line, whole_line) for every line, and every run of ``sizes`` adjacent words."""
    sizes = sorted({s for s in sizes if s >= 1})
    for line in lines:
        yield line.text, line.box, line, True
    for chain in _chains(lines):
        words = [(w, line) for line in chain for w in line.words]
        for size in sizes:
            for start in range(0, len(words) - size + 1):
                run = words[start:start + size]
                box = run[0][0].box
                for w, _ in run[1:]:
                    box = box.union(w.box)
                yield " ".join(w.text for w, _ in run), box, run[0][1], False


def _distinct(matches: list[Match]) -> list[Match]:
    """One match per place: two matches are the same place when one's centre lies in the other's
    box. The tighter box is kept for a line match that is also a word match of the same text."""
    kept: list[Match] = []
    for match in matches:
        for i, other in enumerate(kept):
            if other.box.contains(match.box.cx, match.box.cy) or match.box.contains(other.box.cx, other.box.cy):
                if match.score > other.score:
                    kept[i] = match
                break
        else:
            kept.append(match)
    return kept


def _where(matches: Sequence[Match]) -> str:
    return ", ".join(f"'{m.text}' at ({m.point[0]}, {m.point[1]})" for m in matches[:5])


def visible_sample(lines: Sequence[Line], limit: int = 12) -> str:
    """A short sample of the screen's text for error messages: quoted, in reading order."""
    texts = [l.text for row in reading_order(lines) for l in row if sum(c.isalnum() for c in l.text) >= 2]
    if not texts:
        return "(no readable text)"
    shown = [f"'{t[:40]}{'…' if len(t) > 40 else ''}'" for t in texts[:limit]]
    more = f" (and {len(texts) - limit} more)" if len(texts) > limit else ""
    return ", ".join(shown) + more


def find_text(lines: Sequence[Line], target: str, *, fuzzy: float = FUZZY_THRESHOLD) -> Match:
    """Where ``target`` is on the screen, from OCR lines. Raises GroundingError.

    Tiers, first one with a match wins:
      1. a whole OCR line equals the target (case-insensitive, spaces and end punctuation normalised);
      2. a run of adjacent words inside a line (or across lines close together on one row) equals it;
      3. fuzzy: difflib ratio >= ``fuzzy`` against lines and runs of n-1..n+1 words; best score wins.
    Within the winning tier, matches at different places are an ambiguity and an error.
    """
    wanted = normalise(target)
    if not wanted:
        raise GroundingError("nothing to look for: the target text is empty")
    size = len(wanted.split())
    exact_line, exact_words, scored = [], [], []
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(wanted)  # the matcher caches what it learns about its second sequence
    for text, box, line, whole in _candidates(lines, (size - 1, size, size + 1)):
        got = normalise(text)
        if got == wanted:
            (exact_line if whole else exact_words).append(Match(text, box, line, 1.0, "line" if whole else "words"))
            continue
        matcher.set_seq1(got)
        if matcher.real_quick_ratio() >= 0.5 and matcher.quick_ratio() >= 0.5:  # cheap upper bounds first
            scored.append((matcher.ratio(), text, box, line))
    for tier in (exact_line, exact_words):
        found = _distinct(tier)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise GroundingError(f"found {len(found)} matches for '{target}' on the screen: {_where(found)}; "
                                 "it is ambiguous, so nothing was clicked")
    close = sorted(scored, key=lambda s: -s[0])
    good = _distinct([Match(text, box, line, round(score, 3), "fuzzy") for score, text, box, line in close
                      if score >= fuzzy])
    if good:
        best = max(m.score for m in good)
        top = [m for m in good if m.score == best]
        if len(top) == 1:
            return top[0]
        raise GroundingError(f"found {len(top)} matches for '{target}' on the screen, equally close: {_where(top)}; "
                             "it is ambiguous, so nothing was clicked")
    hint = f"; the closest is '{close[0][1]}' ({close[0][0]:.2f})" if close and close[0][0] >= 0.5 else ""
    raise GroundingError(f"could not find '{target}' on the screen{hint}; visible text includes: "
                         f"{visible_sample(lines)}", not_found=True)


# ---------------------------------------------------------------------------------------------
# Finding the input field next to a label


@dataclass(frozen=True)
class FieldPoint:
    x: int
    y: int
    how: Literal["box-right", "box-below", "offset-right", "offset-below"]


_DIFF = 48  # a pixel "differs" from another when a channel differs by more than this


def _differs(a: np.ndarray, b: np.ndarray) -> bool:
    return int(np.max(np.abs(a.astype(np.int16) - b.astype(np.int16)))) > _DIFF


def _run(image: np.ndarray, x: int, y: int, ref: np.ndarray, dx: int, dy: int, limit: int) -> int:
    """How many pixels from (x, y) in direction (dx, dy), this one included, differ from ``ref``."""
    h, w = image.shape[:2]
    n = 0
    while 0 <= x < w and 0 <= y < h and n < limit and _differs(image[y, x], ref):
        n += 1
        x += dx
        y += dy
    return n


def _edge_leaves(image: np.ndarray, bg: np.ndarray, start: int, across: Iterable[int], dx: int, dy: int) -> int:
    """The longest edge that leaves a border at one of its ends: scanning right (dx) from column
    ``start`` on each row in ``across``, or down (dy) from row ``start`` on each column. The rows
    (columns) just beyond the ends count too: a rounded corner leaves its corner pixel out."""
    h, w = image.shape[:2]
    best = 0
    for a in across:
        if dx and 0 <= a < h:
            best = max(best, _run(image, start + 1, a, bg, 1, 0, 12))
        if dy and 0 <= a < w:
            best = max(best, _run(image, a, start + 1, bg, 0, 1, 12))
    return best


def _own(line: Line, label: Box) -> bool:
    """Is this line (part of) the label itself?"""
    return label.contains(line.box.cx, line.box.cy) or line.box.contains(label.cx, label.cy)


def _first_obstacle(lines: Sequence[Line], label: Box, axis: Literal["x", "y"], at: int) -> float | None:
    """The nearest start of other text that blocks a scan right (``axis`` x, on row ``at``) or
    down (``axis`` y, on column ``at``) from the label."""
    hits = []
    for line in lines:
        b = line.box
        if _own(line, label):
            continue
        if axis == "x" and b.x0 > label.x1 - 2 and b.y0 <= at <= b.y1:
            hits.append(b.x0)
        if axis == "y" and b.y0 > label.y1 - 2 and b.x0 <= at <= b.x1:
            hits.append(b.y0)
    return min(hits) if hits else None


def _skip_border(image: np.ndarray, x: int, y: int, dx: int, dy: int) -> tuple[int, int]:
    """From a border pixel, step past the border (and a 2 px anti-aliasing fringe) into the box."""
    h, w = image.shape[:2]
    border = image[y, x].copy()
    while 0 <= x + dx < w and 0 <= y + dy < h and not _differs(image[y, x], border):
        x, y = x + dx, y + dy
    return min(w - 1, x + 2 * dx), min(h - 1, y + 2 * dy)


def _box_right(image: np.ndarray, lines: Sequence[Line], label: Box) -> tuple[int, int] | None:
    """Scan right along the label's middle row for a box's left border; the point inside the box."""
    h, w = image.shape[:2]
    y = min(h - 1, max(0, round(label.cy)))
    start = min(w - 1, int(label.x1) + 1)
    stop = _first_obstacle(lines, label, "x", y)
    end = int(min(w, label.x1 + max(600.0, 15 * label.height), stop if stop is not None else w))
    bg = image[y, start].copy()
    need = max(10, round(0.5 * label.height))
    for x in range(start, end):
        if not _differs(image[y, x], bg):
            continue
        up, down = _run(image, x, y, bg, 0, -1, 400), _run(image, x, y, bg, 0, 1, 400)
        top, bottom = y - up + 1, y + down - 1
        tall = up + down - 1
        # A border: tall enough, with a horizontal edge leaving it rightwards at its top or bottom
        # (a glyph or a lone vertical rule has none).
        if tall < need or _edge_leaves(image, bg, x, (top - 1, top, bottom, bottom + 1), 1, 0) < 10:
            continue
        inner, _ = _skip_border(image, x, y, 1, 0)
        fill = image[y, inner].copy()
        right = None
        for xr in range(inner + 1, w):
            if _differs(image[y, xr], fill):
                span = _run(image, xr, y, fill, 0, -1, 400) + _run(image, xr, y, fill, 0, 1, 400) - 1
                if span >= 0.8 * tall:  # the far border, not a glyph of text inside the box
                    right = xr
                    break
        return ((x + right) // 2 if right is not None else min(w - 1, x + 15)), (top + bottom) // 2
    return None


def _box_below(image: np.ndarray, lines: Sequence[Line], label: Box) -> tuple[int, int] | None:
    """Scan down the label's middle column for a box's top border; the point inside the box."""
    h, w = image.shape[:2]
    x = min(w - 1, max(0, round(label.cx)))
    start = min(h - 1, int(label.y1) + 1)
    stop = _first_obstacle(lines, label, "y", x)
    end = int(min(h, label.y1 + max(150.0, 4 * label.height), stop if stop is not None else h))
    bg = image[start, x].copy()
    need = max(24, round(1.5 * label.height))
    for y in range(start, end):
        if not _differs(image[y, x], bg):
            continue
        left, right = _run(image, x, y, bg, -1, 0, 4000), _run(image, x, y, bg, 1, 0, 4000)
        x0, x1 = x - left + 1, x + right - 1
        wide = left + right - 1
        # A top border: wide enough, with a vertical edge going down at its left or right end
        # (a horizontal rule or an underline has none).
        if wide < need or _edge_leaves(image, bg, y, (x0 - 1, x0, x1, x1 + 1), 0, 1) < 8:
            continue
        _, inner = _skip_border(image, x, y, 0, 1)
        fill = image[inner, x].copy()
        bottom = None
        for yb in range(inner + 1, min(h, inner + 300)):
            if _differs(image[yb, x], fill):
                span = _run(image, x, yb, fill, -1, 0, 4000) + _run(image, x, yb, fill, 1, 0, 4000) - 1
                if span >= 0.8 * wide:
                    bottom = yb
                    break
        return x, ((y + bottom) // 2 if bottom is not None else min(h - 1, y + 10))
    return None


def field_point(lines: Sequence[Line], label: Box, image: np.ndarray | None = None,
                size: tuple[int, int] = (1920, 1080)) -> FieldPoint:
    """Where to click to focus the input field named by the label at ``label``.

    With the screenshot (``image``, H x W x 3): the nearest box-like region -- a border at least
    half the label's height with a horizontal edge leaving it -- scanning right along the label's
    middle row (up to 600 px, stopping at other text), else scanning down its middle column (up to
    150 px or four label heights). The point is the middle of the box when its far border is
    found, else just inside its near border. Without an image, or when no box is seen: the
    label's right edge plus twice its height (at least 40 px) on the same row, or, when that lands
    on other text or off the screen, one label height below its bottom edge.

    Limits: a button or any other bordered thing next to the label looks like a field too; a
    borderless field (only an underline, or a shade barely different from the page) is not seen
    and gets the offset guess; a field to the label's left or far from it is not found; a
    placeholder inside the field works as a label (the scan finds the field's right border).
    """
    if image is not None:
        found = _box_right(image, lines, label)
        if found:
            return FieldPoint(*found, "box-right")
        found = _box_below(image, lines, label)
        if found:
            return FieldPoint(*found, "box-below")
    width, height = (image.shape[1], image.shape[0]) if image is not None else size
    others = [l.box for l in lines if not _own(l, label)]
    x, y = round(label.x1 + max(40.0, 2 * label.height)), round(label.cy)
    if x < width and not any(b.y0 <= y <= b.y1 and label.x1 < b.x1 and b.x0 <= x for b in others):
        return FieldPoint(x, y, "offset-right")
    x, y = round(label.cx), round(label.y1 + label.height)
    if y < height and not any(b.contains(x, y) for b in others):
        return FieldPoint(x, y, "offset-below")
    raise GroundingError("found the label but no room for a field to its right or below it")


# ---------------------------------------------------------------------------------------------
# Parsing instructions


class InstructionError(ValueError):
    """The instruction is not in the grammar; the message lists the supported forms."""


IntentKind = Literal["click", "double_click", "right_click", "type", "press", "open", "scroll", "read"]


@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    target: str | None = None      # click*: the text to click
    text: str | None = None        # type: what to type
    label: str | None = None       # type: the label of the field to type into
    keys: tuple[str, ...] = ()     # press: chords in order
    url: str | None = None         # open
    direction: str | None = None   # scroll
    amount: int | None = None      # scroll
    clause: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        for name in ("target", "text", "label", "url", "direction", "amount"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.keys:
            data["keys"] = list(self.keys)
        data["clause"] = self.clause
        return data


_QUOTE = re.compile(r'"([^"]*)"|“([^”]*)”|‘([^’]*)’|(?<!\w)\'([^\']*)\'(?!\w)')
_TOKEN = re.compile(r"\x00(\d+)\x00")
_SEP = re.compile(r"(\s*[,;]\s*(?:(?:and\s+)?then\s+)?|\s+and\s+then\s+|\s+then\s+|\s+and\s+|\.\s+(?:then\s+)?)", re.I)
_VERB = re.compile(r"(?:please\s+)?(?:double[- ]?click|right[- ]?click|left[- ]?click|click|tap|press|push|hit|"
                   r"type|write|enter|input|fill|open|go\s+to|navigate|visit|browse|scroll|read|what|ocr|transcribe)\b",
                   re.I)
_LEAD = re.compile(r"^(?:(?:please|now|first|next|finally|also|then|and)\s+)+", re.I)
_NOUNS = r"button|link|tab|icon|field|box|text\s*box|checkbox|input|option|item|entry|menu|label"
_FILLER = re.compile(rf"^(?:on|the|a|an|{_NOUNS})$", re.I)
_READ = re.compile(
    r"(?:read|transcribe|ocr)(?:\s+(?:out|me|back))?(?:\s+(?:all|everything))?(?:\s+(?:of\s+)?the)?"
    r"(?:\s+text)?(?:\s+(?:on|of|in)(?:\s+the)?)?(?:\s+(?:screen|page|display|desktop))?"
    r"|what(?:'s|\s+is)\s+(?:written\s+)?on\s+(?:the\s+)?(?:screen|page|display)"
    r"|what\s+(?:does|do)\s+(?:the\s+)?(?:screen|page|display)\s+(?:say|show|read)", re.I)
_CLICK = re.compile(r"(?P<verb>double[- ]?click|right[- ]?click|left[- ]?click|click|tap)(?:\s+on)?\s+(?P<rest>.+)", re.I)
_BUTTON = re.compile(r"(?:press|push|hit|click|tap)(?:\s+on)?\s+the\s+(?P<rest>.+?)\s+button", re.I)
_TYPE = re.compile(r"(?:type|write|enter|input)\s+(?P<rest>.+)", re.I)
_FILL = re.compile(r"fill(?:\s+in|\s+out)?\s+(?:the\s+)?(?P<label>.+?)\s+with\s+(?P<text>.+)", re.I)
_PRESS = re.compile(r"(?:press|hit|push)\s+(?P<keys>.+)", re.I)
_OPEN = re.compile(r"(?:open|go\s+to|navigate\s+to|visit|browse\s+to)\s+(?:the\s+)?(?:(?:url|page|site|website)\s+)?(?P<url>.+)", re.I)
_SCROLL = re.compile(r"scroll\s+(?:the\s+page\s+)?(?P<dir>up|down|left|right)"
                     r"(?:\s+(?:by\s+)?(?P<n>\d+)(?:\s+(?:times|notches|clicks|steps|lines))?)?", re.I)
_URL = re.compile(r"(?:(?:https?|file|ftp)://\S+|(?:about|chrome|data):\S+|"
                  r"(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|(?:[\w-]+\.)+[a-z][\w-]*)(?::\d+)?(?:[/?#]\S*)?)", re.I)
_INTO = re.compile(r"\s+(?:into|in|to|on)\s+(?:the\s+)?(?P<label>.+)", re.I)
_FIELD_NOUN = re.compile(r"\s+(?:field|box|text\s*box|input|area)$", re.I)


def _mask(text: str) -> tuple[str, list[str]]:
    """Quoted spans -> \\x00N\\x00 tokens, so that separators and verbs inside quotes are inert."""
    quoted: list[str] = []

    def token(match: re.Match) -> str:
        quoted.append(next(g for g in match.groups() if g is not None))
        return f"\x00{len(quoted) - 1}\x00"

    return _QUOTE.sub(token, text), quoted


def _unmask(text: str, quoted: list[str], *, quotes: bool = False) -> str:
    q = '"' if quotes else ""
    return _TOKEN.sub(lambda m: q + quoted[int(m.group(1))] + q, text)


def _clauses(masked: str) -> list[str]:
    """Split on separators outside quotes; a piece that starts with no verb belongs to the one
    before it ("click Terms and Conditions" stays one clause)."""
    parts = _SEP.split(masked)
    clauses: list[str] = []
    for i in range(0, len(parts), 2):
        piece = _LEAD.sub("", parts[i].strip())
        if clauses and not _VERB.match(piece):
            clauses[-1] += parts[i - 1] + parts[i]
        elif piece:
            clauses.append(piece)
    return [c.strip() for c in clauses if c.strip()]


def _text_arg(masked: str, quoted: list[str], *, nouns: bool) -> str:
    """A clause argument -> plain text: a quoted text wins over the words around it ("the", "button");
    unquoted, a leading "the" and (after it) a trailing noun such as "button" are dropped."""
    masked = masked.strip()
    tokens = _TOKEN.findall(masked)
    if len(tokens) == 1:
        rest = _TOKEN.sub(" ", masked).split()
        if all(_FILLER.match(w) for w in rest):
            return quoted[int(tokens[0])]
    text = _unmask(masked, quoted).strip()
    if nouns:
        the = re.match(r"(?:on\s+)?the\s+(.+)", text, re.I)
        if the:
            text = the.group(1)
            text = re.sub(rf"\s+(?:{_NOUNS})$", "", text, flags=re.I) or text
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return text.strip()


def _keys(spec: str) -> tuple[str, ...]:
    """"ctrl + a", "Ctrl+A", "ctrl a", "the enter key", "tab, tab then enter" -> chords."""
    spec = re.sub(r"\s*\+\s*", "+", spec.strip())
    words = [w for w in re.split(r"[\s,]+", spec) if w and w.lower() not in ("then", "and", "the", "key", "keys")]
    chords: list[str] = []
    held: list[str] = []
    for word in words:
        if word.lower() in ("ctrl", "control", "alt", "shift", "super", "cmd", "meta", "win") and word != words[-1]:
            held.append(word)  # "ctrl a": a modifier written apart from its key still holds it
            continue
        chords.append("+".join([*held, word]))
        held = []
    if not chords:
        raise InstructionError("press needs a key, e.g. press enter or press ctrl+a")
    for chord in chords:
        try:
            keynames.chord(chord)
        except keynames.KeyNameError as exc:
            raise InstructionError(f"press {spec}: {exc}. To click a button by its text, say: "
                                   f"click \"{spec}\"") from None
    return tuple(chords)


def _parse_clause(masked: str, quoted: list[str]) -> Intent:
    clause = _unmask(masked, quoted, quotes=True)
    body = re.sub(r"[.!?]+$", "", masked.strip()).strip()
    body = re.sub(r"\s+please$", "", body, flags=re.I)

    def full(pattern: re.Pattern) -> re.Match | None:
        return pattern.fullmatch(body)

    if full(_READ):
        return Intent("read", clause=clause)
    if m := full(_BUTTON):
        return Intent("click", target=_text_arg(m["rest"], quoted, nouns=False), clause=clause)
    if m := full(_CLICK):
        verb = m["verb"].lower()
        kind = "double_click" if verb.startswith("double") else "right_click" if verb.startswith("right") else "click"
        target = _text_arg(m["rest"], quoted, nouns=True)
        if not target:
            raise InstructionError(f"'{clause}': what should be clicked? e.g. click \"Sign in\"")
        return Intent(kind, target=target, clause=clause)
    if re.fullmatch(r"(?:hit\s+|press\s+)?(?:enter|return)(?:\s+key)?", body, re.I):
        return Intent("press", keys=("enter",), clause=clause)
    if m := full(_FILL):
        return Intent("type", text=_text_arg(m["text"], quoted, nouns=False),
                      label=_FIELD_NOUN.sub("", _text_arg(m["label"], quoted, nouns=False)), clause=clause)
    if m := full(_TYPE):
        return _type_intent(m["rest"], quoted, clause)
    if m := full(_PRESS):
        return Intent("press", keys=_keys(_unmask(m["keys"], quoted)), clause=clause)
    if m := full(_OPEN):
        url = _text_arg(m["url"], quoted, nouns=False)
        if not _URL.fullmatch(url):
            raise InstructionError(f"'{clause}': open needs a URL such as example.com or https://example.com/path; "
                                   "to click something on the screen, say: click \"<text>\"")
        return Intent("open", url=url, clause=clause)
    if m := full(_SCROLL):
        amount = int(m["n"]) if m["n"] else None
        if amount is not None and not 1 <= amount <= 50:
            raise InstructionError(f"'{clause}': scroll by 1 to 50 notches")
        return Intent("scroll", direction=m["dir"].lower(), amount=amount, clause=clause)
    raise InstructionError(f"cannot understand '{clause}'.\n{SUPPORTED_FORMS}")


def _type_intent(rest: str, quoted: list[str], clause: str) -> Intent:
    """type <text> [into|in <label>]: a quoted text ends where its quote ends; unquoted, the text
    ends at the last " into ", else the last " in "."""
    rest = rest.strip()
    lead = re.match(r"\x00\d+\x00", rest)
    if lead:
        text, tail = quoted[int(_TOKEN.match(lead.group()).group(1))], rest[lead.end():]
        if not text:
            raise InstructionError(f"'{clause}': the text to type is empty")
        if tail.strip():
            into = _INTO.fullmatch(tail)
            if not into:
                raise InstructionError(f"cannot understand '{clause}': after the text, expected into \"<label>\".\n"
                                       f"{SUPPORTED_FORMS}")
            label = _text_arg(_FIELD_NOUN.sub("", into["label"]), quoted, nouns=False)
            return Intent("type", text=text, label=label, clause=clause)
        return Intent("type", text=text, clause=clause)
    split = None
    for word in ("into", "in"):
        found = [m for m in re.finditer(rf"\s+{word}\s+", rest, re.I)]
        if found:
            split = found[-1]
            break
    if split is None:
        text = _text_arg(rest, quoted, nouns=False)
        if not text:
            raise InstructionError(f"'{clause}': what should be typed? e.g. type \"hello\"")
        return Intent("type", text=text, clause=clause)
    label_part = re.sub(r"^the\s+", "", rest[split.end():], flags=re.I)
    label = _text_arg(_FIELD_NOUN.sub("", label_part), quoted, nouns=False)
    text = _text_arg(rest[:split.start()], quoted, nouns=False)
    if not text or not label:
        raise InstructionError(f"'{clause}': expected type \"<text>\" into \"<label>\"")
    return Intent("type", text=text, label=label, clause=clause)


def parse_instruction(text: str) -> list[Intent]:
    """An instruction -> the intents it asks for, in order. Raises InstructionError (with the
    supported forms) for anything outside the grammar: nothing is guessed."""
    if not text or not text.strip():
        raise InstructionError(f"the instruction is empty.\n{SUPPORTED_FORMS}")
    masked, quoted = _mask(" ".join(text.split()))
    clauses = _clauses(masked)
    if not clauses:
        raise InstructionError(f"the instruction is empty.\n{SUPPORTED_FORMS}")
    return [_parse_clause(c, quoted) for c in clauses]


# ---------------------------------------------------------------------------------------------
# The OCR engine: loaded once per process, on first use


class OcrEngine(Protocol):
    def read(self, image: np.ndarray) -> list[Line]:
        """OCR of an H x W x 3 BGR image -> its lines, in image pixels."""


class RapidOcrEngine:
    """rapidocr with its bundled models. Model loading takes seconds, so one instance serves the
    process (``shared_engine``); calls are serialised (the engine keeps per-call state, and two
    concurrent runs on 2 cores would only slow each other down)."""

    def __init__(self, params: dict[str, Any] | None = None):
        self._params = {"Global.log_level": "warning", **(params or {})}
        self._engine = None
        self._lock = threading.Lock()

    def _load(self):
        if self._engine is None:
            from rapidocr import RapidOCR  # heavy (onnxruntime, cv2): only when OCR is really needed

            self._engine = RapidOCR(params=self._params)
        return self._engine

    def read(self, image: np.ndarray) -> list[Line]:
        with self._lock:
            engine = self._load()
            start = time.perf_counter()
            result = engine(image, return_word_box=True)
        lines = lines_from_rapidocr(result)
        log.debug("ocr: %d lines in %.0f ms", len(lines), (time.perf_counter() - start) * 1000)
        return lines


_shared: RapidOcrEngine | None = None
_shared_lock = threading.Lock()


def shared_engine() -> RapidOcrEngine:
    global _shared
    if _shared is None:
        with _shared_lock:
            if _shared is None:
                _shared = RapidOcrEngine()
    return _shared


def frame_array(frame) -> np.ndarray:
    """A Frame's BGRA bytes -> a contiguous H x W x 3 BGR array (rapidocr's own channel order)."""
    raw = np.frombuffer(frame.bgra, dtype=np.uint8).reshape(frame.height, frame.width, 4)
    return np.ascontiguousarray(raw[:, :, :3])


# ---------------------------------------------------------------------------------------------
# The provider


class OcrProvider(Provider):
    """Runs a parsed instruction one intent per turn, grounding targets with OCR on each fresh screen.

    Options (all keyword, settable per model in glassdesk.toml): ``fuzzy`` the difflib ratio a
    fuzzy match needs (default 0.8); ``scroll_amount`` notches for "scroll down" without a number
    (default 5); ``retry_wait_ms`` how long to wait and look again when a target is missing right
    after one of our own actions -- the page may still be loading (default 1000; 0 fails at once);
    ``engine`` an object with ``read(image) -> list[Line]`` instead of the shared rapidocr engine.
    """

    def __init__(self, instruction: str, *, model: str = "rapidocr", system: str = "",
                 fuzzy: float = FUZZY_THRESHOLD, scroll_amount: int = DEFAULT_SCROLL, retry_wait_ms: int = 1000,
                 engine: OcrEngine | None = None):
        super().__init__(instruction, model=model, system=system)
        self.name = f"ocr/{model}"
        if not 0.5 <= fuzzy <= 1.0:
            raise ValueError("fuzzy must be between 0.5 and 1.0")
        self.fuzzy = fuzzy
        self.scroll_amount = scroll_amount
        self.retry_wait_ms = retry_wait_ms
        self._engine = engine
        try:
            self.intents: list[Intent] = parse_instruction(instruction)
            self.parse_error: str | None = None
        except InstructionError as exc:
            self.intents, self.parse_error = [], str(exc)
        self._next = 0
        self._turns = 0
        self._waited = False
        self._answers: list[str] = []
        self._ocr_cache: tuple[Any, np.ndarray, list[Line]] | None = None

    @property
    def engine(self) -> OcrEngine:
        if self._engine is None:
            self._engine = shared_engine()
        return self._engine

    # -- one turn ---------------------------------------------------------------------------

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        frame = observation.frame
        self._turns += 1
        turn = ModelTurn(image_size=(frame.width, frame.height))
        if self.parse_error is not None:
            return self._fail(turn, "parse", {"instruction": self.instruction}, self.parse_error)
        failed = [r for r in results if not r.ok]
        if failed:
            return self._fail(turn, "step", {}, f"the previous step failed: {failed[0].error or 'unknown error'}")
        notes: list[str] = []
        lines: list[Line] | None = None
        while self._next < len(self.intents):
            intent = self.intents[self._next]
            if intent.kind == "read":
                lines = lines if lines is not None else self._ocr(frame)
                text = read_text(lines)
                self._answers.append(text)
                notes.append(f"read {len(lines)} lines of text")
                self._next += 1
                continue
            try:
                if intent.kind in ("click", "double_click", "right_click") or (intent.kind == "type" and intent.label):
                    lines = lines if lines is not None else self._ocr(frame)
                actions, said = self._plan(intent, frame, lines)
            except GroundingError as exc:
                if exc.not_found and self._next > 0 and self.retry_wait_ms > 0 and not self._waited:
                    # Right after our own action the screen may still be changing: look once more.
                    self._waited = True
                    turn.text = "\n".join([*notes, f"{exc}; waiting {self.retry_wait_ms} ms and looking again"])
                    turn.calls = [self._call(intent.kind, intent.to_dict(), [Wait(duration_ms=self.retry_wait_ms)])]
                    return turn
                turn.text = "\n".join(notes)
                return self._fail(turn, intent.kind, intent.to_dict(), str(exc))
            except ValueError as exc:  # an action the desktop would refuse (e.g. text too long)
                turn.text = "\n".join(notes)
                return self._fail(turn, intent.kind, intent.to_dict(), f"{intent.clause}: {exc}")
            self._waited = False
            self._next += 1
            turn.text = "\n".join([*notes, said])
            turn.calls = [self._call(intent.kind, intent.to_dict(), actions)]
            return turn
        answer = "\n\n".join(self._answers) or None
        name = "read" if notes else "done"
        raw = self.intents[-1].to_dict() if notes and self.intents else {}
        turn.text = "\n".join(notes)
        turn.calls = [self._call(name, raw, [Done(answer=answer)])]
        return turn

    def _call(self, name: str, raw: dict[str, Any], actions: list[Action]) -> ToolCall:
        return ToolCall(f"ocr_{self._turns}", name, raw, actions=actions)

    def _fail(self, turn: ModelTurn, name: str, raw: dict[str, Any], reason: str) -> ModelTurn:
        turn.text = "\n".join(t for t in (turn.text, reason) if t)
        turn.calls = [self._call(name, raw, [Fail(reason=reason)])]
        return turn

    def _ocr(self, frame) -> list[Line]:
        """OCR of the frame, once: the same frame object, or one with identical pixels, reuses it."""
        return self._look(frame)[1]

    def _look(self, frame) -> tuple[np.ndarray, list[Line]]:
        cached = self._ocr_cache
        if cached is not None and (cached[0] is frame or frame.same_pixels(cached[0])):
            return cached[1], cached[2]
        image = frame_array(frame)
        lines = self.engine.read(image)
        self._ocr_cache = (frame, image, lines)
        return image, lines

    def _plan(self, intent: Intent, frame, lines: list[Line] | None) -> tuple[list[Action], str]:
        """An intent on this screen -> display-pixel actions and a sentence for the trace."""
        w, h = frame.width, frame.height

        def clamp(x: int, y: int) -> dict[str, int]:
            return {"x": min(max(x, 0), w - 1), "y": min(max(y, 0), h - 1)}

        if intent.kind in ("click", "double_click", "right_click"):
            match = find_text(lines or [], intent.target or "", fuzzy=self.fuzzy)
            at = clamp(*match.point)
            action: Action = (DoubleClick(**at) if intent.kind == "double_click"
                              else Click(button="right", **at) if intent.kind == "right_click" else Click(**at))
            kind = "exact" if match.how != "fuzzy" else f"fuzzy {match.score:.2f}"
            return [action], (f"{intent.kind.replace('_', '-')} '{intent.target}': OCR text '{match.text}' "
                              f"({kind}) at ({at['x']}, {at['y']})")
        if intent.kind == "type":
            text = intent.text or ""
            if not intent.label:
                return [Type(text=text)], f"type {len(text)} characters into the focused element"
            match = find_text(lines or [], intent.label, fuzzy=self.fuzzy)
            # A label that is part of a longer line ("Email address"): the field follows the line.
            image, _ = self._look(frame)
            spot = field_point(lines or [], match.line.box.union(match.box), image, (w, h))
            at = clamp(spot.x, spot.y)
            return [Click(**at), Type(text=text)], (f"type {len(text)} characters into the field labelled "
                                                    f"'{match.text}': click at ({at['x']}, {at['y']}) ({spot.how})")
        if intent.kind == "press":
            return [Key(keys=list(intent.keys))], f"press {' '.join(intent.keys)}"
        if intent.kind == "open":
            url = intent.url or ""
            return ([Key(keys=["ctrl+l"]), Type(text=url), Key(keys=["enter"])],
                    f"open {url} in the focused browser window (ctrl+l, type, enter)")
        if intent.kind == "scroll":
            amount = intent.amount if intent.amount is not None else self.scroll_amount
            return ([Scroll(direction=intent.direction or "down", amount=amount, **clamp(w // 2, h // 2))],
                    f"scroll {intent.direction} {amount} notches at the centre of the screen")
        raise AssertionError(f"unplanned intent {intent.kind}")

