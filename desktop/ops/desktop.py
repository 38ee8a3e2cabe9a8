"""The desktop service's operations (desktop.service.desktop.DesktopService) that the catalogue
serves: the input actions (``desktop.actions.INPUT_ACTIONS`` names their request models), opening,
focusing and launching, the pointer, windows, the desktop tree, a session's reset, the network
policy, OSWorld's contract, the live view's link and the sessions' registry (as MCP tools: their
routes are written in their door). The screenshot and the zoom are written in their doors
(desktop.ops says why)."""

from __future__ import annotations

import base64
import shlex
from dataclasses import replace
from typing import NamedTuple

from desktop.actions import INPUT_ACTIONS, HoldKey, Wait, describe
from desktop.errors import InvalidRequest
from desktop.marks import as_text as marks_text
from desktop.models import (
    ActionResponse,
    BlockedQuery,
    BlockedRequest,
    CloseSession,
    Cursor,
    DesktopTree,
    FocusRequest,
    LaunchRequest,
    LiveView,
    LiveViewRequest,
    Marks,
    MarksQuery,
    NativeClickRequest,
    NativeFindRequest,
    NativeFound,
    NativeTypeRequest,
    NetworkArg,
    NetworkPolicyBody,
    NetworkPolicyInfo,
    NewSession,
    OpenRequest,
    OSWorldCall,
    OSWorldGuest,
    SessionInfo,
    Sessions,
    TreeQuery,
    Window,
)
from desktop.ops.declare import Group, Hints, Operation, Rest, Tool
from desktop.port import Performed
from desktop.tree import as_text, node_line

# Every tool description says where it acts, once and briefly: the MCP server's instructions, sent
# once per connection, say the rest (XFCE at 1920x1080, the operator watching in noVNC, Chromium
# already open). A longer preamble repeated in every description cost about 110 characters a tool
# (tests/unit/test_mcp_profiles.py measures the catalogue).
WHERE = "the VISIBLE desktop"
ACTS = f"Acts on {WHERE}."
LOOKS = f"Looks at {WHERE}; changes nothing."
COORDS = "x, y: display pixels of the whole screen."
RETURNS_SHOT = ("Returns the commands run and the settled screenshot (1920x1080 PNG, image pixels = display pixels; "
                "screenshot=false skips it).")
ACTING = Hints(destructive=True, open_world=True)
DESKTOP = ("desktop",)
SESSIONS = ("sessions",)


def _most(model, field: str) -> str:
    """The upper bound of ``model.field`` (ms), as prose."""
    bound = next(m.le for m in model.model_fields[field].metadata if getattr(m, "le", None) is not None)
    return f"{bound / 1000:g} s"


# What the MCP door says of each input action (its request model is INPUT_ACTIONS'): title, profile
# group, hints, description. drag has none: its tool takes flat start and end coordinates where
# the model takes a path (vision.mcp.tools).
class Told(NamedTuple):
    title: str
    group: Group
    hints: Hints
    description: str


INPUT_TOOLS: dict[str, Told] = {
    "click": Told("Click on the visible desktop", "core", ACTING,
                  f"{ACTS} Moves the pointer to (x, y) and clicks, as a person would; the operator sees it happen. "
                  f"{COORDS} {RETURNS_SHOT}"),
    "double_click": Told("Double-click on the visible desktop", "core", ACTING,
                         f"{ACTS} Double-clicks at (x, y): open a file or icon, select a word. {COORDS} "
                         f"{RETURNS_SHOT}"),
    "triple_click": Told("Triple-click on the visible desktop", "desktop", ACTING,
                         f"{ACTS} Triple-clicks at (x, y): selects a whole line or paragraph of text. {COORDS} "
                         f"{RETURNS_SHOT}"),
    "mouse_down": Told("Press a mouse button on the visible desktop", "desktop", ACTING,
                       f"{ACTS} Moves the pointer to (x, y) (or stays where it is) and presses a mouse button without "
                       "releasing it; desktop_move then desktop_mouse_up finish a drag along any path. "
                       f"{COORDS} {RETURNS_SHOT}"),
    "mouse_up": Told("Release a mouse button on the visible desktop", "desktop", ACTING,
                     f"{ACTS} Moves the pointer to (x, y) (or stays where it is) and releases a mouse button pressed "
                     f"with desktop_mouse_down. {COORDS} {RETURNS_SHOT}"),
    "move": Told("Move the pointer on the visible desktop", "desktop", Hints(idempotent=True, open_world=True),
                 f"{ACTS} Moves the pointer to (x, y) without clicking, e.g. to hover a menu or show a tooltip. "
                 f"{COORDS} {RETURNS_SHOT}"),
    "scroll": Told("Scroll on the visible desktop", "core", Hints(open_world=True),
                   f"{ACTS} Turns the mouse wheel at (x, y) (or where the pointer is): direction up/down/left/right, "
                   f"amount in notches (about 3 lines each). {COORDS} {RETURNS_SHOT}"),
    "type": Told("Type text on the visible desktop", "core", ACTING,
                 f"{ACTS} Types text into whatever has the keyboard focus, like a person typing (click the field "
                 f"first). Newlines press Enter. For shortcuts and special keys use desktop_key. {RETURNS_SHOT}"),
    "key": Told("Press keys on the visible desktop", "core", ACTING,
                f"{ACTS} Presses keys or chords in order, e.g. \"ctrl+l\", [\"ctrl+a\", \"Delete\"], \"Return\", "
                "\"alt+Tab\", \"Page_Down\". Names: ctrl, alt, shift, super, enter, esc, tab, backspace, delete, "
                f"arrows, F1..F12, or any X keysym. {RETURNS_SHOT}"),
    "hold_key": Told("Hold a key down on the visible desktop", "desktop", ACTING,
                     f"{ACTS} Presses one key or chord (\"shift\", \"ctrl+alt\", \"Right\") and holds it for "
                     f"duration_ms (at most {_most(HoldKey, 'duration_ms')}), then releases it, e.g. to keep moving in "
                     f"a game or repeat a key. {RETURNS_SHOT}"),
    "wait": Told("Wait on the visible desktop", "desktop", Hints(read_only=True),
                 f"{LOOKS} Does nothing for duration_ms (at most {_most(Wait, 'duration_ms')}), then waits for the "
                 f"screen to settle: for a page or a program that is still loading. {RETURNS_SHOT}"),
}


def _said(action, _done: Performed) -> str:
    return describe(action.model_dump())


def _input(name: str, model) -> Operation:
    told = INPUT_TOOLS.get(name)
    return Operation(
        "desktop", "perform", model, Performed, acts=True,
        rest=Rest("POST", f"/desktop/{name}", summary=f"{name.replace('_', ' ')} on the visible desktop",
                  tags=DESKTOP, answer=ActionResponse, name=f"desktop_{name}", client=name),
        tool=told and Tool(f"desktop_{name}", told.title, told.description, told.hints, _said, group=told.group),
        call=lambda service, session, action: service.perform(session, action))


def _launched(service, session, request: LaunchRequest) -> Performed:
    done, pid = service.launch(session, request.command, request.args)
    return replace(done, result={"pid": pid})


def _cursor(service, session, _request) -> Cursor:
    x, y = service.cursor(session)
    return Cursor(x=x, y=y)


def _found_text(_request, found: NativeFound) -> str:
    lines = [f"{found.count} control{'s' if found.count != 1 else ''} on the screen match {found.target}"]
    lines += [f"- {node_line(m)} in {m.application or m.window} (window {m.window})" for m in found.matches]
    if found.count > len(found.matches):
        lines.append(f"(the first {len(found.matches)} shown)")
    if found.truncated:
        lines.append("(the tree was cut at its node bound: name the program with app)")
    if found.error:
        lines.append(f"({found.error})")
    return "\n".join(lines)


def _on_native(verb: str):
    """What an action on a native control did, in words: the control, and where the pointer landed
    when that was not on it."""
    def said(_request, done: Performed) -> str:
        result = done.result or {}
        node = result.get("node", {})
        x, y, width, height = node.get("box") or (0, 0, 0, 0)
        words = f"{verb} {node.get('role')} {node.get('name', '')!r} [{node.get('ref')}] at ({x + width // 2}, " \
                f"{y + height // 2})"
        if result.get("landed") is False:
            words += f"; but the pointer landed on {result.get('landed_on')}, not on it"
        return words
    return said


NATIVE_TARGET = "target as for desktop_native_find"


def _marked_screen(_service, marks: Marks) -> bytes | None:
    return base64.b64decode(marks.image) if marks.image else None


def _windows_text(_query, windows: list[Window]) -> str:
    lines = [f"{w.id}  {w.wm_class}  {w.width}x{w.height}+{w.x}+{w.y}  pid={w.pid}  {w.title}" for w in windows]
    return f"{len(windows)} windows:\n" + "\n".join(lines)


# One operation per input action, in INPUT_ACTIONS' order (click ... wait).
INPUT: tuple[Operation, ...] = tuple(_input(name, model) for name, model in INPUT_ACTIONS.items())


def _live_view_text(request: LiveViewRequest, view: LiveView) -> str:
    mode = "watch and control" if request.control else "watch only"
    return (f"{view.novnc_url}\n(open it in a browser to {mode} session {view.session_id!r} live; it lets in new "
            f"connections until {view.expires_at:%H:%M} UTC)")


def _live_view_structured(request: LiveViewRequest, view: LiveView) -> dict:
    return {"session": view.session_id, "url": view.novnc_url, "control": request.control,
            "expires_at": view.expires_at.isoformat()}


def _created(service, _session, request: NewSession) -> SessionInfo:
    """A new session named by ``id`` or its older name ``session`` (not two different names)."""
    if request.id is not None and request.session is not None and request.id != request.session:
        raise InvalidRequest(f"id: {request.id!r} and session: {request.session!r} name the same thing; give one")
    network = request.network or NetworkArg()
    return service.create(request.id if request.id is not None else request.session, allow=network.allow,
                          deny=network.deny, dialogs=request.dialogs)


def _sessions_text(_request, listing: Sessions) -> str:
    lines = [f"{s.id}{' (default)' if s.default else ''}: {s.status} on {s.display}  live view: {s.novnc_url}"
             f"{'  (a person has taken over)' if s.takeover else ''}" for s in listing.sessions]
    if not any(s.default for s in listing.sessions):
        lines.append(f"(the default session {listing.default!r} starts on first use)")
    return "\n".join(lines) or "no sessions"


OPERATIONS: tuple[Operation, ...] = (
    *INPUT,
    Operation("desktop", "network_policy", None, NetworkPolicyInfo, acts=False,
              rest=Rest("GET", "/network-policy", summary="the browser's network policy", tags=SESSIONS,
                        name="get_network_policy", also=(("/page/network-policy", ("page",)),))),
    Operation(
        "desktop", "set_network_policy", NetworkPolicyBody, NetworkPolicyInfo, acts=False,
        rest=Rest("PUT", "/network-policy", summary="replace the browser's network policy", tags=SESSIONS,
                  description="Both lists are replaced; it applies at once, also to connections already open. "
                              "Whatever the lists say, the browser never reaches glassdesk's own API or any "
                              "session's live view.",
                  name="put_network_policy", also=(("/page/network-policy", ("page",)),))),
    Operation("desktop", "blocked_requests", BlockedQuery, list[BlockedRequest], acts=False,
              rest=Rest("GET", "/network-policy/blocked", summary="the requests the network policy blocked",
                        tags=SESSIONS)),
    Operation(
        "desktop", "reset", None, SessionInfo, acts=True,
        rest=Rest("POST", "/reset", summary="return the session to a fresh state on the same display", tags=SESSIONS,
                  description="Ends the programs started on the desktop and closes their windows, and restarts "
                              "Chromium on a new, empty profile at about:blank (no history, cookies, form entries "
                              "or logins). The display, the live view and the session's id stay. 409 while a run "
                              "or a person drives it.", name="reset_session", client="reset"),
        tool=Tool("session_reset", "Reset a visible desktop session",
                  "Manages the VISIBLE desktop sessions: returns one to a fresh state on the same display. Programs "
                  "started on it end and their windows close; Chromium restarts on a new, empty profile at "
                  "about:blank (history, cookies, form entries and logins are gone). The live view and the session "
                  "id stay. Use it before repeating a flow.", Hints(destructive=True, idempotent=True),
                  lambda _request, info: f"session {info.id!r} reset: Chromium on a clean profile at about:blank",
                  group="desktop")),
    Operation("desktop", "open", OpenRequest, Performed, acts=True,
              rest=Rest("POST", "/desktop/open", summary="open a URL in the visible browser, brought to the front",
                        tags=DESKTOP, answer=ActionResponse, name="open_url"),
              tool=Tool("desktop_open_url", "Open a URL in the visible Chromium",
                        f"{ACTS} Navigates the already-open Chromium's front tab to a URL (http, https, about, data; "
                        "file and chrome pages only if the server allows them) and brings Chromium to the front, so "
                        f"the operator sees the page load. Do not launch another browser. {RETURNS_SHOT}",
                        Hints(idempotent=True, open_world=True), lambda request, _done: f"open {request.url}",
                        group="core")),
    Operation("desktop", "focus", FocusRequest, Performed, acts=True,
              rest=Rest("POST", "/desktop/focus", summary="bring a window (an id from windows) to the front",
                        tags=DESKTOP, answer=ActionResponse),
              tool=Tool("desktop_focus_window", "Bring a window to the front on the visible desktop",
                        f"{ACTS} Raises and focuses one window (its id from desktop_windows, e.g. 0x01a00003), so "
                        f"keys go to it and the operator sees it. {RETURNS_SHOT}",
                        Hints(idempotent=True), lambda request, _done: f"focus window {request.window_id}",
                        group="desktop")),
    Operation("desktop", "launch", LaunchRequest, Performed, acts=True,
              rest=Rest("POST", "/desktop/launch", summary="start a program on the desktop by name (its pid in result)",
                        tags=DESKTOP, answer=ActionResponse),
              tool=Tool("desktop_launch", "Launch a program on the visible desktop",
                        f"{ACTS} Starts a desktop program (e.g. mousepad, xmessage; the server's allowlist, extended "
                        "by its --launch-allow) detached, on the session's display; it ends with the session. "
                        f"Chromium is already running: use desktop_open_url for web pages. {RETURNS_SHOT}",
                        Hints(open_world=True),
                        lambda request, _done: f"launch {shlex.join([request.command, *request.args])}",
                        group="desktop"),
              call=_launched),
    Operation("desktop", "cursor", None, Cursor, acts=False,
              rest=Rest("GET", "/desktop/cursor", summary="where the pointer is, in display pixels", tags=DESKTOP),
              tool=Tool("desktop_cursor_position", "Pointer position on the visible desktop",
                        f"{LOOKS} Returns where the mouse pointer is, in display pixels (x 0..1919, y 0..1079).",
                        Hints(read_only=True), lambda _request, at: f"pointer at ({at.x}, {at.y}) (display pixels)",
                        group="desktop"),
              call=_cursor),
    Operation("desktop", "windows", None, list[Window], acts=False,
              rest=Rest("GET", "/desktop/windows", summary="the open windows, with their geometry in display pixels",
                        tags=DESKTOP),
              tool=Tool("desktop_windows", "List windows on the visible desktop",
                        f"{LOOKS} Lists the open windows (id, title, class, pid, geometry in display pixels), e.g. to "
                        "find a program started with desktop_launch.",
                        Hints(read_only=True), _windows_text,
                        structured=lambda _query, windows: {"windows": [w.model_dump() for w in windows]},
                        group="desktop")),
    Operation(
        "desktop", "desktop_tree", TreeQuery, DesktopTree, acts=False,
        rest=Rest("GET", "/desktop/tree", summary="the visible desktop as one tree", tags=("desktop",),
                  description="Every window on the display, bottom to top, with the nodes its application gives "
                              "over the accessibility bus (role, name, states, text, value, actions, box in "
                              "display pixels, a ref per node) and, under the browser's window in front, the "
                              "page's accessibility snapshot with the page layer's refs. docs/desktop-tree.md."),
        tool=Tool("desktop_tree", "Tree of the VISIBLE desktop",
                  "Looks at the VISIBLE desktop as one tree: each window (title, program, focused, on top) with its "
                  "native controls (role, name, states, text, box in screen pixels, ref like n17) and the "
                  "browser's page (refs like e12). Use it to find a control's exact position on a native "
                  "window (a text editor, a calculator, a dialog) before clicking its box's centre; "
                  "interactive_only keeps only what can be acted on.",
                  Hints(read_only=True), lambda query, tree: tree.content or as_text(tree), summary=False,
                  group="desktop")),
    Operation(
        "desktop", "marks", MarksQuery, Marks, acts=False,
        rest=Rest("GET", "/desktop/marks", summary="set-of-marks: the controls a person can act on, numbered",
                  tags=DESKTOP, description="Native windows' controls (over the accessibility bus, uncovered) and, "
                                            "with the browser in front, its page's interactive elements, numbered "
                                            "in reading order, and the screenshot with each numbered box drawn "
                                            "(`image`). docs/desktop-tree.md."),
        tool=Tool("desktop_marks", "Numbered controls on the visible desktop",
                  f"{LOOKS} Returns a screenshot with a numbered box on every control a person can act on (native "
                  "windows' and the page's) and the list: number, role, name, box in screen pixels. To act on "
                  "mark N, click the middle of its box.",
                  Hints(read_only=True), lambda _query, marks: marks_text(marks.marks, marks.truncated)
                  + (f"\n({marks.error})" if marks.error else ""),
                  structured=lambda _query, marks: marks.model_dump(exclude={"image"}), summary=False,
                  image=_marked_screen, group="desktop")),
    Operation(
        "desktop", "native_find", NativeFindRequest, NativeFound, acts=False,
        rest=Rest("POST", "/desktop/native/find", summary="the controls of native windows a target names",
                  tags=DESKTOP, description="Only controls showing on the screen are matched, in the desktop tree's "
                                            "order; each with its ref, box in display pixels, states, text and "
                                            "window. docs/desktop-tree.md."),
        tool=Tool("desktop_native_find", "Find native controls on the visible desktop",
                  f"{LOOKS} Finds the controls of native windows that a target names as their program does, "
                  "e.g. {app: 'galculator', role: 'push button', name: '7'}, or {ref} from desktop_tree: refs, boxes "
                  "in screen pixels, states, text.",
                  Hints(read_only=True), _found_text, summary=False, group="desktop")),
    Operation(
        "desktop", "native_click", NativeClickRequest, Performed, acts=True,
        rest=Rest("POST", "/desktop/native/click", summary="click a control of a native window, named by role and "
                                                           "name or ref", tags=DESKTOP, answer=ActionResponse),
        tool=Tool("desktop_native_click", "Click a native control on the visible desktop",
                  f"{ACTS} Clicks the one control a target names ({NATIVE_TARGET}) with the real mouse at its "
                  f"middle; refused if covered. Says whether the pointer landed on it. {RETURNS_SHOT}", ACTING,
                  _on_native("click"), group="desktop")),
    Operation(
        "desktop", "native_type", NativeTypeRequest, Performed, acts=True,
        rest=Rest("POST", "/desktop/native/type", summary="type into a control of a native window (a click on it, "
                                                          "then the keyboard)", tags=DESKTOP, answer=ActionResponse),
        tool=Tool("desktop_native_type", "Type into a native control on the visible desktop",
                  f"{ACTS} Clicks the one control a target names ({NATIVE_TARGET}) and types text with the real "
                  f"keyboard. {RETURNS_SHOT}", ACTING, _on_native("typed into"),
                  group="desktop")),
    Operation(
        "desktop", "osworld_guest", None, OSWorldGuest, acts=False,
        rest=Rest("POST", "/osworld", summary="serve OSWorld's guest contract for the session", tags=SESSIONS,
                  description="Starts (or answers again) a server on a loopback port of the session's own that "
                              "speaks osworld-server's routes (/screenshot, /execute with pyautogui code, "
                              "/accessibility, /file, /setup/...), so OSWorld's harness drives this session; "
                              "what it runs runs in the session's isolation. It stops with the session. "
                              "docs/osworld.md.")),
    Operation(
        "desktop", "osworld_calls", None, list[OSWorldCall], acts=False,
        rest=Rest("GET", "/osworld/calls", summary="the calls the session's OSWorld guest answered", tags=SESSIONS,
                  description="The episode's record, oldest first: each request's route, what it ran (pyautogui code "
                              "with string literals by their length, another program by its name), status, exit "
                              "code and time. 404 while no guest is open. docs/osworld.md.")),
    Operation(
        "desktop", "close_osworld_guest", None, bool, acts=False,
        rest=Rest("DELETE", "/osworld", summary="stop the session's OSWorld guest server", tags=SESSIONS,
                  description="True when one ran. It also stops with the session.")),
    # The live view: a control link over MCP, where REST hands one out only with a take-over (the
    # console's routes, vision.http.console); a session server's control plane forwards it too.
    Operation(
        "desktop", "live_view", LiveViewRequest, LiveView, acts=False,
        tool=Tool("live_view_url", "Live-view URL of the visible desktop",
                  f"{LOOKS} Returns the live-view link (a noVNC page served by glassdesk, with a short-lived token) "
                  "where a person can watch this desktop in a browser: give it to the user when they want to "
                  "watch. View-only by default; control=true returns a link that also lets them use mouse and "
                  "keyboard (revoked when someone takes over).",
                  Hints(read_only=True), _live_view_text, structured=_live_view_structured, group="core"),
        call=lambda service, session, request: service.live_view(session, control=request.control, start=True)),
    # The server's registry of sessions, as MCP tools (their routes, POST/GET/DELETE /sessions, are
    # desktop.http.desktop's: the tools name the session ``session`` where REST has it in the path,
    # and session_create keeps ``session`` as an older name of ``id``).
    Operation(
        "desktop", "create", NewSession, SessionInfo, acts=False, scope="server",
        tool=Tool("session_create", "Start a new visible desktop session",
                  "Manages the VISIBLE desktop sessions: starts one more XFCE desktop (1920x1080, Chromium open, its "
                  "own noVNC live view) and returns its id and live-view URL. `id` names it (as over REST); pass the "
                  "id as `session` to the other tools. `network` limits what its browser may reach (allow/deny "
                  "lists of host, host:port or *.domain); `dialogs` says how its JavaScript dialogs are answered. "
                  "Takes a few seconds.",
                  Hints(), lambda _request, info: f"session {info.id!r} started on display {info.display}\n"
                                                  f"live view (view-only): {info.novnc_url}", group="desktop"),
        call=_created),
    Operation(
        "desktop", "list", None, Sessions, acts=False, scope="server",
        tool=Tool("session_list", "List the visible desktop sessions",
                  "Looks at the VISIBLE desktop sessions; changes nothing. Lists each session's id, status, display "
                  "and view-only live-view URL, and which one is the default.",
                  Hints(read_only=True), _sessions_text, group="desktop"),
        call=lambda service, _session, _request: Sessions(sessions=service.list(), default=service.default)),
    Operation(
        "desktop", "delete", CloseSession, None, acts=False, scope="server",
        tool=Tool("session_close", "Close a visible desktop session",
                  "Manages the VISIBLE desktop sessions: closes one, ending its desktop, its programs and its live "
                  "view (the person watching loses the picture). Unsaved work in it is lost.",
                  Hints(destructive=True), lambda request, _none: f"session {request.session!r} closed",
                  structured=lambda request, _none: {"session": request.session, "closed": True}, group="desktop"),
        call=lambda service, _session, request: service.delete(request.session)),
    # A session server's own, for its control plane (no door serves it).
    Operation("desktop", "wait_ready", None, bool, acts=False),
)
