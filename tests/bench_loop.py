"""The vision loop's own cost per step: ``python -m tests.bench_loop`` prints it; tests.bench imports it.

    from tests.bench_loop import measure_loop_overhead
    numbers = measure_loop_overhead(session, page_url, runs=30)
    numbers["step_ms"]["median"], numbers["floor_ms"], numbers["ratio"], numbers["passed"]

What is measured: the real Runner (vision.run.loop) driving a real session with the ``scripted``
provider, whose model time is ~0, so a step's wall time is the runner's overhead: observation,
validation, executing the click with xdotool, waiting for the screen to settle, the trace (after
PNG encoded, files written atomically with fsync, hash chain) and the page URL from Chromium's
DevTools. Each step clicks one of two buttons of the test page whose click changes the page (a
real repaint), like the desktop benchmark's click -> settled metric, so the settle wait is the
real one and not the "nothing changed" timeout.

The floor is measured in the same run, as in tests.bench: a raw mss grab + PNG encode (level 1) +
one ``xdotool mousemove`` process (the sum of the three medians). Target: median step <= 5x floor.

The pointer glide (desktop.x11.input: the pointer travels visibly to its target, ~150 ms by default)
is a deliberate show for the person watching, not overhead: it is off while measuring
(``glide_ms=0``) unless asked for.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mss

import vision.trace.store as trace_store
import vision.trace.writer as trace_writer
from desktop.actions import Click
from desktop.frame import Frame
from desktop.session.manager import Session
from vision.config import VisionConfig
from vision.models import MAX_STEPS_CAP, ActRequest
from vision.run.events import EventBus
from vision.run.loop import Runner

TARGET_RATIO = 5.0
# Buttons of tests/assets/testpage.html whose click repaints the page (#status text).
BUTTONS = ("signin", "cancel")


def _median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def _p90(samples: list[float]) -> float:
    """Nearest-rank 90th percentile (as tests.bench)."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def _stats(samples: list[float]) -> dict[str, float]:
    return {"median": _median(samples), "p90": _p90(samples)}


# ----------------------------------------------------------------------------------- the floor


def measure_floor(session: Session, runs: int = 30) -> dict[str, Any]:
    """Raw mss grab + PNG encode (the same fast encoder as Frame.png) + one xdotool mousemove, in ms."""
    env = session.stack.env()
    grab, encode, xdo = [], [], []
    points = [(700, 600), (760, 640)]
    with mss.MSS(display=session.stack.display) as sct:
        monitor = {"left": 0, "top": 0, "width": 1920, "height": 1080}
        for i in range(runs):
            t0 = time.perf_counter()
            shot = sct.grab(monitor)
            t1 = time.perf_counter()
            _ = Frame(shot.raw, shot.width, shot.height).png
            t2 = time.perf_counter()
            x, y = points[i % 2]
            done = subprocess.run(["xdotool", "mousemove", str(x), str(y)], env=env, capture_output=True)
            t3 = time.perf_counter()
            if done.returncode != 0:
                raise RuntimeError(f"xdotool failed: {done.stderr!r}")
            grab.append((t1 - t0) * 1000), encode.append((t2 - t1) * 1000), xdo.append((t3 - t2) * 1000)
    return {"floor_ms": _median(grab) + _median(encode) + _median(xdo),
            "grab_ms": _median(grab), "encode_ms": _median(encode), "xdotool_ms": _median(xdo)}


# ------------------------------------------------------------------------------ page and targets


def _evaluate(session: Session, expression: str) -> Any:
    """Run JavaScript in the front tab over the session's DevTools pipe (desktop.browser.chromium); returns
    its JSON value. RuntimeError when the page cannot run it (e.g. it is still loading)."""
    async def run(pages):
        page = await pages.front()
        if page is None:
            raise RuntimeError("no tab is open")
        return await page.evaluate(expression)

    try:
        return session.stack.browser.call(run, 10)
    except Exception as exc:
        raise RuntimeError(f"page script failed: {(str(exc).splitlines() or [type(exc).__name__])[0]}") from exc


_INSTALL = """(() => {
  window.__gdOffset = null;
  window.__gdClicks = {};
  addEventListener('mousedown', e => { window.__gdOffset = [e.screenX - e.clientX, e.screenY - e.clientY]; },
                   {once: true, capture: true});
  addEventListener('click', e => { const id = (e.target && e.target.id) || '?';
                                   window.__gdClicks[id] = (window.__gdClicks[id] || 0) + 1; }, {capture: true});
  return %s.map(id => { const el = document.getElementById(id); if (!el) return null;
                        const r = el.getBoundingClientRect();
                        return [Math.round(r.left + r.width / 2), Math.round(r.top + r.height / 2)]; });
})()"""


def _targets(session: Session, page_url: str) -> tuple[list[tuple[int, int]], str]:
    """Display pixels of the two repainting buttons, the page's offset measured by a real click."""
    session.run_settled(lambda: session.open_url(page_url))
    deadline = time.monotonic() + 10
    while True:  # the page may still be loading
        try:
            centres = _evaluate(session, _INSTALL % json.dumps(list(BUTTONS)))
            break
        except (RuntimeError, OSError, KeyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    session.perform(Click(x=960, y=700))  # blank area of the test page: where is the page's (0,0)?
    offset = None
    for _ in range(50):
        offset = _evaluate(session, "window.__gdOffset")
        if offset:
            break
        time.sleep(0.05)
    if not offset or not all(centres):
        # Not the test page: clicks on blank spots; nothing repaints, so settle waits its timeout.
        return [(700, 600), (760, 640)], "no repainting buttons on the page: blank-area clicks"
    return [(offset[0] + cx, offset[1] + cy) for cx, cy in centres], "buttons #signin / #cancel"


# ------------------------------------------------------------------------------- instrumentation


@contextmanager
def _instrumented(session: Session) -> Iterator[dict[str, list[float]]]:
    """Time the runner's known costs while measuring: DevTools page_url, trace PNG encode,
    atomic writes (fsync). Restores everything afterwards."""
    timings: dict[str, list[float]] = defaultdict(list)

    def timed(name: str, fn: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timings[name].append((time.perf_counter() - start) * 1000)
        return wrapper

    saved_url = session.page_url
    saved_png, saved_write = trace_writer._png_bytes, trace_writer.atomic_write
    session.page_url = timed("page_url", saved_url)
    trace_writer._png_bytes = timed("trace_png", saved_png)
    # The writer's files and those the store writes when it creates a trace, as one count.
    trace_writer.atomic_write = trace_store.atomic_write = timed("atomic_write", saved_write)
    try:
        yield timings
    finally:
        trace_writer._png_bytes, trace_writer.atomic_write = saved_png, saved_write
        trace_store.atomic_write = saved_write
        del session.page_url  # back to the class's method


# ------------------------------------------------------------------------------------ the loop


def measure_loop_overhead(session: Session, page_url: str, runs: int = 30, *, glide_ms: int = 0) -> dict[str, Any]:
    """The vision loop's overhead per step on ``session``, with the floor measured in the same run.

    ``page_url``: the test page (tests/assets/testpage.html, e.g. ``TestPage().url``); each step
    clicks its Sign in or Cancel button, alternately. ``runs``: timed steps (split into runs of at
    most MAX_STEPS_CAP - 2 steps; the first step of each run, which includes starting the run, is
    not timed). ``glide_ms``: the pointer glide while measuring (0 = off; None = the session's).

    Returns a dict (times in ms)::

        step_ms      {"median", "p90"}  wall time per step, between consecutive step records
        model_ms     {"median", "p90"}  of which the provider's turn (~0 with the scripted one)
        exec_ms      {"median", "p90"}  of which running xdotool
        settle_ms    {"median", "p90"}  of which waiting for the screen to settle
        other_ms     {"median", "p90"}  the rest: page URL, trace PNG + files, bookkeeping
        parts_ms     {name: mean ms per step} page_url (DevTools), trace_png (encode),
                     atomic_write (fsynced files), from instrumentation, over every step of the
                     timed runs; parts_calls_per_step says how often each ran per step
        floor_ms, floor {"grab_ms", "encode_ms", "xdotool_ms"}
        ratio        step_ms median / floor_ms;  target 5.0;  passed  ratio <= target
        runs, targets (what was clicked), clicks (per button, as the page counted them)
        samples      {"step_ms", "model_ms", "exec_ms", "settle_ms"} raw per-step lists
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    floor = measure_floor(session, runs)
    targets, target_note = _targets(session, page_url)
    saved_glide = session.executor.glide_ms
    if glide_ms is not None:
        session.executor.glide_ms = glide_ms
    samples: dict[str, list[float]] = defaultdict(list)
    try:
        with tempfile.TemporaryDirectory(prefix="glassdesk-bench-") as data_dir:
            store = trace_store.TraceStore(data_dir)
            runner = Runner(session, store, VisionConfig(), EventBus())

            def run(steps: int, timed: bool) -> None:
                script = [{"action": "click", "x": targets[i % 2][0], "y": targets[i % 2][1]}
                          for i in range(steps + 1)] + [{"action": "done"}]
                stamps: list[float] = []
                summaries = []

                def on_step(summary) -> None:
                    stamps.append(time.perf_counter())
                    summaries.append(summary)

                result = runner.act(ActRequest(instruction="benchmark", model="scripted", script=script,
                                               max_steps=len(script)), on_step)
                if result.status != "done":
                    raise RuntimeError(f"benchmark run ended {result.status}: {result.error}")
                if not timed:
                    return
                # Step i (i >= 2): from step i-1's record to step i's. The final "done" step is not a click.
                for i in range(1, steps + 1):
                    summary = summaries[i]
                    wall = (stamps[i] - stamps[i - 1]) * 1000
                    samples["step_ms"].append(wall)
                    samples["model_ms"].append(summary.model_ms)
                    samples["exec_ms"].append(summary.exec_ms)
                    samples["settle_ms"].append(summary.settle_ms)
                    samples["other_ms"].append(wall - summary.model_ms - summary.exec_ms - summary.settle_ms)

            run(3, timed=False)  # warm-up: imports, first trace, caches
            _evaluate(session, "window.__gdClicks = {}")
            per_run = MAX_STEPS_CAP - 2
            left = runs
            with _instrumented(session) as parts:
                while left > 0:
                    n = min(left, per_run)
                    run(n, timed=True)
                    left -= n
            clicks = _evaluate(session, "window.__gdClicks") or {}
    finally:
        session.executor.glide_ms = saved_glide

    step_median = _median(samples["step_ms"])
    # Every step of the timed runs: the timed ones, plus each run's untimed first and final "done".
    steps_total = runs + 2 * math.ceil(runs / per_run)
    ratio = step_median / floor["floor_ms"]
    return {
        "runs": runs,
        "step_ms": _stats(samples["step_ms"]),
        "model_ms": _stats(samples["model_ms"]),
        "exec_ms": _stats(samples["exec_ms"]),
        "settle_ms": _stats(samples["settle_ms"]),
        "other_ms": _stats(samples["other_ms"]),
        "parts_ms": {name: sum(values) / steps_total for name, values in sorted(parts.items())},
        "parts_calls_per_step": {name: len(values) / steps_total for name, values in sorted(parts.items())},
        "floor_ms": floor["floor_ms"],
        "floor": {k: v for k, v in floor.items() if k != "floor_ms"},
        "ratio": ratio,
        "target": TARGET_RATIO,
        "passed": ratio <= TARGET_RATIO,
        "glide_ms": session.executor.glide_ms if glide_ms is None else glide_ms,
        "targets": {"points": targets, "note": target_note},
        "clicks": clicks,
        "samples": {k: list(v) for k, v in samples.items()},
    }


# ---------------------------------------------------------------------------------------- CLI


def format_report(numbers: dict[str, Any]) -> str:
    lines = [f"vision loop overhead per step, scripted provider, {numbers['runs']} steps "
             f"(pointer glide {numbers['glide_ms']} ms; targets: {numbers['targets']['note']})",
             f"  {'metric':<34}{'median':>10}{'p90':>10}"]
    for key, label in (("step_ms", "step wall time (= overhead)"), ("model_ms", "  model (scripted)"),
                       ("exec_ms", "  exec (xdotool)"), ("settle_ms", "  settle wait"),
                       ("other_ms", "  other (trace, page URL, ...)")):
        lines.append(f"  {label:<34}{numbers[key]['median']:>10.1f}{numbers[key]['p90']:>10.1f}")
    lines.append("  measured parts, mean ms per step (calls per step):")
    for name, value in numbers["parts_ms"].items():
        lines.append(f"    {name:<32}{value:>10.1f}   ({numbers['parts_calls_per_step'][name]:.1f})")
    floor = numbers["floor"]
    lines.append(f"  floor {numbers['floor_ms']:.1f} ms = grab {floor['grab_ms']:.1f} + PNG {floor['encode_ms']:.1f} "
                 f"+ xdotool {floor['xdotool_ms']:.1f}")
    lines.append(f"  ratio {numbers['ratio']:.2f}x the floor (target <= {numbers['target']:.0f}x): "
                 f"{'PASS' if numbers['passed'] else 'MISS'}")
    lines.append(f"  clicks the page counted: {numbers['clicks']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench_loop", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed steps (default 30)")
    parser.add_argument("--glide-ms", type=int, default=0, help="pointer glide while measuring (default 0: off)")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = parser.parse_args(argv)

    from desktop.session.manager import SessionManager
    from tests.fakes.testpage import TestPage

    manager = SessionManager(max_sessions=1)
    page = TestPage()
    try:
        session = manager.create("bench-loop")
        numbers = measure_loop_overhead(session, page.url, args.runs, glide_ms=args.glide_ms)
    finally:
        manager.close()
        page.close()
    print(json.dumps(numbers, indent=2) if args.json else format_report(numbers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
