"""A provider that is a plain function: observation in, turn out.

For tests and for embedders whose model code lives in their own process, in the spirit of
pydantic-ai's FunctionModel. The function sees exactly what a real provider sees (the settled
frame, the page URL, last turn's results and the loop's note) and returns a ``ModelTurn`` in display
pixels; it may raise ``ModelCallError`` to act out an API failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vision.actions import Action, CallResult, ToolCall
from vision.providers.base import ModelTurn, Observation, Provider


@dataclass
class Context:
    """What one call of the function sees."""

    observation: Observation
    results: list[CallResult]
    note: str | None
    turn: int  # 1-based: how many times the function has been called, this call included


TurnFunction = Callable[[Context], ModelTurn]


class FunctionProvider(Provider):
    def __init__(self, function: TurnFunction, *, name: str = "function", instruction: str = ""):
        super().__init__(instruction, model=name, system="")
        self.name = name
        self.function = function
        self.turns = 0
        self.acknowledged: list[str] = []

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        self.turns += 1
        return self.function(Context(observation, list(results), note, self.turns))

    def acknowledge(self, safety_check_ids: list[str]) -> None:
        self.acknowledged += safety_check_ids


def calls(*actions: Action, text: str = "") -> ModelTurn:
    """A turn that runs these actions, one tool call each."""
    return ModelTurn(calls=[ToolCall(id=f"call-{i}", name=a.action, raw=a.model_dump(), actions=[a])
                            for i, a in enumerate(actions, 1)], text=text)
