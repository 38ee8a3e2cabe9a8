"""What an input set in motion in the browser, and when its effect is on the screen.

The display's damage says when something was painted, never that nothing will be: a click whose
handler fetches and then repaints shows nothing for as long as the fetch takes. Chromium can say
more. After an input, the page in front has handled it once it has produced two frames (input is
dispatched at the start of a frame, before its animation-frame callbacks; the second callback runs
once the first frame, with the input's effect, has gone to the compositor). What the input started
is in the session's record: the requests begun since (wait for their responses, bounded, then for
the frames that follow), a navigation among them (its document request, then the new page's frames), a dialog
(the effect itself: answer at once; a page with a dialog open produces no frames).

What this does not see: a timer that changes the page later with no request (``setTimeout``) and
the effects of other windows. The session's settle on damage still follows (desktop.x11.screen).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from desktop.browser.record import PageRecord, Recorder
    from desktop.browser.tabs import Tabs

SettledBy = Literal["frame", "network", "navigation", "dialog", "timeout"]
NETWORK_WAIT_MS = 2000  # the longest wait for requests an input started (a long poll never ends)
POLL_S = 0.01
_TWO_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


@dataclass(frozen=True)
class InputMark:
    """Where the session's record stood just before an input: what comes after is the input's."""

    network_seq: int
    dialog_seq: int


def input_mark(record: PageRecord) -> InputMark:
    return InputMark(record.network.last_seq, record.dialogs.last_seq)


async def after_input(tabs: Tabs, record: PageRecord, recorder: Recorder, mark: InputMark,
                      budget_ms: int) -> SettledBy:
    """Wait until the browser has shown what the input since ``mark`` set in motion, at most
    ``budget_ms``; what decided it."""
    deadline = time.monotonic() + budget_ms / 1000
    network_deadline = time.monotonic() + min(budget_ms, NETWORK_WAIT_MS) / 1000
    waited_for: SettledBy = "frame"
    while True:
        if record.dialogs.since(mark.dialog_seq):
            return "dialog"
        pending = recorder.awaiting_response(mark.network_seq)
        if pending and time.monotonic() < network_deadline:
            waited_for = "navigation" if "document" in pending or waited_for == "navigation" else "network"
            await asyncio.sleep(POLL_S)
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        page = await tabs.front()
        if page is None:
            return waited_for
        frames = asyncio.ensure_future(page.evaluate(_TWO_FRAMES))
        # A dialog that opens meanwhile stops the page's frames: it is looked for while they come.
        while not frames.done() and time.monotonic() < deadline and not record.dialogs.since(mark.dialog_seq):
            await asyncio.wait({frames}, timeout=min(POLL_S * 5, max(0.0, deadline - time.monotonic())))
        if not frames.done():
            frames.cancel()
            return "dialog" if record.dialogs.since(mark.dialog_seq) else "timeout"
        if frames.exception() is not None:  # the document went away under the call: a navigation
            waited_for = "navigation"
            await asyncio.sleep(POLL_S)
            continue
        # The frames may have run handlers that started requests: those are the input's too.
        if not recorder.awaiting_response(mark.network_seq) or time.monotonic() >= network_deadline:
            return waited_for
