"""desktop.browser.settle against stand-ins for the page's counters and the session's record:
a click the page has not yet seen is waited for, and a request the input started that was answered
while it was counted still says what decided the wait."""

from __future__ import annotations

import asyncio
import time

from desktop.browser import settle
from desktop.browser.record import PageRecord
from desktop.browser.record import Recorder as PageRecorder
from desktop.browser.settle import InputCount, after_input, arrived, input_mark, older_document


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

    def main_navigation(self, since_seq: int):
        return None


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


class Replaced:
    """The page in front while a navigation commits: the old document's frames until ``commit_s``,
    the new one's after (their performance.timeOrigin)."""

    def __init__(self, old_ms: float, commit_s: float):
        self.old_ms, self.commit_at = old_ms, time.monotonic() + commit_s

    async def evaluate(self, script: str):
        return time.time() * 1000 if time.monotonic() >= self.commit_at else self.old_ms


class Navigating(Recorder):
    def __init__(self, ended_at: float | None):
        self.ended_at = ended_at

    def main_navigation(self, since_seq: int):
        return (since_seq + 1, self.ended_at)


def test_a_navigation_is_answered_from_its_new_document_not_the_frames_of_the_old_one():
    record = PageRecord()
    old = time.time() * 1000 - 5000
    mark = input_mark(record)
    record.network.add({"resource_type": "document", "url": "http://127.0.0.1/next"})

    class Committing(Tabs):
        front_page = Replaced(old, commit_s=0.3)

        async def front(self):
            return self.front_page
    start = time.monotonic()
    assert asyncio.run(after_input(Committing(), record, Navigating(ended_at=None), mark, 3000)) == "navigation"
    assert time.monotonic() - start >= 0.3  # the old document's frames did not end the wait


def test_the_wait_for_a_new_document_is_bounded_when_none_comes():
    mark = input_mark(PageRecord())
    old, now = mark.at_ms - 5000, time.monotonic()
    later = now + 10
    # frames of a document from after the input: nothing to wait for
    assert not older_document(mark.at_ms + 10, mark, (1, None), later, now)
    # no navigation of the main frame, or a page that cannot say: nothing to wait for
    assert not older_document(old, mark, None, later, now)
    assert not older_document(True, mark, (1, None), later, now)
    # the old document, within the input's network bound: wait
    assert older_document(old, mark, (1, None), later, now)
    # past it: only while the navigation's request ended less than COMMIT_MS ago (a download never commits)
    assert older_document(old, mark, (1, now - 0.1), now - 1, now)
    assert not older_document(old, mark, (1, now - settle.COMMIT_MS / 1000 - 0.1), now - 1, now)
    assert not older_document(old, mark, (1, None), now - 1, now)


class Request:
    def __init__(self, resource_type: str, navigation: bool, main: bool):
        self.url, self.method, self.resource_type = "http://127.0.0.1/x", "GET", resource_type
        self._navigation = navigation
        self.frame = type("Frame", (), {"parent_frame": None if main else object()})()

    def is_navigation_request(self) -> bool:
        return self._navigation

    timing = {}


def test_the_recorder_knows_the_main_frame_s_navigations_and_when_they_ended():
    recorder = PageRecorder(context=None, record=PageRecord())
    mark = recorder.record.network.last_seq
    recorder._on_request(Request("document", navigation=True, main=False))  # an iframe's
    recorder._on_request(Request("fetch", navigation=False, main=True))
    assert recorder.main_navigation(mark) is None
    page = Request("document", navigation=True, main=True)
    recorder._on_request(page)
    seq, ended = recorder.main_navigation(mark)
    assert ended is None and seq == recorder.record.network.last_seq
    recorder._on_request_finished(page)
    assert recorder.main_navigation(mark)[1] is not None
    assert recorder.main_navigation(seq) is None  # one started before the mark is not the input's
