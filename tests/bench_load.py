"""Many sessions at once (issue 40, item 1): the "Load" section of `make bench`
(``python -m tests.bench --section Load`` runs it alone); tests.bench imports ``record_cost`` and ``load``.

N sessions (1, 2, 4, 8) with M clients on each (1, 2), over real HTTP to one server (the app of
vision.http.app on uvicorn on loopback, as a deployment runs it). The clients run in a process of
their own (in the server's, they would compete with it for the GIL) and each does what an agent
does, in a loop: a screenshot, a click that repaints (the site's /agent page: "Add one" counts),
a click on nothing, the field selected (triple click) and 20 characters typed into it, the page's
summary. Pointer glide off, as the other click figures: the mechanism's own cost.

Each answer's time is kept by kind and compared with the same kind alone (1 session, 1 client) in
the same run; the CPU the load cost (the server process, Playwright's driver, and each session's
Xvfb, Chromium and the rest, from /proc) is divided by the answers, the share of the time some
task waited for a core is read from the kernel (/proc/pressure/cpu), and ``cpu_bound`` says what
mean answer the cores allow at all. Two clients on one session
share it: a session runs one action at a time, so the second waits for the first (that wait is
part of its answer, as it would be for an agent; QUEUE_WAIT_S bounds it), each clicking a few
pixels beside the other (the very same spot again within the double-click time waits that out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from desktop.x11.input import MULTI_CLICK_PX

LOADS = [(1, 1), (2, 1), (4, 1), (8, 1), (1, 2), (2, 2), (4, 2), (8, 2)]  # (sessions, clients on each)
LOAD_S = 15.0
SIDE_BY_SIDE_PX = MULTI_CLICK_PX + 3  # how far apart two clients on one desktop click (see clients)
TEXT = "twenty characters ok"
KINDS = ["screenshot", "click that repaints", "click on nothing", "select the field (triple click)",
         "type 20 characters", "page summary"]
# The components whose CPU is counted, by process name (tests.bench._component's groups, coarser).
COMPONENTS = ["server (uvicorn + services)", "Playwright driver", "Xvfb", "chromium", "other session processes"]


def percentile(samples: list[float], q: float) -> float:
    from tests.bench_scale import percentile as nearest_rank

    return nearest_rank(samples, q) if samples else float("nan")


# ------------------------------------------------------------------------------------- CPU

def cpu_snapshot(sessions) -> dict[str, float]:
    """CPU seconds used so far by each component: this process (the server), Playwright's driver
    (node, its child) and the sessions' processes by kind."""
    from tests.bench import _leaders, session_pids
    from tests.bench_page import driver_pids
    from tests.bench_scale import cpu_ticks

    tick = os.sysconf("SC_CLK_TCK")
    totals = dict.fromkeys(COMPONENTS, 0.0)
    totals[COMPONENTS[0]] = cpu_ticks(os.getpid())[0] / tick
    for driver in driver_pids():
        totals[COMPONENTS[1]] += cpu_ticks(driver)[0] / tick
    for session in sessions:
        for pid in session_pids(session.stack.tag, _leaders(session))[0]:
            ticks, name = cpu_ticks(pid)
            kind = "Xvfb" if name == "Xvfb" else "chromium" if name.startswith("chrom") else COMPONENTS[4]
            totals[kind] += ticks / tick
    return totals


def cpu_waited_s() -> float:
    """Seconds so far during which at least one task of the machine was ready to run but waited for
    a core (the kernel's pressure stall information, "some"; 0 where the kernel keeps none): over a
    load, its share of the wall time says how often work queued for the two cores."""
    try:
        line = next(ln for ln in open("/proc/pressure/cpu", encoding="ascii") if ln.startswith("some "))
    except (OSError, StopIteration):
        return 0.0
    return int(line.rsplit("total=", 1)[1]) / 1e6


# ----------------------------------------------------------------------------------- the load

def agent_points(rig, sid: str) -> dict[str, list[int]]:
    """The /agent page of the test site opened in session ``sid``; the display points its clients use."""
    rig.pages.navigate(sid, "goto", rig.site.url("/agent"), "load", 15_000)
    more, note = rig.pages.boxes(sid, ["#more", "#note"], "display")
    centre = lambda box: [(box[0] + box[2]) // 2, (box[1] + box[3]) // 2]  # noqa: E731
    # Nothing there: the page's blank middle, far from every element.
    return {"more": centre(more), "note": centre(note), "nothing": [more[0] + 900, more[1] + 500]}


def run_load(url: str, points: dict[str, dict], clients_per_session: int, seconds: float) -> dict:
    """The load's clients in a process of their own (``python -m tests.bench_load clients``)."""
    spec = json.dumps({"url": url, "seconds": seconds, "points": points, "clients": clients_per_session})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-m", "tests.bench_load", "clients"], input=spec, text=True,
                          capture_output=True, timeout=seconds + 180, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"the load's clients failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def clients(spec: dict) -> dict:
    """Each client's agent loop over HTTP until the time is up; every answer's time by kind."""
    import threading

    import httpx2

    stop = time.monotonic() + spec["seconds"]
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    rest: list[float] = []   # a click's answer less its xdotool and settle: the server's own part
    errors: list[str] = []
    refused: list[float] = []
    lock = threading.Lock()

    def client(sid: str, points: dict, k: int) -> None:
        base = f"/api/v1/sessions/{sid}"
        # The k-th client on a desktop acts a few pixels beside the others (in the same button, field,
        # blank): two agents clicking the very same spot within the double-click time would have each
        # later press wait that time out (desktop.x11.input.separating_wait), a wait of its own.
        points = {name: [x + k * SIDE_BY_SIDE_PX, y] for name, (x, y) in points.items()}
        calls = [
            ("screenshot", "GET", f"{base}/desktop/screenshot", None),
            ("click that repaints", "POST", f"{base}/desktop/click", dict(zip("xy", points["more"], strict=True))),
            ("click on nothing", "POST", f"{base}/desktop/click", dict(zip("xy", points["nothing"], strict=True))),
            ("select the field (triple click)", "POST", f"{base}/desktop/triple_click",
             dict(zip("xy", points["note"], strict=True))),
            ("type 20 characters", "POST", f"{base}/desktop/type", {"text": TEXT}),
            ("page summary", "GET", f"{base}/page", None),
        ]
        with httpx2.Client(base_url=spec["url"], timeout=60) as http:
            while time.monotonic() < stop:
                for kind, method, path, body in calls:
                    start = time.perf_counter()
                    response = http.request(method, path, json=body)
                    elapsed = (time.perf_counter() - start) * 1000
                    with lock:
                        if response.status_code == 409 and "typed_into_nothing" in response.text:
                            # The other client on this desktop clicked away from the field in between:
                            # the type is refused, rightly (two agents on one desktop get in each other's way).
                            refused.append(elapsed)
                            continue
                        if response.status_code != 200:
                            errors.append(f"{sid} {kind}: {response.status_code} {response.text[:200]}")
                            continue
                        times[kind].append(elapsed)
                        if kind.startswith("click"):
                            answer = response.json()
                            rest.append(elapsed - answer["duration_ms"] - answer["settle_ms"])

    threads = [threading.Thread(target=client, args=(sid, points, k))
               for sid, points in spec["points"].items() for k in range(spec["clients"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"times": times, "rest": rest, "errors": errors, "refused": refused}


def measure(manager, rig, session_ids: list[str], loads=LOADS, seconds: float = LOAD_S) -> dict:
    """Every load of ``loads`` on the first sessions of ``session_ids``: answers by kind, CPU by component."""
    points = {}
    for sid in session_ids[:max(n for n, _ in loads)]:
        manager.get(sid).executor.glide_ms = 0
        points[sid] = agent_points(rig, sid)
    results = {}
    for n, m in loads:
        used = session_ids[:n]
        sessions = [manager.get(sid) for sid in used]
        before, waited, wall = cpu_snapshot(sessions), cpu_waited_s(), time.perf_counter()
        answer = run_load(rig.server.url, {sid: points[sid] for sid in used}, m, seconds)
        after, waited, wall = cpu_snapshot(sessions), cpu_waited_s() - waited, time.perf_counter() - wall
        count = sum(len(v) for v in answer["times"].values())
        answer["cpu_ms_per_answer"] = {k: (after[k] - before[k]) * 1000 / max(count, 1) for k in COMPONENTS}
        answer["cpu_share"] = sum(after[k] - before[k] for k in COMPONENTS) / wall / (os.cpu_count() or 1)
        answer["waited_share"] = waited / wall
        answer["answers"] = count
        results[(n, m)] = answer
    return results


# ------------------------------------------------------------------------------- make bench

def _create_more(manager, count: int, prefix: str) -> list[str]:
    ids = [f"{prefix}-{i}" for i in range(count)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two at a time: one per core
        list(pool.map(manager.create, ids))
    return ids


def load(bench, seconds: float = LOAD_S) -> list:
    """The Load section's rows, and its tables (by kind and load; CPU per answer)."""
    from tests.bench_page import PageRig

    bench.manager.max_sessions = max(bench.manager.max_sessions, 12)
    more = _create_more(bench.manager, 7, "bench-load")
    rig = PageRig.start(bench.manager, bench.session.id)
    try:
        results = measure(bench.manager, rig, [bench.session.id, *more], seconds=seconds)
    finally:
        rig.close()
        for sid in more:
            bench.manager.delete(sid)
    return report(bench, results)


def cpu_bound(results: dict, goal: tuple[int, int], cores: int | None = None) -> str:
    """What the cores allow at load ``goal`` (pure arithmetic on the measured figures): k clients,
    each sending its next request as soon as its last is answered, each answer costing c ms of CPU
    in all components, keep the cores busy for k * c ms per round of answers, so on ``cores`` cores
    the mean answer cannot be shorter than k * c / cores, however the work is scheduled; and the
    mean the goal's 1.5x-alone asks for bounds the CPU an answer may cost."""
    cores = cores or os.cpu_count() or 1
    n, m = goal
    result, alone = results[goal], results[(1, 1)]
    cpu = sum(result["cpu_ms_per_answer"].values())
    mean = statistics.fmean(t for samples in result["times"].values() for t in samples)
    alone_mean = statistics.fmean(t for samples in alone["times"].values() for t in samples)
    floor = n * m * cpu / cores
    allowed = 1.5 * alone_mean * cores / (n * m)
    return (f"Load at {n} x {m}, what the cores allow: each answer (all kinds) cost {cpu:.1f} ms of CPU in all, so "
            f"{n * m} clients on {cores} cores cannot be answered in less than {floor:.0f} ms on average "
            f"({n * m} x {cpu:.1f} / {cores}; {floor / alone_mean:.2f}x the mean alone, {alone_mean:.0f} ms), "
            f"whatever the order of the work; measured: {mean:.0f} ms ({mean / alone_mean:.2f}x), the cores "
            f"{result['cpu_share'] * 100:.0f} % busy. A mean of 1.5x alone would need at most {allowed:.1f} ms of "
            f"CPU an answer.")


def report(bench, results: dict) -> list:
    from tests.bench import Row

    alone = results[(1, 1)]["times"]
    rows, table = [], []
    for (n, m), result in results.items():
        times = result["times"]
        for kind in KINDS:
            samples = times[kind]
            base50, base99 = percentile(alone[kind], 0.5), percentile(alone[kind], 0.99)
            table.append([f"{n} x {m}", kind, str(len(samples)), f"{percentile(samples, 0.5):.0f}",
                          f"{percentile(samples, 0.9):.0f}", f"{percentile(samples, 0.99):.0f}",
                          f"{percentile(samples, 0.5) / base50:.2f}", f"{percentile(samples, 0.99) / base99:.2f}"])
        if result["refused"]:
            bench.findings.append(f"Load {n} x {m}: {len(result['refused'])} of the types were refused "
                                  "(typed_into_nothing, 409): the other client on the desktop had clicked away from "
                                  "the field in between, and nothing was typed, rightly.")
        if result["errors"]:
            bench.findings.append(f"WARNING (load {n} x {m}): {len(result['errors'])} answers were not 200; first: "
                                  f"{result['errors'][:2]}.")
    bench.detail("Answers by kind under load (ms; ratios to the same kind with 1 session and 1 client, this run)",
                 ["sessions x clients on each", "answer", "n", "p50", "p90", "p99", "p50 / alone", "p99 / alone"],
                 table)
    bench.detail("CPU per answer under load (ms of CPU time, all answers of the load)",
                 ["sessions x clients on each", "answers", "machine's CPU used",
                  "time a task waited for a core (PSI some)", *COMPONENTS],
                 [[f"{n} x {m}", str(r["answers"]), f"{r['cpu_share'] * 100:.0f} %", f"{r['waited_share'] * 100:.0f} %",
                   *(f"{r['cpu_ms_per_answer'][k]:.1f}" for k in COMPONENTS)] for (n, m), r in results.items()])
    click = "click that repaints"
    alone50, alone99 = percentile(alone[click], 0.5), percentile(alone[click], 0.99)
    for (n, m), result in results.items():
        samples = result["times"][click]
        p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
        goal = (n, m) == (4, 2)
        rows.append(Row(f"{click}, {n} session{'s' * (n > 1)} x {m} client{'s' * (m > 1)} on each", "ms", samples,
                        "p50 <= 1.5x, p99 <= 3x alone" if goal else "",
                        (p50 <= 1.5 * alone50 and p99 <= 3 * alone99) if goal else None,
                        note=f"p99 {p99:.0f} ms; {p50 / alone50:.2f}x / {p99 / alone99:.2f}x alone (p50 / p99)"))
    loaded = results[max(results)]
    rows.append(Row(f"  the rest of a click's answer at {max(results)[0]} x {max(results)[1]} (not xdotool, not "
                    "settle)", "ms", loaded["rest"], "<= 20 ms p50", percentile(loaded["rest"], 0.5) <= 20,
                    note=f"alone: {percentile(results[(1, 1)]['rest'], 0.5):.1f} ms p50"))
    bench.findings.append(cpu_bound(results, (4, 2)))
    doubled = next((n for (n, m), r in sorted(results.items()) if m == 1
                    and percentile(r["times"][click], 0.5) >= 2 * alone50), None)
    bench.findings.append(
        "Load (issue 40): " + (f"a click's p50 answer doubles at {doubled} sessions with one client each"
                               if doubled else f"a click's p50 answer did not double up to "
                               f"{max(n for n, m in results if m == 1)} sessions with one client each")
        + f" ({alone50:.0f} ms alone); the CPU the busiest load used: {loaded['cpu_share'] * 100:.0f} % of the "
        f"machine's {os.cpu_count()} cores.")
    return rows


# ------------------------------------------------------------------------ the element record

def record_cost(bench, runs: int = 30) -> list:
    """Issue 40, item 2: what reading the element under a click costs the click, A/B in one run: each
    sample pairs a click with the record read (Pages.hit) and one with the same record handed back at
    once (read before the samples), the pointer moved away before each; with the pointer glide off,
    and with the default glide (the record read while it glides). The cost is how much later the
    press comes (from the action's start to the input's own press): the answer's time beside it
    also holds the settle, whose wait for the page's own reports (every event a fetch here) varies
    by tens of ms either way, more than the record costs, so its paired difference says little."""
    import asyncio

    from desktop.actions import Click
    from desktop.x11.input import GLIDE_MS
    from tests.bench import Row
    from tests.bench_page import PageRig

    session, page = bench.session, bench.page
    rig = bench.page_rig or PageRig.start(bench.manager, session.id)
    bench.page_rig = rig
    rig.pages.navigate(session.id, "goto", page.url, "load", 15_000)
    boxes = rig.pages.boxes(session.id, ["#signin", "#cancel"], "display")
    buttons = [((b[0] + b[2]) // 2, (b[1] + b[3]) // 2) for b in boxes]
    pages = session.stack.browser.pages
    read = pages.hit
    known = {xy: session.stack.browser.call(lambda p, xy=xy: p.hit(*xy), 5) for xy in buttons}

    async def at_once(x: int, y: int, front=None):
        await asyncio.sleep(0)
        return known[(x, y)]

    executor = session.executor
    run, pressed = executor.run, []

    def timed_run(action, before_act=None, glide=True):
        """The executor's run, noting when it presses: after the glide and whatever it waits for."""
        def then() -> None:
            if before_act is not None:
                before_act()
            pressed.append(time.perf_counter())
        return run(action, before_act=then, glide=glide)

    saved, rows = executor.glide_ms, []
    executor.run = timed_run
    try:
        for glide in (0, GLIDE_MS):
            executor.glide_ms = glide
            to_press: dict[bool, list[float]] = {True: [], False: []}
            answer: dict[bool, list[float]] = {True: [], False: []}
            for i in range(runs):
                # Sign in and Cancel in turn, so that every click repaints the page's status line (a
                # second click on the same button changes nothing, and settles sooner); which arm goes
                # first alternates, so neither always clicks the same button.
                for turn, reads in enumerate((True, False) if i % 2 == 0 else (False, True)):
                    pages.hit = read if reads else at_once
                    session.perform(Click(x=1600, y=900 + 40 * turn))  # away: the glide has its way to go
                    x, y = buttons[turn]
                    start = time.perf_counter()
                    done = session.perform(Click(x=x, y=y))
                    answer[reads].append((time.perf_counter() - start) * 1000)
                    to_press[reads].append((pressed[-1] - start) * 1000)
                    if done.element is None or done.element.tag != "button":
                        raise RuntimeError(f"the click at {(x, y)} recorded {done.element}, not its button")
            paired = [a - b for a, b in zip(to_press[True], to_press[False], strict=True)]
            label = "glide off" if glide == 0 else f"default glide ({glide} ms)"
            rows += [
                Row(f"element record's cost on a click, {label}: the press that much later (paired difference)",
                    "ms", paired, "<= 2 ms median", statistics.median(paired) <= 2,
                    note=f"to the press {statistics.median(to_press[True]):.1f} ms with the record read, "
                         f"{statistics.median(to_press[False]):.1f} ms with it handed back at once; the whole "
                         f"answer {statistics.median(answer[True]):.1f} and {statistics.median(answer[False]):.1f} ms"),
            ]
    finally:
        pages.hit = read
        executor.run = run
        executor.glide_ms = saved
    return rows + focus_cost(session, rig, runs)


def focus_cost(session, rig, runs: int) -> list:
    """Issue 35's effect record on a ``type``: the read of what has the keyboard focus (whether it
    takes text: typed_into_nothing), A/B in one run. Each sample clicks into the test page's text
    field, then types one character judged (the focus read) or unjudged (the click's record of
    where the keys went forgotten, so nothing is read), the two in turn."""
    from desktop.actions import Click, Key, Type
    from tests.bench import Row

    [box] = rig.pages.boxes(session.id, ["#field"], "display")
    field = ((box[0] + box[2]) // 2, (box[1] + box[3]) // 2)
    arms: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(runs):
        for judged in (True, False):
            session.perform(Click(x=field[0], y=field[1]))
            if not judged:
                session.settle.page_focus_window = None  # as after a key that may move the focus: not judged
            start = time.perf_counter()
            session.perform(Type(text="a"))
            arms[judged].append((time.perf_counter() - start) * 1000)
            session.perform(Key(keys=["BackSpace"]))
    paired = [a - b for a, b in zip(arms[True], arms[False], strict=True)]
    return [Row("focus read's cost on a type (paired difference)", "ms", paired, "<= 5 ms median",
                statistics.median(paired) <= 5,
                note=f"type 1 character {statistics.median(arms[True]):.1f} ms judged, "
                     f"{statistics.median(arms[False]):.1f} ms not")]


# ---------------------------------------------------------------------------- the clients

def main(argv: list[str] | None = None) -> int:
    """``python -m tests.bench_load clients`` < spec: the load's clients (run_load starts it)."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench_load", description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["clients"])
    parser.parse_args(argv)
    print(json.dumps(clients(json.loads(sys.stdin.read()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
