"""OpenAI computer use through the Responses API, with the official SDK.

Two tool flavours, which differ in their coordinate space:

- ``computer_use_preview`` (models ``computer-use-preview*``): the tool declares a display size and
  we send a screenshot scaled to exactly that size, so coordinates are absolute pixels of it.
- ``computer`` (GA, every other model): nothing is declared; coordinates are pixels of the
  screenshot sent, and one call may carry a batch of actions.

The conversation lives on the server (``previous_response_id``): each turn sends only what is new,
a ``computer_call_output`` screenshot per call of the last response. Model coordinates become
display pixels here, at the provider's edge, by the pure converters of ``vision.converters.openai``
(shared with the ``/computer/openai`` executor).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Literal

import openai

from desktop.frame import Frame
from vision import coords
from vision.actions import CallResult, SafetyCheck, ToolCall

# The tool's actions and output are converted by vision.converters.openai, shared with the
# /computer/openai executor; re-exported here for the provider's callers.
from vision.converters.openai import (  # noqa: F401
    SCROLL_PX_PER_NOTCH,
    WAIT_MS,
    data_url,
    key_name,
    keypress_chord,
    map_action,
    map_actions,
    screenshot_output,
    scroll_actions,
)
from vision.providers.base import (
    ModelCallError,
    ModelTurn,
    Observation,
    Provider,
    Usage,
    redact_key,
    retry_after,
)

ToolKind = Literal["computer_use_preview", "computer"]


@dataclass(frozen=True)
class ToolFlavour:
    kind: ToolKind
    #: the screenshot size the model sees; None means the frame as captured
    image_size: tuple[int, int] | None
    #: input_image detail; "original" keeps the GA model's pixels equal to the screenshot's
    detail: str


FLAVOURS: dict[ToolKind, ToolFlavour] = {
    "computer_use_preview": ToolFlavour("computer_use_preview", (1280, 720), "high"),
    "computer": ToolFlavour("computer", None, "original"),
}

#: model-name prefix -> tool flavour; models not listed get the GA ``computer`` tool.
MODEL_TOOLS: dict[str, ToolKind] = {
    "computer-use-preview": "computer_use_preview",
}

ENVIRONMENT = "linux"


def tool_for_model(model: str) -> ToolKind:
    for prefix, kind in MODEL_TOOLS.items():
        if model.startswith(prefix):
            return kind
    return "computer"


# --- errors --------------------------------------------------------------------------------------

_TRANSIENT_STATUS = {408, 409, 429}
def to_model_call_error(exc: openai.OpenAIError, api_key: str | None) -> ModelCallError:
    if isinstance(exc, openai.APITimeoutError):
        return ModelCallError("OpenAI API call timed out", transient=True)
    if isinstance(exc, openai.APIConnectionError):
        return ModelCallError(redact_key(f"could not reach the OpenAI API: {exc.message}", api_key), transient=True)
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = body.get("message") or exc.message
        status = exc.status_code
        # An exhausted quota answers 429 too, but waiting will not refill it.
        transient = (status in _TRANSIENT_STATUS or status >= 500) and body.get("code") != "insufficient_quota"
        return ModelCallError(redact_key(f"OpenAI API error {status}: {detail}", api_key), transient=transient,
                              retry_after=retry_after(exc.response.headers) if transient else None, status=status)
    return ModelCallError(redact_key(f"OpenAI API call failed: {exc}", api_key))


# --- the provider --------------------------------------------------------------------------------


def _text(text: str) -> dict[str, str]:
    return {"type": "input_text", "text": text}


class OpenAIProvider(Provider):
    def __init__(self, instruction: str, *, model: str, system: str, api_key: str | None = None,
                 base_url: str | None = None, tool: ToolKind | None = None,
                 image_size: tuple[int, int] | None = None, reasoning_summary: str | None = "concise",
                 timeout: float = 120.0):
        model = model.removeprefix("openai/")
        super().__init__(instruction, model=model, system=system)
        self.name = f"openai/{model}"
        self.flavour = FLAVOURS[tool or tool_for_model(model)]
        self.image_size = image_size or self.flavour.image_size
        self.reasoning_summary = reasoning_summary
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not self._api_key:
            raise ModelCallError("no OpenAI API key: set OPENAI_API_KEY in the environment of the glassdesk server")
        # Retries belong to the loop, which knows the budget; the SDK would retry twice on its own.
        self._client = openai.OpenAI(api_key=self._api_key, base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                                     max_retries=0, timeout=timeout)
        self._previous_id: str | None = None
        self._open_calls: dict[str, list[SafetyCheck]] = {}  # call_id -> its pending checks, last response
        self._acknowledged: set[str] = set()

    def tool(self, space: coords.Space) -> dict[str, Any]:
        if self.flavour.kind == "computer_use_preview":
            return {"type": "computer_use_preview", "display_width": space.width, "display_height": space.height,
                    "environment": ENVIRONMENT}
        return {"type": "computer"}

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        frame = observation.frame
        space = self.coordinate_space(frame)
        image_url = data_url(frame.scaled_png(space.width, space.height))
        request: dict[str, Any] = {
            "model": self.model,
            "tools": [self.tool(space)],
            "input": self._input(image_url, results, note),
            "truncation": "auto",
        }
        if self.system:
            # Instructions are not carried over by previous_response_id: send them every turn.
            request["instructions"] = self.system
        if self._previous_id:
            request["previous_response_id"] = self._previous_id
        if self.reasoning_summary:
            request["reasoning"] = {"summary": self.reasoning_summary}
        try:
            response = self._client.responses.create(**request)
        except openai.OpenAIError as exc:
            raise to_model_call_error(exc, self._api_key) from None
        if response.error:
            transient = response.error.code in ("server_error", "rate_limit_exceeded")
            raise ModelCallError(redact_key(f"OpenAI response failed: {response.error.code}: {response.error.message}",
                                         self._api_key), transient=transient)
        model_turn, open_calls = _parse(response, space)
        # Only a successful call moves the conversation on, so a retried turn resends the same input.
        self._previous_id = response.id
        self._open_calls = open_calls
        self._acknowledged = set()
        return model_turn

    def acknowledge(self, safety_check_ids: list[str]) -> None:
        pending = {s.id for checks in self._open_calls.values() for s in checks}
        unknown = [i for i in safety_check_ids if i not in pending]
        if unknown:
            raise ValueError(f"no pending safety check with id {', '.join(unknown)}")
        self._acknowledged.update(safety_check_ids)

    def coordinate_space(self, frame: Frame) -> coords.Space:
        return coords.pixels(*(self.image_size or (frame.width, frame.height)))

    def _input(self, image_url: str, results: list[CallResult], note: str | None) -> list[dict[str, Any]]:
        if self._previous_id is None:
            first = [_text(self.instruction + (f"\n\n{note}" if note else "")), self._image(image_url)]
            return [{"role": "user", "content": first}]
        items: list[dict[str, Any]] = []
        texts: list[str] = []
        by_call = {r.call_id: r for r in results}
        for call_id, checks in self._open_calls.items():
            # Every call is answered with the screen as it is now, failed or not: the API wants one
            # output per call, and the output has no error flag, so problems go in a text note.
            items.append({
                "type": "computer_call_output",
                "call_id": call_id,
                "acknowledged_safety_checks": [asdict(s) for s in checks if s.id in self._acknowledged],
                "output": screenshot_output(image_url),
            })
            result = by_call.get(call_id)
            if result is None:
                texts.append(f"Call {call_id} was not executed.")
            elif not result.ok:
                texts.append(f"Call {call_id} failed: {result.error or 'unknown error'}")
            elif result.output:
                texts.append(f"Call {call_id}: {result.output}")
        if note:
            texts.append(note)
        content = [_text("\n".join(texts))] if texts else []
        if not self._open_calls:
            content.append(self._image(image_url))  # the model asked for nothing: show it the screen
        if content:
            items.append({"role": "user", "content": content})
        return items

    def _image(self, image_url: str) -> dict[str, str]:
        return {"type": "input_image", "image_url": image_url, "detail": self.flavour.detail}


def _parse(response: Any, space: coords.Space) -> tuple[ModelTurn, dict[str, list[SafetyCheck]]]:
    """A Response -> the ModelTurn, and each computer call's pending safety checks by call_id."""
    turn = ModelTurn(image_size=(space.width, space.height), usage=_usage(response.usage))
    open_calls: dict[str, list[SafetyCheck]] = {}
    texts: list[str] = []
    reasoning: list[str] = []
    for item in response.output or []:
        # Plain JSON: the SDK builds its models without validation, so a malformed action would
        # otherwise arrive coerced into the wrong class.
        data = item.to_dict(warnings=False) if hasattr(item, "to_dict") else dict(item)
        kind = data.get("type")
        if kind == "reasoning":
            reasoning.extend(s.get("text", "") for s in data.get("summary") or [])
        elif kind == "message":
            texts.extend(part.get("text") or part.get("refusal") or "" for part in data.get("content") or [])
        elif kind == "computer_call":
            call = _call(data, space)
            checks = [SafetyCheck(id=c["id"], code=c.get("code") or "", message=c.get("message") or "")
                      for c in data.get("pending_safety_checks") or []]
            turn.calls.append(call)
            turn.safety_checks.extend(checks)
            open_calls[call.id] = checks
    turn.text = "\n".join(t for t in texts if t)
    turn.reasoning = "\n".join(r for r in reasoning if r)
    if not turn.calls:
        turn.done = True
        turn.answer = turn.text or None
    return turn, open_calls


def _call(data: dict[str, Any], space: coords.Space) -> ToolCall:
    # GA calls carry a batch in "actions"; the preview's carry one "action".
    if data.get("actions") is not None:
        raw: dict[str, Any] = {"actions": data["actions"]}
        batch = data["actions"] if isinstance(data["actions"], list) else [data["actions"]]
    elif data.get("action") is not None:
        raw, batch = {"action": data["action"]}, [data["action"]]
    else:
        raw, batch = {}, None
    call = ToolCall(id=data.get("call_id") or data.get("id") or "", name="computer", raw=raw)
    if batch is None:
        call.error = "computer_call without an action"
    else:
        call.actions, call.error = map_actions(batch, space)
    return call


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    details = getattr(usage, "input_tokens_details", None)
    return Usage(input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0,
                 cache_read_tokens=getattr(details, "cached_tokens", None) or 0,
                 cache_write_tokens=getattr(details, "cache_write_tokens", None) or 0)
