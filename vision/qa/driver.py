"""How every QA verb reaches the desktop: the session checked before a run is made, work retried
on a transient failure, a page loaded, an element found in the DOM and else on the screen.

``Driver`` is made once by ``QaService`` over the desktop service and shared by the jobs
(``vision.qa.verbs``, ``vision.qa.flow``, ``vision.qa.visual``): its retry level is one per thread
across all of them. It reaches the desktop only through ``DesktopService`` (``wait_ready`` after a
heal) and its ``PageService`` (``DesktopService.pages``), never a session's stack.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from desktop.errors import (
    GlassdeskError,
    InvalidSelector,
    PageTimeoutError,
    PageUnavailable,
    SessionBusy,
    SessionUnavailable,
)
from desktop.models import Target
from desktop.session.manager import Session
from vision.evidence.qa_runs import RunWriter, safe_stem
from vision.models.qa import Artifact

if TYPE_CHECKING:
    from desktop.service.desktop import DesktopService

log = logging.getLogger("glassdesk.qa")
T = TypeVar("T")

ATTEMPTS = 3  # a step is tried at most this often on a transient failure
HEAL_WAIT_S = 15  # how long a retry waits for a healing browser or desktop to be ready again
DOM_FIRST_MS = 1500  # a text target's share of the step's time in the DOM before OCR takes over
POLL_S = 0.1  # how often a condition that must come true is looked at again
# ...in the first second of its wait, when it is one DevTools read: most conditions come true then,
# and a look every 100 ms answered up to 100 ms late (a passing assertion's median was 9 or 105 ms
# after its condition held, as the poll's phase fell; make bench). Past that second, POLL_S.
FIRST_POLL_S, FIRST_POLLS_S = 0.02, 1.0
CONSOLE_LIMIT = 200  # console lines kept with a test case

# What the jobs are given of QaService's run keeping (vision.qa.service): its ``_run``, (verb, name,
# session, request[, secrets]) -> the session held and the run made around a verb's work; and its
# ``_finish``, (run, status, result, case) -> the answer as the evidence keeps it.
StartRun = Callable[..., AbstractContextManager[RunWriter]]
FinishRun = Callable[[RunWriter, str, Any, dict], Any]


def poll_pause(started: float) -> float:
    """How long to wait before looking at a DOM condition again, the wait having begun at ``started``
    (time.monotonic)."""
    return FIRST_POLL_S if time.monotonic() - started < FIRST_POLLS_S else POLL_S


@dataclass(frozen=True)
class Miss:
    """Not on the screen, and why (what OCR read instead, how close the image came)."""

    why: str

    def __bool__(self) -> bool:
        return False


class AssertionFailed(Exception):
    """What a step asserts does not hold: a test failure, never retried. ``detail``: what was
    seen, kept as the failed step's detail (a visual comparison's answer, its diff image)."""

    def __init__(self, message: str, detail: dict | None = None):
        super().__init__(message)
        self.detail = detail


class StepFailed(Exception):
    """A step that cannot be done (nothing to click, no model): a failure, not retried. ``detail``:
    what the failed step keeps on its record (a heal and its images)."""

    def __init__(self, message: str, detail: dict | None = None):
        super().__init__(message)
        self.detail = detail


def _transient(exc: BaseException, navigation: bool) -> bool:
    """Worth another try: the browser or the desktop healing, a target detached under the
    operation (page_unavailable), the session's own queue; a navigation that timed out."""
    if isinstance(exc, (PageUnavailable, SessionUnavailable, SessionBusy)):
        return True
    return navigation and isinstance(exc, PageTimeoutError)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, GlassdeskError):
        return f"{exc.code}: {exc.message}"
    return str(exc) or type(exc).__name__


class Driver:
    """The desktop and its pages as every QA job reaches them, and the per-thread retry level."""

    def __init__(self, desktops: DesktopService):
        self.desktops = desktops
        self.pages = desktops.pages
        self._retrying_here = threading.local()

    def shot(self, run: RunWriter, session: Session, stem: str, **about: Any) -> Artifact:
        """The display now, stored as evidence."""
        return run.artifact(stem, self.desktops.screenshot(session.id).png, **about)

    def acting(self, session_id: str | None, url: str | None = None) -> Session:
        """The session, if an agent may act on it now and ``url`` may be opened: checked before a
        run is created, so a refusal creates nothing."""
        if url is not None:
            self.desktops.check_url(url)
        session = self.desktops.session(session_id)
        self.desktops.check_agent(session.id)
        if url is not None:
            self.desktops.check_url(url, session)
        return session

    def retrying(self, session: Session, work: Callable[[], T], *, navigation: bool = False,
                 deadline: float | None = None) -> tuple[T, int]:
        """``work()``, tried up to ATTEMPTS times on a transient failure, never past ``deadline``;
        (its value, attempts). Retries happen at one level only: inside another ``retrying`` (a
        flow step's look for its element) the work is tried once and the outer level tries again,
        so a step is attempted ATTEMPTS times, not ATTEMPTS squared."""
        if getattr(self._retrying_here, "active", False):
            return work(), 1
        self._retrying_here.active = True
        try:
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    return work(), attempt
                except (AssertionFailed, StepFailed):
                    raise
                except GlassdeskError as exc:
                    out_of_time = deadline is not None and time.monotonic() >= deadline
                    if attempt == ATTEMPTS or out_of_time or not _transient(exc, navigation):
                        raise
                    log.info("transient failure (attempt %d of %d): %s", attempt, ATTEMPTS, _reason(exc))
                    self._await_ready(session, deadline, exc.retry_after)
            raise AssertionError("unreachable")
        finally:
            self._retrying_here.active = False

    def _await_ready(self, session: Session, deadline: float | None, retry_after: float | None) -> None:
        """Wait (bounded) until the session and its browser are ready again after a heal."""
        limit = time.monotonic() + min(HEAL_WAIT_S, retry_after or HEAL_WAIT_S)
        if deadline is not None:
            limit = min(limit, deadline)
        time.sleep(min(0.25, max(0.0, limit - time.monotonic())))
        self.desktops.wait_ready(session.id, limit - time.monotonic())

    def check_selectors(self, session: Session, selectors: list[str]) -> None:
        """invalid_selector, before the run is made, for a CSS selector the browser cannot parse:
        one DevTools call, whatever page is loaded (parsing does not depend on it). Only the
        browser knows its selector syntax (Playwright's extensions included); if it cannot answer
        now (a heal, a dialog), the verb meets the selector as it runs."""
        if not selectors:
            return
        try:
            self.pages.boxes(session.id, list(dict.fromkeys(selectors)), "page")
        except InvalidSelector:
            raise
        except GlassdeskError:
            pass

    def navigate(self, session: Session, url: str, deadline: float) -> dict:
        """Load ``url``, retried on a transient failure, all of it by ``deadline``."""
        done, _ = self.retrying(session, lambda: self.pages.navigate(session.id, "goto", url, "load",
                                                                     _ms_left(deadline)),
                                navigation=True, deadline=deadline)
        return done

    def find(self, session: Session, target: Target, deadline: float, *, visible: bool) -> dict:
        """The element in the DOM, else (a text target) on the screen by OCR."""
        remaining = max(1, int((deadline - time.monotonic()) * 1000))
        state = "visible" if visible else "attached"
        dom_ms = min(remaining, DOM_FIRST_MS) if target.text is not None else remaining
        found, _ = self.retrying(session, lambda: self.pages.probe(session.id, target, state, dom_ms),
                                 deadline=deadline)
        found["how"] = "dom" if found["exists"] else None
        if target.text is None or (found["exists"] and (found["visible"] or not visible)):
            return found
        spot = self.on_screen(session, deadline, text=target.text)
        if not spot:
            found["miss"] = spot.why
            return found
        return {"exists": True, "visible": True, "matches": 1, "how": "ocr", "text": target.text, "value": None,
                "box": {"x": spot.box[0], "y": spot.box[1], "width": spot.box[2] - spot.box[0],
                        "height": spot.box[3] - spot.box[1]}}

    def on_screen(self, session: Session, deadline: float, *, text: str | None = None,
                  template: bytes | None = None, confidence: float = 0.9):
        """Where the text (OCR) or the image is on the display, looked for until ``deadline`` (at
        least once); a Miss (false, with what was seen) when it never showed."""
        from vision.qa.screen_find import NotOnScreen, find_image_on_screen, find_text_on_screen

        while True:
            png = self.desktops.screenshot(session.id).png
            try:
                if text is not None:
                    return find_text_on_screen(png, text)
                if template is None:
                    raise ValueError("on_screen looks for a text or an image: neither was given")
                return find_image_on_screen(png, template, confidence)
            except NotOnScreen as exc:
                if time.monotonic() >= deadline:
                    return Miss(str(exc))
            time.sleep(POLL_S)


# ---------------------------------------------------------------------------------------- helpers


def _ms_left(deadline: float) -> int:
    """The milliseconds to ``deadline``, rounded up: work given them ends at or past it."""
    return max(1, math.ceil((deadline - time.monotonic()) * 1000))


def _console_line(entry: dict) -> dict:
    return {"level": entry.get("level"), "text": str(entry.get("text", ""))[:2000], "url": entry.get("url") or "",
            "line": entry.get("line") or 0}


def _stem(name: str) -> str:
    return safe_stem(name, 60)
