"""A warm pool: things started before anyone asks for them (a local desktop, a remote session
server), nobody's yet, so that a create claims one in milliseconds instead of starting one in
seconds.

One implementation for every backend: the local SessionManager pools ``DesktopStack``s, the remote
BackendSessions pools session servers (desktop.remote.backends.manager). What an item is, and how
it is made, started, judged dead and stopped, are the owner's callables; the pool keeps the size,
the limit, the one-at-a-time filler, the replacement of what died and the shutdown.

- It fills one start at a time, in the background, so that refilling never takes every core from
  the sessions in use (a start costs about 1.6 CPU-seconds).
- Its items count toward the owner's session limit: it starts one only while the sessions in use
  and the ready items leave a place (``in_use() + len(ready) < limit()``).
- An item that dies while it waits is stopped and replaced (nobody uses it: a new one is simpler
  and cleaner than a repair), and one found dead at a claim is never handed out.
- ``close`` ends a start under way (``abort``) and stops every ready item.

Everything here that reads or changes ``ready``/``starting`` does so holding the owner's lock
(the one ``changed`` is a condition on), so a claim and the owner's own bookkeeping are atomic.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger("glassdesk.pool")

T = TypeVar("T")

# After a pooled item failed to start, the pool waits this long before trying again, rather than
# spend the cores on a start that keeps failing.
WARM_RETRY_S = 10.0


def check_warm(warm: int, max_sessions: int) -> list[str]:
    """The problems of a warm-pool size against the session limit (pure); none when it is fine.
    The pool's sessions count toward the limit, and the default session holds one place."""
    problems = []
    if warm < 0:
        problems.append(f"--warm {warm}: the number of sessions kept started ahead is 0 or more")
    if max_sessions < 1:
        problems.append(f"--max-sessions {max_sessions}: at least 1 (the default session)")
    elif warm > max_sessions - 1:
        problems.append(f"--warm {warm}: warm sessions count toward --max-sessions ({max_sessions}), which also "
                        f"holds the default session: at most {max_sessions - 1}")
    return problems


@dataclass
class Pooled(Generic[T]):
    """An item started ahead, nobody's yet, and when its start finished."""

    item: T
    started_at: float  # time.monotonic()


class WarmPool(Generic[T]):
    """``size`` items kept started ahead (see the module's docstring).

    The callables: ``make()`` the next item, cheap, called holding the lock (so the owner can count
    it, e.g. among its control ports, from the moment it exists); ``start(item)`` the slow part,
    outside the lock, raising when it fails; ``discard(item)`` stops it and removes what it left
    (also after a failed start); ``dead(item)`` why it is dead (empty: alive); ``abort(item)`` ends
    a start under way at shutdown; ``in_use()`` and ``limit()`` the owner's sessions and limit.
    """

    def __init__(self, lock: threading.Lock, *, make: Callable[[], T], start: Callable[[T], None],
                 discard: Callable[[T], None], dead: Callable[[T], list[str]], abort: Callable[[T], None],
                 in_use: Callable[[], int], limit: Callable[[], int], what: str = "desktop",
                 retry_s: float = WARM_RETRY_S):
        self._lock = lock
        self.changed = threading.Condition(lock)  # tells the filler and a waiting claim of changes
        self._make, self._start, self._discard, self._dead, self._abort = make, start, discard, dead, abort
        self._in_use, self._limit = in_use, limit
        self.what = what
        self.retry_s = retry_s
        self.size = 0
        self.ready: list[Pooled[T]] = []
        self.starting: T | None = None  # one at a time
        self._stop = threading.Event()
        self._filler: threading.Thread | None = None

    # ------------------------------------------------------------------ the owner's view

    @property
    def ready_count(self) -> int:
        return len(self.ready)

    def held(self) -> int:
        """The items that hold a place under the limit: ready or starting (holding the lock)."""
        return len(self.ready) + (self.starting is not None)

    def items(self) -> list[T]:
        """Every item that exists now, ready or starting."""
        starting = self.starting
        return [p.item for p in list(self.ready)] + ([starting] if starting is not None else [])

    def notify(self) -> None:
        """Holding the lock: a place under the limit may have changed (a session went or failed)."""
        self.changed.notify_all()

    def resize(self, n: int) -> None:
        """Keep ``n`` items from now on (the owner has checked ``n``); a smaller pool stops what it
        no longer keeps."""
        with self._lock:
            self.size = n
            extra, self.ready = self.ready[n:], self.ready[:n]
            if n and self._filler is None and not self._stop.is_set():
                self._filler = threading.Thread(target=self._fill, name=f"glassdesk-warm-pool-{self.what}",
                                                daemon=True)
                self._filler.start()
            self.changed.notify_all()
        for pooled in extra:
            self._discard(pooled.item)

    def take(self) -> T | None:
        """Holding the lock: a ready item, out of the pool; one found dead is discarded, not handed out."""
        while self.ready:
            pooled = self.ready.pop(0)
            if not self._dead(pooled.item):
                self.changed.notify_all()  # the filler: one to start again
                return pooled.item
            threading.Thread(target=self._discard, args=(pooled.item,), daemon=True).start()
        return None

    def check(self) -> None:
        """The owner's supervisor's look: an item that died is stopped and replaced. Judged outside
        the lock (a remote backend's look may be a request), removed under it."""
        dead = [(p, why) for p in list(self.ready) if (why := self._dead(p.item))]
        if not dead:
            return
        with self._lock:
            dead = [(p, why) for p, why in dead if p in self.ready]
            for pooled, _ in dead:
                self.ready.remove(pooled)
            self.changed.notify_all()
        for pooled, why in dead:
            log.warning("warm pool: a pooled %s died (%s); replacing it", self.what, ", ".join(why))
            self._discard(pooled.item)

    def close(self, join_s: float) -> None:
        """Stop filling, end a start under way and stop every ready item."""
        self._stop.set()
        with self._lock:
            self.changed.notify_all()
            ready, self.ready = self.ready, []
            starting = self.starting
        if starting is not None:  # its start would hold the filler for seconds: end it now
            self._abort(starting)
        for pooled in ready:
            self._discard(pooled.item)
        if self._filler is not None:
            self._filler.join(timeout=join_s)

    # ------------------------------------------------------------------ the filler

    def _wants(self) -> bool:
        return (not self._stop.is_set() and self.starting is None and len(self.ready) < self.size
                and self._in_use() + len(self.ready) < self._limit())

    def _fill(self) -> None:
        """Starts items one at a time while the pool is short of ``size`` and the limit leaves room."""
        while not self._stop.is_set():
            item: T | None
            with self._lock:
                while not self._wants():
                    if self._stop.is_set():
                        return
                    self.changed.wait(1.0)
                item = self.starting = self._make()
            try:
                self._start(item)
            except BaseException as exc:  # noqa: BLE001 - the filler outlives any one start
                self._discard(item)
                with self._lock:
                    self.starting = None
                    self.changed.notify_all()
                if not self._stop.is_set():
                    log.error("a warm-pool %s could not start (trying again in %.0f s): %s", self.what,
                              self.retry_s, exc)
                    self._stop.wait(self.retry_s)
                continue
            with self._lock:
                self.starting = None
                if not self._stop.is_set() and len(self.ready) < self.size:  # the pool may have shrunk meanwhile
                    self.ready.append(Pooled(item, time.monotonic()))
                    item = None
                self.changed.notify_all()
            if item is not None:  # the owner is stopping, or the pool was made smaller
                self._discard(item)
            else:
                log.info("warm pool: %d of %d %ss ready", len(self.ready), self.size, self.what)
