"""What every store of evidence (traces: vision.trace.store; QA runs: vision.evidence.qa_runs) keeps
its files with, written once: atomic writes, ids (path-safe by construction), the hash-chained
record file (``ChainFile``), the owner file and the registry of what this process is writing
(``OPEN``), and the start-up sweep of what a stopped server left unfinished (``close_orphans``)."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets as _random
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from desktop.x11.procs import ProcessId, alive_checker, this_process
from vision.trace.records import GENESIS_HASH, InvalidTraceId, canonical_json, record_hash

OWNER_FILE = "owner.json"
log = logging.getLogger("glassdesk.trace")


def write_owner(directory: Path) -> None:
    """Name this process as the writer of the evidence in ``directory`` until it is finished
    (read back by ``read_owner``; the writer removes the file when it finishes)."""
    atomic_write(directory / OWNER_FILE, json.dumps(this_process().as_dict()).encode())


def read_owner(directory: Path) -> ProcessId | None:
    """The process an unfinished piece of evidence names as its writer, or None (no readable record)."""
    try:
        return ProcessId.from_dict(json.loads((directory / OWNER_FILE).read_bytes()))
    except (OSError, ValueError, AttributeError):
        return None


class OpenEvidence:
    """The evidence this process is writing (created, not yet finished), by directory, with its
    writer. Never closed as interrupted by this process, whatever /proc says; a reader here may ask
    for the writer to wait for its queued writes. Each piece names its writer on disk too (the owner
    file) for the other processes on the same data directory."""

    def __init__(self):
        self._writers: dict[str, Any] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(directory: Path) -> str:
        return str(directory.resolve())

    def opened(self, directory: Path, writer: Any) -> None:
        with self._lock:
            self._writers[self._key(directory)] = writer

    def closed(self, directory: Path) -> None:
        """Finished: it names no writer any more, here or on disk."""
        with self._lock:
            self._writers.pop(self._key(directory), None)
        (directory / OWNER_FILE).unlink(missing_ok=True)

    def writer(self, directory: Path) -> Any | None:
        if not self._writers:  # nothing open here: no directory to resolve
            return None
        with self._lock:
            return self._writers.get(self._key(directory))

    def __contains__(self, directory: Path) -> bool:
        return self.writer(directory) is not None


OPEN = OpenEvidence()


class ChainFile:
    """A JSON-lines file of hash-chained records (vision.trace.records: each names the hash of the
    one before and its own), of which its writer is the only author.

    Rewritten whole on each append, atomically, rather than appended in place: an in-place append
    cut short by a crash leaves a torn line that readers must second-guess; a rename never does.
    The copy costs O(records) per record, trivial at a run's scale (tens of KB)."""

    def __init__(self, path: Path, lines: bytes = b"", head: str = GENESIS_HASH):
        self.path = path
        self._lines = bytearray(lines)
        self.head = head

    def append(self, record: dict) -> dict:
        """``record`` chained to the head (``prev_hash``, ``hash`` set in it), written; returned."""
        record["prev_hash"] = self.head
        record["hash"] = record_hash(record)
        self._lines += canonical_json(record) + b"\n"
        atomic_write(self.path, bytes(self._lines))
        self.head = record["hash"]
        return record


def close_orphans(unfinished: Iterable[tuple[str, Path, Callable[[], None]]], what: str,
                  alive: Callable[[ProcessId], bool] | None = None) -> list[str]:
    """Close each unfinished piece of evidence (id, directory, how to close it) whose writer is gone;
    returns the ids closed. Left alone: those whose owner record names a process that still runs
    (``alive``, default: judged from /proc), e.g. another server on the same data directory. One
    with no readable owner record was written before owner records existed, or by a process that
    cannot be asked: it is closed. One that cannot be closed is logged, never a reason not to start.
    The stores leave out, before this, what is final and what this process is writing."""
    alive = alive or alive_checker()
    closed = []
    for item_id, directory, close in unfinished:
        owner = read_owner(directory)
        if owner is not None and alive(owner):
            continue
        try:
            close()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("%s %s was left unfinished and could not be closed: %s", what, item_id, exc)
            continue
        closed.append(item_id)
    if closed:
        log.warning("closed %d %s(s) left unfinished by a server that stopped: %s", len(closed), what,
                    ", ".join(closed))
    return closed


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old file or the new one, never a mix.

    The data is fsynced before the rename and the directory after it, so the new version also
    survives a power cut once this returns.
    """
    tmp = path.with_name(f".{path.name}.{_random.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def new_trace_id(now: datetime | None = None) -> str:
    """UTC time to the microsecond plus a random suffix: sorts by creation, unique, path-safe."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return now.strftime("%Y%m%dT%H%M%S%fZ-") + _random.token_hex(4)


_TRACE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def check_trace_id(trace_id: str) -> str:
    """Refuse anything but a plain name: no dots, slashes or other path syntax can get through."""
    if not isinstance(trace_id, str) or not _TRACE_ID.fullmatch(trace_id):
        raise InvalidTraceId(f"invalid trace id {trace_id!r}: use letters, digits, '-' and '_' only")
    return trace_id
