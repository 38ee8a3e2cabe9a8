"""Processes by what /proc says of them, and the reaper that outlives a killed server.

Teardown finds a session's processes three ways: its children's process groups, the environment
tag every one of them inherits, and the process sessions its children started (Chromium rewrites
its environment, so the tag misses it). The reaper is the backstop for a server that dies without
closing its sessions (SIGKILL, a crash, an MCP client that kills it right after closing stdin).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


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


def session_pids(sids: set[int]) -> list[int]:
    """Every live process in one of these process sessions. Each child starts its own session,
    and Chromium, which rewrites its environment (and so loses the tag), stays in its session."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) in sids and int(entry.name) != os.getpid():  # field 6: session id
            pids.append(int(entry.name))
    return pids


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


# ------------------------------------------------------------------------------------ the reaper


def start_reaper(mark_name: str, mark_value: str, root: Path) -> int:
    """Start a reaper for this process; returns the pipe end to keep open for as long as we live.

    The reaper runs in its own process session, so a client's kill of our process group does not
    reach it. It blocks on a pipe whose only writer is this process; once that end closes, however
    this process ended, it ends every process whose environment carries ``mark_name=mark_value``
    (every desktop process inherits it) and removes ``root``.
    """
    read_fd, write_fd = os.pipe()  # both ends non-inheritable: only the reaper gets read_fd
    env = {k: v for k, v in os.environ.items() if k != mark_name}
    # -P: the working directory (an MCP client's, anything) must not shadow the desktop package.
    subprocess.Popen([sys.executable, "-P", "-m", "desktop.procs", str(read_fd), mark_name, mark_value, str(root)],
                     pass_fds=(read_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     start_new_session=True, env=env)
    os.close(read_fd)
    return write_fd


def reap(fd: int, mark_name: str, mark_value: str, root: str) -> None:
    """Wait for the owner's end of the pipe to close, then end what it left and remove ``root``."""
    while os.read(fd, 1):
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGKILL, signal.SIGKILL):
        pids = pids_with_env(mark_name, mark_value)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        time.sleep(0.3)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":  # the reaper process: python -m desktop.procs FD NAME VALUE ROOT
    reap(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
