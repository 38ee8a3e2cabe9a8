"""A network namespace per session: the desktop reaches nothing but the session's policy proxy.

Why: the proxy (``desktop.network.proxy``) enforces the session's network policy, but only
Chromium is told to use it (``--proxy-server``). Any other program on the desktop (one ``launch``
started, a terminal, what a page talked the model into starting) would connect wherever it
likes: a host the policy denies, glassdesk's API port, another session's proxy. In a namespace of
its own with a loopback interface and nothing else (no veth, no route out), a program reaches only
what listens inside it: the session's proxy, whose listening socket is made inside the namespace
(:func:`inside`: a socket stays in the namespace it was made in), while the proxy's own
connections out are made from the server's namespace and obey the policy. Proxy-aware programs
get ``http_proxy`` and friends (``desktop.network.policy.proxy_environment``); the rest reach
nothing.

What runs inside: every desktop process but Xvfb (dbus, XFCE, Chromium, launched programs),
entered with :meth:`SessionNamespace.argv` (``nsenter --net=... --``) before the program drops to
the desktop user. Xvfb stays outside: X clients reach it by its socket file in /tmp/.X11-unix, which
no network namespace hides (its abstract socket, per namespace, is then out of their reach, and
so is every other session's). x11vnc stays with the server.

What it needs: root (CAP_SYS_ADMIN: ``ip netns add`` mounts the namespace at /run/netns/NAME,
``nsenter`` and ``setns`` enter it), iproute2's ``ip``, util-linux's ``nsenter``. Without them
(:func:`support` says why) a session runs as before: only Chromium is behind the policy, and the
server says so at start.

Names: ``glassdesk-<server pid>-<its start time>-<session tag>``. The server's reaper removes its
own when the server dies (``desktop.session.ownership.reap``), and a server starting up removes those whose
server is gone (``desktop.session.ownership.reap_predecessors``), as it does for processes and files.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import secrets
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

log = logging.getLogger("glassdesk.netns")

NETNS_DIR = Path("/run/netns")  # where `ip netns` mounts named namespaces
PREFIX = "glassdesk-"
CLONE_NEWNET = 0x40000000
_NAME = re.compile(r"^glassdesk-(\d+)-(\d+)-([0-9a-z]+)$")

T = TypeVar("T")


class NamespaceError(RuntimeError):
    """A namespace could not be made; the message says what ``ip`` answered. (Not
    desktop.errors.StackError: the reaper imports this module and must start fast, without pydantic.)"""


def namespace_name(owner_pid: int, owner_start: int, tag: str) -> str:
    """The namespace of the session ``tag`` of the server (pid, /proc start time) (pure)."""
    if not re.fullmatch(r"[0-9a-z]{1,32}", tag):
        raise ValueError(f"session tag {tag!r}: 1-32 of 0-9 a-z")
    return f"{PREFIX}{owner_pid}-{owner_start}-{tag}"


@functools.cache
def _this_server() -> tuple[int, int]:
    """This process's pid and /proc start time (as desktop.x11.procs counts them)."""
    with open("/proc/self/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return os.getpid(), int(fields[19])


def name_for(tag: str) -> str:
    """The name of this server's namespace for the session ``tag``."""
    return namespace_name(*_this_server(), tag)


def owner_of(name: str) -> tuple[int, int] | None:
    """(pid, start time) of the server a namespace name says owns it; None: not one of ours (pure)."""
    match = _NAME.match(name)
    return (int(match[1]), int(match[2])) if match else None


def _ip(*args: str, timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)


@functools.cache
def support() -> str | None:
    """None when this server can give each session a network namespace; else why not (the
    sessions then run with only the browser behind the policy: desktop.session.stack.isolation
    reports it as degraded, at start and in /healthz). Tried for real once per process (a root
    without CAP_SYS_ADMIN, in a container, cannot): a namespace made and removed."""
    return _support()


def _support() -> str | None:
    if os.geteuid() != 0:
        return "the server does not run as root (making and entering a network namespace needs CAP_SYS_ADMIN)"
    for program, package in (("ip", "iproute2"), ("nsenter", "util-linux")):
        if shutil.which(program) is None:
            return f"{program} is not installed ({package}; docker/install-system-deps.sh installs it)"
    probe = SessionNamespace(name_for(f"probe{secrets.token_hex(4)}"))  # reaped like any, should we die now
    try:
        probe.create()
    except (NamespaceError, OSError, subprocess.SubprocessError) as exc:
        return f"a network namespace could not be made: {exc}"
    finally:
        probe.delete()
    return None


@dataclass(frozen=True)
class SessionNamespace:
    """One session's network namespace, by name (``ip netns``)."""

    name: str

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def create(self) -> SessionNamespace:
        """Make it, with its loopback up (so the proxy can listen on 127.0.0.1 inside) and nothing
        else: no other interface, no route, so nothing inside reaches out but through the proxy."""
        for args in (("netns", "add", self.name), ("-n", self.name, "link", "set", "lo", "up")):
            done = _ip(*args)
            if done.returncode != 0:
                self.delete()
                raise NamespaceError(f"the session's network namespace {self.name} could not be made "
                                 f"(ip {' '.join(args)}: {done.stderr.strip() or done.returncode})")
        return self

    def delete(self) -> None:
        """Remove it (what still runs inside keeps it until it ends; nothing should)."""
        if self.path.exists() or self.path.is_symlink():
            done = _ip("netns", "delete", self.name)
            if done.returncode != 0 and self.path.exists():
                log.warning("could not remove network namespace %s: %s", self.name, done.stderr.strip())

    def argv(self) -> list[str]:
        """The argv prefix that runs a program inside (as root: put the drop to the desktop
        user after it). nsenter execs the program itself: same pid, same process group."""
        return ["nsenter", f"--net={self.path}", "--"]

    def inside(self, make: Callable[[], T]) -> T:
        """``make()`` run inside the namespace, on a thread of its own (``setns`` moves only the
        calling thread; Python 3.11 has no os.setns): for a socket that must live in it."""
        return inside(self.path, make)


_libc = None


def _setns(fd: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def inside(path: Path, make: Callable[[], T]) -> T:
    """Run ``make()`` in the network namespace at ``path`` on a new thread, and return what it
    returned (or raise what it raised). The thread enters, makes, goes back and ends: no other
    thread of the server ever changes namespace."""
    result: list = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    _setns(target)
                finally:
                    os.close(target)
                try:
                    result.append(make())
                finally:
                    _setns(own)  # should this fail, the thread ends here anyway
            finally:
                os.close(own)
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=run, name="glassdesk-netns", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def ours() -> list[str]:
    """The names of glassdesk's session namespaces on this machine."""
    try:
        return sorted(name for name in os.listdir(NETNS_DIR) if owner_of(name) is not None)
    except OSError:
        return []


def remove_owned_by(pid: int, start: int) -> int:
    """Remove the namespaces of the server (pid, start time); how many there were."""
    gone = [name for name in ours() if owner_of(name) == (pid, start)]
    for name in gone:
        SessionNamespace(name).delete()
    return len(gone)


def remove_dead(alive: Callable[[int, int], bool]) -> list[str]:
    """Remove the namespaces whose server is gone (``alive(pid, start)`` says); their names."""
    gone = [name for name in ours() if (owner := owner_of(name)) is not None and not alive(*owner)]
    for name in gone:
        SessionNamespace(name).delete()
    return gone
