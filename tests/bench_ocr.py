"""Issue 22, item 4: finding a text on a full 1920x1080 screen, warm (``python -m tests.bench_ocr``
prints the figures; tests.bench imports them for `make bench`).

    result = find_times(session, page, runs=10)    # {"reuse": [...], "full": [...], ...} in ms

On the session's real display, the test page (tests/assets/testpage.html) with a new word typed in
its field before each sample -- the screen of a QA step after an action: one region repainted,
the rest as before. Each sample is what ``find_text_on_screen`` does with a screenshot it has not
seen: decode the PNG, OCR it, ground the word. Timed two ways on the very same screenshot, back to
back and alternating which goes first: ``reuse``, the process's engine as it now is (the
lines of the screen before reused where the pixels did not change; ``vision.perception.ocr``,
IncrementalReader), and ``full``, the same models reading the whole screen (what every find did
before). Both answers are checked: the same text found, its centre (where a click lands) within
3 px (a re-read line's box edges may differ by a few px: the full read's detector sees the screen
stretched to 1088 rows, a window its pixels as they are).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from desktop.actions import Click, Key, Type


def _typed(session, word: str, timeout_s: float = 5.0) -> bytes:
    """A screenshot once the field shows the whole word (the settle after typing may answer
    before Chromium painted the last keys): two captures in a row with the same pixels."""
    deadline, before = time.monotonic() + timeout_s, None
    while True:
        time.sleep(0.15)
        png = session.screen.capture().png
        if png == before or time.monotonic() > deadline:
            return png
        before = png


def find_times(session, page, runs: int) -> dict[str, Any]:
    from vision.perception import ocr
    from vision.perception.grounding import find_text
    from vision.qa.screen_find import _decode

    engine = ocr.shared_engine()
    full = ocr.RapidOcrEngine(reuse=False)
    full._engine = engine._load()  # the same loaded models and options, read whole (no second load)
    session.run_settled(lambda: session.open_url(page.url))
    page.wait_for(lambda e: e.get("type") == "loaded")
    page.clear()
    session.perform(Click(x=960, y=700))
    click = page.wait_for(lambda e: e.get("type") == "click")
    vx, vy = click["screenX"] - click["clientX"], click["screenY"] - click["clientY"]
    session.perform(Click(x=vx + 500, y=vy + 282))  # the field

    def step(png: bytes, word: str, reader) -> tuple[float, tuple]:
        start = time.perf_counter()
        match = find_text(reader.read(_decode(png, "screenshot")), word)
        return (time.perf_counter() - start) * 1000, (match.box.x0, match.box.y0, match.box.x1, match.box.y1,
                                                      match.text, match.how)

    out: dict[str, Any] = {"reuse": [], "full": [], "how": {}, "mismatches": 0, "examples": []}
    engine.read(_decode(session.screen.capture().png, "screenshot"))  # warm: the screen before the first step
    for i in range(runs + 1):
        word = f"parcel{i:03d}shipped"
        session.perform(Key(keys=["ctrl+a"]))
        session.perform(Type(text=word))
        png = _typed(session, word)
        order = ("reuse", "full") if i % 2 else ("full", "reuse")
        boxes = {}
        for how in order:
            ms, boxes[how] = step(png, word, engine if how == "reuse" else full)
            if how == "reuse":
                kind = engine.last_how
            if i:  # the first round warms the window detector up
                out[how].append(ms)
        if i:
            out["how"][kind] = out["how"].get(kind, 0) + 1
            (ax0, ay0, ax1, ay1, atext, _), (bx0, by0, bx1, by1, btext, _) = boxes["reuse"], boxes["full"]
            if atext != btext or abs((ax0 + ax1 - bx0 - bx1) / 2) > 3 or abs((ay0 + ay1 - by0 - by1) / 2) > 3:
                out["mismatches"] += 1
                out.setdefault("examples", []).append(boxes)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench_ocr", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="samples each way (default 10)")
    args = parser.parse_args(argv)

    from desktop.session.manager import SessionManager
    from tests.fakes.testpage import TestPage

    manager, page = SessionManager(max_sessions=1), TestPage()
    try:
        session = manager.create("bench-ocr")
        result = find_times(session, page, args.runs)
    finally:
        manager.close()
        page.close()
    med = statistics.median
    print(f"find text, full screen, warm: reuse {med(result['reuse']):.0f} ms, full read {med(result['full']):.0f} ms "
          f"({med(result['full']) / med(result['reuse']):.1f}x); reads {result['how']}; "
          f"answers apart: {result['mismatches']} {result['examples'][:2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
