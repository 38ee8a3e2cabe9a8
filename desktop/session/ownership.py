"""How no desktop outlives the server that owns it: the arrangement ``own_desktops`` that
``glassdesk up`` and ``glassdesk mcp`` both make (see desktop.x11.procs for the whole story: the
reaper, the owner record, the start-up reap), over the processes (desktop.x11.procs) and the
network namespaces (desktop.network.netns) a session has.

- ``python -P -m desktop.session.ownership FD MARK ROOT`` is the reaper process: it ends the
  server's desktops the moment the server is gone, however it went;
- ``reap_predecessors`` ends, at start, what dead servers left when their reaper died with them.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from desktop.network import netns
from desktop.x11.procs import (
    OWNER_RECORD,
    OWNER_VAR,
    ROOT_PREFIX,
    TEMP_DIR,
    Leftovers,
    ProcessId,
    end_detached,
    end_processes,
    leftovers,
    mark_owner,
    owned_pids,
    owner_alive,
    process_table,
    read_owner_records,
    this_process,
    use_temp_dir,
)

log = logging.getLogger("glassdesk.procs")


def reap_predecessors(temp_dir: Path | None = None) -> Leftovers:
    """End what dead servers left in ``temp_dir`` (default: the temp dir) and remove their roots.

    For when a server's reaper died with it. A live server's desktops are never touched: its
    owner record names a process that still runs (see ``leftovers``).
    """
    records = read_owner_records(Path(temp_dir or tempfile.gettempdir()))
    me, uid = this_process(), os.getuid()
    found = leftovers(records, process_table(), me, uid)
    if found.pids:
        end_processes(lambda: leftovers(records, process_table(), me, uid).pids)
    for root in found.roots:
        shutil.rmtree(root, ignore_errors=True)
    detached = end_detached()
    if detached:
        log.warning("ended %d process(es) in the cgroups of a server that is gone", detached)
    # Their sessions' network namespaces (named by their server: desktop.network.netns). Judged
    # against a fresh table: the processes above are gone by now.
    table = process_table()
    found.namespaces = netns.remove_dead(
        lambda pid, start: owner_alive(ProcessId(pid, start, me.boot_id, me.pid_ns), table, me))
    if found.pids or found.roots or found.namespaces:
        log.warning("ended %d process(es), removed %d session root(s) and %d network namespace(s) left by a "
                    "server that is gone", len(found.pids), len(found.roots), len(found.namespaces))
    return found


# ------------------------------------------------------------------------------- the reaper


def start_reaper(mark: str, root: Path) -> int:
    """Start a reaper for this process; returns the pipe end to keep open for as long as we live.

    The reaper runs in its own process session, so a client's kill of our process group does not
    reach it. It blocks on a pipe whose only writer is this process; once that end closes, however
    this process ended, it ends the desktops ``mark`` owns (``owned_pids``) and removes ``root``.
    """
    read_fd, write_fd = os.pipe()  # both ends non-inheritable: only the reaper gets read_fd
    env = {k: v for k, v in os.environ.items() if k != OWNER_VAR}  # it must not find itself
    # -P: the working directory (an MCP client's, anything) must not shadow the desktop package.
    subprocess.Popen([sys.executable, "-P", "-m", "desktop.session.ownership", str(read_fd), mark, str(root)],
                     pass_fds=(read_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     start_new_session=True, env=env)
    os.close(read_fd)
    return write_fd


def reap(fd: int, mark: str, root: str) -> None:
    """Wait for the owner's end of the pipe to close, then end what it left and remove ``root``."""
    while os.read(fd, 1):
        pass
    uid = os.getuid()
    end_processes(lambda: owned_pids(process_table(), mark, Path(root), uid=uid))
    end_detached(mark_owner(mark))  # what left every mark: the owner's cgroups, its accounts' processes
    shutil.rmtree(root, ignore_errors=True)
    owner = mark_owner(mark)
    if owner is not None:  # the sessions' network namespaces, named by their server
        netns.remove_owned_by(*owner)


@dataclass
class Ownership:
    """This server's claim on its desktops: where their files go, and their mark."""

    root: Path
    mark: str
    reaped: Leftovers  # what dead predecessors had left, ended before this server started

    def close(self) -> None:
        """After a clean shutdown (sessions closed): remove the session root."""
        shutil.rmtree(self.root, ignore_errors=True)


_KEEP: list[int] = []  # the reaper's pipe: held open for the life of the process; its closing is the signal


def own_desktops(prefix: str = ROOT_PREFIX) -> Ownership:
    """Make the desktops this process will start die with it. Call once, before starting any.

    Ends what dead predecessors left (``reap_predecessors``), makes a session root with an owner
    record, marks this process's environment (every desktop process inherits the mark) and starts
    the reaper. Not PR_SET_PDEATHSIG: sessions start from worker threads, and that signal fires
    when the forking thread exits, not the process.
    """
    reaped = reap_predecessors()
    me = this_process()
    root = Path(tempfile.mkdtemp(prefix=prefix))  # mode 0700
    mark = f"{me.pid}-{me.start_time}-{secrets.token_hex(8)}"
    fd = os.open(root / OWNER_RECORD, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(me.as_dict() | {"mark": mark}, fh)
    os.environ[OWNER_VAR] = mark  # inherited by every process the sessions start
    temp = root / TEMP_DIR
    temp.mkdir(mode=0o700)
    use_temp_dir(temp)
    _KEEP.append(start_reaper(mark, root))
    return Ownership(root, mark, reaped)


if __name__ == "__main__":  # the reaper process: python -m desktop.session.ownership FD MARK ROOT
    reap(int(sys.argv[1]), sys.argv[2], sys.argv[3])
