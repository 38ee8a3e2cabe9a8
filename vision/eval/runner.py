"""An evaluation: every (agent, task, episode), K at a time, each on a clean desktop; an episode
the environment spoiled is tried again on a fresh one and counted apart.

An episode's outcome is the task's check, never the agent's word: when the model says done the
run checks the expectations itself (the trace says verified or expectation_failed); when the run
ends any other way they are looked at once after it. ``claimed`` is whether the model said done;
a claim the check refutes is a false claim.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from vision.eval.episodes import AgentFault, EnvironmentFault, Episodes
from vision.eval.results import Episode
from vision.eval.tasks import Task, TaskSet
from vision.models.eval import MAX_EPISODES, MAX_PARALLEL, MAX_RETRIES

# How each episode gets a clean desktop: a new one (a warm-pool claim; nothing carries over), the
# worker's own reset (Chromium restarted on a clean profile, launched programs ended), or its
# browser's state cleared without a restart (cookies, storage, caches, permissions, tabs): for
# tasks that live in the browser.
Fresh = Literal["new", "reset", "clear"]
FRESH: tuple[str, ...] = ("new", "reset", "clear")
# A run that ended this way was spoiled by its environment, not decided by its model: the
# session died under it, the provider could not be reached, or the desktop healed mid-run (the
# page the agent worked on is gone), or a person took it over or cancelled it.
ENVIRONMENT_CODES = frozenset({"session_unavailable", "model_call_failed", "session_not_found"})
ENVIRONMENT_STATUSES = frozenset({"interrupted", "done_after_heal", "cancelled", "paused"})


log = logging.getLogger("glassdesk.eval")


@dataclass
class EpisodeContext:
    task: Task
    episode: int
    instruction: str
    session_id: str
    episodes: Episodes


RewardReader = Callable[[Episodes, str, Task], "dict[str, float] | None"]


class Agent(Protocol):
    """What the evaluation measures: one model, or a scripted solver (the MiniWoB++ oracle)."""

    name: str

    def request(self, context: EpisodeContext) -> dict[str, Any]:
        """The run's request fields for this episode besides instruction, budgets and checks:
        ``{"model": ...}``, and a ``script`` for a scripted one."""


@dataclass
class ModelAgent:
    """A model by its provider/model name, as vision/act takes it."""

    name: str

    def request(self, context: EpisodeContext) -> dict[str, Any]:
        return {"model": self.name}


def model_problems(models: list[str], config: Any) -> list[str]:
    """The models of ``models`` this config cannot run (an unknown family, a hosted one without its
    key), one line each. Run, such a model would fail every episode, which measures nothing of it."""
    from desktop.errors import GlassdeskError
    from vision.config import create_provider
    from vision.providers.base import ModelCallError

    problems = []
    for name in models:
        try:
            create_provider(config.resolve(name), "-", config, script=[{"action": "wait"}])
        except (GlassdeskError, ModelCallError) as exc:
            problems.append(f"model {name}: {getattr(exc, 'message', None) or exc}")
    return problems


def run_request(task: Task, instruction: str, agent_fields: dict[str, Any], *, record_video: bool) -> dict[str, Any]:
    """The episode's vision run (pure): the agent's fields, the task's budgets and checks."""
    expect = [e.model_dump(mode="json", exclude_unset=True, by_alias=True) for e in task.expect]
    return {**agent_fields, "instruction": instruction, "max_steps": task.max_steps,
            "budget_seconds": task.budget_seconds, "expect": expect, "record_video": record_video}


def environment_fault_of(result) -> EnvironmentFault | None:
    """Whether a finished run was spoiled by its environment (pure)."""
    code = (result.error or {}).get("code")
    if result.status in ENVIRONMENT_STATUSES:
        return EnvironmentFault(result.status, (result.error or {}).get("message") or f"the run ended {result.status}")
    if code in ENVIRONMENT_CODES:
        return EnvironmentFault(code, (result.error or {}).get("message", code))
    return None


class Evaluation:
    def __init__(self, episodes: Episodes, tasks: TaskSet, agents: list[Agent], *, episodes_per_task: int = 1,
                 parallel: int = 1, retries: int = 2, record_video: bool = False, reward: RewardReader | None = None,
                 fresh: Fresh = "new", on_episode: Callable[[Episode], None] | None = None):
        problems = []
        if not 1 <= episodes_per_task <= MAX_EPISODES:
            problems.append(f"episodes: from 1 to {MAX_EPISODES} (got {episodes_per_task})")
        if not 1 <= parallel <= MAX_PARALLEL:
            problems.append(f"parallel: from 1 to {MAX_PARALLEL} (got {parallel})")
        if fresh not in FRESH:
            problems.append(f"fresh: one of {', '.join(FRESH)} (got {fresh!r})")
        if not 0 <= retries <= MAX_RETRIES:
            problems.append(f"retries: from 0 to {MAX_RETRIES} (got {retries})")
        names = [a.name for a in agents]
        if not agents or len(set(names)) != len(names):
            problems.append("models: at least one, each once")
        if problems:
            raise ValueError("; ".join(problems))
        self.episodes, self.tasks, self.agents = episodes, tasks, agents
        self.episodes_per_task, self.parallel, self.retries = episodes_per_task, parallel, retries
        self.record_video = record_video
        self.reward = reward
        self.fresh = fresh
        self._kept = threading.local()  # a worker's own desktop between episodes (fresh reset or clear)
        self._kept_sessions: set[str] = set()
        self.on_episode = on_episode
        self._lock = threading.Lock()

    def jobs(self) -> list[tuple[Agent, Task, int]]:
        """Episode by episode, every agent and task in each: a stopped evaluation has even counts."""
        return [(agent, task, episode) for episode in range(1, self.episodes_per_task + 1)
                for task in self.tasks.tasks for agent in self.agents]

    def run(self) -> list[Episode]:
        try:
            with ThreadPoolExecutor(self.parallel, thread_name_prefix="glassdesk-eval") as pool:
                return list(pool.map(lambda job: self._episode(*job), self.jobs()))
        finally:
            for session in list(self._kept_sessions):
                self.episodes.close(session)
            self._kept_sessions.clear()

    def _desktop(self, task: Task) -> str:
        """A clean desktop for the next attempt: a new one, or (``fresh`` reset or clear) this
        worker's own made clean again. A task that starts from a saved state gets a new one."""
        if task.start.state:
            return self.episodes.open(task.start.state)
        kept = getattr(self._kept, "session", None)
        if kept is None:
            return self.episodes.open()
        self._kept.session = None
        try:
            self.episodes.recycle(kept, self.fresh)
        except EnvironmentFault:
            self._let_go(kept)
            raise
        return kept

    def _done_with(self, session: str, task: Task, *, spoiled: bool) -> None:
        # A desktop an attempt was spoiled on is never used again; one started from a state is not
        # made clean for another episode (its state is gone with a clear or a reset).
        if self.fresh == "new" or spoiled or task.start.state:
            self._let_go(session)
        else:
            self._kept.session = session
            with self._lock:
                self._kept_sessions.add(session)

    def _let_go(self, session: str) -> None:
        with self._lock:
            self._kept_sessions.discard(session)
        self.episodes.close(session)

    def _episode(self, agent: Agent, task: Task, number: int) -> Episode:
        faults: list[str] = []
        for _attempt in range(self.retries + 1):
            started = time.monotonic()
            try:
                episode = self._attempt(agent, task, number, started)
            except EnvironmentFault as fault:
                faults.append(str(fault))
                continue
            episode.environment_errors = faults
            return self._report(episode)
        return self._report(Episode(model=agent.name, task=task.id, episode=number, outcome="environment_error",
                                    environment_errors=faults, wall_s=0.0))

    def _attempt(self, agent: Agent, task: Task, number: int, started: float) -> Episode:
        session = self._desktop(task)
        spoiled = True
        try:
            instruction = self.episodes.prepare(session, task, number)
            ready = time.monotonic()

            def ended(**fields) -> Episode:
                return Episode(model=agent.name, task=task.id, episode=number, instruction=instruction,
                               overhead_s=round(ready - started, 3), wall_s=round(time.monotonic() - started, 3),
                               **fields)

            try:
                fields = agent.request(EpisodeContext(task, number, instruction, session, self.episodes))
            except EnvironmentFault:
                raise
            except Exception as exc:  # the agent could not even start (the oracle read no solution): its failure
                spoiled = False
                return ended(outcome="failure", status="not_started",
                             error={"code": "agent_failed", "message": str(exc)})
            try:
                result = self.episodes.run(session, run_request(task, instruction, fields,
                                                                record_video=self.record_video))
            except AgentFault as refused:
                spoiled = False
                return ended(outcome="failure", status="refused",
                             error={"code": refused.code, "message": refused.message})
            fault = environment_fault_of(result)
            if fault is not None:
                raise fault
            # The model said done: the run checked the expectations then (a refuted claim ends the run
            # failed, expectation_failed); otherwise they are looked at now.
            claimed = result.status == "done" or (result.error or {}).get("code") == "expectation_failed"
            checks = result.checks if claimed and result.checks else self.episodes.check(session, task)
            success = bool(checks) and all(c.passed for c in checks)
            given = self._reward(session, task)
            spoiled = False
            return ended(outcome="success" if success else "failure", claimed=claimed, status=result.status,
                         error=result.error, steps=len(result.steps), tokens=result.usage.total,
                         trace_id=result.trace_id, report_url=result.report_url,
                         checks=[c.model_dump() for c in checks], reward=given)
        finally:
            self._done_with(session, task, spoiled=spoiled)

    def _reward(self, session: str, task: Task) -> dict[str, float] | None:
        """The benchmark's own reward, for the record: the check decided the outcome already."""
        if self.reward is None:
            return None
        try:
            return self.reward(self.episodes, session, task)
        except Exception as exc:
            log.warning("eval: the reward of %s could not be read: %s", task.id, exc)
            return None

    def _report(self, episode: Episode) -> Episode:
        if self.on_episode is not None:
            with self._lock:
                self.on_episode(episode)
        return episode
