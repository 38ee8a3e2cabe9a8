"""The QA verbs as operations of the catalogue (desktop.ops.declare): named exactly as the verbs,
each a REST route under /sessions/{id}/qa, an MCP tool with the verb's request fields as arguments,
and a client method, all from this one declaration. Each call is a QA run with its evidence; the MCP
answer is a short text, the verb's answer as structured content, and the one image that says most
(the page loaded, the element found, the screen where a flow stopped, a visual diff).
"""

from __future__ import annotations

from typing import Any

from desktop.ops.declare import Hints, Operation, Rest, Tool
from vision.models.qa import (
    AnalyzeConsoleRequest,
    BaselineResult,
    CaptureBaselineRequest,
    CompareRequest,
    CompareResult,
    ConsoleResult,
    ElementResult,
    FlowResult,
    PageLoadResult,
    VerifyElementRequest,
    VerifyPageLoadsRequest,
    VerifyUserFlowRequest,
)

WHERE = "the VISIBLE desktop's Chromium"
EVIDENCE = ("Every call is a QA run: test_run_id names its hash-chained, timestamped evidence (screenshots with "
            "SHA-256), its JUnit XML and HTML report.")

# name -> (request model, title, description, read only)
_VERBS: dict[str, tuple[type, str, str, bool]] = {
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
        f"Acts on {WHERE} with real input: opens `start_url` (if given) and runs `steps` in order (navigate, click, "
        "fill, select, press, wait, assert, screenshot, act). A step targets by selector, ref, label, visible text "
        "(the page first, then OCR of the screen), an image (base64 PNG) or x,y; act runs an instruction through the "
        "vision loop. Transient failures are retried up to 3 times, assertions never; timeout_ms bounds the "
        "whole flow. Returns success, steps_completed, failure_step (1-based) and its reason, a screenshot per "
        "step and the console.",
        False),
    "capture_visual_baseline": (
        CaptureBaselineRequest, "Capture a visual baseline of the visible page",
        f"Looks at {WHERE}, after loading `url` if given, and saves a new version of the baseline `name`: the "
        "viewport (or the full page, or with display=true the whole display, its panel masked), plus one shot per "
        "component selector; `mask` leaves regions out of later comparisons.",
        False),
    "compare_visual_regression": (
        CompareRequest, "Compare the visible page with a visual baseline",
        f"Looks at {WHERE}, after loading `url` if given, and compares it with baseline `baseline_id` pixel by "
        "pixel (YIQ distance over pixel_threshold, anti-aliasing ignored). It fails when one connected region of "
        "differing pixels is over max_region_pixels (16 by default: a changed word, icon or border) or the total "
        "is over max_diff_pixels / max_diff_pixel_ratio (a fraction 0..1, default 0.01; `threshold` is its "
        "former name); the reason names the region's box. Whenever a pixel differs it returns a diff image "
        "(changes in red, regions boxed); a failed comparison can be approved as the next baseline version over "
        "REST.",
        False),
    "analyze_console_errors": (
        AnalyzeConsoleRequest, "Analyze the console errors of the visible browser",
        f"Looks at {WHERE}: the console errors (uncaught exceptions included) and warnings, of the load of `url` "
        "if given, else all recorded in the session; messages matching any of `ignore_patterns` (regular "
        "expressions) are left out.",
        False),
}


def summary_text(verb: str, answer: dict) -> str:
    """A verb's answer in a few lines for a model: the verdict, the reason, the run to open."""
    run = f"test_run_id {answer['test_run_id']} (report {answer.get('report_url')})"
    if verb == "verify_page_loads":
        head = (f"{'loaded' if answer['success'] else 'FAILED'}: HTTP {answer['status_code']}, title "
                f"{answer['title']!r}, {answer['load_time_ms']} ms; {len(answer['console_errors'])} console "
                f"error(s), {len(answer['failed_requests'])} failed request(s)")
    elif verb == "verify_element_exists":
        head = (f"{'found' if answer['success'] else 'NOT as expected'}: exists {answer['exists']}, visible "
                f"{answer['visible']}, box {answer['box']}"
                + (f" (by {answer['found_by']})" if answer['found_by'] else ""))
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
        largest = answer.get("largest_region")
        head = (f"{'passed' if answer['passed'] else 'FAILED'}: {answer['diff_pixels']} pixels differ "
                f"({answer['diff_percentage']:.4f}%)"
                + (f", the largest region {largest['pixels']} px at {largest['box']}" if largest else "")
                + f" against {answer['baseline_id']} v{answer['baseline_version']}; limits "
                + ", ".join(f"{k} {v}" for k, v in (answer.get("limits") or {}).items() if v is not None))
    else:
        head = (f"{len(answer['errors'])} error(s), {len(answer['warnings'])} warning(s), {answer['ignored']} "
                "ignored" + "".join(f"\n  error: {e['message'][:300]}" for e in answer["errors"][:20]))
    reason = answer.get("failure_reason") or answer.get("reason")
    return head + (f"\nreason: {reason}" if reason else "") + f"\n{run}"


def picture(verb: str, answer: dict) -> str | None:
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


# name -> (answer, REST summary)
_ANSWERS: dict[str, tuple[type, str]] = {
    "verify_page_loads": (PageLoadResult, "load a URL in the visible browser and check status, title, console and "
                                          "requests"),
    "verify_element_exists": (ElementResult, "is an element there (DOM, or OCR of the screen for text), and visible"),
    "verify_user_flow": (FlowResult, "run steps on the visible desktop and check the outcome, with evidence per step"),
    "capture_visual_baseline": (BaselineResult, "save the page (or the display) as a new version of a visual "
                                                "baseline"),
    "compare_visual_regression": (CompareResult, "compare the page (or the display) with a baseline, pixel by pixel"),
    "analyze_console_errors": (ConsoleResult, "the console's errors and warnings, less those ignore_patterns match"),
}


def _image(verb: str):
    def image(qa: Any, answer: Any) -> bytes | None:
        name = picture(verb, answer.model_dump(mode="json"))
        return qa.artifact(answer.test_run_id, name).read_bytes() if name else None
    return image


def _verb(verb: str) -> Operation:
    model, title, description, read_only = _VERBS[verb]
    answer, summary = _ANSWERS[verb]
    return Operation(
        "qa", verb, model, answer, acts=not read_only,
        call=lambda qa, session, request: getattr(qa, verb)(session, request),
        rest=Rest("POST", f"/qa/{verb}", summary=summary, tags=("qa",)),
        tool=Tool(verb, title, f"{description} {EVIDENCE}", Hints(read_only=read_only, open_world=True),
                  lambda _, result: summary_text(verb, result.model_dump(mode="json")), image=_image(verb),
                  group="qa"))


OPERATIONS: tuple[Operation, ...] = tuple(_verb(verb) for verb in _VERBS)
