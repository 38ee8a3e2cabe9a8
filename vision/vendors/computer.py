"""Vendor-native executors: glassdesk as the computer of someone else's model loop.

A team that runs its own Anthropic, OpenAI or Gemini loop hands the model's tool call over verbatim and
gets back what the vendor's API expects in return, with no conversion code of its own. The
conversion is ``vision.converters``', the same the vision loop's providers use; the execution is
the desktop service's (``DesktopService.perform``, ``zoom``, ``cursor``), so its guards hold: a
person in control is ``operator_in_control`` and a running vision instruction ``session_busy``.

Where a fault goes:

- a call the *model* got wrong (unknown action, a coordinate off its declared screen, an unknown
  key name, zoom on ``computer_20250124``, a duration over the desktop's limits) is an answer, not
  a request error: Anthropic's ``is_error`` content with the text and the screen, OpenAI's
  ``error`` beside the screenshot, Gemini's ``error`` in the function response. The model reads
  it and tries again; nothing ran. So is a ``type`` the page would not take (``typed_into_nothing``:
  the keyboard focus on something that takes no text), refused before a key was sent.
- a call that worked and changed nothing on the screen, though meant to (a click beside every
  control), is answered as usual with ``no_effect`` and, where the contract has a place for text
  (Anthropic's content, Gemini's response), a sentence telling the model so.
- a fault of the *request* or the desktop (a bad body, no such session, a person in control, a
  vision run, the desktop restarting) is glassdesk's usual error, ``{"error": {code, message}}``
  with its HTTP status, for the caller's code to handle: the model can do nothing about it.
"""

from __future__ import annotations

from typing import Any

from desktop.errors import GlassdeskError, TypedIntoNothing
from desktop.frame import Frame
from desktop.port import Performed
from desktop.service.desktop import DesktopService
from vision import coords
from vision.actions import (
    NO_EFFECT,
    Action,
    CallResult,
    CursorPosition,
    Done,
    Fail,
    Screenshot,
    ToolCall,
    Zoom,
    expects_effect,
)
from vision.converters import anthropic as anthropic_tool
from vision.converters import gemini as gemini_tool
from vision.converters import openai as openai_tool
from vision.models import (
    AnthropicComputerRequest,
    AnthropicComputerResult,
    ComputerScreenshot,
    GeminiComputerRequest,
    GeminiComputerResult,
    GeminiFunctionResponse,
    OpenAIComputerRequest,
    OpenAIComputerResult,
)

# --- the service ---------------------------------------------------------------------------------


class ComputerService:
    """The three executors over the desktop service (``Glassdesk.computer``)."""

    def __init__(self, desktops: DesktopService):
        self.desktops = desktops

    def anthropic(self, session_id: str | None, request: AnthropicComputerRequest) -> AnthropicComputerResult:
        version = anthropic_tool.TOOL_VERSIONS[request.tool_version]
        space = coords.pixels(request.display_width_px, request.display_height_px)
        session = self.desktops.session(session_id)  # no such session: an error of the request, first
        toolset_name = anthropic_tool.TOOLSET_NAME if version.toolset else None
        call = anthropic_tool.parse_tool_use(request.tool_use_id or "", request.name, request.input, space,
                                             toolset_name=toolset_name, version=version)
        result, frame = self._run(session.id, call)
        content, is_error = anthropic_tool.result_content(call, result, space)
        # The screen after the call rides on every answer (an error's too, so the model sees why),
        # but for the two that answer with something else: the pointer, and the zoomed region.
        reads = not is_error and any(isinstance(a, (CursorPosition, Zoom)) for a in call.actions)
        if not reads:
            frame = frame or session.capture()
            content.append(anthropic_tool.image_block(frame.scaled_png(space.width, space.height)))
        tool_result: dict[str, Any] | None = None
        if request.tool_use_id is not None:
            tool_result = {"type": "tool_result", "tool_use_id": request.tool_use_id, "content": content}
            if is_error:
                tool_result["is_error"] = True
            if toolset_name is not None:
                tool_result["toolset_name"] = toolset_name
        return AnthropicComputerResult(content=content, is_error=is_error, tool_result=tool_result,
                                       no_effect=result.no_effect)

    def openai(self, session_id: str | None, request: OpenAIComputerRequest) -> OpenAIComputerResult:
        space = coords.pixels(request.display_width, request.display_height)
        session = self.desktops.session(session_id)
        batch = request.actions if request.actions is not None else [request.action]
        actions, error = openai_tool.map_actions(batch, space)
        call = ToolCall(request.call_id or "", "computer", {"actions": batch}, actions=actions, error=error)
        result, frame = self._run(session.id, call)
        frame = frame or session.capture()
        output = openai_tool.screenshot_output(openai_tool.data_url(frame.scaled_png(space.width, space.height)))
        checks = request.pending_safety_checks
        item = None
        if request.call_id is not None:
            item = {"type": "computer_call_output", "call_id": request.call_id,
                    "acknowledged_safety_checks": [c.model_dump(exclude_none=True) for c in checks], "output": output}
        return OpenAIComputerResult(output=ComputerScreenshot(**output), acknowledged_safety_checks=checks,
                                    error=None if result.ok else result.error, computer_call_output=item,
                                    no_effect=result.no_effect)

    def gemini(self, session_id: str | None, request: GeminiComputerRequest) -> GeminiComputerResult:
        session = self.desktops.session(session_id)
        size = (request.screenshot_width, request.screenshot_height)
        responses = []
        # In order, each on its own as the loop runs them: one the model got wrong is answered with
        # its error and the next still runs. Each answer is the screen right after its own call.
        for fc in request.function_calls:
            call = gemini_tool.parse_call(fc.id or "", fc.name, fc.args, search_url=request.search_url)
            result, frame = self._run(session.id, call)
            frame = frame or session.capture()
            # Calling the executor is proceeding with the call: a confirmation it required is
            # acknowledged, as the contract asks (the caller asked the person first).
            fields = gemini_tool.response_fields(result, url=session.page_url(),
                                                 acknowledged=gemini_tool.needs_confirmation(fc.args))
            data = gemini_tool.function_response(fc.name, fc.id, fields, frame.scaled_png(*size))
            responses.append(GeminiFunctionResponse.model_validate(data))
        return GeminiComputerResult(function_responses=responses)

    def _run(self, session_id: str, call: ToolCall) -> tuple[CallResult, Frame | None]:
        """Run a call's actions in order; its result and the settled frame after the last input
        action (None when none ran). A refusal of the action itself (422, or a ``type`` with nothing
        to take it: typed_into_nothing) ends the call as a result; any other fault is the request's
        and propagates. A call meant to change the screen that worked and changed nothing says so
        in its result's text (``no_effect``), as the loop tells its own model."""
        result = CallResult(call.id, ok=call.error is None, error=call.error)
        frame: Frame | None = None
        effects: list[bool | None] = []  # what each action meant to change the screen did to it
        for action in call.actions if call.error is None else []:
            try:
                performed = self._one(session_id, action, result)
            except GlassdeskError as exc:
                if exc.status != 422 and not isinstance(exc, TypedIntoNothing):
                    raise
                result.ok, result.error = False, f"{exc.code}: {exc.message}"
                break
            if performed is not None:
                frame = performed.frame
                if expects_effect(action):
                    effects.append(performed.changed)
        if result.ok and effects and all(changed is False for changed in effects):
            result.no_effect = True
            result.output = "\n".join(filter(None, [result.output, f"This action {NO_EFFECT}"]))
        return result, frame

    def _one(self, session_id: str, action: Action, result: CallResult) -> Performed | None:
        if isinstance(action, (Screenshot, Done, Fail)):  # the converters make no Done/Fail; nothing to run
            return None
        if isinstance(action, CursorPosition):
            x, y = self.desktops.cursor(session_id)
            result.output = f"X={x},Y={y}"  # the loop's wording, which the converter reads
            return None
        if isinstance(action, Zoom):
            result.image_png = self.desktops.zoom(session_id, action).image  # a PNG: zoom asks for no other format
            return None
        return self.desktops.perform(session_id, action)
