"""A control group per session: everything it starts is in it, and it is ended as a whole.

A program launched on a desktop can leave every other mark a session's processes carry (its
process group and session: ``setsid``; its environment tag: an empty environment; its working
directory: ``chdir /``) but not its cgroup: a process can only be moved by someone allowed to
write the cgroup files, which are root's. So each desktop's processes start in a cgroup of their
own, and ``kill()`` ends them all at once, however they detached (issue 23).

Where: under the server's own cgroup, ``<own>/glassdesk-<pid>-<start time>/<session tag>`` in
each hierarchy, so the next server can tell a dead server's cgroups (their owner's pid and start
time no longer run) from a live one's (``dead_owner_groups``), and nothing of the host's or another
tenant's tree is touched.

Both layouts:
- cgroup v2 (Docker, modern hosts): one tree; ``cgroup.kill`` ends everything in a cgroup; limits
  ``memory.max`` (and ``memory.swap.max`` 0), ``cpu.max``, ``pids.max`` where the parent lets its
  children have those controllers.
- cgroup v1 (older or hybrid hosts): a tree per controller; the freezer stops every process of the
  cgroup (none can fork meanwhile), each is sent SIGKILL, then it is thawed so they die; limits
  ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is accounted),
  ``cpu.cfs_quota_us``/``cpu.cfs_period_us``, ``pids.max``.

A process joins before it runs anything of its own: ``enter_argv`` is an argv prefix (a shell, as
the server, writes its own pid into each ``cgroup.procs`` and execs the rest: ``setpriv`` to the
desktop user, then the program), because ``subprocess`` changes the uid before any hook could
run, and the desktop user may not move itself. The paths and values are pure functions (tested
without a cgroup file system); the writes are in ``SessionCgroup``.

No writable cgroup file system (not root, or Docker's read-only /sys/fs/cgroup): no cgroups; the
uid of the session's own account still ends everything (desktop.x11.user.kill_all), and the server
says so at start (``cgroup_problem``).

The figures: the same as the Docker and Kubernetes backends give a session's container or pod
(``--session-memory`` 1536 MB, ``--session-cpus`` 1.0, desktop.remote.backends.docker.PIDS_LIMIT).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("glassdesk.cgroup")

MEMORY_MB = 1536  # keep in step with vision/cli/command.py's --session-memory default
CPUS = 1.0  # --session-cpus
PIDS = 4096  # desktop.remote.backends.docker.PIDS_LIMIT
CPU_PERIOD_US = 100_000
GROUP_PREFIX = "glassdesk-"
_WARNED: list[bool] = []  # the v2 controllers that could not be handed down: said once per process
V1_CONTROLLERS = ("freezer", "memory", "cpu", "pids")  # freezer first: it is the one that kills


@dataclass(frozen=True)
class Limits:
    memory_mb: int = MEMORY_MB
    cpus: float = CPUS
    pids: int = PIDS


@dataclass(frozen=True)
class Layout:
    """Where this server's cgroups go: v2's one directory, or v1's one per controller."""

    version: int
    bases: Mapping[str, Path] = field(default_factory=dict)  # controller ("" for v2) -> its base directory

    @property
    def kill_base(self) -> Path:
        return self.bases["" if self.version == 2 else "freezer"]


# ------------------------------------------------------------------------- pure: where and what


def parse_mountinfo(text: str) -> dict[str, Path]:
    """The cgroup mounts of /proc/self/mountinfo (pure): "" -> the v2 mount, else v1 controller ->
    its mount (a hierarchy with several controllers is listed under each)."""
    mounts: dict[str, Path] = {}
    for line in text.splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point, fstype, options = Path(fields[4]), tail[0], tail[2].split(",")
        if fstype == "cgroup2":
            mounts.setdefault("", point)
        elif fstype == "cgroup":
            for option in options:
                if option in V1_CONTROLLERS:
                    mounts.setdefault(option, point)
    return mounts


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """A process's cgroup paths from /proc/PID/cgroup (pure): "" -> the v2 path, else controller ->
    its v1 path."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            paths[""] = path
        for controller in controllers.split(","):
            if controller in V1_CONTROLLERS:
                paths[controller] = path
    return paths


def choose_layout(mounts: Mapping[str, Path], own: Mapping[str, str]) -> Layout | None:
    """The layout to use (pure): v2 when the whole tree is v2 (no v1 freezer mounted: pure v2
    hosts and containers), else v1 with the freezer and whichever of memory, cpu and pids are
    mounted; None when neither can kill. On a hybrid host the empty v2 tree has no controllers, so
    the limits would be lost there: v1 it is."""
    def base(mount: Path, path: str) -> Path:
        return mount / path.lstrip("/")

    if "freezer" in mounts and "freezer" in own:
        return Layout(1, {c: base(mounts[c], own[c]) for c in V1_CONTROLLERS if c in mounts and c in own})
    if "" in mounts and "" in own:
        return Layout(2, {"": base(mounts[""], own[""])})
    return None


def owner_group(pid: int, start_time: int) -> str:
    """The name of a server's directory of session cgroups (pure)."""
    return f"{GROUP_PREFIX}{pid}-{start_time}"


def group_owner(name: str) -> tuple[int, int] | None:
    """(pid, start time) of the server an ``owner_group`` name names, or None (pure)."""
    if not name.startswith(GROUP_PREFIX):
        return None
    parts = name[len(GROUP_PREFIX):].split("-")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def session_dirs(layout: Layout, owner: str, session: str) -> dict[str, Path]:
    """A session's cgroup directory in each hierarchy (pure)."""
    if not session or "/" in session or session in (".", ".."):
        raise ValueError(f"not a cgroup name: {session!r}")
    return {controller: base / owner / session for controller, base in layout.bases.items()}


def limit_values(version: int, limits: Limits, controllers: Iterable[str]) -> dict[str, dict[str, str]]:
    """The files to write and their values, by controller, for ``limits`` (pure). v2: the files go
    in the one directory (its controllers: what the parent enables for its children); v1: each
    controller's files in its own hierarchy. No swap beyond the memory limit, as the Docker backend
    (memswap = mem)."""
    memory = str(limits.memory_mb * 1024 * 1024)
    quota = str(max(1000, round(limits.cpus * CPU_PERIOD_US)))
    controllers = set(controllers)
    if version == 2:
        files: dict[str, str] = {}
        if "memory" in controllers:
            files |= {"memory.max": memory, "memory.swap.max": "0"}
        if "cpu" in controllers:
            files["cpu.max"] = f"{quota} {CPU_PERIOD_US}"
        if "pids" in controllers:
            files["pids.max"] = str(limits.pids)
        return {"": files} if files else {}
    per = {"memory": {"memory.limit_in_bytes": memory, "memory.memsw.limit_in_bytes": memory},
           "cpu": {"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": quota},
           "pids": {"pids.max": str(limits.pids)}}
    return {c: per[c] for c in per if c in controllers}


# A shell that joins the cgroups named before "--" and runs the rest: `sh -c SCRIPT NAME files... -- argv`.
ENTER_SCRIPT = 'for f; do shift; [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; done; exec "$@"'


def enter_argv(procs_files: Iterable[Path]) -> list[str]:
    """An argv prefix that puts the process in the cgroups whose ``cgroup.procs`` are given, then
    execs the rest (pure); empty for none. Run as the server (root): the desktop user may not move
    itself."""
    files = [str(f) for f in procs_files]
    return ["sh", "-c", ENTER_SCRIPT, "glassdesk-cgroup", *files, "--"] if files else []


# ------------------------------------------------------------------------- the edge: the files


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: Path) -> str:
    with open(path) as fh:
        return fh.read()


def detect() -> Layout | None:
    """This server's layout, if it may make cgroups in it: its own cgroup's directory writable."""
    try:
        layout = choose_layout(parse_mountinfo(_read(Path("/proc/self/mountinfo"))),
                               parse_proc_cgroup(_read(Path("/proc/self/cgroup"))))
    except OSError:
        return None
    if layout is None or not os.access(layout.kill_base, os.W_OK):
        return None
    return layout


def cgroup_problem(layout: Layout | None) -> str | None:
    """Why sessions get no cgroup (or no limits) with ``layout`` (``detect()``'s), for the start-up
    log and /healthz; None when they get both."""
    if layout is None:
        return ("no writable cgroup file system (cgroup v1 freezer or v2 at /sys/fs/cgroup): a session's "
                "processes are ended by its account's uid only, and have no memory or CPU limit "
                "(run glassdesk as root with /sys/fs/cgroup writable)")
    missing = {"memory", "cpu"} - set(_controllers(layout))
    if missing:
        return f"sessions' cgroups get no {' or '.join(sorted(missing))} limit here (controller not available)"
    return None


def _controllers(layout: Layout) -> list[str]:
    """The limit controllers a session's cgroup may have."""
    if layout.version == 1:
        return [c for c in layout.bases if c != "freezer"]
    try:  # what the server's own cgroup may hand to its children
        return _read(layout.bases[""] / "cgroup.controllers").split()
    except OSError:
        return []


def _enable_v2(directory: Path, controllers: Iterable[str]) -> list[str]:
    """Let ``directory``'s children have these controllers; returns those it got. Fails for the
    server's own cgroup while processes are in it (v2's no-internal-process rule: EBUSY), for
    which the session cgroups then have no limits, only the kill."""
    got = []
    for controller in controllers:
        try:
            _write(directory / "cgroup.subtree_control", f"+{controller}")
            got.append(controller)
        except OSError:
            continue
    return got


@dataclass
class SessionCgroup:
    """One session's cgroup (a directory per hierarchy)."""

    layout: Layout
    dirs: dict[str, Path]
    limited: list[str] = field(default_factory=list)  # the controllers whose limits were set

    @classmethod
    def create(cls, layout: Layout, owner: str, session: str, limits: Limits = Limits()) -> SessionCgroup:
        """Make (or find, after a stop) the session's cgroup and set its limits; OSError if the
        kill hierarchy's directory cannot be made. A limit that cannot be set is logged once and
        left off: the session still runs, and still ends as a whole."""
        dirs = session_dirs(layout, owner, session)
        made: dict[str, Path] = {}
        for controller, directory in dirs.items():
            try:
                directory.mkdir(parents=True, exist_ok=True)
                made[controller] = directory
            except OSError:
                if controller in ("", "freezer"):
                    raise
                log.warning("no %s cgroup for session %s: %s is not writable", controller, session, directory)
        group = cls(layout, made)
        controllers = [c for c in made if c != "freezer"]
        if layout.version == 2:
            wanted = [c for c in ("memory", "cpu", "pids") if c in _controllers(layout)]
            # The server's cgroup hands them to the owner directory (refused while the server's
            # cgroup holds processes and is not the root), which holds no process and hands on.
            controllers = _enable_v2(made[""].parent, _enable_v2(layout.bases[""], wanted))
            if set(wanted) - set(controllers) and not _WARNED:
                _WARNED.append(True)
                log.warning("session isolation degraded: sessions' cgroups get no %s limit: %s cannot hand those "
                            "controllers to its children (v2 lets only a cgroup without processes of its own do "
                            "so; run the server in a leaf cgroup of its own)",
                            " or ".join(sorted(set(wanted) - set(controllers))), layout.bases[""])
        for controller, files in limit_values(layout.version, limits, controllers).items():
            try:
                for name, value in files.items():
                    path = made[controller] / name
                    if path.exists():  # memsw/swap files exist only where swap is accounted
                        _write(path, value)
                group.limited.append(controller or "memory,cpu,pids")
            except OSError as exc:
                log.warning("session %s: %s limit not set: %s", session, controller or "v2", exc)
        return group

    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs.values()]

    def enter_argv(self) -> list[str]:
        return enter_argv(self.procs_files())

    def pids(self) -> list[int]:
        return _pids(self.dirs.get("", self.dirs.get("freezer")))

    def kill(self, timeout: float = 5.0) -> int:
        """End every process in the cgroup; returns how many there were."""
        return kill_dir(self.layout.version, self.dirs["" if self.layout.version == 2 else "freezer"], timeout)

    def remove(self) -> None:
        """Kill what is left and remove the directories (after a session's last stop)."""
        self.kill()
        for directory in self.dirs.values():
            _rmdir(directory)
            _rmdir(directory.parent, quiet=True)  # the owner directory, once its last session is gone


def _pids(directory: Path | None) -> list[int]:
    if directory is None:
        return []
    try:
        return [int(p) for p in _read(directory / "cgroup.procs").split()]
    except (OSError, ValueError):
        return []


def _rmdir(directory: Path, quiet: bool = False, timeout: float = 2.0) -> None:
    """Remove an empty cgroup: its last processes leave it a moment after they die."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if quiet or exc.errno != errno.EBUSY or time.monotonic() > deadline:
                if not quiet:
                    log.warning("cgroup %s not removed: %s", directory, exc)
                return
            time.sleep(0.02)


def kill_dir(version: int, directory: Path, timeout: float = 5.0) -> int:
    """End every process in a cgroup and its children; returns how many were found in it."""
    if not directory.exists():
        return 0
    found = sum(len(_pids(Path(d))) for d, _, _ in os.walk(directory))
    if version == 2 and (directory / "cgroup.kill").exists():
        _write(directory / "cgroup.kill", "1")
    elif version == 2:  # before Linux 5.14: freeze, kill, thaw
        _freeze_kill(directory, "cgroup.freeze", "1", "0", lambda d: _read(d / "cgroup.events").count("frozen 1"))
    else:
        _freeze_kill(directory, "freezer.state", "FROZEN", "THAWED",
                     lambda d: _read(d / "freezer.state").strip() == "FROZEN")
    deadline = time.monotonic() + timeout
    while any(_pids(Path(d)) for d, _, _ in os.walk(directory)):
        if time.monotonic() > deadline:
            log.warning("processes still in cgroup %s after %.0fs", directory, timeout)
            break
        time.sleep(0.02)
    return found


def _freeze_kill(directory: Path, state_file: str, frozen: str, thawed: str, is_frozen) -> None:
    """Freeze the cgroup (nothing in it runs, so nothing forks), SIGKILL all it holds, thaw it so
    the signals are taken. A new process cannot appear while it is frozen."""
    _write(directory / state_file, frozen)
    deadline = time.monotonic() + 2.0
    while not is_frozen(directory) and time.monotonic() < deadline:
        time.sleep(0.01)
    for sub, _, _ in os.walk(directory):
        for pid in _pids(Path(sub)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    _write(directory / state_file, thawed)


def dead_owner_groups(base: Path, alive) -> list[Path]:
    """This server's sibling owner directories (``owner_group``) whose server ``alive((pid, start))``
    says is gone."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    found = []
    for entry in entries:
        owner = group_owner(entry.name)
        if owner is not None and entry.is_dir(follow_symlinks=False) and not alive(owner):
            found.append(Path(entry.path))
    return found


def reap_owner(layout: Layout, owner: str) -> int:
    """End every session cgroup of a dead server (its owner directory in each hierarchy) and
    remove the directories; returns how many processes were in them."""
    killed = 0
    kill_base = layout.kill_base / owner
    if kill_base.is_dir():
        killed = kill_dir(layout.version, kill_base)
    for base in layout.bases.values():
        directory = base / owner
        if not directory.is_dir():
            continue
        for sub in sorted((Path(d) for d, _, _ in os.walk(directory)), key=lambda p: -len(p.parts)):
            _rmdir(sub, quiet=sub == directory)
        _rmdir(directory)
    return killed
