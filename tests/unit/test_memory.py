"""The server's periodic malloc_trim (vision.app.memory), without X: how often, and that it runs."""

from __future__ import annotations

import time

from vision.app.memory import TRIM_S, Trimmer, limit_arenas, trim_interval_s


def test_the_interval_is_read_from_the_environment_and_a_bad_one_falls_back():
    assert trim_interval_s({}) == TRIM_S
    assert trim_interval_s({"GLASSDESK_MALLOC_TRIM_S": "5"}) == 5.0
    assert trim_interval_s({"GLASSDESK_MALLOC_TRIM_S": "0"}) == 0.0
    assert trim_interval_s({"GLASSDESK_MALLOC_TRIM_S": "-3"}) == 0.0  # never
    assert trim_interval_s({"GLASSDESK_MALLOC_TRIM_S": "soon"}) == TRIM_S


def test_the_trimmer_trims_on_its_thread_until_stopped_and_zero_starts_none():
    trimmer = Trimmer(0.01).start()
    deadline = time.monotonic() + 10
    while trimmer.trims < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    trimmer.stop()
    assert trimmer.trims >= 3  # glibc's malloc_trim, called for real (this machine's libc is glibc)
    stopped = trimmer.trims
    time.sleep(0.05)
    assert trimmer.trims == stopped
    off = Trimmer(0).start()
    assert off._thread is None
    off.stop()


def test_the_arenas_are_limited_unless_the_environment_says_how_many(monkeypatch):
    # glibc's mallopt is looked up for real, and its call recorded rather than made: a test must
    # not change the allocator of the worker it runs in (every later test would run with it).
    import vision.app.memory as memory

    found, calls = memory._libc_call("mallopt", []), []
    assert found is not None  # this machine's libc is glibc
    monkeypatch.setattr(memory, "_libc_call", lambda name, argtypes: lambda *args: calls.append((name, args)) or 1)
    assert limit_arenas({"MALLOC_ARENA_MAX": "4"}) is False and calls == []  # the operator's word stands
    assert limit_arenas({}) is True and calls == [("mallopt", (memory.M_ARENA_MAX, memory.ARENAS))]
