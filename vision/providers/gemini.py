"""Gemini computer use over the Gemini API (``generateContent``), with the official google-genai SDK.

The computer-use tool is built into the model: the request declares ``computer_use`` with the
environment (``ENVIRONMENT_DESKTOP`` by default, the whole XFCE desktop; ``ENVIRONMENT_BROWSER``
with the ``environment = "browser"`` option) and the model answers with function calls of
predefined names, several per turn, on a 0..999 grid whatever the screenshot's size. The
conversation is kept here, in the SDK's own ``Content`` objects (so the model's thought signatures
go back untouched): each function call of a turn is answered by its own function response, in
order, with the page's URL and the screenshot after that call; screenshots older than
``max_screenshot_turns`` turns are dropped from the history, as Google's reference loop does.

A call whose ``safety_decision`` requires confirmation holds the turn for the operator (the loop's
``needs_confirmation``); once approved, its response carries ``safety_acknowledgement: "true"``.
Calls are converted by the pure ``vision.converters.gemini``, shared with the ``/computer/gemini``
executor.
"""

from __future__ import annotations

import os
from typing import Any

import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from vision.actions import CallResult, Fail, ToolCall
from vision.converters.gemini import (
    DEFAULT_SEARCH_URL,
    ENVIRONMENTS,
    FUNCTIONS,
    GRID,
    parse_call,
    response_fields,
    safety_check,
)
from vision.coords import Space
from vision.providers.base import (
    ModelCallError,
    ModelTurn,
    Observation,
    Provider,
    Usage,
    redact_key,
    retry_after,
)

#: the model Google publishes for computer use; any Gemini model name is accepted
DEFAULT_MODEL = "gemini-2.5-computer-use-preview-10-2025"
PRUNED_SCREENSHOT = "[older screenshot removed to save context]"
# A reply cut for these reasons holds no answer: the run fails with the reason, as a refusal does.
_BLOCKED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE", "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT"}
_TRANSIENT_STATUS = {408, 409, 429}

ENVIRONMENT = """\
You operate a Linux computer with an XFCE desktop that a person watches live. Chromium is already \
open and maximised: use it for anything on the web. After each action you receive a new \
screenshot: check that each step had the effect you wanted before going on. When the task is \
complete, reply with the answer or a short summary and no function call; if it cannot be done, say \
why, also with no function call."""


def model_call_error(exc: Exception, api_key: str | None) -> ModelCallError:
    """An SDK or transport error -> ModelCallError: 408/409/429/5xx and network faults are transient."""
    if isinstance(exc, genai_errors.APIError):
        status = exc.code
        message = f"Gemini API error {status}"
        if exc.status:
            message += f" ({exc.status})"
        if exc.message:
            message += f": {exc.message}"
        if status in (401, 403):
            message += " - check the API key (GEMINI_API_KEY) and its permissions"
        transient = status in _TRANSIENT_STATUS or status >= 500
        headers = getattr(exc.response, "headers", None) or {}
        return ModelCallError(redact_key(message, api_key), transient=transient, status=status,
                              retry_after=retry_after(headers) if transient else None)
    if isinstance(exc, httpx2.TimeoutException):
        return ModelCallError("Gemini API call timed out", transient=True)
    if isinstance(exc, httpx2.TransportError):
        return ModelCallError(redact_key(f"could not reach the Gemini API: {exc}", api_key), transient=True)
    return ModelCallError(redact_key(f"Gemini API call failed: {exc}", api_key))


class GeminiProvider(Provider):
    """One conversation with Gemini about one instruction.

    ``api_key`` defaults to GEMINI_API_KEY (or GOOGLE_API_KEY), ``base_url`` to
    GOOGLE_GEMINI_BASE_URL. ``environment``: "desktop" (default) or "browser". ``excluded_functions``
    names predefined functions the model may not call. ``search_url`` is where ``search`` goes.
    ``image_size`` scales the screenshots (the grid is the same whatever the size); None sends them
    as captured. ``max_screenshot_turns`` bounds the turns whose screenshots stay in the history.
    """

    answers_each_call = True  # each function response carries the URL right after its call

    def __init__(self, instruction: str, *, model: str, system: str = "", api_key: str | None = None,
                 base_url: str | None = None, environment: str = "desktop",
                 excluded_functions: list[str] | tuple[str, ...] = (), search_url: str = DEFAULT_SEARCH_URL,
                 image_size: tuple[int, int] | list[int] | None = None, max_screenshot_turns: int = 3,
                 max_output_tokens: int | None = None, api_version: str | None = None, timeout: float = 120.0):
        model = model.removeprefix("gemini/") or DEFAULT_MODEL
        super().__init__(instruction, model=model, system=system)
        self.name = f"gemini/{model}"
        problems = []
        if environment not in ENVIRONMENTS:
            problems.append(f"environment must be one of {', '.join(ENVIRONMENTS)}, got {environment!r}")
        unknown = [f for f in excluded_functions if f not in FUNCTIONS]
        if unknown:
            problems.append(f"excluded_functions: {', '.join(map(repr, unknown))} not predefined functions "
                            f"({', '.join(FUNCTIONS)})")
        if max_screenshot_turns < 1:
            problems.append("max_screenshot_turns must be at least 1")
        if image_size is not None and (len(image_size) != 2 or min(image_size) < 1):
            problems.append(f"image_size must be [width, height], got {image_size!r}")
        if problems:
            raise ValueError("; ".join(problems))
        self.environment = ENVIRONMENTS[environment]
        self.excluded_functions = list(excluded_functions)
        self.search_url = search_url
        self.image_size = (image_size[0], image_size[1]) if image_size is not None else None
        self.max_screenshot_turns = max_screenshot_turns
        self.max_output_tokens = max_output_tokens

        self._api_key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not self._api_key:
            raise ModelCallError("no Gemini API key: set GEMINI_API_KEY in the environment of the glassdesk server")
        # Retries belong to the loop, which knows the budget: one attempt (the SDK would otherwise
        # also retry a refused connection on its own, after a sleep of up to 10 s).
        options = types.HttpOptions(base_url=base_url or None, api_version=api_version, timeout=round(timeout * 1000),
                                    retry_options=types.HttpRetryOptions(attempts=1))
        self._client = genai.Client(api_key=self._api_key, vertexai=False, http_options=options)
        self.system_prompt = f"{ENVIRONMENT}\n\n{system}" if system else ENVIRONMENT
        self._contents: list[types.Content] = []
        self._pending: list[ToolCall] = []  # last turn's function calls, each owed a response
        self._acknowledged: set[str] = set()

    def config(self) -> types.GenerateContentConfig:
        computer_use = types.ComputerUse(environment=self.environment,
                                         excluded_predefined_functions=self.excluded_functions or None)
        return types.GenerateContentConfig(system_instruction=self.system_prompt,
                                           tools=[types.Tool(computer_use=computer_use)],
                                           max_output_tokens=self.max_output_tokens)

    def coordinate_space(self, frame) -> Space:
        return GRID

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        user = self._user_content(observation, results, note)
        contents = [*self._contents, user]
        _prune_screenshots(contents, self.max_screenshot_turns)
        try:
            response = self._client.models.generate_content(model=self.model, contents=contents, config=self.config())
        except (genai_errors.APIError, httpx2.HTTPError) as exc:
            raise model_call_error(exc, self._api_key) from None
        candidate = response.candidates[0] if response.candidates else None
        if candidate is None:
            feedback = response.prompt_feedback
            reason = feedback.block_reason if feedback and feedback.block_reason else "no candidate"
            raise ModelCallError(f"Gemini returned no reply ({reason})")
        # Committed only after a successful call, so a retried turn does not repeat the user content.
        model_content = candidate.content or types.Content(role="model", parts=[types.Part(text="(no reply)")])
        if not model_content.parts:
            model_content = types.Content(role="model", parts=[types.Part(text="(no reply)")])
        self._contents = [*contents, model_content]
        self._acknowledged = set()
        frame = observation.frame
        return self._parse(candidate, response.usage_metadata, self.image_size or (frame.width, frame.height))

    def acknowledge(self, safety_check_ids: list[str]) -> None:
        pending = {c.id for c in self._pending if safety_check(c.id, c.raw) is not None}
        unknown = [i for i in safety_check_ids if i not in pending]
        if unknown:
            raise ValueError(f"no pending safety check with id {', '.join(unknown)}")
        self._acknowledged.update(safety_check_ids)

    # --- the request

    def _png(self, frame) -> bytes:
        return frame.scaled_png(*self.image_size) if self.image_size else frame.png

    def _user_content(self, observation: Observation, results: list[CallResult], note: str | None) -> types.Content:
        screenshot = self._png(observation.frame)
        if not self._contents:
            text = self.instruction + (f"\n\n{note}" if note else "")
            return types.Content(role="user", parts=[types.Part(text=text),
                                                     types.Part.from_bytes(data=screenshot, mime_type="image/png")])
        parts: list[types.Part] = []
        if self._pending:
            by_id = {r.call_id: r for r in results}
            for call in self._pending:
                result = by_id.get(call.id)
                # Each call answered with the screen right after it; the observation for one the
                # loop did not reach (it stopped before) or that carries no screen of its own.
                png = self._png(result.screen) if result is not None and result.screen is not None else screenshot
                url = result.url if result is not None and result.url is not None else observation.url
                fields = response_fields(result, url=url, acknowledged=call.id in self._acknowledged)
                # The same response the executor answers (converters.gemini.function_response), built
                # from the bytes rather than through base64.
                blob = types.FunctionResponseBlob(mime_type="image/png", data=png)
                response = types.FunctionResponse(name=call.name, response=fields,
                                                  id=None if call.id.startswith(_SYNTHETIC) else call.id,
                                                  parts=[types.FunctionResponsePart(inline_data=blob)])
                parts.append(types.Part(function_response=response))
        else:
            parts.append(types.Part.from_bytes(data=screenshot, mime_type="image/png"))
        if note:
            parts.append(types.Part(text=note))
        return types.Content(role="user", parts=parts)

    # --- the reply

    def _parse(self, candidate: types.Candidate, usage: types.GenerateContentResponseUsageMetadata | None,
               size: tuple[int, int]) -> ModelTurn:
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[ToolCall] = []
        for index, part in enumerate((candidate.content.parts or []) if candidate.content else []):
            if part.function_call is not None:
                fc = part.function_call
                # The Gemini API may leave ids out: the loop needs one per call, the model none back.
                call_id = fc.id or f"{_SYNTHETIC}{index}"
                calls.append(parse_call(call_id, fc.name or "", fc.args, search_url=self.search_url))
            elif part.text:
                (thoughts if part.thought else texts).append(part.text)
        self._pending = list(calls)
        text = "\n".join(texts).strip()
        turn = ModelTurn(calls=calls, text=text, reasoning="\n".join(thoughts).strip(), usage=_usage(usage),
                         image_size=size)
        turn.safety_checks = [check for c in calls if (check := safety_check(c.id, c.raw)) is not None]
        if not calls:
            reason = _reason(candidate.finish_reason)
            if reason in ("STOP", "FINISH_REASON_UNSPECIFIED", ""):
                turn.done, turn.answer = True, text or None
            elif reason in _BLOCKED:
                # Nothing is owed back; the loop stops on Fail.
                turn.calls = [ToolCall("blocked", "blocked", {}, actions=[
                    Fail(reason=f"Gemini stopped its reply ({reason})" + (f": {text}" if text else ""))])]
            else:
                turn.parse_error = f"the reply ended ({reason}) without a function call"
        return turn


_SYNTHETIC = "gemini-call-"


def _reason(finish_reason: Any) -> str:
    return getattr(finish_reason, "value", None) or str(finish_reason or "")


def _usage(usage: types.GenerateContentResponseUsageMetadata | None) -> Usage:
    if usage is None:
        return Usage()
    # Thinking is billed as output; the prompt count includes what the cache served.
    return Usage(input_tokens=(usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0),
                 output_tokens=(usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0),
                 cache_read_tokens=usage.cached_content_token_count or 0)


def _has_screenshot(content: types.Content) -> bool:
    return any((p.inline_data is not None) or (p.function_response is not None and p.function_response.parts)
               for p in content.parts or [])


def _prune_screenshots(contents: list[types.Content], keep_turns: int) -> None:
    """Keep the screenshots of the newest ``keep_turns`` user turns, in place; older ones become a
    note. Parts are replaced, never edited, so the SDK objects of earlier turns stay as sent."""
    seen = 0
    for i in range(len(contents) - 1, -1, -1):
        content = contents[i]
        if content.role != "user" or not _has_screenshot(content):
            continue
        seen += 1
        if seen <= keep_turns:
            continue
        parts = []
        for part in content.parts or []:
            if part.inline_data is not None:
                parts.append(types.Part(text=PRUNED_SCREENSHOT))
            elif part.function_response is not None and part.function_response.parts:
                parts.append(types.Part(function_response=part.function_response.model_copy(update={"parts": None})))
            else:
                parts.append(part)
        contents[i] = types.Content(role=content.role, parts=parts)
