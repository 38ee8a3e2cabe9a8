"""Anthropic's browser toolset (``browser_toolset_20260801``) served on the session's visible Chromium.

The driver is a subclass of the anthropic SDK's own ``BetaAbstractBrowserToolset20260801``: the
SDK parses each member's input, applies the URL and file policies, renders each result and the
``browser_state`` block exactly as its API expects, and keeps the changes a failed call could not
report for the next one. Every member here runs on glassdesk's page layer (``PageService``) or the
desktop (``DesktopService``), so the guards of every direct action hold and the operator sees it:

- clicks, hovers, drags, keys and typing are real input at display pixels (a ref's element located
  and scrolled into view by the page layer; a viewport point moved by the viewport's origin);
- ``form_input`` is the page layer's fill (real typing), check (a real click when the state differs)
  or select (DevTools: a native popup has no pixel), chosen by the element;
- ``navigate`` meets the session's network policy before the browser does (refused with the
  reason), and the policy proxy below the browser refuses the rest; a refused page navigation is
  reported to the model ("A navigation was refused.");
- the opt-in members answer only when the request's configs enable them (the SDK refuses the
  others) and the server allows them: ``javascript_exec`` needs ``--allow-evaluate``;
  ``file_upload`` takes files the request staged (``files``, by document id) or the session's own
  downloads (by name), never a path of the server's disk.

Faults of the request or the desktop (no session, a person in control, a vision run, the browser
restarting) are glassdesk's errors for the caller; a call the model got wrong is its ``is_error``
tool_result.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

from anthropic.lib.tools import ToolError
from anthropic.tools.browser import (
    BetaAbstractBrowserToolset20260801,
    BetaBrowserNavigateResult,
    BetaBrowserState,
    BetaDialogDismissed,
    BetaNavigationRefused,
    BetaScreenshotResult,
)
from anthropic.types.beta import BetaBrowserToolsetConfigsParam, BetaToolUseBlock

from desktop.actions import Region
from desktop.errors import (
    GlassdeskError,
    InvalidAction,
    InvalidRequest,
    OperatorInControl,
    PageUnavailable,
    SessionBusy,
    SessionNotFound,
    SessionUnavailable,
)
from desktop.models import Target, UploadFile
from vision.actions import BrowserMember
from vision.converters import anthropic as computer_tool
from vision.converters import anthropic_browser as browser
from vision.models import AnthropicBrowserRequest, AnthropicBrowserResult

# The request's or the desktop's faults: glassdesk's errors for the caller, not the model's to fix.
FATAL = (SessionNotFound, SessionBusy, OperatorInControl, SessionUnavailable, PageUnavailable)


class _Marks:
    """What one session's browser reported last: the page layer's sequence numbers and tab ids."""

    def __init__(self, pages, session_id: str):
        record_marks = pages.cursors(session_id)  # console, network
        self.console_read, self.network_read = record_marks
        self.network = record_marks[1]
        self.dialogs = max((e["seq"] for e in pages.dialogs(session_id)), default=0)
        self.downloads = max((e["seq"] for e in pages.downloads(session_id)), default=0)
        self.tabs: set[str] = {t.id for t in pages.tabs(session_id)}


class FilePolicy:
    """Which files ``file_upload`` may hand over: the request's staged files by document id, the
    session's finished downloads by name. Download paths never reach the model (the server's disk)."""

    def __init__(self, pages, session_id: str, staged: dict[str, UploadFile]):
        self.pages, self.session_id, self.staged = pages, session_id, staged

    def resolve_upload_paths(self, context, paths: Sequence[str]) -> list[str]:
        names = {e["name"] for e in self.pages.downloads(self.session_id) if not e.get("failure")}
        refused = [p for p in paths if p not in names]
        if refused:
            raise ToolError(f"{', '.join(refused)}: a path must be the name of one of this browser's downloads")
        return list(paths)

    def resolve_upload_documents(self, context, document_ids: Sequence[str]) -> list[str]:
        unknown = [d for d in document_ids if d not in self.staged]
        if unknown:
            raise ToolError(f"{', '.join(unknown)}: no file staged under that document id")
        return list(document_ids)

    def is_path_visible(self, path: str) -> bool:
        return False


class GlassdeskBrowserToolset(BetaAbstractBrowserToolset20260801):
    """The toolset's members on one session's browser and desktop."""

    def __init__(self, service: BrowserToolsetService, session_id: str, configs: dict | None,
                 staged: dict[str, UploadFile]):
        self.service, self.session_id = service, session_id
        self.desktops, self.pages = service.desktops, service.desktops.pages
        self.staged = staged
        self.fatal: GlassdeskError | None = None
        self.marks = _Marks(self.pages, session_id)
        self.file_policy = FilePolicy(self.pages, session_id, staged)
        # The request's configs are the JSON of the SDK's own TypedDict, which it reads by key
        super().__init__(configs=cast("BetaBrowserToolsetConfigsParam | None", configs), confirm=lambda context: True,
                         url_policy=self._url_policy, file_policy=self.file_policy)

    # --- the pipeline's hooks

    def _url_policy(self, context, url: str) -> None:
        target = browser.navigate_url(url)
        if target in ("back", "forward", "reload"):
            return
        try:
            self.desktops.check_url(target, self.desktops.session(self.session_id))
        except GlassdeskError as exc:
            if isinstance(exc, FATAL):
                self.fatal = exc
            raise ToolError(f"navigation refused: {exc.message}") from None

    def execute(self, context, name, input):
        try:
            return super().execute(context, name, input)
        except browser.TargetError as exc:
            raise ToolError(str(exc)) from None
        except GlassdeskError as exc:
            if isinstance(exc, FATAL):
                self.fatal = exc
            raise ToolError(f"{exc.code}: {exc.message}") from None
        except ValueError as exc:  # the desktop's action models refusing a value (a key name, a duration)
            raise ToolError(computer_tool.explain(exc)) from None

    def _browser_state(self, context) -> BetaBrowserState:
        try:
            return self._read_state()
        except GlassdeskError as exc:
            # The browser could not say (restarting): the request's fault to report, not the model's;
            # the SDK takes any exception here for a broken driver.
            self.fatal = self.fatal or exc
            return BetaBrowserState(tabs=[])

    def _read_state(self) -> BetaBrowserState:
        sid, marks = self.session_id, self.marks
        tabs = self.pages.tabs(sid)
        changes: list[Any] = [{"type": "tab_opened", "tab_id": t.id} for t in tabs if t.id not in marks.tabs]
        marks.tabs = {t.id for t in tabs}
        downloads = [e for e in self.pages.downloads(sid) if e["seq"] > marks.downloads]
        changes += [browser.download_change(e) for e in downloads]
        marks.downloads = max([marks.downloads, *(e["seq"] for e in downloads)])
        dialogs = [e for e in self.pages.dialogs(sid) if e["seq"] > marks.dialogs and e.get("handled")]
        changes += [BetaDialogDismissed(kind=e["type"], message=e.get("message", ""))
                    for e in dialogs if browser.dismissed_dialog(e)]
        marks.dialogs = max([marks.dialogs, *(e["seq"] for e in dialogs)])
        network = self.pages.network(sid, since=marks.network)
        if any(browser.refused_navigation(e) for e in network):
            changes.append(BetaNavigationRefused())
        marks.network = max([marks.network, *(e["seq"] for e in network)])
        entries = [{"tab_id": t.id, "title": t.title, "url": t.url, "active": t.active} for t in tabs]
        if entries and sum(e["active"] for e in entries) != 1:  # the API wants exactly one
            for i, e in enumerate(entries):
                e["active"] = i == 0
        return BetaBrowserState(tabs=entries, state_changes=changes)

    # --- helpers

    def _tab(self, tab_id: str | None) -> None:
        """A member naming a tab acts on it: it is brought to the front first (what the operator sees)."""
        if tab_id and not any(t.id == tab_id and t.active for t in self.pages.tabs(self.session_id)):
            self.pages.activate_tab(self.session_id, tab_id)

    def _viewport(self) -> browser.Viewport:
        return browser.Viewport.of(self.pages.viewport(self.session_id))

    def _point(self, target: dict) -> tuple[int, int]:
        """A target's display pixel: a viewport point moved by the viewport's origin, or a ref's
        element located (scrolled into view, the pointer moved onto it) by the page layer."""
        if target["type"] == "coordinate":
            return self._viewport().to_display(target.get("x"), target.get("y"))
        acted = self.pages.hover(self.session_id, Target(ref=browser.to_page_ref(target.get("ref", ""))))
        return acted.x, acted.y

    def _run(self, actions: list) -> None:
        for step in actions:
            self.desktops.perform(self.session_id, step)

    def _perform(self, name: str, input: dict, point=None) -> None:
        """A pointer member at a display point (a ref's element, located), or a key member."""
        action, args = browser.computer_input(name, input, point)
        self._run(computer_tool.to_actions(action, args, browser.DISPLAY))

    def _pointer(self, name: str, input) -> None:
        raw = input.model_dump(by_alias=True, exclude_none=True)
        self._tab(raw.get("tab_id"))
        target = browser.target_of(raw)
        if target["type"] == "ref" and name in browser.CLICKS and not raw.get("modifiers"):
            button, count = browser.CLICKS[name]
            self.pages.click(self.session_id, Target(ref=browser.to_page_ref(target.get("ref", ""))),
                             button=button, click_count=count)
            return None
        if target["type"] == "coordinate":
            self._run(browser.to_display_actions(name, raw, self._viewport()))
        else:
            self._perform(name, raw, self._point(target))
        return None

    # --- members: navigation and tabs

    def navigate(self, context, input) -> BetaBrowserNavigateResult:
        self._tab(input.tab_id)
        url = browser.navigate_url(input.url)
        how = url if url in ("back", "forward", "reload") else "goto"
        done = self.pages.navigate(self.session_id, how, None if how != "goto" else url)
        title = next((t.title for t in self.pages.tabs(self.session_id) if t.active), None)
        return BetaBrowserNavigateResult(url=done.get("url") or url, status=done.get("status"), title=title)

    def list_tabs(self, context, input):
        return [{"tab_id": t.id, "title": t.title, "url": t.url, "active": t.active}
                for t in self.pages.tabs(self.session_id)]

    def new_tab(self, context, input):
        tab = self.pages.new_tab(self.session_id, None)
        return {"tab_id": tab.id, "title": tab.title, "url": tab.url, "active": True}

    def switch_tab(self, context, input):
        tabs = self.pages.activate_tab(self.session_id, input.tab_id)
        tab = next(t for t in tabs if t.id == input.tab_id)
        return {"tab_id": tab.id, "title": tab.title, "url": tab.url, "active": True}

    def close_tab(self, context, input) -> None:
        self.pages.close_tab(self.session_id, input.tab_id)

    # --- members: reading

    def _snapshot(self) -> str:
        return self.pages.content(self.session_id, "accessibility").content

    def read_page(self, context, input) -> str:
        self._tab(input.tab_id)
        return browser.read_page_text(self._snapshot(), depth=input.depth, filter=input.filter, ref=input.ref)

    def find(self, context, input) -> str:
        self._tab(input.tab_id)
        matches = browser.find_matches(self._snapshot(), input.query)
        return "\n".join(matches) if matches else f"No element matches {input.query!r}."

    def get_page_text(self, context, input) -> str:
        self._tab(input.tab_id)
        text = self.pages.content(self.session_id, "text").content
        return browser.cut(text, browser.PAGE_TEXT_LIMIT, "read_page with a ref reads a part")

    def read_console(self, context, input) -> str:
        self._tab(input.tab_id)
        entries = self.pages.console(self.session_id, since=self.marks.console_read)
        self.marks.console_read = max([self.marks.console_read, *(e["seq"] for e in entries)])
        return browser.cut(browser.console_lines(entries), browser.PAGE_TEXT_LIMIT, "read again for the rest")

    def read_network(self, context, input) -> str:
        self._tab(input.tab_id)
        entries = self.pages.network(self.session_id, since=self.marks.network_read)
        self.marks.network_read = max([self.marks.network_read, *(e["seq"] for e in entries)])
        return browser.cut(browser.network_lines(entries), browser.PAGE_TEXT_LIMIT, "read again for the rest")

    def javascript_exec(self, context, input) -> str:
        # A control plane's pages have no flag of their own: its session server refuses (EvaluateDisabled).
        if getattr(self.pages, "allow_evaluate", True) is False:
            raise ToolError("javascript_exec is off on this server: it runs only when the server is started "
                            "with --allow-evaluate")
        self._tab(input.tab_id)
        return json.dumps(self.pages.evaluate(self.session_id, input.text), ensure_ascii=False)

    # --- members: the screen

    def screenshot(self, context, input) -> BetaScreenshotResult:
        self._tab(input.tab_id)
        view = self._viewport()
        width, _ = view.shot_size
        region = Region(x0=view.x, y0=view.y, x1=view.x + view.width, y1=view.y + view.height)
        shot = self.desktops.screenshot(self.session_id, region=region, scale=width / view.width)
        return BetaScreenshotResult(data=base64.b64encode(shot.image).decode())

    def zoom(self, context, input) -> BetaScreenshotResult:
        self._tab(input.tab_id)
        [zoom] = browser.to_display_actions("zoom", input.model_dump(exclude_none=True), self._viewport())
        shot = self.desktops.zoom(self.session_id, zoom)
        return BetaScreenshotResult(data=base64.b64encode(shot.image).decode())

    # --- members: acting

    def left_click(self, context, input):
        return self._pointer("left_click", input)

    def right_click(self, context, input):
        return self._pointer("right_click", input)

    def middle_click(self, context, input):
        return self._pointer("middle_click", input)

    def double_click(self, context, input):
        return self._pointer("double_click", input)

    def triple_click(self, context, input):
        return self._pointer("triple_click", input)

    def hover(self, context, input):
        raw = input.model_dump(exclude_none=True)
        self._tab(raw.get("tab_id"))
        target = browser.target_of(raw)
        if target["type"] == "ref":
            self._point(target)  # the page layer's hover: located, scrolled into view, the pointer there
            return None
        self._run(browser.to_display_actions("hover", raw, self._viewport()))
        return None

    def mouse_move(self, context, input):
        return self._pointer("mouse_move", input)

    def left_mouse_down(self, context, input):
        return self._pointer("left_mouse_down", input)

    def left_mouse_up(self, context, input):
        return self._pointer("left_mouse_up", input)

    def scroll(self, context, input):
        return self._pointer("scroll", input)

    def left_click_drag(self, context, input):
        raw = input.model_dump(by_alias=True, exclude_none=True)
        self._tab(raw.get("tab_id"))
        self._run(browser.to_display_actions("left_click_drag", raw, self._viewport()))

    def scroll_to(self, context, input):
        self._tab(input.tab_id)
        self._point({"type": "ref", "ref": input.target.ref})

    def type(self, context, input):
        self._tab(input.tab_id)
        self._perform("type", input.model_dump(exclude_none=True))

    def key(self, context, input):
        self._tab(input.tab_id)
        self._perform("key", input.model_dump(exclude_none=True))

    def hold_key(self, context, input):
        self._tab(input.tab_id)
        self._perform("hold_key", input.model_dump(exclude_none=True))

    def wait(self, context, input):
        if not 0 <= input.duration <= 30:
            raise ToolError(f"duration must be from 0 to 30 seconds, got {input.duration}")
        time.sleep(input.duration)

    def form_input(self, context, input):
        self._tab(input.tab_id)
        target = Target(ref=browser.to_page_ref(input.target.ref))
        value = input.value
        if isinstance(value, bool):  # a checkbox or radio: clicked only when its state differs
            acted = self.pages.check(self.session_id, target, checked=value)
        else:
            text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
            try:  # a <select> is chosen by value or label; anything else refuses, nothing done
                acted = self.pages.select(self.session_id, target, text)
            except InvalidAction as exc:
                if "is not a <select>" not in exc.message:
                    raise
                acted = self.pages.fill(self.session_id, target, text)  # real typing into the field
        if acted.verified is False:
            return "The page did not keep the value."
        return None

    def file_upload(self, context, input):
        self._tab(input.tab_id)
        files = [self.staged[d] for d in input.document_ids or []]
        for name in input.paths or []:
            path = self.pages.download_path(self.session_id, name)
            files.append(UploadFile(name=name, content_base64=base64.b64encode(path.read_bytes()).decode()))
        if not files:
            raise ToolError("file_upload needs paths or document_ids")
        self.pages.upload(self.session_id, Target(ref=browser.to_page_ref(input.target.ref)), files)


class BrowserToolsetService:
    """The executor: one driver per session, kept across requests so what the browser did between
    two calls (a download, a tab a page opened, a dialog dismissed) is reported once, with the next."""

    def __init__(self, desktops):
        self.desktops = desktops
        self._drivers: dict[str, tuple[Any, str, GlassdeskBrowserToolset]] = {}
        self._lock = threading.Lock()

    def run(self, session_id: str | None, request: AnthropicBrowserRequest) -> AnthropicBrowserResult:
        problems = request_problems(request)
        if problems:
            raise InvalidRequest("; ".join(problems))
        session = self.desktops.session(session_id)  # no such session: the request's error, first
        self.desktops.check_agent(session.id)       # a person in control or a run: nothing runs
        with self._lock:
            driver = self._driver(session, request)
            results = []
            for block in request.tool_uses:
                tool_use = BetaToolUseBlock.model_validate({**block, "toolset_name": browser.TOOLSET_NAME})
                driver.fatal = None
                result = driver.tool_result(tool_use)
                if driver.fatal is not None:
                    raise driver.fatal
                results.append(_plain(result))
        return AnthropicBrowserResult(tool_results=results)

    def loop_call(self, session_id: str, tool_use_id: str, member: BrowserMember) -> tuple[list[dict], bool]:
        """One member a vision run's model called (the run's own thread, past its busy guard): the
        tool_result's content and whether it is an error, with the configs the provider offered
        (browser.LOOP_CONFIGS)."""
        session = self.desktops.session(session_id)
        with self._lock:
            driver = self._driver(session, AnthropicBrowserRequest(
                tool_uses=[{"id": tool_use_id, "name": member.name, "input": member.input}],
                configs=browser.LOOP_CONFIGS))
            driver.fatal = None
            tool_use = BetaToolUseBlock.model_validate({"type": "tool_use", "id": tool_use_id, "name": member.name,
                                                        "input": member.input, "toolset_name": browser.TOOLSET_NAME})
            result = _plain(driver.tool_result(tool_use))
            if driver.fatal is not None:
                raise driver.fatal
        content = result.get("content")
        content = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        return content, bool(result.get("is_error"))

    def _driver(self, session, request: AnthropicBrowserRequest) -> GlassdeskBrowserToolset:
        key = json.dumps(request.configs or {}, sort_keys=True)
        known = self._drivers.get(session.id)
        staged = dict(request.files or {})
        if known is not None and known[0] is session and known[1] == key:
            known[2].staged = staged
            known[2].file_policy.staged = staged
            return known[2]
        driver = GlassdeskBrowserToolset(self, session.id, request.configs, staged)
        if known is not None and known[0] is session:
            # New configs for the same browser: what was still to report carries over.
            driver.marks = known[2].marks
            driver._toolset_pipeline = known[2]._toolset_pipeline
        self._drivers[session.id] = (session, key, driver)
        return driver


def _plain(value: Any) -> Any:
    """The SDK's result as plain JSON (its blocks are TypedDicts, some lists are iterables)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def request_problems(request: AnthropicBrowserRequest) -> list[str]:
    """Everything wrong with the request's shape, each once (pure): a block that is no tool_use of
    the toolset, an unknown member, configs the toolset does not take."""
    problems = []
    for i, block in enumerate(request.tool_uses):
        where = f"tool_uses[{i}]"
        if block.get("type", "tool_use") != "tool_use":
            problems.append(f"{where}.type: must be \"tool_use\", got {block.get('type')!r}")
        if not isinstance(block.get("id"), str) or not block.get("id"):
            problems.append(f"{where}.id: the tool_use's id is required (a string)")
        if block.get("name") not in browser.MEMBERS:
            problems.append(f"{where}.name: {block.get('name')!r} is no member of {browser.TOOLSET_TYPE}")
        if block.get("toolset_name", browser.TOOLSET_NAME) != browser.TOOLSET_NAME:
            problems.append(f"{where}.toolset_name: must be \"browser\", got {block.get('toolset_name')!r}")
        if not isinstance(block.get("input", {}), dict):
            problems.append(f"{where}.input: must be an object")
    ids = [b.get("id") for b in request.tool_uses]
    dupes = sorted({i for i in ids if isinstance(i, str) and ids.count(i) > 1})
    if dupes:
        problems.append(f"tool_uses: ids must be unique ({', '.join(dupes)} repeated)")
    for member, config in (request.configs or {}).items():
        if member not in browser.MEMBERS:
            problems.append(f"configs.{member}: no member of {browser.TOOLSET_TYPE}")
        elif not isinstance(config, dict) or set(config) - {"enabled", "defer_loading"}:
            problems.append(f"configs.{member}: takes only enabled and defer_loading")
        elif any(not isinstance(v, bool) for v in config.values()):
            problems.append(f"configs.{member}: enabled and defer_loading are true or false")
    return problems
