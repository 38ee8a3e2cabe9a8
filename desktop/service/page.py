"""The page service: every page-layer operation, its checks and its error mapping, once.

Reading (state, content, console, network, downloads, tabs, page screenshots) goes through the
session's one DevTools connection (desktop.browser.chromium, desktop.browser.pages). Acting on an element is real
input: the element is found and scrolled into view over DevTools, and the click and the typing go
through the session's xdotool executor and settle like every pixel action - the operator sees the
pointer move, and the answer carries the pixel that was used. Where no pixel can serve (choosing an
option of a native <select> popup, handing files to a file input) the answer says ``dispatched:
"devtools"``; nothing is dispatched that way silently.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout
from pydantic import ValidationError

from desktop.actions import (
    SCREEN_HEIGHT,
    SCREEN_WIDTH,
    Click,
    DoubleClick,
    Key,
    MouseDown,
    MouseUp,
    Move,
    TripleClick,
    Type,
    UnknownPlaceholder,
    fill_placeholders,
)
from desktop.browser.chromium import BrowserError
from desktop.browser.dialogs import dialog_mode
from desktop.browser.downloads import safe_file_name
from desktop.browser.errors import (
    Ambiguous,
    BadSelector,
    Crashed,
    DialogOpen,
    NoDialog,
    NotFound,
    PageTimeout,
    Refused,
    TooLarge,
)
from desktop.browser.locate import Located, locate, locator_for, point_in
from desktop.browser.pages import Pages
from desktop.browser.record import read_request
from desktop.errors import (
    AmbiguousElement,
    DialogOpenError,
    ElementCovered,
    ElementNotFound,
    EvaluateDisabled,
    GlassdeskError,
    InvalidAction,
    InvalidRequest,
    InvalidSelector,
    NoDialogError,
    PageTimeoutError,
    PageUnavailable,
    ResultTooLarge,
    UploadTooLarge,
    describe_validation,
)
from desktop.models import (
    Acted,
    ClearedState,
    ContentFormat,
    DialogInfo,
    DialogPolicy,
    PageContent,
    PageState,
    PageSummary,
    Position,
    Tab,
    Target,
    UploadFile,
    WaitUntil,
)
from desktop.port import Performed
from desktop.session.manager import QUEUE_WAIT_S, Session

T = TypeVar("T")
# Files arrive base64 in a JSON body, and every body is capped at 1 MiB (vision.http.limits): 512 KiB
# of files is what fits, so the one limit holds over REST and MCP alike.
MAX_UPLOAD_BYTES = 512 * 1024
RETRY_S = 3  # a healing browser is usually back within this
DRAG_STEPS = 4  # pointer moves between a drag's source and its drop


class PageService:
    def __init__(self, desktops, *, allow_evaluate: bool = False):
        self.desktops = desktops
        self.allow_evaluate = allow_evaluate
        self._summary_lock = threading.Lock()

    # ---------------------------------------------------------------- plumbing

    def _call(self, session: Session, work: Callable[[Pages], Awaitable[T]], timeout_ms: int = 5000) -> T:
        """Run ``work`` on the session's pages; the page layer's errors become typed ones here."""
        browser = session.stack.browser
        if (session.status != "ready" or browser is None or browser.pages is None or browser.process is None
                or browser.process.poll() is not None):
            raise PageUnavailable(f"the browser of session {session.id} is restarting; try again in {RETRY_S} s",
                                  retry_after=RETRY_S)
        try:
            return browser.call(work, timeout_ms / 1000 + 5)
        except Crashed as exc:
            raise PageUnavailable(f"{exc}; try again in {RETRY_S} s", retry_after=RETRY_S) from None
        except DialogOpen as exc:
            raise DialogOpenError(str(exc)) from None
        except NoDialog as exc:
            raise NoDialogError(str(exc)) from None
        except PageTimeout as exc:
            raise PageTimeoutError(str(exc)) from None
        except BadSelector as exc:
            raise InvalidSelector(str(exc)) from None
        except TooLarge as exc:
            raise ResultTooLarge(str(exc)) from None
        except NotFound as exc:
            raise ElementNotFound(str(exc).strip("'\"")) from None
        except Ambiguous as exc:
            raise AmbiguousElement(str(exc)) from None
        except Refused as exc:
            raise InvalidAction(str(exc)) from None
        except (BrowserError, TimeoutError) as exc:
            raise PageUnavailable(f"the browser of session {session.id} did not answer ({exc}); try again in "
                                  f"{RETRY_S} s", retry_after=RETRY_S) from None
        except PlaywrightTimeout as exc:
            raise PageTimeoutError(f"the browser did not finish in time: {_first_line(exc)}") from None
        except PlaywrightError as exc:
            # The page navigated, closed or crashed under the operation (or the browser died since
            # the check above): nothing a caller did wrong, and worth trying again.
            raise PageUnavailable(f"the page changed or closed during the operation ({_first_line(exc)}); try "
                                  f"again in {RETRY_S} s", retry_after=RETRY_S) from None

    def _reading(self, session_id: str | None) -> Session:
        return self.desktops.session(session_id)

    def _agent(self, session_id: str | None) -> Session:
        """The session, if an agent may act on it now (no person in control, no run driving it)."""
        return self.desktops._for_agent(session_id)

    # ---------------------------------------------------------------- reading

    def state(self, session_id: str | None) -> PageState:
        return self._call(self._reading(session_id), lambda pages: pages.state())

    def content(self, session_id: str | None, fmt: ContentFormat, selector: str | None = None) -> PageContent:
        return self._call(self._reading(session_id), lambda pages: pages.content(fmt, selector))

    def console(self, session_id: str | None, since: int = 0, level: str | None = None) -> list[dict]:
        session = self._reading(session_id)
        return session.stack.record.console.since(since, (lambda e: e["level"] == level) if level else None)

    def cursors(self, session_id: str | None) -> tuple[int, int]:
        """The console's and the network log's sequence numbers now: pass them as ``since`` later
        to read what was recorded in between."""
        record = self._reading(session_id).stack.record
        return record.console.last_seq, record.network.last_seq

    def network(self, session_id: str | None, since: int = 0, failed_only: bool = False) -> list[dict]:
        session = self._reading(session_id)

        def failed(e):
            return bool(e["failure"]) or (e["status"] or 0) >= 400 or bool(e["blocked"])

        return session.stack.record.network.since(since, failed if failed_only else None)

    def request_detail(self, session_id: str | None, seq: int) -> dict | None:
        """The headers and body of the request recorded as network entry ``seq`` (a QA flow's
        request checks), or None when they are no longer kept."""
        session = self._reading(session_id)
        request = session.stack.record.requests.get(seq)
        if request is None:
            return None
        return self._call(session, lambda pages: read_request(request))

    def downloads(self, session_id: str | None) -> list[dict]:
        return self._reading(session_id).stack.record.downloads.since(0)

    def download_path(self, session_id: str | None, name: str) -> Path:
        """A finished download's file, by a name from the list (and only such a name): the copies
        live in the session's ``downloaded`` directory, the server's own."""
        session = self._reading(session_id)
        if safe_file_name(name) != name:
            raise InvalidAction(f"name {name!r}: give a name from the downloads list")
        listed = session.stack.record.downloads.since(0, lambda e: e["name"] == name and not e["failure"])
        path = session.stack.downloaded / name
        if not listed or not path.is_file():
            raise ElementNotFound(f"no download named {name!r}; list the downloads to see which exist")
        return path

    def tabs(self, session_id: str | None) -> list[Tab]:
        return self._call(self._reading(session_id), lambda pages: pages.tabs())

    def screenshot(self, session_id: str | None, *, full_page: bool = False, selector: str | None = None) -> bytes:
        return self._call(self._reading(session_id), lambda pages: pages.screenshot(full_page, selector), 10_000)

    def viewport(self, session_id: str | None) -> dict:
        """The front tab's viewport on the display: ``x``, ``y`` (its origin in display pixels),
        ``width``, ``height`` (CSS px)."""
        return self._call(self._reading(session_id), lambda pages: pages.viewport())

    def summary(self, session_id: str | None) -> PageSummary | None:
        """URL, title, open dialog and the console errors new since the previous summary; None when
        the browser cannot say right now (a heal). Never raises: it rides along with other answers."""
        try:
            session = self.desktops.session(session_id)
            record = session.stack.record
            summary = self._call(session, lambda pages: pages.summary(), 2000)
        except GlassdeskError:
            return None
        with self._summary_lock:
            last, mark = record.console.last_seq, record.errors_reported
            summary.new_console_errors = len(record.console.since(mark, lambda e: e["level"] == "error"
                                                                  and e["seq"] <= last))
            record.errors_reported = max(mark, last)
        return summary

    # ---------------------------------------------------------------- navigating

    def navigate(self, session_id: str | None, how: Literal["goto", "back", "forward", "reload"],
                 url: str | None = None, wait_until: WaitUntil = "load", timeout_ms: int = 30_000,
                 *, settle: bool = True) -> dict:
        if how == "goto":
            self.desktops.check_url(url)  # before the session: a bad URL is refused whatever its state
        session = self._agent(session_id)
        if how == "goto":
            self.desktops.check_url(url, session)  # and the session's network policy

        def navigate() -> dict:
            return self._call(session, lambda pages: pages.navigate(how, url, wait_until, timeout_ms), timeout_ms)

        if not settle:
            with session.exclusive(f"a page {how}"):
                return navigate()
        # Settled like an action: the answer (and any screenshot taken after it, a QA verb's evidence
        # first) shows the page navigated to. The browser has painted it when the navigation returns
        # (desktop.browser.navigation.painted); the settle waits for the display to show it.
        return self.desktops.settled(session, navigate, f"a page {how}").executed

    def new_tab(self, session_id: str | None, url: str | None) -> Tab:
        if url:
            self.desktops.check_url(url)
        session = self._agent(session_id)
        if url:
            self.desktops.check_url(url, session)
        with session.exclusive("opening a tab"):
            return self._call(session, lambda pages: pages.new_tab(url), 15_000)

    def activate_tab(self, session_id: str | None, tab_id: str) -> list[Tab]:
        session = self._agent(session_id)
        with session.exclusive("switching tabs"):
            self._call(session, lambda pages: pages.activate_tab(tab_id))
        return self._call(session, lambda pages: pages.tabs())

    def close_tab(self, session_id: str | None, tab_id: str) -> list[Tab]:
        session = self._agent(session_id)
        with session.exclusive("closing a tab"):
            self._call(session, lambda pages: pages.close_tab(tab_id))
        return self._call(session, lambda pages: pages.tabs())

    def clear_state(self, session_id: str | None, timeout_ms: int = 10_000) -> ClearedState:
        """Cookies, storage, cache and permissions cleared for every origin the browser has seen,
        every tab closed and one left at about:blank (desktop.browser.state): a clean start without
        a new Chromium. An open dialog goes with its tab."""
        session = self._agent(session_id)
        with session.exclusive("clearing the browser's state"):
            return self._call(session, lambda pages: pages.clear_state(), timeout_ms)

    def storage_state(self, session_id: str | None) -> dict:
        """The browser's cookies and local storage (a saved state's body: desktop.session.states)."""
        return self._call(self._reading(session_id), lambda pages: pages.storage_state(), 10_000)

    def set_storage_state(self, session_id: str | None, state: dict) -> None:
        session = self._agent(session_id)
        with session.exclusive("restoring a saved state"):
            self._call(session, lambda pages: pages.set_storage_state(state), 20_000)

    def handle_dialog(self, session_id: str | None, accept: bool, prompt_text: str | None = None) -> DialogInfo:
        return self._call(self._agent(session_id), lambda pages: pages.handle_dialog(accept, prompt_text))

    # ---------------------------------------------------------------- dialogs

    def dialogs(self, session_id: str | None, since: int = 0) -> list[dict]:
        """The dialogs recorded since ``since``: type, message, url, and how each was handled
        (``handled``: accepted, dismissed, or null while open; ``by``: policy, request, screen)."""
        return self._reading(session_id).stack.record.dialogs.since(since)

    def dialog_policy(self, session_id: str | None) -> DialogPolicy:
        session = self._reading(session_id)
        return DialogPolicy(session_id=session.id, mode=session.stack.record.dialog_policy)

    def set_dialog_policy(self, session_id: str | None, mode: str) -> DialogPolicy:
        """How the session answers the dialogs that open from now on (one open now stays open until
        answered). It lives with the session: a Chromium heal and a reset keep it. A setting, not
        input, so neither a run nor a person at the controls holds it up; a bad mode changes nothing."""
        checked = check_dialog_mode(mode)
        session = self._reading(session_id)
        session.stack.record.dialog_policy = checked
        return DialogPolicy(session_id=session.id, mode=checked)

    def wait_for(self, session_id: str | None, target: Target, state: str, timeout_ms: int) -> dict:
        return self._call(self._reading(session_id), lambda pages: pages.wait_for(target, state, timeout_ms),
                          timeout_ms)

    def probe(self, session_id: str | None, target: Target, state: str = "attached", timeout_ms: int = 5000) -> dict:
        """Whether the element exists and is visible (waiting up to ``timeout_ms`` for ``state``),
        its box on the display, its text and value; nothing matching is ``exists: false``, not an error."""
        return self._call(self._reading(session_id), lambda pages: pages.probe(target, state, timeout_ms), timeout_ms)

    def inspect(self, session_id: str | None, target: Target, states: tuple[str, ...] = (),
                attribute: str | None = None) -> dict:
        """The target's matches now, not waited for: ``count``, ``elements`` (text, value, classes,
        focused, tag, the attribute) and the first match's ``states`` asked for (visible, enabled,
        editable, checked: true, false, or null when it has no such state)."""
        return self._call(self._reading(session_id), lambda pages: pages.inspect(target, tuple(states), attribute))

    def boxes(self, session_id: str | None, selectors: list[str], space: str = "page") -> list[list[int]]:
        """The boxes of the elements the selectors match, in viewport, full-page or display pixels."""
        return self._call(self._reading(session_id), lambda pages: pages.boxes(selectors, space))

    def evaluate(self, session_id: str | None, expression: str) -> Any:
        if not self.allow_evaluate:
            raise EvaluateDisabled("evaluate runs arbitrary JavaScript in the page and is off; start the server "
                                   "with --allow-evaluate to turn it on")
        session = self._agent(session_id)
        with session.exclusive("a page script"):
            return self._call(session, lambda pages: pages.evaluate(expression), 10_000)

    # ---------------------------------------------------------------- the calibration page

    def show_targets(self, session_id: str | None, points: list[tuple[int, int]],
                     labels: list[str] | None = None) -> dict:
        """Show numbered targets at these display pixels, full screen in a tab of their own
        (desktop.browser.targets); ``target_events`` then says where the pointer landed on them."""
        session = self._agent(session_id)
        with session.exclusive("the calibration page"):
            return self._call(session, lambda pages: pages.show_targets([(p[0], p[1]) for p in points], labels), 10_000)

    def target_events(self, session_id: str | None, since: int = 0) -> list[dict]:
        """The pointer's presses, releases, moves and wheels on the calibration page, display pixels."""
        return self._call(self._reading(session_id), lambda pages: pages.target_events(since))

    def hide_targets(self, session_id: str | None) -> None:
        """The window's state back and the calibration page's tab closed."""
        session = self._reading(session_id)
        self._call(session, lambda pages: pages.hide_targets(), 10_000)

    # ---------------------------------------------------------------- acting with real input

    def _locate(self, session: Session, target: Target, timeout_ms: int, doing: str) -> Located:
        async def find(pages: Pages) -> Located:
            page = await pages.need_front()
            pages.refuse_if_dialog(doing)
            return await locate(page, target, timeout_ms)

        located = self._call(session, find, timeout_ms)
        if located.covered_by:
            raise ElementCovered(f"{target.describe()} is under {located.covered_by} at ({located.x}, {located.y}): "
                                 "real input there would land on that; nothing was done")
        return located

    def click(self, session_id: str | None, target: Target, *, button: str = "left", click_count: int = 1,
              timeout_ms: int = 5000, glide: bool = True) -> Acted:
        session = self._agent(session_id)
        kind = {1: Click, 2: DoubleClick, 3: TripleClick}[click_count]
        with session.exclusive("a page click"):  # nothing moves the element between finding and clicking
            located = self._locate(session, target, timeout_ms, "click")
            performed = session.perform(_on_display(kind, located, button=button), queue_s=QUEUE_WAIT_S,
                                        glide=glide)
        return _acted(located, performed)

    def hover(self, session_id: str | None, target: Target, timeout_ms: int = 5000) -> Acted:
        """The real pointer moved onto the element's centre and left there: what opens on hover
        (menus, tooltips) opens, as for a person."""
        session = self._agent(session_id)
        with session.exclusive("a page hover"):  # nothing moves the element between finding and moving there
            located = self._locate(session, target, timeout_ms, "hover")
            performed = session.perform(_on_display(Move, located), queue_s=QUEUE_WAIT_S)
        return _acted(located, performed)

    def check(self, session_id: str | None, target: Target, checked: bool = True, timeout_ms: int = 5000) -> Acted:
        """A checkbox or radio button brought to ``checked``: clicked with the real pointer only when
        its state differs (as Playwright's check does), and its state read again after
        (``verified``). Refused for an element that is neither."""
        session = self._agent(session_id)

        async def state(pages: Pages) -> bool:
            page = await pages.need_front()
            try:
                return await locator_for(page, target).first.is_checked(timeout=timeout_ms)
            except PlaywrightError as exc:
                if "Not a checkbox or radio button" in str(exc):
                    raise Refused(f"{target.describe()} is not a checkbox or a radio button (nor has an ARIA "
                                  "checked state)") from None
                raise

        with session.exclusive("a page check"):
            located = self._locate(session, target, timeout_ms, "click")
            steps = []
            if self._call(session, state, timeout_ms) != checked:
                steps.append(session.perform(_on_display(Click, located), queue_s=QUEUE_WAIT_S))
            now = self._call(session, state, timeout_ms)
            if now != checked and steps:  # a page that sets the state in a later task
                time.sleep(0.2)
                now = self._call(session, state, timeout_ms)
        acted = _acted(located, *steps)
        acted.verified = now == checked
        return acted

    def drag(self, session_id: str | None, target: Target, to: Target, timeout_ms: int = 5000, *,
             position: Position | None = None) -> Acted:
        """The real pointer pressed on the element (at ``position``, default its centre), moved in
        steps onto ``to`` (a DropTarget may say where on it) and released there: an HTML drag and
        drop, a slider, a sortable list. The answer's pixel is where it was pressed; ``executed``
        shows the path to the drop."""
        session = self._agent(session_id)
        drop_at = getattr(to, "position", None)
        with session.exclusive("a page drag"):
            self._locate(session, to, timeout_ms, "drag")  # both in view: the drop first, then the source
            located = _at(self._locate(session, target, timeout_ms, "drag"), position, "the dragged element")
            drop = _at(self._locate(session, to, timeout_ms, "drag"), drop_at, "the drop target")
            # Pressed, nudged (a drag starts past a few pixels), moved onto the drop in steps and
            # once more there before the release: an HTML drag and drop needs the page's dragover to
            # have run over the drop target when the button comes up, so each move is an action of
            # its own and settles. The nudge goes towards the drop, so an edge stays an edge.
            nudge = (_towards(drop.x - located.x, min(10, located.box["width"] // 4)),
                     _towards(drop.y - located.y, min(10, located.box["height"] // 4)))
            start = _shifted(located, *nudge)
            dx, dy = drop.x - start.x, drop.y - start.y
            steps = [_shifted(start, round(dx * i / DRAG_STEPS), round(dy * i / DRAG_STEPS))
                     for i in range(1, DRAG_STEPS + 1)]
            # The last step ends on the drop; one more move, 1 px back the way it came (never past
            # the point: on a sortable list a pixel decides before or after), and the release there.
            back = _shifted(drop, -_towards(dx, 1), -_towards(dy, 1))
            moves = [_on_display(MouseDown, located), _on_display(Move, start),
                     *[_on_display(Move, step) for step in steps], _on_display(Move, back),
                     _on_display(MouseUp, drop)]
            performed = [session.perform(move, queue_s=QUEUE_WAIT_S) for move in moves]
        return _acted(located, *performed)

    def press(self, session_id: str | None, target: Target, keys: list[str], timeout_ms: int = 5000) -> Acted:
        """The element focused, then the keys pressed on the real keyboard."""
        try:
            chords = Key(keys=keys)
        except ValidationError as exc:
            raise InvalidAction(describe_validation(exc)) from None
        return self._focused_then(session_id, target, chords, timeout_ms, "a page press")

    def type_text(self, session_id: str | None, target: Target, value: str, *,
                  secrets: dict[str, str] | None = None, timeout_ms: int = 5000) -> Acted:
        """The element focused, then ``value`` typed on the real keyboard where its caret is:
        nothing cleared (Playwright's pressSequentially; ``fill`` clears first)."""
        _, typing = _typing(value, secrets)
        if typing is None:
            raise InvalidAction("value: nothing to type")
        acted = self._focused_then(session_id, target, typing, timeout_ms, "a page type")
        acted.executed = [["xdotool", "type", value]]  # the placeholders, never the secrets typed
        return acted

    def blur(self, session_id: str | None, target: Target, timeout_ms: int = 5000) -> Acted:
        """The element loses the focus (DevTools, as Playwright's blur: no pixel means "elsewhere";
        a click there could act on what it lands on)."""
        async def unfocus(element) -> bool:
            await element.blur(timeout=timeout_ms)
            return not await element.evaluate("(el) => el.getRootNode().activeElement === el")

        return self._by_devtools(session_id, target, timeout_ms, "blur", unfocus)

    def _by_devtools(self, session_id: str | None, target: Target, timeout_ms: int, doing: str,
                     work: Callable[[Any], Awaitable[bool]]) -> Acted:
        """The element found as an action finds it, then ``work`` done on it through DevTools; what
        ``work`` answers is whether the element holds the result (``verified``)."""
        session = self._agent(session_id)

        async def run(pages: Pages) -> tuple[Located, bool]:
            page = await pages.need_front()
            pages.refuse_if_dialog(doing)
            located = await locate(page, target, timeout_ms)
            return located, await work(locator_for(page, target).first)

        with session.exclusive(f"a page {doing}"):
            located, verified = self._call(session, run, timeout_ms)
        acted = _acted(located)
        acted.dispatched, acted.verified = "devtools", verified
        return acted

    def _focused_then(self, session_id: str | None, target: Target, action, timeout_ms: int, doing: str) -> Acted:
        """The element focused (DevTools: focusing is no input of its own, and a click could act on
        it), then ``action`` on the real keyboard."""
        session = self._agent(session_id)

        async def focus(pages: Pages) -> Located:
            page = await pages.need_front()
            pages.refuse_if_dialog("typing")
            located = await locate(page, target, timeout_ms)
            await locator_for(page, target).first.focus(timeout=timeout_ms)
            return located

        with session.exclusive(doing):
            located = self._call(session, focus, timeout_ms)
            performed = session.perform(action, queue_s=QUEUE_WAIT_S)
        return _acted(located, performed)

    def fill(self, session_id: str | None, target: Target, value: str, *, clear: bool = True,
             secrets: dict[str, str] | None = None, timeout_ms: int = 5000) -> Acted:
        text, typing = _typing(value, secrets)
        session = self._agent(session_id)
        with session.exclusive("a page fill"):  # click, clear and type land in the same field
            located = self._locate(session, target, timeout_ms, "typing")
            steps = [session.perform(_on_display(Click, located), queue_s=QUEUE_WAIT_S)]
            if clear:
                steps.append(session.perform(Key(keys=["ctrl+a", "BackSpace"]), queue_s=QUEUE_WAIT_S))
            typed = session.perform(typing, queue_s=QUEUE_WAIT_S) if typing is not None else None

        async def landed(pages: Pages) -> bool:
            page = await pages.need_front()
            try:
                return await locator_for(page, target).first.input_value(timeout=2000) == text
            except Exception:
                return False  # not a form field: nothing to compare with

        acted = _acted(located, *steps, *([typed] if typed else []))
        acted.verified = self._call(session, landed)
        # The typed text holds the secrets: the record of what ran shows the placeholders instead.
        acted.executed = [argv for step in steps for argv in step.executed] + \
            ([["xdotool", "type", value]] if typed else [])
        return acted

    def select(self, session_id: str | None, target: Target, option: str, timeout_ms: int = 5000) -> Acted:
        """Find the <select> and scroll it into view (the answer carries its pixel), then choose
        through DevTools: a click would open Chromium's own options popup, which no pixel of the page
        reaches reliably. The answer says ``dispatched: "devtools"``."""
        session = self._agent(session_id)

        async def choose(pages: Pages) -> bool:
            page = await pages.need_front()
            element = locator_for(page, target).first
            options = await element.evaluate(_OPTIONS, timeout=timeout_ms)
            if options is None:
                raise Refused(f"{target.describe()} is not a <select>; fill or click it instead")
            values = ([v for v, _ in options if v == option]
                      or [v for v, label in options if label.strip() == option.strip()])
            if not values:
                listed = ", ".join(f"{label!r} ({value!r})" for value, label in options[:50])
                raise Refused(f"{target.describe()} has no option {option!r} by value or label; its options: "
                                 f"{listed or 'none'}")
            await element.select_option(value=values[0], timeout=timeout_ms)
            return await element.input_value(timeout=timeout_ms) == values[0]

        with session.exclusive("a page select"):
            located = self._locate(session, target, timeout_ms, "click")
            verified = self._call(session, choose, timeout_ms)
        acted = _acted(located)
        acted.dispatched = "devtools"
        acted.verified = verified
        return acted

    def upload(self, session_id: str | None, target: Target, files: list[UploadFile], timeout_ms: int = 5000) -> Acted:
        """Hand files to a file input through DevTools: the system file chooser is a window no
        pixel action could fill in reliably, and the files come from the caller, not the desktop."""
        payloads = []
        total = 0
        for f in files:
            try:
                data = base64.b64decode(f.content_base64, validate=True)
            except ValueError:
                raise InvalidAction(f"files: {f.name!r} is not valid base64") from None
            total += len(data)
            payloads.append({"name": safe_file_name(f.name), "mimeType": "application/octet-stream", "buffer": data})
            if total > MAX_UPLOAD_BYTES:
                raise UploadTooLarge(f"files: over {MAX_UPLOAD_BYTES} bytes in all (the limit); nothing was "
                                     "handed over")

        async def hand_over(element) -> bool:
            await element.set_input_files(payloads, timeout=timeout_ms)
            # What the input holds now: a page script may have cleared or replaced the files.
            held = await element.evaluate(_FILE_NAMES, timeout=timeout_ms)
            return held == [p["name"] for p in payloads]

        return self._by_devtools(session_id, target, timeout_ms, "upload", hand_over)


def check_dialog_mode(mode: str):
    try:
        return dialog_mode(mode)
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None


# The names of the files an <input type=file> holds, or null for any other element.
_FILE_NAMES = "e => e.files ? Array.from(e.files).map(f => f.name) : null"
# A <select>'s options as [value, label] pairs, or null for any other element.
_OPTIONS = "e => e.tagName === 'SELECT' ? Array.from(e.options).map(o => [o.value, o.label]) : null"


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _on_display(kind, located: Located, **fields):
    """The action at the element's pixel, or a typed refusal when that pixel is off the display
    (a window moved partly off-screen): the element cannot be reached by real input there."""
    try:
        return kind(x=located.x, y=located.y, **fields)
    except ValidationError:
        raise ElementNotFound(f"the element's centre ({located.x}, {located.y}) is off the {SCREEN_WIDTH}x"
                              f"{SCREEN_HEIGHT} display; move its window into view first") from None


def _typing(value: str, secrets: dict[str, str] | None) -> tuple[str, Type | None]:
    """The text ``value`` types (its placeholders filled) and the action typing it (None for no
    text); refused (InvalidAction) before anything runs for an unknown placeholder or a character
    the keyboard cannot type."""
    try:
        text = fill_placeholders(value, secrets or {})
    except UnknownPlaceholder as exc:
        raise InvalidAction(str(exc)) from None
    try:
        return text, Type(text=text) if text else None
    except ValidationError as exc:
        raise InvalidAction(describe_validation(exc).replace("text:", "value:", 1)) from None


def _at(located: Located, position: Position | None, what: str) -> Located:
    """The element's pixel moved to ``position`` inside its box (pure; the centre when None)."""
    if position is None:
        return located
    try:
        x, y = point_in(located.box, position)
    except ValueError as exc:
        raise InvalidAction(f"{what}: {exc}") from None
    return Located(x, y, located.box, located.matches, located.covered_by)


def _towards(distance: int, step: int) -> int:
    """``step`` px in the direction of ``distance`` (pure; forward when there is none)."""
    return -step if distance < 0 else step


def _shifted(located: Located, dx: int, dy: int) -> Located:
    """The same element's pixel moved by (dx, dy) (pure)."""
    return Located(located.x + dx, located.y + dy, located.box, located.matches, located.covered_by)


def _acted(located: Located, *steps: Performed) -> Acted:
    return Acted(x=located.x, y=located.y, box=located.box, matches=located.matches,
                 executed=[argv for step in steps for argv in step.executed],
                 settle_ms=sum(step.settle_ms for step in steps),
                 element=next((step.element for step in steps if step.element is not None), None))
