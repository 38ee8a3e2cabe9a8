"""OCR of a screenshot: rapidocr (its PP-OCR models ship inside the wheel), loaded once per
process on first use, and what it reads: lines of text and their words, with boxes in display
pixels, and the screen's text in reading order.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
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


# ---------------------------------------------------------------------------------------------
# Reading only what changed: the lines of a recent screen reused where its pixels are unchanged
#
# Why the reuse is sound. OCR of a screen is detection (a network that marks text pixels, then the
# boxes around connected marks) and recognition of each box from the pixels inside it. So:
#  - a line's recognition (its text, score, word boxes) depends only on the pixels in its box: a box
#    whose pixels are unchanged reads the same;
#  - a line's detection depends on the pixels in and near it (the network looks at a neighbourhood,
#    the boxes follow connected marks). A line every pixel of which, and of a band of ``PAD`` px
#    around it, is unchanged is detected as before.
# Lines of the recent screen that keep such a band are reused as they are. Everything else -- every
# changed pixel, ``PAD`` px around it, and the whole of every old line that reaches into that -- is
# a region read again: detected in a window of the new screen ``MARGIN`` px larger (so the detector
# sees the same surroundings as in a full read) and recognised from the new screen. A box found
# in the window that sticks out of its region (new text running into unchanged pixels) grows the
# region and the window is detected again. Regions are merged when their windows would overlap,
# so a box is read once. A text that disappeared is in a region
# (its pixels changed), is not detected there again, and its old line is dropped; a text that
# appeared is read from its region. What a full read of the new screen would still see differently
# is the far edge of the network's reach, beyond ``PAD`` px: a box edge a pixel off, the same
# jitter as between two full reads of two nearly identical screens.
#
# Pixels are compared exactly (row digests to pick the closest recent screen and the changed rows,
# then the changed rows of the two arrays themselves), never by a sampled or lossy hash.

PAD = 16          # px of unchanged pixels a reused line's box keeps from any change (the box itself already
                  # reaches past the ink by the detector's unclip margin, ~0.8x the text's core height)
MARGIN = 32       # px of context around a region when detecting it again
ALIGN = 32        # the detector's input sides are multiples of 32: windows are cut so, not resampled
JOIN = 16         # changed pixels this close are one change (one region, one window)
MAX_SHARE = 0.6   # windows covering more than this share of the screen: a full read is cheaper
MAX_ROUNDS = 4    # regions grown this many times without settling: a full read instead
RECENT = 4        # screens kept (several sessions share the process's one engine)


@dataclass(frozen=True)
class Rect:
    """An integer rectangle in display pixels, exclusive ends."""

    x0: int
    y0: int
    x1: int
    y1: int

    @classmethod
    def around(cls, box: Box) -> Rect:
        return cls(math.floor(box.x0), math.floor(box.y0), math.ceil(box.x1), math.ceil(box.y1))

    @property
    def area(self) -> int:
        return (self.x1 - self.x0) * (self.y1 - self.y0)

    def grown(self, by: int, width: int, height: int) -> Rect:
        return Rect(max(0, self.x0 - by), max(0, self.y0 - by), min(width, self.x1 + by), min(height, self.y1 + by))

    def union(self, other: Rect) -> Rect:
        return Rect(min(self.x0, other.x0), min(self.y0, other.y0), max(self.x1, other.x1), max(self.y1, other.y1))

    def overlaps(self, other: Rect) -> bool:
        return self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1

    def touches(self, box: Box) -> bool:
        """The box reaches into the rectangle or onto its edge."""
        return box.x0 <= self.x1 and box.x1 >= self.x0 and box.y0 <= self.y1 and box.y1 >= self.y0

    def holds(self, box: Box) -> bool:
        return self.x0 <= box.x0 and box.x1 <= self.x1 and self.y0 <= box.y0 and box.y1 <= self.y1

    def contains(self, x: float, y: float) -> bool:
        return self.x0 <= x < self.x1 and self.y0 <= y < self.y1


def _runs(flags: np.ndarray, join: int) -> list[tuple[int, int]]:
    """[start, end) runs of True in a 1-D bool array, runs closer than ``join`` merged."""
    idx = np.flatnonzero(flags)
    if idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(idx) > join)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    ends = np.concatenate((idx[breaks], [idx[-1]])) + 1
    return [(int(a), int(b)) for a, b in zip(starts, ends)]


def row_digests(image: np.ndarray) -> list[bytes]:
    """One digest per pixel row (blake2b, 16 bytes): equal rows are found without comparing arrays."""
    rows = np.ascontiguousarray(image).reshape(image.shape[0], -1)
    return [hashlib.blake2b(row.data, digest_size=16).digest() for row in rows]


def changed_rects(old: np.ndarray, new: np.ndarray, changed_rows: np.ndarray, join: int = JOIN) -> list[Rect]:
    """The rectangles (tight around changed pixels, changes closer than ``join`` px merged) where
    two same-sized images differ, looking only at ``changed_rows`` (a bool per row)."""
    out = []
    for y0, y1 in _runs(changed_rows, join):
        diff = (old[y0:y1] != new[y0:y1])
        diff = diff.any(axis=2) if diff.ndim == 3 else diff
        for x0, x1 in _runs(diff.any(axis=0), join):
            rows = np.flatnonzero(diff[:, x0:x1].any(axis=1))
            if rows.size:
                out.append(Rect(x0, y0 + int(rows[0]), x1, y0 + int(rows[-1]) + 1))
    return out


def window_for(region: Rect, width: int, height: int, margin: int = MARGIN, align: int = ALIGN) -> Rect:
    """The region with ``margin`` px around it, each side a multiple of ``align`` (or the screen's
    whole side), kept on the screen (shifted inwards at an edge rather than cut)."""

    def span(lo: int, hi: int, size: int) -> tuple[int, int]:
        lo, hi = lo - margin, hi + margin
        need = -(-(hi - lo) // align) * align
        if need >= size:
            return 0, size
        lo = max(0, min(lo, size - need))
        return lo, lo + need

    x0, x1 = span(region.x0, region.x1, width)
    y0, y1 = span(region.y0, region.y1, height)
    return Rect(x0, y0, x1, y1)


def plan_regions(changes: Sequence[Rect], lines: Sequence[Line], width: int, height: int,
                 pad: int = PAD) -> tuple[list[Rect], list[Line]]:
    """(regions to read again, old lines kept) for a screen whose pixels changed in ``changes``.

    Each change grown by ``pad`` px is a region; an old line that touches a region is dropped and
    the region grows to hold it (which may make it touch more lines); regions whose windows would
    overlap are merged. Kept lines touch no region, so each keeps ``pad`` px of unchanged pixels
    around it."""
    regions = [c.grown(pad, width, height) for c in changes]
    kept = list(lines)
    while True:
        regions = _merged(regions, width, height)
        still, grew = [], False
        for line in kept:
            for i, region in enumerate(regions):
                if region.touches(line.box):
                    regions[i] = region.union(Rect.around(line.box)).grown(0, width, height)
                    grew = True
                    break
            else:
                still.append(line)
        kept = still
        if not grew:
            return regions, kept


def _merged(regions: list[Rect], width: int, height: int) -> list[Rect]:
    """Regions whose windows overlap, merged until none do."""
    regions = list(regions)
    merged = True
    while merged:
        merged = False
        for i in range(len(regions)):
            for j in range(i + 1, len(regions)):
                if window_for(regions[i], width, height).overlaps(window_for(regions[j], width, height)):
                    regions[i] = regions[i].union(regions.pop(j))
                    merged = True
                    break
            if merged:
                break
    return regions


def detector_order(lines: Iterable[Line], same_row: float = 10) -> list[Line]:
    """Lines in the order rapidocr's detector gives its boxes (``TextDetector.sorted_boxes``): by
    top edge, a box less than ``same_row`` px below the one before it in the same row, each row
    left to right. Reused and new lines are merged into this order, as one full read has them."""
    by_top = sorted(lines, key=lambda line: line.box.y0)
    rows, row, last = [], -1, None
    for line in by_top:
        if last is None or line.box.y0 - last >= same_row:
            row += 1
        rows.append((row, line.box.x0, line))
        last = line.box.y0
    return [line for _, _, line in sorted(rows, key=lambda r: (r[0], r[1]))]


@dataclass(eq=False)
class _Seen:
    image: np.ndarray
    rows: list[bytes]
    lines: tuple[Line, ...]


class IncrementalReader:
    """Reads a screen, reusing the lines of the closest of the last ``RECENT`` screens where its
    pixels are unchanged (see the comment above ``PAD``). ``read_full(image)`` reads a whole
    screen; ``detect(image, windows)`` the text boxes in each window; ``recognise(image, quads)``
    the lines in given boxes. Not thread-safe: the engine calls it under its lock."""

    def __init__(self, read_full: Callable[[np.ndarray], list[Line]],
                 detect: Callable[[np.ndarray, Sequence[Rect]], list[np.ndarray]],
                 recognise: Callable[[np.ndarray, np.ndarray], list[Line]], recent: int = RECENT):
        self._read_full, self._detect, self._recognise = read_full, detect, recognise
        self._recent: list[_Seen] = []
        self._size = recent
        self.last_how = ""  # "same", "regions" or "full": how the last read went (logs, tests, the benchmark)

    def forget(self) -> None:
        self._recent.clear()

    def read(self, image: np.ndarray) -> list[Line]:
        rows = row_digests(image)
        best, same = None, -1
        for seen in self._recent:
            if seen.image.shape == image.shape:
                count = sum(a == b for a, b in zip(seen.rows, rows))
                if count > same:
                    best, same = seen, count
        lines = None
        if best is not None and same == len(rows):
            self.last_how, lines = "same", list(best.lines)
            self._recent.remove(best)
        elif best is not None:
            changed = np.array([a != b for a, b in zip(best.rows, rows)])
            lines = self._read_changes(image, best, changed_rects(best.image, image, changed))
        if lines is None:
            self.last_how, lines = "full", self._read_full(image)
        self._recent.append(_Seen(np.array(image, copy=True), rows, tuple(lines)))
        del self._recent[:-self._size]
        return lines

    def _read_changes(self, image: np.ndarray, before: _Seen, changes: list[Rect]) -> list[Line] | None:
        """The lines of ``image`` from ``before``'s where unchanged and a fresh read of the regions
        around ``changes``; None when that would not be cheaper than a full read or does not settle."""
        height, width = image.shape[:2]
        changes = list(changes)
        for _ in range(MAX_ROUNDS):
            regions, kept = plan_regions(changes, before.lines, width, height)
            windows = [window_for(r, width, height) for r in regions]
            if sum(w.area for w in windows) > MAX_SHARE * width * height:
                return None
            taken, grew = [], False
            for region, window, quads in zip(regions, windows, self._detect(image, windows)):
                for quad in quads:
                    box = Box.from_quad(quad)
                    if not region.touches(box):
                        continue  # unchanged text in the window's margin: its old line is kept
                    if not region.holds(box):
                        # It runs on past its region: read it whole. Cut by the window's side, it
                        # is a line running on: its whole row band is read (one round, not many).
                        cut = (box.x0 <= window.x0 and window.x0 > 0) or (box.x1 >= window.x1 and window.x1 < width)
                        changes.append(Rect(0, math.floor(box.y0), width, math.ceil(box.y1)) if cut
                                       else Rect.around(box))
                        grew = True
                    taken.append(quad)
            if not grew:
                self.last_how = "regions"
                fresh = self._recognise(image, np.array(taken, np.float32).reshape(-1, 4, 2))
                return detector_order([*kept, *fresh])
        return None


class RapidOcrEngine:
    """rapidocr with its bundled models. Model loading takes seconds, so one instance serves the
    process (``shared_engine``); calls are serialised (the engine keeps per-call state, and two
    concurrent runs on 2 cores would only slow each other down).

    A read reuses what the engine read on a recent screen where the pixels have not changed
    (``reuse``, on by default; see ``IncrementalReader``): a full 1920x1080 read takes 1.5-2.6 s warm
    (detection over the whole screen, then recognition line by line: the more text, the more of the
    time recognition), and a QA step or an OCR-provider turn
    usually sees the screen of the step before with one region repainted.
    """

    def __init__(self, params: dict[str, Any] | None = None, *, reuse: bool = True):
        self._params = {"Global.log_level": "warning", **(params or {})}
        self._engine = None
        self._lock = threading.Lock()
        self._reader = IncrementalReader(self._read_full, self._detect_windows, self._recognise) if reuse else None
        self._crop_detector: Callable[[np.ndarray], Any] | None = None  # RapidOCR's text detector, made once

    def _load(self):
        if self._engine is None:
            from rapidocr import RapidOCR  # heavy (onnxruntime, cv2): only when OCR is really needed

            _models_without_spinning()
            self._engine = RapidOCR(params=self._params)
        return self._engine

    @property
    def last_how(self) -> str:
        """How the last read went: "same" (a recent screen's pixels, its lines), "regions" (only
        the changed regions read again), "full"; "" before the first read."""
        return self._reader.last_how if self._reader is not None else "full"

    def forget(self) -> None:
        """Drop the recent screens: the next read is a full one."""
        with self._lock:
            if self._reader is not None:
                self._reader.forget()

    def read_region(self, image: np.ndarray, keep: Rect | None = None) -> list[Line]:
        """OCR of a small image (the region around a pointer action): detected at scale 1 (a full
        read would blow a 64 px strip up to 736 px high: seconds instead of a fraction of one; its
        sides should be multiples of 32, see ``_detect_windows``), and not kept among the recent
        screens, which it would push out. ``keep``: only the text boxes that reach into it are
        recognised (recognition is most of the cost: about 0.15 s a box on a loaded 2-core machine)."""
        height, width = image.shape[:2]
        with self._lock:
            quads = self._detect_windows(image, [Rect(0, 0, width, height)])[0]
            if keep is not None and len(quads):
                xs, ys = quads[:, :, 0], quads[:, :, 1]
                x0, y0, x1, y1 = xs.min(1), ys.min(1), xs.max(1), ys.max(1)
                quads = quads[(x1 >= keep.x0) & (x0 < keep.x1) & (y1 >= keep.y0) & (y0 < keep.y1)]
            return self._recognise(image, quads)

    def read(self, image: np.ndarray) -> list[Line]:
        with self._lock:
            start = time.perf_counter()
            lines = self._reader.read(image) if self._reader is not None else self._read_full(image)
            how = self.last_how
        log.debug("ocr (%s): %d lines in %.0f ms", how, len(lines), (time.perf_counter() - start) * 1000)
        return lines

    # -- the two ways of reading, both with the engine's own models and options ------------------

    def _read_full(self, image: np.ndarray) -> list[Line]:
        return lines_from_rapidocr(self._load()(image, return_word_box=True))

    def _detect_windows(self, image: np.ndarray, windows: Sequence[Rect]) -> list[np.ndarray]:
        """The text boxes (rapidocr quads, N x 4 x 2, display px) detected inside each window.

        Detection runs at scale 1 on each window: the engine's detector, its model and its
        thresholds, with only ``limit_type`` "max" and no limit instead of its default "min"/736
        (which would blow a 64 px high strip up to 736 px; a full 1920x1080 screen, whose short side
        is over 736, is detected at scale 1 too). A window's sides are multiples of 32 (or the
        screen's), so it reaches the network without being resampled.
        """
        import copy

        if self._crop_detector is None:
            detector = copy.copy(self._load()._load_det_model())  # shares the model session and post-processing
            detector.limit_type, detector.limit_side_len = "max", 1 << 30
            self._crop_detector = detector
        out = []
        for window in windows:
            found = self._crop_detector(np.ascontiguousarray(image[window.y0:window.y1, window.x0:window.x1]))
            quads = np.zeros((0, 4, 2), np.float32) if found.boxes is None else np.array(found.boxes, np.float32)
            quads[:, :, 0] += window.x0
            quads[:, :, 1] += window.y0
            out.append(quads)
        return out

    def _recognise(self, image: np.ndarray, quads: np.ndarray) -> list[Line]:
        """The lines in the given text boxes of the full image: the engine's own steps after
        detection (``RapidOCR.run_ocr_steps`` and ``build_final_output``: crop, 180-degree
        classifier, recognition, empty-text and text-score filters, word boxes), so a box reads
        exactly as it reads in a full read."""
        from rapidocr.ch_ppocr_cls import TextClsOutput
        from rapidocr.ch_ppocr_det import TextDetOutput

        if len(quads) == 0:
            return []
        engine = self._load()
        engine.update_params(return_word_box=True)
        crops = engine.crop_text_regions(image, quads)
        cls_res = TextClsOutput()
        if engine.use_cls:
            rec_input, cls_res = engine.cls_and_rotate(crops)
        else:
            rec_input = crops
        rec_res = engine.recognize_txt(rec_input)
        record = {"preprocess": {"ratio_h": 1.0, "ratio_w": 1.0}, "padding_1": {"top": 0, "left": 0}}
        detected = TextDetOutput(image, quads.copy(), [1.0] * len(quads))
        return lines_from_rapidocr(engine.build_final_output(image, detected, cls_res, rec_res, crops, record))


# onnxruntime's thread pool spins its threads between the pieces of a model's run by default, waiting
# for the next piece on a core instead of sleeping. A full 1920x1080 read alone here: 2.9 s and 5.6 s
# of CPU spinning, 2.6 s and 4.6 s not: the spin buys no speed and costs a core. (Three reads at once
# on the 2 cores cost the same either way, ~4.5 s of CPU each: the spin yields when cores are taken.)
NO_SPINNING = ("session.intra_op.allow_spinning", "0")


def _models_without_spinning() -> None:
    """Have rapidocr build every model's onnxruntime session with NO_SPINNING. rapidocr takes the
    thread counts from its config but no other session option, so its one builder of session
    options is wrapped, once per process (tests/unit/test_ocr_incremental.py checks the loaded
    models' sessions carry the option, so a rapidocr that builds them elsewhere is noticed)."""
    from rapidocr.inference_engine.onnxruntime import OrtInferSession

    build = OrtInferSession._init_sess_opts
    if getattr(build, "without_spinning", False):
        return

    def options(cfg):
        built = build(cfg)
        built.add_session_config_entry(*NO_SPINNING)
        return built

    options.without_spinning = True  # type: ignore[attr-defined]  # the mark that it is wrapped
    OrtInferSession._init_sess_opts = staticmethod(options)  # type: ignore[method-assign]


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
