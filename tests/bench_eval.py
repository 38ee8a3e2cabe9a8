"""An evaluation's figures (issue 37; docs/eval.md): the MiniWoB++ oracle's episodes through real
input on a server of its own (embedded, as `glassdesk eval` starts it), K at a time: episodes per
hour, the overhead before the model's first turn, and the success rate, with each episode on a new
desktop (the default) and on a worker's own desktop with its browser cleared.
tests.bench imports ``evaluation`` for `make bench` (section "Evaluation").
"""

from __future__ import annotations

import tempfile
import time
from statistics import median

PARALLEL = 2
EPISODES = 2  # per task: the oracle's tasks x 2


def _run(fresh: str):
    from vision.cli.qa import embedded_server
    from vision.client import GlassdeskClient
    from vision.client.episodes import ClientEpisodes
    from vision.eval import miniwob
    from vision.eval.runner import Evaluation

    with miniwob.serve() as pages, tempfile.TemporaryDirectory() as data, \
            embedded_server(data, max_sessions=PARALLEL * 2 + 1, warm=PARALLEL if fresh == "new" else 0) as (
                base, _, token), GlassdeskClient(base, token=token, timeout=600) as client:
        tasks = miniwob.tasks("miniwob:oracle", pages, budget_seconds=120)
        # Untimed first: the browser driver, the first desktops, the pages' first load. From then on
        # the warm pool refills as episodes claim it, as it does on a server kept running.
        Evaluation(ClientEpisodes(client), tasks.model_copy(update={"tasks": tasks.tasks[:PARALLEL]}),
                   [miniwob.Oracle()], parallel=PARALLEL, fresh=fresh).run()
        started = time.monotonic()
        episodes = Evaluation(ClientEpisodes(client), tasks, [miniwob.Oracle()], episodes_per_task=EPISODES,
                              parallel=PARALLEL, fresh=fresh, reward=miniwob.reward).run()
        return episodes, time.monotonic() - started


def evaluation(bench) -> list:
    from tests.bench import Row

    rows = []
    for fresh in ("new", "clear"):
        episodes, wall = _run(fresh)
        done = [e for e in episodes if e.outcome != "environment_error"]
        per_hour = len(episodes) / wall * 3600
        overhead = [e.overhead_s * 1000 for e in done]
        success = sum(e.outcome == "success" for e in done) / max(1, len(done)) * 100
        rows += [
            Row(f"oracle episodes per hour, K={PARALLEL}, --fresh {fresh}", "episodes/h", [per_hour],
                ">= 3,000", per_hour >= 3000,
                note=f"{len(episodes)} episodes ({len(episodes) // EPISODES} tasks x {EPISODES}) in {wall:.0f} s"),
            Row(f"episode overhead before the model's first turn, --fresh {fresh}", "ms", overhead,
                "<= 500 ms median", median(overhead) <= 500 if overhead else False,
                note="a clean desktop, the page opened, MiniWoB's START clicked, the instruction read"),
            Row(f"oracle success through real input, --fresh {fresh}", "%", [success], "100%", success == 100,
                note=f"{len(episodes) - len(done)} environment errors; misses: "
                     + (", ".join(f"{e.task}#{e.episode}" for e in done if e.outcome != "success") or "none")),
        ]
    return rows
