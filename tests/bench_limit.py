"""Each answer against the physical limit it cannot beat (issue 22, item 2): ``python -m tests.bench_limit``
prints the table; tests.bench imports ``limit_cases`` for `make bench` (its "Answer vs the limit" section).

For every case, on one real session and its Chromium, in the same run:

- **the limit**: the input alone, sent by the session's own executor (no settle), while a DAMAGE
  watch of our own on the display waits for the effect: the time from the input to the last damage
  of its effect (the effect is over when the screen then stays unchanged for ``EFFECT_QUIET_MS``),
  plus one capture and one PNG encode (the medians of the same run). An answer that shows the
  effect cannot come sooner. For an input with no visible effect there is no damage, but an
  answer that says "nothing changed" must still know the page took the input and drew the frame
  after it: the limit is the time from the input to the end of the browser's frame after the
  page's click handler (when the next frame's animation callbacks start; the page's own clock,
  ``performance.timeOrigin + now()``, the same wall clock as ``time.time()``), plus the capture
  and encode (issue 40, item 3; it was the floor:
  input + capture + encode, a limit no true answer can reach);
- **the answer**: the same input over real HTTP (``POST .../desktop/{action}?screenshot=true``, to
  the parsed JSON) and, for the pointer cases, as steps of a vision/act run with the scripted model
  (the wall time between two steps' records, trace written), with what decided each answer's wait
  (``settled_by``).

The unfavourable cases are here on purpose: a click that changes nothing (an agent's miss) and a
click whose handler fetches and repaints 300 ms later.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from desktop.actions import Click, Key, Type
from desktop.models import Target
from desktop.x11.screen import DamageWatch
from tests.bench_page import PageRig, _ms
from tests.fakes.testpage import TestPage

# How long the screen must stay unchanged for the limit's effect to be over. Longer than any gap
# between two frames of one effect on this machine (QUIET_MS's comment in desktop/x11/screen.py:
# up to 95 ms under load), shorter than a caret's blink (~500 ms) that would count as more effect.
EFFECT_QUIET_MS = 250
# How long the first damage of an effect may take to come: past the slowest case's (the fetch that
# answers 300 ms late). Longer, and an unrelated paint seconds later (a caret)
# was taken for a click's effect that had none (make bench: a limit of 3.7 s at p90).
EFFECT_FIRST_S = 1.0
EFFECT_BOUND_S = 5.0
TEXT = "twenty characters ok"  # 20 characters, one key each on a US keymap
# Armed before each input of a case with no visible effect: the wall-clock time (epoch ms) at which
# the frame after the page's click handler is done (the next frame's animation callbacks start),
# the frame that would show what the handler changed.
_ARM_FRAME = """() => {
  window.__benchFrameAfter = null;
  addEventListener('click', () => requestAnimationFrame(() => requestAnimationFrame(() => {
    window.__benchFrameAfter = performance.timeOrigin + performance.now();
  })), {once: true});
}"""


@dataclass
class Case:
    name: str
    action: Any                      # the desktop action (or what makes it, per run), for the limit and the answer
    setup: Callable[[], None]        # untimed, before every input
    vision: bool = False             # also as scripted vision steps (pointer cases)
    frame_limit: bool = False        # no visible effect: the limit ends at the browser's frame after the input
    limit: list[float] = field(default_factory=list)
    answer: list[float] = field(default_factory=list)
    step: list[float] = field(default_factory=list)
    settled_by: Counter = field(default_factory=Counter)
    step_settled_by: Counter = field(default_factory=Counter)


def _effect_over_ms(watch: DamageWatch, act: Callable[[], None]) -> float | None:
    """From before ``act()`` to the last damage of its effect (ms), or None when nothing changed."""
    watch.mark()
    start = time.perf_counter()
    act()
    last = None
    bound = start + EFFECT_BOUND_S
    while time.perf_counter() < bound:
        # Before any damage the wait is for a first one (up to the bound); after one, for quiet.
        wait_s = EFFECT_QUIET_MS / 1000 if last is not None else EFFECT_FIRST_S
        if not watch.wait(wait_s):
            break
        last = time.perf_counter()
    return None if last is None else (last - start) * 1000


def _frame_after_ms(session, act: Callable[[], None]) -> float:
    """From before ``act()`` (a click) to the end of the browser's frame after the page handled it (ms)."""
    def page(expression: str):
        return session.stack.browser.call(lambda pages: pages.evaluate(expression), 5)

    page(_ARM_FRAME)
    start = time.time()
    act()
    bound = time.monotonic() + EFFECT_BOUND_S
    while (frame_at := page("() => window.__benchFrameAfter")) is None:
        if time.monotonic() > bound:
            raise RuntimeError("the page ran no frame after the click: the click did not reach it")
        time.sleep(0.01)
    return frame_at - start * 1000


def _cases(rig: PageRig, page: TestPage) -> list[Case]:
    sid, pages = rig.session_id, rig.pages

    def goto(url: str) -> None:
        pages.navigate(sid, "goto", url, "load", 15_000)

    goto(page.url)
    signin, cancel, later = (pages.boxes(sid, [f"#{name}"], "display")[0] for name in ("signin", "cancel", "later"))
    centre = lambda box: ((box[0] + box[2]) // 2, (box[1] + box[3]) // 2)  # noqa: E731
    buttons = [centre(signin), centre(cancel)]
    flip = {"i": 0}

    def on_test_page() -> None:
        if pages.state(sid).url != page.url:
            goto(page.url)

    def next_button() -> None:
        on_test_page()
        flip["i"] += 1

    def visible_click() -> Click:  # Sign in and Cancel in turn: each click changes the status text
        x, y = buttons[flip["i"] % 2]
        return Click(x=x, y=y)

    def two_spots(x: int, y: int, dx: int, dy: int) -> Callable[[], Click]:
        """Clicks on two spots in turn: clicks on one spot would each wait out the double-click
        time (desktop.x11.input.MULTI_CLICK_S), which is not what these cases time."""
        turns = itertools.cycle((0, 1))

        def click() -> Click:
            other = next(turns)
            return Click(x=x + dx * other, y=y + dy * other)
        return click

    def still_setup() -> None:
        if pages.state(sid).url != page.notes_url:
            goto(page.notes_url)

    def field_setup() -> None:
        on_test_page()
        pages.fill(sid, Target(selector="#field"), "")  # empty and focused: the typing shows from its start
        time.sleep(0.1)

    def history_setup() -> None:
        goto(page.notes_url)
        goto(page.url)  # alt+Left goes back to the notes page: a new page to paint

    lx, ly = centre(later)
    cases = [
        Case("click with no visible effect", two_spots(1600, 900, 0, 40), still_setup, vision=True, frame_limit=True),
        Case("click with a visible effect", visible_click, next_button, vision=True),
        Case("type 20 characters into a field", Type(text=TEXT), field_setup),
        Case("key that navigates (alt+Left, back)", Key(keys=["alt+Left"]), history_setup),
        Case("click whose handler fetches, repaints 300 ms later", two_spots(lx, ly, 8, 0), on_test_page, vision=True),
    ]
    return cases


def _action(case: Case):
    return case.action() if callable(case.action) else case.action


def _http(rig: PageRig, action) -> tuple[float, str]:
    body = action.model_dump(exclude={"action"}, exclude_none=True)
    path = f"/api/v1/sessions/{rig.session_id}/desktop/{action.action}?screenshot=true"
    start = time.perf_counter()
    response = rig.client.post(path, json=body)
    answer = response.json()
    ms = _ms(start)
    if response.status_code != 200 or not answer.get("screenshot"):
        raise RuntimeError(f"POST {path}: {response.status_code} {response.text[:300]}")
    return ms, answer.get("settled_by", "?")


def _vision_steps(rig: PageRig, case: Case, steps: int) -> None:
    """``steps`` timed steps of one scripted vision/act run: the wall time between consecutive
    step records (the first step, which includes starting the run, is not timed)."""
    import tempfile

    from vision.config import VisionConfig
    from vision.models import ActRequest
    from vision.run.events import EventBus
    from vision.run.loop import Runner
    from vision.trace import store as trace_store

    session = rig.desktops.session(rig.session_id)
    case.setup()
    script = []
    for _ in range(steps + 1):
        case.setup()  # the page is already there: only the visible click's alternation moves on
        action = _action(case)
        script.append({"action": "click", "x": action.x, "y": action.y})
    script.append({"action": "done"})
    stamps, summaries = [], []

    def on_step(summary) -> None:
        stamps.append(time.perf_counter())
        summaries.append(summary)

    with tempfile.TemporaryDirectory(prefix="glassdesk-bench-limit-") as data_dir:
        runner = Runner(session, trace_store.TraceStore(data_dir), VisionConfig(), EventBus())
        result = runner.act(ActRequest(instruction="benchmark: " + case.name, model="scripted", script=script,
                                       max_steps=len(script)), on_step)
    if result.status != "done":
        raise RuntimeError(f"benchmark run ended {result.status}: {result.error}")
    for i in range(1, steps + 1):
        case.step.append((stamps[i] - stamps[i - 1]) * 1000)
        case.step_settled_by.update(summaries[i].settled_by)


def limit_cases(rig: PageRig, page: TestPage, floor: dict[str, float], runs: int,
                vision_steps: int = 10) -> list[Case]:
    """Every case's limit, HTTP answer and (pointer cases) vision steps; ``floor`` is
    tests.bench_loop.measure_floor's result of the same run (its grab and encode medians)."""
    session = rig.desktops.session(rig.session_id)
    capture_ms = floor["grab_ms"] + floor["encode_ms"]
    saved_glide = session.executor.glide_ms
    session.executor.glide_ms = 0
    watch = DamageWatch(session.stack.display)
    cases = _cases(rig, page)
    try:
        for case in cases:
            for _ in range(2):  # warm-up: the first of each kind pays for caches and focus changes
                case.setup()
                _http(rig, _action(case))
            for _ in range(runs):
                case.setup()
                action = _action(case)
                executed = {}

                def act(action=action, executed=executed) -> None:
                    start = time.perf_counter()
                    session.executor.run(action)
                    executed["ms"] = _ms(start)

                if case.frame_limit:
                    case.limit.append(_frame_after_ms(session, act) + capture_ms)
                else:
                    over = _effect_over_ms(watch, act)
                    case.limit.append((over if over is not None else executed["ms"]) + capture_ms)
                time.sleep(0.05)
                case.setup()
                ms, by = _http(rig, _action(case))
                case.answer.append(ms)
                case.settled_by[by] += 1
            if case.vision:
                _vision_steps(rig, case, vision_steps)
    finally:
        watch.close()
        session.executor.glide_ms = saved_glide
    return cases


def summary_lines(cases: list[Case], floor_ms: float) -> list[str]:
    med = statistics.median
    lines = []
    for case in cases:
        limit, answer = med(case.limit), med(case.answer)
        line = (f"{case.name}: limit {limit:.1f} ms, HTTP answer {answer:.1f} ms = {answer / limit:.2f}x the limit, "
                f"{answer / floor_ms:.1f}x the floor; decided by {dict(case.settled_by)}")
        if case.step:
            step = med(case.step)
            line += (f"; vision step {step:.1f} ms = {step / limit:.2f}x the limit, {step / floor_ms:.1f}x the floor, "
                     f"decided by {dict(case.step_settled_by)}")
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench_limit", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="inputs per case, for the limit and the answer each")
    args = parser.parse_args(argv)

    import os

    from desktop.session.manager import SessionManager
    from tests.bench_loop import measure_floor

    manager = SessionManager(max_sessions=1)
    page = TestPage()
    rig = None
    try:
        session = manager.create("bench-limit")
        rig = PageRig.start(manager, session.id)
        load = os.getloadavg()
        floor = measure_floor(session, 50)
        cases = limit_cases(rig, page, floor, args.runs)
        load_end = os.getloadavg()
    finally:
        if rig is not None:
            rig.close()
        manager.close()
        page.close()
    print(f"load average {load[0]:.2f} at start, {load_end[0]:.2f} at end; floor {floor['floor_ms']:.1f} ms "
          f"(grab {floor['grab_ms']:.1f} + encode {floor['encode_ms']:.1f} + xdotool {floor['xdotool_ms']:.1f})")
    print("\n".join(summary_lines(cases, floor["floor_ms"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
