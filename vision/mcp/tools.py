"""The MCP server's instructions and the tools written by hand (desktop.ops lists them with why;
the catalogue's are generated, vision.mcp.operations): what each is called, how it is described to
the agent, and one call into the application service each.

An agent picks its tool from the wording, so every description opens with where the tool acts, in
a few words ("Acts on the VISIBLE desktop."); the server's instructions say once what that desktop
is (XFCE at 1920x1080, a person watching live in noVNC). Each tool names the profile group it
belongs to at its decorator (``group=``, vision.mcp.profiles).
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Annotated, Literal, TypedDict

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from desktop.actions import MODIFIERS, Button, Drag, Point, Region, X, Y, Zoom
from desktop.ops.desktop import ACTS, COORDS, LOOKS, RETURNS_SHOT
from vision.app.service import Glassdesk
from vision.errors import InvalidRequest
from vision.evidence.report import describe_action
from vision.mcp.answers import (
    SessionArg,
    ToolServer,
    WantShot,
    blocking,
    image_block,
    performed,
    text_block,
    tool_annotations,
    tool_result,
)
from vision.models import MAX_EXPECTATIONS, MAX_STEPS_CAP, ActRequest, ActResult, StepSummary
from vision.run import packs

log = logging.getLogger("glassdesk.mcp")

INSTRUCTIONS = """\
glassdesk drives a real, VISIBLE Linux desktop: XFCE at 1920x1080 with Chromium already open and
maximised. A person may be watching it live in noVNC while you work; `live_view_url` gives the link
to hand them (view-only by default; a link lets in new viewers for a limited time, so get a fresh
one when you hand it out).

Use these tools when:
- the user wants to watch what you do ("...so I can watch", "show me", "do it on screen");
- the UI has no usable DOM or accessibility tree (canvas apps, remote screens, images of UIs);
- the task needs a desktop application rather than a web page (`desktop_launch`).
For a headless fetch that nobody needs to watch, a DOM or HTTP tool is the better fit.

How to work:
- Look first: `desktop_screenshot`. Coordinates are display pixels of the whole screen: x 0..1919,
  y 0..1079. The full screenshot is 1920x1080, so image pixels
  are display pixels; a `scale`d or `region` image says in its text how to convert.
- Chromium is already running: navigate with `desktop_open_url` (do not launch another browser),
  then click, type and press keys with the `desktop_*` tools. Each action returns the settled
  screen after it, so a separate screenshot is rarely needed. `desktop_zoom` magnifies small text.
- `vision_act` hands a whole instruction to glassdesk's own vision model loop (it plans, clicks
  and types by itself, reports progress per step, and returns a trace report); the `vision_*`
  packs do common jobs the same way: click something by its description, read the visible text,
  fill a form by its labels.
- The `page_*` tools know the same visible Chromium from the inside, over its DevTools connection:
  `page_state` (URL, title, tabs, an open dialog), `page_content` (visible text, an accessibility
  snapshot whose `ref`s name elements, links, HTML), the console and network logs, dialogs,
  downloads, tabs. `page_click` / `page_fill` take an element by CSS selector, ref, label or text
  and act with the real pointer and keyboard at its pixel, so the operator sees it.
- Every tool takes an optional `session`; omit it to use the default session, which is started
  on first use. `session_create` / `session_list` / `session_close` manage more desktops.
- The tools listed are a profile: core, desktop, page, qa or all (`glassdesk mcp --tools`, or
  `/mcp?tools=`). A tool named here but not listed belongs to another profile.
"""

# The formats the service encodes, desktop.frame.IMAGE_FORMATS's keys (tests/unit/test_mcp_strict.py holds
# them equal), spelt out: a Literal built from the dict at run time is no type to the checker.
ImageFormat = Literal["png", "jpeg", "webp"]
# drag's flat coordinates (the model takes a path), the modifiers as a flat tool has always taken them
Modifiers = Annotated[list[str] | None, Field(description=MODIFIERS)]
REGION = "[x0, y0, x1, y1] in display pixels, x0 < x1 <= 1920, y0 < y1 <= 1080"
RegionArg = Annotated[list[int], Field(min_length=4, max_length=4, description=REGION)]
OptRegionArg = Annotated[list[int] | None, Field(min_length=4, max_length=4, description=REGION + "; omit for the "
                                                 "whole screen")]
ModelArg = Annotated[str | None, Field(description="vision model: provider/model, e.g. "
                                                   "anthropic/claude-sonnet-4-5, openai/computer-use-preview, "
                                                   "gemini/<model>, chat/<model>, ocr (offline), scripted; default: "
                                                   "glassdesk.toml's default_model, else by the API key present, "
                                                   "else ocr")]


class FieldOutcome(TypedDict):
    """One field of vision_fill_form_by_label's answer: its run's outcome."""

    label: str
    status: str
    error: dict | None
    trace_id: str
    report_url: str


def _report_url(ctx: Context, glassdesk: Glassdesk, result: ActResult) -> str:
    """Where a person can open the run's report: the API's URL when called over HTTP, else a
    file:// URL of the report.html the loop wrote into the trace directory (stdio has no web server)."""
    path = f"/api/v1/traces/{result.trace_id}/report"
    try:
        request = ctx.request_context.request
    except ValueError:
        request = None
    if request is not None and hasattr(request, "url"):
        host = request.headers.get("host") or request.url.netloc
        return f"{request.url.scheme}://{host}{path}"
    report = getattr(result, "report_path", None)
    try:
        if not report:
            from vision.evidence.runview import write_report

            report = write_report(glassdesk.store, result.trace_id)
        return Path(report).resolve().as_uri()
    except Exception:  # the report is a convenience; the run's result stands without it
        log.exception("could not write the report of trace %s", result.trace_id)
        return path


def _describe_step(step: StepSummary) -> str:
    text = f"step {step.index}: {', '.join(describe_action(a) for a in step.actions) or 'no action'}"
    if step.error:
        text += f" - {step.error.get('code')}: {step.error.get('message')}"
    elif step.no_effect:
        text += " - no_effect: nothing on the screen changed"
    return text


async def _run_loop(glassdesk: Glassdesk, session: str | None, request: ActRequest, ctx: Context, *,
                    total: int | None = None,
                    offset: int = 0, label: str = "") -> ActResult:
    """Run the loop in a worker thread; report one progress notification per step."""

    def on_step(step: StepSummary) -> None:
        message = f"{label}{_describe_step(step)}"
        try:
            anyio.from_thread.run(ctx.report_progress, offset + step.index, total or request.max_steps, message)
        except Exception:  # the client went away or the request ended: the run goes on
            log.debug("progress not delivered", exc_info=True)

    try:
        return await blocking(glassdesk.act, session, request, on_step)
    except anyio.get_cancelled_exc_class():
        glassdesk.cancel(session)  # the client cancelled the call: stop the run rather than orphan it
        raise


def _act_summary(result: ActResult, report_url: str) -> dict:
    return {"status": result.status, "verified": result.verified, "answer": result.answer, "error": result.error,
            "note": result.note, "steps": len(result.steps),
            **({"checks": [c.model_dump() for c in result.checks]} if result.checks else {}),
            "trace_id": result.trace_id, "report_url": report_url,
            "tokens": result.usage.model_dump(),
            **({"video": result.video.model_dump()} if result.video else {}),
            **({"video_note": result.video_note} if result.video_note else {})}


def _act_text(title: str, result: ActResult, report_url: str) -> str:
    if result.verified is not None:
        verdict: str | None = "verified" if result.verified else "an expectation failed"
    elif result.status in ("done", "done_after_heal"):
        verdict = "unverified: no expectation was checked"
    else:
        verdict = None
    lines = [f"{title}: status {result.status}" + (f" ({verdict})" if verdict else "")]
    lines += [f"{'held' if c.passed else 'FAILED'}: {c.check}: saw {c.saw}" for c in result.checks]
    if result.answer:
        lines.append(f"answer: {result.answer}")
    if result.error:
        lines.append(f"error: {result.error.get('code')}: {result.error.get('message')}")
    if result.note:
        lines.append(f"note: {result.note}")
    if result.video:
        lines.append(f"video: {result.video.url} (sha256 {result.video.sha256}, {result.video.chapters} chapters)")
    elif result.video_note:
        lines.append(result.video_note)
    if result.pending_safety_checks:
        lines.append("waiting for the operator to approve: " +
                     "; ".join(f"[{c.code}] {c.message}" for c in result.pending_safety_checks))
    lines += [_describe_step(s) for s in result.steps]
    lines.append(f"trace report: {report_url}")
    lines.append("The image is the screen when the run returned (1920x1080 display pixels).")
    return "\n".join(lines)



def register_tools(server: ToolServer, glassdesk: Glassdesk) -> None:
    """The tools written by hand (desktop.ops says why each is): each is its wording and one call
    into the service. Tools block in worker threads, never on the event loop."""
    _screen_tools(server, glassdesk.desktops)
    _vision_tools(server, glassdesk)
    _export_tool(server, glassdesk)


def _screen_tools(server: ToolServer, desktops) -> None:
    """The screen as an image (whole, a region, zoomed) and a drag by its two ends."""
    default_session = desktops.default

    # ------------------------------------------------------------------------------ look

    @server.tool(name="desktop_screenshot", group="core",

                 title="Screenshot the visible desktop",
                 annotations=tool_annotations("Screenshot the visible desktop", read_only=True),
                 description=f"{LOOKS} Returns an image of the screen as the person watching sees it, with the "
                             f"pointer position and Chromium's current URL. {COORDS} By default the image is the "
                             "full 1920x1080 screen as PNG, so image pixels ARE display pixels. Optional, as over "
                             "REST: `region` [x0, y0, x1, y1] crops; `scale` (more than 0, at most 4) resizes - "
                             "below 1 to save tokens; `format` jpeg or webp (with `quality` 1..100) makes it "
                             "smaller still. The answer states the mapping: display x = origin x + image x / scale "
                             "(the same for y), origin being the region's top-left corner (0, 0 for the whole "
                             "screen).")
    async def desktop_screenshot(region: OptRegionArg = None,
                                 scale: Annotated[float, Field(gt=0, le=4, description="resize factor, more than "
                                                               "0 and at most 4; 1.0 = full size")] = 1.0,
                                 format: Annotated[ImageFormat, Field(description="png (lossless, the default), "
                                                                      "jpeg or webp")] = "png",
                                 quality: Annotated[int | None, Field(ge=1, le=100, description="jpeg/webp quality "
                                                                      "1..100; default 85 (jpeg), 80 (webp)")] = None,
                                 session: SessionArg = default_session) -> CallToolResult:
        box = Region.model_validate(region) if region is not None else None
        shot = await blocking(lambda: desktops.screenshot(session, region=box, scale=scale, format=format,
                                                          quality=quality, context=True))
        (x0, y0), bounds = shot.origin, list(shot.bounds)
        text = (f"Screenshot of session {shot.session_id!r}: {shot.width}x{shot.height} {shot.format.upper()} of "
                f"display pixels {bounds} ([x0, y0, x1, y1]), {shot.note}.")
        if (x0, y0) != (0, 0) or shot.scale != 1.0:
            text += (f"\nimage pixel (ix, iy) is display pixel ({x0} + ix / {shot.scale:g}, "
                     f"{y0} + iy / {shot.scale:g})")
        if shot.pointer:
            text += f"\npointer at: {shot.pointer[0]}, {shot.pointer[1]} (display pixels)"
        if shot.url:
            text += f"\nChromium URL: {shot.url}"
        structured = {"session": shot.session_id, "width": shot.width, "height": shot.height, "region": bounds,
                      "origin": [x0, y0], "scale": shot.scale, "format": shot.format,
                      "media_type": shot.media_type, "coordinates": shot.note,
                      "pointer": list(shot.pointer) if shot.pointer else None, "url": shot.url}
        return CallToolResult(content=[text_block(text), image_block(shot.image, shot.media_type)],
                              structured_content=structured)

    @server.tool(name="desktop_zoom", group="core",

                 title="Zoom into a region of the visible desktop",
                 annotations=tool_annotations("Zoom into a region of the visible desktop", read_only=True),
                 description=f"{LOOKS} Returns a magnified PNG of one region, to read small text or check "
                             f"details before clicking. {COORDS} Image pixel (ix, iy) is display pixel "
                             "(x0 + ix / scale, y0 + iy / scale).")
    async def desktop_zoom(region: RegionArg,
                           scale: Annotated[float, Field(gt=0, le=4, description="magnification, default 1 "
                                                                                 "(the region at full resolution)")]
                           = Zoom.model_fields["scale"].default,
                           session: SessionArg = default_session) -> CallToolResult:
        shot = await blocking(desktops.zoom, session, Zoom(region=region, scale=scale))
        text = f"Zoom of session {shot.session_id!r}: {shot.width}x{shot.height} PNG, {shot.note}."
        return tool_result(text, shot.png, {"session": shot.session_id, "region": region, "scale": scale,
                                        "width": shot.width, "height": shot.height})

    # ------------------------------------------------------------------------------ input

    @server.tool(name="desktop_drag", group="core",

                 title="Drag on the visible desktop",
                 annotations=tool_annotations("Drag on the visible desktop", destructive=True, open_world=True),
                 description=f"{ACTS} Presses at (start_x, start_y), moves to (end_x, end_y) and releases: "
                             f"sliders, selections, drag and drop. {COORDS} {RETURNS_SHOT}")
    async def desktop_drag(start_x: X, start_y: Y, end_x: X, end_y: Y, button: Button = "left",
                           modifiers: Modifiers = None, screenshot: WantShot = True,
                           session: SessionArg = default_session) -> CallToolResult:
        action = Drag(path=[Point(x=start_x, y=start_y), Point(x=end_x, y=end_y)], button=button,
                      modifiers=modifiers or [])
        done = await blocking(desktops.perform, session, action)
        return performed(session, done, f"drag ({start_x}, {start_y}) -> ({end_x}, {end_y})", screenshot,
                         "drag", action)


def _vision_tools(server: ToolServer, glassdesk: Glassdesk) -> None:
    """vision_act and the packs: runs of the vision loop, with a progress notification per step."""
    default_session = glassdesk.desktops.default

    # ------------------------------------------------------------------------------ vision

    async def act(ctx: Context, session: str, instruction: str, *, model: str | None, max_steps: int,
                  script: list[dict] | None = None, secrets: dict[str, str] | None = None,
                  total: int | None = None, offset: int = 0, label: str = "", record_video: bool = False,
                  video_format: str = "mp4", expect: list[dict] | None = None, marks: bool = False) -> ActResult:
        request = ActRequest(instruction=instruction, model=model, max_steps=max_steps, script=script,
                             secrets=secrets or {}, record_video=record_video, video_format=video_format,
                             expect=expect or [], marks=marks)
        return await _run_loop(glassdesk, session, request, ctx, total=total, offset=offset, label=label)

    def pack_act(ctx: Context, session: str, model: str | None, total: int | None = None) -> packs.Act:
        async def run(instruction: str, max_steps: int, offset: int, label: str) -> ActResult:
            return await act(ctx, session, instruction, model=model, max_steps=max_steps, total=total,
                             offset=offset, label=label)
        return run

    def _model_family(model: str | None) -> str:
        return glassdesk.config.resolve(model).split("/", 1)[0]

    def _from_run(title: str, result: ActResult, ctx: Context, *, error_unless_done: bool, extra: dict | None = None):
        url = _report_url(ctx, glassdesk, result)
        png = base64.b64decode(result.final_screenshot) if result.final_screenshot else None
        structured = {**_act_summary(result, url), **(extra or {})}
        return tool_result(_act_text(title, result, url), png, structured,
                       error=error_unless_done and result.status != "done")

    @server.tool(name="vision_act", group="core",

                 title="Do a task on the visible desktop with the vision model",
                 annotations=tool_annotations("Do a task on the visible desktop with the vision model",
                                               destructive=True, open_world=True),
                 description=f"{ACTS} Hands a whole instruction (\"open example.com and click Sign in\") to "
                             "glassdesk's vision loop: it screenshots, asks the vision model what to do, clicks and "
                             "types, waits for the screen to settle, and repeats until done or max_steps. Sends a "
                             "progress notification per step. Returns the status (done, done_after_heal, failed, "
                             "max_steps, budget_exceeded, needs_confirmation, cancelled, or paused when a person "
                             "holds the desktop), the model's answer, the final "
                             "screenshot and the URL of the trace report (every step's screenshots and commands). "
                             "With expect, the model's done is checked: verified true only when every expectation "
                             "holds, else the run fails with expectation_failed and says what it saw; without "
                             "expect, done is only the model's word (verified null).")
    async def vision_act(instruction: Annotated[str, Field(min_length=1, max_length=10_000,
                                                           description="what to do, in plain words")],
                         ctx: Context, model: ModelArg = None,
                         max_steps: Annotated[int, Field(ge=1, le=MAX_STEPS_CAP)] = 10,
                         script: Annotated[list[dict] | None, Field(description="only for model 'scripted' (demos "
                                           "and tests): the actions to replay, e.g. [{\"action\": \"click\", \"x\": "
                                           "10, \"y\": 20}, {\"action\": \"done\"}]")] = None,
                         secrets: Annotated[dict[str, str] | None, Field(description="values typed where the "
                                            "instruction or the model writes {{name}}; never sent to the model nor "
                                            "written to the trace")] = None,
                         record_video: Annotated[bool, Field(description="film the run: a video receipt with a "
                                                 "chapter per step, a ring at every click, the typing as "
                                                 "captions; its SHA-256 chained into the trace")] = False,
                         video_format: Annotated[Literal["mp4", "webm"], Field(description="the receipt's format")]
                         = "mp4",
                         # Checked as vision/act's expect is (ActRequest): the QA step schema inline would more
                         # than double the core profile's size for a field most calls leave out.
                         expect: Annotated[list[dict] | None, Field(
                             max_length=MAX_EXPECTATIONS, description="what must hold when the model says done: "
                             "assert steps of the QA language without their action, e.g. [{\"assertion\": "
                             "{\"type\": \"has_text\", \"expected\": \"Hello\"}, \"selector\": \"#greeting\"}] "
                             "(see verify_user_flow's steps)")] = None,
                         marks: Annotated[bool, Field(description="set-of-marks: the model sees the controls "
                                                      "numbered, with their list (not for ocr)")] = False,
                         session: SessionArg = default_session) -> CallToolResult:
        result = await act(ctx, session, instruction, model=model, max_steps=max_steps, script=script, secrets=secrets,
                           record_video=record_video, video_format=video_format, expect=expect, marks=marks)
        return _from_run("vision_act", result, ctx, error_unless_done=False)

    @server.tool(name="vision_click_anywhere", group="desktop",

                 title="Click something on the visible desktop by its description",
                 annotations=tool_annotations("Click something on the visible desktop by its description",
                                               destructive=True, open_world=True),
                 description=f"{ACTS} Finds what you describe on the screen (a button's text, a link, a label) "
                             "with the vision model and clicks it - no coordinates needed. Returns where it "
                             "clicked, the screenshot after, and the trace report URL; an error if it was not found.")
    async def vision_click_anywhere(target: Annotated[str, Field(min_length=1, max_length=500, description=
                                                                 "what to click, e.g. the visible text \"Sign in\"")],
                                    ctx: Context, model: ModelArg = None, session: SessionArg = default_session,
                                    ) -> CallToolResult:
        result, clicks = await packs.click_anywhere(pack_act(ctx, session, model), target, _model_family(model))
        return _from_run(f"click {target!r}", result, ctx, error_unless_done=True, extra={"clicked": clicks})

    @server.tool(name="vision_extract_visible_text", group="desktop",

                 title="Read the text on the visible desktop",
                 annotations=tool_annotations("Read the text on the visible desktop", read_only=True, open_world=True),
                 description=f"{LOOKS} Reads the text visible on the screen with the vision model (offline OCR "
                             "by default) and returns it, plus the screenshot it read and the trace report URL.")
    async def vision_extract_visible_text(ctx: Context, model: ModelArg = None,
                                          session: SessionArg = default_session) -> CallToolResult:
        result = await packs.extract_visible_text(pack_act(ctx, session, model), _model_family(model))
        return _from_run("visible text", result, ctx, error_unless_done=True, extra={"text": result.answer})

    @server.tool(name="vision_fill_form_by_label", group="desktop",

                 title="Fill a form on the visible desktop by its labels",
                 annotations=tool_annotations("Fill a form on the visible desktop by its labels",
                                               destructive=True, open_world=True),
                 description=f"{ACTS} Fills form fields found by their visible labels: for each label -> "
                             "value pair the vision model finds the field next to the label, clicks it and types "
                             "the value. Does not submit (click the button yourself, or vision_click_anywhere). "
                             "Returns each field's outcome, the final screenshot and the trace report URLs.")
    async def vision_fill_form_by_label(fields: Annotated[dict[str, str], Field(min_length=1, max_length=50,
                                                                               description="label -> value, e.g. "
                                                                               "{\"Email\": \"ann@example.com\"}")],
                                        ctx: Context, model: ModelArg = None,
                                        session: SessionArg = default_session) -> CallToolResult:
        form = await packs.fill_form_by_label(pack_act(ctx, session, model, total=packs.FIELD_STEPS * len(fields)),
                                              fields, _model_family(model))
        outcomes: list[FieldOutcome] = [{"label": label, "status": r.status, "error": r.error,
                                         "trace_id": r.trace_id, "report_url": _report_url(ctx, glassdesk, r)}
                                        for label, r in form.fields]
        last = form.last
        failed = [o for o in outcomes if o["status"] != "done"]
        lines = [f"filled {len(outcomes) - len(failed)} of {len(outcomes)} fields"]
        for o in outcomes:
            why = f" - {o['error'].get('code')}: {o['error'].get('message')}" if o["error"] else ""
            lines.append(f"{o['label']}: {o['status']}{why} (report: {o['report_url']})")
        lines.append("The image is the screen after the last field (1920x1080 display pixels).")
        png = base64.b64decode(last.final_screenshot) if last and last.final_screenshot else None
        return tool_result("\n".join(lines), png, {"fields": outcomes}, error=bool(failed))


def _export_tool(server: ToolServer, glassdesk: Glassdesk) -> None:
    """A run exported as a test."""

    @server.tool(name="export_test", group="qa", title="Export a run as a test",
                 annotations=tool_annotations("Export a run as a test", read_only=True),
                 description="Looks at the VISIBLE desktop's recorded runs; changes nothing. Turns a finished "
                             "vision run (its `trace_id`) or a verify_user_flow QA run (its "
                             "`test_run_id`) into a test that replays it without a model: `format` yaml (a "
                             "glassdesk qa suite), playwright-ts (an @playwright/test spec) or playwright-py (a "
                             "pytest-playwright test). Each pointer step targets the element recorded under its "
                             "pixel by its best verified locator (the pixel where none was recorded); a URL that "
                             "changed is proposed as an assertion. Secrets stay {{name}} placeholders, read from "
                             "GLASSDESK_SECRET_<NAME> when it runs. Returns the file's text.")
    async def export_test(format: Annotated[Literal["yaml", "playwright-ts", "playwright-py"],
                                            Field(description="yaml, playwright-ts or playwright-py")] = "yaml",
                          trace_id: Annotated[str | None, Field(description="a vision run's trace id")] = None,
                          test_run_id: Annotated[str | None, Field(description="a QA run's id (verify_user_flow)")]
                          = None) -> CallToolResult:
        if (trace_id is None) == (test_run_id is None):
            raise InvalidRequest("give exactly one of trace_id (a vision run) or test_run_id (a QA run)")
        if trace_id is not None:
            text = await blocking(glassdesk.export_trace, trace_id, format)
        else:
            text = await blocking(glassdesk.qa.export, test_run_id, format)
        return tool_result(text, None, {"format": format, "trace_id": trace_id, "test_run_id": test_run_id,
                                    "text": text})

