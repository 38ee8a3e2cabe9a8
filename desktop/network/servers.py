"""The glassdesk servers of this host and their control-plane ports, so that no session's proxy
passes a connection to any of them: not only to its own server's API, live views and proxies, but
to every other glassdesk server's on the machine (a session of one server once created sessions
on another through its proxy, and typed on their desktops).

Each server (each SessionManager) keeps one entry, ``<dir>/<pid>-<start time>-<token>.json``: the
process that owns it and its ports, rewritten atomically when they change and removed when it
closes. Every proxy refuses the ports of every live entry. An entry whose process is gone (its
pid reused by a process that started at another time, or from another boot) counts for nothing,
and is removed by the next server of its account.

Where: one directory per account, ``/tmp/glassdesk-servers-<uid>`` (0755). Only that account may
add, change or remove its entries: a session's desktop user shares /tmp with the server, and an
entry it could remove would reopen the hole. A reader trusts a directory only if it is a real
directory owned by the uid its name gives and writable by nobody else; a directory squatted under
root's name is removed by the root server before it writes. Ports written by another account only
ever add refusals, never permissions.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from desktop.x11.procs import ProcessId, start_time, this_process

log = logging.getLogger("glassdesk.servers")

BASE = Path("/tmp")
PREFIX = "glassdesk-servers-"
MAX_ENTRY_BYTES = 64 * 1024


@dataclass(frozen=True)
class Entry:
    """One server's record: who owns it and which of this machine's ports are its control plane."""

    owner: ProcessId
    ports: frozenset[int]

    def to_json(self) -> str:
        return json.dumps({**self.owner.as_dict(), "ports": sorted(self.ports)})

    @classmethod
    def parse(cls, text: str) -> Entry:
        """Raises ValueError on anything but a well-formed entry (pure)."""
        try:
            data = json.loads(text)
            ports = data["ports"]
            if not isinstance(ports, list) or not all(isinstance(p, int) and 0 < p < 65536 for p in ports):
                raise ValueError
        except (ValueError, TypeError, KeyError):
            raise ValueError("not a server entry") from None
        return cls(ProcessId.from_dict(data), frozenset(ports))


def entry_alive(owner: ProcessId, me: ProcessId, started_at: int | None) -> bool:
    """Whether an entry's owner still runs (pure): ``started_at`` is what the process table says of
    its pid now (None: no such process). Another boot's owner is dead. One counted in another pid
    namespace cannot be looked up by pid, so it counts as alive: a stale entry only refuses ports,
    a wrongly dropped one would let a session through."""
    if owner.boot_id != me.boot_id:
        return False
    if owner.pid_ns != me.pid_ns:
        return True
    return started_at == owner.start_time


def trusted_dir(path: Path, st: os.stat_result) -> bool:
    """A registry directory a reader may believe (pure over its lstat): a real directory, owned by
    the uid its name ends in (or root), that no other account may write."""
    suffix = path.name.removeprefix(PREFIX)
    return (stat.S_ISDIR(st.st_mode) and suffix.isdigit() and st.st_uid in (int(suffix), 0)
            and not st.st_mode & 0o022)


def live_ports(entries: Iterable[Entry], me: ProcessId, started_at) -> set[int]:
    """The ports of every entry whose owner runs (pure; ``started_at(pid)`` reads the table)."""
    ports: set[int] = set()
    for entry in entries:
        if entry_alive(entry.owner, me, started_at(entry.owner.pid)):
            ports |= entry.ports
    return ports


# A file system's clock for modification times is coarse (a kernel tick, up to 10 ms): a change in
# the same tick as a read leaves the time as it was.
MTIME_TICK_NS = 20_000_000


def still_as_read(mtime_ns: int, seen_mtime_ns: int, read_at_ns: int) -> bool:
    """Whether a directory whose modification time is ``mtime_ns`` still holds what a read at
    ``read_at_ns`` found when its time was ``seen_mtime_ns`` (pure): the same time, and a read clearly
    after it, not in the same tick (where a later change would not have moved it)."""
    return mtime_ns == seen_mtime_ns and read_at_ns - mtime_ns > MTIME_TICK_NS


class ServerRegistry:
    """This host's servers' ports: ``publish`` this server's, ``ports()`` for everyone's that runs.

    Reading is on every proxy decision, so a directory's entries are parsed again only when its
    modification time changes (an entry is replaced by a rename, which changes it); whether each
    owner still runs is read from /proc each time."""

    def __init__(self, base: Path = BASE):
        self.base = base
        self.dir = base / f"{PREFIX}{os.geteuid()}"
        self.me = this_process()
        self.name = f"{self.me.pid}-{self.me.start_time}-{secrets.token_hex(4)}.json"
        self._published: frozenset[int] | None = None
        self._cache: dict[Path, tuple[int, int, list[Entry]]] = {}  # directory -> (mtime, read at, entries)
        self._dirs_seen: tuple[int, int, list[Path]] | None = None  # base's (mtime, read at, registry directories)
        self._lock = threading.Lock()
        self._usable: bool | None = None

    # ------------------------------------------------------------------ writing (this server)

    def publish(self, ports: Iterable[int]) -> None:
        """Write this server's ports if they changed; never raises (a registry it cannot write is
        logged: other servers' sessions could then reach this one)."""
        ports = frozenset(p for p in ports if p)
        with self._lock:
            if ports == self._published or not self._ready():
                return
            try:
                temp = self.dir / f".{self.name}.{secrets.token_hex(4)}"
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "w") as fh:
                    fh.write(Entry(self.me, ports).to_json())
                os.replace(temp, self.dir / self.name)
                self._published = ports
            except OSError as exc:
                log.warning("could not register this server's ports in %s: %s", self.dir, exc)

    def withdraw(self) -> None:
        with self._lock:
            if self._published is None:
                return
            try:
                (self.dir / self.name).unlink()
            except OSError:
                pass
            self._published = None

    def _ready(self) -> bool:
        """Make this account's directory (once): a squatter's under root's name is removed first."""
        if self._usable is not None:
            return self._usable
        self._usable = False
        for _ in range(2):
            try:
                os.mkdir(self.dir, 0o755)
            except FileExistsError:
                pass
            except OSError as exc:
                log.warning("no server registry at %s: %s", self.dir, exc)
                return False
            st = os.lstat(self.dir)
            if trusted_dir(self.dir, st) and st.st_uid == os.geteuid():
                self._usable = True
                self._remove_dead()
                return True
            log.warning("server registry %s is not this account's own (owner %d, mode %o)", self.dir, st.st_uid,
                        st.st_mode)
            if os.geteuid() != 0:
                return False
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(self.dir, ignore_errors=True)
            else:
                os.unlink(self.dir)
        return False

    def _remove_dead(self) -> None:
        for path, entry in self._read(self.dir):
            if path.name != self.name and not entry_alive(entry.owner, self.me, start_time(entry.owner.pid)):
                try:
                    path.unlink()
                except OSError:
                    pass

    # ------------------------------------------------------------------ reading (every proxy)

    def ports(self) -> set[int]:
        """The control-plane ports of every live glassdesk server of this host, this one included."""
        entries: list[Entry] = []
        for directory in self._dirs():
            try:
                mtime = directory.stat().st_mtime_ns
            except OSError:
                continue
            cached = self._cache.get(directory)
            if cached is None or not still_as_read(mtime, *cached[:2]):
                cached = (mtime, time.time_ns(), [entry for _, entry in self._read(directory)])
                self._cache[directory] = cached
            entries.extend(cached[2])
        return live_ports(entries, self.me, start_time)

    def _dirs(self) -> list[Path]:
        """The registry directories under ``base``, listed again only when ``base`` changes (a
        directory made or removed there): ``base`` is /tmp, hundreds of entries on a busy host, and
        this runs on every proxy decision."""
        try:
            changed = os.stat(self.base).st_mtime_ns
        except OSError:
            return []
        if self._dirs_seen is not None and still_as_read(changed, *self._dirs_seen[:2]):
            return self._dirs_seen[2]
        read_at = time.time_ns()
        found = []
        try:
            candidates = [e for e in os.scandir(self.base) if e.name.startswith(PREFIX)]
        except OSError:
            return []
        for candidate in candidates:
            try:
                if trusted_dir(Path(candidate.path), candidate.stat(follow_symlinks=False)):
                    found.append(Path(candidate.path))
            except OSError:
                continue
        self._dirs_seen = (changed, read_at, found)
        return found

    @staticmethod
    def _read(directory: Path) -> list[tuple[Path, Entry]]:
        read = []
        try:
            names = [n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith(".")]
        except OSError:
            return []
        for name in names:
            try:
                fd = os.open(directory / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as fh:
                    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                        continue
                    read.append((directory / name, Entry.parse(fh.read(MAX_ENTRY_BYTES).decode())))
            except (OSError, ValueError, UnicodeDecodeError):
                continue
        return read
