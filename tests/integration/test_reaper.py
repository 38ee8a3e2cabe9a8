"""The crash arrangement (desktop.session.ownership.own_desktops) with real processes but no X: a stand-in
server starts stand-in desktop processes, is killed, and nothing of it is left.

The stand-in desktop: one process that inherits the owner mark (as Xvfb, XFCE, x11vnc do) and a
process session whose leader has no mark but works under the session root, with a member that
works elsewhere (as Chromium and its renderers, which rewrite their environment).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop.session.ownership import reap_predecessors
from desktop.x11.procs import session_pids, start_time
from tests.marks import without_owner

SERVER = r"""
import json, os, signal, subprocess, sys
from desktop.session.ownership import own_desktops

own = own_desktops()
home = own.root / "s" / "home"
home.mkdir(parents=True)
marked = subprocess.Popen(["sleep", "300"], start_new_session=True)
env = {k: v for k, v in os.environ.items() if k != "GLASSDESK_OWNER"}
browser = subprocess.Popen(["sh", "-c", "(cd / && exec sleep 302) & exec sleep 301"], start_new_session=True,
                           env=env, cwd=home)
print(json.dumps({"root": str(own.root), "marked": marked.pid, "leader": browser.pid,
                  "reaped": sorted(own.reaped.pids), "reaped_roots": [str(r) for r in own.reaped.roots]}), flush=True)
if sys.stdin.readline().strip() == "crash":
    os.kill(os.getpid(), signal.SIGKILL)
own.close()
"""


class StandIn:
    """A stand-in server in a subprocess; its temp dir is the test's."""

    def __init__(self, tmp_path: Path):
        env = without_owner({**os.environ, "TMPDIR": str(tmp_path)})
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        self.info = json.loads(self.proc.stdout.readline())
        self.root = Path(self.info["root"])
        # Every process of its desktop, by (pid, start time): a pid alone may be reused.
        deadline = time.monotonic() + 10
        while len(session_pids({self.info["leader"]})) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # the leader's shell forks its second sleep
        pids = [self.info["marked"], *session_pids({self.info["leader"]})]
        self.desktop = {pid: start_time(pid) for pid in pids}
        assert len(self.desktop) == 3 and None not in self.desktop.values(), self.desktop

    def alive(self) -> list[int]:
        return [pid for pid, start in self.desktop.items() if start_time(pid) == start]

    def reaper(self) -> int:
        for entry in os.scandir("/proc"):
            try:
                argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"desktop.session.ownership" in argv and str(self.root).encode() in argv:
                return int(entry.name)
        raise AssertionError("no reaper found")

    def crash(self) -> None:
        self.proc.stdin.write("crash\n")
        self.proc.stdin.flush()
        assert self.proc.wait(10) == -signal.SIGKILL

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)
        for pid, start in self.desktop.items():
            if start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def stand_ins(tmp_path):
    started: list[StandIn] = []
    yield lambda: started.append(StandIn(tmp_path)) or started[-1]
    for server in started:
        server.stop()


def wait_until(predicate, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def test_the_reaper_ends_a_killed_servers_desktop_and_removes_its_root(stand_ins):
    server = stand_ins()
    assert (server.root / "owner.json").is_file()
    server.crash()
    assert wait_until(lambda: not server.alive() and not server.root.exists()), server.alive()


def test_a_clean_exit_leaves_nothing_either(stand_ins):
    server = stand_ins()
    reaper = server.reaper()
    server.proc.stdin.close()
    assert server.proc.wait(10) == 0
    assert wait_until(lambda: not server.alive() and start_time(reaper) is None)
    assert not server.root.exists()


@pytest.mark.serial("counts what the next server reaps: a server starting in another worker meanwhile ends a dead "
                    "server's marked processes too (its orphan marks), and this one then finds fewer")
def test_the_next_server_ends_what_a_server_killed_with_its_reaper_left(stand_ins, tmp_path):
    first = stand_ins()
    os.kill(first.reaper(), signal.SIGKILL)
    first.crash()
    time.sleep(0.5)
    assert len(first.alive()) == 3 and first.root.exists()  # nobody cleaned up

    second = stand_ins()
    assert set(second.info["reaped"]) == set(first.desktop)
    assert second.info["reaped_roots"] == [str(first.root)]
    assert first.alive() == [] and not first.root.exists()
    assert len(second.alive()) == 3 and second.root.exists()


def test_a_live_servers_desktop_is_never_reaped(stand_ins, tmp_path):
    live = stand_ins()
    found = reap_predecessors(tmp_path)
    assert not found.pids and not found.roots
    assert len(live.alive()) == 3 and live.root.exists()
