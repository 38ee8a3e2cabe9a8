"""Who the desktop runs as: never root.

The desktop is untrusted (a model drives it, pages run in it, `launch` starts programs on it), so
when glassdesk itself runs as root its desktop processes run as the unprivileged account
``glassdesk-desktop`` (created by ``make setup``, i.e. ``docker/install-system-deps.sh``): its own
group, no supplementary groups, no login shell, no sudo. When glassdesk does not run as root the
desktop runs as the same user as the server, as before (the container runs as uid 1000).

What stays with the server user: the API, the traces, the session logs, the VNC passwords and the
viewer process that holds them (x11vnc; the live view is relayed by the server itself). The desktop
user can traverse to its own directories in a session (home, browser profile, downloads, runtime
dir) but list or read nothing else there.

All sessions share the one account, so this separates the desktop from the server, not one
session's desktop from another's.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from desktop.errors import StackError

DESKTOP_USER = "glassdesk-desktop"  # keep in step with docker/install-system-deps.sh
X11_SOCKET_DIR = Path("/tmp/.X11-unix")
ICE_SOCKET_DIR = Path("/tmp/.ICE-unix")




@dataclass(frozen=True)
class DesktopUser:
    name: str
    uid: int
    gid: int


def desktop_user(euid: int | None = None,
                 lookup: Callable[[str], pwd.struct_passwd] = pwd.getpwnam) -> DesktopUser | None:
    """The account the desktop runs as: None when glassdesk is not root (the desktop then runs as
    the current user); ``glassdesk-desktop`` when it is. A root server without that account is an
    error, never a silent fallback to a root desktop."""
    if (os.geteuid() if euid is None else euid) != 0:
        return None
    try:
        entry = lookup(DESKTOP_USER)
    except KeyError:
        raise StackError(f"glassdesk runs as root but the user {DESKTOP_USER!r} its desktop runs as does not "
                         "exist: run `make setup` as root (or `docker/install-system-deps.sh`), "
                         "which creates it") from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise StackError(f"the desktop user {DESKTOP_USER!r} has uid {entry.pw_uid} / gid {entry.pw_gid}: "
                         "it must be an unprivileged account, not root")
    return DesktopUser(DESKTOP_USER, entry.pw_uid, entry.pw_gid)


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


def open_session_root(root: Path) -> None:
    """Let the desktop user pass through the directory that holds the sessions (0710, group
    desktop). Nothing to do when the desktop runs as this user; nor when its account is missing:
    starting a session says so."""
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
