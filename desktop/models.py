"""Every wire model of the desktop's operations, in one place: the request bodies and the answers
that REST, MCP, the Python client and the remote control plane exchange.

Pure pydantic: importing this loads no X library, no web framework and no browser driver, so a
client (vision.client) takes its types from here. Bounds are written once, here: the doors take
their schemas and checks from these models.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from desktop.actions import Chords, typeable

Status = Literal["starting", "ready", "restarting", "failed", "stopped"]
WaitUntil = Literal["load", "domcontentloaded", "networkidle", "commit"]
# Why the network policy refused a request.
Reason = Literal["control_plane", "denied", "not_allowed"]


# ------------------------------------------------------------------------------------- sessions


class SessionInfo(BaseModel):
    id: str
    display: str
    status: Status
    novnc_url: str = Field(description="a view-only live-view link (short-lived token); empty when this "
                                       "process serves no viewer")
    created_at: datetime
    last_used_at: datetime
    restarts: int = Field(description="restarts by the supervisor: one per part restarted on its own (Chromium, "
                                      "x11vnc), one per whole-desktop restart (Xvfb, dbus or XFCE died)")
    events: list[str] = Field(description="the last 20 restarts and failures, oldest first")
    default: bool = Field(False, description="the session used when none is named")
    takeover: bool = Field(False, description="a person holds mouse and keyboard; agents' actions are refused")
    takeover_since: datetime | None = None


class LiveView(BaseModel):
    """A live-view link: the viewer page to open, and what a page of one's own needs to connect."""

    session_id: str
    mode: Literal["view", "control"]
    view_only: bool
    takeover: bool
    token: str = Field(description="the live-view token: signed, short-lived, for this session and mode")
    expires_at: datetime = Field(description="new connections are refused after this; open ones stay")
    websocket: str = Field(description="path of the RFB websocket; offer the token as the subprotocol "
                                       "'glassdesk.token.<token>' next to 'binary'")
    novnc_url: str = Field(description="the viewer page with the token, to open in a browser")


class Window(BaseModel):
    id: str
    pid: int | None
    x: int
    y: int
    width: int
    height: int
    wm_class: str
    title: str


# ------------------------------------------------------------------------------------- the desktop tree

def narrowed(words: str, modifiers: list[str], within: Any) -> str:
    """A target in words with its modifiers and what it is looked for within (pure), e.g.
    ``role listitem 'Buy' (nth 1) within selector 'ul'``."""
    if modifiers:
        words += f" ({', '.join(modifiers)})"
    return words + (f" within {within.describe()}" if within is not None else "")


TreeFormat = Literal["json", "text", "xml"]
NODE_REF = re.compile(r"^n[0-9]{1,9}$")


class TreeQuery(BaseModel):
    window: str | None = Field(None, pattern=r"^(0x[0-9a-fA-F]{1,8}|[0-9]{1,10})$",
                               description="only this window (its X id, as the windows listing gives it)")
    interactive_only: bool = Field(False, description="only the nodes a person can act on (those with an action, "
                                                      "focusable or editable), each under its window")
    visible_only: bool = Field(True, description="leave out what is not on the screen (closed menus, hidden tabs)")
    max_depth: int = Field(40, ge=1, le=200, description="nodes deeper than this are left out, said per node")
    max_nodes: int = Field(3000, ge=1, le=50_000, description="native nodes in all; past it the tree is cut and "
                                                               "`truncated` is true")
    format: TreeFormat = Field("json", description="json: the windows and their nodes; text: a compact outline "
                                                  "for models; xml: OSWorld's accessibility-tree shape")


class TreeNode(BaseModel):
    """One node of a native window, as its toolkit gives it over the accessibility bus."""

    ref: str = Field(description="names this node in later requests while it lives (n17)")
    role: str = Field(description="the accessibility role, as AT-SPI names it (push button, text, menu item)")
    name: str = ""
    description: str | None = None
    states: list[str] = Field(default_factory=list, description="AT-SPI states: enabled, focused, checked, showing...")
    box: list[int] | None = Field(None, description="[x, y, width, height] in display pixels; none when not on screen")
    text: str | None = Field(None, description="a text node's content (at most 2,000 characters)")
    text_truncated: bool = False
    value: float | None = Field(None, description="a slider's, a spin button's or a progress bar's value")
    actions: list[str] = Field(default_factory=list, description="what the node can be asked to do (click, press)")
    children: list[TreeNode] = Field(default_factory=list)
    children_left: int | None = Field(None, description="children not listed: the depth bound was reached")


class PageTree(BaseModel):
    """The page in front of the browser's window: the page layer's accessibility snapshot, whose refs
    (e12) the page operations take as targets."""

    url: str
    title: str
    snapshot: str = Field(description="as page content's `accessibility` format gives it")
    truncated: bool


class TreeWindow(Window):
    focused: bool = Field(description="the window in front: it has the keyboard")
    on_top: bool = Field(description="no other window of the listing is stacked above it")
    application: str | None = Field(None, description="the application's name on the accessibility bus")
    nodes: list[TreeNode] = Field(default_factory=list, description="its native nodes (its frame, its dialogs)")
    page: PageTree | None = Field(None, description="the browser's page in front, merged under its window")
    error: str | None = Field(None, description="why this window has no nodes (its application does not "
                                                "answer, has no accessibility, or is the browser's page only)")


class DesktopTree(BaseModel):
    windows: list[TreeWindow] = Field(description="bottom to top, as they are stacked")
    truncated: bool = Field(description="max_nodes or max_depth left something out")
    format: TreeFormat = "json"
    content: str | None = Field(None, description="the tree as text or XML, for those formats")
    error: str | None = Field(None, description="why no window has native nodes (the accessibility bus is not "
                                                "readable); the windows are still listed")


class NativeTarget(BaseModel):
    """A native window's control."""

    # Named by its ref, or by role and name as its program gives them over the accessibility bus;
    # matched among what is showing on the screen only (desktop.native): what a person could see.
    model_config = ConfigDict(extra="forbid")

    ref: str | None = Field(None, description="n17 (desktop tree), alone")
    app: str | None = Field(None, min_length=1, max_length=200, description="the program")
    role: str | None = Field(None, min_length=1, max_length=60, description="AT-SPI's (push button)")
    name: str | None = Field(None, min_length=1, max_length=500, description="a part of it (exact: all)")
    exact: bool = False
    within: NativeTarget | None = Field(None, description="inside this control")
    nth: int | None = Field(None, ge=-1, le=10_000, description="from 0; -1: the last")

    @model_validator(mode="after")
    def _named(self):
        problems = []
        if self.ref is not None:
            if not NODE_REF.match(self.ref):
                problems.append(f"ref {self.ref!r}: native refs look like n17 (take them from the desktop tree)")
            given = [k for k in ("app", "role", "name", "within", "nth") if getattr(self, k) is not None]
            if given or self.exact:
                problems.append(f"{', '.join(given + (['exact'] if self.exact else []))}: not with a ref "
                                "(a ref names one node already)")
        elif self.role is None and self.name is None:
            problems.append("name the control: a ref, or a role and/or a name (app narrows them to one program)")
        if self.exact and self.name is None and self.ref is None:
            problems.append("exact: only with a name")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def describe(self) -> str:
        """As a person would say it, e.g. ``push button 'Save' in mousepad (nth 1) within menu bar``."""
        if self.ref is not None:
            return f"native ref {self.ref}"
        words = " ".join(part for part in (self.role or "control", repr(self.name) if self.name else "") if part)
        if self.app:
            words += f" in {self.app}"
        modifiers = (["exact"] if self.exact else []) + ([f"nth {self.nth}"] if self.nth is not None else [])
        return narrowed(words, modifiers, self.within)


class NativeMatch(TreeNode):
    """A control a native target matched: its node (without its children), and where it is."""

    window: str = Field(description="its window's X id")
    pid: int | None = Field(None, description="its program's process")
    on_top: bool = Field(description="its window is stacked above every other")
    application: str = Field("", description="its program's name on the accessibility bus")
    path: list[str] = Field(default_factory=list, description="role and name of each node from its window down")


class NativeFound(BaseModel):
    """What a native target matches on the screen now."""

    target: str = Field(description="the target, in words")
    count: int = Field(description="how many showing controls match (nth applied)")
    matches: list[NativeMatch] = Field(description="the first 20 of them, in the tree's order")
    truncated: bool = Field(False, description="the tree was cut (max nodes): a match may lie past it")
    error: str | None = Field(None, description="why no native control could be read (the accessibility bus)")


class NativeFindRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: NativeTarget


class NativeClickRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: NativeTarget
    button: Literal["left", "middle", "right"] = "left"
    clicks: int = Field(1, ge=1, le=3)


class NativeTypeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: NativeTarget
    text: str = Field(min_length=1, max_length=20_000)
    clear: bool = Field(False, description="ctrl+a first: replace what it holds")

    _typeable = field_validator("text")(typeable)


class MarksQuery(BaseModel):
    image: bool = Field(True, description="the marked screenshot too (base64 PNG in `image`)")
    limit: int = Field(200, ge=1, le=500, description="marks at most")


class Mark(BaseModel):
    """One numbered control on the screen: a native window's (over the accessibility bus) or the page's."""

    mark: int = Field(description="its number on the marked screenshot, from 1")
    source: Literal["native", "page"]
    role: str | None = Field(None, description="AT-SPI's for a native control, ARIA's for the page's")
    name: str | None = None
    box: list[int] = Field(description="[x, y, width, height] in display pixels; click at its middle")
    ref: str | None = Field(None, description="a native control's ref (n17): the native operations take it")
    application: str | None = Field(None, description="a native control's program")


class Marks(BaseModel):
    """Set-of-marks: what a person can act on, numbered in reading order (top to bottom, left to right)."""

    marks: list[Mark]
    truncated: bool = Field(False, description="more controls than `limit`")
    image: str | None = Field(None, description="the screenshot with each mark's box and number drawn, base64 PNG")
    error: str | None = Field(None, description="what could not be read (the accessibility bus, the page)")


# ------------------------------------------------------------------------------------- network


class NetworkPolicyInfo(BaseModel):
    """A session's network policy as handed out: its patterns in their one spelling."""

    session_id: str
    allow: list[str] = Field(description="only these hosts may be reached; empty: every host not denied")
    deny: list[str] = Field(description="these hosts are never reached")


class BlockedRequest(BaseModel):
    seq: int = Field(description="increases by one per blocked request of the session")
    ts: float = Field(description="when, in seconds since the epoch")
    method: str | None = Field(None, description="the HTTP method; CONNECT for HTTPS and WebSockets")
    host: str
    port: int
    url: str | None = Field(None, description="the URL, when the request was plain HTTP (HTTPS is a tunnel)")
    reason: Reason
    detail: str


# ------------------------------------------------------------------------------------- the page


REF = re.compile(r"^(f[0-9]{1,6})?e[0-9]{1,7}$")


# The ARIA roles Playwright's get_by_role accepts (its `role` Literal; tests/unit/test_locators.py
# checks this copy against Playwright's own, which this module may not import).
ROLES: tuple[str, ...] = (
    "alert", "alertdialog", "application", "article", "banner", "blockquote", "button", "caption", "cell",
    "checkbox", "code", "columnheader", "combobox", "complementary", "contentinfo", "definition", "deletion",
    "dialog", "directory", "document", "emphasis", "feed", "figure", "form", "generic", "grid", "gridcell",
    "group", "heading", "img", "insertion", "link", "list", "listbox", "listitem", "log", "main", "marquee",
    "math", "menu", "menubar", "menuitem", "menuitemcheckbox", "menuitemradio", "meter", "navigation", "none",
    "note", "option", "paragraph", "presentation", "progressbar", "radio", "radiogroup", "region", "row",
    "rowgroup", "rowheader", "scrollbar", "search", "searchbox", "separator", "slider", "spinbutton", "status",
    "strong", "subscript", "superscript", "switch", "tab", "table", "tablist", "tabpanel", "term", "textbox",
    "time", "timer", "toolbar", "tooltip", "tree", "treegrid", "treeitem")
# The ways of naming an element (exactly one per target), in the order they are described.
LOCATOR_KINDS = ("selector", "ref", "label", "text", "role", "placeholder", "test_id", "alt", "title")
# The kinds matched against a string, where `exact` means something (role: its `name`).
EXACT_KINDS = ("label", "text", "role", "placeholder", "alt", "title")
LOCATOR_FIELDS = LOCATOR_KINDS + ("name", "exact", "has_text", "nth", "within")
_Words = Field(None, min_length=1, max_length=500)


class Locating(BaseModel):
    """The fields that name an element, as Playwright's locators do (page.locator, get_by_*,
    filter, nth): shared by the page API's Target and the QA steps' targets (vision.models.qa)."""

    selector: str | None = Field(None, min_length=1, max_length=2000, description="a CSS selector")
    ref: str | None = Field(None, description="a ref from the accessibility snapshot, e.g. e12")
    label: str | None = Field(None, min_length=1, max_length=500, description="the text of the field's label")
    text: str | None = Field(None, min_length=1, max_length=500, description="text visible in the element")
    role: str | None = Field(None, min_length=1, max_length=40, description="an ARIA role (get_by_role), e.g. "
                                                                           "button, listitem, checkbox")
    name: str | None = Field(None, min_length=1, max_length=500, description="with role: the accessible name")
    placeholder: str | None = Field(None, min_length=1, max_length=500, description="a field's placeholder text")
    test_id: str | None = Field(None, min_length=1, max_length=500, description="the element's data-testid")
    alt: str | None = Field(None, min_length=1, max_length=500, description="an image's alt text")
    title: str | None = Field(None, min_length=1, max_length=500, description="the element's title attribute")
    exact: bool = Field(False, description="match the whole text, case-sensitive (default: a case-insensitive "
                                           "substring)")
    has_text: str | None = Field(None, min_length=1, max_length=500,
                                 description="only elements containing this text")
    nth: int | None = Field(None, ge=-1, le=10_000, description="the nth of the matching elements, from 0; -1: the "
                                                                "last")
    within: Target | None = Field(None, description="an element (named the same ways) to look inside")

    def locator_kinds(self) -> list[str]:
        return [k for k in LOCATOR_KINDS if getattr(self, k) is not None]

    def modifiers_given(self) -> list[str]:
        return ([k for k in ("has_text", "nth", "within") if getattr(self, k) is not None]
                + (["exact"] if self.exact else []))

    def locator_problems(self, kinds: list[str], kinds_known: tuple[str, ...] = LOCATOR_KINDS) -> list[str]:
        """Everything wrong with how the element is named, each problem once (pure); ``kinds`` are
        the ways given, ``kinds_known`` all the ways this target takes."""
        problems = []
        if len(kinds) != 1:
            problems.append(f"name the element one way: exactly one of {', '.join(kinds_known)}"
                            + (f" (got {', '.join(kinds)})" if kinds else ""))
        kind = kinds[0] if len(kinds) == 1 else None
        if self.ref is not None and not REF.match(self.ref):
            problems.append(f"ref {self.ref!r}: refs look like e12 or f1e12 (take them from the accessibility "
                            "snapshot)")
        if self.role is not None and self.role not in ROLES:
            import difflib

            near = difflib.get_close_matches(self.role, ROLES, n=1)
            problems.append(f"role {self.role!r} is not an ARIA role"
                            + (f" (did you mean {near[0]!r}?)" if near else f"; the roles: {', '.join(ROLES)}"))
        if self.name is not None and self.role is None:
            problems.append("name is the accessible name of a `role` target: give role too")
        if kind is not None and kind not in LOCATOR_KINDS or kind == "ref":
            given = self.modifiers_given()
            if given:
                problems.append(f"{', '.join(given)}: not with a target by {kind}")
        elif self.exact and kind is not None and kind not in EXACT_KINDS:
            problems.append(f"exact: only with {', '.join(EXACT_KINDS)} (not {kind})")
        return problems

    def locator_words(self) -> str:
        """The element as a person would say it, e.g. ``role listitem 'Buy' (nth 1) within selector 'ul'``."""
        kinds = self.locator_kinds()
        if not kinds:
            return "nothing"
        kind = kinds[0]
        words = f"{kind} {getattr(self, kind)!r}"
        if kind == "role" and self.name is not None:
            words = f"role {self.role} named {self.name!r}"
        extra = (["exact"] if self.exact else []) + ([f"has_text {self.has_text!r}"] if self.has_text else []) \
            + ([f"nth {self.nth}"] if self.nth is not None else [])
        return narrowed(words, extra, self.within)


class Target(Locating):
    """Exactly one way of naming an element, with Playwright's modifiers (exact, has_text, nth, within)."""

    @model_validator(mode="after")
    def _exactly_one(self):
        problems = self.locator_problems(self.locator_kinds())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def describe(self) -> str:
        return self.locator_words()


Locating.model_rebuild()
Target.model_rebuild()


class ElementAt(BaseModel):
    """What was under a display pixel in the browser, read just before the pointer acted there
    (desktop.browser.hit): the element a person would say they clicked, and how a test names it."""

    x: int = Field(description="the display pixel acted at")
    y: int
    css_x: float = Field(description="the same point in the page's viewport, CSS px (page.mouse's space)")
    css_y: float
    tag: str = Field(description="the element's tag, e.g. button")
    role: str | None = Field(None, description="its ARIA role (explicit, else implicit from the tag)")
    name: str | None = Field(None, description="its accessible name")
    text: str | None = Field(None, description="its visible text (not a field's value), whitespace collapsed")
    box: dict = Field(description="the element's box on the display: x, y, width, height")
    locators: list[Target] = Field(default_factory=list,
                                   description="best first; each one resolved by Playwright's locator engine to "
                                               "exactly this element when recorded")
    url: str | None = Field(None, description="the page's URL then")
    ms: float = Field(0, description="what reading it cost, in ms")

    @field_serializer("locators")
    def _compact(self, locators: list[Target]) -> list[dict]:
        # Each as it would be written in a step ({role, name, exact}), not with every unset field:
        # a trace holds one per pointer action.
        return [t.model_dump(mode="json", exclude_none=True, exclude_defaults=True) for t in locators]


class NativeElement(BaseModel):
    """What was under a display pixel on a native window, read over the session's accessibility bus
    just before a pointer action acted there (desktop.x11.atspi): the control a person would say
    they clicked (docs/desktop-tree.md)."""

    ref: str = Field(description="the node's ref in the desktop tree (n17), while it lives")
    role: str = Field(description="its accessibility role, as AT-SPI names it (push button, text, menu item)")
    name: str = ""
    states: list[str] = Field(default_factory=list)
    box: list[int] | None = Field(None, description="[x, y, width, height] in display pixels")
    text: str | None = Field(None, description="a text node's content (at most 2,000 characters)")
    path: list[str] = Field(default_factory=list, description="role and name of each node from its window down")
    application: str = Field("", description="the program's name on the accessibility bus")
    pid: int | None = None
    ms: float = Field(0, description="what reading it cost, in ms")

    def describe(self) -> str:
        """As a person would say it: ``toggle button '7' in galculator``."""
        return f"{self.role}" + (f" {self.name!r}" if self.name else "") + \
            (f" in {self.application}" if self.application else "")


def css_string(value: str) -> str:
    """A CSS string literal of ``value`` (pure): quotes and backslashes escaped, line breaks as escapes."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\a ").replace("\r", "\\d ")
    return f'"{escaped}"'


DIALOG_MODES = ("manual", "accept", "dismiss")
DialogMode = Literal["manual", "accept", "dismiss"]


class DialogInfo(BaseModel):
    type: str
    message: str
    default_prompt: str = ""


class DialogPolicy(BaseModel):
    session_id: str
    mode: DialogMode = Field(description="manual: a dialog stays open for the model or the operator to answer; "
                                         "accept / dismiss: it is answered at once (a prompt accepted with its "
                                         "default text), and recorded with how")


class Tab(BaseModel):
    id: str
    url: str
    title: str
    active: bool


class PageState(BaseModel):
    url: str | None
    title: str | None
    load_state: Literal["loading", "domcontentloaded", "load", "unknown"]
    tabs: list[Tab]
    dialog: DialogInfo | None
    dialog_policy: DialogMode = Field("manual", description="how the session answers dialogs: manual (left open), "
                                                            "accept or dismiss (at once)")
    console_errors: int = Field(description="console errors and uncaught exceptions recorded so far")


class PageSummary(BaseModel):
    """The short account of the page that comes with every page tool's answer."""

    url: str | None
    title: str | None
    dialog: DialogInfo | None
    new_console_errors: int = Field(0, description="console errors and uncaught exceptions since the previous "
                                                   "summary")


# Every answer of a desktop or page action carries the summary, over REST (this field) and MCP.
PAGE_FIELD = ("the visible browser after the action: url, title, the open dialog, console errors since the "
              "previous summary; null while the browser restarts")


ContentFormat = Literal["text", "accessibility", "links", "html"]


class PageContent(BaseModel):
    format: ContentFormat
    content: str | list[dict]
    truncated: bool


# ------------------------------------------------------------------------------------- desktop


class _Body(BaseModel):
    """A request body: an unknown field is a mistake to report, not to ignore."""

    model_config = ConfigDict(extra="forbid")


class ActionResponse(BaseModel):
    ok: bool = True
    action: str
    executed: list[list[str]] = Field(description="the exact argv lists that ran, to replay by hand")
    duration_ms: float
    settle_ms: int
    settled: bool = Field(True, description="false when the screen was still changing at the settle wait's "
                                            "bound (an animation, a video): the screenshot is a moment of it")
    settled_by: str = Field("damage", description="what ended the wait: frame (the browser in front showed the "
                                                  "input and nothing changed), damage (the display was painted, "
                                                  "then still), network (requests the input started, then their "
                                                  "frames), navigation, dialog, timeout")
    screenshot: str | None = Field(None, description="settled screenshot, base64 PNG, with ?screenshot=true")
    changed: bool | None = Field(None, description="whether the screen changed from the action until the answer "
                                                   "(a dialog or a new page counts); false: the action had no "
                                                   "visible effect (it may still have done something off screen)")
    result: dict[str, Any] | None = None
    page: PageSummary | None = Field(None, description=PAGE_FIELD)
    element: ElementAt | None = Field(None, description="a pointer action with the browser in front: the element "
                                                        "that was under the pixel just before it, with verified "
                                                        "locators")
    native: NativeElement | None = Field(None, description="a pointer action on a native window: the control "
                                                           "that was under the pixel just before it, read over "
                                                           "the accessibility bus")
    playwright: str | None = Field(None, description="Playwright (TypeScript) code doing the same thing: a "
                                                     "locator action when the element is known, else page.mouse "
                                                     "or page.keyboard")


class NetworkPolicyBody(_Body):
    allow: list[str] = Field(default_factory=list, description="host, host:port or *.domain patterns: only these "
                                                                "may be reached; empty: every host not denied")
    deny: list[str] = Field(default_factory=list, description="patterns never reached, whatever allow says")


class CreateSession(_Body):
    id: str | None = Field(None, description="a name for the session; generated when omitted")
    state: str | None = Field(None, min_length=1, max_length=64,
                              description="a saved state to start from (POST /sessions/{id}/states): its cookies and "
                                          "local storage restored in the new session's browser; a state changed "
                                          "since it was saved is refused (409 state_tampered) and no session is made")
    network: NetworkPolicyBody | None = Field(None, description="the browser's network policy; default: no limits "
                                                                 "beyond glassdesk's own ports")
    dialogs: DialogMode = Field("manual", description="how JavaScript dialogs are answered: manual (left open for "
                                                      "the model or the operator), accept or dismiss (at once)")


# NetworkPolicyBody under the name and description session_create's MCP schema has always given it.
class NetworkArg(NetworkPolicyBody):
    """The browser's network policy, as session_create takes it."""


class NewSession(_Body):
    """The MCP tool session_create's arguments: a new session's name (``session`` is an older name of
    ``id``), network policy and dialog policy."""

    id: str | None = Field(None, description="a name for it (1-32 of a-z 0-9 - _, starting with a letter or digit); "
                                             "generated when omitted")
    session: str | None = Field(None, description="the same as id (an older name of this argument)")
    network: NetworkArg | None = Field(None, description="the browser's network policy; default: no limits beyond "
                                                         "glassdesk's own ports")
    dialogs: DialogMode = Field("manual", description="manual (default): a dialog stays open for you or the operator "
                                                      "to answer; accept / dismiss: each is answered at once")


class CloseSession(_Body):
    """The MCP tool session_close's argument: the session it closes (named, never the default by omission)."""

    session: str = Field(description="the session id to close")


class Sessions(BaseModel):
    """The server's sessions, and the name of the one used when none is named (started on first use,
    so possibly not among them yet)."""

    sessions: list[SessionInfo]
    default: str


class LiveViewRequest(_Body):
    """A live-view link's mode: watch only, or watch and control."""

    control: bool = Field(False, description="let the viewer drive too")


class SaveStateRequest(_Body):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
                      description="the state's name: letters, digits, '.', '_', '-'; an existing state of that name "
                                  "is replaced")
    files: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        default_factory=list, max_length=100,
        description="files of the desktop user's home kept with it, relative to the home (e.g. "
                    ".config/app/settings.json, ~/notes.txt): a new session from the state has them in its home")


class OSWorldGuest(BaseModel):
    """A session's OSWorld guest server (desktop.osworld): where OSWorld's harness reaches it."""

    session_id: str
    host: str = Field(description="where it listens: loopback only")
    port: int = Field(description="its own port: osworld-server's routes are at its root")
    url: str
    devtools_port: int = Field(0, description="the session's browser's DevTools (CDP) relayed to this port of the "
                                              "same host, for the harness's Chrome getters; 0: not served (problems "
                                              "says why)")
    problems: list[str] = Field(default_factory=list, description="what of the contract cannot work here, and how "
                                                                  "to fix it")


class OSWorldCall(BaseModel):
    """One request to a session's OSWorld guest (desktop.osworld): the episode's record."""

    at: datetime = Field(description="when it was asked (UTC)")
    route: str = Field(description="osworld-server's route, e.g. /execute")
    summary: str = Field("", description="what it ran or read: pyautogui code with each string literal by its "
                                         "length, another program by its name and argument count")
    status: int = Field(description="the HTTP status answered")
    returncode: int | None = Field(None, description="the exit code of what it ran, where it ran something")
    ms: int = Field(description="how long the answer took")


class SavedState(BaseModel):
    name: str
    created_at: str | None = None
    from_session: str | None = None
    sha256: str | None = Field(None, description="of the saved storage file, signed in its manifest")
    cookies: int = 0
    cookie_domains: list[str] = Field(default_factory=list)
    origins: list[str] = Field(default_factory=list, description="the origins whose local storage it holds")
    files: list[str] = Field(default_factory=list, description="the home files it holds, relative to the home")
    tampered: bool = Field(False, description="changed since it was saved: a restore refuses it")
    problem: str | None = None


class LaunchRequest(_Body):
    command: str = Field(min_length=1, description="program name on PATH")
    args: list[str] = Field(default_factory=list, description="its arguments")


class OpenRequest(_Body):
    url: str = Field(min_length=1, description="e.g. https://example.com")


class FocusRequest(_Body):
    window_id: str = Field(min_length=1, description="the window's id from desktop_windows")


class Cursor(BaseModel):
    x: int
    y: int


# ------------------------------------------------------------------------------------- page


class Acted(BaseModel):
    """An element acted on with real input."""

    x: int = Field(description="the display pixel the pointer used")
    y: int
    box: dict = Field(description="the element's box on the display: x, y, width, height")
    matches: int = Field(description="how many elements matched; the first visible one was used")
    dispatched: Literal["pointer", "devtools"] = "pointer"
    executed: list[list[str]] = Field(default_factory=list)
    verified: bool | None = Field(None, description="fill/select: the field holds what was asked for")
    settle_ms: int = 0
    element: ElementAt | None = Field(None, description="what was under the pixel just before the pointer acted "
                                                        "there, with verified locators")


class UploadFile(BaseModel):
    name: str = Field(min_length=1, max_length=255)
    content_base64: str


# At least 1: Playwright reads 0 as "wait for ever".
Timeout = Field(5000, ge=1, le=60_000, description="how long to wait for the element, in ms")


LoadedWhen: Any = Field("load", description="when the page counts as loaded")
NavigationTimeout = Field(30_000, ge=1, le=120_000, description="ms")


class NavigateRequest(_Body):
    url: str = Field(min_length=1, max_length=8000)
    wait_until: WaitUntil = LoadedWhen
    timeout_ms: int = NavigationTimeout
    settle: bool = Field(True, description="wait for the display to show the page still before answering; false "
                                           "answers once the page has loaded (~0.2 s sooner: the tab's loading "
                                           "throbber may still turn), for a setup whose next action settles")


class HistoryRequest(_Body):
    wait_until: WaitUntil = LoadedWhen
    timeout_ms: int = NavigationTimeout


class ClickRequest(Target):
    model_config = ConfigDict(extra="forbid")
    button: Literal["left", "middle", "right"] = "left"
    click_count: int = Field(1, ge=1, le=3)
    timeout_ms: int = Timeout
    glide: bool = Field(True, description="the pointer glides to the element first, as the server's pointer glide "
                                          "is set (a person watching sees where it goes); false: it goes there at "
                                          "once, for a step nobody needs to watch (an evaluation's setup)")


class FillRequest(Target):
    model_config = ConfigDict(extra="forbid")
    value: str = Field(max_length=20_000, description="typed for real; {{name}} is replaced by secrets[name]")
    clear: bool = True
    secrets: dict[str, str] | None = Field(None, description="values for {{name}} placeholders; never echoed")
    timeout_ms: int = Timeout


class HoverRequest(Target):
    model_config = ConfigDict(extra="forbid")
    timeout_ms: int = Timeout


class CheckRequest(Target):
    model_config = ConfigDict(extra="forbid")
    checked: bool = Field(True, description="the state wanted: true checks, false unchecks")
    timeout_ms: int = Timeout


# Where inside an element the pointer goes: an edge's middle, 1 px in (on a sortable list, the top
# edge means "before it" and the centre "after it"), or a point from its box's top-left corner in
# CSS px (Playwright's sourcePosition/targetPosition, TestCafe's offsetX/offsetY).
Edge = Literal["center", "top", "bottom", "left", "right"]


class ElementPoint(BaseModel):
    # Either coordinate left out is the middle on that axis (as TestCafe's offsetX/offsetY).
    model_config = ConfigDict(extra="forbid")
    x: float | None = Field(None, ge=0, le=10_000, description="CSS px from the left edge (default: the middle)")
    y: float | None = Field(None, ge=0, le=10_000, description="CSS px from the top edge (default: the middle)")


Position = Edge | ElementPoint


class DropTarget(Target):
    """The element to drop on, and where on it (default its centre)."""

    model_config = ConfigDict(extra="forbid")
    position: Position | None = Field(None, description="where on it: center (default), an edge (1 px inside, "
                                                        "at its middle) or {x, y} from its top-left corner")

    def describe(self) -> str:
        return super().describe() + position_words(self.position)

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema, handler):
        # Target's schema by reference plus `position`, not all of Target's fields written out again:
        # every tool listing a flow step or a drag carries it (docs/mcp.md's sizes).
        own = handler.resolve_ref_schema(handler(core_schema))
        return {"$ref": handler(Target.__pydantic_core_schema__)["$ref"], "description": own["description"],
                "properties": {"position": own["properties"]["position"]}}


def position_words(position: Position | None) -> str:
    """`` at its top edge``, `` at (12, 0)`` or nothing for the centre (pure)."""
    if position is None or position == "center":
        return ""
    if isinstance(position, str):
        return f" at its {position} edge"
    return f" at ({_coordinate(position.x)}, {_coordinate(position.y)})"


def _coordinate(value: float | None) -> str:
    return "middle" if value is None else f"{value:g}"


class DragRequest(Target):
    model_config = ConfigDict(extra="forbid")
    to: DropTarget = Field(description="the element to drop on (named the same ways), and where on it")
    position: Position | None = Field(None, description="where to press on the dragged element, as to's position")
    timeout_ms: int = Timeout


class PressRequest(Target):
    model_config = ConfigDict(extra="forbid")
    keys: Chords = Field(min_length=1, max_length=50, description='chords in order, e.g. ["ctrl+a", "Delete"]')
    timeout_ms: int = Timeout


class SelectRequest(Target):
    model_config = ConfigDict(extra="forbid")
    option: str = Field(min_length=1, max_length=2000, description="the option's value or label")
    timeout_ms: int = Timeout


class WaitRequest(Target):
    model_config = ConfigDict(extra="forbid")
    state: Literal["attached", "visible", "hidden", "detached"] = "visible"
    timeout_ms: int = Field(10_000, ge=1, le=120_000, description="ms")


class LocateRequest(Target):
    model_config = ConfigDict(extra="forbid")
    state: Literal["attached", "visible"] = Field("visible", description="waited for before the answer; none "
                                                  "matching by then is exists: false, not an error")
    timeout_ms: int = Field(5_000, ge=1, le=120_000, description="ms")


class DisplayBox(BaseModel):
    x: int
    y: int
    width: int
    height: int


class Located(BaseModel):
    """An element as it is now, found without acting on it: a visible one is scrolled into view
    first, so its box is where it shows on the display."""

    exists: bool
    visible: bool
    matches: int = Field(description="how many elements the target matches; the answer is about the first")
    box: DisplayBox | None = Field(None, description="display pixels, when visible")
    text: str | None = None
    value: str | None = Field(None, description="a form control's value")


class EvaluateRequest(_Body):
    expression: str = Field(min_length=1, max_length=100_000)


class DialogRequest(_Body):
    accept: bool = True
    prompt_text: str | None = Field(None, max_length=10_000)


class DialogPolicyRequest(_Body):
    mode: DialogMode = Field(description="manual: a dialog stays open for the model or the operator to answer; "
                                         "accept / dismiss: it is answered at once")


class UploadRequest(Target):
    model_config = ConfigDict(extra="forbid")
    files: list[UploadFile] = Field(min_length=1, max_length=20)
    timeout_ms: int = Timeout


class NewTabRequest(_Body):
    url: str | None = Field(None, max_length=8000)


class TabRequest(_Body):
    tab_id: str = Field(description="an id from the tab list, e.g. t2")


class ClearStateRequest(_Body):
    timeout_ms: int = Field(10_000, ge=100, le=60_000, description="ms the clearing may take")


class ClearedState(BaseModel):
    """What a clear of the browser's state did (desktop.browser.state.clear_state)."""

    origins: list[str] = Field(description="the origins whose storage was cleared")
    closed_tabs: int = Field(description="the tabs closed; one new tab is left, at about:blank")
    duration_ms: int
    tab: Tab = Field(description="the tab left, in front")


# The readers' query parameters. Not strict: a query string may carry what a proxy or a cache adds.


class ContentQuery(BaseModel):
    format: ContentFormat = "text"
    selector: str | None = Field(None, min_length=1, max_length=2000, description="a CSS selector")


class ConsoleQuery(BaseModel):
    since: int = Field(0, ge=0, description="only messages after this sequence number")
    level: Literal["error", "warning", "info", "log", "debug"] | None = None


class NetworkQuery(BaseModel):
    since: int = Field(0, ge=0, description="only requests after this sequence number")
    failed_only: bool = False


class DialogsQuery(BaseModel):
    since: int = Field(0, ge=0, description="only dialogs after this sequence number")


def target_of(body: Locating) -> Target:
    """The element a request names, without the rest of the request."""
    return Target(**{name: getattr(body, name) for name in LOCATOR_FIELDS})


class ActedAnswer(Acted):
    page: PageSummary | None = Field(None, description=PAGE_FIELD)


class DialogAnswer(DialogInfo):
    page: PageSummary | None = Field(None, description=PAGE_FIELD)



class BlockedQuery(BaseModel):
    after: int = Field(0, ge=0, description="only entries with a larger seq")
