"""A small in-process event bus: the loop publishes from its thread, SSE endpoints consume.

Subscribers are asyncio queues bound to their event loop; publishing is thread-safe. The last
events are kept so a console that connects mid-run sees where things stand.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from typing import Any


class EventBus:
    def __init__(self, keep: int = 500):
        self._subscribers: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = set()
        self._recent: deque[dict] = deque(maxlen=keep)
        self._seq = itertools.count(1)
        self._lock = threading.Lock()

    def publish(self, kind: str, **data: Any) -> dict:
        with self._lock:
            event = {"seq": next(self._seq), "kind": kind, "ts": time.time(), **data}
            self._recent.append(event)
            subscribers = list(self._subscribers)
        for loop, queue in subscribers:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            except RuntimeError:  # that event loop has closed
                self._subscribers.discard((loop, queue))
        return event

    def recent(self, after_seq: int = 0) -> list[dict]:
        with self._lock:
            return [e for e in self._recent if e["seq"] > after_seq]

    def subscribe(self) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue(maxsize=10_000)
        with self._lock:
            self._subscribers.add((asyncio.get_running_loop(), queue))
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        with self._lock:
            self._subscribers = {(loop, q) for loop, q in self._subscribers if q is not queue}
