"""Claude's computer tool over the Anthropic Messages API (beta), as a Provider.

Claude is sent a screenshot downscaled to the API's image budget, and that size is declared as the
display: the model answers in pixels of the image it saw, converted here to display pixels. The
conversation is kept in the API's own shape: each tool_use is answered by a tool_result with the
same id, the newest screenshot rides on the last result, old screenshots are pruned in chunks, and
cache breakpoints sit on the system prompt and the newest user turns.

Three tool generations, chosen by model (MODEL_TOOL_VERSIONS) or the ``tool_version`` kwarg:

- ``computer_20250124``: one ``computer`` tool, the action in ``input.action``; beta header.
- ``computer_20251124``: the same plus ``zoom`` (``enable_zoom``); beta header.
- ``computer_toolset_20260801``: GA, no beta header, no declared display size (coordinates are
  pixels of the screenshot); each action is its own tool_use named after it, with
  ``toolset_name == "computer"``, which its tool_result must echo.
"""

from __future__ import annotations

import os
import re
from typing import Any

import anthropic

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from vision import coords
from vision.actions import BrowserMember, CallResult, Fail, ToolCall
from vision.converters import anthropic_browser as browser_toolset

# The tool's input and result formats are converted by vision.converters.anthropic, shared with the
# /computer/anthropic executor; re-exported here for the provider's callers.
from vision.converters.anthropic import (  # noqa: F401
    COMPUTER_20250124,
    COMPUTER_20251124,
    COMPUTER_TOOLSET_20260801,
    TOOL_VERSIONS,
    InputError,
    ToolVersion,
    explain,
    image_block,
    parse_tool_use,
    region_to_display,
    result_content,
    text_block,
    to_actions,
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

# --- tool versions ---------------------------------------------------------------------------

# Model name -> tool version, first match wins (re.match on the bare model name). From Anthropic's
# computer-use docs: 20251124 is Opus 4.5+ and Sonnet 4.6+; Sonnet/Haiku 4.5 and older stay on
# 20250124; from the 5.5 generation the beta tool is refused and the GA toolset is required.
MODEL_TOOL_VERSIONS: tuple[tuple[str, ToolVersion], ...] = (
    (r"claude-(sonnet|haiku)-4-5", COMPUTER_20250124),
    (r"claude-3-7-sonnet|claude-(opus|sonnet)-4(-[01])?(-\d{8})?$", COMPUTER_20250124),
    (r"claude-[a-z]+-(5-[5-9]|[6-9])(?!\d)", COMPUTER_TOOLSET_20260801),
    (r"claude-[a-z]+-(4-[5-9]|5)(?!\d)", COMPUTER_20251124),
)
DEFAULT_TOOL_VERSION = COMPUTER_20251124


def tool_version_for(model: str) -> ToolVersion:
    model = model.removeprefix("anthropic/")
    for pattern, version in MODEL_TOOL_VERSIONS:
        if re.match(pattern, model):
            return version
    return DEFAULT_TOOL_VERSION


# --- model space ------------------------------------------------------------------------------


def model_space(width: int = SCREEN_WIDTH, height: int = SCREEN_HEIGHT, *,
                max_pixels: int = coords.ANTHROPIC_MAX_PIXELS,
                max_edge: int = coords.ANTHROPIC_MAX_EDGE) -> coords.Space:
    """Pixels of the screenshot Claude is sent: the display scaled into the image budget."""
    return coords.pixels(*coords.anthropic_size(width, height, max_pixels=max_pixels, max_edge=max_edge))


# --- conversation helpers (pure) -----------------------------------------------------------------

EPHEMERAL = {"type": "ephemeral"}
PRUNED_IMAGE = "[older screenshot removed to save context]"


def _image_slots(messages: list[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], int]]:
    """Where each image sits, oldest first: (the content list holding it, its index)."""
    slots = []
    for message in messages:
        content = message["content"]
        if message["role"] != "user" or not isinstance(content, list):
            continue
        for i, block in enumerate(content):
            if block.get("type") == "image":
                slots.append((content, i))
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                slots.extend((block["content"], j) for j, inner in enumerate(block["content"])
                             if inner.get("type") == "image")
    return slots


def prune_images(messages: list[dict[str, Any]], max_images: int, chunk: int) -> int:
    """Keep at most ``max_images`` images, replacing the oldest with a text placeholder, in place.

    Once over the limit, it drops down to ``max_images - chunk`` at once rather than one per turn:
    the prefix then stays identical for ``chunk`` turns, so the prompt cache keeps hitting.
    Returns how many images were removed.
    """
    slots = _image_slots(messages)
    if len(slots) <= max_images:
        return 0
    keep = max(1, max_images - chunk)
    dropped = slots[: len(slots) - keep]
    for content, i in dropped:
        content[i] = text_block(PRUNED_IMAGE)
    return len(dropped)


def with_cache_breakpoints(messages: list[dict[str, Any]], turns: int = 2) -> list[dict[str, Any]]:
    """A copy with cache_control on the last block of the newest ``turns`` user messages.

    The newest writes the cache for the next request; the one before reads what the previous
    request wrote. With the system prompt's, that is 3 of the API's 4 breakpoints. The history
    itself is never marked, or breakpoints would pile up.
    """
    marked = list(messages)
    for i in range(len(marked) - 1, -1, -1):
        if turns == 0:
            break
        message = marked[i]
        if message["role"] == "user" and isinstance(message["content"], list) and message["content"]:
            *rest, last = message["content"]
            marked[i] = {**message, "content": [*rest, {**last, "cache_control": EPHEMERAL}]}
            turns -= 1
    return marked


def model_call_error(exc: anthropic.AnthropicError, secret: str | None = None) -> ModelCallError:
    """An SDK error -> ModelCallError: 408/409/429/5xx/529 and network failures are transient."""
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        error = exc.body.get("error") if isinstance(exc.body, dict) else None
        error = error if isinstance(error, dict) else {}
        message = f"Anthropic API returned HTTP {status}"
        if error.get("type"):
            message += f" ({error['type']})"
        if error.get("message"):
            message += f": {error['message']}"
        if status in (401, 403):
            message += " - check the API key (ANTHROPIC_API_KEY) and its permissions"
        transient = status in (408, 409, 429) or status >= 500
        return ModelCallError(redact_key(message, secret), transient=transient, status=status,
                              retry_after=retry_after(exc.response.headers))
    if isinstance(exc, anthropic.APITimeoutError):
        return ModelCallError("Anthropic API call timed out", transient=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelCallError("could not reach the Anthropic API", transient=True)
    return ModelCallError(redact_key(f"Anthropic SDK error: {exc}", secret))


# --- the provider ---------------------------------------------------------------------------------

ENVIRONMENT = """\
You operate a Linux computer with an XFCE desktop through the computer tool. Chromium is already \
open and maximised: use it for anything on the web. The screen is {width}x{height} pixels; every \
coordinate you give is a pixel of that screen, (0, 0) at the top-left. After your actions you \
receive a new screenshot: check that each step had the effect you wanted before going on. When \
the task is complete, reply with the answer or a short summary and no tool call; if it cannot be \
done, say why, also with no tool call."""
BROWSER_NOTE = """The browser tools act on the same Chromium window, in the pixels of its own screenshots; prefer \
them for work inside web pages."""


class AnthropicProvider(Provider):
    """One conversation with Claude about one instruction.

    ``api_key`` / ``base_url`` default to ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL. ``tool_version``
    overrides the model table (a key of TOOL_VERSIONS). ``system`` is appended to the environment
    prompt. ``max_images`` / ``prune_chunk`` bound the screenshots kept in the conversation.
    ``thinking`` is passed through to the API as is, e.g. {"type": "adaptive"}. ``tools``: what
    Claude is offered, ``["computer"]`` by default; ``"browser"`` adds Anthropic's browser toolset
    (``browser_toolset_20260801``, no beta header), its members run by glassdesk's executor
    (vision.vendors.browser_toolset) on the session's Chromium.
    """

    def __init__(self, instruction: str, *, model: str, system: str = "", api_key: str | None = None,
                 base_url: str | None = None, tool_version: str | None = None, max_tokens: int = 4096,
                 timeout: float = 120.0, max_images: int = 10, prune_chunk: int = 5,
                 thinking: dict[str, Any] | None = None, max_pixels: int = coords.ANTHROPIC_MAX_PIXELS,
                 max_edge: int = coords.ANTHROPIC_MAX_EDGE, tools: list[str] | tuple[str, ...] = ("computer",)):
        model = model.removeprefix("anthropic/")
        super().__init__(instruction, model=model, system=system)
        self.name = f"anthropic/{model}"
        if tool_version is not None and tool_version not in TOOL_VERSIONS:
            raise ValueError(f"unknown tool_version {tool_version!r}; known: {', '.join(TOOL_VERSIONS)}")
        self.tool = TOOL_VERSIONS[tool_version] if tool_version else tool_version_for(model)
        if max_images < 1:
            raise ValueError("max_images must be at least 1")
        if not tools or set(tools) - {"computer", "browser"}:
            raise ValueError(f"tools must be some of computer, browser; got {list(tools)!r}")
        self.tools = tuple(dict.fromkeys(tools))
        self.max_tokens, self.max_images = max_tokens, max_images
        self.prune_chunk, self.thinking = prune_chunk, thinking
        self.space = model_space(max_pixels=max_pixels, max_edge=max_edge)

        # Resolved here rather than by the SDK, which would otherwise go looking for profiles on disk.
        self._api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not self._api_key:
            raise ModelCallError("no Anthropic API key: "
                                 "set ANTHROPIC_API_KEY in the environment of the glassdesk server")
        # Retries belong to the loop, which knows the budget; the SDK would retry twice on its own.
        self._client = anthropic.Anthropic(api_key=self._api_key, base_url=base_url, max_retries=0, timeout=timeout)

        environment = ENVIRONMENT.format(width=self.space.width, height=self.space.height)
        if "browser" in self.tools:
            environment += "\n" + BROWSER_NOTE
        self.system_prompt = f"{environment}\n\n{system}" if system else environment
        self._history: list[dict[str, Any]] = []
        # Last turn's tool_use blocks, each to be answered: (the call, its toolset_name).
        self._pending: list[tuple[ToolCall, str | None]] = []

    # The tools[] entry: the declared display is the image Claude is sent.
    def tool_param(self) -> dict[str, Any]:
        if self.tool.toolset:
            # Every member, zoom included, is on by default, and we serve them all: no configs needed.
            return {"type": self.tool.type}
        param: dict[str, Any] = {"type": self.tool.type, "name": "computer",
                                 "display_width_px": self.space.width, "display_height_px": self.space.height}
        if self.tool.zoom:
            param["enable_zoom"] = True
        return param

    def tool_params(self) -> list[dict[str, Any]]:
        """The request's tools[]: the computer tool and, when asked, the browser toolset (the
        console and network readers enabled, as its executor serves them in a run)."""
        params = [self.tool_param()] if "computer" in self.tools else []
        if "browser" in self.tools:
            params.append({"type": browser_toolset.TOOLSET_TYPE, "configs": browser_toolset.LOOP_CONFIGS})
        return params

    def coordinate_space(self, frame) -> coords.Space:
        return self.space

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        user = self._user_message(observation, results, note)
        messages = [*self._history, user]
        prune_images(messages, self.max_images, self.prune_chunk)
        message = self._create(messages)
        # Committed only after a successful call, so a retried turn does not repeat the user message.
        content = [block.model_dump(exclude_none=True) for block in message.content]
        self._history = [*messages, {"role": "assistant", "content": content or [text_block("(no reply)")]}]
        return self._parse(message)

    def _create(self, messages: list[dict[str, Any]]):
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [{**text_block(self.system_prompt), "cache_control": EPHEMERAL}],
            "tools": self.tool_params(),
            "messages": with_cache_breakpoints(messages),
        }
        if self.tool.beta and "computer" in self.tools:
            kwargs["betas"] = [self.tool.beta]
        if self.thinking:
            kwargs["thinking"] = self.thinking
        try:
            return self._client.beta.messages.create(**kwargs)
        except anthropic.AnthropicError as exc:
            raise model_call_error(exc, self._api_key) from exc

    def _user_message(self, observation: Observation, results: list[CallResult], note: str | None) -> dict[str, Any]:
        screenshot = image_block(observation.frame.scaled_png(self.space.width, self.space.height))
        if not self._history:
            content = [text_block(self.instruction), screenshot]
        elif self._pending:
            content = self._tool_results(results, screenshot)
        else:
            content = [screenshot]
        if note:
            content.append(text_block(note))
        return {"role": "user", "content": content}

    def _tool_results(self, results: list[CallResult], screenshot: dict[str, Any]) -> list[dict[str, Any]]:
        """One tool_result per pending tool_use, same ids; the screenshot goes on the last only."""
        by_id = {r.call_id: r for r in results}
        blocks = []
        for i, (call, toolset_name) in enumerate(self._pending):
            if toolset_name == browser_toolset.TOOLSET_NAME:
                # The executor's tool_result as it rendered it; the screen goes after all results.
                result = by_id.get(call.id)
                content = list(result.content or []) if result is not None else []
                is_error = result is None or not result.ok
                if is_error and not any(b.get("type") == "text" for b in content):
                    content = [text_block(result.error if result is not None and result.error
                                          else "not run: an earlier call of this turn failed")]
                blocks.append({"type": "tool_result", "tool_use_id": call.id, "content": content,
                               "toolset_name": toolset_name, **({"is_error": True} if is_error else {})})
                if i == len(self._pending) - 1:
                    blocks.append(screenshot)
                continue
            content, is_error = result_content(call, by_id.get(call.id), self.space)
            if i == len(self._pending) - 1:
                if any(b["type"] == "image" for b in content):  # a zoom: say which image is which
                    content.append(text_block("The screen now:"))
                content.append(screenshot)
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id}
            if content:
                block["content"] = content
            if is_error:
                block["is_error"] = True
            if toolset_name is not None:
                block["toolset_name"] = toolset_name
            blocks.append(block)
        return blocks

    def _parse(self, message: Any) -> ModelTurn:
        calls, texts, thoughts = [], [], []
        self._pending = []
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "thinking":
                thoughts.append(block.thinking)
            elif block.type == "tool_use":
                toolset_name = getattr(block, "toolset_name", None)
                if toolset_name == browser_toolset.TOOLSET_NAME:
                    member = BrowserMember(name=block.name, input=dict(block.input or {}))
                    call = ToolCall(block.id, block.name, dict(block.input or {}), actions=[member])
                    calls.append(call)
                    self._pending.append((call, toolset_name))
                    continue
                call = parse_tool_use(block.id, block.name, block.input, self.space, toolset_name=toolset_name,
                                      version=self.tool)
                calls.append(call)
                self._pending.append((call, toolset_name))
        text = "\n".join(texts).strip()
        usage = message.usage
        turn = ModelTurn(
            calls=calls, text=text, reasoning="\n".join(thoughts).strip(),
            usage=Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                        cache_read_tokens=usage.cache_read_input_tokens or 0,
                        cache_write_tokens=usage.cache_creation_input_tokens or 0),
            image_size=(self.space.width, self.space.height),
        )
        if not calls:
            if message.stop_reason in ("end_turn", "stop_sequence"):
                turn.done, turn.answer = True, text or None
            elif message.stop_reason == "refusal":
                # Not a tool_use, so nothing is owed back; the loop stops on Fail.
                turn.calls = [ToolCall(message.id, "refusal", {},
                                       actions=[Fail(reason=text or "the model declined to continue")])]
            else:
                turn.parse_error = f"the reply ended ({message.stop_reason}) without a computer action"
        return turn
