"""A named asyncio event loop on a daemon thread, for the parts of desktop/ that speak asyncio
(Playwright's driver, the network-policy proxy) while their callers are plain threads.

``run`` waits for a coroutine with a bound; when the bound runs out the work is cancelled and
``on_timeout(seconds)`` is raised. A TimeoutError the work raised itself passes through unchanged
(since Python 3.11 it is the same class as the future's own), so callers can tell "the work said
it timed out" from "the loop did not answer".
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Generic, TypeVar


class BackgroundLoop:
    def __init__(self, name: str, on_timeout: Callable[[float], Exception]):
        self.loop = asyncio.new_event_loop()
        self._on_timeout = on_timeout
        threading.Thread(target=self.loop.run_forever, name=name, daemon=True).start()

    def run(self, coro: Coroutine, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            if future.done():
                raise  # the work's own timeout, not ours
            future.cancel()
            raise self._on_timeout(timeout) from None

    def call_soon(self, callback: Callable[[], Any]) -> None:
        self.loop.call_soon_threadsafe(callback)


Loop = TypeVar("Loop", bound=BackgroundLoop)


class Lazy(Generic[Loop]):
    """One BackgroundLoop (or subclass) per process, made on first use from any thread."""

    def __init__(self, make: Callable[[], Loop]):
        self._make = make
        self._value: Loop | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Loop:
        with self._lock:
            if self._value is None:
                self._value = self._make()
            return self._value
