"""Sessions kept apart by the kernel (issue 23, items 1 and 3), on the real stack.

From a program started in session A the way ``launch`` starts one (A's argv prefix: A's cgroup, A's
account; A's environment), session B's files, B's Chromium memory and B's display are out of
reach, and every display is refused to ``nobody``. A program that detaches every way it can (a
double fork, ``setsid``, ``chdir /``, an empty environment) is gone after DELETE, after a clean
stop, and after a kill -9 of the server and its reaper followed by a restart.

Each of these passed for the attacker when every session ran as the one account glassdesk-desktop
(A read B's profile and authority file, B's Chromium memory, and so B's display), and the detached
program outlived all three ends.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop.x11.procs import start_time
from tests.conftest import session_files

pytestmark = [pytest.mark.x11,
              pytest.mark.skipif(os.geteuid() != 0, reason="sessions get accounts and cgroups of their own only "
                                                         "when glassdesk is root")]

PYTHON = "/usr/bin/python3"  # the system's: readable by every account (the venv's may not be)


@pytest.fixture(scope="module")
def other(manager, desk):
    session = manager.create("iso-b")
    yield session
    manager.delete("iso-b")


def in_session(session, argv: list[str], **env) -> subprocess.CompletedProcess:
    """Run ``argv`` as ``launch`` would in ``session``: its prefix (cgroup, account), its environment."""
    return subprocess.run([*session.stack.run_prefix(), *argv], env={**session.stack.env(), **env},
                          capture_output=True, text=True, errors="replace", timeout=20, cwd="/")


def test_each_session_runs_as_an_account_of_its_own(desk, other):
    a, b = desk.stack.user, other.stack.user
    assert a.exclusive and b.exclusive and a.uid != b.uid and a.gid != b.gid
    assert a.name.startswith("glassdesk-desktop-") and b.name.startswith("glassdesk-desktop-")
    for session in (desk, other):
        stack = session.stack
        user = stack.user
        for path in (stack.home, stack.profile, stack.downloads, stack.workdir / "tmp", stack.workdir / "run"):
            info = path.stat()
            assert (info.st_uid, info.st_mode & 0o777) == (user.uid, 0o700), path
        info = stack.xauthority.stat()
        assert (info.st_uid, info.st_mode & 0o777) == (user.uid, 0o600)
        assert stack.env()["TMPDIR"] == str(stack.workdir / "tmp")
        # every process in the session's cgroup is the session's account's, but the viewer's (server-side)
        cgroup_pids = set(stack.cgroup.pids())
        viewer = stack.children["x11vnc"].popen.pid
        assert viewer in cgroup_pids and stack.children["chromium"].popen.pid in cgroup_pids
        # A program entering the cgroup is root for a moment (enter_argv's shell joins, then execs
        # setpriv): a moment later it runs as the account, or is gone.
        wait_for(lambda s=stack, v=viewer: not strangers(s, v))
        left = strangers(stack, viewer)
        assert not left, f"processes of another uid in the session's cgroup: {left}"


def strangers(stack, viewer: int) -> dict[int, tuple[int, str]]:
    """pid -> (uid, name) of the processes in the session's cgroup that are not its account's, but the viewer."""
    found = {}
    for pid in set(stack.cgroup.pids()) - {viewer}:
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
            if uid != stack.user.uid:
                found[pid] = (uid, Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            continue
    return found


def test_a_program_in_one_session_cannot_read_anothers_files(desk, other):
    b = other.stack
    # The control: B's own account reads them, so the refusals below are about who asks.
    own = in_session(other, ["cat", str(b.xauthority)])
    assert own.returncode == 0 and own.stdout
    for argv in (["cat", str(b.xauthority)], ["ls", str(b.profile)], ["cat", str(b.profile / "Default/Preferences")],
                 ["ls", str(b.downloads)], ["ls", str(b.home)], ["ls", str(b.workdir / "tmp")]):
        refused = in_session(desk, argv)
        assert refused.returncode != 0 and "Permission denied" in refused.stderr, (argv, refused)


MEMORY = """
import sys
pid = sys.argv[1]
start = int(open(f"/proc/{pid}/maps").readline().split("-")[0], 16)
with open(f"/proc/{pid}/mem", "rb") as fh:
    fh.seek(start)
    print(len(fh.read(4096)))
"""


def test_a_program_in_one_session_cannot_read_another_browsers_memory_nor_signal_it(desk, other):
    chromium = str(other.stack.children["chromium"].popen.pid)
    # The control: with B's uid (as when every session shared one account) its memory is read.
    same = in_session(other, [PYTHON, "-c", MEMORY, chromium])
    assert same.returncode == 0 and same.stdout.strip() == "4096", same.stderr
    refused = in_session(desk, [PYTHON, "-c", MEMORY, chromium])
    assert refused.returncode != 0 and "PermissionError" in refused.stderr, refused
    for argv in (["cat", f"/proc/{chromium}/environ"], ["kill", "-0", chromium]):
        refused = in_session(desk, argv)
        assert refused.returncode != 0, (argv, refused)
    # Without hidepid, /proc still lists B's processes and their command lines (no secret is on them:
    # desktop.session.stack.desktop_environment keeps secrets out of every desktop process).
    assert in_session(desk, ["cat", f"/proc/{chromium}/cmdline"]).returncode == 0


def test_a_program_in_one_session_cannot_reach_anothers_display(desk, other):
    b = other.stack
    # With B's cookie file named, as a program that knew where it is would try
    for argv in (["xdpyinfo"], ["wmctrl", "-l"]):
        refused = in_session(desk, argv, DISPLAY=b.display, XAUTHORITY=str(b.xauthority))
        assert refused.returncode != 0, (argv, refused)
        assert "Authorization required" in refused.stderr or "Can't open display" in refused.stderr or \
            "Cannot open display" in refused.stderr, refused
    own = in_session(other, ["wmctrl", "-l"])  # the control: B's own program lists B's windows
    assert own.returncode == 0 and "xfce4-panel" in own.stdout


def test_every_display_is_refused_to_nobody(desk, other):
    nobody = ["runuser", "-u", "nobody", "--"]
    for stack in (desk.stack, other.stack):
        env = {"PATH": os.environ["PATH"], "DISPLAY": stack.display, "XAUTHORITY": str(stack.xauthority),
               "HOME": "/nonexistent"}
        done = subprocess.run([*nobody, "xdpyinfo"], env=env, capture_output=True, text=True, timeout=20, cwd="/")
        assert done.returncode != 0, done
        done = subprocess.run([*nobody, "cat", str(stack.xauthority)], capture_output=True, text=True, timeout=20,
                              cwd="/")
        assert done.returncode != 0 and "Permission denied" in done.stderr


# ------------------------------------------------------------------ nothing outlives its session


def detach_argv(mark: str) -> list[str]:
    """A program that leaves every mark a session's processes carry: its process group and session
    (setsid, after a double fork), its working directory (/), its environment (env -i)."""
    return ["sh", "-c", f"(setsid sh -c 'cd / && exec env -i sleep {mark}' &) ; exit 0"]


def find(mark: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if Path(f"/proc/{entry.name}/cmdline").read_bytes() == f"sleep\0{mark}\0".encode():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def unique_mark() -> str:
    return f"{3000 + secrets.randbelow(999)}.{secrets.randbelow(10**6):06d}"  # `sleep` takes a fraction


def wait_for(predicate, seconds: float = 10):
    deadline = time.monotonic() + seconds
    while not (found := predicate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def launch_detached(session) -> tuple[str, int]:
    mark = unique_mark()
    session.windows.launch("sh", detach_argv(mark)[1:])
    pids = wait_for(lambda: find(mark))
    assert len(pids) == 1, pids
    pid = pids[0]
    status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    assert int(status[3]) == pid and os.readlink(f"/proc/{pid}/cwd") == "/"  # it leads its own session, in /
    assert Path(f"/proc/{pid}/environ").read_bytes() == b""
    assert os.stat(f"/proc/{pid}").st_uid == session.stack.user.uid
    return mark, pid


def test_a_detached_program_is_gone_after_delete(manager):
    session = manager.create("iso-delete")
    try:
        mark, pid = launch_detached(session)
        assert pid in session.stack.cgroup.pids()
        cgroup_dirs = list(session.stack.cgroup.dirs.values())
    finally:
        manager.delete("iso-delete")
    assert find(mark) == []
    assert not any(d.exists() for d in cgroup_dirs)


def test_a_detached_program_is_gone_after_a_clean_stop():
    from desktop.session.manager import SessionManager

    with session_files() as root:
        manager = SessionManager(root=root, max_sessions=1)
        try:
            mark, _ = launch_detached(manager.create("iso-stop"))
        finally:
            manager.close()
        assert find(mark) == []


SERVER = r"""
import json, os, signal, sys
from desktop.session.ownership import own_desktops
from desktop.session.manager import SessionManager

own = own_desktops()
manager = SessionManager(root=own.root, max_sessions=1)
session = manager.create("iso-crash")
session.windows.launch("sh", json.loads(sys.argv[1])[1:])
print(json.dumps({"root": str(own.root), "reaped": sorted(own.reaped.pids),
                  "uid": session.stack.user.uid, "xvfb": session.stack.children["xvfb"].popen.pid,
                  "cgroup": [str(d) for d in session.stack.cgroup.dirs.values()]}), flush=True)
if sys.stdin.readline().strip() == "crash":
    os.kill(os.getpid(), signal.SIGKILL)
manager.close()
own.close()
"""


def reaper_of(root: str) -> int:
    for entry in os.scandir("/proc"):
        try:
            argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"desktop.session.ownership" in argv and root.encode() in argv:
            return int(entry.name)
    raise AssertionError("no reaper found")


@pytest.mark.serial("leaves a dead server's desktop for its own restart to end: a server starting in another worker "
                    "meanwhile ends it first (its start-up reap, as it should)")
def test_a_detached_program_is_gone_after_a_kill_of_server_and_reaper_and_a_restart():
    mark = unique_mark()
    first = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(detach_argv(mark))], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd="/")
    second = None
    try:
        info = json.loads(first.stdout.readline())
        left = wait_for(lambda: find(mark))
        assert len(left) == 1
        os.kill(reaper_of(info["root"]), signal.SIGKILL)
        first.stdin.write("crash\n")
        first.stdin.flush()
        assert first.wait(20) == -signal.SIGKILL
        time.sleep(1)
        assert find(mark) == left and start_time(info["xvfb"]) is not None  # nobody cleaned up

        second = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(["true", "true"])],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
        again = json.loads(second.stdout.readline())
        assert find(mark) == []  # ended by the start-up reap, before the new server's first session
        assert start_time(info["xvfb"]) is None and not Path(info["root"]).exists()
        assert not any(Path(d).exists() for d in info["cgroup"])
        assert info["xvfb"] in again["reaped"]  # the marked part, found as before
    finally:
        for server in (first, second):
            if server is not None and server.poll() is None:
                server.stdin.close()
                server.wait(30)
        for pid in find(mark):
            os.kill(pid, signal.SIGKILL)


def test_a_detached_program_is_gone_after_a_whole_desktop_heal_and_after_a_reset(manager):
    session = manager.create("iso-heal")
    try:
        mark, _ = launch_detached(session)
        os.killpg(session.stack.children["xvfb"].popen.pid, signal.SIGKILL)  # the whole desktop restarts
        assert wait_for(lambda: session.status == "ready" and any(
            "restarted the whole desktop" in e for e in session.stack.events), 90)
        assert find(mark) == []
        assert session.stack.user.uid == os.stat(session.stack.home).st_uid  # the same account after the heal

        mark, _ = launch_detached(session)  # launched on the healed desktop: its new handles
        session.stack.reset()
        assert find(mark) == []
    finally:
        manager.delete("iso-heal")


def test_without_cgroups_the_account_alone_ends_a_detached_program(manager, monkeypatch):
    """The degraded path (no writable cgroup file system, e.g. Docker's read-only one as root):
    the session's own uid still ends everything it started."""
    monkeypatch.setattr("desktop.session.stack._LAYOUT", [None])
    session = manager.create("iso-nocg")
    try:
        # no cgroup to enter first: the network namespace (when root) then the account
        assert session.stack.cgroup is None and session.stack.run_prefix()[0] in ("nsenter", "setpriv")
        mark, _ = launch_detached(session)
    finally:
        manager.delete("iso-nocg")
    assert find(mark) == []
