"""The small interface every model provider implements.

A provider owns one conversation with one model. The loop calls ``turn`` with the current
observation and the results of the calls the model made last turn; the provider builds the request
in its model's own terms (image size, coordinate space, tool format), calls its SDK, and returns the
model's calls already converted to display-pixel Actions. Coordinates are converted at this edge,
with vision.coords, and nowhere else.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from desktop.frame import Frame
from desktop.models import ElementAt
from vision.actions import CallResult, SafetyCheck, ToolCall
from vision.coords import Space
from vision.trace.records import Usage, redact

__all__ = ["Usage"]  # providers report their token counts in the trace's own type


@dataclass
class Observation:
    """What the model is shown: the settled full-resolution frame, plus page context."""

    frame: Frame
    url: str | None = None
    # What the page has under a display pixel now (the frame is the settled screen), when the browser
    # is in front: a desktop.models.ElementAt, None when it cannot say (desktop.session.manager
    # Session.element_at). For a model that runs here (the offline ocr one), never sent anywhere.
    element_at: Callable[[int, int], ElementAt | None] | None = None


@dataclass
class ModelTurn:
    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""
    reasoning: str = ""
    usage: Usage = field(default_factory=Usage)
    # The model ended its turn without calls (Anthropic end_turn, OpenAI message): done.
    done: bool = False
    answer: str | None = None
    # OpenAI pending_safety_checks: the loop stops with needs_confirmation.
    safety_checks: list[SafetyCheck] = field(default_factory=list)
    # The reply could not be parsed at all (chat models): the text of the problem.
    parse_error: str | None = None
    # Model-space image size the model saw this turn (for the trace).
    image_size: tuple[int, int] | None = None


class ModelCallError(Exception):
    """The model API call failed. ``transient`` ones (429, 5xx, timeout) are retried by the loop."""

    def __init__(self, message: str, *, transient: bool = False, retry_after: float | None = None,
                 status: int | None = None):
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after
        self.status = status


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a rate-limited API asks us to wait: ``retry-after-ms``, else ``retry-after`` in
    seconds or as an HTTP date. None when absent or unreadable."""
    try:
        if ms := headers.get("retry-after-ms"):
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def redact_key(text: str, api_key: str | None) -> str:
    """An SDK error text with the API key, and anything shaped like one, taken out."""
    return redact(text, [api_key] if api_key else [])


class Provider(abc.ABC):
    """One conversation with one model about one instruction."""

    #: "family/model", e.g. "anthropic/claude-sonnet-4-5"
    name: str
    #: its contract answers each call with the state right after it (Gemini's function responses
    #: carry the URL): the loop then reads the page's URL after every call, not once per step
    answers_each_call: bool = False

    #: it can be shown set-of-marks (vision/act's ``marks``): a marked screenshot and the marks' list
    #: as a note. Not a model that reads the screen's text itself (the marks would cover it) nor one
    #: shown the screen and the instruction alone (a grounding model).
    sees_marks: bool = True

    def __init__(self, instruction: str, *, model: str, system: str):
        self.instruction = instruction
        self.model = model
        self.system = system

    def coordinate_space(self, frame: Frame) -> Space | None:
        """The coordinates this model points with, on a screenshot like ``frame`` (a mark's centre
        is listed in them); None: display pixels."""
        return None

    @abc.abstractmethod
    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        """Send the observation (and last turn's results) and return the model's next turn.

        ``note`` is extra text for the model, e.g. why its previous reply could not be parsed.
        Raises ModelCallError on API failure.
        """

    def acknowledge(self, safety_check_ids: list[str]) -> None:
        """The operator approved these pending safety checks; the provider sends them back."""
        raise NotImplementedError(f"{self.name} raises no safety checks")
