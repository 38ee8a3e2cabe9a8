"""REST for the vendor-native executors: one route per vendor, each one call into ``ComputerService``.

Plain ``def`` handlers: they block on X and xdotool, and FastAPI runs them in its threadpool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter

from vision.models import (
    AnthropicBrowserRequest,
    AnthropicBrowserResult,
    AnthropicComputerRequest,
    AnthropicComputerResult,
    GeminiComputerRequest,
    GeminiComputerResult,
    OpenAIComputerRequest,
    OpenAIComputerResult,
)
from vision.vendors.computer import ComputerService

if TYPE_CHECKING:  # the anthropic SDK it subclasses costs ~2 s to import: vision.app.service makes it on first use
    from vision.vendors.browser_toolset import BrowserToolsetService


def computer_router(computer: ComputerService, browser: BrowserToolsetService | None = None) -> APIRouter:
    router = APIRouter(prefix="/api/v1", tags=["computer"])

    @router.post("/sessions/{session_id}/computer/anthropic", response_model=AnthropicComputerResult,
                 summary="run an Anthropic computer tool_use; answers the tool_result content")
    def anthropic(session_id: str, body: AnthropicComputerRequest) -> AnthropicComputerResult:
        """The tool_use's ``input`` verbatim, in the declared display's pixels; the answer is the
        tool_result's content (the screen scaled to the declared size). A call the model got wrong
        is 200 with ``is_error``; a bad request, no session, a person in control or a running
        vision instruction are glassdesk's errors."""
        return computer.anthropic(session_id, body)

    @router.post("/sessions/{session_id}/computer/openai", response_model=OpenAIComputerResult,
                 summary="run an OpenAI computer_call's action(s); answers the computer_call_output")
    def openai(session_id: str, body: OpenAIComputerRequest) -> OpenAIComputerResult:
        """``action`` (computer_use_preview) or ``actions`` (GA) verbatim: a keypress list is one
        chord, scroll is in pixels (120 per wheel notch). A call the model got wrong is 200 with
        ``error`` (nothing ran); a bad request, no session, a person in control or a running
        vision instruction are glassdesk's errors."""
        return computer.openai(session_id, body)

    @router.post("/sessions/{session_id}/computer/gemini", response_model=GeminiComputerResult,
                 summary="run a Gemini turn's computer-use function calls; answers their function responses")
    def gemini(session_id: str, body: GeminiComputerRequest) -> GeminiComputerResult:
        """The function calls verbatim (``name``, ``args`` on the 0..999 grid, ``id``), run in
        order; the answer is one function response per call, with the page's URL and the screen
        after it. A call the model got wrong is answered with ``error`` in its response (nothing of
        it ran); a bad request, no session, a person in control or a running vision instruction
        are glassdesk's errors."""
        return computer.gemini(session_id, body)

    if browser is not None:
        @router.post("/sessions/{session_id}/computer/anthropic-browser", response_model=AnthropicBrowserResult,
                     summary="run Anthropic browser toolset tool_use blocks; answers their tool_results")
        def anthropic_browser(session_id: str, body: AnthropicBrowserRequest) -> AnthropicBrowserResult:
            """``browser_toolset_20260801``'s tool_use blocks verbatim, run in order on the session's
            visible Chromium; each answered by its tool_result (text, images, the browser_state). A
            call the model got wrong is an ``is_error`` tool_result; a bad request (422, every
            problem listed), no session, a person in control or a running vision instruction are
            glassdesk's errors."""
            return browser.run(session_id, body)

    return router
