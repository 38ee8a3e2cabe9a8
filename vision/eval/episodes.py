"""What an evaluation drives, as a port: a clean desktop per episode, the task's start and setup,
the agent's run, the task's check. ``vision.client.episodes.ClientEpisodes`` is it over glassdesk's
REST API (a server of its own, or one at --url); tests/fakes/episodes.py is its fake.

Any failure here that is not the agent's (the server gone, a session that died or could not
start, a setup that did not complete) is an ``EnvironmentFault``: the episode is tried again on a
fresh desktop and counted apart, never as the model's failure.
"""

from __future__ import annotations

from typing import Any, Protocol

from vision.eval.tasks import Task
from vision.models import ActResult, CheckResult


class EnvironmentFault(Exception):
    """The episode could not be carried out for a reason that is not the agent's."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


class Episodes(Protocol):
    def open(self, state: str | None = None) -> str:
        """A clean desktop for one episode, started from the saved state ``state`` if given: its
        session id."""

    def close(self, session_id: str) -> None:
        """The episode's desktop ended (nothing of it is seen by the next)."""

    def recycle(self, session_id: str, how: str) -> None:
        """A desktop an episode ended on, made clean for the next: ``reset`` or ``clear``."""

    def prepare(self, session_id: str, task: Task, episode: int) -> str:
        """The task's start and setup on the desktop; the instruction the agent is given."""

    def run(self, session_id: str, request: dict[str, Any]) -> ActResult:
        """One vision run (ActRequest's fields) to its end."""

    def check(self, session_id: str, task: Task) -> list[CheckResult]:
        """The task's expectations, each looked at once, as the desktop is now."""

    def locate(self, session_id: str, target: dict[str, Any]) -> dict[str, Any]:
        """An element of the page in front, found without acting on it (page locate's answer)."""


def checks_of(flow: Any, expected: list[str]) -> list[CheckResult]:
    """A flow of assert steps' answer as the checks it made (pure). A flow stops at its first
    failing step: the expectations after it were not looked at, and say so."""
    results = [CheckResult(check=step.name, passed=step.status == "passed",
                           saw=step.failure_reason or str(step.detail.get("saw") or "held"),
                           duration_ms=step.duration_ms) for step in flow.steps]
    if not flow.success and all(r.passed for r in results):  # it failed before its steps (no page in front)
        results.append(CheckResult(check=expected[len(results)] if len(results) < len(expected) else "the check",
                                   passed=False, saw=flow.failure_reason or "the check did not run", duration_ms=0))
    results += [CheckResult(check=words, passed=False, saw="not looked at: an earlier check failed", duration_ms=0)
                for words in expected[len(results):]]
    return results
