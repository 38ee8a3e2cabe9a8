"""What filming costs (issue 26): ``python -m tests.bench_video`` prints it; tests.bench imports it
for `make bench`.

    result = video_cost(session, still_url, busy_url, seconds=10, rounds=3)

A video receipt (desktop/x11/receipt.py) of the session's 1920x1080 display at 10 fps, in each
format (MP4/H.264, the default, and WebM/VP8), on two screens: a still page (the test page, as a
run between its steps) and a page that repaints the whole viewport every frame (the test site's
``/busy``: the worst case). What is measured:

- **while filming**: ffmpeg's CPU time (``/proc/<pid>/stat``, user + system) over the wall time it
  filmed, as a share of one core. Target (issue 26): under 25% of a core at 1920x1080, 10 fps.
- **making the receipt**: ``finish`` (stop ffmpeg, write the chapters and captions, the second
  ffmpeg pass that draws the rings and burns the captions in) for a film with a click every
  second: its wall time and its CPU time (the children's, from ``getrusage``), per second of film.

The share is the encoder's own: the X server's work to hand out the frames (XShm) is not in it.
Nothing here asserts a cost; the numbers are reported with their target (tests.bench).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_SHARE = 0.25
FPS = 10


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def film_once(session, fmt: str, seconds: float) -> dict[str, float]:
    """One receipt of ``seconds``, a click marked every second; its costs."""
    from desktop.x11.receipt import VideoReceipt

    with tempfile.TemporaryDirectory(prefix="bench-video-") as tmp:
        receipt = VideoReceipt(session.display, Path(tmp), fmt=fmt, fps=FPS, title="bench")
        receipt.start()
        pid = receipt._recorder.pid
        cpu0, wall0 = _cpu_s(pid), time.monotonic()
        for second in range(int(seconds)):
            receipt.chapter(f"step {second + 1}")
            receipt.click(200 + 100 * second, 300)
            time.sleep(1.0)
        cpu1, wall1 = _cpu_s(pid), time.monotonic()
        before = _children_cpu_s()
        start = time.monotonic()
        files = receipt.finish()
        finish_s = time.monotonic() - start
        # The recorder's own last moments are in the children's time too: take them out.
        finish_cpu = _children_cpu_s() - before - max(0.0, _last_cpu(pid, cpu1) - cpu1)
        size = files.video.stat().st_size
    film_s = wall1 - wall0
    return {"share": (cpu1 - cpu0) / film_s, "film_s": film_s, "finish_s": finish_s,
            "finish_cpu_s": max(0.0, finish_cpu), "mb_per_min": size / 1e6 / film_s * 60}


def _last_cpu(pid: int, fallback: float) -> float:
    try:
        return _cpu_s(pid)
    except OSError:  # reaped: its time is in the children's, and was counted up to cpu1
        return fallback


def video_cost(session, still_url: str, busy_url: str, *, seconds: float = 10.0, rounds: int = 3) -> dict[str, Any]:
    """Per (format, screen): the samples of each cost over ``rounds`` films."""
    out: dict[str, Any] = {}
    for screen, url in (("still", still_url), ("busy", busy_url)):
        session.run_settled(lambda url=url: session.open_url(url))
        time.sleep(1.0)
        for fmt in ("mp4", "webm"):
            runs = [film_once(session, fmt, seconds) for _ in range(rounds)]
            out[(fmt, screen)] = {key: [r[key] for r in runs] for key in runs[0]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench_video", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each film (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="films per format and screen (default 3)")
    args = parser.parse_args(argv)

    from desktop.session.manager import SessionManager
    from tests.fakes.site import TestSite

    manager = SessionManager(max_sessions=1)
    site = TestSite()
    try:
        session = manager.create("bench-video")
        result = video_cost(session, site.url("/load"), site.url("/busy"), seconds=args.seconds, rounds=args.rounds)
    finally:
        site.close()
        manager.close()
    med = statistics.median
    for (fmt, screen), r in result.items():
        print(f"{fmt:4} {screen:5}: filming {med(r['share']):.1%} of a core (target < {TARGET_SHARE:.0%}); receipt "
              f"{med(r['finish_s']):.2f} s wall, {med(r['finish_cpu_s']):.2f} s CPU for {med(r['film_s']):.0f} s "
              f"of film; {med(r['mb_per_min']):.1f} MB/min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
