"""The page tools of the MCP catalogue: thin adapters over desktop.service.page.PageService.

Each tool parses its arguments, makes one call into the page service and renders the answer; the
checks and the errors are the service's (so a fault has the code REST gives it). Every answer but
page_state's ends with the page summary, as Playwright MCP does: URL, title, an open dialog, and the
console errors new since the previous answer - a text line, and ``page`` in the structured content.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import BlobResourceContents, CallToolResult, EmbeddedResource
from pydantic import Field

from desktop.models import ContentFormat
from desktop.models import DialogMode
from desktop.models import Target
from desktop.models import PageSummary
from desktop.models import Acted, UploadFile, WaitUntil
from desktop.errors import ResultTooLarge
from vision.errors import InvalidRequest
from vision.mcp.tools import SessionArg, _annotations, _argv_text, _image, _result, _text, blocking
from vision.service import Glassdesk

PAGE_WHERE = ("the VISIBLE Chromium on the desktop the operator watches live in noVNC: the tab in front, the "
              "one on screen")
PAGE_ACTS = f"Acts on {PAGE_WHERE}."
PAGE_LOOKS = f"Looks at {PAGE_WHERE}; changes nothing."
# A downloaded file travels in an MCP answer base64-encoded and whole; bigger ones are for REST.
DOWNLOAD_IN_ANSWER_MAX = 16 * 1024 * 1024
REAL_INPUT = ("The element is scrolled into view and clicked with the real pointer at its centre (xdotool, as a "
              "person would; the operator sees it); the answer gives the display pixel used.")
NAME_IT = ("Name the element one way: `selector` (CSS), `ref` (from page_content format=accessibility, e.g. e12), "
           "`label` (a form field's label) or `text` (text visible in it).")

Selector = Annotated[str | None, Field(min_length=1, max_length=2000, description="a CSS selector")]
Ref = Annotated[str | None, Field(description="a ref from page_content format=accessibility, e.g. e12")]
Label = Annotated[str | None, Field(min_length=1, max_length=500, description="the text of the field's label")]
VisibleText = Annotated[str | None, Field(min_length=1, max_length=500, description="text visible in the element")]
ElementWait = Annotated[int, Field(ge=1, le=60_000, description="how long to wait for the element, in ms")]
NavWait = Annotated[WaitUntil, Field(description="when the page counts as loaded")]
NavTimeout = Annotated[int, Field(ge=1, le=120_000, description="ms")]


def _target(selector: str | None, ref: str | None, label: str | None, text: str | None) -> Target:
    return Target(selector=selector, ref=ref, label=label, text=text)


def summary_line(summary: PageSummary) -> str:
    """The page summary as one line of text."""
    line = f"page: {summary.url or '(no tab)'}"
    if summary.title:
        line += f" - {summary.title!r}"
    if summary.dialog is not None:
        line += (f"\ndialog open: {summary.dialog.type} {summary.dialog.message[:300]!r}; answer it with "
                 "page_handle_dialog before acting on the page")
    if summary.new_console_errors:
        line += (f"\n{summary.new_console_errors} new console error(s): page_console_messages level=error "
                 "shows them")
    return line


def _acted_text(what: str, acted: Acted) -> str:
    how = "with the real pointer" if acted.dispatched == "pointer" else "through DevTools (no pixel can do it)"
    text = (f"{what}: done {how} at display pixel ({acted.x}, {acted.y}); element box {acted.box}, "
            f"{acted.matches} match(es)")
    if acted.verified is not None:
        text += f"; verified: {acted.verified}"
    if acted.executed:
        text += f"\nexecuted:\n{_argv_text(acted.executed)}"
    return text


def register_page_tools(server: MCPServer, glassdesk: Glassdesk) -> None:
    pages = glassdesk.desktops.pages
    default_session = glassdesk.desktops.default

    async def answer(session: str, text: str, structured: dict[str, Any], *extra: Any) -> CallToolResult:
        """The tool's answer with the page summary appended (left out while the browser heals)."""
        summary = await blocking(pages.summary, session)
        if summary is not None:
            text += "\n" + summary_line(summary)
            structured = {**structured, "page": summary.model_dump(mode="json")}
        return CallToolResult(content=[_text(text), *extra], structured_content={"session": session, **structured})

    # ------------------------------------------------------------------------------ reading

    @server.tool(name="page_state", title="State of the visible browser",
                 annotations=_annotations("State of the visible browser", read_only=True),
                 description=f"{PAGE_LOOKS} Returns the URL, the title and load state of the tab in front, every "
                             "tab (id, url, title, active), the open JavaScript dialog (type, message, default "
                             "prompt) or none, and how many console errors were recorded.")
    async def page_state(session: SessionArg = default_session) -> CallToolResult:
        state = await blocking(pages.state, session)
        lines = [f"url: {state.url}", f"title: {state.title!r}", f"load state: {state.load_state}",
                 f"console errors recorded: {state.console_errors}",
                 "dialog: " + (f"{state.dialog.type} {state.dialog.message!r}" if state.dialog else "none"),
                 f"dialog policy: {state.dialog_policy}",
                 "tabs:"] + [f"  {t.id}{' (active)' if t.active else ''}  {t.url}  {t.title!r}" for t in state.tabs]
        return _result("\n".join(lines), None, {"session": session, **state.model_dump(mode="json")})

    @server.tool(name="page_content", title="Content of the visible page",
                 annotations=_annotations("Content of the visible page", read_only=True),
                 description=f"{PAGE_LOOKS} Returns the page (or the element of `selector`) as visible text "
                             "(format text), an accessibility snapshot with a `ref` per node that other page tools "
                             "take as a target (accessibility), its links (links) or its HTML (html). Bounded: "
                             "`truncated` says when it was cut.")
    async def page_content(format: ContentFormat = "text", selector: Selector = None,
                           session: SessionArg = default_session) -> CallToolResult:
        content = await blocking(pages.content, session, format, selector)
        if format == "links":
            body = "\n".join(f"{link['text'] or '(no text)'} -> {link['href']}" for link in content.content)
            structured = {"format": format, "truncated": content.truncated, "links": content.content}
        else:
            body = content.content
            structured = {"format": format, "truncated": content.truncated, "length": len(content.content)}
        note = " (truncated)" if content.truncated else ""
        return await answer(session, f"{format} of the page{note}:\n{body}", structured)

    @server.tool(name="page_console_messages", title="Console of the visible browser",
                 annotations=_annotations("Console of the visible browser", read_only=True),
                 description=f"{PAGE_LOOKS} Returns the console messages recorded since the session started "
                             "(uncaught exceptions come as level error), each with a sequence number: pass the "
                             "last one as `since` to get only newer messages.")
    async def page_console_messages(since: Annotated[int, Field(ge=0, description="only messages after this "
                                                                "sequence number")] = 0,
                                    level: Literal["error", "warning", "info", "log", "debug"] | None = None,
                                    session: SessionArg = default_session) -> CallToolResult:
        entries = await blocking(pages.console, session, since, level)
        lines = [f"[{e['seq']}] {e['level']}: {e['text'][:500]}" + (f"  ({e['url']}:{e['line']})" if e["url"] else "")
                 for e in entries]
        return await answer(session, f"{len(entries)} console message(s)\n" + "\n".join(lines), {"messages": entries})

    @server.tool(name="page_network_requests", title="Network log of the visible browser",
                 annotations=_annotations("Network log of the visible browser", read_only=True),
                 description=f"{PAGE_LOOKS} Returns the requests recorded since the session started (method, url, "
                             "resource type, status, duration, size, failure), each with a sequence number for "
                             "`since`; `failed_only` keeps failures and statuses of 400 and up.")
    async def page_network_requests(since: Annotated[int, Field(ge=0, description="only requests after this "
                                                                "sequence number")] = 0,
                                    failed_only: bool = False,
                                    session: SessionArg = default_session) -> CallToolResult:
        entries = await blocking(pages.network, session, since, failed_only)
        lines = [f"[{e['seq']}] {e['method']} {e['url'][:300]} {e['resource_type']} -> "
                 f"{e['failure'] or e['status'] or 'pending'}" for e in entries]
        return await answer(session, f"{len(entries)} request(s)\n" + "\n".join(lines), {"requests": entries})

    @server.tool(name="page_downloads", title="Downloads of the visible browser",
                 annotations=_annotations("Downloads of the visible browser", read_only=True),
                 description=f"{PAGE_LOOKS} Lists the files the browser downloaded in this session (name, size, "
                             "sha256, source url); with `name`, returns that file too.")
    async def page_downloads(name: Annotated[str | None, Field(min_length=1, max_length=255, description="a name "
                                             "from the list, to get the file")] = None,
                             session: SessionArg = default_session) -> CallToolResult:
        listed = await blocking(pages.downloads, session)
        if name is None:
            lines = [f"{d['name']}  {d['size']} bytes  sha256 {d['sha256']}  from {d['url']}"
                     + (f"  FAILED: {d['failure']}" if d.get("failure") else "") for d in listed]
            return await answer(session, f"{len(listed)} download(s)\n" + "\n".join(lines), {"downloads": listed})
        path = await blocking(pages.download_path, session, name)
        size = path.stat().st_size
        if size > DOWNLOAD_IN_ANSWER_MAX:
            raise ResultTooLarge(f"{path.name} is {size} bytes, over the {DOWNLOAD_IN_ANSWER_MAX} one answer carries "
                                 "(base64 makes it a third bigger); fetch it from the REST API: GET "
                                 f"/api/v1/sessions/{{id}}/page/downloads/{path.name}")
        data = await blocking(path.read_bytes)
        blob = EmbeddedResource(type="resource", resource=BlobResourceContents(
            uri=f"glassdesk://sessions/{session}/downloads/{path.name}", mime_type="application/octet-stream",
            blob=base64.b64encode(data).decode()))
        return await answer(session, f"{path.name}: {len(data)} bytes", {"name": path.name, "size": len(data)}, blob)

    @server.tool(name="page_screenshot", title="Screenshot of the visible page",
                 annotations=_annotations("Screenshot of the visible page", read_only=True),
                 description=f"{PAGE_LOOKS} Returns a PNG of the page as rendered by the browser: the viewport, "
                             "the whole scrollable page (full_page) or one element (selector). Its pixels are "
                             "CSS pixels of the page, not display pixels: click with page_click, or take "
                             "desktop_screenshot for display coordinates.")
    async def page_screenshot(full_page: bool = False, selector: Selector = None,
                              session: SessionArg = default_session) -> CallToolResult:
        png = await blocking(lambda: pages.screenshot(session, full_page=full_page, selector=selector))
        what = f"element {selector!r}" if selector else "the whole page" if full_page else "the viewport"
        return await answer(session, f"screenshot of {what}: PNG, {len(png)} bytes",
                            {"full_page": full_page, "selector": selector}, _image(png))

    @server.tool(name="page_wait_for", title="Wait for an element in the visible page",
                 annotations=_annotations("Wait for an element in the visible page", read_only=True),
                 description=f"{PAGE_LOOKS} Waits until an element (by `selector` or visible `text`, or a `ref` or "
                             "`label`) is attached, visible, hidden or detached; a timeout error says what was "
                             "waited for.")
    async def page_wait_for(selector: Selector = None, text: VisibleText = None, ref: Ref = None, label: Label = None,
                            state: Literal["attached", "visible", "hidden", "detached"] = "visible",
                            timeout_ms: Annotated[int, Field(ge=1, le=120_000, description="ms")] = 10_000,
                            session: SessionArg = default_session) -> CallToolResult:
        target = _target(selector, ref, label, text)
        done = await blocking(pages.wait_for, session, target, state, timeout_ms)
        return await answer(session, f"{target.describe()} is {state} (waited {done['waited_ms']} ms)", done)

    # ------------------------------------------------------------------------------ navigating

    async def navigated(session: str, how: str, url: str | None, wait_until: str, timeout_ms: int) -> CallToolResult:
        done = await blocking(lambda: pages.navigate(session, how, url, wait_until, timeout_ms))
        return await answer(session, f"{how if how != 'goto' else 'navigated'}: {done['url']} (HTTP "
                                     f"{done['status']}, {wait_until} after {done['load_time_ms']} ms)", done)

    @server.tool(name="page_navigate", title="Navigate the visible browser",
                 annotations=_annotations("Navigate the visible browser", idempotent=True, open_world=True),
                 description=f"{PAGE_ACTS} Loads a URL (http, https, about, data; file and chrome pages only if the "
                             "server allows them) in the tab in front and waits for it (wait_until); returns the "
                             "HTTP status, the final URL and the load time.")
    async def page_navigate(url: Annotated[str, Field(min_length=1, max_length=8000)], wait_until: NavWait = "load",
                            timeout_ms: NavTimeout = 30_000, session: SessionArg = default_session) -> CallToolResult:
        return await navigated(session, "goto", url, wait_until, timeout_ms)

    def history(how: Literal["back", "forward", "reload"], wording: str) -> None:
        title = f"{how.capitalize()} in the visible browser"

        async def tool(wait_until: NavWait = "load", timeout_ms: NavTimeout = 30_000,
                       session: SessionArg = default_session) -> CallToolResult:
            return await navigated(session, how, None, wait_until, timeout_ms)

        server.tool(name=f"page_{how}", title=title, annotations=_annotations(title, open_world=True),
                    description=f"{PAGE_ACTS} {wording} and waits for it (wait_until); returns the HTTP status, the "
                                "URL and the load time.")(tool)

    history("back", "Goes back one page in the tab's history")
    history("forward", "Goes forward one page in the tab's history")
    history("reload", "Reloads the page")

    @server.tool(name="page_tabs", title="Tabs of the visible browser",
                 annotations=_annotations("Tabs of the visible browser", destructive=True, open_world=True),
                 description=f"{PAGE_ACTS} action list (the default) lists the tabs (id, url, title, active: the "
                             "one on screen); new opens a tab (at `url`) in front; activate brings tab `tab_id` to "
                             "the front; close closes it.")
    async def page_tabs(action: Literal["list", "new", "activate", "close"] = "list",
                        tab_id: Annotated[str | None, Field(max_length=20, description="for activate and close: an "
                                                            "id from the list, e.g. t2")] = None,
                        url: Annotated[str | None, Field(max_length=8000, description="for new")] = None,
                        session: SessionArg = default_session) -> CallToolResult:
        if action in ("activate", "close") and not tab_id:
            raise InvalidRequest(f"tab_id: {action} needs the id of a tab (action list shows them)")
        if action == "new":
            await blocking(pages.new_tab, session, url)
            tabs = await blocking(pages.tabs, session)
        elif action == "activate":
            tabs = await blocking(pages.activate_tab, session, tab_id)
        elif action == "close":
            tabs = await blocking(pages.close_tab, session, tab_id)
        else:
            tabs = await blocking(pages.tabs, session)
        lines = [f"{t.id}{' (active)' if t.active else ''}  {t.url}  {t.title!r}" for t in tabs]
        return await answer(session, f"{len(tabs)} tab(s)\n" + "\n".join(lines),
                            {"tabs": [t.model_dump() for t in tabs]})

    # ------------------------------------------------------------------------------ acting

    @server.tool(name="page_click", title="Click an element in the visible page",
                 annotations=_annotations("Click an element in the visible page", destructive=True, open_world=True),
                 description=f"{PAGE_ACTS} Clicks an element of the page. {NAME_IT} {REAL_INPUT} Refused while a "
                             "dialog is open, and when something else covers the element.")
    async def page_click(selector: Selector = None, ref: Ref = None, text: VisibleText = None, label: Label = None,
                         button: Literal["left", "middle", "right"] = "left",
                         click_count: Annotated[int, Field(ge=1, le=3)] = 1, timeout_ms: ElementWait = 5000,
                         session: SessionArg = default_session) -> CallToolResult:
        target = _target(selector, ref, label, text)
        acted = await blocking(lambda: pages.click(session, target, button=button, click_count=click_count,
                                                   timeout_ms=timeout_ms))
        return await answer(session, _acted_text(f"click {target.describe()}", acted), acted.model_dump())

    @server.tool(name="page_fill", title="Fill a field in the visible page",
                 annotations=_annotations("Fill a field in the visible page", destructive=True, open_world=True),
                 description=f"{PAGE_ACTS} Clicks a field with the real pointer, clears it (clear) and types the "
                             f"value with the real keyboard, then checks the value landed. {NAME_IT} {{{{name}}}} "
                             "in the value is replaced by secrets[name], which is never echoed.")
    async def page_fill(value: Annotated[str, Field(max_length=20_000)], selector: Selector = None, ref: Ref = None,
                        label: Label = None, text: VisibleText = None, clear: bool = True,
                        secrets: Annotated[dict[str, str] | None, Field(description="values for {{name}} "
                                                                                    "placeholders")] = None,
                        timeout_ms: ElementWait = 5000, session: SessionArg = default_session) -> CallToolResult:
        target = _target(selector, ref, label, text)
        acted = await blocking(lambda: pages.fill(session, target, value, clear=clear, secrets=secrets,
                                                  timeout_ms=timeout_ms))
        return await answer(session, _acted_text(f"fill {target.describe()}", acted), acted.model_dump())

    @server.tool(name="page_select", title="Choose an option in the visible page",
                 annotations=_annotations("Choose an option in the visible page", destructive=True, open_world=True),
                 description=f"{PAGE_ACTS} Chooses an option of a <select> by its value or its label, and checks "
                             f"it is chosen. {NAME_IT} Chromium draws a select's options as a popup of its own, so "
                             "the choice is made through DevTools (the answer says so).")
    async def page_select(option: Annotated[str, Field(min_length=1, max_length=2000, description="the option's "
                                                       "value or label")],
                          selector: Selector = None, ref: Ref = None, label: Label = None, text: VisibleText = None,
                          timeout_ms: ElementWait = 5000, session: SessionArg = default_session) -> CallToolResult:
        target = _target(selector, ref, label, text)
        acted = await blocking(pages.select, session, target, option, timeout_ms)
        return await answer(session, _acted_text(f"select {option!r} in {target.describe()}", acted),
                            acted.model_dump())

    @server.tool(name="page_upload_file", title="Give files to a file input in the visible page",
                 annotations=_annotations("Give files to a file input in the visible page", destructive=True,
                                          open_world=True),
                 description=f"{PAGE_ACTS} Hands files to an <input type=file> through DevTools (the system file "
                             f"chooser is not used). {NAME_IT} Up to 512 KiB in all; names are reduced to a "
                             "plain file name.")
    async def page_upload_file(files: Annotated[list[UploadFile], Field(min_length=1, max_length=20)],
                               selector: Selector = None, ref: Ref = None, label: Label = None,
                               text: VisibleText = None, timeout_ms: ElementWait = 5000,
                               session: SessionArg = default_session) -> CallToolResult:
        target = _target(selector, ref, label, text)
        acted = await blocking(pages.upload, session, target, files, timeout_ms)
        return await answer(session, _acted_text(f"upload {len(files)} file(s) to {target.describe()}", acted),
                            acted.model_dump())

    @server.tool(name="page_handle_dialog", title="Answer the dialog in the visible browser",
                 annotations=_annotations("Answer the dialog in the visible browser", destructive=True,
                                          open_world=True),
                 description=f"{PAGE_ACTS} Accepts or dismisses the open JavaScript dialog (alert, confirm, prompt, "
                             "beforeunload); prompt_text is typed into a prompt. Returns the dialog answered.")
    async def page_handle_dialog(accept: bool = True,
                                 prompt_text: Annotated[str | None, Field(max_length=10_000)] = None,
                                 session: SessionArg = default_session) -> CallToolResult:
        dialog = await blocking(pages.handle_dialog, session, accept, prompt_text)
        verb = "accepted" if accept else "dismissed"
        return await answer(session, f"{verb} the {dialog.type} dialog {dialog.message!r}",
                            {"accepted": accept, "dialog": dialog.model_dump()})

    @server.tool(name="page_dialogs", title="Dialogs of the visible browser and how they are answered",
                 annotations=_annotations("Dialogs of the visible browser and how they are answered", idempotent=True),
                 description="Manages the VISIBLE Chromium's JavaScript dialogs (alert, confirm, prompt, "
                             "beforeunload) on the desktop the operator watches live in noVNC. Lists the dialogs "
                             "recorded since `since` (type, message, url, and how each was handled: accepted or "
                             "dismissed, by the policy, a request or on the screen; null while open) and the "
                             "session's dialog policy. With `policy`, sets it first: manual (the default) leaves "
                             "each dialog open for you or the operator to answer (page_handle_dialog, or its "
                             "buttons on the screen); accept / dismiss answer each one at once. It applies to "
                             "dialogs that open from now on and lasts through a browser restart and a reset.")
    async def page_dialogs(policy: Annotated[DialogMode | None, Field(description="set the dialog policy: manual, "
                                                                      "accept or dismiss")] = None,
                           since: Annotated[int, Field(ge=0, description="only dialogs after this sequence "
                                                       "number")] = 0,
                           session: SessionArg = default_session) -> CallToolResult:
        if policy is not None:
            await blocking(pages.set_dialog_policy, session, policy)
        mode = (await blocking(pages.dialog_policy, session)).mode
        entries = await blocking(pages.dialogs, session, since)
        lines = [f"[{e['seq']}] {e['type']} {e['message'][:300]!r}: "
                 + (f"{e['handled']} by {e['by']}" if e["handled"] else "open or unanswered")
                 + (f" (failed: {e['failure']})" if e.get("failure") else "") for e in entries]
        head = f"dialog policy: {mode}" + (" (set now)" if policy is not None else "")
        return await answer(session, f"{head}\n{len(entries)} dialog(s)\n" + "\n".join(lines),
                            {"policy": mode, "dialogs": entries})

    @server.tool(name="page_evaluate", title="Run JavaScript in the visible page",
                 annotations=_annotations("Run JavaScript in the visible page", destructive=True, open_world=True),
                 description=f"{PAGE_ACTS} Runs a JavaScript expression (or a function, or a promise) in the page "
                             "and returns its value as JSON. Off unless the server was started with "
                             "--allow-evaluate, since it runs arbitrary code.")
    async def page_evaluate(expression: Annotated[str, Field(min_length=1, max_length=100_000)],
                            session: SessionArg = default_session) -> CallToolResult:
        result = await blocking(pages.evaluate, session, expression)
        return await answer(session, f"result: {json.dumps(result)[:20_000]}", {"result": result})
