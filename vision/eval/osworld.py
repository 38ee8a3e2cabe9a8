"""OSWorld's tasks as glassdesk tasks, where they map (pure but for reading the files).

A task in OSWorld's JSON shape (``id``, ``instruction``, ``config`` steps, an ``evaluator`` of
getters and metrics) becomes a glassdesk :class:`~vision.eval.tasks.Task` when what it sets up and
what it checks are glassdesk's own: Chrome started on a page (``launch`` of ``google-chrome``,
``chrome_open_tabs`` with one URL), pauses (``sleep``), and a check of the page's URL
(``is_expected_active_tab``, ``is_expected_active_tab_approximate``, ``is_expected_url_pattern_match``
on the active tab). Every other task is refused with one line saying what of it has no counterpart
here: to run those, run OSWorld's own harness on glassdesk sessions (docs/osworld.md), which runs
every step and metric as OSWorld does.

``glassdesk eval osworld:PATH`` (a task file, or a directory of them, as OSWorld's
``evaluation_examples/examples/<app>/``) loads what maps, says what was refused, and runs the rest.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from desktop.errors import describe_validation
from vision.eval.tasks import Task, TaskError, TaskSet

PREFIX = "osworld:"
BROWSERS = frozenset({"google-chrome", "google-chrome-stable", "chrome", "chromium", "chromium-browser"})
# OSWorld's Chrome tasks forward Chrome's DevTools port with socat for their getters; glassdesk
# serves its browser's DevTools itself (desktop.osworld), so the step has nothing to do here.
NOTHING_TO_DO = frozenset({"socat"})
BROWSER_WINDOW = re.compile(r"chrom", re.IGNORECASE)  # "Google Chrome", "Chromium"
ACTIVE_TAB = frozenset({"active_tab_info", "active_url_from_accessTree"})
URL_METRICS = frozenset({"is_expected_active_tab", "is_expected_active_tab_approximate",
                         "is_expected_url_pattern_match"})


class Unmapped(Exception):
    """An OSWorld task with parts glassdesk's tasks have no counterpart for: each part, one line."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def from_osworld(data: Any) -> Task:
    """The glassdesk task an OSWorld task is (pure); :class:`Unmapped` lists every part that is not."""
    if not isinstance(data, dict):
        raise Unmapped(["not a task: an OSWorld task is a JSON object"])
    problems: list[str] = []
    start_url, setup = _config(data.get("config") or [], problems)
    expect = _evaluator(data.get("evaluator") or {}, problems)
    if problems:
        raise Unmapped(problems)
    try:
        return Task.model_validate({"id": data.get("id"), "instruction": data.get("instruction"),
                                    "start": {"url": start_url} if start_url else {}, "setup": setup,
                                    "expect": expect})
    except ValidationError as exc:
        raise Unmapped([describe_validation(exc)]) from None


def _config(steps: list, problems: list[str]) -> tuple[str | None, list[dict]]:
    """Where the task starts and its setup steps, from OSWorld's ``config``."""
    urls: list[str] = []
    setup: list[dict] = []
    for number, step in enumerate(steps, 1):
        kind = step.get("type") if isinstance(step, dict) else None
        parameters = (step.get("parameters") or {}) if isinstance(step, dict) else {}
        if kind == "launch":
            command = parameters.get("command") or []
            argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
            program = Path(argv[0]).name if argv else ""
            if program in BROWSERS:
                urls += [a for a in argv[1:] if not a.startswith("-")]
            elif program not in NOTHING_TO_DO:
                problems.append(f"config step {number}: launch of {program or 'nothing'}: a task starts on a page "
                                "of the session's browser, not with a program")
        elif kind == "chrome_open_tabs":
            urls += [str(u) for u in parameters.get("urls_to_open") or []]
        elif kind == "activate_window" and BROWSER_WINDOW.search(str(parameters.get("window_name", ""))):
            pass  # a task starts with its page's browser in front
        elif kind == "sleep":
            setup.append({"action": "wait", "timeout_ms": round(float(parameters.get("seconds", 0)) * 1000)})
        else:
            problems.append(f"config step {number}: {kind}: glassdesk's task setup has no such step")
    if len(urls) > 1:
        problems.append(f"config: opens {len(urls)} pages: a glassdesk task starts on one")
    return (urls[0] if urls else None), setup


def _evaluator(evaluator: dict, problems: list[str]) -> list[dict]:
    """The task's checks, from OSWorld's ``evaluator`` (one metric, or several joined by "and")."""
    funcs = evaluator.get("func")
    if isinstance(funcs, str):
        metrics = [(funcs, evaluator.get("result"), evaluator.get("expected"))]
    elif isinstance(funcs, list) and evaluator.get("conj", "and") == "and":
        results, expected = evaluator.get("result") or [], evaluator.get("expected") or []
        metrics = [(f, results[i] if i < len(results) else None, expected[i] if i < len(expected) else None)
                   for i, f in enumerate(funcs)]
    else:
        problems.append("evaluator: " + ("metrics joined by \"or\": a glassdesk task's checks must all hold"
                                         if isinstance(funcs, list) else "no metric"))
        return []
    expect: list[dict] = []
    for func, result, wanted in metrics:
        getter = (result or {}).get("type") if isinstance(result, dict) else None
        if func not in URL_METRICS:
            problems.append(f"evaluator: {func}" + (f" on {getter}" if getter else "") +
                            ": no counterpart among glassdesk's checks (the page's URL, title, elements, text; "
                            "the screen)")
            continue
        if getter not in ACTIVE_TAB:
            problems.append(f"evaluator: {func} on {getter}: only the active tab's URL is checked here")
            continue
        expect += _url_checks(func, (wanted or {}).get("rules") or {}, problems)
    return expect


def _url_checks(func: str, rules: dict, problems: list[str]) -> list[dict]:
    """OSWorld's URL metrics as url_matches checks: its compare_urls ignores a trailing slash."""
    if func == "is_expected_url_pattern_match":
        patterns = rules.get("expected") or []
        if not patterns:
            problems.append(f"evaluator: {func} without patterns")
        return [{"assertion": {"type": "url_matches", "expected": str(p)}} for p in patterns]
    if rules.get("type") != "url" or not rules.get("url"):
        problems.append(f"evaluator: {func}: a rule of type url with its url")
        return []
    url = str(rules["url"])
    if func == "is_expected_active_tab_approximate":  # the query left out, on both sides
        base = re.escape(url.split("?", 1)[0].rstrip("/"))
        return [{"assertion": {"type": "url_matches", "expected": f"^{base}/?(\\?.*)?$"}}]
    return [{"assertion": {"type": "url_matches", "expected": f"^{re.escape(url.rstrip('/'))}/?$"}}]


def load(spec: str) -> tuple[TaskSet, list[str]]:
    """``osworld:PATH``: the tasks of a file or a directory of files that map, and one line for each
    that does not. A TaskError when none maps (every refusal said) or a file cannot be read."""
    root = Path(spec[len(PREFIX):] if spec.startswith(PREFIX) else spec)
    if not root.exists():
        raise TaskError(f"{root}: no such file or directory")
    files = sorted(root.rglob("*.json")) if root.is_dir() else [root]
    tasks: list[Task] = []
    refused: list[str] = []
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            refused.append(f"{path}: cannot be read as JSON ({exc})")
            continue
        try:
            tasks.append(from_osworld(data))
        except Unmapped as exc:
            refused.append(f"{path.name}: " + "; ".join(exc.problems))
    if not tasks:
        raise TaskError("\n".join([f"{root}: no OSWorld task here maps onto glassdesk's tasks "
                                   "(run OSWorld's own harness on glassdesk instead: docs/osworld.md)", *refused]))
    try:
        return TaskSet(name=f"OSWorld: {root.name}", tasks=tasks), refused
    except ValidationError as exc:
        raise TaskError(f"{root}: {describe_validation(exc)}") from None
