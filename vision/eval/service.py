"""Evaluations run by the server (POST /api/v1/evals): the same Evaluation as `glassdesk eval`,
over this process's own services (``ServiceEpisodes``), in the background, its progress readable
while it runs and its result kept in the data dir beside the CLI's (``evals/EVAL_ID/result.json``)."""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
from pathlib import Path
from typing import Any

from desktop.errors import GlassdeskError, InvalidRequest
from desktop.models import LocateRequest, Target, target_of
from vision.errors import EvalNotFound
from vision.eval import miniwob
from vision.eval.episodes import FlowEpisodes
from vision.eval.results import Episode, EvalResult, now, result_path, summarise
from vision.eval.runner import FRESH, Agent, Evaluation, ModelAgent, model_problems
from vision.eval.tasks import TaskError, TaskSet
from vision.models import ActRequest, ActResult
from vision.models.eval import EvalRequest, EvalStatus
from vision.trace.files import atomic_write

log = logging.getLogger("glassdesk.eval")


class ServiceEpisodes(FlowEpisodes):
    """Episodes over this process's application service: what the REST door's calls would do,
    without the HTTP."""

    UNREACHABLE = (GlassdeskError,)

    def __init__(self, glassdesk: Any):
        self.glassdesk = glassdesk
        self.desktops = glassdesk.desktops

    def _create(self, state: str | None) -> str:
        return self.desktops.create(state=state).id

    def _delete(self, session_id: str) -> None:
        self.desktops.delete(session_id)

    def _recycle(self, session_id: str, how: str) -> None:
        if how == "reset":
            self.desktops.reset(session_id)
        else:
            self.desktops.pages.clear_state(session_id)

    def _flow(self, session_id: str, body: dict[str, Any]) -> Any:
        from vision.models.qa import VerifyUserFlowRequest

        return self.glassdesk.qa.verify_user_flow(session_id, VerifyUserFlowRequest.model_validate(body))

    def _navigate(self, session_id: str, url: str, settle: bool) -> None:
        self.desktops.pages.navigate(session_id, "goto", url, settle=settle)

    def _click(self, session_id: str, selector: str, glide: bool) -> None:
        self.desktops.pages.click(session_id, Target(selector=selector), glide=glide)

    def _text(self, session_id: str, selector: str) -> str:
        return str(self.desktops.pages.content(session_id, "text", selector).content)

    def _act(self, session_id: str, request: dict[str, Any]) -> ActResult:
        return self.glassdesk.act(session_id, ActRequest.model_validate(request))

    def _locate(self, session_id: str, target: dict[str, Any]) -> dict[str, Any]:
        request = LocateRequest.model_validate(target)
        return self.desktops.pages.probe(session_id, target_of(request), request.state, request.timeout_ms)


class EvalService:
    def __init__(self, glassdesk: Any, root: Path):
        self.glassdesk = glassdesk
        self.root = Path(root)
        self._running: dict[str, EvalStatus] = {}
        self._lock = threading.Lock()

    def start(self, request: EvalRequest) -> EvalStatus:
        """Checked whole before anything runs (every problem at once), then run in the background."""
        problems = []
        if "oracle" in request.models and not (isinstance(request.tasks, str)
                                               and request.tasks.startswith(miniwob.PREFIX)):
            problems.append("models: oracle solves MiniWoB++'s tasks only (give tasks as miniwob:...)")
        if len(set(request.models)) != len(request.models):
            problems.append("models: each once")
        if request.fresh not in FRESH:  # the schema says it too
            problems.append(f"fresh: one of {', '.join(FRESH)}")
        problems += model_problems([m for m in request.models if m != "oracle"], self.glassdesk.config)
        tasks = None
        try:
            tasks = self._tasks(request, base_url="http://127.0.0.1:0")  # the names checked now, served later
        except TaskError as exc:
            problems.append(str(exc))
        if problems or tasks is None:  # no tasks: their problem is among the problems
            raise InvalidRequest("; ".join(problems))
        eval_id = f"eval-{now()[:10]}-{secrets.token_hex(3)}"
        total = len(request.models) * len(tasks.tasks) * request.episodes
        status = EvalStatus(eval_id=eval_id, status="running", episodes_done=0, episodes_total=total)
        with self._lock:
            self._running[eval_id] = status
        threading.Thread(target=self._run, args=(eval_id, request), name=f"glassdesk-{eval_id}", daemon=True).start()
        return status

    @staticmethod
    def _tasks(request: EvalRequest, base_url: str) -> TaskSet:
        if isinstance(request.tasks, str):
            if not request.tasks.startswith(miniwob.PREFIX):
                raise TaskError("tasks: miniwob:... or a list of tasks")
            return miniwob.tasks(request.tasks, base_url)
        from vision.eval.tasks import parse_tasks

        return parse_tasks({"name": request.name or "tasks", "tasks": request.tasks}, "tasks")

    def _run(self, eval_id: str, request: EvalRequest) -> None:
        episodes: list[Episode] = []

        def progress(episode: Episode) -> None:
            episodes.append(episode)
            self.glassdesk.metrics.observe_episode(episode.model, episode.task, episode.outcome, episode.false_claim)
            with self._lock:
                self._running[eval_id].episodes_done = len(episodes)

        try:
            with contextlib.ExitStack() as stack:
                miniwob_spec = isinstance(request.tasks, str)
                base = stack.enter_context(miniwob.serve()) if miniwob_spec else ""
                tasks = self._tasks(request, base)
                agents: list[Agent] = [miniwob.Oracle() if m == "oracle" else ModelAgent(m) for m in request.models]
                result = EvalResult(eval_id=eval_id, name=request.name or tasks.name, started_at=now(),
                                    models=request.models, tasks=[t.id for t in tasks.tasks],
                                    episodes_per_task=request.episodes, parallel=request.parallel)
                Evaluation(ServiceEpisodes(self.glassdesk), tasks, agents, episodes_per_task=request.episodes,
                           parallel=request.parallel, retries=request.retries, record_video=request.record_video,
                           fresh=request.fresh, reward=miniwob.reward if miniwob_spec else None,
                           on_episode=progress).run()
            result = summarise(result.model_copy(update={"episodes": episodes, "finished_at": now()}))
            path = result_path(self.root, eval_id)
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write(path, result.model_dump_json(indent=1).encode())
            final = {"status": "done"}
        except Exception as exc:  # reported by GET, never lost in a thread
            log.exception("evaluation %s failed", eval_id)
            final = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        with self._lock:
            self._running[eval_id] = self._running[eval_id].model_copy(update=final)

    def get(self, eval_id: str) -> EvalStatus:
        with self._lock:
            running = self._running.get(eval_id)
        path = result_path(self.root, eval_id)
        if running is not None and running.status != "done":
            return running
        try:
            result = EvalResult.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise EvalNotFound(f"no evaluation {eval_id!r}; list the evaluations to see which exist") from None
        done = len(result.episodes)
        return EvalStatus(eval_id=eval_id, status="done", episodes_done=done, episodes_total=done, result=result)

    def list(self) -> list[dict[str, Any]]:
        found = {}
        if self.root.is_dir():
            for path in sorted(self.root.glob("eval-*/result.json")):
                with contextlib.suppress(OSError, ValueError):
                    data = json.loads(path.read_text(encoding="utf-8"))
                    found[data["eval_id"]] = {"eval_id": data["eval_id"], "status": "done", "name": data["name"],
                                              "started_at": data["started_at"], "models": data["models"]}
        with self._lock:
            for eval_id, status in self._running.items():
                found.setdefault(eval_id, {"eval_id": eval_id, "status": status.status})
        return list(found.values())


