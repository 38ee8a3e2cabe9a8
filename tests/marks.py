"""Finding what a server started as a subprocess left running, by a mark in its environment.

A test starts the server with ``GLASSDESK_TEST_MARK=<uuid>``. The desktop's processes no longer
inherit that (they get only named variables: desktop.session.stack.INHERITED), but every one of them
carries its server's owner mark (desktop.x11.procs.OWNER_VAR), and the server's reaper carries both.
So the owner marks seen beside the test's mark are remembered, and what the server left behind is
found after the server itself is gone."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from desktop.x11.procs import OWNER_VAR, pids_with_env

MARK = "GLASSDESK_TEST_MARK"

# The console script of the Python running the tests: the servers tests start are this checkout's.
GLASSDESK = str(Path(sys.executable).with_name("glassdesk"))

_owners: dict[str, set[str]] = {}


def server_env(base: dict[str, str], mark: str) -> dict[str, str]:
    """``base`` with the test's mark, and without this process's own owner mark (set when a test
    here ran sessions in process): the server makes its own, and the one it inherited would stay
    in its /proc environ and name this process's sessions as its."""
    return {**without_owner(base), MARK: mark}


def without_owner(env: dict[str, str]) -> dict[str, str]:
    """``env`` (say ``os.environ`` and more) fit for a server started as a subprocess: without this
    process's owner mark. A server replaces the mark it inherits, but /proc shows the environment it
    started with, so whoever reads it there (a reaper, ``marked``) would take this process's
    sessions for the child's."""
    return {k: v for k, v in env.items() if k != OWNER_VAR}


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw.split(b"\0") if item)


def marked_pids(mark: str) -> set[int]:
    """Every live process carrying ``mark``, or the owner mark of a server process that carried it."""
    owners = _owners.setdefault(mark, set())
    pids = set(pids_with_env(MARK, mark))
    owners.update(owner for pid in pids if (owner := _environ(pid).get(OWNER_VAR)))
    for owner in owners:
        pids.update(pids_with_env(OWNER_VAR, owner))
    pids.discard(os.getpid())
    return pids


def marked(mark: str) -> dict[int, str]:
    """pid -> command name of every live process the server carrying ``mark`` started."""
    found = {}
    for pid in marked_pids(mark):
        try:
            found[pid] = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
    return found


def assert_all_gone(mark: str, wait_s: float = 30) -> None:
    """Poll until no marked process is left; kill and report any that stay."""
    deadline = time.monotonic() + wait_s
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    described = {pid: describe(pid) for pid in left}  # before the kill: how each one was stuck
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"processes left behind: {described}"


def describe(pid: int) -> str:
    """A process's name, state, uid and cgroups, for a failure's message: why it was not ended."""
    try:
        status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":\t" in line)
        groups = ",".join(line.split(":", 1)[1] for line in Path(f"/proc/{pid}/cgroup").read_text().split()
                          if line.split(":")[1] in ("freezer", "memory", ""))
    except OSError:
        return "gone"
    return f"{status.get('Name')} state={status.get('State')} uid={status.get('Uid', '').split()[:1]} cgroups={groups}"
