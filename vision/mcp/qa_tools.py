"""The QA tools of the MCP catalogue, named exactly as the verbs: thin adapters over
vision.qa.service.QaService.

Each tool takes the same arguments as the verb's REST body (generated from its request model, so
the two cannot drift) plus ``session``, makes one call into the service and answers with a short
text, the verb's answer as structured content, and the one image that says most (the page loaded,
the element found, the screen where a flow stopped, a visual diff).
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from vision.mcp.tools import SessionArg, _annotations, _image, _text, blocking
from vision.qa.models import (
    AnalyzeConsoleRequest, CaptureBaselineRequest, CompareRequest, VerifyElementRequest, VerifyPageLoadsRequest,
    VerifyUserFlowRequest,
)
from vision.service import Glassdesk

WHERE = "the VISIBLE Chromium on the desktop the operator watches live in noVNC"
EVIDENCE = ("Every call is a QA run: test_run_id names its hash-chained, timestamped evidence (screenshots with "
            "SHA-256), its JUnit XML and HTML report.")

# name -> (request model, title, description, read only)
VERBS: dict[str, tuple[type[BaseModel], str, str, bool]] = {
    "verify_page_loads": (
        VerifyPageLoadsRequest, "Verify a page loads in the visible browser",
        f"Acts on {WHERE}: loads `url` and checks it: success is false, with the reason, on an HTTP error "
        "status, a navigation error, an unreachable host or a title other than `expected_title`. Returns the "
        "status code, title, load time, the console errors and failed requests of the load, and a screenshot.",
        False),
    "verify_element_exists": (
        VerifyElementRequest, "Verify an element is on the visible page",
        f"Looks at {WHERE}, after loading `url` if given: is the element there (by `selector`, `ref` or visible "
        "`text`: the page first, then OCR of the screen, which finds text drawn on a canvas), and visible? A "
        "missing element is exists false, not an error. Returns its box in display pixels and screenshots of "
        "the element and of the screen with a marker.",
        False),
    "verify_user_flow": (
        VerifyUserFlowRequest, "Verify a user flow on the visible desktop",
        f"Acts on {WHERE} with real input: opens `start_url` and runs `steps` in order (navigate, click, fill, "
        "select, press, wait, assert, screenshot, act). A step targets by selector, ref, label, visible text (the "
        "page first, then OCR of the screen), an image (base64 PNG) or x,y; act runs an instruction through the "
        "vision loop. Transient failures are retried up to 3 times, assertions never; timeout_ms bounds the "
        "whole flow. Returns success, steps_completed, failure_step (1-based) and its reason, a screenshot per "
        "step and the console.",
        False),
    "capture_visual_baseline": (
        CaptureBaselineRequest, "Capture a visual baseline of the visible page",
        f"Looks at {WHERE}, after loading `url` if given, and saves a new version of the baseline `name`: the "
        "viewport (or the full page, or with display=true the whole display, its clock masked), plus one shot per "
        "component selector; `mask` leaves regions out of later comparisons.",
        False),
    "compare_visual_regression": (
        CompareRequest, "Compare the visible page with a visual baseline",
        f"Looks at {WHERE}, after loading `url` if given, and compares it with baseline `baseline_id` pixel by "
        "pixel (YIQ distance over pixel_threshold, anti-aliasing ignored): passed when at most `threshold` of "
        "the pixels differ. A failed comparison returns a diff image (changes in red) and can be approved as the "
        "next baseline version over REST.",
        False),
    "analyze_console_errors": (
        AnalyzeConsoleRequest, "Analyze the console errors of the visible browser",
        f"Looks at {WHERE}: the console errors (uncaught exceptions included) and warnings, of the load of `url` "
        "if given, else all recorded in the session; messages matching any of `ignore_patterns` (regular "
        "expressions) are left out.",
        False),
}


def _parameters(model: type[BaseModel], default_session: str) -> list[inspect.Parameter]:
    """The request model's fields as keyword parameters (constraints and descriptions kept)."""
    params = []
    for name, field in model.model_fields.items():
        annotation: Any = Annotated[(field.annotation, *field.metadata, Field(description=field.description))] \
            if field.description or field.metadata else field.annotation
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    params.append(inspect.Parameter("session", inspect.Parameter.KEYWORD_ONLY, default=default_session,
                                    annotation=SessionArg))
    return params


def _summary(verb: str, answer: dict) -> str:
    run = f"test_run_id {answer['test_run_id']} (report {answer.get('report_url')})"
    if verb == "verify_page_loads":
        head = (f"{'loaded' if answer['success'] else 'FAILED'}: HTTP {answer['status_code']}, title "
                f"{answer['title']!r}, {answer['load_time_ms']} ms; {len(answer['console_errors'])} console "
                f"error(s), {len(answer['failed_requests'])} failed request(s)")
    elif verb == "verify_element_exists":
        head = (f"{'found' if answer['success'] else 'NOT as expected'}: exists {answer['exists']}, visible "
                f"{answer['visible']}, box {answer['box']}" + (f" (by {answer['found_by']})" if answer['found_by'] else ""))
    elif verb == "verify_user_flow":
        head = (f"flow {'passed' if answer['success'] else 'FAILED'}: {answer['steps_completed']} of "
                f"{len(answer['steps']) if answer['success'] else '?'} steps completed")
        if not answer["success"]:
            head = (f"flow FAILED at step {answer['failure_step']}, after {answer['steps_completed']} completed")
        head += "".join(f"\n  step {s['index']} {s['status']}: {s['name']}" for s in answer["steps"])
    elif verb == "capture_visual_baseline":
        head = (f"baseline {answer['baseline_id']} version {answer['version']} ({answer['scope']}): "
                + ", ".join(f"{s['name']} sha256 {s['sha256'][:16]}…" for s in answer["screenshots"]))
    elif verb == "compare_visual_regression":
        head = (f"{'passed' if answer['passed'] else 'FAILED'}: {answer['diff_pixels']} pixels differ "
                f"({answer['diff_percentage']:.4f}%, threshold {answer['threshold'] * 100:g}%) against "
                f"{answer['baseline_id']} v{answer['baseline_version']}")
    else:
        head = (f"{len(answer['errors'])} error(s), {len(answer['warnings'])} warning(s), {answer['ignored']} "
                "ignored" + "".join(f"\n  error: {e['message'][:300]}" for e in answer["errors"][:20]))
    reason = answer.get("failure_reason") or answer.get("reason")
    return head + (f"\nreason: {reason}" if reason else "") + f"\n{run}"


def _picture(verb: str, answer: dict) -> str | None:
    """The artifact name of the one image to show with the answer."""
    if verb == "verify_page_loads":
        return (answer.get("screenshot") or {}).get("name")
    if verb == "verify_element_exists":
        shots = answer.get("screenshot") or {}
        return (shots.get("element") or shots.get("screen") or {}).get("name")
    if verb == "verify_user_flow":
        return (answer["screenshots"][-1]["name"]) if answer.get("screenshots") else None
    if verb == "compare_visual_regression":
        return (answer.get("diff_image") or {}).get("name")
    return None


def register_qa_tools(server: MCPServer, glassdesk: Glassdesk) -> None:
    qa = glassdesk.qa
    default_session = glassdesk.desktops.default

    def register(verb: str, model: type[BaseModel], title: str, description: str, read_only: bool) -> None:
        call = getattr(qa, verb)

        async def tool(**arguments: Any) -> CallToolResult:
            session = arguments.pop("session", default_session)
            request = model.model_validate(arguments)  # the checks REST makes, and its error codes
            answer = (await blocking(call, session, request)).model_dump(mode="json")
            content: list = [_text(_summary(verb, answer))]
            picture = _picture(verb, answer)
            if picture:
                path = await blocking(qa.artifact, answer["test_run_id"], picture)
                content.append(_image(await blocking(path.read_bytes)))
            return CallToolResult(content=content, structured_content={"session": session, **answer},
                                  is_error=False)

        tool.__name__ = verb
        tool.__signature__ = inspect.Signature(_parameters(model, default_session),  # type: ignore[attr-defined]
                                               return_annotation=CallToolResult)
        server.tool(name=verb, title=title, description=f"{description} {EVIDENCE}",
                    annotations=_annotations(title, read_only=read_only, open_world=True))(tool)

    for verb, (model, title, description, read_only) in VERBS.items():
        register(verb, model, title, description, read_only)
