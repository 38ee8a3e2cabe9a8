"""The single-shot QA verbs: verify_page_loads, verify_element_exists, analyze_console_errors.

Each is one look at the page (and the display) inside one QA run that ``QaService`` keeps; what it
saw is the answer, success or not. Only a person taking over the session, or a request that cannot
be carried out as given, is an error.
"""

from __future__ import annotations

import io
import re
import time
from urllib.parse import urlsplit

from desktop.actions import Region
from desktop.errors import GlassdeskError
from desktop.models import Target
from vision.models.qa import (
    AnalyzeConsoleRequest,
    ConsoleEntry,
    ConsoleResult,
    ElementResult,
    PageLoadResult,
    VerifyElementRequest,
    VerifyPageLoadsRequest,
)
from vision.qa.driver import (
    CONSOLE_LIMIT,
    Driver,
    FinishRun,
    StartRun,
    _console_line,
    _reason,
)
from vision.qa.expect import REGEX_TEXT_LIMIT


class Verbs:
    """verify_page_loads, verify_element_exists, analyze_console_errors: one look each, in one run."""

    def __init__(self, driver: Driver, run: StartRun, finish: FinishRun):
        self.driver = driver
        self.desktops = driver.desktops
        self.pages = driver.pages
        self._run = run
        self._finish = finish

    # ------------------------------------------------------------------ verify_page_loads

    def verify_page_loads(self, session_id: str | None, request: VerifyPageLoadsRequest) -> PageLoadResult:
        session = self.driver.acting(session_id, request.url)
        with self._run("verify_page_loads", request.name, session, request) as run:
            # Whatever happens to the page or the desktop from here is this verb's answer (200,
            # success false, the reason), never an error: only a person taking over ends it.
            deadline = time.monotonic() + request.timeout_ms / 1000
            result = PageLoadResult(test_run_id=run.run_id, success=False)
            problems: list[str] = []
            try:
                console_from, network_from = self.pages.cursors(session.id)
                try:
                    done = self.driver.navigate(session, request.url, deadline)
                    result.status_code, result.url = done["status"], done["url"]
                    result.load_time_ms = done["load_time_ms"]
                    result.title = self.pages.state(session.id).title
                except GlassdeskError as exc:
                    if exc.code == "operator_in_control":
                        raise
                    problems.append(f"the page did not load: {_reason(exc)}")
                result.console_errors = [_console_line(e) for e in self.pages.console(
                    session.id, console_from, "error")][:CONSOLE_LIMIT]
                result.failed_requests = [_request_line(e) for e in self.pages.network(
                    session.id, network_from, True)][:CONSOLE_LIMIT]
            except GlassdeskError as exc:
                if exc.code == "operator_in_control":
                    raise
                problems.append(f"the browser's record could not be read: {_reason(exc)}")
            if not problems:
                if result.status_code is not None and result.status_code >= 400:
                    problems.append(f"HTTP {result.status_code} from {result.url}")
                elif (request.expected_title is not None
                      and (result.title or "").strip() != request.expected_title.strip()):
                    problems.append(f"title {result.title!r}, expected {request.expected_title!r}")
            try:
                result.screenshot = self.driver.shot(run, session, "page", step="loaded")
            except GlassdeskError as exc:
                if exc.code == "operator_in_control":
                    raise
                problems.append(f"no screenshot: {_reason(exc)}")
            result.reason = "; ".join(problems) or None
            result.success = not problems
            return self._finish(run, "passed" if result.success else "failed", result, {
                "name": request.name or f"page loads: {request.url}",
                "screenshots": [result.screenshot.name] if result.screenshot else [],
                "console_logs": result.console_errors, "failure_reason": result.reason})

    # ------------------------------------------------------------------ verify_element_exists

    def verify_element_exists(self, session_id: str | None, request: VerifyElementRequest) -> ElementResult:
        session = self.driver.acting(session_id, request.url) if request.url else self.desktops.session(session_id)
        target = Target(selector=request.selector, ref=request.ref, text=request.text)
        self.driver.check_selectors(session, [request.selector] if request.selector else [])
        with self._run("verify_element_exists", request.name, session, request) as run:
            result = ElementResult(test_run_id=run.run_id, success=False, exists=False, visible=False)
            miss = None
            deadline = time.monotonic() + request.timeout_ms / 1000
            try:
                if request.url:
                    self.driver.navigate(session, request.url, deadline)
                found = self.driver.find(session, target, deadline, visible=request.should_be_visible)
                result.exists, result.visible = found["exists"], found["visible"]
                result.box, result.matches, result.found_by = found["box"], found["matches"], found.get("how")
                miss = found.get("miss")
            except GlassdeskError as exc:
                if exc.code in ("operator_in_control", "invalid_selector"):
                    raise
                result.reason = _reason(exc)
            screen = self.desktops.screenshot(session.id)
            if result.box:
                result.screenshot["element"] = run.artifact("element", _crop(screen.png, result.box))
                result.screenshot["screen"] = run.artifact("screen-marked", _marked(screen.png, result.box))
            else:
                result.screenshot["screen"] = run.artifact("screen", screen.png)
            result.success = result.exists and (result.visible or not request.should_be_visible)
            if not result.success and result.reason is None:
                result.reason = (f"no element for {target.describe()}" if not result.exists
                                 else f"{target.describe()} exists but is not visible")
                if miss:
                    result.reason += f"; nor on the screen: {miss}"
            return self._finish(run, "passed" if result.success else "failed", result, {
                "name": request.name or f"element exists: {target.describe()}",
                "screenshots": [a.name for a in result.screenshot.values()], "failure_reason": result.reason})

    # ------------------------------------------------------------------ analyze_console_errors

    def analyze_console_errors(self, session_id: str | None, request: AnalyzeConsoleRequest) -> ConsoleResult:
        session = self.driver.acting(session_id, request.url) if request.url else self.desktops.session(session_id)
        ignore = [re.compile(p) for p in request.ignore_patterns]
        with self._run("analyze_console_errors", request.name, session, request) as run:
            since = self.pages.cursors(session.id)[0] if request.url else 0
            problem = None
            if request.url:
                try:
                    self.driver.navigate(session, request.url, time.monotonic() + request.timeout_ms / 1000)
                except GlassdeskError as exc:
                    if exc.code == "operator_in_control":
                        raise
                    problem = ConsoleEntry(message=f"the page did not load: {_reason(exc)}", source=request.url)
            # The load event is not the end of a page's scripts: timers, late bundles and the first
            # fetches throw after it. The record keeps collecting meanwhile; this only waits.
            time.sleep(request.listen_ms / 1000)
            entries = self.pages.console(session.id, since)
            errors: list[ConsoleEntry] = []
            warnings: list[ConsoleEntry] = []
            browsers: list[ConsoleEntry] = []
            ignored = 0
            for entry in entries:
                if entry["level"] not in ("error", "warning"):
                    continue
                source = entry.get("url") or ""
                # A resource's failure names it in its source, not its text: a pattern may name either.
                if any(p.search(entry["text"][:REGEX_TEXT_LIMIT]) or p.search(source[:REGEX_TEXT_LIMIT])
                       for p in ignore):
                    ignored += 1
                    continue
                line = ConsoleEntry(message=entry["text"], source=source, line=entry.get("line") or 0)
                (browsers if browsers_own(entry) else errors if entry["level"] == "error" else warnings).append(line)
            if problem is not None:
                errors.insert(0, problem)
            result = ConsoleResult(test_run_id=run.run_id, has_errors=bool(errors), errors=errors[:CONSOLE_LIMIT],
                                   warnings=warnings[:CONSOLE_LIMIT], ignored=ignored,
                                   browser_requests=browsers[:CONSOLE_LIMIT])
            shot = self.driver.shot(run, session, "console")
            reason = (f"{len(errors)} console error(s); the first: {errors[0].message[:300]}" if errors else None)
            return self._finish(run, "failed" if errors else "passed", result, {
                "name": request.name or ("console errors" + (f": {request.url}" if request.url else "")),
                "screenshots": [shot.name], "console_logs": [e.model_dump() for e in errors + warnings][:CONSOLE_LIMIT],
                "failure_reason": reason})


# ---------------------------------------------------------------------------------------- helpers


def browsers_own(entry: dict) -> bool:
    """A console line about a load the browser made on its own, not the page (pure): Chromium asks
    every origin for /favicon.ico when the page names no icon, after the page has loaded, and logs
    its 404 in the page's console; whether it lands inside a verb's listening time is timing."""
    return entry.get("text", "").startswith("Failed to load resource") and \
        urlsplit(entry.get("url") or "").path == "/favicon.ico"


def _request_line(entry: dict) -> dict:
    return {"method": entry.get("method"), "url": entry.get("url"), "status": entry.get("status"),
            "failure": entry.get("failure"), "blocked": entry.get("blocked")}


def _clip(box: dict) -> Region | None:
    from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH

    x0, y0 = max(0, box["x"]), max(0, box["y"])
    x1, y1 = min(SCREEN_WIDTH, box["x"] + box["width"]), min(SCREEN_HEIGHT, box["y"] + box["height"])
    return (Region(x0=x0, y0=y0, x1=x1, y1=y1)
            if x1 > x0 and y1 > y0 and x0 < SCREEN_WIDTH and y0 < SCREEN_HEIGHT else None)


def _crop(png: bytes, box: dict) -> bytes:
    from PIL import Image

    region = _clip(box)
    image = Image.open(io.BytesIO(png))
    cropped = image.crop((region.x0, region.y0, region.x1, region.y1)) if region is not None else image
    out = io.BytesIO()
    cropped.save(out, format="PNG", compress_level=1)
    return out.getvalue()


def _marked(png: bytes, box: dict) -> bytes:
    """The screen with a red frame around the element (pure)."""
    from PIL import Image, ImageDraw

    image = Image.open(io.BytesIO(png)).convert("RGB")
    draw = ImageDraw.Draw(image)
    x0, y0 = box["x"] - 3, box["y"] - 3
    draw.rectangle((x0, y0, box["x"] + box["width"] + 2, box["y"] + box["height"] + 2), outline=(255, 23, 68), width=3)
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)
    return out.getvalue()
