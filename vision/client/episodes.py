"""The evaluation's port (vision.eval.episodes.Episodes) over glassdesk's REST API, through this
client: a session per episode, the setup and the check as QA flows, the run as vision/act."""

from __future__ import annotations

from typing import Any

import httpx2

from vision.client.errors import ApiError
from vision.eval.episodes import EnvironmentFault, checks_of
from vision.eval.tasks import Task
from vision.models import ActResult, CheckResult

# What the server answering an error, or not answering at all, raises here: an environment's
# fault. Anything else is a defect of this code and is raised as it is.
UNREACHABLE = (ApiError, httpx2.HTTPError)


class ClientEpisodes:
    """Episodes over the REST API, through a GlassdeskClient."""

    def __init__(self, client: Any):
        self.client = client

    def _fault(self, what: str, exc: Exception) -> EnvironmentFault:
        return EnvironmentFault(getattr(exc, "code", type(exc).__name__), f"{what}: {getattr(exc, 'message', exc)}")

    def open(self, state: str | None = None) -> str:
        try:
            return self.client.create_session(**({"state": state} if state else {})).id
        except UNREACHABLE as exc:
            raise self._fault("a desktop for the episode did not start", exc) from exc

    def close(self, session_id: str) -> None:
        try:
            self.client.session(session_id).delete()
        except UNREACHABLE:  # gone already: what the next episode needs (a clean desktop) holds
            pass

    def recycle(self, session_id: str, how: str) -> None:
        session = self.client.session(session_id)
        try:
            if how == "reset":
                session.reset()
            else:
                session.page.clear_state()
        except UNREACHABLE as exc:
            raise self._fault(f"the desktop could not be made clean ({how})", exc) from exc

    def prepare(self, session_id: str, task: Task, episode: int) -> str:
        session = self.client.session(session_id)
        url = task.start_url(episode)
        try:
            if task.setup or url:
                steps = [s.model_dump(mode="json", exclude_unset=True, by_alias=True) for s in task.setup]
                run = session.qa.verify_user_flow(start_url=url, steps=steps or [{"action": "wait", "timeout_ms": 1}],
                                                  name=f"setup of {task.id}")
                if not run.success:
                    raise EnvironmentFault("setup_failed", f"the setup of {task.id} did not complete: "
                                                           f"{run.failure_reason}")
            if task.instruction is not None:
                return task.instruction
            content = session.page.content(format="text", selector=task.instruction_from)
            text = " ".join(str(content.content).split())
        except EnvironmentFault:
            raise
        except UNREACHABLE as exc:
            raise self._fault(f"the setup of {task.id}", exc) from exc
        if not text:
            raise EnvironmentFault("setup_failed", f"{task.instruction_from} holds no instruction after the setup")
        return text

    def run(self, session_id: str, request: dict[str, Any]) -> ActResult:
        try:
            return self.client.session(session_id).act(**request)
        except UNREACHABLE as exc:
            raise self._fault("the run", exc) from exc

    def check(self, session_id: str, task: Task) -> list[CheckResult]:
        steps = [e.model_copy(update={"timeout_ms": 1}).as_step().model_dump(mode="json", exclude_unset=True,
                                                                            by_alias=True) for e in task.expect]
        try:
            run = self.client.session(session_id).qa.verify_user_flow(steps=steps, name=f"check of {task.id}")
        except UNREACHABLE as exc:
            raise self._fault("the check", exc) from exc
        return checks_of(run, [e.words() for e in task.expect])

    def locate(self, session_id: str, target: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.client.session(session_id).page.locate(**target).model_dump()
        except UNREACHABLE as exc:
            raise self._fault("a page read", exc) from exc
