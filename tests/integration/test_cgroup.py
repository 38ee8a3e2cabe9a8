"""A session's cgroup on the real cgroup file system, no X (desktop/x11/cgroup.py): a program that
forks without end and detaches is ended as a whole, on v1 (freezer) and on v2 (cgroup.kill), in
whichever of the two this host offers writable (a hybrid host: both; a pure v2 host: v2)."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from desktop.x11 import cgroup
from desktop.x11.cgroup import Layout, Limits, SessionCgroup

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are made by root")

# Forks a detached child every 10 ms for as long as it lives: a pid-by-pid kill cannot keep up
# with what it starts, and none of the children is in its process group or session.
FORKER = "while :; do setsid sleep 600 & sleep 0.01; done"


def layouts() -> list[Layout]:
    found = []
    mounts = cgroup.parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    own = cgroup.parse_proc_cgroup(Path("/proc/self/cgroup").read_text())
    v1 = cgroup.choose_layout(mounts, own)
    if v1 is not None and v1.version == 1:
        found.append(v1)
    if "" in mounts and "" in own:
        base = mounts[""] / own[""].lstrip("/")
        if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
            found.append(Layout(2, {"": base}))
    return found


@pytest.mark.parametrize("layout", layouts(), ids=lambda layout: f"v{layout.version}")
def test_a_forking_detaching_program_is_ended_as_a_whole_and_the_group_removed(layout):
    owner = f"glassdesk-test-{secrets.token_hex(4)}"
    group = SessionCgroup.create(layout, owner, "s1", Limits(memory_mb=256, cpus=0.5, pids=512))
    try:
        if layout.version == 1:
            limited = set(group.limited)
            if "memory" in limited:
                assert (group.dirs["memory"] / "memory.limit_in_bytes").read_text().strip() == str(256 << 20)
            if "cpu" in limited:
                assert (group.dirs["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "50000"
        proc = subprocess.Popen([*group.enter_argv(), "sh", "-c", FORKER], start_new_session=True)
        deadline = time.monotonic() + 10
        while len(group.pids()) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        members = group.pids()
        assert proc.pid in members and len(members) >= 20
        killed = group.kill()
        assert killed >= 20
        assert proc.wait(5) == -9
        assert group.pids() == []
        assert all(not Path(f"/proc/{pid}").exists() or b"Z" in Path(f"/proc/{pid}/stat").read_bytes()[:80]
                   for pid in members)
    finally:
        group.remove()
    assert not any(d.exists() for d in group.dirs.values())
    assert not any((base / owner).exists() for base in layout.bases.values())


@pytest.mark.parametrize("layout", layouts(), ids=lambda layout: f"v{layout.version}")
def test_a_dead_servers_groups_are_reaped_and_a_live_ones_kept(layout):
    dead, live = f"glassdesk-{2**22 + 7}-1", cgroup.owner_group(os.getpid(), 1)
    groups = [SessionCgroup.create(layout, name, "s", Limits()) for name in (dead, live)]
    procs = [subprocess.Popen([*g.enter_argv(), "sleep", "600"], start_new_session=True) for g in groups]
    try:
        deadline = time.monotonic() + 5  # each joins its group a moment after it started
        while not all(g.pids() for g in groups) and time.monotonic() < deadline:
            time.sleep(0.02)
        # Membership, not equality: a server another test (or a run beside this one) killed may have
        # left groups of its own for its reaper; they are dead too.
        found = cgroup.dead_owner_groups(layout.kill_base, lambda owner: owner == (os.getpid(), 1))
        assert layout.kill_base / dead in found and layout.kill_base / live not in found
        assert cgroup.reap_owner(layout, dead) == 1
        assert procs[0].wait(5) == -9 and procs[1].poll() is None
        assert not any((base / dead).exists() for base in layout.bases.values())
    finally:
        for group in groups:
            group.remove()
        for proc in procs:
            proc.wait(5)
