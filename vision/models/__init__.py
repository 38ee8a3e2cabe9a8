"""The wire models of the vision layer's operations: a run's request and answer, the run controls,
the take-over switch, and the vendor-native executors' requests and answers.

Pure pydantic (and the trace's record models): importing this loads no X library, web framework or
model SDK, so the Python client (vision.client) takes its types from here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from desktop.models import UploadFile
from vision.models.qa import Expectation
from vision.trace.records import RunStatus, Usage

MAX_STEPS_CAP = 50
MAX_EXPECTATIONS = 50  # checks a run may carry
# A blocking act call on a paused run returns after this long, saying so, instead of hanging
# until a person hands back.


# ------------------------------------------------------------------------------------- runs


class ActRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instruction: str | None = Field(None, min_length=1, max_length=10_000,
                                    description="what to do; may be omitted to continue a paused run")
    model: str | None = Field(None, description="provider/model, e.g. anthropic/claude-sonnet-4-5, "
                                                "openai/computer-use-preview, gemini/<model>, "
                                                "chat/<model>, ocr, scripted; default from config or API keys")
    max_steps: int = Field(10, ge=1, le=MAX_STEPS_CAP)
    budget_tokens: int | None = Field(None, ge=1, description="stop once this many tokens are used")
    budget_seconds: float = Field(600, gt=0, le=3600, description="wall-clock budget for the run")
    autopilot: bool = Field(True, description="false: one model turn per call (step mode)")
    acknowledged_safety_checks: list[str] = Field(default_factory=list,
                                                  description="ids of pending safety checks the operator approves")
    script: list[dict] | None = Field(None, description="actions to replay, for model 'scripted'")
    secrets: dict[str, str] = Field(default_factory=dict,
                                    description="values typed where the model writes {{name}}; never sent to the model "
                                                "nor written to the trace")
    record_video: bool = Field(False, description="film the display for the run: a video receipt with a chapter per "
                                                  "step, a ring at every click and the typed text and keys as "
                                                  "captions, chained into the trace (only with a new instruction)")
    video_format: Literal["mp4", "webm"] = Field("mp4", description="mp4 (H.264, the cheaper encoder) or webm (VP8)")
    tools: list[Literal["computer", "browser"]] | None = Field(
        None, min_length=1, description="anthropic/ models: the tools offered to Claude, [\"computer\"] by default; "
        "\"browser\" adds Anthropic's browser toolset (browser_toolset_20260801) on the session's Chromium")
    marks: bool = Field(False, description="set-of-marks: each screenshot the model is shown has the controls a "
                        "person can act on (native windows' and the page's) outlined and numbered, and their list "
                        "comes with it, each one's centre in the model's own coordinates; the trace keeps the plain "
                        "screen. Not for the ocr model (it reads the text the marks would cover) nor a grounding one")
    reset: bool = Field(False, description="first return the session to a fresh state, as POST "
                                           "/sessions/{id}/reset does (launched programs end, Chromium restarts "
                                           "on a clean profile at about:blank); only with a new instruction")

    expect: list[Expectation] = Field(
        default_factory=list, max_length=MAX_EXPECTATIONS,
        description="what must hold when the model says it is done, in the QA assertion language (a flow's assert "
                    "step without its action: {\"assertion\": {\"type\": \"has_text\", \"expected\": \"Hello\"}, "
                    "\"selector\": \"#greeting\"}), each looked at until it holds or its timeout_ms (5000 by "
                    "default); the run is done and verified only when every one holds, else it fails with "
                    "expectation_failed. Empty: the run's done is the model's word (verified: null). Only with a "
                    "new instruction")
    expect_each_step: bool = Field(False, description="also look at the expectations once after every step (no "
                                                      "waiting), each step's checks in its record: how the run "
                                                      "progressed toward them; the verdict is still the check "
                                                      "when the model says done")

    @model_validator(mode="after")
    def _reset_starts_a_run(self) -> ActRequest:
        problems = []
        if self.reset and self.instruction is None:
            problems.append("reset: a reset comes before a new instruction, not when continuing a paused run")
        if self.expect and self.instruction is None:
            problems.append("expect: expectations come with a new instruction, not when continuing a paused run")
        if self.marks and self.instruction is None:
            problems.append("marks: how the model observes is set with a new instruction, not when continuing a "
                            "paused run")
        if self.expect_each_step and not self.expect:
            problems.append("expect_each_step: looks at the expectations after each step; give them in expect")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class CheckResult(BaseModel):
    """One expectation as it was checked when the model said it was done."""

    check: str = Field(description="the expectation, in words")
    passed: bool
    saw: str = Field(description="what was seen: the page's or the screen's state that held, or that did not")
    duration_ms: int = Field(description="how long it was looked at before it held or its timeout passed")


class StepSummary(BaseModel):
    index: int
    text: str = ""
    actions: list[dict] = Field(default_factory=list)
    executed: list[list[str]] = Field(default_factory=list)
    error: dict | None = None
    model_ms: int = 0
    exec_ms: int = 0
    settle_ms: int = 0
    settled_by: list[str] = Field(default_factory=list, description="per action, what ended its settle wait: "
                                                                    "frame, damage, network, navigation, dialog, "
                                                                    "timeout")
    usage: Usage = Field(default_factory=Usage)
    url: str | None = None
    by: Literal["agent", "operator"] = Field("agent", description="operator: a person's input during a take-over")
    no_effect: bool = Field(False, description="its clicks, keys, typing or scrolls all worked and nothing on the "
                                               "screen changed (the model is told)")
    checks: list[CheckResult] = Field(default_factory=list, description="with expect_each_step: the expectations "
                                                                        "as they stood right after this step")


class VideoOut(BaseModel):
    """A run's video receipt: where to fetch it, and the SHA-256 its trace chains."""

    url: str
    sha256: str
    format: Literal["mp4", "webm"]
    chapters_url: str
    captions_url: str
    duration_s: float
    chapters: int
    clicks: int
    notes: list[str] = Field(default_factory=list)


class RecordingStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    video_format: Literal["mp4", "webm"] = Field("mp4", description="mp4 (H.264, the cheaper encoder) or webm (VP8)")
    title: str | None = Field(None, min_length=1, max_length=200, description="the film's title (its metadata)")


class Recording(BaseModel):
    """A session recording: filming, or stopped with its receipt."""

    recording_id: str
    session_id: str
    status: Literal["recording", "stopped", "interrupted"] = Field(
        description="interrupted: the server stopped while filming; the video is what was filmed up to then")
    format: Literal["mp4", "webm"]
    title: str | None = None
    started_at: datetime
    stopped_at: datetime | None = None
    actions: int = Field(0, description="actions marked so far (one chapter each)")
    video: VideoOut | None = Field(None, description="the receipt, once stopped")
    video_note: str | None = Field(None, description="why a stopped recording has no video")


class SafetyCheckOut(BaseModel):
    id: str
    code: str
    message: str


class ActResult(BaseModel):
    trace_id: str
    status: RunStatus
    verified: bool | None = Field(None, description="true: the model said done and every expectation held; false: "
                                                    "an expectation failed (status failed, error expectation_failed); "
                                                    "null: nothing was checked (no expect, or the run ended "
                                                    "before the model said done): a done is the model's word")
    checks: list[CheckResult] = Field(default_factory=list, description="the expectations as checked, in order")
    answer: str | None = None
    error: dict | None = None
    steps: list[StepSummary]
    usage: Usage
    pending_safety_checks: list[SafetyCheckOut] = Field(default_factory=list)
    note: str | None = Field(None, description="why the call returned before the run ended, and how to go on")
    failed_steps: int = Field(0, description="steps in which an action failed or the reply could not be understood")
    final_screenshot: str | None = Field(None, description="base64 PNG of the screen when the call returned")
    report_url: str
    report_path: str | None = Field(None, description="report.html on the server's disk, once the run has ended")
    video: VideoOut | None = Field(None, description="the video receipt, once a filmed run has ended")
    video_note: str | None = Field(None, description="why a run asked to be filmed has no video")

    def __repr_args__(self):
        # Printed, the screenshot is its size: its base64 would be a line of some 80 KB.
        for name, value in super().__repr_args__():
            yield name, (f"<base64 PNG, {len(value):,} characters>" if name == "final_screenshot" and value
                         else value)


class RunView(BaseModel):
    """A run as the operator, metrics and clients see it."""

    trace_id: str
    status: RunStatus
    instruction: str
    model: str
    step: int
    max_steps: int
    operator_steps: int = Field(0, description="steps that were a person's input during a take-over: counted in "
                                               "step, not against max_steps")
    tokens: int
    pending_safety_checks: list[SafetyCheckOut] = Field(default_factory=list)
    active: bool
    pause_reason: str | None = None
    answer: str | None = None
    error: dict | None = None



class RunControl(BaseModel):
    ok: bool
    active: bool


class TakeoverRequest(BaseModel):
    on: bool = Field(description="true: pause the agent and hand mouse and keyboard to the operator")


# ------------------------------------------------------------------------------------- the executors

# A declared screen larger than this is no model's: 4K, twice the display either way.
MAX_DECLARED_WIDTH, MAX_DECLARED_HEIGHT = 2 * SCREEN_WIDTH, 2 * SCREEN_HEIGHT


class _Body(BaseModel):
    """A request body: an unknown field is a mistake to report, not to ignore."""

    model_config = ConfigDict(extra="forbid")


# --- Anthropic -----------------------------------------------------------------------------------


class AnthropicComputerRequest(_Body):
    tool_version: Literal["computer_20250124", "computer_20251124", "computer_toolset_20260801"] = Field(
        description="the computer tool's type, as in the request's tools[]")
    display_width_px: int = Field(ge=1, le=MAX_DECLARED_WIDTH, description="the display width the tool declares "
                                  "(for the toolset: the width of the screenshots the model is sent)")
    display_height_px: int = Field(ge=1, le=MAX_DECLARED_HEIGHT, description="the display height the tool declares")
    input: dict[str, Any] = Field(description="the tool_use block's input, verbatim")
    name: str = Field("computer", description="the tool_use block's name: \"computer\"; for "
                      "computer_toolset_20260801 the action itself (\"left_click\", ...)")
    tool_use_id: str | None = Field(None, description="the tool_use block's id: the answer then carries the "
                                    "whole tool_result block, ready to send")

    @model_validator(mode="after")
    def _toolset_names_the_action(self):
        # Forgetting the name is the caller's slip, not the model's: say so, rather than answer the
        # model that "computer" is no action.
        if self.tool_version == "computer_toolset_20260801" and self.name == "computer":
            raise ValueError("computer_toolset_20260801 names the action in the tool_use's name: pass it as name "
                             "(e.g. \"left_click\"), with input its arguments")
        return self


class AnthropicText(BaseModel):
    type: Literal["text"] = "text"
    text: str


class AnthropicImageSource(BaseModel):
    type: Literal["base64"] = "base64"
    media_type: Literal["image/png"] = "image/png"
    data: str = Field(description="base64 PNG")


class AnthropicImage(BaseModel):
    type: Literal["image"] = "image"
    source: AnthropicImageSource


AnthropicBlock = Annotated[AnthropicText | AnthropicImage, Field(discriminator="type")]


class AnthropicComputerResult(BaseModel):
    content: list[AnthropicBlock] = Field(description="the tool_result's content: text (an error, the cursor "
                                          "position), then an image at the declared size (the screen after the "
                                          "action; for zoom, the zoomed region)")
    is_error: bool = Field(description="the call could not run as given; content says why, nothing ran")
    tool_result: dict[str, Any] | None = Field(None, description="with tool_use_id: the whole tool_result block "
                                               "(toolset_name echoed for the toolset)")
    no_effect: bool = Field(False, description="the call was meant to change the screen (a click, a key, typing, "
                            "a scroll, a drag), worked, and changed nothing; content's text tells the model so")


class AnthropicBrowserRequest(_Body):
    tool_uses: list[dict[str, Any]] = Field(min_length=1, max_length=50, description="the browser toolset's "
                                            "tool_use blocks, verbatim (type, id, name, input, toolset_name "
                                            "\"browser\"), run in order")
    configs: dict[str, dict[str, Any]] | None = Field(None, description="the configs of the request's "
                                                      "browser_toolset_20260801 entry, as sent: the opt-in "
                                                      "members (javascript_exec, file_upload, read_console, "
                                                      "read_network) run only where enabled here")
    files: dict[str, UploadFile] | None = Field(None, max_length=20, description="files staged for file_upload, "
                                                "by the document id the model names (512 KiB in all)")


class AnthropicBrowserResult(BaseModel):
    tool_results: list[dict[str, Any]] = Field(description="one tool_result block per tool_use, in order, ready to "
                                               "send: content (text, image) and, unless is_error, the "
                                               "browser_state block (tabs and what changed since the last call); "
                                               "toolset_name \"browser\"")


# --- OpenAI --------------------------------------------------------------------------------------


class OpenAISafetyCheck(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    code: str | None = None
    message: str | None = None


class OpenAIComputerRequest(_Body):
    action: dict[str, Any] | None = Field(None, description="computer_use_preview: the computer_call's action")
    actions: list[dict[str, Any]] | None = Field(None, max_length=100, description="GA computer: the "
                                                 "computer_call's batch of actions, run in order, all or none")
    display_width: int = Field(SCREEN_WIDTH, ge=1, le=MAX_DECLARED_WIDTH, description="the width the tool "
                               "declares (GA: of the screenshots the model is sent)")
    display_height: int = Field(SCREEN_HEIGHT, ge=1, le=MAX_DECLARED_HEIGHT, description="the height the tool declares")
    pending_safety_checks: list[OpenAISafetyCheck] = Field(default_factory=list, description="the computer_call's "
                                                     "pending_safety_checks: calling this is proceeding with them")
    call_id: str | None = Field(None, description="the computer_call's call_id: the answer then carries the "
                                "whole computer_call_output item, ready to send")

    @model_validator(mode="after")
    def _one_of(self):
        if (self.action is None) == (self.actions is None):
            raise ValueError("give either action (computer_use_preview) or actions (GA computer), not both or neither")
        return self


class ComputerScreenshot(BaseModel):
    type: Literal["computer_screenshot"] = "computer_screenshot"
    image_url: str = Field(description="data:image/png;base64,... at the declared size")


class OpenAIComputerResult(BaseModel):
    output: ComputerScreenshot = Field(description="the computer_call_output's output: the screen after the call")
    acknowledged_safety_checks: list[OpenAISafetyCheck] = Field(description="the request's pending_safety_checks, "
                                                          "to send back as acknowledged (after the operator agreed)")
    error: str | None = Field(None, description="the call could not run as given (nothing ran); tell the model, "
                              "e.g. in a text input beside the output")
    no_effect: bool = Field(False, description="the call was meant to change the screen, worked, and changed "
                            "nothing (computer_call_output has no place for text: tell the model, as for error)")
    computer_call_output: dict[str, Any] | None = Field(None, description="with call_id: the whole item")


# --- Gemini --------------------------------------------------------------------------------------

#: where the computer-use tool's ``search`` goes unless told: the reference computer's search engine
GEMINI_SEARCH_URL = "https://www.google.com"


class GeminiFunctionCall(_Body):
    name: str = Field(min_length=1, max_length=200, description="the function call's name: a predefined function "
                      "of the computer-use tool (click_at, type_text_at, ...)")
    args: dict[str, Any] = Field(default_factory=dict, description="its args, verbatim: coordinates on the 0..999 "
                                 "grid; a safety_decision among them is passed on as acknowledged")
    id: str | None = Field(None, max_length=200, description="its id, when the API gave one: echoed in the response")


class GeminiComputerRequest(_Body):
    function_calls: list[GeminiFunctionCall] = Field(min_length=1, max_length=100, description="the turn's function "
                                                     "calls, run in order; each is answered whatever the others did")
    screenshot_width: int = Field(SCREEN_WIDTH, ge=1, le=MAX_DECLARED_WIDTH, description="the width of the "
                                  "screenshots answered (the grid is the same whatever the size)")
    screenshot_height: int = Field(SCREEN_HEIGHT, ge=1, le=MAX_DECLARED_HEIGHT,
                                   description="the height of the screenshots answered")
    search_url: str = Field(GEMINI_SEARCH_URL, min_length=1, max_length=2000,
                            description="where the search function goes")


class GeminiInlineData(BaseModel):
    mime_type: Literal["image/png"] = "image/png"
    data: str = Field(description="base64 PNG at the requested screenshot size")


class GeminiResponsePart(BaseModel):
    inline_data: GeminiInlineData


class GeminiFunctionResponse(BaseModel):
    name: str = Field(description="the function call's name")
    id: str | None = Field(None, description="the function call's id, when it had one")
    response: dict[str, Any] = Field(description="url (the page in front, when there is one), "
                                     "safety_acknowledgement \"true\" for a call that required confirmation, error "
                                     "(the call could not run as given; nothing of it ran), no_effect true and "
                                     "output saying so (the call was meant to change the screen, worked, and "
                                     "changed nothing)")
    parts: list[GeminiResponsePart] = Field(description="the screenshot right after the call")


class GeminiComputerResult(BaseModel):
    function_responses: list[GeminiFunctionResponse] = Field(description="one per function call, in order: each "
                                                             "is a FunctionResponse as the SDK takes it "
                                                             "(types.FunctionResponse.model_validate)")
