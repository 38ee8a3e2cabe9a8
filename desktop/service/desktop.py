"""The desktop service: every desktop operation, its readiness check and its error mapping, once.

The front doors (REST in ``desktop.http.desktop``, the MCP tools, the console, the CLI) call this and only
this; none of them reaches into a session's processes. Sessions are named; ``None`` means the
default session, which is started on first use.

Two guards keep a caller from fighting someone else for the pointer: while a person holds the
desktop (take-over) an agent's action is refused with ``operator_in_control``, and while a vision
run drives it a direct action is refused with ``session_busy`` rather than interleaved with the
run's own. An action behind another still running waits at most ``QUEUE_WAIT_S``, then is
``session_busy`` too, with a retry hint.
"""

from __future__ import annotations

import builtins  # the class's own ``list`` (its sessions) hides the type in its later annotations
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from desktop.actions import (
    SCREEN_HEIGHT,
    SCREEN_WIDTH,
    Button,
    Click,
    DoubleClick,
    Key,
    Region,
    TripleClick,
    Type,
    Zoom,
    _Action,
)
from desktop.browser.chromium import BrowserError
from desktop.browser.errors import DialogOpen, PageTimeout
from desktop.errors import (
    ActionFailedError,
    DesktopUsersExhausted,
    DialogOpenError,
    GuestNotOpen,
    InvalidAction,
    InvalidRequest,
    OperatorInControl,
    PageTimeoutError,
    PageUnavailable,
    ScreenshotFailed,
    SessionBusy,
    SessionNotFound,
    SessionUnavailable,
    SingleSessionOnly,
    StackError,
)
from desktop.frame import IMAGE_FORMATS, encode_lossy, with_pointer
from desktop.models import (
    BlockedRequest,
    DesktopTree,
    LiveView,
    Marks,
    NativeFound,
    NativeMatch,
    NativeTarget,
    NetworkPolicyInfo,
    OSWorldCall,
    OSWorldGuest,
    SavedState,
    SessionInfo,
    TreeFormat,
    TreeQuery,
    Window,
)
from desktop.native import centre, native_result
from desktop.network.policy import NetworkPolicy, PatternError
from desktop.port import Performed
from desktop.session.liveview import Grant, LiveTokens, Mode
from desktop.session.manager import QUEUE_WAIT_S, Session, SessionManager, utcnow
from desktop.session.states import check_name as check_state_name
from desktop.session.states import home_path
from desktop.x11.screen import ScreenshotError
from desktop.x11.windows import WindowError, check_program, check_url

if TYPE_CHECKING:  # imported when a guest is first served (it builds on this service)
    from desktop.osworld.server import GuestServers

log = logging.getLogger("glassdesk.desktop")

DEFAULT_SESSION = "default"


@dataclass
class Shot:
    """A screenshot as handed out: the encoded image, its size, and how its pixels map to display
    pixels: display x = origin x + image x / scale (the same for y), where the origin is the
    region's top-left corner (0, 0 for the whole screen)."""

    session_id: str
    image: bytes
    width: int
    height: int
    region: Region | None
    scale: float
    pointer: tuple[int, int] | None = None
    url: str | None = None
    format: str = "png"  # one of desktop.x11.screen.IMAGE_FORMATS

    @property
    def png(self) -> bytes:
        """The image, for the callers that asked for (the default) PNG."""
        if self.format != "png":
            raise ValueError(f"this screenshot is {self.format}, not png")
        return self.image

    @property
    def media_type(self) -> str:
        return IMAGE_FORMATS[self.format]

    @property
    def origin(self) -> tuple[int, int]:
        """The display pixel the image's top-left pixel shows."""
        return (self.region.x0, self.region.y0) if self.region is not None else (0, 0)

    @property
    def bounds(self) -> tuple[int, int, int, int]:
        """The part of the display the image shows, [x0, y0, x1, y1) in display pixels."""
        r = self.region
        return (r.x0, r.y0, r.x1, r.y1) if r is not None else (0, 0, SCREEN_WIDTH, SCREEN_HEIGHT)

    @property
    def note(self) -> str:
        """The coordinate conversion, in one sentence a model or a person can follow."""
        if self.region is None and self.scale == 1.0:
            return "full screen, image pixels = display pixels"
        if self.region is None:
            return (f"whole screen scaled by {self.scale:g}: display x = image x / {self.scale:g}, "
                    f"display y = image y / {self.scale:g}")
        r = self.region
        return (f"region [{r.x0}, {r.y0}, {r.x1}, {r.y1}] at scale {self.scale:g}: display x = {r.x0} + "
                f"image x / {self.scale:g}, display y = {r.y0} + image y / {self.scale:g}")


class DesktopService:
    def __init__(self, manager: SessionManager, *, default_session: str = DEFAULT_SESSION,
                 launch_allow: frozenset[str] | None = None, allow_local_urls: bool = False,
                 allow_evaluate: bool = False):
        from desktop.service.page import PageService  # it builds on this service

        self.manager = manager
        self.default = default_session
        # The fences of what an agent may start or open (desktop.x11.windows.check_program/check_url).
        self.launch_allow = launch_allow
        self.allow_local_urls = allow_local_urls
        self.allow_evaluate = allow_evaluate  # also what the MCP door lists (desktop.ops: Tool.enabled)
        self._create_lock = threading.Lock()
        # The live view: tokens signed with this process's own secret, and where the viewer is
        # served (set by whatever serves it: the API, or the loopback viewer of `glassdesk mcp`).
        self.live_tokens = LiveTokens()
        self.viewer_url: str | None = None
        # The page layer of every session: what its Chromium knows, selector actions as real input.
        self.pages = PageService(self, allow_evaluate=allow_evaluate)
        # Where saved states are kept (desktop.session.states.StateStore, under the data dir): set by
        # the application; None keeps none (a remote backend's sessions: their browsers are elsewhere).
        self.states = None
        # Where the sessions' OSWorld guest servers keep their films (desktop.osworld), under the data
        # dir: set by the application for local sessions; None serves no guest contract (a remote
        # backend's sessions are in their containers, out of this host's loopback).
        self.osworld_dir: Path | None = None
        self._guests: GuestServers | None = None
        # A session server (`glassdesk up --single-session`): its one session, once started, is the
        # only one, neither deleted nor joined by another (desktop.remote.backends: one per container).
        self.single_session = False

    # ------------------------------------------------------------------ sessions

    def on_change(self, listener: Callable[[str, str], None]) -> None:
        """Call ``listener(what, session_id)`` on "created", "deleted" and "restarted"."""
        self.manager.listeners.append(listener)

    def create(self, session_id: str | None = None, *, pinned: bool = False, allow: Sequence[str] | None = None,
               deny: Sequence[str] | None = None, dialogs: str = "manual", state: str | None = None) -> SessionInfo:
        """Start a session (seconds), its browser under the network policy ``allow``/``deny`` and
        the dialog policy ``dialogs`` (both checked before anything starts), from the saved state
        ``state`` when given (read and checked first: a tampered one makes no session). A desktop
        that does not come up is ``session_unavailable``."""
        from desktop.service.page import check_dialog_mode

        network = _network_policy(allow, deny)
        check_dialog_mode(dialogs)
        self._refuse_if_single("create")
        storage = self._state_store().load(state) if state is not None else None
        files = self._state_store().load_files(state) if state is not None else {}
        session = self._start(session_id, pinned=pinned, network=network)
        self.pages.set_dialog_policy(session.id, dialogs)  # before any page: Chromium starts at about:blank
        if storage is not None:
            try:
                self.pages.set_storage_state(session.id, storage)
                session.write_home_files(files)
            except BaseException:  # a session without the state it was asked for is not what was asked
                self.manager.delete(session.id)
                raise
        return self._info(session)

    # ------------------------------------------------------------------ saved states (desktop.session.states)

    def _state_store(self):
        if self.states is None:
            raise InvalidRequest("this server keeps no saved states: they are kept for the sessions of a server "
                                 "that runs its desktops itself (the local backend)")
        return self.states

    def save_state(self, session_id: str, name: str, files: Sequence[str] = ()) -> SavedState:
        """The session's browser state (cookies, local storage) and the home ``files`` kept as ``name``.
        Every bad path, and every file that cannot be read, is named at once; nothing is kept then."""
        store = self._state_store()
        check_state_name(name)
        problems, paths = [], []
        for path in files:
            try:
                paths.append(home_path(path))
            except ValueError as exc:
                problems.append(str(exc))
        session = self.existing(session_id)
        kept, unread = session.read_home_files(list(dict.fromkeys(paths)))
        problems += unread
        if problems:
            raise InvalidRequest("files: " + "; ".join(problems))
        return SavedState.model_validate(store.save(name, self.pages.storage_state(session.id), session_id=session.id,
                                                    files=kept))

    def saved_states(self) -> list[SavedState]:
        return [SavedState.model_validate(found) for found in self._state_store().list()]

    def delete_state(self, name: str) -> None:
        self._state_store().delete(name)

    def _start(self, session_id: str | None, *, pinned: bool = False, network: NetworkPolicy | None = None) -> Session:
        try:
            return self.manager.create(session_id, pinned=pinned, network=network)
        except DesktopUsersExhausted:  # its own code (503), and how to grow the pool
            raise
        except StackError as exc:
            raise SessionUnavailable(f"could not start the desktop: {exc}") from exc

    def session(self, session_id: str | None = None) -> Session:
        """The named session, or the default one, started on first use (blocking, seconds)."""
        name = session_id or self.default
        found = self.peek(name)
        if found is not None and found.status != "starting":
            return found
        if name != self.default:
            if found is None:
                raise SessionNotFound(f"no session {name!r}; list the sessions to see which exist, or leave the "
                                      f"session out to use the default ({self.default!r})")
            return found
        with self._create_lock:  # one creator; a concurrent caller waits for it, then finds the session
            found = self.peek(name)
            if found is None:
                log.info("starting the default session %r", name)
                found = self._start(name, pinned=True)
            return found

    def wait_ready(self, session_id: str | None, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` for the session and its browser to be ready (after a heal);
        whether they are. Never starts a session and never raises."""
        session = self.peek(session_id or self.default)
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            if session is None:
                return False
            browser = session.stack.browser
            if session.status == "ready" and browser is not None and browser.pages is not None:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def peek(self, session_id: str) -> Session | None:
        """The named session, or None: never starts one, never raises."""
        return self.manager.sessions.get(session_id)

    def existing(self, session_id: str | None) -> Session:
        """The named session (None: the default one) if it exists; never starts one."""
        return self.manager.get(session_id or self.default)

    def info(self, session_id: str) -> SessionInfo:
        """One session as it is now; never starts one."""
        return self._info(self.existing(session_id))

    def list(self) -> list[SessionInfo]:
        return [self._info(s) for s in self.manager.list()]

    def _info(self, session: Session) -> SessionInfo:
        url = self._view_link(session, control=False).novnc_url if self.viewer_url else ""
        return session.info(default=session.id == self.default, novnc_url=url)

    def delete(self, session_id: str) -> None:
        self.existing(session_id)
        self._refuse_if_single("delete")
        try:
            self.manager.delete(session_id)
        except SessionNotFound:  # deleted meanwhile by someone else: the outcome is the same
            pass

    def _refuse_if_single(self, what: str) -> None:
        if self.single_session:
            raise SingleSessionOnly(f"this server runs the one session {self.default!r} for its whole life and cannot "
                                    f"{what} sessions; ask the control plane that started it")

    def reset(self, session_id: str | None) -> SessionInfo:
        """Back to a fresh session on the same display: launched programs end, Chromium restarts on
        a clean profile at about:blank. Refused while a run or a person drives the session."""
        session = self._for_agent(session_id)
        session.reset(queue_s=QUEUE_WAIT_S)
        return self._info(session)

    def close(self) -> None:
        if self._guests is not None:
            self._guests.close_all()
        self.manager.close()

    # ------------------------------------------------------------------ OSWorld's guest contract

    def osworld_guest(self, session_id: str) -> OSWorldGuest:
        """Serve OSWorld's guest contract for the session on a loopback port of its own
        (desktop.osworld); the same server again when it already runs."""
        if self.osworld_dir is None:
            raise InvalidRequest("OSWorld's guest contract is served for local sessions only: this server's sessions "
                                 "run in containers or pods, whose loopback the harness cannot reach")
        with self._create_lock:
            if self._guests is None:
                from desktop.osworld.server import GuestServers

                self._guests = GuestServers(self, self.osworld_dir)
        return self._guests.open(session_id)

    def osworld_calls(self, session_id: str) -> builtins.list[OSWorldCall]:
        """The calls the session's open guest answered, oldest first (the episode's record)."""
        session = self.existing(session_id)
        calls = self._guests.calls(session.id) if self._guests is not None else None
        if calls is None:
            raise GuestNotOpen(f"session {session.id} has no OSWorld guest: POST "
                               f"/api/v1/sessions/{session.id}/osworld opens it")
        return calls

    def close_osworld_guest(self, session_id: str) -> bool:
        """Stop the session's guest server; False when none ran. It stops with the session anyway."""
        self.existing(session_id)
        return self._guests is not None and self._guests.close(session_id)

    # ------------------------------------------------------------------ the browser's network

    def network_policy(self, session_id: str) -> NetworkPolicyInfo:
        """The session's network policy; never starts a session."""
        session = self.existing(session_id)
        return NetworkPolicyInfo(session_id=session.id, **session.stack.network.lists())

    def set_network_policy(self, session_id: str, allow: Sequence[str] | None,
                           deny: Sequence[str] | None) -> NetworkPolicyInfo:
        """Replace the session's network policy (both lists). Applies at once, to the requests
        and to the connections already open; a bad pattern changes nothing."""
        network = _network_policy(allow, deny)
        session = self.existing(session_id)
        session.stack.set_network(network)
        return NetworkPolicyInfo(session_id=session.id, **network.lists())

    def blocked_requests(self, session_id: str, after: int = 0) -> builtins.list[BlockedRequest]:
        """The requests the session's network policy blocked (the latest few hundred), those with
        ``seq`` above ``after``, oldest first."""
        proxy = self.existing(session_id).stack.proxy
        return proxy.blocked.since(after) if proxy is not None else []

    # ------------------------------------------------------------------ take-over

    def set_takeover(self, session_id: str, on: bool) -> Session:
        """Take over (or hand back) mouse and keyboard. Either way the control links issued so far
        are revoked, and their open connections close: a take-over gives the person who asked a
        fresh control link, and a hand-back leaves nobody else driving."""
        session = self.existing(session_id)
        session.takeover_since = (session.takeover_since or utcnow()) if on else None
        session.live_generation += 1
        return session

    # ------------------------------------------------------------------ live view

    def serve_viewer(self, base_url: str | None) -> None:
        """Hand out live-view links to the viewer at ``base_url`` (``http://host:port``); None: no
        viewer is served, and asking for a live view says so."""
        self.viewer_url = base_url.rstrip("/") if base_url else None

    def live_view(self, session_id: str | None, *, control: bool = False, start: bool = False) -> LiveView:
        """A link to watch (or, with ``control``, drive) the session live. ``start``: the default
        session may be started for it, as for any MCP tool; otherwise it must exist."""
        session = self.session(session_id) if start else self.existing(session_id)
        self.require_viewer()
        return self._view_link(session, control=control)

    def require_viewer(self) -> None:
        if not self.viewer_url:
            raise SessionUnavailable("no live view: nothing in this process serves the viewer (it is served by "
                                     "`glassdesk up` and by `glassdesk mcp`)")

    def _view_link(self, session: Session, *, control: bool) -> LiveView:
        mode: Mode = "control" if control else "view"
        token, expires = self.live_tokens.issue(session.id, mode, session.live_generation, instance=session.instance)
        return LiveView(
            session_id=session.id, mode=mode, view_only=not control, takeover=session.takeover_since is not None,
            token=token, expires_at=datetime.fromtimestamp(expires, UTC),
            websocket=f"/api/v1/sessions/{session.id}/vnc",
            # The token goes in the fragment: browsers never send it to the server or in a Referer.
            novnc_url=f"{self.viewer_url}/view/{session.id}#token={token}",
        )

    def live_grant(self, session_id: str, token: str | None) -> Grant:
        """What a live-view token allows on this session now, or a typed refusal (invalid, another
        session's, expired, revoked)."""
        session = self.existing(session_id)
        return self.live_tokens.verify(token, session.id, session.live_generation, instance=session.instance)

    def grant_current(self, grant: Grant) -> bool:
        """Is a grant still honoured? A grant ends with its session (a later one of the same name is
        another instance); a control grant also with a take-over."""
        session = self.peek(grant.session_id)
        return (session is not None and session.instance == grant.instance
                and (not grant.control or session.live_generation == grant.generation))

    async def open_rfb(self, grant: Grant):
        """The live view's RFB stream for this grant, logged in: (reader, writer), where the
        client's ClientInit comes next. Here: x11vnc on loopback; a remote session's: its server's."""
        from desktop.session.liveview import rfb_login

        return await rfb_login(*self.rfb_target(grant))

    def rfb_target(self, grant: Grant) -> tuple[int, str]:
        """Where the relay logs in for this grant: x11vnc's port and the password of its mode."""
        return self.existing(grant.session_id).rfb_target(control=grant.control)

    # ------------------------------------------------------------------ looking

    def screenshot(self, session_id: str | None = None, *, region: Region | None = None,
                   scale: float = 1.0, format: str = "png", quality: int | None = None,
                   context: bool = False, pointer: bool = False) -> Shot:
        """The screen, whole or a region, optionally scaled, as PNG (lossless, the default), JPEG or
        WebP (``quality`` 1..100, for those two only). ``context`` adds the pointer position and
        the browser's URL (two more calls; worth it when a model is going to read the answer).
        ``pointer`` draws the pointer in, as a person sees the screen (an X capture leaves it out).
        The Shot says how its pixels map to display pixels (``origin``, ``scale``, ``note``)."""
        if not 0 < scale <= 4:
            raise InvalidAction("scale: must be more than 0 and at most 4")
        if format not in IMAGE_FORMATS:
            raise InvalidAction(f"format: must be one of {', '.join(IMAGE_FORMATS)}, not {format!r}")
        if quality is not None and (format == "png" or not 1 <= quality <= 100):
            raise InvalidAction("quality: a number from 1 to 100, for jpeg and webp only (png is lossless)")
        session = self.session(session_id)
        frame = session.capture()
        if pointer:
            frame = with_pointer(frame, session.pointer())
        if region is None:
            width, height = max(1, round(SCREEN_WIDTH * scale)), max(1, round(SCREEN_HEIGHT * scale))
        else:
            width, height = max(1, round(region.width * scale)), max(1, round(region.height * scale))
        if format != "png":
            data = encode_lossy(frame.view(region, scale), format, quality)
        elif region is None:
            data = frame.png if scale == 1.0 else frame.scaled_png(width, height)
        else:
            data = frame.crop_png(region, scale)
        shot = Shot(session.id, data, width, height, region, scale, format=format)
        if context:
            try:
                shot.pointer = session.cursor()
            except ActionFailedError:
                shot.pointer = None
            shot.url = session.page_url()
        return shot

    def zoom(self, session_id: str | None, zoom: Zoom) -> Shot:
        """A region of the screen now (neither waits nor settles); the one zoom of every door."""
        return self.screenshot(session_id, region=zoom.region, scale=zoom.scale)

    def windows(self, session_id: str | None = None) -> builtins.list[Window]:
        session = self.session(session_id)
        session.require_ready()
        try:
            return session.list_windows()
        except (OSError, RuntimeError) as exc:
            raise session.down_error() or ActionFailedError(f"could not list the windows: {exc}") from exc

    def desktop_tree(self, session_id: str | None = None, window: str | None = None, interactive_only: bool = False,
                     visible_only: bool = True, max_depth: int = 40, max_nodes: int = 3000,
                     format: TreeFormat = "json") -> DesktopTree:
        """The visible desktop as one tree (desktop.session.tree); an unknown window is refused."""
        session = self.session(session_id)
        session.require_ready()
        query = TreeQuery(window=window, interactive_only=interactive_only, visible_only=visible_only,
                          max_depth=max_depth, max_nodes=max_nodes, format=format)
        try:
            tree = session.desktop_tree(query)
        except (OSError, RuntimeError) as exc:
            raise session.down_error() or ActionFailedError(f"could not read the desktop tree: {exc}") from exc
        if window is not None and not tree.windows:
            raise InvalidAction(f"window: no window {window} on this desktop; list the windows to see which exist")
        return tree

    def marks(self, session_id: str | None = None, image: bool = True, limit: int = 200) -> Marks:
        """Set-of-marks: the controls a person can act on now, numbered, with the marked screenshot."""
        session = self.session(session_id)
        session.require_ready()
        try:
            return session.marks(limit, image)
        except (OSError, RuntimeError) as exc:
            raise session.down_error() or ActionFailedError(f"could not mark the screen: {exc}") from exc

    def native_find(self, session_id: str | None, target: NativeTarget) -> NativeFound:
        """The showing controls of the native windows that ``target`` names (desktop.native)."""
        session = self.session(session_id)
        session.require_ready()
        try:
            return session.native_find(target)
        except (OSError, RuntimeError) as exc:
            raise session.down_error() or ActionFailedError(f"could not read the desktop tree: {exc}") from exc

    def native_click(self, session_id: str | None, target: NativeTarget, button: Button = "left",
                     clicks: int = 1) -> Performed:
        """Real pointer input at the middle of the one control ``target`` names; ``result`` says which
        control it was and whether the pointer landed on it (desktop.native.landed)."""
        session = self._for_agent(session_id)
        match = _native_target(session, target)
        x, y = centre(match)
        kind = {1: Click, 2: DoubleClick, 3: TripleClick}[clicks]
        done = session.perform(kind(x=x, y=y, button=button), queue_s=QUEUE_WAIT_S)
        return replace(done, result=native_result(match, done.native))

    def native_type(self, session_id: str | None, target: NativeTarget, text: str, clear: bool = False) -> Performed:
        """A click at the middle of the one control ``target`` names (the keyboard goes to it), all it
        holds selected with ctrl+a when ``clear``, then ``text`` typed with the real keyboard over it."""
        session = self._for_agent(session_id)
        typing = Type(text=text)  # refused (an untypeable character) before anything is clicked
        match = _native_target(session, target)
        x, y = centre(match)
        steps = [Click(x=x, y=y), *([Key(keys=["ctrl+a"])] if clear else []), typing]
        done = [session.perform(step, queue_s=QUEUE_WAIT_S) for step in steps]
        return replace(done[-1], executed=[argv for d in done for argv in d.executed],
                       duration_ms=sum(d.duration_ms for d in done), native=done[0].native,
                       result=native_result(match, done[0].native))

    def cursor(self, session_id: str | None = None) -> tuple[int, int]:
        return self.session(session_id).cursor()

    def element_at(self, session_id: str | None, x: int, y: int):
        """What is under a display pixel in the browser in front (desktop.browser.hit), or None."""
        return self.session(session_id).element_at(x, y)

    # ------------------------------------------------------------------ acting

    def check_agent(self, session_id: str | None) -> None:
        """Raise what an agent acting on the session now would get (a person in control, a run)."""
        self._for_agent(session_id)

    def _for_agent(self, session_id: str | None) -> Session:
        """The session, if an agent may act on it now."""
        session = self.session(session_id)
        if session.takeover_since is not None:
            raise OperatorInControl(f"a person has taken over session {session.id} (since "
                                    f"{session.takeover_since:%H:%M:%S} UTC); wait until they hand it back")
        if session.busy and session.run_thread != threading.get_ident():
            raise SessionBusy(f"session {session.id} is running a vision instruction; wait for it to end, or "
                              "cancel it, before acting on it directly")
        return session

    def perform(self, session_id: str | None, action: _Action) -> Performed:
        return self._for_agent(session_id).perform(action, queue_s=QUEUE_WAIT_S)

    def check_url(self, url: str, session: Session | None = None) -> None:
        """Refuse (invalid_action) a URL the browser may not open (desktop.x11.windows.check_url) and,
        given the session, one its network policy blocks by name."""
        _fenced(check_url, url, allow_local=self.allow_local_urls)
        if session is not None:
            _check_network(session, url)

    def open(self, session_id: str | None, url: str) -> Performed:
        self.check_url(url)
        session = self._for_agent(session_id)
        _check_network(session, url)
        return self.settled(session, lambda: session.open_url(url), "opening a page")

    def focus(self, session_id: str | None, window_id: str) -> Performed:
        session = self._for_agent(session_id)
        return self.settled(session, lambda: session.windows.focus(window_id), "focusing a window")

    def launch(self, session_id: str | None, command: str, args: builtins.list[str]) -> tuple[Performed, int]:
        _fenced(check_program, command, self.launch_allow)
        session = self._for_agent(session_id)
        started: list[int] = []

        def run() -> list[list[str]]:
            argv, pid = session.windows.launch(command, args)
            started.append(pid)
            return argv

        return self.settled(session, run, "launching a program"), started[0]

    @staticmethod
    def settled(session: Session, run: Callable[[], Any], what: str) -> Performed:
        try:
            return session.run_settled(run, what=what, queue_s=QUEUE_WAIT_S)
        except WindowError as exc:
            raise InvalidAction(str(exc)) from exc
        except ScreenshotError as exc:
            raise session.down_error() or ScreenshotFailed(str(exc)) from exc
        except DialogOpen as exc:  # the page layer's own answers to the same faults
            raise DialogOpenError(str(exc)) from exc
        except PageTimeout as exc:
            raise PageTimeoutError(str(exc)) from exc
        except BrowserError as exc:
            raise session.down_error() or PageUnavailable(f"the browser of session {session.id} is not answering "
                                                          f"({exc}); try again shortly", retry_after=3) from exc
        except (RuntimeError, OSError, KeyError) as exc:
            # wmctrl failed, the browser gone or not answering in time, exec failed; or the desktop died
            message = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError) else str(exc)
            raise session.down_error() or ActionFailedError(message) from exc


def _native_target(session: Session, target: NativeTarget) -> NativeMatch:
    """The one control an action on ``target`` acts on; the windows' listing failing is the session's
    trouble, said as such (the bus's own is in the target's not-found)."""
    try:
        return session.native_target(target)
    except (OSError, RuntimeError) as exc:
        raise session.down_error() or ActionFailedError(f"could not read the desktop tree: {exc}") from exc


def _network_policy(allow: Sequence[str] | None, deny: Sequence[str] | None) -> NetworkPolicy:
    try:
        return NetworkPolicy.parse(allow, deny)
    except PatternError as exc:
        raise InvalidRequest(f"network policy: {exc}") from exc


def _check_network(session: Session, url: str) -> None:
    """Refuse to open a URL the session's network policy blocks by its name alone, with the
    reason, rather than navigate to the proxy's refusal. (The proxy checks every request anyway.)"""
    try:
        parts = urlsplit(url)  # ValueError for e.g. http://[::1/
        if parts.scheme not in ("http", "https") or session.stack.proxy is None:
            return
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        refusal = session.stack.proxy.refusal_by_name(host or "", port)
    except (ValueError, PatternError) as exc:
        raise InvalidAction(f"url {url!r}: {exc}") from exc
    if refusal is not None:
        raise InvalidAction(f"url {url!r}: the session's network policy blocks {host}:{port} ({refusal.detail})")


def _fenced(check: Callable[..., None], *args, **kwargs) -> None:
    """Run one of desktop.x11.windows' fences before anything else: its refusal is invalid_action."""
    try:
        check(*args, **kwargs)
    except WindowError as exc:
        raise InvalidAction(str(exc)) from exc
