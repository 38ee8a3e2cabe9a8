"""An evaluation's figures (issue 37; docs/eval.md): the MiniWoB++ oracle's episodes through real
input on a server of its own (embedded, as `glassdesk eval` starts it), K at a time: episodes per
hour, the overhead before the model's first turn, and the success rate, with each episode on a new
desktop (the default) and on a worker's own desktop with its browser cleared; the cleared one also
three at a time, since two leave this machine's two cores idle about half the time (measured: 55%
busy; an episode waits on the page and the screen more than it computes), where new desktops are
bound by their starts' CPU already at two.
tests.bench imports ``evaluation`` for `make bench` (section "Evaluation").
"""

from __future__ import annotations

import os
import tempfile
import time
from statistics import median

PARALLEL = 2
EPISODES = 2  # per task: the oracle's tasks x 2
# (--fresh, K): each measured in a server of its own
RUNS = (("new", PARALLEL), ("clear", PARALLEL), ("clear", 3))


def _busy_s() -> float:
    """The machine's CPU time spent so far, all cores (/proc/stat), in seconds."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _run(fresh: str, parallel: int):
    from vision.cli.qa import embedded_server
    from vision.client import GlassdeskClient
    from vision.client.episodes import ClientEpisodes
    from vision.eval import miniwob
    from vision.eval.runner import Evaluation

    with miniwob.serve() as pages, tempfile.TemporaryDirectory() as data, \
            embedded_server(data, max_sessions=parallel * 2 + 1, warm=parallel if fresh == "new" else 0) as (
                base, _, token), GlassdeskClient(base, token=token, timeout=600) as client:
        tasks = miniwob.tasks("miniwob:oracle", pages, budget_seconds=120)
        # Untimed first: the browser driver, the first desktops, the pages' first load. From then on
        # the warm pool refills as episodes claim it, as it does on a server kept running.
        Evaluation(ClientEpisodes(client), tasks.model_copy(update={"tasks": tasks.tasks[:parallel]}),
                   [miniwob.Oracle()], parallel=parallel, fresh=fresh).run()
        busy, started = _busy_s(), time.monotonic()
        episodes = Evaluation(ClientEpisodes(client), tasks, [miniwob.Oracle()], episodes_per_task=EPISODES,
                              parallel=parallel, fresh=fresh, reward=miniwob.reward).run()
        wall = time.monotonic() - started
        return episodes, wall, (_busy_s() - busy) / (wall * (os.cpu_count() or 1))


def evaluation(bench) -> list:
    from tests.bench import Row

    rows = []
    for fresh, parallel in RUNS:
        episodes, wall, busy = _run(fresh, parallel)
        done = [e for e in episodes if e.outcome != "environment_error"]
        per_hour = len(episodes) / wall * 3600
        overhead = [e.overhead_s * 1000 for e in done]
        success = sum(e.outcome == "success" for e in done) / max(1, len(done)) * 100
        rows += [
            Row(f"oracle episodes per hour, K={parallel}, --fresh {fresh}", "episodes/h", [per_hour],
                ">= 3,000", per_hour >= 3000,
                note=f"{len(episodes)} episodes ({len(episodes) // EPISODES} tasks x {EPISODES}) in {wall:.0f} s; "
                     f"the machine {busy:.0%} busy"),
            Row(f"episode overhead before the model's first turn, K={parallel}, --fresh {fresh}", "ms", overhead,
                "<= 500 ms median", median(overhead) <= 500 if overhead else False,
                note="a clean desktop, the page opened, MiniWoB's START clicked, the instruction read"),
            Row(f"oracle success through real input, K={parallel}, --fresh {fresh}", "%", [success], "100%",
                success == 100,
                note=f"{len(episodes) - len(done)} environment errors; misses: "
                     + (", ".join(f"{e.task}#{e.episode}" for e in done if e.outcome != "success") or "none")),
        ]
    return rows
