"""The Desktop port: the things a run needs of a desktop, and nothing else.

The vision loop drives a ``Desktop``; a local ``desktop.session.manager.Session`` is one, a fake in the
tests is another (frames in, actions recorded), and a session in another container or pod can be a
third. Everything on this surface speaks display pixels and glassdesk's typed errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from desktop.actions import _Action
from desktop.frame import Frame
from desktop.models import ElementAt, Marks, NativeElement


@dataclass
class Performed:
    """The outcome of one action: what ran, how long it took, and the settled screen after it."""

    executed: list[list[str]]
    duration_ms: float
    settle_ms: int
    frame: Frame
    settled: bool = True  # False: the screen was still changing when the settle wait timed out
    # What ended the wait (desktop.session.settle.InputSettle.settle_after_input): damage, frame,
    # network, navigation, dialog, timeout; none when the action was not settled.
    settled_by: str = "damage"
    # A pointer action with the browser in front: what was under its pixel just before it ran
    # (desktop.browser.hit); None elsewhere, or when the browser could not say in time.
    element: ElementAt | None = None
    # Whether the screen changed from the action until the answer (the display's damage; a dialog or
    # a new page counts as a change): False is an action with no visible effect. None: not known.
    changed: bool | None = None
    # A pointer action on a native window (the browser not in front): the accessibility node under
    # its pixel just before it ran (desktop.x11.atspi); None elsewhere, or when nothing there answers.
    native: NativeElement | None = None
    # What the action answers besides its effect (a launched program's pid), else None.
    result: dict[str, Any] | None = None


@runtime_checkable
class Desktop(Protocol):
    id: str
    # True while a run drives this desktop: it does not expire meanwhile, and direct actions from
    # other callers are refused rather than interleaved with the run's.
    busy: bool
    # The thread of the run driving it (None: none): its own page operations pass the busy guard.
    run_thread: int | None

    def capture(self) -> Frame:
        """The screen now. Raises ScreenshotFailed / SessionUnavailable."""

    def perform(self, action: _Action) -> Performed:
        """Run one input action and wait for the screen to settle."""

    def cursor(self) -> tuple[int, int]:
        """The pointer position in display pixels. Raises ActionFailedError."""

    def page_url(self) -> str | None:
        """The URL of the browser tab in front, or None when it cannot be read."""

    def heals(self) -> list[str]:
        """The restarts this desktop went through that lost what a run relies on, oldest first:
        ``chromium`` (the browser restarted: its tabs and page are gone) or ``desktop`` (the whole
        desktop restarted). Restarts of the live view alone lose nothing and are not listed."""

    def reset(self) -> None:
        """Back to a fresh state on the same display: programs started on it end, the browser
        restarts on a clean profile at about:blank. Raises SessionUnavailable."""


@runtime_checkable
class Marking(Protocol):
    """A desktop that numbers its controls (set-of-marks); one that cannot has none, or ``marks = None``."""

    def marks(self, limit: int, image: bool) -> Marks:
        """The controls on the screen, numbered, at most ``limit``; with the marked screenshot if ``image``."""
