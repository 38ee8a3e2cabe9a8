"""Who the desktop runs as: never root, and never the account of another session.

The desktop is untrusted (a model drives it, pages run in it, `launch` starts programs on it), so
when glassdesk itself runs as root each session's desktop runs as an unprivileged account of its
own, taken from a pool, ``glassdesk-desktop-1`` .. ``glassdesk-desktop-N`` (created by ``make
setup``, i.e. ``docker/install-system-deps.sh``; N is ``GLASSDESK_DESKTOP_USERS`` there, 32 by
default): each its own group, no supplementary groups, no login shell, no sudo. A session takes an
account no live server holds (an exclusive ``flock`` on ``/run/glassdesk/desktop-users/<name>``,
released by the kernel when the server dies) and that runs no process (what a killed server left is
ended first: ``reap_free_accounts``); it gives it back once everything of the session has ended.
With one uid per session the kernel keeps sessions apart: another session's files (its home,
browser profile, downloads, X authority: 0700/0600 to their uid), its processes' memory
(``/proc/PID/mem`` and ptrace need the same uid or CAP_SYS_PTRACE) and its signals.
Every pool account busy: ``DesktopUsersExhausted``, which says how to grow the pool.

An older setup has only the one shared account ``glassdesk-desktop``: every session then runs as
it, which separates the desktop from the server but not one session from another, and the server
says so at start (``isolation_problems``). When glassdesk does not run as root the desktop runs as
the server's own user (the container runs as uid 1000), also reported as degraded.

What stays with the server user: the API, the traces, the session logs, the VNC passwords and the
viewer process that holds them (x11vnc; the live view is relayed by the server itself). The desktop
user can traverse to its own directories in a session (home, browser profile, downloads, runtime
dir) but list or read nothing else there.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from desktop.errors import DesktopUsersExhausted, StackError

# The one shared account of setups before the pool; still used (degraded) when no pool exists.
DESKTOP_USER = "glassdesk-desktop"  # keep in step with docker/install-system-deps.sh
# The pool: glassdesk-desktop-1 .. -N (docker/install-system-deps.sh, GLASSDESK_DESKTOP_USERS).
POOL_PREFIX = f"{DESKTOP_USER}-"
LOCK_DIR = Path("/run/glassdesk/desktop-users")
X11_SOCKET_DIR = Path("/tmp/.X11-unix")
ICE_SOCKET_DIR = Path("/tmp/.ICE-unix")


@dataclass(frozen=True)
class DesktopUser:
    name: str
    uid: int
    gid: int
    # A pool account this session alone runs as: every process of its uid is the session's, so
    # "kill all of the uid" is a whole-kill (kill_all). False for the shared legacy account.
    exclusive: bool = False


def _checked(entry: pwd.struct_passwd, exclusive: bool) -> DesktopUser:
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise StackError(f"the desktop user {entry.pw_name!r} has uid {entry.pw_uid} / gid {entry.pw_gid}: "
                         "it must be an unprivileged account, not root")
    return DesktopUser(entry.pw_name, entry.pw_uid, entry.pw_gid, exclusive)


def pool_accounts(entries: Iterable[pwd.struct_passwd]) -> list[DesktopUser]:
    """The pool's accounts among ``entries`` (pure): ``glassdesk-desktop-<n>``, by n."""
    found = []
    for entry in entries:
        suffix = entry.pw_name[len(POOL_PREFIX):] if entry.pw_name.startswith(POOL_PREFIX) else ""
        if suffix.isdigit():
            found.append((int(suffix), _checked(entry, exclusive=True)))
    return [user for _, user in sorted(found)]


def pick_account(accounts: Iterable[DesktopUser], taken: Collection[int]) -> DesktopUser | None:
    """The first account whose uid is not ``taken`` (held by a session, or running a process) (pure)."""
    return next((user for user in accounts if user.uid not in taken), None)


def desktop_user(euid: int | None = None,
                 lookup: Callable[[str], pwd.struct_passwd] = pwd.getpwnam) -> DesktopUser | None:
    """The shared account (``glassdesk-desktop``) of a root server without a pool: None when
    glassdesk is not root (the desktop then runs as the current user). A root server without that
    account is an error, never a silent fallback to a root desktop. Sessions take theirs from
    ``desktop_users`` (the pool first)."""
    if (os.geteuid() if euid is None else euid) != 0:
        return None
    try:
        entry = lookup(DESKTOP_USER)
    except KeyError:
        raise StackError(f"glassdesk runs as root but the user {DESKTOP_USER!r} its desktop runs as does not "
                         "exist: run `make setup` as root (or `docker/install-system-deps.sh`), "
                         "which creates it") from None
    return _checked(entry, exclusive=False)


def write_file_argv(path: str) -> list[str]:
    """The command that writes its stdin to ``path``, its directories made (pure): run as the
    desktop user, so the file is that user's and nothing it may not write is written."""
    return ["sh", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', "sh", path]


def uids_running() -> set[int]:
    """The uids of every live process (zombies are dead: their uid is free)."""
    uids = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            uids.add(entry.stat().st_uid)
        except (OSError, IndexError):
            continue
    return uids


def kill_all(user: DesktopUser, rounds: int = 50) -> int:
    """End every process of a pool account, whatever it did to detach (double fork, setsid, an
    empty environment, another working directory): a process cannot leave its uid. ``kill -KILL -1``
    run as the account signals every process the account may signal, i.e. all of its own, at once
    (a forking loop cannot outrun it as it can a pid-by-pid kill); repeated until none runs.
    Returns the rounds it took (0: nothing ran). Never for a shared account or the server's own."""
    if not user.exclusive or user.uid in (0, os.getuid()):
        raise ValueError(f"{user.name!r} is not an account of one session: its processes are not all the session's")
    for done in range(rounds):
        if user.uid not in uids_running():
            return done
        subprocess.run([*run_as_argv(user), "kill", "-KILL", "-1"], cwd="/", env={"PATH": os.defpath},
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        time.sleep(0.02 * done)
    raise StackError(f"processes of {user.name} (uid {user.uid}) still run after {rounds} rounds of kill -1")


class DesktopUsers:
    """This process's share of the pool: which accounts its sessions hold, and their locks."""

    def __init__(self, lock_dir: Path = LOCK_DIR,
                 entries: Callable[[], Iterable[pwd.struct_passwd]] = pwd.getpwall):
        self.lock_dir = lock_dir
        self._entries = entries
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}  # uid -> the locked file's descriptor

    def accounts(self) -> list[DesktopUser]:
        return pool_accounts(self._entries())

    def _try_lock(self, user: DesktopUser) -> int | None:
        self.lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Not inherited (O_CLOEXEC): the lock lives exactly as long as this server process.
        fd = os.open(self.lock_dir / user.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            os.close(fd)
            return None

    def claim(self) -> DesktopUser | None:
        """An account for a new session: None when the server is not root (the desktop runs as the
        server's user); the shared legacy account when there is no pool; else a pool account that
        no live server holds and that runs nothing. DesktopUsersExhausted when all are taken."""
        if os.geteuid() != 0:
            return None
        accounts = self.accounts()
        if not accounts:
            return desktop_user()
        with self._lock:
            taken = set(self._held) | uids_running()
            while (user := pick_account(accounts, taken)) is not None:
                taken.add(user.uid)
                fd = self._try_lock(user)
                if fd is None:
                    continue  # another server's
                if user.uid in uids_running():  # a process started before we locked it: not free
                    os.close(fd)
                    continue
                self._held[user.uid] = fd
                return user
        raise DesktopUsersExhausted(
            f"all {len(accounts)} desktop accounts ({POOL_PREFIX}1..{len(accounts)}) run a session already, "
            "and a session never shares its account with another; end a session, or grow the pool: "
            f"`sudo GLASSDESK_DESKTOP_USERS={max(2 * len(accounts), 8)} bash docker/install-system-deps.sh` "
            "(or `make setup` as root) adds accounts")

    def release(self, user: DesktopUser | None) -> None:
        """Give an account back once nothing of its session runs (the caller ended it all)."""
        if user is None or not user.exclusive:
            return
        with self._lock:
            fd = self._held.pop(user.uid, None)
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the file description drops the flock

    def holds(self, uid: int) -> bool:
        with self._lock:
            return uid in self._held

    def reap_free(self) -> int:
        """End the processes of every pool account no live server holds: a server killed with its
        reaper (kill -9 of both, a container's stop) left them; nothing else runs as those accounts.
        Returns how many accounts had processes. Only for root; 0 otherwise."""
        if os.geteuid() != 0:
            return 0
        reaped = 0
        running = uids_running()
        for user in self.accounts():
            if user.uid not in running or self.holds(user.uid):
                continue
            fd = self._try_lock(user)
            if fd is None:  # a live server's session
                continue
            try:
                kill_all(user)
                reaped += 1
            finally:
                os.close(fd)
        return reaped


desktop_users = DesktopUsers()


def isolation_problems(euid: int | None = None, users: DesktopUsers | None = None) -> list[str]:
    """How this server's sessions are less separated than they could be, for its start-up log and
    /healthz: empty when each session gets an account of its own."""
    if (os.geteuid() if euid is None else euid) != 0:
        return ["not root: every session's desktop runs as the server's own user, so sessions can read "
                "each other's files and memory (run glassdesk as root, after `make setup` as root)"]
    if not (users or desktop_users).accounts():
        return [f"no desktop-user pool ({POOL_PREFIX}1..N): every session's desktop runs as the one account "
                f"{DESKTOP_USER!r} (run `make setup` as root, or docker/install-system-deps.sh, to create the pool)"]
    return []


def popen_kwargs(user: DesktopUser | None) -> dict:
    """``subprocess.Popen`` arguments that start a process as ``user`` (none: as this process).
    ``extra_groups=[]`` drops root's supplementary groups instead of keeping them."""
    if user is None:
        return {}
    return {"user": user.uid, "group": user.gid, "extra_groups": []}


def run_as_argv(user: DesktopUser | None) -> list[str]:
    """An argv prefix that runs the rest of the command line as ``user``, for launchers that take no
    Popen arguments: ``[*run_as_argv(user), program, *args]``, or a script that execs it (Playwright
    takes one executable path: desktop.browser.chromium writes one). Empty for None.

    util-linux ``setpriv`` sets the real, effective and saved ids to the user's, clears the
    supplementary groups, and root's capabilities go with the uid change; it execs the program, so
    inherited descriptors (a pipe transport's fds 3 and 4) pass through unchanged."""
    if user is None:
        return []
    return ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--"]


def may_traverse(mode: int, owner: int, group: int, user: DesktopUser) -> bool:
    """Whether ``user`` (with no supplementary groups) may pass through a directory (pure; ACLs
    are not considered: glassdesk sets none)."""
    if owner == user.uid:
        return bool(mode & stat.S_IXUSR)
    if group == user.gid:
        return bool(mode & stat.S_IXGRP)
    return bool(mode & stat.S_IXOTH)


def unreachable_dir(path: Path, user: DesktopUser) -> Path | None:
    """The first directory on the way to ``path`` that ``user`` cannot pass through, or None."""
    for directory in [*reversed(path.parents), path]:
        info = directory.stat()
        if not may_traverse(info.st_mode, info.st_uid, info.st_gid, user):
            return directory
    return None


def share_traversal(directory: Path, user: DesktopUser | None) -> None:
    """Let the desktop user pass through a directory of the server's without listing or reading
    it: owner the server, group the desktop user's, mode 0710."""
    if user is None:
        return
    os.chown(directory, -1, user.gid, follow_symlinks=False)
    directory.chmod(0o710)


def open_session_root(root: Path, users: DesktopUsers | None = None) -> None:
    """Let the desktop users pass through the directory that holds the sessions. With a pool every
    account must reach its own session's directory, so the root is 0711 (anyone may pass through,
    nobody but the server may list it) and each session's directory is 0710 to its own account's
    group (``share_traversal``): another session's account stops there. With the shared account:
    0710, group desktop. Nothing to do when the desktop runs as this user; nor when its account is
    missing: starting a session says so."""
    if os.geteuid() == 0 and (users or desktop_users).accounts():
        root.chmod(0o711)
        return
    try:
        user = desktop_user()
    except StackError:
        return
    share_traversal(root, user)


def hand_over(directory: Path, user: DesktopUser) -> None:
    """Give a directory the server just filled to the desktop user, 0700.

    Bottom-up and without following links: while a directory is being handed over its parent is
    still the server's, so the desktop user (who may already run other sessions) cannot swap a
    path under it for a link to a file of the server's."""
    for root, dirs, files in os.walk(directory, topdown=False):
        for name in [*files, *dirs]:
            os.chown(os.path.join(root, name), user.uid, user.gid, follow_symlinks=False)
    os.chown(directory, user.uid, user.gid, follow_symlinks=False)
    directory.chmod(0o700)


def open_without_links(directory: Path, *names: str, flags: int = os.O_RDONLY) -> int:
    """Open ``directory/names...`` following no symbolic link on the way, for a server that reads
    or writes a file inside a tree the desktop user owns (it could have put a link to any file of
    the server's there). Non-blocking, so a FIFO put in the file's place cannot hang the caller;
    the caller checks what it opened (``os.fstat``)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in names[:-1]:
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(names[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)


def ensure_x11_socket_dir(path: Path = X11_SOCKET_DIR) -> None:
    """An Xvfb that is not root cannot create /tmp/.X11-unix (or gets one it owns, which X
    warns about): make it as root X servers do, root-owned, 1777. Only call as root."""
    try:
        path.mkdir(mode=0o1777)
    except FileExistsError:
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode):
            raise StackError(f"{path} is not a directory; X servers need it for their sockets") from None
        if info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o1777:
            return
    os.chown(path, 0, 0, follow_symlinks=False)
    path.chmod(0o1777)  # mkdir's mode is masked by the umask


def remove_stale_ice_sockets(directory: Path = ICE_SOCKET_DIR) -> int:
    """Remove the session-manager sockets of processes that no longer run; returns how many.

    xfce4-session listens on /tmp/.ICE-unix/<its pid> and, killed at teardown, leaves the socket
    behind. One that later gets the same pid cannot start ("server already running") when that
    socket is another user's, as the desktop user cannot remove root's from the sticky directory.
    Root can: before a desktop starts, the sockets whose pid is gone are removed."""
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.isdigit() or os.path.exists(f"/proc/{entry.name}"):
            continue
        try:
            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed
