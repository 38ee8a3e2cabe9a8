"""Issue 14's scale figures (memory, concurrency, typing): ``python -m tests.bench_scale WHAT`` prints
them; tests.bench imports them for `make bench` (section "Scale").

    python -m tests.bench_scale memory        # one idle session's PSS, per process, after 15 s idle
    python -m tests.bench_scale creates       # 9 concurrent creates against one alone
    python -m tests.bench_scale load          # a click's latency under a 10-client load over 10 sessions
    python -m tests.bench_scale typing        # 2,000 and 20,000 characters typed, checked exact
    python -m tests.bench_scale warm          # creates cold, then claims from a warm pool (--warm), one and 9
    python -m tests.bench_scale warm-memory   # one warm desktop's RSS, PSS and USS after 15 s in the pool

What is measured, on real sessions (desktop.session.manager.SessionManager):

- Memory: the PSS of every process one more session adds (Xvfb, dbus, XFCE's parts, Chromium's
  processes by ``--type``, x11vnc), after the session has sat idle for 15 s; PSS splits the pages
  processes share, so the sum is the session's real footprint. Playwright's driver (one node
  process for every session of the server) is shown apart: it is not added by one more session.
- Concurrency: 9 sessions created at once (threads, as 9 HTTP requests would be) against one
  created alone just before, on the same machine. Then, over 10 ready sessions, 10 clients each
  clicking its own session's page as fast as the answers come, over real HTTP (the app of
  ``vision.http.app.create_app`` on uvicorn on loopback, clients in this process): a click's latency to
  its answer, p50 and p99.
- Warm pool: the same creates (one alone, 9 at once) with desktops started ahead
  (``SessionManager.keep_warm``: a pool of 1, then of 9, filled one start at a time before the
  creates), beside the cold figures of the same run; each claimed desktop is checked to have been
  up before its create was called. The pool's fill time (9 starts, one after another) is shown too.
- Typing: ``Type`` actions of 2,000 and 20,000 characters (letters, digits, punctuation, Unicode,
  newlines and tabs) into the test page's textarea; the text the page holds afterwards is compared
  with what was sent: a figure of wrong typing measures nothing.

The BEFORE figures were measured by this module on the code of commit 6bc3bc6 (the constants
below), on the 2-core machine of that time, loaded (see BEFORE); the bench prints them beside
this run's figures, which a later machine or a quieter hour moves as much as any change does.
Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

# ----------------------------------------------------------------------------- before (6bc3bc6)

BEFORE_COMMIT = "6bc3bc6"
# Measured by this module (python -m tests.bench_scale ...) on the code of 6bc3bc6, on 2026-11-23
# on the shared 2-core machine while seven other helpers ran sessions and tests: wall times carry
# the load (1-minute load average in the comments), as this run's may; the run's own load is in
# the report's machine section. The figures are from the quieter of two runs.
BEFORE = {
    "pss_mb": 309.0,          # 307 and 311 in two runs, beside one other session of its own (4 X servers in all)
    "uss_mb": 227.0,          # 227 in both
    "create_alone_s": 2.13,   # load 5-8 (6.77 s in a run at load 17)
    "creates_median_s": 12.14,  # 9 at once, 9.5-14.3 s each, load 8-11 (19.6 s median, 17.0-21.0, at load 17-27)
    "creates_max_s": 14.32,
    "click_p50_ms": 355.0,    # 820 clicks in 30 s over 10 sessions, clients in their own process, load 5-8
    "click_p90_ms": 481.0,    # (a run with the clients in the server's process, at load 19: 399 / 538 / 646)
    "click_p99_ms": 625.0,
    "type_2000_s": 16.13,     # exact; load 7-10 (26.8 s at load 15; issue 14 saw 14.6 s)
}
# 20,000 characters were not typed on the old code: at its 12 ms a character and more, they take
# over 4 minutes.
BEFORE_MEMORY: dict[str, tuple[int, float, float]] = {  # process kind: (count, PSS MB, USS MB)
    "chromium browser": (3, 53.8, 41.7),
    "Xvfb": (1, 51.8, 42.1),
    "chromium renderer (the browser's own WebUI)": (1, 43.3, 35.9),
    "chromium renderer": (2, 23.4, 13.8),
    "chromium gpu-process": (1, 21.8, 4.4),
    "chromium utility network": (1, 18.8, 16.6),
    "x11vnc": (1, 18.3, 18.0),
    "xfce4-session": (1, 17.8, 15.6),
    "xfdesktop": (1, 14.9, 14.6),
    "chromium zygote (unsandboxed)": (1, 8.9, 0.6),
    "xfwm4": (1, 8.8, 7.8),
    "chromium zygote": (2, 6.7, 0.4),
    "xfce4-panel": (1, 6.6, 6.1),
    "xfsettingsd": (1, 5.7, 5.4),
    "chromium utility storage": (1, 4.4, 1.4),
    "xfconfd": (1, 0.9, 0.9),
    "at-spi-bus-laun": (1, 0.9, 0.8),
    "dbus-daemon": (1, 0.6, 0.5),
}

IDLE_S = 15.0


# ------------------------------------------------------------------------------------- memory

def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _pss_kb(pid: int) -> int:
    return _memory_kb(pid)[0]


def _memory_kb(pid: int) -> tuple[int, int]:
    """(PSS, USS) of one process in kB. USS, its private pages, is what it alone costs: unlike PSS
    it does not shrink as other sessions (the other helpers' too) map the same libraries."""
    pss = uss = 0
    for line in _read(f"/proc/{pid}/smaps_rollup").splitlines():
        if line.startswith("Pss:"):
            pss = int(line.split()[1])
        elif line.startswith(("Private_Clean:", "Private_Dirty:")):
            uss += int(line.split()[1])
    return pss, uss


def process_kind(name: str, cmdline: list[str]) -> str:
    """What a session's process is, for the memory table (pure): Chromium's by its ``--type`` and,
    for utility processes, the service they run."""
    if name.startswith("chrom") or (cmdline and os.path.basename(cmdline[0]).startswith("chrom")):
        kind = next((a.split("=", 1)[1] for a in cmdline if a.startswith("--type=")), "browser")
        if kind == "utility":
            sub = next((a.split("=", 1)[1] for a in cmdline if a.startswith("--utility-sub-type=")), "")
            kind = f"utility {sub.split('.')[0] or '?'}"
        if kind == "renderer" and "--top-chrome-webui" in cmdline:
            kind = "renderer (the browser's own WebUI)"
        if kind == "zygote" and "--no-zygote-sandbox" in cmdline:
            kind = "zygote (unsandboxed)"
        return f"chromium {kind}"
    return name


def session_memory(session) -> dict[str, tuple[int, int, int]]:
    """{process kind: (count, PSS kB, USS kB)} of every process of one session."""
    from tests.bench import _leaders, session_pids

    pids, _ = session_pids(session.stack.tag, _leaders(session))
    table: dict[str, tuple[int, int, int]] = {}
    for pid in pids:
        name = _read(f"/proc/{pid}/comm").strip()
        cmdline = _read(f"/proc/{pid}/cmdline").replace("\0", " ").split()
        kind = process_kind(name, cmdline)
        count, pss, uss = table.get(kind, (0, 0, 0))
        more_pss, more_uss = _memory_kb(pid)
        table[kind] = (count + 1, pss + more_pss, uss + more_uss)
    return table


def driver_pss_kb() -> int:
    """PSS of Playwright's driver (node), shared by every session of this process."""
    total = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            cmd = _read(f"/proc/{entry.name}/cmdline")
            if "playwright" in cmd and "run-driver" in cmd and _read(f"/proc/{entry.name}/status").find(
                    f"PPid:\t{os.getpid()}\n") >= 0:
                total += _pss_kb(int(entry.name))
    return total


def measure_memory(manager, idle_s: float = IDLE_S, session_id: str = "scale-idle") -> dict:
    """One more session's memory: created beside those ``manager`` already runs (the bench's own
    session at least, so libraries shared with it count half, as for any session after the first)."""
    session = manager.create(session_id)
    try:
        time.sleep(idle_s)
        table = session_memory(session)
    finally:
        manager.delete(session_id)
    return {"table": table, "total_kb": sum(p for _, p, _ in table.values()),
            "uss_kb": sum(u for _, _, u in table.values()), "driver_kb": driver_pss_kb()}


def print_memory(result: dict) -> None:
    rows = sorted(result["table"].items(), key=lambda kv: -kv[1][1])
    for kind, (count, pss, uss) in rows:
        print(f"{kind:45s} {count:3d} {pss / 1024:8.1f} MB {uss / 1024:8.1f} MB")
    print(f"{'total':45s} {sum(c for c, _, _ in result['table'].values()):3d} {result['total_kb'] / 1024:8.1f} MB "
          f"{result['uss_kb'] / 1024:8.1f} MB")
    print(f"{'(playwright driver, shared)':45s}     {result['driver_kb'] / 1024:8.1f} MB")


# --------------------------------------------------------------------------------- concurrency

def _timed_create(manager, session_id: str) -> float:
    start = time.perf_counter()
    manager.create(session_id)
    return time.perf_counter() - start


def measure_creates(manager, concurrent: int = 9, prefix: str = "scale-c") -> dict:
    """One create alone, then ``concurrent`` at once (threads, as that many requests would be).
    The sessions made at once are left running, for ``measure_click_load``; the lone one is deleted."""
    from concurrent.futures import ThreadPoolExecutor

    alone = _timed_create(manager, f"{prefix}-alone")
    cpu_s = start_cpu_s(manager.get(f"{prefix}-alone"))
    manager.delete(f"{prefix}-alone")
    time.sleep(1)  # its teardown's last processes exit
    with ThreadPoolExecutor(concurrent) as pool:
        futures = [pool.submit(_timed_create, manager, f"{prefix}-{i}") for i in range(concurrent)]
        together = [f.result() for f in futures]
    return {"alone_s": alone, "concurrent_s": together, "ids": [f"{prefix}-{i}" for i in range(concurrent)],
            "start_cpu_s": cpu_s}


def _wait_warm(manager, n: int, timeout_s: float) -> float:
    start = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    while manager.warm_ready < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the warm pool has {manager.warm_ready} of {n} after {timeout_s:.0f} s")
        time.sleep(0.05)
    return time.perf_counter() - start


def measure_warm_creates(manager, concurrent: int = 9, prefix: str = "scale-w", fill_timeout_s: float = 600) -> dict:
    """``measure_creates`` with a warm pool: one create claiming from a pool of 1, then ``concurrent``
    at once claiming from a pool of as many (filled one start at a time before, its time kept).
    Whether every claimed desktop was up before its create was called, as a claim's is. The
    sessions are deleted and the pool emptied (keep_warm(0)) before it returns."""
    from concurrent.futures import ThreadPoolExecutor

    manager.max_sessions = max(manager.max_sessions, len(manager.sessions) + concurrent + 1)
    claimed: list[bool] = []

    def timed_claim(session_id: str) -> float:
        asked = time.monotonic()
        seconds = _timed_create(manager, session_id)
        claimed.append(0 < manager.get(session_id).stack.started_at < asked)
        return seconds

    ids = [f"{prefix}-{i}" for i in range(concurrent)]
    try:
        manager.keep_warm(1)
        _wait_warm(manager, 1, fill_timeout_s)
        alone = timed_claim(f"{prefix}-alone")
        manager.delete(f"{prefix}-alone")
        manager.keep_warm(concurrent)
        fill_s = _wait_warm(manager, concurrent, fill_timeout_s)
        time.sleep(1)  # the last start's after-work (Chromium's first idle tasks) is not the claims'
        with ThreadPoolExecutor(concurrent) as pool:
            together = list(pool.map(timed_claim, ids))
    finally:
        manager.keep_warm(0)
        for sid in [f"{prefix}-alone", *ids]:
            if sid in manager.sessions:
                manager.delete(sid)
    return {"alone_s": alone, "concurrent_s": together, "fill_s": fill_s, "all_claimed": all(claimed),
            "claims": len(claimed)}


def measure_warm_memory(manager, idle_s: float = IDLE_S) -> dict:
    """What one warm desktop holds: RSS, PSS and USS (kB) summed over its processes after it has sat
    in the pool ``idle_s`` seconds (a pool of 1 beside the sessions ``manager`` runs). RSS counts
    the shared libraries whole in every process, so it overstates what one more costs; USS is what it
    alone adds."""
    from types import SimpleNamespace

    from tests.bench import _leaders, session_pids

    manager.keep_warm(1)
    try:
        _wait_warm(manager, 1, 300)
        time.sleep(idle_s)
        pooled = SimpleNamespace(stack=manager.pool.ready[0].item)
        pids, _ = session_pids(pooled.stack.tag, _leaders(pooled))
        rss = pss = uss = 0
        for pid in pids:
            for line in _read(f"/proc/{pid}/smaps_rollup").splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
            more_pss, more_uss = _memory_kb(pid)
            pss, uss = pss + more_pss, uss + more_uss
    finally:
        manager.keep_warm(0)
    return {"processes": len(pids), "rss_kb": rss, "pss_kb": pss, "uss_kb": uss}


def cpu_ticks(pid: int) -> tuple[int, str]:
    """(user + system clock ticks, command name) of one process; (0, '') when it is gone."""
    raw = _read(f"/proc/{pid}/stat")
    fields = raw.rsplit(")", 1)[-1].split()
    if len(fields) <= 12:
        return 0, ""
    return int(fields[11]) + int(fields[12]), raw[raw.index("(") + 1:raw.rindex(")")]


def start_cpu_s(session) -> float:
    """CPU seconds the processes of a session just started have used (user + system): what its
    start cost the machine's cores, but for the short-lived helpers (wmctrl, xdotool) and the driver."""
    from tests.bench import _leaders, session_pids

    ticks = sum(cpu_ticks(pid)[0] for pid in session_pids(session.stack.tag, _leaders(session))[0])
    return ticks / os.sysconf("SC_CLK_TCK")


def measure_click_load(manager, session_ids: list[str], page, seconds: float = 30.0) -> dict:
    """``len(session_ids)`` clients, each clicking its own session's test page over real HTTP
    (``POST .../desktop/click``, no screenshot) as fast as the answers come, for ``seconds``.
    Clicks alternate between the page's two buttons; each answer's latency is kept."""
    from tests.bench import _measure_viewport, _page_point
    from tests.bench_page import PageRig

    rig = PageRig.start(manager, session_ids[0])
    try:
        targets = {}
        for sid in session_ids:
            session = manager.get(sid)
            session.executor.glide_ms = 0  # the mechanism's own cost, as the other click figures
            page.clear()
            session.run_settled(lambda session=session: session.open_url(page.url))
            page.wait_for(lambda e: e.get("type") == "loaded")
            viewport = _measure_viewport(session, page)
            targets[sid] = [_page_point(viewport, 1240, 146), _page_point(viewport, 1540, 146)]
        # The clients run in a process of their own, as clients of a server do: in this one they
        # would compete with the server for the GIL and add their own time to every answer.
        import json
        import subprocess

        spec = json.dumps({"url": rig.server.url, "seconds": seconds, "targets": targets})
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        done = subprocess.run([sys.executable, "-m", "tests.bench_scale", "clients"], input=spec, text=True,
                              capture_output=True, timeout=seconds + 120, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"the load's clients failed: {done.stderr[-2000:]}")
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        latencies, parts, errors = answer["latencies"], answer["parts"], answer["errors"]
    finally:
        rig.close()
    every = [ms for samples in latencies.values() for ms in samples]
    return {"latencies": every, "per_session": {k: len(v) for k, v in latencies.items()}, "errors": errors,
            "seconds": seconds, "parts": parts}


def run_clients(spec: dict) -> dict:
    """The load's clients (``python -m tests.bench_scale clients`` < spec): one thread per session,
    each clicking its session's two buttons in turn over HTTP as fast as the answers come."""
    import threading

    import httpx2

    targets, seconds = spec["targets"], spec["seconds"]
    latencies: dict[str, list[float]] = {sid: [] for sid in targets}
    # Where each answer's time went: the xdotool click, the settle wait, and the rest (the page
    # summary over the browser's DevTools pipe, the thread pool, JSON, HTTP).
    parts: dict[str, list[float]] = {"exec": [], "settle": [], "rest": []}
    errors: list[str] = []
    stop = time.monotonic() + seconds

    def client(sid: str) -> None:
        with httpx2.Client(base_url=spec["url"], timeout=60) as http:
            i = 0
            while time.monotonic() < stop:
                x, y = targets[sid][i % 2]
                start = time.perf_counter()
                response = http.post(f"/api/v1/sessions/{sid}/desktop/click", json={"x": x, "y": y})
                elapsed = (time.perf_counter() - start) * 1000
                if response.status_code != 200:
                    errors.append(f"{sid}: {response.status_code} {response.text[:200]}")
                else:
                    latencies[sid].append(elapsed)
                    answer = response.json()
                    parts["exec"].append(answer["duration_ms"])
                    parts["settle"].append(answer["settle_ms"])
                    parts["rest"].append(elapsed - answer["duration_ms"] - answer["settle_ms"])
                i += 1

    threads = [threading.Thread(target=client, args=(sid,)) for sid in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"latencies": latencies, "parts": parts, "errors": errors}


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (pure)."""
    import math

    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# --------------------------------------------------------------------------------------- typing

def typing_text(length: int, seed: int = 14) -> str:
    """A text of ``length`` characters (pure): mostly ASCII, with Latin-1 and other Unicode
    characters, newlines and tabs (5% in all)."""
    import random

    rnd = random.Random(seed)
    pool = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?-_()[]{}'\"/\\@#$%^&*+=<>|~`"
    rare = "\n\téüßçñø✓日本語€Ωπ"
    return "".join(rnd.choice(rare) if rnd.random() < 0.05 else rnd.choice(pool) for _ in range(length))


def measure_typing(session, page, length: int, viewport=None) -> dict:
    """Type ``length`` characters into the test server's /notes textarea (Session.perform(Type),
    settle included) and read back what the textarea holds."""
    from desktop.actions import Click, Key, Type

    page.clear()
    session.run_settled(lambda: session.open_url(page.notes_url))
    page.wait_for(lambda e: e.get("type") == "loaded")
    session.perform(Click(x=600, y=400))  # inside the textarea (40..1240 x 40..740 of the page)
    text = typing_text(length)
    start = time.perf_counter()
    session.perform(Type(text=text))
    seconds = time.perf_counter() - start
    page.clear()
    session.perform(Key(keys=["F9"]))
    value = page.wait_for(lambda e: e.get("type") == "notes", 60)["value"]
    return {"seconds": seconds, "exact": value == text, "typed": len(value), "sent": len(text)}


# ------------------------------------------------------------------------------- make bench

def _before(key: str, unit: str) -> str:
    return f"before ({BEFORE_COMMIT}): {BEFORE[key]:g} {unit}"


def scale_memory(bench) -> list:
    """One more idle session's PSS and USS, per process kind (a detail table), before and after."""
    from tests.bench import Row

    result = measure_memory(bench.manager, IDLE_S, "bench-scale-idle")
    table = result["table"]
    kinds = sorted(set(table) | set(BEFORE_MEMORY), key=lambda k: -max(table.get(k, (0, 0, 0))[1] / 1024,
                                                                         BEFORE_MEMORY.get(k, (0, 0, 0))[1]))
    rows = []
    for kind in kinds:
        count, pss, uss = table.get(kind, (0, 0, 0))
        b_count, b_pss, b_uss = BEFORE_MEMORY.get(kind, (0, 0.0, 0.0))
        rows.append([kind, str(count), f"{pss / 1024:.1f}", f"{uss / 1024:.1f}", str(b_count), f"{b_pss:.1f}",
                     f"{b_uss:.1f}"])
    rows.append(["all", str(sum(c for c, _, _ in table.values())), f"{result['total_kb'] / 1024:.1f}",
                 f"{result['uss_kb'] / 1024:.1f}", str(sum(c for c, _, _ in BEFORE_MEMORY.values())),
                 f"{BEFORE['pss_mb']:g}", f"{BEFORE['uss_mb']:g}"])
    bench.detail(
        f"One more idle session's memory by process (after {IDLE_S:g} s idle), now and before ({BEFORE_COMMIT})",
        ["process", "n", "PSS MB", "USS MB",
         f"n {BEFORE_COMMIT}", f"PSS MB {BEFORE_COMMIT}", f"USS MB {BEFORE_COMMIT}"],
        rows,
        note="Measured by tests/bench_scale.py beside the bench's own session. PSS splits the pages processes share "
             "(libraries, Chromium's binary) between every process mapping them, this machine's other sessions "
             "included, so it drops as more sessions run; USS (private pages) is what this session alone adds and "
             "does not depend on them. Playwright's driver (one node process for every session of the server, "
             f"{result['driver_kb'] / 1024:.0f} MB PSS now) is not counted: one more session does not add it. What "
             "went: the omnibox's WebUI renderer, the spare renderer and the network service's own process "
             "(Chromium features), Mesa's GLX driver "
             "and its LLVM in Xvfb and xfce4-session (no GLX), xfdesktop (the backdrop painted on the root "
             "window). What stays and why: x11vnc holds a copy of the screen (18 MB USS) for the live view; "
             "Chromium's browser process, GPU process (software compositing) and zygotes; Xvfb's framebuffer "
             "and pixmaps.")
    pss, uss = result["total_kb"] / 1024, result["uss_kb"] / 1024
    bench.findings.append(
        f"Idle memory (issue 14): one more session adds {pss:.0f} MB PSS ({BEFORE['pss_mb']:g} MB before, "
        f"{BEFORE_COMMIT}) and {uss:.0f} MB USS ({BEFORE['uss_mb']:g} MB before).")
    return [
        Row(f"one more idle session: PSS of its processes after {IDLE_S:g} s idle", "MB", [pss], "<= 300 MB",
            pss <= 300, note=_before("pss_mb", "MB")),
        Row("  its USS (private pages: what it alone adds, whatever else runs)", "MB", [uss],
            note=_before("uss_mb", "MB")),
    ]


def scale_concurrency(bench) -> list:
    """9 concurrent creates against one alone, then a click's latency under 10 clients over 10 sessions."""
    from tests.bench import Row

    floor_ms = bench.floor_ms or float("nan")
    bench.manager.max_sessions = max(bench.manager.max_sessions, 12)
    result = measure_creates(bench.manager, prefix="bench-scale")
    bench.cold_creates = result  # for scale_warm's ratios
    alone, together = result["alone_s"], result["concurrent_s"]
    ids = result["ids"]
    try:
        load = measure_click_load(bench.manager, [bench.session.id, *ids], bench.page, seconds=LOAD_S)
    finally:
        for sid in ids:
            bench.manager.delete(sid)
    latencies, parts = load["latencies"], load["parts"]
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    ratio = max(together) / alone
    if load["errors"]:
        bench.findings.append(f"WARNING (click load): {len(load['errors'])} answers were not 200; first: "
                              f"{load['errors'][:2]}.")
    bench.findings.append(
        f"Concurrency (issue 14): 9 creates at once took {statistics.median(together):.1f} s each (median; "
        f"{ratio:.1f}x the {alone:.1f} s of one alone at worst). The lone start cost {result['start_cpu_s']:.1f} s "
        f"of CPU in its own processes (Xvfb, XFCE, Chromium; /proc), so 9 need about "
        f"{9 * result['start_cpu_s']:.0f} CPU-seconds: on {os.cpu_count()} cores that is at least "
        f"{9 * result['start_cpu_s'] / (os.cpu_count() or 1):.1f} s for the last of them whatever the order of "
        "starting, against a 2x-alone goal of "
        f"{2 * alone:.1f} s; only sessions started before they are asked for (a warm pool, costing an idle "
        "session's memory each: the warm-pool rows) meet it. "
        f"Under the click load ({len(latencies)} clicks in {LOAD_S:g} s over 10 sessions) each answer's median "
        f"split: xdotool {statistics.median(parts['exec']):.0f} ms, settle {statistics.median(parts['settle']):.0f} "
        f"ms, the rest {statistics.median(parts['rest']):.0f} ms (page summary, thread pool, JSON, HTTP). No "
        "lock is shared between sessions on that path (the page layer's summary lock is held for a count); "
        "each request holds one of the thread pool's 40 threads for its action and settle, 10 here.")
    return [
        Row("create one session alone (SessionManager.create)", "s", [alone], note=_before("create_alone_s", "s")),
        Row("9 sessions created at once, each", "s", together, "<= 2x alone", ratio <= 2,
            note=f"{statistics.median(together) / alone:.1f}x alone (median), {ratio:.1f}x at worst; before: "
                 f"{BEFORE['creates_median_s']:g} s median, {BEFORE['creates_max_s']:g} s at worst"),
        Row(f"click under a 10-client load over 10 sessions, HTTP answer ({LOAD_S:g} s)", "ms", latencies,
            "p50 <= 200 ms, p99 <= 800 ms", p50 <= 200 and p99 <= 800,
            note=f"p99 {p99:.0f} ms; p50 {p50 / floor_ms:.1f}x the floor; before ({BEFORE_COMMIT}): p50 "
                 f"{BEFORE['click_p50_ms']:g}, p99 {BEFORE['click_p99_ms']:g} ms"),
        Row("  of which the xdotool click", "ms", parts["exec"]),
        Row("  of which the settle wait", "ms", parts["settle"]),
        Row("  the rest (the page's reads before the input, page summary, thread pool, JSON, HTTP)", "ms",
            parts["rest"], "<= 20 ms p50", statistics.median(parts["rest"]) <= 20),
    ]


def warm_ratios(cold: dict, warm: dict) -> dict:
    """The warm pool's figures against the cold ones (pure): each claim's time over a cold create's,
    alone and 9 at once (p95, and median), and the 9's worst against one cold create alone (the
    issue's goal: 9 at once within 2x one alone)."""
    cold_9, warm_9 = cold["concurrent_s"], warm["concurrent_s"]
    return {
        "alone": warm["alone_s"] / cold["alone_s"],
        "p95": percentile(warm_9, 0.95) / percentile(cold_9, 0.95),
        "median": statistics.median(warm_9) / statistics.median(cold_9),
        "worst_vs_cold_alone": max(warm_9) / cold["alone_s"],
    }


def print_warm(cold: dict, warm: dict) -> None:
    r = warm_ratios(cold, warm)
    for name, figures in (("cold", cold), ("warm", warm)):
        nine = figures["concurrent_s"]
        print(f"{name}: alone {figures['alone_s']:.3f} s; 9 at once: median {statistics.median(nine):.3f} s, "
              f"p95 {percentile(nine, 0.95):.3f} s, each {[round(t, 3) for t in nine]}", flush=True)
    print(f"warm / cold: alone {r['alone']:.4f}x, 9 at once p95 {r['p95']:.4f}x (median {r['median']:.4f}x); "
          f"the 9's worst is {r['worst_vs_cold_alone']:.3f}x one cold create alone; pool of 9 filled in "
          f"{warm['fill_s']:.1f} s; every claim's desktop up before its create: {warm['all_claimed']}", flush=True)


def scale_warm(bench) -> list:
    """Creates claiming from a warm pool (glassdesk up --warm), one and 9 at once, against the cold
    creates of scale_concurrency in the same run."""
    from tests.bench import Row

    cold = getattr(bench, "cold_creates", None) or measure_creates(bench.manager, prefix="bench-warm-cold")
    for sid in cold.get("ids", []):
        if sid in bench.manager.sessions:
            bench.manager.delete(sid)
    warm = measure_warm_creates(bench.manager, prefix="bench-warm")
    r = warm_ratios(cold, warm)
    nine = warm["concurrent_s"]
    if not warm["all_claimed"]:
        bench.findings.append("WARNING (warm pool): a create started its desktop instead of claiming one.")
    bench.findings.append(
        f"Warm pool (issue 22): with desktops started ahead a create is a claim: {warm['alone_s'] * 1000:.0f} ms "
        f"alone ({r['alone']:.3f}x the cold {cold['alone_s']:.2f} s), and 9 at once "
        f"{percentile(nine, 0.95) * 1000:.0f} ms each at p95 ({r['p95']:.3f}x the cold p95 of "
        f"{percentile(cold['concurrent_s'], 0.95):.1f} s). The pool of 9 took {warm['fill_s']:.0f} s to fill, one "
        "start at a time so that filling never takes both cores from the sessions in use; each warm desktop holds "
        "an idle session's memory (the memory rows above).")
    return [
        Row("create one session from a warm pool (a claim)", "s", [warm["alone_s"]],
            note=f"{r['alone']:.3f}x a cold create alone ({cold['alone_s']:.2f} s, this run)"),
        Row("9 sessions created at once from a warm pool of 9, each", "s", nine, "<= 2x alone",
            r["worst_vs_cold_alone"] <= 2,
            note=f"p95 {percentile(nine, 0.95) * 1000:.0f} ms = {r['p95']:.3f}x the cold p95 "
                 f"({percentile(cold['concurrent_s'], 0.95):.1f} s); median {r['median']:.3f}x the cold median; "
                 f"worst {r['worst_vs_cold_alone']:.3f}x a cold create alone; every desktop up before its "
                 f"create: {warm['all_claimed']}"),
        Row("  filling the pool of 9, one start at a time", "s", [warm["fill_s"]]),
    ]


def scale_typing(bench) -> list:
    """2,000 and 20,000 characters typed into a textarea, checked exact."""
    from tests.bench import Row

    floor_ms = bench.floor_ms or float("nan")
    rows = []
    for length in (2000, 20000):
        result = measure_typing(bench.session, bench.page, length)
        seconds, exact = result["seconds"], result["exact"]
        before = (f"before ({BEFORE_COMMIT}): {BEFORE['type_2000_s']:g} s" if length == 2000 else
                  f"before ({BEFORE_COMMIT}): over 4 min (12 ms a character and more)")
        note = (f"{'exact' if exact else 'NOT EXACT: ' + str(result['typed']) + ' of ' + str(result['sent'])}; "
                f"{seconds * 1000 / length:.2f} ms a character = {seconds * 1000 / length / floor_ms:.2f}x the floor; "
                + before)
        target = "<= 10 s, exact" if length == 20000 else ""
        passed = (seconds <= 10 and exact) if length == 20000 else None
        rows.append(Row(f"type {length:,} characters (Unicode, newlines, tabs), settled", "s", [seconds], target,
                        passed, note=note))
        if not exact:
            bench.findings.append(f"WARNING (typing): {length} characters sent, {result['typed']} arrived or differ.")
    return rows


LOAD_S = 30.0


# ------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    from desktop.session.manager import SessionManager

    parser = argparse.ArgumentParser(prog="python -m tests.bench_scale", description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["memory", "creates", "warm", "warm-memory", "load", "typing", "clients"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30.0, help="the click load's length")
    parser.add_argument("--lengths", type=int, nargs="+", default=[2000, 20000], help="texts to type")
    args = parser.parse_args(argv)
    if args.what == "clients":  # the click load's clients, in their own process (measure_click_load)
        import json

        print(json.dumps(run_clients(json.loads(sys.stdin.read()))))
        return 0
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    manager = SessionManager(max_sessions=12)
    try:
        manager.create("scale-base")  # the session every measurement runs beside
        if args.what == "memory":
            totals = []
            for i in range(args.repeat):
                result = measure_memory(manager, session_id=f"scale-idle-{i}")
                print_memory(result)
                totals.append(result["total_kb"] / 1024)
            print("totals MB:", [round(t) for t in totals], "median", round(statistics.median(totals)))
        elif args.what == "creates":
            for i in range(args.repeat):
                result = measure_creates(manager, prefix=f"scale-c{i}")
                together = result["concurrent_s"]
                print(f"alone {result['alone_s']:.2f} s; 9 at once: median {statistics.median(together):.2f} s, "
                      f"max {max(together):.2f} s, each {[round(t, 1) for t in together]}", flush=True)
                for sid in result["ids"]:
                    manager.delete(sid)
        elif args.what == "warm":
            for i in range(args.repeat):
                cold = measure_creates(manager, prefix=f"scale-c{i}")
                for sid in cold["ids"]:
                    manager.delete(sid)
                time.sleep(1)
                warm = measure_warm_creates(manager, prefix=f"scale-w{i}")
                print_warm(cold, warm)
        elif args.what == "warm-memory":
            for _ in range(args.repeat):
                result = measure_warm_memory(manager)
                print(f"one warm desktop after {IDLE_S:g} s in the pool: {result['processes']} processes, RSS "
                      f"{result['rss_kb'] / 1024:.0f} MB, PSS {result['pss_kb'] / 1024:.0f} MB, USS "
                      f"{result['uss_kb'] / 1024:.0f} MB", flush=True)
        elif args.what == "load":
            from tests.fakes.testpage import TestPage

            manager.max_sessions = 12
            page = TestPage()
            try:
                ids = ["scale-base"]
                for i in range(9):
                    manager.create(f"scale-l{i}")
                    ids.append(f"scale-l{i}")
                for _ in range(args.repeat):
                    result = measure_click_load(manager, ids, page, seconds=args.seconds)
                    lat = result["latencies"]
                    print(f"{len(lat)} clicks in {result['seconds']:.0f} s: p50 {percentile(lat, 0.5):.0f} ms, "
                          f"p90 {percentile(lat, 0.9):.0f} ms, p99 {percentile(lat, 0.99):.0f} ms; per session "
                          f"{result['per_session']}; errors {result['errors'][:3]}", flush=True)
                    print("  medians:", {k: round(statistics.median(v)) for k, v in result["parts"].items() if v})
            finally:
                page.close()
        elif args.what == "typing":
            from tests.fakes.testpage import TestPage

            page = TestPage()
            try:
                session = manager.get("scale-base")
                for length in args.lengths:
                    for _ in range(args.repeat):
                        result = measure_typing(session, page, length)
                        print(f"{length} characters: {result['seconds']:.2f} s, exact {result['exact']} "
                              f"({result['typed']} of {result['sent']})", flush=True)
            finally:
                page.close()
    finally:
        manager.close()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
