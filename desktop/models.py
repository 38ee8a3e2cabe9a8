"""Every wire model of the desktop's operations, in one place: the request bodies and the answers
that REST, MCP, the Python client and the remote control plane exchange.

Pure pydantic: importing this loads no X library, no web framework and no browser driver, so a
client (vision.client) takes its types from here. Bounds are written once, here: the doors take
their schemas and checks from these models.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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


class Target(BaseModel):
    """Exactly one way of naming an element."""

    selector: str | None = Field(None, min_length=1, max_length=2000, description="a CSS selector")
    ref: str | None = Field(None, description="a ref from the accessibility snapshot (page content, format "
                                              "accessibility), e.g. e12")
    label: str | None = Field(None, min_length=1, max_length=500, description="the text of the field's label")
    text: str | None = Field(None, min_length=1, max_length=500, description="text visible in the element")

    @model_validator(mode="after")
    def _exactly_one(self):
        given = [name for name in ("selector", "ref", "label", "text") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("name the element one way: exactly one of selector, ref, label, text"
                             + (f" (got {', '.join(given)})" if given else ""))
        if self.ref is not None and not REF.match(self.ref):
            raise ValueError(f"ref {self.ref!r}: refs look like e12 or f1e12 "
                             "(take them from the accessibility snapshot)")
        return self

    def describe(self) -> str:
        for name in ("selector", "ref", "label", "text"):
            value = getattr(self, name)
            if value is not None:
                return f"{name} {value!r}"
        return "nothing"


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
    result: dict[str, Any] | None = None
    page: PageSummary | None = Field(None, description=PAGE_FIELD)


class NetworkPolicyBody(_Body):
    allow: list[str] = Field(default_factory=list, description="host, host:port or *.domain patterns: only these "
                                                                "may be reached; empty: every host not denied")
    deny: list[str] = Field(default_factory=list, description="patterns never reached, whatever allow says")


class CreateSession(_Body):
    id: str | None = Field(None, description="a name for the session; generated when omitted")
    network: NetworkPolicyBody | None = Field(None, description="the browser's network policy; default: no limits "
                                                                 "beyond glassdesk's own ports")
    dialogs: DialogMode = Field("manual", description="how JavaScript dialogs are answered: manual (left open for "
                                                      "the model or the operator), accept or dismiss (at once)")


class LaunchRequest(_Body):
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)


class OpenRequest(_Body):
    url: str = Field(min_length=1)


class FocusRequest(_Body):
    window_id: str


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


class UploadFile(BaseModel):
    name: str = Field(min_length=1, max_length=255)
    content_base64: str


# At least 1: Playwright reads 0 as "wait for ever".
Timeout = Field(5000, ge=1, le=60_000, description="how long to wait for the element, in ms")


LoadedWhen = Field("load", description="when the page counts as loaded")
NavigationTimeout = Field(30_000, ge=1, le=120_000, description="ms")


class NavigateRequest(_Body):
    url: str = Field(min_length=1, max_length=8000)
    wait_until: WaitUntil = LoadedWhen
    timeout_ms: int = NavigationTimeout


class HistoryRequest(_Body):
    wait_until: WaitUntil = LoadedWhen
    timeout_ms: int = NavigationTimeout


class ClickRequest(Target):
    model_config = ConfigDict(extra="forbid")
    button: Literal["left", "middle", "right"] = "left"
    click_count: int = Field(1, ge=1, le=3)
    timeout_ms: int = Timeout


class FillRequest(Target):
    model_config = ConfigDict(extra="forbid")
    value: str = Field(max_length=20_000, description="typed for real; {{name}} is replaced by secrets[name]")
    clear: bool = True
    secrets: dict[str, str] | None = Field(None, description="values for {{name}} placeholders; never echoed")
    timeout_ms: int = Timeout


class HoverRequest(Target):
    model_config = ConfigDict(extra="forbid")
    timeout_ms: int = Timeout


class SelectRequest(Target):
    model_config = ConfigDict(extra="forbid")
    option: str = Field(min_length=1, max_length=2000, description="the option's value or label")
    timeout_ms: int = Timeout


class WaitRequest(Target):
    model_config = ConfigDict(extra="forbid")
    state: Literal["attached", "visible", "hidden", "detached"] = "visible"
    timeout_ms: int = Field(10_000, ge=1, le=120_000, description="ms")


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


def target_of(body: Target) -> Target:
    """The element a request names, without the rest of the request."""
    return Target(selector=body.selector, ref=body.ref, label=body.label, text=body.text)


class ActedAnswer(Acted):
    page: PageSummary | None = Field(None, description=PAGE_FIELD)


class DialogAnswer(DialogInfo):
    page: PageSummary | None = Field(None, description=PAGE_FIELD)



class BlockedQuery(BaseModel):
    after: int = Field(0, ge=0, description="only entries with a larger seq")
