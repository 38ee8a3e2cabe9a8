"""Packs: common jobs done with the vision loop, worded for the model family that will run them.

A pack turns a request ("click Sign in", "read the screen", "fill these fields") into one or more
vision runs and reads their outcome. It knows nothing of the door it is called through: it is given
``act(instruction, max_steps, offset, label)``, a coroutine that runs one instruction (the MCP
tools pass one that reports progress to their client).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from vision.models import ActResult

Act = Callable[[str, int, int, str], Awaitable[ActResult]]

CLICK_STEPS = 3
READ_STEPS = 2
FIELD_STEPS = 4  # steps one form field may take: find, click, type, done


def quote(text: str) -> str:
    """A value inside the ocr grammar's double quotes."""
    return text.replace('"', "'")


def click_instruction(target: str, family: str) -> str:
    instruction = f'click "{quote(target)}"'
    if family != "ocr":  # the ocr grammar takes the bare command; a model needs to know when to stop
        instruction += ". Click it once, then stop and say done."
    return instruction


def read_instruction(family: str) -> str:
    instruction = "read the screen"
    if family != "ocr":
        instruction += (": reply with all the text visible on the screen, top to bottom, and do not click, "
                        "type or press anything.")
    return instruction


def field_instruction(label: str, value: str, family: str) -> str:
    instruction = f'type "{quote(value)}" into "{quote(label)}"'
    if family != "ocr":
        instruction += (f". The field is the input next to or below the label {label!r}: click it, "
                        "select what it holds, type the value, then stop and say done.")
    return instruction


def clicked_points(result: ActResult) -> list[dict[str, int]]:
    return [{"x": a["x"], "y": a["y"]} for s in result.steps for a in s.actions
            if a.get("action") in ("click", "double_click") and a.get("x") is not None]


async def click_anywhere(act: Act, target: str, family: str) -> tuple[ActResult, list[dict[str, int]]]:
    result = await act(click_instruction(target, family), CLICK_STEPS, 0, "")
    return result, clicked_points(result)


async def extract_visible_text(act: Act, family: str) -> ActResult:
    return await act(read_instruction(family), READ_STEPS, 0, "")


@dataclass
class FormOutcome:
    fields: list[tuple[str, ActResult]] = field(default_factory=list)

    @property
    def last(self) -> ActResult | None:
        return self.fields[-1][1] if self.fields else None


async def fill_form_by_label(act: Act, fields: dict[str, str], family: str) -> FormOutcome:
    """One run per field: the ocr grammar takes one command per instruction, and a failed field
    then says which one failed while the others are still filled."""
    outcome, steps_so_far = FormOutcome(), 0
    for label, value in fields.items():
        result = await act(field_instruction(label, value, family), FIELD_STEPS, steps_so_far, f"{label}: ")
        steps_so_far += len(result.steps)
        outcome.fields.append((label, result))
        if result.status == "paused":
            break  # a person holds the desktop: the next field would only cancel this one
    return outcome
