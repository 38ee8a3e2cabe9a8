"""Replays a given list of actions, one per turn: for demos, tests and benchmarks.

Each entry is an action dict in display pixels (``{"action": "click", "x": 10, "y": 20}``),
validated up front so a bad script is refused before anything runs.
"""

from __future__ import annotations

from pydantic import ValidationError

from desktop.errors import describe_validation
from vision.actions import CallResult, ToolCall, parse_action
from vision.errors import InvalidRequest
from vision.providers.base import ModelTurn, Observation, Provider


class ScriptedProvider(Provider):
    def __init__(self, instruction: str, *, model: str = "scripted", system: str = "",
                 script: list[dict] | None = None):
        super().__init__(instruction, model=model, system=system)
        self.name = "scripted"
        if not script:
            raise InvalidRequest("the scripted model needs a non-empty 'script': a list of actions to replay")
        self.script = []
        for index, entry in enumerate(script):
            try:
                self.script.append(parse_action(entry))
            except ValidationError as exc:
                raise InvalidRequest(f"script[{index}]: {describe_validation(exc)}") from exc
        self._next = 0

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        if self._next >= len(self.script):
            return ModelTurn(done=True, answer="script finished",
                             image_size=(observation.frame.width, observation.frame.height))
        action = self.script[self._next]
        self._next += 1
        call = ToolCall(id=f"script-{self._next}", name=action.action, raw=action.model_dump(), actions=[action])
        return ModelTurn(calls=[call], text=f"step {self._next} of {len(self.script)}",
                         image_size=(observation.frame.width, observation.frame.height))
