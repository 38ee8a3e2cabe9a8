"""`glassdesk eval TASKS --model M [--model M2 ...] --episodes N --parallel K`: tasks with checks
run as episodes, each a vision run on a clean desktop, scored by the tasks' checks (docs/eval.md).

TASKS is a task file (YAML), ``miniwob:TASK,TASK`` / ``miniwob:all`` / ``miniwob:oracle`` (the
tasks the oracle covers), or ``osworld:PATH`` (OSWorld's task files: those that map are run, the
others are listed with what has no counterpart). A model is a provider/model name as vision/act takes it, or ``oracle``
(MiniWoB++'s DOM solver, acting through real input). Against a running server (--url) or one
started here with a warm pool of K desktops.

Exit status: 0 when the evaluation ran to its end; 1 when a task's rate fell beyond chance from
--baseline's, or no episode could be carried out at all; 2 on a usage error (every problem of the
task file listed at once).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vision.cli.qa import embedded_server
from vision.eval import miniwob, osworld
from vision.eval.results import Episode, EvalResult, junit, now, result_path, summarise, table_rows
from vision.eval.runner import FRESH, MAX_PARALLEL, Evaluation, ModelAgent, model_problems
from vision.eval.tasks import TaskError, TaskSet, load_tasks
from vision.trace.files import atomic_write

console = Console(stderr=True, soft_wrap=True)
LOG_WIDTH_MAX = 1000  # columns a table may take in a log


class UsageError(Exception):
    pass


def read_baseline(spec: str, data_dir: Path | None) -> EvalResult:
    """An earlier result: a result.json path, or an eval id in the data dir's evals/."""
    candidates = [Path(spec)] + ([result_path(data_dir / "evals", spec)] if data_dir else [])
    for path in candidates:
        if path.is_file():
            try:
                return EvalResult.model_validate_json(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise UsageError(f"--baseline {spec}: {path} is not an evaluation's result ({exc})") from None
    raise UsageError(f"--baseline {spec}: no such result file, nor an eval of that id under "
                     f"{data_dir / 'evals' if data_dir else 'the data dir'}")


def agents_of(models: list[str], tasks_spec: str) -> list[Any]:
    problems = []
    if "oracle" in models and not tasks_spec.startswith(miniwob.PREFIX):
        problems.append("--model oracle: solves MiniWoB++'s tasks only (give miniwob:...)")
    if len(set(models)) != len(models):
        problems.append("--model: each model once")
    if problems:
        raise UsageError("; ".join(problems))
    return [miniwob.Oracle() if m == "oracle" else ModelAgent(m) for m in models]


def print_table(result: EvalResult) -> None:
    table = Table(title=f"{result.name}: {result.episodes_per_task} episode(s) per task and model")
    rows = table_rows(result)
    for column in rows[0]:
        table.add_column(column, no_wrap=column in ("model", "task"))
    for row in rows:
        table.add_row(*(escape("" if v is None else str(v)) for v in row.values()))
    if console.is_terminal:
        console.print(table)
        return
    # A log (CI's, a file) is no terminal: rich would fit the table to 80 columns and cut every
    # figure to "0…"; it gets the table's whole width there.
    whole = console.measure(table, options=console.options.update_width(LOG_WIDTH_MAX)).maximum
    Console(stderr=True, soft_wrap=True, width=max(console.width, whole)).print(table)


def _progress(total: int):
    done = [0]

    def line(episode: Episode) -> None:
        done[0] += 1
        outcome = {"success": "[green]success[/green]", "failure": "[red]failure[/red]",
                   "environment_error": "[yellow]environment error[/yellow]"}[episode.outcome]
        claim = " [red](said done)[/red]" if episode.false_claim else ""
        console.print(f"[{done[0]}/{total}] {escape(episode.model)} {escape(episode.task)} #{episode.episode}: "
                      f"{outcome}{claim}, {episode.steps} steps, {episode.wall_s:.1f} s")
    return line


def _tasks(args: argparse.Namespace, stack: ExitStack) -> tuple[TaskSet, Any]:
    """The task set, and the benchmark's reward reader if it scores itself (MiniWoB++'s pages,
    served for as long as ``stack`` lasts)."""
    if args.tasks.startswith(miniwob.PREFIX):
        base = stack.enter_context(miniwob.serve())
        return (miniwob.tasks(args.tasks, base, max_steps=args.max_steps, budget_seconds=args.budget_seconds),
                miniwob.reward)
    if args.tasks.startswith(osworld.PREFIX):
        tasks, refused = osworld.load(args.tasks)
        for line in refused:
            console.print(f"[yellow]not run:[/yellow] {escape(line)}")
        return tasks, None
    return load_tasks(Path(args.tasks)), None


def _server(args: argparse.Namespace, stack: ExitStack, data_dir: Path) -> tuple[str, str | None, Path]:
    """The server the episodes run on: --url's, or one started here with a warm pool of K."""
    if args.url:
        return args.url.rstrip("/"), os.environ.get("GLASSDESK_TOKEN"), data_dir
    console.print("[dim]no --url: starting a glassdesk server here…[/dim]")
    warm = args.parallel if args.fresh == "new" else 0  # reset and clear keep a desktop per worker instead
    base_url, store, token = stack.enter_context(
        embedded_server(args.data_dir, max_sessions=args.parallel * 2 + 1, warm=warm))
    return base_url, token, Path(store)


def _evaluate(args: argparse.Namespace, agents: list[Any], data_dir: Path) -> tuple[EvalResult, Path]:
    from vision.client import GlassdeskClient
    from vision.client.episodes import ClientEpisodes

    with ExitStack() as stack:
        tasks, reward = _tasks(args, stack)
        base_url, token, data_dir = _server(args, stack, data_dir)
        client = stack.enter_context(GlassdeskClient(base_url, token=token, timeout=3700))
        result = EvalResult(eval_id=f"eval-{now()[:10]}-{secrets.token_hex(3)}", name=tasks.name, started_at=now(),
                            models=[a.name for a in agents], tasks=[t.id for t in tasks.tasks],
                            episodes_per_task=args.episodes, parallel=args.parallel)
        evaluation = Evaluation(ClientEpisodes(client), tasks, agents, episodes_per_task=args.episodes,
                                parallel=args.parallel, retries=args.retries, record_video=args.record_video,
                                reward=reward, fresh=args.fresh,
                                on_episode=_progress(len(agents) * len(tasks.tasks) * args.episodes))
        episodes = evaluation.run()
    return result.model_copy(update={"episodes": episodes, "finished_at": now()}), data_dir


def main(args: argparse.Namespace) -> int:
    try:
        if not 1 <= args.parallel <= MAX_PARALLEL:
            raise UsageError(f"--parallel: from 1 to {MAX_PARALLEL} (got {args.parallel})")
        agents = agents_of(args.model, args.tasks)
        if not args.url:  # the server started here runs with this config: a model it cannot run is refused now
            from vision.config import VisionConfig

            problems = model_problems([m for m in args.model if m != "oracle"], VisionConfig.load())
            if problems:
                raise UsageError("; ".join(problems))
        data_dir = Path(args.data_dir or os.environ.get("GLASSDESK_DATA_DIR") or "data")
        baseline = read_baseline(args.baseline, data_dir) if args.baseline else None
        result, data_dir = _evaluate(args, agents, data_dir)
    except (UsageError, TaskError, ValueError) as exc:
        console.print(f"[red]usage:[/red] {escape(str(exc))}")
        return 2
    except KeyboardInterrupt:
        return 130
    result = summarise(result, baseline)
    out = Path(args.output) if args.output else result_path(data_dir / "evals", result.eval_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, result.model_dump_json(indent=1).encode())  # never a half-written result
    if args.junit:
        Path(args.junit).write_text(junit(result), encoding="utf-8")
    print_table(result)
    console.print(f"result: {escape(str(out))} (eval id {result.eval_id}: --baseline takes it)")
    print(json.dumps({"eval_id": result.eval_id, "result": str(out),
                      "rates": {r.model: r.rate for r in result.rates if r.task is None}}))
    fell = [r for r in result.rates if r.fell and r.task is not None]
    if fell:
        names = ", ".join(f"{escape(r.model)} {escape(r.task or '')}" for r in fell)
        console.print(f"[red]fell beyond chance:[/red] {names}")
        return 1
    return 0 if any(e.outcome != "environment_error" for e in result.episodes) else 1


def add_parser(sub: Any) -> None:
    ev = sub.add_parser("eval", help="run tasks as episodes on models and score them by their checks")
    ev.add_argument("tasks", help="a task file (YAML), miniwob:TASK,TASK / miniwob:all / miniwob:oracle, or "
                                  "osworld:PATH (OSWorld's task files, those whose setup and checks map)")
    ev.add_argument("--model", action="append", required=True, metavar="MODEL",
                    help="a provider/model as vision/act takes it, or oracle (MiniWoB++ only); repeat to compare")
    ev.add_argument("--episodes", type=int, default=5, metavar="N", help="episodes per task and model (default 5)")
    ev.add_argument("--parallel", type=int, default=1, metavar="K", help="episodes at once, each on its own desktop")
    ev.add_argument("--fresh", choices=FRESH, default="new",
                    help="how each episode gets a clean desktop: new (a new desktop each, the default: nothing carries "
                         "over), reset (each worker's own, reset: Chromium on a clean profile, launched programs "
                         "ended) or clear (the browser's cookies, storage, caches and tabs cleared; no restart)")
    ev.add_argument("--retries", type=int, default=2, metavar="N",
                    help="fresh desktops an episode the environment spoiled is tried on (default 2)")
    ev.add_argument("--baseline", metavar="EVAL_ID|result.json", help="flag the tasks whose rate fell beyond chance")
    ev.add_argument("--junit", metavar="OUT.xml", help="JUnit: a suite per model, a case per task")
    ev.add_argument("--output", "-o", metavar="result.json", help="default: DATA_DIR/evals/EVAL_ID/result.json")
    ev.add_argument("--record-video", action="store_true", help="film every episode (a video receipt per run)")
    ev.add_argument("--max-steps", type=int, default=10, help="MiniWoB++ tasks: steps per episode (default 10)")
    ev.add_argument("--budget-seconds", type=float, default=120,
                    help="MiniWoB++ tasks: seconds per episode, also the page's time limit (default 120)")
    ev.add_argument("--url", default=None, help="a running glassdesk server (default: start one here)")
    ev.add_argument("--data-dir", default=None, help="the embedded server's data dir and where results go "
                                                     "(default $GLASSDESK_DATA_DIR, else ./data)")
    ev.set_defaults(func=main)
