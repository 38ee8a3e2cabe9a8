"""The server's memory against the C allocator (issue 33: the resident size crept over a long
soak, and what grew was not Python's heap but glibc's).

A screen is an 8 MB buffer (1920x1080 BGRA) and its PNG up to a few MB, allocated in whichever
thread answers (uvicorn's pool, the loop's, the readers'). glibc gives threads arenas of their own
(up to 8 a core) and, once a frame-sized block is freed, raises its mmap threshold to that size
(its dynamic threshold): later frames come from those arenas, whose freed pages it keeps. Spread
over many arenas and fragmented, the resident size climbs. Measured on this machine:

- one session, 400 full-screen captures and their PNGs, one process: the mmap threshold pinned at
  1 MiB (``MALLOC_MMAP_THRESHOLD_``) leaves 82 MB resident instead of 96, but every frame's pages
  then fault in fresh: a capture 7.0 ms (median) instead of 2.4, its PNG 5.2 instead of 4.3,
  ~5.5 ms on every screenshot and every action's answer. ``malloc_trim(0)`` after them leaves
  82 MB too, in 1.7 ms once.
- a real ``glassdesk up`` under tests/bench_soak.py's mixed load, 10 min each: glibc as is,
  271.5 -> 284.0 MB after the warm-up, 6.7 MB per thousand requests; with a trim every 30 s the
  resident drops 15-25 MB after each trim and climbs as fast (5.9 MB per thousand); with two
  arenas and the trim, 230-256 MB, 0.7 MB per thousand (the bench's goal: under 1), 3,096
  requests answered against 3,256 and 3,168 (within the runs' own spread: stop 48's 30-min soak
  answered 2,957 per 10 min).

So a server limits glibc to ``ARENAS`` arenas when it starts (``limit_arenas``, unless
``MALLOC_ARENA_MAX`` says otherwise) and trims every ``TRIM_S`` on a thread of its own
(``GLASSDESK_MALLOC_TRIM_S``; 0 turns it off). ctypes lets go of the GIL for the call; allocations
in other threads wait for the allocator's lock meanwhile (a few ms, twice a minute). Elsewhere than
glibc there is nothing to call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading

log = logging.getLogger("glassdesk.memory")

TRIM_S = 30.0
ARENAS = 2
M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)


def _libc_call(name: str, argtypes: list):
    """A glibc function, or None (musl, macOS: no such call)."""
    try:
        function = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = argtypes, ctypes.c_int
    return function


def _malloc_trim():
    return _libc_call("malloc_trim", [ctypes.c_size_t])


def limit_arenas(environ: dict[str, str] | None = None) -> bool:
    """glibc held to ARENAS arenas for this process, before its threads make more; whether it was
    (not where ``MALLOC_ARENA_MAX`` already says how many, nor without glibc)."""
    if "MALLOC_ARENA_MAX" in (os.environ if environ is None else environ):
        return False
    mallopt = _libc_call("mallopt", [ctypes.c_int, ctypes.c_int])
    return mallopt is not None and mallopt(M_ARENA_MAX, ARENAS) == 1


def trim_interval_s(environ: dict[str, str] | None = None) -> float:
    """How often to trim (pure): ``GLASSDESK_MALLOC_TRIM_S`` seconds, 0 or less for never, TRIM_S by
    default or when it is not a number (said in the log)."""
    raw = (os.environ if environ is None else environ).get("GLASSDESK_MALLOC_TRIM_S")
    if raw is None:
        return TRIM_S
    try:
        return max(0.0, float(raw))
    except ValueError:
        log.warning("GLASSDESK_MALLOC_TRIM_S=%r is not a number of seconds: trimming every %g s", raw, TRIM_S)
        return TRIM_S


class Trimmer:
    """A daemon thread calling malloc_trim(0) every ``interval_s`` until ``stop``."""

    def __init__(self, interval_s: float | None = None):
        self.interval_s = trim_interval_s() if interval_s is None else interval_s
        self.trims = 0
        self._stop = threading.Event()
        self._trim = _malloc_trim() if self.interval_s > 0 else None
        self._thread: threading.Thread | None = None

    def start(self) -> Trimmer:
        if self._trim is not None:
            self._thread = threading.Thread(target=self._run, args=(self._trim,), name="glassdesk-malloc-trim",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self, trim) -> None:
        while not self._stop.wait(self.interval_s):
            trim(0)
            self.trims += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
