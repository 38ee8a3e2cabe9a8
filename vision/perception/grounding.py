"""Grounding a text: where a target text is on the screen, from the OCR lines (``find_text``).

Grounding (pure functions on OCR lines, see ``find_text``): an exact case-insensitive match of the
whole text of an OCR line first, then an exact match of a run of adjacent words inside a line, then
a fuzzy match (difflib ratio >= 0.8). The best tier with any match wins; two different places
in it are reported as ambiguous, never picked between. The click lands on the centre of the
matched box -- a word-level box when the target is part of a longer line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from vision.perception.ocr import Box, Line, reading_order

FUZZY_THRESHOLD = 0.8


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
    texts = [line.text for row in reading_order(lines) for line in row if sum(c.isalnum() for c in line.text) >= 2]
    if not texts:
        return "(no readable text)"
    shown = [f"'{t[:40]}{'…' if len(t) > 40 else ''}'" for t in texts[:limit]]
    more = f" (and {len(texts) - limit} more)" if len(texts) > limit else ""
    return ", ".join(shown) + more


_NUMBERS = re.compile(r"\d+")


def find_text(lines: Sequence[Line], target: str, *, fuzzy: float = FUZZY_THRESHOLD) -> Match:
    """Where ``target`` is on the screen, from OCR lines. Raises GroundingError.

    Tiers, first one with a match wins:
      1. a whole OCR line equals the target (case-insensitive, spaces and end punctuation normalised);
      2. a run of adjacent words inside a line (or across lines close together on one row) equals it;
      3. fuzzy: difflib ratio >= ``fuzzy`` against lines and runs of n-1..n+1 words; best score wins.
         Only among texts with the same numbers as the target: one character of difference is an OCR
         misreading in "Subrnit", but another count, price or date in "4 items left" for "3 items
         left" (a QA assertion would pass on the wrong number, a click land on the wrong row).
    Within the winning tier, matches at different places are an ambiguity and an error.
    """
    wanted = normalise(target)
    if not wanted:
        raise GroundingError("nothing to look for: the target text is empty")
    size = len(wanted.split())
    exact_line: list[Match] = []
    exact_words: list[Match] = []
    scored = []
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(wanted)  # the matcher caches what it learns about its second sequence
    numbers = _NUMBERS.findall(wanted)
    for text, box, line, whole in _candidates(lines, (size - 1, size, size + 1)):
        got = normalise(text)
        if got == wanted:
            (exact_line if whole else exact_words).append(Match(text, box, line, 1.0, "line" if whole else "words"))
            continue
        matcher.set_seq1(got)
        if matcher.real_quick_ratio() >= 0.5 and matcher.quick_ratio() >= 0.5:  # cheap upper bounds first
            ratio = matcher.ratio()
            # Another number is never the target, however close; it stays a hint of what is there.
            scored.append((ratio if _NUMBERS.findall(got) == numbers else min(ratio, fuzzy - 0.001), text, box, line))
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
