"""The fake of vision.eval.episodes.Episodes: desktops that are dicts, a run that does what its
agent's script says, a check that reads what the run did; and the environment's faults on cue.

A script is a list with one word: ``right`` (the run makes the task's check hold), ``wrong``
(it does not); ``quiet`` in it: the model does not say done. A session opened is never opened
again and knows only what was done in it: a state leak between episodes would show as a check
that reads another episode's work.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from vision.eval.episodes import AgentFault, EnvironmentFault
from vision.eval.tasks import Task
from vision.models import ActResult, CheckResult
from vision.trace.records import Usage


class FakeEpisodes:
    def __init__(self, *, die_in_run: dict[tuple[str, int], int] | None = None, setup_fails: set[str] = frozenset(),
                 together: int = 0):
        # (task, episode) -> how many of its attempts die mid-run (the session gone under the run)
        self.die_in_run = dict(die_in_run or {})
        self.setup_fails = set(setup_fails)
        self.sessions: dict[str, dict[str, Any]] = {}
        self.closed: set[str] = set()
        self.opened = 0
        self.recycled = 0
        self.most_at_once = 0
        self._ids = itertools.count(1)
        # The first ``together`` runs wait for each other (a barrier that breaks after 10 s): the
        # evaluation must have that many episodes running at once.
        self._together = threading.Barrier(together, timeout=10) if together > 1 else None
        self._waited = 0
        self._lock = threading.Lock()

    def open(self, state: str | None = None) -> str:
        with self._lock:
            session = f"s{next(self._ids)}"
            self.sessions[session] = {"did": None, "task": None, "episode": None, "state": state}
            self.opened += 1
            self.most_at_once = max(self.most_at_once, len(self.sessions) - len(self.closed))
            return session

    def close(self, session_id: str) -> None:
        with self._lock:
            self.closed.add(session_id)

    def recycle(self, session_id: str, how: str) -> None:
        assert how in ("reset", "clear") and session_id not in self.closed
        with self._lock:
            self.recycled += 1
        assert self.sessions[session_id]["state"] is None, "a desktop started from a state is never recycled"
        self.sessions[session_id].update(did=None, task=None, episode=None)

    def prepare(self, session_id: str, task: Task, episode: int) -> str:
        if task.id in self.setup_fails:
            raise EnvironmentFault("setup_failed", f"the setup of {task.id} did not complete")
        desk = self.sessions[session_id]
        assert desk["did"] is None and session_id not in self.closed, "a desktop reused"
        assert desk["state"] == task.start.state, "the task's saved state is what its desktop started from"
        desk.update(task=task.id, episode=episode)
        return task.instruction or f"the page's instruction for {task.id} #{episode}"

    def run(self, session_id: str, request: dict[str, Any]) -> ActResult:
        desk = self.sessions[session_id]
        key = (desk["task"], desk["episode"])
        with self._lock:
            dies = self.die_in_run.get(key, 0) > 0
            if dies:
                self.die_in_run[key] -= 1
        if dies:
            return ActResult(trace_id=f"t-{session_id}", status="failed", steps=[], usage=Usage(), report_url="",
                             error={"code": "session_unavailable", "message": "the session's display died"})
        with self._lock:
            wait = self._together is not None and self._waited < self._together.parties
            self._waited += 1
        if wait:
            self._together.wait()
        script = request.get("script") or []
        if "unparseable" in script:
            raise AgentFault("invalid_request", "script[0]: not an action")
        desk["did"] = "right" if "right" in script else "wrong"
        claimed = "quiet" not in script
        checks = self.check(session_id, None) if claimed and request.get("expect") else []
        if claimed and checks and not all(c.passed for c in checks):
            status, error = "failed", {"code": "expectation_failed", "message": "the model said done, but ..."}
        else:
            status, error = ("done" if claimed else "max_steps"), None
        return ActResult(trace_id=f"t-{session_id}", status=status, steps=[{"index": 1}, {"index": 2}],
                         usage=Usage(input_tokens=100, output_tokens=10), checks=checks, error=error,
                         verified=bool(checks) and all(c.passed for c in checks) if claimed else None,
                         report_url=f"/runs/t-{session_id}")

    def check(self, session_id: str, task: Task | None) -> list[CheckResult]:
        right = self.sessions[session_id]["did"] == "right"
        return [CheckResult(check="the task's check", passed=right, saw="right" if right else "wrong", duration_ms=1)]

    def locate(self, session_id: str, target: dict[str, Any]) -> dict[str, Any]:
        return {"exists": True, "visible": True, "matches": 1, "box": {"x": 10, "y": 20, "width": 30, "height": 40},
                "text": None, "value": None}
