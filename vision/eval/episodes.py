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


class EpisodeFault(Exception):
    """Why an episode did not go as a run normally does: a code and a sentence."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


class EnvironmentFault(EpisodeFault):
    """The episode could not be carried out for a reason that is not the agent's."""


class AgentFault(EpisodeFault):
    """The agent's run was refused as asked (a script that does not parse, a model the server
    cannot run): the episode is the agent's failure, with this code, not the environment's."""


# A run refused with these codes was refused for what the agent asked: not a fault of the desktop.
REFUSED_RUN_CODES = frozenset({"invalid_request", "invalid_action", "model_unavailable"})


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


def plain_clicks(task: Task) -> list[str] | None:
    """The selectors of a setup of clicks by selector alone (MiniWoB++'s START), which are run as
    page operations, the same real pointer (without its glide), without recording a QA run of their
    own, which costs about a second; None for any other setup (pure)."""
    selectors = [step.selector for step in task.setup if step.action == "click" and step.selector
                 and set(step.model_dump(exclude_unset=True)) <= {"action", "selector"}]
    return selectors if len(selectors) == len(task.setup) else None


class FlowEpisodes:
    """The port's steps, once, over the primitives a subclass gives: a session made and ended, a
    desktop reset or its browser cleared, a QA flow run, a page opened and clicked, the page's
    text, a vision run and a page read. ``UNREACHABLE``: what those raise when the server or the
    desktop fails (an environment's fault); anything else is a defect and is raised as it is."""

    UNREACHABLE: tuple[type[BaseException], ...] = ()

    # What a subclass does not give it cannot do: said so when called, rather than answering None
    def _create(self, state: str | None) -> str: raise NotImplementedError
    def _delete(self, session_id: str) -> None: ...
    def _recycle(self, session_id: str, how: str) -> None: ...
    def _flow(self, session_id: str, body: dict[str, Any]) -> Any: ...
    def _navigate(self, session_id: str, url: str, settle: bool) -> None: ...
    def _click(self, session_id: str, selector: str, glide: bool) -> None: ...
    def _text(self, session_id: str, selector: str) -> str: raise NotImplementedError
    def _act(self, session_id: str, request: dict[str, Any]) -> ActResult: raise NotImplementedError
    def _locate(self, session_id: str, target: dict[str, Any]) -> dict[str, Any]: raise NotImplementedError

    def _fault(self, what: str, exc: BaseException) -> EnvironmentFault:
        return EnvironmentFault(getattr(exc, "code", type(exc).__name__), f"{what}: {getattr(exc, 'message', exc)}")

    def open(self, state: str | None = None) -> str:
        try:
            return self._create(state)
        except self.UNREACHABLE as exc:
            raise self._fault("a desktop for the episode did not start", exc) from exc

    def close(self, session_id: str) -> None:
        try:
            self._delete(session_id)
        except self.UNREACHABLE:  # gone already: what the next episode needs (a clean desktop) holds
            pass

    def recycle(self, session_id: str, how: str) -> None:
        try:
            self._recycle(session_id, how)
        except self.UNREACHABLE as exc:
            raise self._fault(f"the desktop could not be made clean ({how})", exc) from exc

    def prepare(self, session_id: str, task: Task, episode: int) -> str:
        url = task.start_url(episode)
        try:
            clicks = plain_clicks(task)
            if clicks is not None:  # the page opened and clicked by page operations: no QA run recorded
                if url:  # answered on a still display only when no click (which settles it) follows
                    self._navigate(session_id, url, settle=not clicks)
                # Not the agent's input: the pointer goes there at once, without the glide that
                # shows a person where an agent acts.
                for selector in clicks:
                    self._click(session_id, selector, glide=False)
            elif task.setup or url:
                steps = [s.model_dump(mode="json", exclude_unset=True, by_alias=True) for s in task.setup]
                flow = self._flow(session_id, {"start_url": url, "name": f"setup of {task.id}",
                                               "steps": steps or [{"action": "wait", "timeout_ms": 1}]})
                if not flow.success:
                    raise EnvironmentFault("setup_failed", f"the setup of {task.id} did not complete: "
                                                           f"{flow.failure_reason}")
            if task.instruction is not None:
                return task.instruction
            assert task.instruction_from is not None  # a task gives one of the two (its model's check)
            text = " ".join(self._text(session_id, task.instruction_from).split())
        except EnvironmentFault:
            raise
        except self.UNREACHABLE as exc:
            raise self._fault(f"the setup of {task.id}", exc) from exc
        if not text:
            raise EnvironmentFault("setup_failed", f"{task.instruction_from} holds no instruction after the setup")
        return text

    def run(self, session_id: str, request: dict[str, Any]) -> ActResult:
        try:
            return self._act(session_id, request)
        except self.UNREACHABLE as exc:
            code = getattr(exc, "code", None)
            if code in REFUSED_RUN_CODES:
                raise AgentFault(code, getattr(exc, "message", str(exc))) from exc
            raise self._fault("the run", exc) from exc

    def check(self, session_id: str, task: Task) -> list[CheckResult]:
        """Each expectation looked at once (no waiting: the run has ended)."""
        steps = [e.model_copy(update={"timeout_ms": 1}).as_step().model_dump(mode="json", exclude_unset=True,
                                                                            by_alias=True) for e in task.expect]
        try:
            flow = self._flow(session_id, {"steps": steps, "name": f"check of {task.id}"})
        except self.UNREACHABLE as exc:
            raise self._fault("the check", exc) from exc
        return checks_of(flow, [e.words() for e in task.expect])

    def locate(self, session_id: str, target: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._locate(session_id, target)
        except self.UNREACHABLE as exc:
            raise self._fault("a page read", exc) from exc
