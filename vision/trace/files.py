"""The evidence's file helpers: atomic writes, trace ids (path-safe by construction), the owner
file, and the start-up sweep every store of evidence makes with it (``close_orphans``)."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets as _random
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

from desktop.x11.procs import ProcessId, alive_checker, this_process
from vision.trace.records import InvalidTraceId

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
