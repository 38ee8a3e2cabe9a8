"""What an input set in motion in the browser, and when its effect is on the screen.

The display's damage says when something was painted, never that nothing will be: a click whose
handler fetches and then repaints shows nothing for as long as the fetch takes. Chromium can say
more. After an input, the page in front has handled it once it has produced two frames (input is
dispatched at the start of a frame, before its animation-frame callbacks; the second callback runs
once the first frame, with the input's effect, has gone to the compositor). What the input started
is in the session's record: the requests begun since (wait for their responses, bounded, then for
the frames that follow), a navigation among them (its document request, then the new page's frames), a dialog
(the effect itself: answer at once; a page with a dialog open produces no frames).

Typing is done when the page has taken the last key, not when the keys were sent: Chromium reads
X key events at its own pace (~1.4 ms a key here, so 20,000 characters sent in 2.6 s arrive over
~28 s). Before a ``type``, ``count_input(page, "keys")`` starts counting the key releases the page's
frames see (the characters'; modifiers not counted), and ``arrived`` waits until they are all there.
A click on the page is counted the same way (``"presses"``: its pointer releases): on a loaded
machine the X event can reach the page after the frames asked for once the click was sent, and two
frames that ran before the click said nothing about it (CI saw a click whose request started after
its wait had ended: answered "frame", the change not yet shown).

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
# Two frames of the page in front, answered with when its document began (performance.timeOrigin, ms
# since the epoch): a navigation's answer must come from the new document, not the one it replaces.
_TWO_FRAMES = ("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame("
               "() => done(performance.timeOrigin))))")
# A counter of the key (or pointer) releases a frame sees, kept in a closure (nothing of it on the
# page's window), removed once the input is over. One per frame: a key pressed in an iframe is seen there.
_COUNT_INPUT = """([type, characters]) => {
  const modifiers = new Set(['Shift', 'Control', 'Alt', 'AltGraph', 'Meta', 'CapsLock', 'NumLock']);
  let seen = 0;
  const count = event => { if (!characters || !modifiers.has(event.key)) seen++; };
  addEventListener(type, count, true);
  return { seen: () => seen, stop: () => removeEventListener(type, count, true) };
}"""
# What is counted of each kind of input: the event, and whether only characters count.
COUNTED = {"keys": ("keyup", True), "presses": ("pointerup", False)}
MAX_FRAMES = 16           # frames counted in; a page with more is counted in its first ones
FIRST_KEY_MS = 50         # no key seen this long after the last was sent: they went elsewhere (the address bar);
                          # giving up early costs nothing: the settle then judges as before it counted keys
FIRST_PRESS_MS = 1000     # a click on an element of the page not seen by it this long after it was sent: it went
                          # elsewhere (a native popup took it); the settle then judges as before it counted
COMMIT_MS = 1000          # a navigation whose request has ended shows its new document within this, or never
                          # will (a download, a 204): its answer then comes from the page as it is
KEYS_STALL_MS = 3000      # keys seen, then none for this long: the rest go where the page does not see
                          # (1 s was too short: CI saw Chromium pause longer inside a 20,000-character text)


@dataclass(frozen=True)
class InputMark:
    """Where the session's record stood just before an input: what comes after is the input's."""

    network_seq: int
    dialog_seq: int
    at_ms: float  # the wall clock, as a document's performance.timeOrigin counts it


def input_mark(record: PageRecord) -> InputMark:
    return InputMark(record.network.last_seq, record.dialogs.last_seq, time.time() * 1000)


def older_document(began_ms, mark: InputMark, navigation: tuple[int, float | None] | None,
                   network_deadline: float, now: float) -> bool:
    """Whether the frames just counted came from the document a navigation the input started is
    replacing, and its new one is still to be waited for (pure). CI saw a click on a link answered
    with the old page: the document's response had arrived, the new document not committed yet, and
    the old one went on producing frames. Waited for at most until the input's network bound, or
    COMMIT_MS after the navigation's request ended (a download, a 204 never commit)."""
    if navigation is None or type(began_ms) not in (int, float) or began_ms >= mark.at_ms:
        return False
    _, ended_at = navigation
    return now < network_deadline or (ended_at is not None and now - ended_at < COMMIT_MS / 1000)


async def after_input(tabs: Tabs, record: PageRecord, recorder: Recorder, mark: InputMark,
                      budget_ms: int) -> SettledBy:
    """Wait until the browser has shown what the input since ``mark`` set in motion, at most
    ``budget_ms``; what decided it."""
    deadline = time.monotonic() + budget_ms / 1000
    network_deadline = time.monotonic() + min(budget_ms, NETWORK_WAIT_MS) / 1000
    # Requests the input started may already be answered (while its presses were counted).
    started = [entry["resource_type"] for entry in record.network.since(mark.network_seq)]
    waited_for: SettledBy = "navigation" if "document" in started else "network" if started else "frame"
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
        if older_document(frames.result(), mark, recorder.main_navigation(mark.network_seq), network_deadline,
                          time.monotonic()):
            await asyncio.sleep(POLL_S)
            continue
        # The frames may have run handlers that started requests: those are the input's too.
        if not recorder.awaiting_response(mark.network_seq) or time.monotonic() >= network_deadline:
            return waited_for


@dataclass
class InputCount:
    """The counters of the front page's frames, from before a ``type`` or a click."""

    counters: list
    kind: Literal["keys", "presses"] = "keys"


async def count_input(page, kind: Literal["keys", "presses"]) -> InputCount | None:
    """Start counting the keys (or pointer presses) ``page`` (the tab in front) takes; None when
    there is no page to count in."""
    if page is None:
        return None
    counters = []
    for frame in page.frames[:MAX_FRAMES]:
        try:
            counters.append(await frame.evaluate_handle(_COUNT_INPUT, list(COUNTED[kind])))
        except Exception:  # a frame going away, a detached one: counted without it
            continue
    return InputCount(counters, kind) if counters else None


async def _seen(count: InputCount) -> int | None:
    total = 0
    for counter in count.counters:
        try:
            total += await counter.evaluate("c => c.seen()")
        except Exception:  # its frame navigated away (an Enter that submits): the rest is the page's new life
            return None
    return total


async def stop_counting(count: InputCount) -> None:
    """The count's listeners removed from the page and its handles let go (``arrived`` does it once
    the input is over; whoever drops a count unused does it too)."""
    for counter in count.counters:
        try:
            await counter.evaluate("c => c.stop()")
            await counter.dispose()
        except Exception:
            pass


# Counters whose removal waits for a dialog to close (a page with a dialog open runs no script):
# kept here so that the tasks are not collected before they ran.
_STOPPING: set[asyncio.Future] = set()


async def arrived(count: InputCount, expected: int, budget_ms: int, record: PageRecord | None = None,
                  mark: InputMark | None = None) -> bool | None:
    """Wait until the page has taken ``expected`` keys (or presses) since ``count_input``: True
    when it has, False when the bound passed with some still arriving, None when they went where
    the page does not see them (none at all, or they stopped coming) or the page navigated meanwhile.

    A dialog the input opened (in ``record`` since ``mark``) ends the wait at once, True: the page
    took the input (its handler opened the dialog), and no script of the page runs again until the
    dialog is closed, the counter's own read included (it would wait out the whole bound)."""
    first_ms = FIRST_KEY_MS if count.kind == "keys" else FIRST_PRESS_MS
    start = time.monotonic()
    deadline = start + budget_ms / 1000
    last, last_change = 0, start

    def dialog_opened() -> bool:
        return record is not None and mark is not None and bool(record.dialogs.since(mark.dialog_seq))
    try:
        while True:
            reading = asyncio.ensure_future(_seen(count))
            while not reading.done() and not dialog_opened() and time.monotonic() < deadline:
                await asyncio.wait({reading}, timeout=POLL_S)
            if not reading.done():
                reading.cancel()
                return True if dialog_opened() else False
            seen, now = reading.result(), time.monotonic()
            if dialog_opened():
                return True
            if seen is None:
                return None
            if seen >= expected:
                return True
            if seen != last:
                last, last_change = seen, now
            elif now - last_change > (KEYS_STALL_MS if seen else first_ms) / 1000:
                return None
            if now >= deadline:
                return False
            await asyncio.sleep(POLL_S * 2)
    finally:
        if dialog_opened():
            stopping = asyncio.ensure_future(stop_counting(count))
            _STOPPING.add(stopping)
            stopping.add_done_callback(_STOPPING.discard)
        else:
            await stop_counting(count)
