"""Processes by what /proc says of them, and how no desktop outlives the server that owns it.

Teardown finds a session's processes three ways: its children's process groups, the environment
tag every one of them inherits, and the process sessions its children started (Chromium rewrites
its environment, so the tag misses it).

A server that dies without closing its sessions (SIGKILL, a crash, the OOM killer, an MCP client
that kills it right after closing stdin) is covered twice, by one arrangement, ``own_desktops``
(desktop.session.ownership), that ``glassdesk up`` and ``glassdesk mcp`` both use:

- a reaper process (``python -P -m desktop.session.ownership``) that ends the server's desktops the moment the
  server is gone, however it went;
- an owner record (``owner.json``: pid, start time, boot and pid namespace, mark) in the session
  root, so the next server to start finds and ends what a dead one left if its reaper died with it
  (a kill of everything, a container stop). ``leftovers`` decides what is whose from a snapshot of
  the process table, without touching anything: a pure function.

Those marks (environment, working directory, process session) can all be shed by a program that
wants to outlive its session (double fork, ``setsid``, ``chdir /``, an empty environment). Two
marks cannot: its cgroup (desktop.x11.cgroup: a dead server's are found by their owner's name) and
its uid (a pool account no live server holds runs nothing legitimately: desktop.x11.user). The
reaper and the start-up reap end both (``end_detached``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("glassdesk.procs")


def kill_group(popen: subprocess.Popen, grace: float = 3.0) -> None:
    if popen.poll() is not None:
        return
    try:
        os.killpg(popen.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        popen.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        popen.wait(grace)


def _process_stats() -> Iterator[tuple[int, bytes, list[bytes]]]:
    """(pid, name, the fields after the name) of every live process, from /proc/<pid>/stat: the
    first field here is proc(5)'s field 3, the state."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                name, rest = fh.read().split(b" (", 1)[1].rsplit(b")", 1)
        except (OSError, IndexError, ValueError):
            continue
        yield int(entry.name), name, rest.split()


def session_pids(sids: set[int]) -> list[int]:
    """Every live process in one of these process sessions. Each child starts its own session,
    and Chromium, which rewrites its environment (and so loses the tag), stays in its session."""
    return [pid for pid, _name, fields in _process_stats()
            if int(fields[3]) in sids and pid != os.getpid()]  # field 6: session id


# What one process is doing at one instant: its name (an exec changes it), its state (proc(5): R
# running or waiting for a processor, D in an uninterruptible wait such as a disk read) and the
# processor time it and its children that ended have used (clock ticks): a shell's work is mostly
# in short-lived children, each gone between two looks.
ProcessActivity = tuple[str, str, int]


def session_activity(sid: int) -> dict[int, ProcessActivity]:
    """What each live process of one process session is doing now, by pid (one pass over /proc)."""
    return {pid: (name.decode(errors="replace"), fields[0].decode(), sum(int(ticks) for ticks in fields[11:15]))
            for pid, name, fields in _process_stats() if int(fields[3]) == sid}  # fields 3, 6 and 14 to 17


def still_working(before: Mapping[int, ProcessActivity], after: Mapping[int, ProcessActivity],
                  *, by_time: bool = True) -> bool:
    """Whether a process session was at work between two looks at it (pure): a process started,
    ended or ran another program, is running or waiting in the second look, or (``by_time``) used
    the processor in between (left out over a span whose use is known for another reason)."""
    if before.keys() != after.keys():
        return True
    for pid, (name, state, ticks) in after.items():
        if state in ("R", "D") or before[pid][0] != name or (by_time and before[pid][2] != ticks):
            return True
    return False


def pids_with_env(name: str, value: str) -> list[int]:
    """Every live process (but this one) whose environment sets ``name=value``."""
    needle = f"{name}={value}".encode()
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    pids.append(int(entry.name))
        except OSError:
            continue
    return pids


# ------------------------------------------------------------------ who a process is, exactly

OWNER_VAR = "GLASSDESK_OWNER"  # every desktop process inherits it: the mark of the server that owns it
OWNER_RECORD = "owner.json"    # in a session root: who owns the desktops under it
ROOT_PREFIX = "glassdesk-"     # session roots are <temp dir>/glassdesk-*


@dataclass(frozen=True)
class ProcessId:
    """One process, exactly. A pid alone is reused; with its start time (clock ticks after boot),
    the boot and the pid namespace it was counted in, it names one process ever."""

    pid: int
    start_time: int
    boot_id: str
    pid_ns: str

    def as_dict(self) -> dict:
        return {"pid": self.pid, "start_time": self.start_time, "boot_id": self.boot_id, "pid_ns": self.pid_ns}

    @classmethod
    def from_dict(cls, data: Mapping) -> ProcessId:
        """Raises ValueError on anything but a well-formed record."""
        try:
            pid, start = data["pid"], data["start_time"]
            if not (isinstance(pid, int) and isinstance(start, int) and pid > 0 and start >= 0):
                raise ValueError
            return cls(pid, start, str(data["boot_id"]), str(data["pid_ns"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"not a process record: {data!r}") from None


@dataclass(frozen=True)
class Proc:
    """What the process table says of one process; what could not be read is None."""

    pid: int
    uid: int
    sid: int
    start_time: int
    zombie: bool = False
    pid_ns: str | None = None
    cwd: str | None = None
    mark: str | None = None  # its OWNER_VAR, if it has one and its environment is ours to read


def _stat(pid: int | str) -> tuple[str, int, int] | None:
    """(state, session id, start time) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[3]), int(fields[19])  # fields 3, 6 and 22 of proc(5)
    except (OSError, IndexError, ValueError):
        return None


def session_of(pid: int) -> int | None:
    """The process session of a running process; None if it is gone or a zombie."""
    stat = _stat(pid)
    return stat[1] if stat and stat[0] not in ("Z", "X") else None


def start_time(pid: int) -> int | None:
    """When a running process started (clock ticks after boot); None if it is gone or a zombie."""
    stat = _stat(pid)
    return stat[2] if stat and stat[0] not in ("Z", "X") else None


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


_this: dict[int, ProcessId] = {}


def this_process() -> ProcessId:
    pid = os.getpid()
    if pid not in _this:  # keyed by pid: a forked child is another process
        stat = _stat("self")
        if stat is None:  # never: a running process can read its own, wherever /proc is (and it is here)
            raise OSError("/proc/self/stat could not be read")
        _this[pid] = ProcessId(pid, stat[2], _boot_id(), _readlink("/proc/self/ns/pid") or "")
    return _this[pid]


def process_table() -> dict[int, Proc]:
    """A snapshot of every process but this one, as far as /proc lets us read it."""
    table = {}
    needle = f"{OWNER_VAR}=".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        stat = _stat(entry.name)
        try:
            uid = entry.stat().st_uid
        except OSError:
            continue
        if stat is None:
            continue
        mark = None
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                for item in fh.read().split(b"\0"):
                    if item.startswith(needle):
                        mark = item[len(needle):].decode(errors="replace")
        except OSError:
            pass
        cwd = _readlink(f"/proc/{entry.name}/cwd")
        if cwd and cwd.endswith(" (deleted)"):
            cwd = cwd[: -len(" (deleted)")]
        pid = int(entry.name)
        table[pid] = Proc(pid, uid, stat[1], stat[2], zombie=stat[0] in ("Z", "X"),
                          pid_ns=_readlink(f"/proc/{entry.name}/ns/pid"), cwd=cwd, mark=mark)
    return table


# ------------------------------------------------------------- what a dead server left (pure)


@dataclass(frozen=True)
class OwnerRecord:
    """A session root's owner.json, and who owns the file."""

    root: Path
    uid: int
    owner: ProcessId
    mark: str


@dataclass
class Leftovers:
    pids: dict[int, int] = field(default_factory=dict)  # pid -> start time, checked again before a signal
    roots: list[Path] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)  # network namespaces removed (reap_predecessors)


def owner_alive(owner: ProcessId, table: Mapping[int, Proc], me: ProcessId) -> bool:
    """Whether ``owner`` still runs, judged from a snapshot of the process table (pure).

    A zombie is dead. A process from another boot is dead. One counted in another pid namespace
    (a container's) cannot be looked up by pid: it counts as alive while any process we can see
    lives in that namespace, so a live server next door is never touched.
    """
    if owner == me:
        return True
    if owner.boot_id != me.boot_id:
        return False
    if owner.pid_ns != me.pid_ns:
        return any(p.pid_ns == owner.pid_ns for p in table.values())
    proc = table.get(owner.pid)
    return proc is not None and not proc.zombie and proc.start_time == owner.start_time


def alive_checker() -> Callable[[ProcessId], bool]:
    """``owner_alive`` against one snapshot of the process table, taken on first use: for judging
    many owner records at once (the traces a server finds at start)."""
    table: dict[int, Proc] | None = None

    def alive(owner: ProcessId) -> bool:
        nonlocal table
        if table is None:
            table = process_table()
        return owner_alive(owner, table, this_process())

    return alive


def mark_owner(mark: str) -> tuple[int, int] | None:
    """(pid, start time) of the server a mark names: marks are ``PID-STARTTIME-RANDOM``."""
    parts = mark.split("-")
    if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def owned_pids(table: Mapping[int, Proc], mark: str, root: Path | None, *, uid: int) -> dict[int, int]:
    """The processes of the desktops that ``mark`` owns (pure): pid -> start time.

    A process is one of them if it carries the mark, or works in a directory under ``root``, or is
    in a process session led by one of those (Chromium rewrites its environment, so the mark
    misses it; it stays in the session of the process that was started). Only processes of
    ``uid`` count, unless ``uid`` is root's; zombies are already dead.
    """
    prefix = f"{root}/" if root is not None else None

    def ours(p: Proc) -> bool:
        return not p.zombie and (uid == 0 or p.uid == uid)

    def under_root(cwd: str | None) -> bool:
        return prefix is not None and cwd is not None and (cwd + "/").startswith(prefix)

    core = {pid for pid, p in table.items() if ours(p) and (p.mark == mark or under_root(p.cwd))}
    leaders = {pid for pid in core if table[pid].sid == pid}
    found = core | {pid for pid, p in table.items() if ours(p) and p.sid in leaders}
    return {pid: table[pid].start_time for pid in sorted(found)}


def leftovers(records: Iterable[OwnerRecord], table: Mapping[int, Proc], me: ProcessId, uid: int) -> Leftovers:
    """What servers that are gone left behind (pure): their processes and their session roots.

    A root counts if its record is ``uid``'s and its owner is dead (``owner_alive``). Processes
    whose mark has no record (the root was removed, or lives in another temp dir) are judged by
    the owner the mark itself names.
    """
    found = Leftovers()
    known = set()
    for record in records:
        known.add(record.mark)
        if record.uid != uid or owner_alive(record.owner, table, me):
            continue
        found.roots.append(record.root)
        found.pids.update(owned_pids(table, record.mark, record.root, uid=uid))
    # A mark's pid is counted in its server's namespace: only read marks from our own.
    orphan_marks = {p.mark for p in table.values() if p.mark and p.pid_ns == me.pid_ns} - known
    for mark in sorted(orphan_marks):
        named = mark_owner(mark)
        if named and not owner_alive(ProcessId(*named, me.boot_id, me.pid_ns), table, me):
            found.pids.update(owned_pids(table, mark, None, uid=uid))
    return found


# --------------------------------------------------------------------------- ending them


def end_processes(find: Callable[[], Mapping[int, int]], signals=(signal.SIGTERM, signal.SIGKILL, signal.SIGKILL),
                  grace: float = 1.0) -> int:
    """Signal what ``find()`` returns (pid -> start time) until it returns nothing: a polite
    SIGTERM first, then SIGKILL. A pid whose start time changed is someone else now and is left
    alone. Returns how many processes were signalled."""
    signalled: set[int] = set()
    for sig in signals:
        pids = {pid: start for pid, start in find().items() if start_time(pid) == start}
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, sig)
                signalled.add(pid)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(start_time(pid) == start for pid, start in pids.items()):
            time.sleep(0.05)
    return len(signalled)


def read_owner_records(temp_dir: Path) -> list[OwnerRecord]:
    """The owner records of the session roots in ``temp_dir``; unreadable ones are skipped."""
    records = []
    try:
        entries = list(os.scandir(temp_dir))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(ROOT_PREFIX):
            continue
        path = Path(entry.path) / OWNER_RECORD
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            root_uid = entry.stat(follow_symlinks=False).st_uid
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as fh:
                file_uid = os.fstat(fh.fileno()).st_uid
                data = json.loads(fh.read(4096))
            owner, mark = ProcessId.from_dict(data), data["mark"]
            if not isinstance(mark, str):
                continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
        records.append(OwnerRecord(Path(entry.path), file_uid if file_uid == root_uid else -1, owner, mark))
    return records


def end_detached(owner: tuple[int, int] | None = None) -> int:
    """End what no mark finds: the session cgroups of dead servers (``owner``'s, (pid, start time),
    or every dead one next to this server's) and the processes of pool accounts no live server
    holds. Returns how many processes were in those cgroups. Never raises: a reap does what it can."""
    from desktop.x11 import cgroup
    from desktop.x11.user import desktop_users

    killed = 0
    try:
        layout = cgroup.detect()
        if layout is not None:
            if owner is not None:
                dead = [cgroup.owner_group(*owner)]
            else:
                table, me = process_table(), this_process()

                def alive(o: tuple[int, int]) -> bool:
                    return owner_alive(ProcessId(*o, me.boot_id, me.pid_ns), table, me)

                dead = sorted({d.name for base in layout.bases.values() for d in cgroup.dead_owner_groups(base, alive)})
            for name in dead:
                killed += cgroup.reap_owner(layout, name)
    except Exception:
        log.exception("the cgroups of a dead server could not all be ended")
    try:
        desktop_users.reap_free()
    except Exception:
        log.exception("the processes of free desktop accounts could not all be ended")
    return killed


_TEMP: list[Path] = []  # owned_temp_dir(), once the server owns its desktops (desktop.session.ownership)
TEMP_DIR = "tmp"  # in the session root: the server's helpers' temporary files


def use_temp_dir(path: Path) -> None:
    """Where owned_temp_dir points from now: the session root's, made by own_desktops."""
    _TEMP.append(path)


def owned_temp_dir() -> Path | None:
    """Where this server's helper processes keep temporary files (the Playwright driver's
    ``playwright-artifacts-*``): a directory in the session root, so that the reaper, or the next
    server's start-up reap, removes what a kill -9 left there along with the root. None before
    ``own_desktops`` (tests, embedded use): the temp dir, as before. The latest owner's that is
    still there: an owner that closed (an embedded server, done) took its root with it."""
    return next((path for path in reversed(_TEMP) if path.is_dir()), None)
