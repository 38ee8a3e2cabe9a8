"""The page tools that are not one-to-one with an operation (the others are generated from the
catalogue, vision.mcp.operations): a download's file inside the answer, the page screenshot's image,
and ``page_tabs`` and ``page_dialogs``, which each merge several operations into one tool.

Each answer ends with the page summary, as the generated page tools' do.
"""

from __future__ import annotations

import base64
from typing import Annotated, Literal

from mcp.types import BlobResourceContents, CallToolResult, EmbeddedResource
from pydantic import Field

from desktop.errors import ResultTooLarge
from desktop.models import DialogMode
from desktop.ops.page import PAGE_ACTS, PAGE_LOOKS
from vision.app.service import Glassdesk
from vision.errors import InvalidRequest
from vision.mcp.answers import SessionArg, ToolServer, blocking, image_block, tool_annotations
from vision.mcp.operations import with_summary

# A downloaded file travels in an MCP answer base64-encoded and whole; bigger ones are for REST.
DOWNLOAD_IN_ANSWER_MAX = 16 * 1024 * 1024
Selector = Annotated[str | None, Field(min_length=1, max_length=2000, description="a CSS selector")]


def register_page_tools(server: ToolServer, glassdesk: Glassdesk) -> None:
    pages = glassdesk.desktops.pages
    default_session = glassdesk.desktops.default

    async def answer(session: str, text: str, structured: dict, *extra) -> CallToolResult:
        return await with_summary(pages, session, text, structured, *extra)

    @server.tool(name="page_downloads", group="page",

                 title="Downloads of the visible browser",
                 annotations=tool_annotations("Downloads of the visible browser", read_only=True),
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

    @server.tool(name="page_screenshot", group="page",

                 title="Screenshot of the visible page",
                 annotations=tool_annotations("Screenshot of the visible page", read_only=True),
                 description=f"{PAGE_LOOKS} Returns a PNG of the page as rendered by the browser: the viewport, "
                             "the whole scrollable page (full_page) or one element (selector). Its pixels are "
                             "CSS pixels of the page, not display pixels: click with page_click, or take "
                             "desktop_screenshot for display coordinates.")
    async def page_screenshot(full_page: bool = False, selector: Selector = None,
                              session: SessionArg = default_session) -> CallToolResult:
        png = await blocking(lambda: pages.screenshot(session, full_page=full_page, selector=selector))
        what = f"element {selector!r}" if selector else "the whole page" if full_page else "the viewport"
        return await answer(session, f"screenshot of {what}: PNG, {len(png)} bytes",
                            {"full_page": full_page, "selector": selector}, image_block(png))

    @server.tool(name="page_tabs", group="page",

                 title="Tabs of the visible browser",
                 annotations=tool_annotations("Tabs of the visible browser", destructive=True, open_world=True),
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

    @server.tool(name="page_dialogs", group="page",

                 title="Dialogs of the visible browser and how they are answered",
                 annotations=tool_annotations("Dialogs of the visible browser and how they are answered",
                                              idempotent=True),
                 description="Manages the VISIBLE desktop's Chromium's JavaScript dialogs (alert, confirm, prompt, "
                             "beforeunload). Lists the dialogs "
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
