"""The trace's file helpers: atomic writes, trace ids (path-safe by construction), the owner file."""

from __future__ import annotations

import os
import re
import secrets as _random
from datetime import UTC, datetime
from pathlib import Path

from vision.trace.records import InvalidTraceId

OWNER_FILE = "owner.json"


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
