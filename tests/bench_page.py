"""The page layer's figures (issue 11): ``python -m tests.bench_page`` prints them; tests.bench
imports them for `make bench`.

    rig = PageRig.start(manager, session.id)
    state = page_state_times(rig, runs=50)            # {"service": [...], "http": [...]} in ms
    clicks = click_times(rig, test_page, runs=50)     # {"pixel": [...], "selector": [...], ...}
    loads = load_times(rig, runs=50)                  # {"attached": [...], "detached": [...], ...}
    rig.close()

What is measured, on one real session, with the floor of the same run next to it:

- ``page_state``: ``PageService.state`` (the one call every door makes) and ``GET /page`` over real
  HTTP (the real app, ``vision.http.app.create_app`` with its middleware, on uvicorn on loopback in this
  process; the client is httpx2 in this process too, so the two share the GIL as a client on the
  same machine would share the cores). With one tab, and with three, where the tab in front is
  found from the browser window's title (one ``xdotool`` process and one DevTools call per tab).
- Selector click to settled against pixel click to settled, on the same element of the same page:
  ``PageService.click(selector)`` (find the element over DevTools, scroll it into view, map its
  box, check nothing covers it, then the same xdotool click and settle) against
  ``DesktopService.perform(Click)`` at the pixel the selector click used. The test page's Sign in
  and Cancel buttons change its status text, so each click repaints and the settle wait is the
  real one; clicks go signin, cancel, signin, ... and the arms go pixel, selector, selector,
  pixel, ... so each arm clicks both buttons equally often and neither always comes first. The
  pointer glide (a show for the person watching) is off, as in the desktop benchmark's clicks.
- The console and network recording's cost to a page load: ``PageService.navigate`` to the test
  site's ``/load`` (a document, a stylesheet, a script, four images, seven console lines) until
  ``load``, with the recorders attached and detached in turn (``Recorder.attach``, which exists
  for this comparison: Playwright's driver sends console and network events over the pipe only
  while a listener is attached, but for the navigation's own request, which ``goto`` needs, so
  detached they cost next to nothing). Same browser, same tab, same page; the arms alternate
  attached, detached, detached, attached, ...; a pause after each load lets its late events (the
  favicon) arrive outside the timing. The figure is the median of the paired differences (each
  attached load against the detached load next to it, so a drift in the machine's load cancels
  out) as a fraction of the detached loads' median, with a distribution-free 95% confidence
  interval of that median (``median_ci``): one run's difference of the two arms' medians swung
  from +4.7% to +9.5% on the shared 2-core machine. The CPU spent per load (this process, where the
  Playwright client, the policy proxy and the site run, and Playwright's driver) is measured and
  paired too: the machine's load disturbs it far less than the wall time; and, precisely, the CPU
  of the thread where Playwright's client takes the events in (read in that thread before and
  after each load), the one figure that isolates what recording costs this process.

Nothing here asserts a speed; the numbers are reported with their targets (tests.bench).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop.actions import Click
from desktop.models import Target
from desktop.service.desktop import DesktopService
from desktop.session.manager import SessionManager
from tests.fakes.site import TestSite
from tests.fakes.testpage import TestPage

PAUSE_S = 0.1        # after a page load: its late events (the favicon) arrive, untimed but counted
BUTTONS = ("signin", "cancel")


@dataclass
class PageRig:
    """The page layer over a session of ``manager``: the desktop service (local URLs allowed, for
    the test site), the real HTTP app over it, and the test site."""

    desktops: DesktopService
    session_id: str
    site: TestSite
    server: Any = None
    client: Any = None
    _data_dir: Any = None

    @classmethod
    def start(cls, manager: SessionManager, session_id: str, *, http: bool = True) -> PageRig:
        site = TestSite()
        data_dir = tempfile.TemporaryDirectory(prefix="glassdesk-bench-page-")
        if not http:
            return cls(DesktopService(manager, allow_local_urls=True), session_id, site, _data_dir=data_dir)
        import logging

        import httpx2

        from desktop.session.stack import free_port
        from tests.conftest import LiveServer
        from vision.app.service import Glassdesk
        from vision.config import VisionConfig
        from vision.http.app import Settings, create_app

        glassdesk = Glassdesk.build(manager, data_dir=data_dir.name, config=VisionConfig(), allow_local_urls=True)
        port = free_port()
        server = LiveServer(create_app(manager, Settings(token=None, port=port), glassdesk), port=port).__enter__()
        client = httpx2.Client(base_url=server.url, timeout=30)
        logging.getLogger("httpx2").setLevel(logging.WARNING)  # not a line per request in the bench's output
        return cls(glassdesk.desktops, session_id, site, server, client, data_dir)

    @property
    def pages(self):
        return self.desktops.pages

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.server is not None:
            self.server.__exit__(None, None, None)
        self.site.close()
        self._data_dir.cleanup()


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


# --------------------------------------------------------------------------------- page_state


def page_state_times(rig: PageRig, runs: int, tabs: int = 1) -> dict[str, list[float]]:
    """``page_state`` through the service and (when the rig serves HTTP) ``GET /page``, alternating,
    with ``tabs`` tabs open (the extra ones show the site's index and are closed afterwards)."""
    pages, sid = rig.pages, rig.session_id
    opened = [pages.new_tab(sid, rig.site.url("/")).id for _ in range(tabs - 1)]
    samples: dict[str, list[float]] = {"service": [], "http": []}
    try:
        state = pages.state(sid)
        if len(state.tabs) != tabs or sum(t.active for t in state.tabs) != 1:
            raise RuntimeError(f"expected {tabs} tabs, one active; page_state says {state.tabs}")
        path = f"/api/v1/sessions/{sid}/page"
        for i in range(runs + 5):  # the first five warm up
            start = time.perf_counter()
            pages.state(sid)
            service_ms = _ms(start)
            http_ms = None
            if rig.client is not None:
                start = time.perf_counter()
                response = rig.client.get(path)
                http_ms = _ms(start)
                if response.status_code != 200 or len(response.json()["tabs"]) != tabs:
                    raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:300]}")
            if i >= 5:
                samples["service"].append(service_ms)
                if http_ms is not None:
                    samples["http"].append(http_ms)
    finally:
        for tab_id in opened:
            pages.close_tab(sid, tab_id)
    return samples


# --------------------------------------------------------------------------------- clicks


def click_times(rig: PageRig, page: TestPage, runs: int) -> dict[str, Any]:
    """Selector click to settled against pixel click to settled, ``runs`` of each (see the module's
    docstring for the order). Returns the samples in ms, the settle waits, the pixels used, and the
    clicks the page itself counted per button (``landed``) against ``expected``."""
    desktops, pages, sid = rig.desktops, rig.pages, rig.session_id
    session = desktops.session(sid)
    pages.navigate(sid, "goto", page.url, "load", 15_000)
    page.wait_for(lambda e: e.get("type") == "loaded")
    executor = session.executor
    saved_glide = executor.glide_ms
    executor.glide_ms = 0
    points: dict[str, tuple[int, int]] = {}
    out: dict[str, Any] = {"pixel": [], "selector": [], "pixel_settle": [], "selector_settle": [], "moved": 0}
    try:
        for name in BUTTONS * 2:  # warm-up, and the pixel of each button
            acted = pages.click(sid, Target(selector=f"#{name}"))
            points[name] = (acted.x, acted.y)
        time.sleep(0.3)  # the warm-up's own reports reach the page's server before counting starts
        page.clear()
        for i in range(2 * runs):
            name = BUTTONS[i % 2]
            if i % 4 in (0, 3):
                x, y = points[name]
                start = time.perf_counter()
                performed = desktops.perform(sid, Click(x=x, y=y))
                out["pixel"].append(_ms(start))
                out["pixel_settle"].append(float(performed.settle_ms))
            else:
                start = time.perf_counter()
                acted = pages.click(sid, Target(selector=f"#{name}"))
                out["selector"].append(_ms(start))
                out["selector_settle"].append(float(acted.settle_ms))
                out["moved"] += (acted.x, acted.y) != points[name]  # the button moved: not the same pixel
    finally:
        executor.glide_ms = saved_glide
    out["points"] = points
    out["expected"] = {name: runs for name in BUTTONS}
    deadline = time.monotonic() + 5  # the page reports its clicks by fetch: let the last ones arrive
    while True:
        clicks = [e for e in list(page.events) if e.get("type") == "click"]
        out["landed"] = {name: sum(1 for e in clicks if e.get("target") == name) for name in BUTTONS}
        if out["landed"] == out["expected"] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return out


# --------------------------------------------------------------------------------- recording


def _set_recording(rig: PageRig, on: bool) -> None:
    async def switch(pages) -> None:
        pages._recorder.attach(on)

    rig.desktops.session(rig.session_id).stack.browser.call(switch, 5)


def driver_pids() -> list[int]:
    """Playwright's driver: the node process this process started (Chromium is its child)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
                comm = Path(f"/proc/{entry.name}/comm").read_text()
            except OSError:
                continue
            if int(stat[1]) == os.getpid() and comm.startswith("node"):
                found.append(int(entry.name))
    return found


def _cpu_ms(pids: list[int]) -> tuple[float, float]:
    """CPU time so far, in ms: this process (every thread: the Playwright client's loop, the policy
    proxy, the site's server) and the processes ``pids`` (user + system, in clock ticks)."""
    from tests.bench_scale import cpu_ticks

    ticks = sum(cpu_ticks(pid)[0] for pid in pids)
    return time.process_time() * 1000, ticks * 1000 / os.sysconf("SC_CLK_TCK")


def _loop_cpu_ms(rig: PageRig) -> float:
    """CPU time so far of the thread running Playwright's client (desktop.browser.chromium's loop), in ms:
    where recording's events are taken in. Read in that thread, precisely (not in clock ticks)."""
    async def now(pages) -> float:
        return time.thread_time() * 1000

    return rig.desktops.session(rig.session_id).stack.browser.call(now, 5)


def load_times(rig: PageRig, runs: int) -> dict[str, Any]:
    """Loads of the site's /load page with the console and network recorders attached and
    detached, ``runs`` of each: wall times, and the CPU each arm spent per load (mean ms, this
    process and Playwright's driver apart), which the machine's load disturbs far less than the
    wall time. Also what each arm added to the session's record per load, which shows the switch
    does what it says."""
    pages, sid = rig.pages, rig.session_id
    record = rig.desktops.session(sid).stack.record
    url = rig.site.url("/load")
    driver = driver_pids()
    out: dict[str, Any] = {"attached": [], "detached": [], "cpu_attached": [], "cpu_detached": [],
                           "loop_attached": [], "loop_detached": []}
    added = {"attached": [0, 0], "detached": [0, 0]}  # network entries, console entries
    cpu = {"attached": [0.0, 0.0], "detached": [0.0, 0.0]}  # this process, the driver
    attached = True
    try:
        for i in range(2 * runs + 4):  # the first four warm up
            want = i % 4 in (0, 3)
            if want != attached:
                _set_recording(rig, want)
                attached = want
                time.sleep(PAUSE_S)  # the driver has the switch before the load
            arm = "attached" if want else "detached"
            network, console = record.network.last_seq, record.console.last_seq
            loop = _loop_cpu_ms(rig)
            own, theirs = _cpu_ms(driver)
            start = time.perf_counter()
            pages.navigate(sid, "goto", url, "load", 15_000)
            elapsed = _ms(start)
            time.sleep(PAUSE_S)  # the load's late events are handled, and counted with it
            own_after, theirs_after = _cpu_ms(driver)
            loop_after = _loop_cpu_ms(rig)
            if i >= 4:
                out[arm].append(elapsed)
                added[arm][0] += record.network.last_seq - network
                added[arm][1] += record.console.last_seq - console
                cpu[arm][0] += own_after - own
                cpu[arm][1] += theirs_after - theirs
                out[f"cpu_{arm}"].append(own_after - own + theirs_after - theirs)
                out[f"loop_{arm}"].append(loop_after - loop)
    finally:
        if not attached:
            _set_recording(rig, True)
    out["per_load"] = {arm: {"network": n / runs, "console": c / runs} for arm, (n, c) in added.items()}
    out["cpu_ms"] = {arm: {"this process": own / runs, "playwright driver": theirs / runs}
                     for arm, (own, theirs) in cpu.items()}
    # Adjacent loads (attached, detached), (detached, attached), ... paired: the median of their
    # differences is steadier than the difference of the two medians on a machine whose load drifts.
    out["paired_ms"] = [a - d for a, d in zip(out["attached"], out["detached"])]
    out["paired_cpu_ms"] = [a - d for a, d in zip(out["cpu_attached"], out["cpu_detached"])]
    out["paired_diff_ms"] = statistics.median(out["paired_ms"])
    out["paired_ci_ms"] = median_ci(out["paired_ms"])
    out["paired_cpu_diff_ms"] = statistics.median(out["paired_cpu_ms"])
    out["paired_cpu_ci_ms"] = median_ci(out["paired_cpu_ms"])
    out["paired_loop_ms"] = [a - d for a, d in zip(out["loop_attached"], out["loop_detached"])]
    out["paired_loop_ci_ms"] = median_ci(out["paired_loop_ms"])
    return out


def median_ci(samples: list[float]) -> tuple[float, float]:
    """A distribution-free ~95% confidence interval of the median (pure): the order statistics
    around the middle that a sign test gives, by the normal approximation to the binomial. It
    assumes nothing about the shape of the spread, which on a loaded machine has a long tail."""
    ordered = sorted(samples)
    n = len(ordered)
    if n < 6:
        return ordered[0], ordered[-1]
    half = 1.96 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half) - 1)     # 1-based rank n/2 - half, as an index
    high = min(n - 1, math.ceil(n / 2 + 1 + half) - 1)
    return ordered[low], ordered[high]


# --------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench_page", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="samples per figure and arm (default 50)")
    args = parser.parse_args(argv)

    from tests.bench_loop import measure_floor

    manager = SessionManager(max_sessions=1)
    test_page = TestPage()
    rig = None
    try:
        session = manager.create("bench-page")
        rig = PageRig.start(manager, session.id)
        floor = measure_floor(session, args.runs)["floor_ms"]
        results = {f"page_state {tabs} tab(s)": page_state_times(rig, args.runs, tabs) for tabs in (1, 3)}
        clicks = click_times(rig, test_page, args.runs)
        loads = load_times(rig, args.runs)
    finally:
        if rig is not None:
            rig.close()
        manager.close()
        test_page.close()
    med = statistics.median
    print(f"floor {floor:.1f} ms")
    for label, samples in results.items():
        for door, values in samples.items():
            print(f"{label:<22} {door:<8} median {med(values):6.1f} ms  (target <= 20 ms)")
    ratio = med(clicks["selector"]) / med(clicks["pixel"])
    print(f"pixel click    median {med(clicks['pixel']):6.1f} ms (settle {med(clicks['pixel_settle']):.0f})")
    print(f"selector click median {med(clicks['selector']):6.1f} ms (settle {med(clicks['selector_settle']):.0f}): "
          f"{ratio:.2f}x (target <= 1.5x); landed {clicks['landed']} of {clicks['expected']}")
    detached = med(loads["detached"])
    low, high = loads["paired_ci_ms"]
    print(f"load attached {med(loads['attached']):.1f} ms, detached {detached:.1f} ms; median of paired "
          f"differences {loads['paired_diff_ms']:+.1f} ms = {loads['paired_diff_ms'] / detached:+.1%} (target <= 5%; "
          f"95% CI {low / detached:+.1%} .. {high / detached:+.1%}); per load {loads['per_load']}; "
          f"CPU per load {loads['cpu_ms']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
