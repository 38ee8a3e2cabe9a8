"""The page layer's operations (desktop.service.page.PageService), declared once each.

Every MCP description says where the tool acts: the visible Chromium a person watches. The text
of an answer is for a model to read; the structured content is the answer itself.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from desktop.models import (
    Acted,
    ActedAnswer,
    CheckRequest,
    ClearedState,
    ClearStateRequest,
    ClickRequest,
    ConsoleQuery,
    ContentQuery,
    DialogAnswer,
    DialogInfo,
    DialogPolicy,
    DialogPolicyRequest,
    DialogRequest,
    DialogsQuery,
    DragRequest,
    EvaluateRequest,
    FillRequest,
    HistoryRequest,
    HoverRequest,
    Located,
    LocateRequest,
    NavigateRequest,
    NetworkQuery,
    NewTabRequest,
    PageContent,
    PageState,
    PageSummary,
    PressRequest,
    SelectRequest,
    Tab,
    TabRequest,
    UploadRequest,
    WaitRequest,
    position_words,
    target_of,
)
from desktop.ops.declare import Hints, Operation, Rest, Tool

# Every description says where the tool acts, once and briefly: the server's instructions
# (vision.mcp.tools.INSTRUCTIONS) say the rest (XFCE at 1920x1080, the operator watching in noVNC).
PAGE_WHERE = "the VISIBLE desktop's Chromium (the tab in front)"
PAGE_ACTS = f"Acts on {PAGE_WHERE}."
PAGE_LOOKS = f"Looks at {PAGE_WHERE}; changes nothing."
REAL_INPUT = "Clicked with the real pointer at the element's centre (the operator sees it); the answer gives the pixel."
# The locator's fields describe themselves in the schema; this says only that one is enough.
NAME_IT = "Name the element one way (selector, ref, label, text, role+name, placeholder, test_id, alt or title)."
LOOKING = Hints(read_only=True)
ACTING = Hints(destructive=True, open_world=True)


def argv_text(executed: list[list[str]]) -> str:
    """The commands that ran, one per line, as a person would type them again."""
    return "\n".join(f"  {shlex.join(argv)}" for argv in executed) or "  (nothing)"


def acted_text(what: str, acted: Acted) -> str:
    how = "with the real pointer" if acted.dispatched == "pointer" else "through DevTools (no pixel can do it)"
    text = (f"{what}: done {how} at display pixel ({acted.x}, {acted.y}); element box {acted.box}, "
            f"{acted.matches} match(es)")
    if acted.verified is not None:
        text += f"; verified: {acted.verified}"
    if acted.executed:
        text += f"\nexecuted:\n{argv_text(acted.executed)}"
    return text


def _state_text(_: None, state: PageState) -> str:
    lines = [f"url: {state.url}", f"title: {state.title!r}", f"load state: {state.load_state}",
             f"console errors recorded: {state.console_errors}",
             "dialog: " + (f"{state.dialog.type} {state.dialog.message!r}" if state.dialog else "none"),
             f"dialog policy: {state.dialog_policy}",
             "tabs:"] + [f"  {t.id}{' (active)' if t.active else ''}  {t.url}  {t.title!r}" for t in state.tabs]
    return "\n".join(lines)


def _located_text(request, found) -> str:
    if not found["exists"]:
        return f"{target_of(request).describe()}: nothing matches"
    box = found["box"]
    where = f"at ({box['x']}, {box['y']}) {box['width']}x{box['height']}" if box else "not visible"
    return f"{target_of(request).describe()}: {where}, {found['matches']} match(es), text {found['text']!r}"


def _content_text(query: ContentQuery, content: PageContent) -> str:
    if isinstance(content.content, list):  # the links: the one format answered as a list
        body = "\n".join(f"{link['text'] or '(no text)'} -> {link['href']}" for link in content.content)
    else:
        body = content.content
    note = " (truncated)" if content.truncated else ""
    return f"{query.format} of the page{note}:\n{body}"


def _content_structured(query: ContentQuery, content: PageContent) -> dict[str, Any]:
    if query.format == "links":
        return {"format": query.format, "truncated": content.truncated, "links": content.content}
    return {"format": query.format, "truncated": content.truncated, "length": len(content.content)}


def _console_text(_: ConsoleQuery, entries: list[dict]) -> str:
    lines = [f"[{e['seq']}] {e['level']}: {e['text'][:500]}" + (f"  ({e['url']}:{e['line']})" if e["url"] else "")
             for e in entries]
    return f"{len(entries)} console message(s)\n" + "\n".join(lines)


def _network_text(_: NetworkQuery, entries: list[dict]) -> str:
    lines = [f"[{e['seq']}] {e['method']} {e['url'][:300]} {e['resource_type']} -> "
             f"{e['failure'] or e['status'] or 'pending'}" for e in entries]
    return f"{len(entries)} request(s)\n" + "\n".join(lines)


def _navigated(how: str):
    def text(request: NavigateRequest | HistoryRequest, done: dict) -> str:
        return (f"{how if how != 'goto' else 'navigated'}: {done['url']} (HTTP {done['status']}, "
                f"{request.wait_until} after {done['load_time_ms']} ms)")
    return text


def _history(how: str, wording: str) -> Operation:
    title = f"{how.capitalize()} in the visible browser"
    return Operation(
        "pages", "navigate", HistoryRequest, dict, acts=True, page=True,
        call=lambda pages, session, r: pages.navigate(session, how, None, r.wait_until, r.timeout_ms),
        rest=Rest("POST", f"/page/{how}", summary=f"{how} in the visible browser", optional_body=True,
                  name=f"page_{how}", client=how),
        tool=Tool(f"page_{how}", title, f"{PAGE_ACTS} {wording} and waits for it (wait_until); returns the HTTP "
                  "status, the URL and the load time.", Hints(open_world=True), _navigated(how)))


def _upload_text(request: UploadRequest, acted: Acted) -> str:
    return acted_text(f"upload {len(request.files)} file(s) to {target_of(request).describe()}", acted)


OPERATIONS: tuple[Operation, ...] = (
    # ------------------------------------------------------------------------------ reading
    Operation(
        "pages", "state", None, PageState, acts=False,
        rest=Rest("GET", "/page", summary="the visible browser's state"),
        tool=Tool("page_state", "State of the visible browser",
                  f"{PAGE_LOOKS} Returns the URL, the title and load state of the tab in front, every tab (id, url, "
                  "title, active), the open JavaScript dialog (type, message, default prompt) or none, and how many "
                  "console errors were recorded.", LOOKING, _state_text, summary=False, group="core")),
    Operation(
        "pages", "content", ContentQuery, PageContent, acts=False,
        call=lambda pages, session, q: pages.content(session, q.format, q.selector),
        rest=Rest("GET", "/page/content"),
        tool=Tool("page_content", "Content of the visible page",
                  f"{PAGE_LOOKS} Returns the page (or the element of `selector`) as visible text (format text), an "
                  "accessibility snapshot with a `ref` per node that other page tools take as a target "
                  "(accessibility), its links (links) or its HTML (html). Bounded: `truncated` says when it was cut.",
                  LOOKING, _content_text, structured=_content_structured)),
    Operation(
        "pages", "console", ConsoleQuery, list[dict], acts=False,
        rest=Rest("GET", "/page/console"),
        tool=Tool("page_console_messages", "Console of the visible browser",
                  f"{PAGE_LOOKS} Returns the console messages recorded since the session started (uncaught "
                  "exceptions come as level error), each with a sequence number: pass the last one as `since` to get "
                  "only newer messages.", LOOKING, _console_text,
                  structured=lambda _, entries: {"messages": entries})),
    Operation(
        "pages", "network", NetworkQuery, list[dict], acts=False,
        rest=Rest("GET", "/page/network"),
        tool=Tool("page_network_requests", "Network log of the visible browser",
                  f"{PAGE_LOOKS} Returns the requests recorded since the session started (method, url, resource "
                  "type, status, duration, size, failure), each with a sequence number for `since`; `failed_only` "
                  "keeps failures and statuses of 400 and up.", LOOKING, _network_text,
                  structured=lambda _, entries: {"requests": entries})),
    Operation(
        "pages", "wait_for", WaitRequest, dict, acts=False, page=True,
        call=lambda pages, session, r: pages.wait_for(session, target_of(r), r.state, r.timeout_ms),
        rest=Rest("POST", "/page/wait", name="wait", client="wait"),
        tool=Tool("page_wait_for", "Wait for an element in the visible page",
                  f"{PAGE_LOOKS} Waits until an element (by `selector` or visible `text`, or a `ref` or `label`) is "
                  "attached, visible, hidden or detached; a timeout error says what was waited for.", LOOKING,
                  lambda r, done: f"{target_of(r).describe()} is {r.state} (waited {done['waited_ms']} ms)")),
    Operation(
        "pages", "probe", LocateRequest, Located, acts=False,
        call=lambda pages, session, r: pages.probe(session, target_of(r), r.state, r.timeout_ms),
        rest=Rest("POST", "/page/locate", name="locate", client="locate",
                  summary="an element's box on the display, its text and value"),
        tool=Tool("page_locate", "Find an element on the visible page",
                  f"{PAGE_LOOKS} Finds an element (scrolled into view when visible) and returns whether it exists "
                  "and is visible, how many match, its box in display pixels (what a pointer action at its centre "
                  "hits), its text and form value; nothing matching by `timeout_ms` is exists: false.", LOOKING,
                  _located_text)),
    Operation("pages", "dialogs", DialogsQuery, list[dict], acts=False,
              rest=Rest("GET", "/page/dialogs", summary="the dialogs recorded, and how each was handled")),
    Operation("pages", "dialog_policy", None, DialogPolicy, acts=False,
              rest=Rest("GET", "/page/dialog-policy", summary="how the session answers dialogs",
                        name="get_dialog_policy")),
    Operation(
        "pages", "set_dialog_policy", DialogPolicyRequest, DialogPolicy, acts=False,
        rest=Rest("PUT", "/page/dialog-policy", summary="set how the session answers dialogs",
                  description="For the dialogs that open from now on; one open now stays open until answered. Kept "
                              "through a Chromium heal and a reset.", name="put_dialog_policy")),
    Operation("pages", "downloads", None, list[dict], acts=False, rest=Rest("GET", "/page/downloads")),
    Operation("pages", "tabs", None, list[Tab], acts=False, rest=Rest("GET", "/page/tabs")),
    # The QA verbs' readers (no door serves them): forwarded to a remote session's server.
    Operation("pages", "probe", None, dict, acts=False),
    # A flow's type and blur steps (vision.qa.flow; no door of their own): forwarded to a remote session's server.
    Operation("pages", "type_text", None, Acted, acts=True),
    Operation("pages", "blur", None, Acted, acts=True),
    Operation("pages", "request_detail", None, dict | None, acts=False),
    Operation("pages", "inspect", None, dict, acts=False),
    Operation("pages", "boxes", None, list[list[int]], acts=False),
    Operation("pages", "cursors", None, tuple[int, int], acts=False),
    # The viewport on the display: vision.vendors.browser_toolset's viewport pixels (no door serves it).
    Operation("pages", "viewport", None, dict, acts=False),
    Operation("pages", "screenshot", None, bytes, acts=False),
    Operation("pages", "summary", None, PageSummary | None, acts=False),
    # The calibration page (vision.calibration uses it; no door serves it): forwarded to a remote session's server.
    Operation("pages", "show_targets", None, dict, acts=True),
    Operation("pages", "target_events", None, list[dict], acts=False),
    Operation("pages", "hide_targets", None, None, acts=False),
    # ------------------------------------------------------------------------------ navigating
    Operation(
        "pages", "navigate", NavigateRequest, dict, acts=True, page=True,
        call=lambda pages, session, r: pages.navigate(session, "goto", r.url, r.wait_until, r.timeout_ms,
                                                      settle=r.settle),
        rest=Rest("POST", "/page/navigate", client="navigate"),
        tool=Tool("page_navigate", "Navigate the visible browser",
                  f"{PAGE_ACTS} Loads a URL (http, https, about, data; file and chrome pages only if the server "
                  "allows them) in the tab in front and waits for it (wait_until); returns the HTTP status, the "
                  "final URL and the load time.", Hints(idempotent=True, open_world=True), _navigated("goto"))),
    _history("back", "Goes back one page in the tab's history"),
    _history("forward", "Goes forward one page in the tab's history"),
    _history("reload", "Reloads the page"),
    Operation("pages", "new_tab", NewTabRequest, Tab, acts=True,
              rest=Rest("POST", "/page/tabs", status_code=201, optional_body=True)),
    Operation("pages", "activate_tab", TabRequest, list[Tab], acts=True,
              rest=Rest("POST", "/page/tabs/{tab_id}/activate")),
    Operation("pages", "close_tab", TabRequest, list[Tab], acts=True,
              rest=Rest("DELETE", "/page/tabs/{tab_id}")),
    Operation(
        "pages", "clear_state", ClearStateRequest, ClearedState, acts=True,
        rest=Rest("POST", "/page/clear-state", summary="clear cookies, storage, cache and permissions of every "
                  "origin; one blank tab left", optional_body=True),
        tool=Tool("page_clear_state", "Clear the visible browser's state",
                  f"{PAGE_ACTS} A clean start without restarting Chromium: clears cookies, localStorage, "
                  "sessionStorage, IndexedDB, Cache Storage, service workers, the HTTP cache and granted permissions "
                  "for every origin the browser has seen, closes every tab and leaves one at about:blank. Logins "
                  "kept in cookies or storage are gone. Well under a second.", Hints(destructive=True, idempotent=True),
                  lambda _, done: f"cleared {len(done.origins)} origin(s) ({', '.join(done.origins[:20]) or 'none'}), "
                                  f"closed {done.closed_tabs} tab(s), {done.duration_ms} ms; one tab left: "
                                  f"{done.tab.id} {done.tab.url}")),
    # ------------------------------------------------------------------------------ acting
    Operation(
        "pages", "click", ClickRequest, Acted, acts=True, page=True,
        call=lambda pages, session, r: pages.click(session, target_of(r), button=r.button,
                                                   click_count=r.click_count, timeout_ms=r.timeout_ms,
                                                   glide=r.glide),
        rest=Rest("POST", "/page/click", summary="a real pointer click at the element's centre", answer=ActedAnswer),
        tool=Tool("page_click", "Click an element in the visible page",
                  f"{PAGE_ACTS} Clicks an element of the page. {NAME_IT} {REAL_INPUT} Refused while a dialog is "
                  "open, and when something else covers the element.", ACTING,
                  lambda r, acted: acted_text(f"click {target_of(r).describe()}", acted))),
    Operation(
        "pages", "hover", HoverRequest, Acted, acts=True, page=True,
        call=lambda pages, session, r: pages.hover(session, target_of(r), r.timeout_ms),
        rest=Rest("POST", "/page/hover", summary="the real pointer moved onto the element and left there",
                  answer=ActedAnswer),
        tool=Tool("page_hover", "Hover an element in the visible page",
                  f"{PAGE_ACTS} Moves the real pointer onto an element's centre and leaves it there: menus that open "
                  f"on hover, tooltips, hover styles. {NAME_IT} The element is scrolled into view first; the answer "
                  "gives the display pixel used. Refused while a dialog is open, and when something else covers "
                  "the element.", Hints(open_world=True),
                  lambda r, acted: acted_text(f"hover {target_of(r).describe()}", acted))),
    Operation(
        "pages", "check", CheckRequest, Acted, acts=True, page=True,
        call=lambda pages, session, r: pages.check(session, target_of(r), r.checked, r.timeout_ms),
        rest=Rest("POST", "/page/check", summary="check or uncheck with a real click, only if the state differs",
                  answer=ActedAnswer),
        tool=Tool("page_check", "Check or uncheck a box in the visible page",
                  f"{PAGE_ACTS} Brings a checkbox or radio button to `checked` (true: checked, false: unchecked): "
                  f"clicked with the real pointer only when its state differs, then its state is read again "
                  f"(verified). {NAME_IT}", ACTING,
                  lambda r, acted: acted_text(f"{'check' if r.checked else 'uncheck'} {target_of(r).describe()}",
                                              acted))),
    Operation(
        "pages", "drag", DragRequest, Acted, acts=True, page=True,
        call=lambda pages, session, r: pages.drag(session, target_of(r), r.to, r.timeout_ms, position=r.position),
        rest=Rest("POST", "/page/drag", summary="drag an element onto another with the real pointer",
                  answer=ActedAnswer),
        tool=Tool("page_drag", "Drag an element onto another in the visible page",
                  f"{PAGE_ACTS} Presses the real pointer on an element, moves it in steps onto the element `to` "
                  f"(named the same ways) and releases it there; `position` on either says where on it "
                  f"(top: before it, on a sortable list). {NAME_IT}", ACTING,
                  lambda r, acted: acted_text(f"drag {target_of(r).describe()}{position_words(r.position)} to "
                                              f"{r.to.describe()}", acted))),
    Operation(
        "pages", "press", PressRequest, Acted, acts=True, page=True,
        call=lambda pages, session, r: pages.press(session, target_of(r), r.keys, r.timeout_ms),
        rest=Rest("POST", "/page/press", summary="focus an element, then press keys on the real keyboard",
                  answer=ActedAnswer),
        tool=Tool("page_press", "Press keys on an element in the visible page",
                  f"{PAGE_ACTS} Focuses an element, then presses the keys (chords in order, e.g. [\"Enter\"] or "
                  f"[\"ctrl+a\", \"Delete\"]) on the real keyboard. {NAME_IT}", ACTING,
                  lambda r, acted: acted_text(f"press {' '.join(r.keys)} on {target_of(r).describe()}", acted))),
    Operation(
        "pages", "fill", FillRequest, Acted, acts=True, page=True,
        call=lambda pages, session, r: pages.fill(session, target_of(r), r.value, clear=r.clear, secrets=r.secrets,
                                                  timeout_ms=r.timeout_ms),
        rest=Rest("POST", "/page/fill", summary="click the field and type for real; the value is checked",
                  answer=ActedAnswer),
        tool=Tool("page_fill", "Fill a field in the visible page",
                  f"{PAGE_ACTS} Clicks a field with the real pointer, clears it (clear) and types the value with the "
                  f"real keyboard, then checks the value landed. {NAME_IT} {{{{name}}}} in the value is replaced by "
                  "secrets[name], which is never echoed.", ACTING,
                  lambda r, acted: acted_text(f"fill {target_of(r).describe()}", acted))),
    Operation(
        "pages", "select", SelectRequest, Acted, acts=True, page=True,
        call=lambda pages, session, r: pages.select(session, target_of(r), r.option, r.timeout_ms),
        rest=Rest("POST", "/page/select", answer=ActedAnswer),
        tool=Tool("page_select", "Choose an option in the visible page",
                  f"{PAGE_ACTS} Chooses an option of a <select> by its value or its label, and checks it is chosen. "
                  f"{NAME_IT} Chromium draws a select's options as a popup of its own, so the choice is made through "
                  "DevTools (the answer says so).", ACTING,
                  lambda r, acted: acted_text(f"select {r.option!r} in {target_of(r).describe()}", acted))),
    Operation(
        "pages", "upload", UploadRequest, Acted, acts=True, page=True,
        call=lambda pages, session, r: pages.upload(session, target_of(r), r.files, r.timeout_ms),
        rest=Rest("POST", "/page/upload", answer=ActedAnswer),
        tool=Tool("page_upload_file", "Give files to a file input in the visible page",
                  f"{PAGE_ACTS} Hands files to an <input type=file> through DevTools (the system file chooser is not "
                  f"used). {NAME_IT} Up to 512 KiB in all; names are reduced to a plain file name.", ACTING,
                  _upload_text)),
    Operation(
        "pages", "handle_dialog", DialogRequest, DialogInfo, acts=True, page=True,
        rest=Rest("POST", "/page/dialog", summary="accept or dismiss the open dialog", answer=DialogAnswer,
                  name="dialog", client="dialog"),
        tool=Tool("page_handle_dialog", "Answer the dialog in the visible browser",
                  f"{PAGE_ACTS} Accepts or dismisses the open JavaScript dialog (alert, confirm, prompt, "
                  "beforeunload); prompt_text is typed into a prompt. Returns the dialog answered.", ACTING,
                  lambda r, dialog: f"{'accepted' if r.accept else 'dismissed'} the {dialog.type} dialog "
                                    f"{dialog.message!r}",
                  structured=lambda r, dialog: {"accepted": r.accept, "dialog": dialog.model_dump()})),
    Operation(
        "pages", "evaluate", EvaluateRequest, dict[str, Any], acts=True,
        call=lambda pages, session, r: {"result": pages.evaluate(session, r.expression)},
        rest=Rest("POST", "/page/evaluate", summary="run JavaScript in the page (only with --allow-evaluate)"),
        tool=Tool("page_evaluate", "Run JavaScript in the visible page",
                  f"{PAGE_ACTS} Runs a JavaScript expression (or a function, or a promise) in the page and returns its "
                  "value as JSON. Off unless the server was started with --allow-evaluate, since it runs arbitrary "
                  "code.", ACTING, lambda _, answer: f"result: {json.dumps(answer['result'])[:20_000]}",
                  enabled=lambda desktops: desktops.allow_evaluate)),
)
