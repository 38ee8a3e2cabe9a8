"""Evaluations as operations of the catalogue (desktop.ops.declare), the server's own (no session:
each episode gets desktops of its own): start one, read its progress then its result, list them;
each a REST route under /api/v1/evals, an MCP tool and a client method from this one declaration
(the service: vision.eval.service.EvalService; docs/eval.md)."""

from __future__ import annotations

from typing import Any

from desktop.ops.declare import Hints, Operation, Rest, Tool
from vision.models.eval import EvalRef, EvalRequest, EvalStatus

TAGS = ("evals",)


def status_text(_request, answer: EvalStatus) -> str:
    """An evaluation's progress, then each model's rate over its tasks once it is done."""
    line = f"evaluation {answer.eval_id}: {answer.status}, {answer.episodes_done} of {answer.episodes_total} episodes"
    if answer.error:
        line += f"; stopped: {answer.error}"
    if answer.result is None:
        return line + ("" if answer.status != "running" else "; ask eval_status again for the result")
    lines = [line]
    for rate in (r for r in answer.result.rates if r.task is None):
        said = "no episode finished" if rate.rate is None else \
            f"{rate.successes}/{rate.episodes} = {rate.rate:.0%} (95% CI {rate.ci95[0]:.0%}-{rate.ci95[1]:.0%})"
        lines.append(f"  {rate.model}: {said}; {rate.false_claims} false claim(s) of done, "
                     f"{rate.environment_errors} episode(s) the environment spoiled")
    return "\n".join(lines)


def list_text(_request, answer: list[dict[str, Any]]) -> str:
    return "\n".join(f"{e['eval_id']}: {e['status']} {e.get('name') or ''}".rstrip() for e in answer) \
        or "no evaluations"


START = ("Manages the VISIBLE desktop sessions: starts an evaluation in the background and returns its "
         "eval_id at once. Each task (`tasks`: miniwob:TASK,TASK, miniwob:all, or task definitions with their "
         "checks, docs/eval.md) runs as `episodes` episodes per model in `models` (provider/model, or oracle for "
         "MiniWoB++), `parallel` at once, each on a fresh desktop of its own that a person can watch live; "
         "success is the task's own check, never the model's word. eval_status gives progress, then the success "
         "rates with 95% confidence intervals.")
STATUS = ("Looks at the VISIBLE desktop sessions' evaluations; changes nothing. An evaluation's progress "
          "(episodes done of all), then, once done, each model's success rate with its 95% confidence interval, "
          "false claims of done and episodes the environment spoiled, and every episode with its trace.")
LIST = ("Looks at the VISIBLE desktop sessions' evaluations; changes nothing. Lists the evaluations the server "
        "runs and keeps, each with its eval_id, status and name.")

OPERATIONS: tuple[Operation, ...] = (
    Operation("evals", "start", EvalRequest, EvalStatus, acts=False, scope="server",
              call=lambda service, _session, request: service.start(request),
              rest=Rest("POST", "/evals", status_code=202, tags=TAGS, name="start_eval", client="start_eval",
                        summary="start an evaluation: tasks with checks as episodes on models, in the background"),
              tool=Tool("eval_start", "Start an evaluation on visible desktops", START, Hints(open_world=True),
                        status_text, summary=False, group="qa")),
    Operation("evals", "list", None, list[dict[str, Any]], acts=False, scope="server",
              rest=Rest("GET", "/evals", tags=TAGS, name="list_evals", client="evals",
                        summary="the evaluations, running and kept"),
              tool=Tool("eval_list", "List the evaluations", LIST, Hints(read_only=True), list_text,
                        structured=lambda _request, answer: {"evals": answer}, summary=False, group="qa")),
    Operation("evals", "get", EvalRef, EvalStatus, acts=False, scope="server",
              rest=Rest("GET", "/evals/{eval_id}", tags=TAGS, name="get_eval", client="eval_status",
                        summary="an evaluation's progress, then its result"),
              tool=Tool("eval_status", "An evaluation's progress and result", STATUS, Hints(read_only=True),
                        status_text, summary=False, group="qa")),
)
