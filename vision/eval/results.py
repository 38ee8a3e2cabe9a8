"""An evaluation's episodes summed up (pure): per model and task, and per model over every task,
the success rate with its 95% interval, false claims, steps, time and tokens; a baseline's
comparison; JUnit with a case per task and model (its episodes inside)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from statistics import mean, median
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from vision.eval.stats import fell_beyond_chance, wilson
from vision.models.eval import Episode, EvalResult, Rate

__all__ = ["EvalResult", "Episode", "Rate", "junit", "now", "rate_of", "summarise", "table_rows"]

def rate_of(model: str, task: str | None, episodes: list[Episode],
            baseline: dict[tuple[str, str | None], Rate] | None = None) -> Rate:
    done = [e for e in episodes if e.outcome != "environment_error"]
    successes = sum(e.outcome == "success" for e in done)
    rate = Rate(model=model, task=task, episodes=len(done), successes=successes,
                rate=successes / len(done) if done else None, ci95=wilson(successes, len(done)),
                false_claims=sum(e.false_claim for e in done),
                environment_errors=len(episodes) - len(done), retried=sum(len(e.environment_errors) for e in episodes),
                mean_steps=round(mean(e.steps for e in done), 2) if done else None,
                median_wall_s=round(median(e.wall_s for e in done), 3) if done else None,
                tokens=sum(e.tokens for e in episodes))
    earlier = (baseline or {}).get((model, task))
    if earlier is not None and earlier.episodes and done:
        rate.baseline_rate = earlier.rate
        rate.fell = fell_beyond_chance(earlier.successes, earlier.episodes, successes, len(done))
    return rate


def summarise(result: EvalResult, baseline: EvalResult | None = None) -> EvalResult:
    """The result with its rates computed from its episodes (and compared with the baseline's)."""
    earlier = {(r.model, r.task): r for r in baseline.rates} if baseline else None
    rates = []
    for model in result.models:
        mine = [e for e in result.episodes if e.model == model]
        rates += [rate_of(model, task, [e for e in mine if e.task == task], earlier) for task in result.tasks]
        rates.append(rate_of(model, None, mine, earlier))
    return result.model_copy(update={"rates": rates, "baseline": baseline.eval_id if baseline else None})


def result_path(evals: Path, eval_id: str) -> Path:
    """Where an evaluation's result is kept under the data dir's ``evals/``, by the CLI and the server alike."""
    return evals / eval_id / "result.json"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def junit(result: EvalResult) -> str:
    """A testsuite per model, a testcase per task: failed when any episode failed, its episodes'
    outcomes in the message; an episode the environment spoiled is an error, not a failure."""
    suites = []
    for model in result.models:
        cases = []
        for task in result.tasks:
            episodes = [e for e in result.episodes if e.model == model and e.task == task]
            rate = result.rate(model, task)
            wall = sum(e.wall_s for e in episodes)
            lines = "\n".join(_episode_line(e) for e in episodes)
            body = ""
            failed = [e for e in episodes if e.outcome == "failure"]
            spoiled = [e for e in episodes if e.outcome == "environment_error"]
            if failed:
                body += (f'<failure message={quoteattr(f"{len(failed)} of {len(episodes)} episodes failed")}>'
                         f"{escape(lines)}</failure>")
            elif spoiled:
                body += (f'<error message={quoteattr(f"{len(spoiled)} episodes never ran: the environment")}>'
                         f"{escape(lines)}</error>")
            body += f"<system-out>{escape(_rate_line(rate) + chr(10) + lines)}</system-out>"
            cases.append(f'<testcase classname={quoteattr(model)} name={quoteattr(task)} time="{wall:.3f}">'
                         f"{body}</testcase>")
        total = result.rate(model)
        failures = sum(1 for t in result.tasks if any(e.outcome == "failure" for e in result.episodes
                                                      if e.model == model and e.task == t))
        suites.append(f'<testsuite name={quoteattr(f"{result.name} on {model}")} tests="{len(result.tasks)}" '
                      f'failures="{failures}" errors="0">'
                      f'<properties><property name="success_rate" value={quoteattr(_rate_line(total))}/>'
                      f"</properties>{''.join(cases)}</testsuite>")
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuites name={quoteattr(result.name)}>'
            f'{"".join(suites)}</testsuites>\n')


def _episode_line(e: Episode) -> str:
    said = "said done" if e.claimed else f"ended {e.status}"
    if e.outcome == "environment_error":
        return f"episode {e.episode}: never ran ({'; '.join(e.environment_errors)[-300:]})"
    failed = [c for c in e.checks if not c.get("passed")]
    why = f": {failed[0]['check']}: saw {failed[0]['saw']}" if failed else ""
    claim = " (a false claim)" if e.false_claim else ""
    return f"episode {e.episode}: {e.outcome}, {said}{claim}, {e.steps} steps{why} [trace {e.trace_id}]"


def _rate_line(rate: Rate | None) -> str:
    if rate is None or rate.rate is None:
        return "no episode finished"
    low, high = rate.ci95
    return (f"{rate.successes}/{rate.episodes} = {rate.rate:.0%} (95% CI {low:.0%}-{high:.0%}), "
            f"{rate.false_claims} false claims, {rate.environment_errors} environment errors")


def table_rows(result: EvalResult) -> list[dict[str, Any]]:
    """The rates as rows for a terminal table (pure)."""
    rows = []
    for r in result.rates:
        low, high = r.ci95
        rows.append({"model": r.model, "task": r.task or "ALL", "ok/n": f"{r.successes}/{r.episodes}",
                     "rate": "-" if r.rate is None else f"{r.rate:.0%}", "95% CI": f"{low:.0%}-{high:.0%}",
                     "false claims": r.false_claims, "env err": r.environment_errors,
                     "steps": "-" if r.mean_steps is None else f"{r.mean_steps:g}",
                     "wall s": "-" if r.median_wall_s is None else f"{r.median_wall_s:.1f}", "tokens": r.tokens,
                     "baseline": ("" if r.fell is None else
                                  f"{r.baseline_rate:.0%}{' FELL' if r.fell else ''}")})
    return rows
