"""A cgroup per session (desktop/x11/cgroup.py): where its directories go and what is written,
without a cgroup file system; and the argv prefix that joins one, run for real against plain files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from desktop.x11.cgroup import (
    Layout,
    Limits,
    choose_layout,
    dead_owner_groups,
    enter_argv,
    group_owner,
    limit_values,
    owner_group,
    parse_mountinfo,
    parse_proc_cgroup,
    session_dirs,
)

# A hybrid host (v1 controllers and an empty v2 tree), as this project's CI machine.
HYBRID_MOUNTS = """\
25 24 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
27 25 0:24 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
28 25 0:25 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
29 25 0:26 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
30 25 0:27 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
31 25 0:28 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
"""
HYBRID_SELF = "9:name=systemd:/\n8:pids:/\n6:freezer:/\n4:memory:/tenant/abc\n1:cpu:/\n0::/\n"

# Docker on a modern host: one v2 tree, the container's cgroup its root.
V2_MOUNTS = "700 600 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate\n"
V2_SELF = "0::/system.slice/glassdesk.service\n"

# Older Debian: cpu and cpuacct share a hierarchy.
JOINED = "40 25 0:40 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"


def test_the_mounts_are_read_for_both_versions():
    assert parse_mountinfo(HYBRID_MOUNTS) == {
        "": Path("/sys/fs/cgroup/unified"), "cpu": Path("/sys/fs/cgroup/cpu"),
        "memory": Path("/sys/fs/cgroup/memory"), "freezer": Path("/sys/fs/cgroup/freezer"),
        "pids": Path("/sys/fs/cgroup/pids")}
    assert parse_mountinfo(V2_MOUNTS) == {"": Path("/sys/fs/cgroup")}
    assert parse_mountinfo(JOINED) == {"cpu": Path("/sys/fs/cgroup/cpu,cpuacct")}
    assert parse_mountinfo("garbage\n\n1 2 3 - \n") == {}


def test_a_process_cgroup_paths():
    assert parse_proc_cgroup(HYBRID_SELF) == {"pids": "/", "freezer": "/", "memory": "/tenant/abc", "cpu": "/",
                                              "": "/"}
    assert parse_proc_cgroup("3:cpu,cpuacct:/a\n") == {"cpu": "/a"}
    assert parse_proc_cgroup(V2_SELF) == {"": "/system.slice/glassdesk.service"}


def test_v1_on_a_hybrid_host_under_the_servers_own_cgroups():
    layout = choose_layout(parse_mountinfo(HYBRID_MOUNTS), parse_proc_cgroup(HYBRID_SELF))
    assert layout == Layout(1, {"freezer": Path("/sys/fs/cgroup/freezer"),
                                "memory": Path("/sys/fs/cgroup/memory/tenant/abc"),
                                "cpu": Path("/sys/fs/cgroup/cpu"), "pids": Path("/sys/fs/cgroup/pids")})
    assert layout.kill_base == Path("/sys/fs/cgroup/freezer")


def test_v2_on_a_pure_v2_host_and_none_without_a_way_to_kill():
    layout = choose_layout(parse_mountinfo(V2_MOUNTS), parse_proc_cgroup(V2_SELF))
    assert layout == Layout(2, {"": Path("/sys/fs/cgroup/system.slice/glassdesk.service")})
    assert layout.kill_base == Path("/sys/fs/cgroup/system.slice/glassdesk.service")
    # v1 memory alone can limit but not kill as a whole: no layout.
    assert choose_layout({"memory": Path("/m")}, {"memory": "/"}) is None
    assert choose_layout({}, {}) is None


def test_a_sessions_directories_are_under_its_servers():
    layout = Layout(1, {"freezer": Path("/f"), "memory": Path("/m/t")})
    owner = owner_group(1234, 98765)
    assert owner == "glassdesk-1234-98765" and group_owner(owner) == (1234, 98765)
    assert session_dirs(layout, owner, "ab12") == {"freezer": Path("/f/glassdesk-1234-98765/ab12"),
                                                   "memory": Path("/m/t/glassdesk-1234-98765/ab12")}
    for bad in ("", "..", "a/b"):
        with pytest.raises(ValueError, match="not a cgroup name"):
            session_dirs(layout, owner, bad)
    for other in ("glassdesk-", "glassdesk-1-2-3", "glassdesk-x-2", "user.slice"):
        assert group_owner(other) is None


def test_the_limits_are_the_container_backends_figures():
    limits = Limits()
    assert (limits.memory_mb, limits.cpus, limits.pids) == (1536, 1.0, 4096)
    assert limit_values(1, limits, ["memory", "cpu", "pids"]) == {
        "memory": {"memory.limit_in_bytes": str(1536 << 20), "memory.memsw.limit_in_bytes": str(1536 << 20)},
        "cpu": {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "100000"},
        "pids": {"pids.max": "4096"}}
    assert limit_values(2, Limits(512, 0.5, 100), ["memory", "cpu", "pids"]) == {
        "": {"memory.max": str(512 << 20), "memory.swap.max": "0", "cpu.max": "50000 100000", "pids.max": "100"}}
    # What the host does not offer is left out, not written.
    assert limit_values(2, limits, ["cpu"]) == {"": {"cpu.max": "100000 100000"}}
    assert limit_values(2, limits, []) == {}
    assert limit_values(1, limits, ["freezer"]) == {}
    assert limit_values(2, Limits(cpus=0.001), ["cpu"]) == {"": {"cpu.max": "1000 100000"}}  # the kernel's floor


def test_the_prefix_joins_every_cgroup_then_runs_the_program(tmp_path):
    files = [tmp_path / "freezer.procs", tmp_path / "memory.procs"]
    argv = enter_argv(files)
    assert enter_argv([]) == []
    done = subprocess.run([*argv, "sh", "-c", 'echo "$$ $0 $1"', "prog", "two words"], capture_output=True,
                          text=True, check=True)
    pid, rest = done.stdout.split(" ", 1)
    assert rest == "prog two words\n"  # the arguments after the prefix pass through untouched
    assert [f.read_text() for f in files] == [f"{pid}\n", f"{pid}\n"]  # the exec kept the pid that joined


def test_the_prefix_refuses_to_run_a_program_it_could_not_place(tmp_path):
    done = subprocess.run([*enter_argv([tmp_path / "absent" / "cgroup.procs"]), "touch", str(tmp_path / "ran")],
                          capture_output=True)
    assert done.returncode == 125 and not (tmp_path / "ran").exists()


def test_only_dead_servers_groups_are_reaped(tmp_path):
    for name in (owner_group(1, 10), owner_group(2, 20), "glassdesk-bad", "other"):
        (tmp_path / name).mkdir()
    (tmp_path / owner_group(3, 30)).write_text("a file, not a cgroup")
    live = {(2, 20)}
    assert dead_owner_groups(tmp_path, lambda owner: owner in live) == [tmp_path / owner_group(1, 10)]
    assert dead_owner_groups(tmp_path / "absent", lambda owner: False) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are made by root")
def test_this_host_is_detected_as_it_is():
    from desktop.x11.cgroup import cgroup_problem, detect

    layout = detect()
    v1 = Path("/sys/fs/cgroup/freezer/cgroup.procs").exists()
    if layout is None:
        assert "no writable cgroup" in cgroup_problem(None)
    else:
        assert layout.version == (1 if v1 else 2)


def test_the_servers_session_limits_reach_each_sessions_cgroup():
    from vision.settings import Settings

    assert Settings().stack_config().limits == Limits(1536, 1.0, 4096)  # the container backends' defaults
    assert Settings(session_memory_mb=800, session_cpus=0.5).stack_config().limits == Limits(800, 0.5, 4096)
