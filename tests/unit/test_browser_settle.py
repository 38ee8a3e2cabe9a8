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
