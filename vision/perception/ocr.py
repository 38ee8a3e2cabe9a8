"""OCR of a screenshot: rapidocr (its PP-OCR models ship inside the wheel), loaded once per
process on first use, and what it reads: lines of text and their words, with boxes in display
pixels, and the screen's text in reading order.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)


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
    def from_quad(cls, points: Iterable[Sequence[float]]) -> Box:
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

    def union(self, other: Box) -> Box:
        return Box(min(self.x0, other.x0), min(self.y0, other.y0), max(self.x1, other.x1), max(self.y1, other.y1))

    def v_overlap(self, other: Box) -> float:
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
    for line in sorted(lines, key=lambda line: (line.box.cy, line.box.x0)):
        for row in rows:
            if row[0].box.v_overlap(line.box) >= 0.5:
                row.append(line)
                break
        else:
            rows.append([line])
    for row in rows:
        row.sort(key=lambda line: line.box.x0)
    rows.sort(key=lambda r: min(line.box.y0 for line in r))
    return rows


def read_text(lines: Iterable[Line]) -> str:
    """The screen's text in reading order: one row per line, items in a row two spaces apart."""
    return "\n".join("  ".join(line.text for line in row) for row in reading_order(lines))


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
