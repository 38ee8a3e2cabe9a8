"""desktop.browser.settle against stand-ins for the page's counters and the session's record:
a click the page has not yet seen is waited for, and a request the input started that was answered
while it was counted still says what decided the wait."""

from __future__ import annotations

import asyncio
import time

from desktop.browser import settle
from desktop.browser.record import PageRecord
from desktop.browser.settle import InputCount, after_input, arrived, input_mark


class Counter:
    """A frame's counter whose page sees the input ``late_s`` after it was made (None: never)."""

    def __init__(self, late_s: float | None, seen: int = 1):
        self.ready_at = None if late_s is None else time.monotonic() + late_s
        self.seen, self.stopped = seen, False

    async def evaluate(self, script: str):
        if "stop" in script:
            self.stopped = True
            return None
        return self.seen if self.ready_at is not None and time.monotonic() >= self.ready_at else 0

    async def dispose(self):
        return None


def test_a_press_that_reaches_the_page_late_is_waited_for_longer_than_a_key():
    late = Counter(late_s=0.3)
    assert asyncio.run(arrived(InputCount([late], "presses"), 1, 2000)) is True
    assert late.stopped  # the page's listener is removed
    # keys give up on the first one much sooner: a type into the address bar is not the page's
    assert asyncio.run(arrived(InputCount([Counter(late_s=0.3)], "keys"), 1, 2000)) is None


def test_a_press_the_page_never_sees_ends_the_wait_at_its_bound(monkeypatch):
    monkeypatch.setattr(settle, "FIRST_PRESS_MS", 100)
    start = time.monotonic()
    assert asyncio.run(arrived(InputCount([Counter(late_s=None)], "presses"), 1, 5000)) is None
    assert time.monotonic() - start < 1.0


class Front:
    async def evaluate(self, script: str):
        return True  # the page's two frames


class Tabs:
    async def front(self):
        return Front()


class Recorder:
    def awaiting_response(self, since_seq: int) -> list[str]:
        return []


def test_a_request_answered_before_the_wait_began_still_decides_it():
    record = PageRecord()
    mark = input_mark(record)
    assert asyncio.run(after_input(Tabs(), record, Recorder(), mark, 1000)) == "frame"
    record.network.add({"resource_type": "fetch", "url": "http://127.0.0.1/slow"})
    assert asyncio.run(after_input(Tabs(), record, Recorder(), mark, 1000)) == "network"
    record.network.add({"resource_type": "document", "url": "http://127.0.0.1/next"})
    assert asyncio.run(after_input(Tabs(), record, Recorder(), mark, 1000)) == "navigation"
    # what came before the input is not the input's
    assert asyncio.run(after_input(Tabs(), record, Recorder(), input_mark(record), 1000)) == "frame"


class Blocked(Counter):
    """A frame's counter once a dialog is open: the page runs no script until it closes."""

    def __init__(self, closed: asyncio.Event):
        super().__init__(late_s=None)
        self.closed = closed

    async def evaluate(self, script: str):
        await self.closed.wait()
        return await super().evaluate(script)


def test_a_dialog_the_click_opened_ends_the_wait_and_the_listener_goes_when_it_closes():
    record = PageRecord()
    mark = input_mark(record)

    async def scenario():
        closed = asyncio.Event()
        counter = Blocked(closed)
        asyncio.get_running_loop().call_later(0.1, lambda: record.dialogs.add({"type": "alert", "message": "Sure?"}))
        # Bounded far below the count's own bound (60 s): without the dialog it would wait that out.
        took = await asyncio.wait_for(arrived(InputCount([counter], "presses"), 1, 60_000, record, mark), 10)
        assert not counter.stopped  # the page cannot run the removal while the dialog is open...
        closed.set()
        await asyncio.sleep(0.05)
        return took, counter.stopped
    took, stopped = asyncio.run(scenario())
    assert took is True  # the dialog is the input's effect
    assert stopped  # ...and it runs once the dialog is closed


def test_a_dialog_from_before_the_input_is_not_its_effect():
    record = PageRecord()
    record.dialogs.add({"type": "alert", "message": "earlier"})
    mark = input_mark(record)
    assert asyncio.run(arrived(InputCount([Counter(late_s=0.1)], "presses"), 1, 2000, record, mark)) is True
    late = Counter(late_s=None)
    settle_first = settle.FIRST_PRESS_MS
    try:
        settle.FIRST_PRESS_MS = 100
        assert asyncio.run(arrived(InputCount([late], "presses"), 1, 2000, record, mark)) is None
    finally:
        settle.FIRST_PRESS_MS = settle_first
