"""What a dead server left, decided from a snapshot of the process table (pure), and owner records
read from disk, and a process session's activity. No X; one process started."""

from __future__ import annotations

import json
import os
from pathlib import Path

from desktop.x11.procs import (
    OWNER_RECORD,
    Leftovers,
    OwnerRecord,
    Proc,
    ProcessId,
    leftovers,
    mark_owner,
    owned_pids,
    owner_alive,
    read_owner_records,
    session_activity,
    session_of,
    still_working,
)

BOOT = "boot-a"
NS = "pid:[1]"
UID = 1000
ME = ProcessId(100, 5000, BOOT, NS)
DEAD = ProcessId(200, 4000, BOOT, NS)    # the server that was killed
LIVE = ProcessId(300, 4500, BOOT, NS)    # another server, still running
ROOT = Path("/tmp/glassdesk-dead")
LIVE_ROOT = Path("/tmp/glassdesk-live")
DEAD_MARK = "200-4000-aaaa"
LIVE_MARK = "300-4500-bbbb"


def proc(pid: int, *, sid: int | None = None, start: int = 9000, uid: int = UID, mark: str | None = None,
         cwd: str | None = "/", ns: str | None = NS, zombie: bool = False) -> Proc:
    return Proc(pid, uid, pid if sid is None else sid, start, zombie=zombie, pid_ns=ns, cwd=cwd, mark=mark)


def table(*procs: Proc) -> dict[int, Proc]:
    return {p.pid: p for p in procs}


def record(owner: ProcessId = DEAD, root: Path = ROOT, mark: str = DEAD_MARK, uid: int = UID) -> OwnerRecord:
    return OwnerRecord(root, uid, owner, mark)


# A killed server's desktop, as /proc shows it after the kill: the server (200) is gone.
XVFB = proc(1001, mark=DEAD_MARK, cwd=f"{ROOT}/default/home")
XFCE = proc(1002, mark=DEAD_MARK, cwd=f"{ROOT}/default/home")
XFWM = proc(1003, sid=1002, mark=DEAD_MARK, cwd=f"{ROOT}/default/home")
CHROMIUM = proc(1004, cwd=f"{ROOT}/default/home")             # rewrote its environment: no mark
RENDERER = proc(1005, sid=1004, cwd="/")                      # no mark, elsewhere: in Chromium's session
WEBSOCKIFY = proc(1006, mark=DEAD_MARK, cwd="/usr/share/novnc")  # changed directory, kept the mark
KILLED_DESKTOP = (XVFB, XFCE, XFWM, CHROMIUM, RENDERER, WEBSOCKIFY)
# Another server's desktop, alive.
LIVE_SERVER = proc(300, start=4500, cwd="/home/u")
LIVE_XVFB = proc(2001, mark=LIVE_MARK, cwd=f"{LIVE_ROOT}/default/home")


# ---------------------------------------------------------------------------------- owner_alive


def test_an_owner_is_alive_while_its_pid_runs_with_its_start_time():
    assert owner_alive(LIVE, table(LIVE_SERVER), ME)
    assert not owner_alive(DEAD, table(LIVE_SERVER), ME)                         # pid gone
    assert not owner_alive(DEAD, table(proc(200, start=4100)), ME)               # pid reused by another
    assert not owner_alive(DEAD, table(proc(200, start=4000, zombie=True)), ME)  # killed, not yet waited for
    assert owner_alive(DEAD, table(proc(200, start=4000)), ME)


def test_an_owner_from_another_boot_is_dead_even_if_its_pid_and_time_match():
    old = ProcessId(300, 4500, "boot-before", NS)
    assert not owner_alive(old, table(LIVE_SERVER), ME)


def test_an_owner_in_another_pid_namespace_is_alive_while_that_namespace_has_a_process():
    # Its pid means nothing here; a container next door must not lose its desktops.
    neighbour = ProcessId(7, 4500, BOOT, "pid:[2]")
    assert owner_alive(neighbour, table(proc(5000, ns="pid:[2]")), ME)
    assert not owner_alive(neighbour, table(proc(5000, ns=NS)), ME)  # e.g. the container restarted


def test_this_process_is_alive_though_the_table_leaves_it_out():
    assert owner_alive(ME, {}, ME)


def test_marks_name_their_owner():
    assert mark_owner(DEAD_MARK) == (200, 4000)
    assert mark_owner("f00d") is None and mark_owner("a-b-c") is None and mark_owner("1-2-3-4") is None


# ----------------------------------------------------------------------------------- owned_pids


def test_a_desktop_is_found_by_its_mark_its_directory_and_its_sessions():
    found = owned_pids(table(*KILLED_DESKTOP, LIVE_XVFB, proc(7777)), DEAD_MARK, ROOT, uid=UID)
    assert found == {p.pid: p.start_time for p in KILLED_DESKTOP}


def test_a_sibling_directory_with_the_same_prefix_is_not_under_the_root():
    other = proc(3001, cwd=f"{ROOT}2/default/home")
    assert owned_pids(table(other), DEAD_MARK, ROOT, uid=UID) == {}


def test_only_a_session_led_by_one_of_them_is_taken_whole():
    # A short-lived helper the server ran itself (xdotool) shares the server's terminal session:
    # that session holds the user's shell, which must not go with it.
    shell = proc(50, cwd="/home/u")
    xdotool = proc(1010, sid=50, mark=DEAD_MARK)
    assert owned_pids(table(shell, xdotool), DEAD_MARK, ROOT, uid=UID) == {1010: 9000}


def test_other_users_processes_are_left_alone_unless_we_are_root():
    theirs = proc(1001, uid=1001, mark=DEAD_MARK)
    assert owned_pids(table(theirs), DEAD_MARK, ROOT, uid=UID) == {}
    assert owned_pids(table(theirs), DEAD_MARK, ROOT, uid=0) == {1001: 9000}


def test_zombies_are_not_signalled():
    assert owned_pids(table(proc(1001, mark=DEAD_MARK, zombie=True)), DEAD_MARK, ROOT, uid=UID) == {}


# ------------------------------------------------------------------------------------ leftovers


def test_a_dead_servers_desktop_and_root_are_leftovers_a_live_ones_are_not():
    snapshot = table(*KILLED_DESKTOP, LIVE_SERVER, LIVE_XVFB)
    found = leftovers([record(), record(LIVE, LIVE_ROOT, LIVE_MARK)], snapshot, ME, UID)
    assert found.roots == [ROOT]
    assert sorted(found.pids) == [p.pid for p in KILLED_DESKTOP]


def test_a_record_of_another_user_is_not_ours_to_judge():
    assert leftovers([record(uid=UID + 1)], table(XVFB), ME, UID) == Leftovers()


def test_a_dead_servers_processes_are_found_by_mark_when_its_root_is_gone():
    found = leftovers([], table(XVFB, XFCE, XFWM, LIVE_SERVER, LIVE_XVFB), ME, UID)
    assert found.roots == [] and sorted(found.pids) == [1001, 1002, 1003]


def test_a_mark_is_only_read_in_our_own_pid_namespace():
    # Its pid is counted in another namespace: here it could name anything.
    foreign = proc(1001, mark=DEAD_MARK, ns="pid:[2]")
    assert leftovers([], table(foreign), ME, UID) == Leftovers()


def test_a_malformed_mark_names_no_owner_and_is_left_alone():
    assert leftovers([], table(proc(1001, mark="not-a-mark")), ME, UID) == Leftovers()


def test_a_live_servers_processes_are_never_leftovers_even_without_their_record():
    assert leftovers([], table(LIVE_SERVER, LIVE_XVFB), ME, UID) == Leftovers()


def test_our_own_desktops_are_never_leftovers():
    mine = "100-5000-cccc"
    found = leftovers([record(ME, Path("/tmp/glassdesk-me"), mine)],
                      table(proc(1001, mark=mine, cwd="/tmp/glassdesk-me/default/home")), ME, UID)
    assert found == Leftovers()


# ---------------------------------------------------------------------------- read_owner_records


def write_record(root: Path, owner: ProcessId = DEAD, mark: str = DEAD_MARK) -> None:
    root.mkdir()
    (root / OWNER_RECORD).write_text(json.dumps(owner.as_dict() | {"mark": mark}))


def test_owner_records_are_read_from_session_roots_only(tmp_path: Path):
    write_record(tmp_path / "glassdesk-one")
    write_record(tmp_path / "something-else")
    (tmp_path / "glassdesk-empty").mkdir()
    records = read_owner_records(tmp_path)
    assert records == [OwnerRecord(tmp_path / "glassdesk-one", os.getuid(), DEAD, DEAD_MARK)]


def test_broken_or_linked_records_are_skipped(tmp_path: Path):
    (tmp_path / "glassdesk-garbage").mkdir()
    (tmp_path / "glassdesk-garbage" / OWNER_RECORD).write_text("{not json")
    (tmp_path / "glassdesk-partial").mkdir()
    (tmp_path / "glassdesk-partial" / OWNER_RECORD).write_text(json.dumps({"pid": 5, "mark": "x"}))
    (tmp_path / "glassdesk-badpid").mkdir()
    (tmp_path / "glassdesk-badpid" / OWNER_RECORD).write_text(json.dumps(DEAD.as_dict() | {"pid": "5", "mark": "x"}))
    write_record(tmp_path / "elsewhere")
    (tmp_path / "glassdesk-linked-root").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "glassdesk-linked-file").mkdir()
    (tmp_path / "glassdesk-linked-file" / OWNER_RECORD).symlink_to(tmp_path / "elsewhere" / OWNER_RECORD)
    assert read_owner_records(tmp_path) == []


def test_a_missing_temp_dir_has_no_records(tmp_path: Path):
    assert read_owner_records(tmp_path / "nope") == []


def test_the_owned_temp_dir_is_the_latest_owners_still_there(tmp_path, monkeypatch):
    """Two embedded servers one after the other in a process: the second's start must not hand
    the browser driver the first's removed root."""
    from desktop.x11 import procs

    monkeypatch.setattr(procs, "_TEMP", [])
    assert procs.owned_temp_dir() is None
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    procs.use_temp_dir(first)
    procs.use_temp_dir(second)
    assert procs.owned_temp_dir() == second
    second.rmdir()  # the later owner closed
    assert procs.owned_temp_dir() == first
    first.rmdir()
    assert procs.owned_temp_dir() is None


# ------------------------------------------------------------------ a program at work or at rest


def test_a_program_is_at_work_while_a_process_starts_ends_or_runs_another_program():
    rest = {10: ("sh", "S", 3), 11: ("xmessage", "S", 7)}
    assert not still_working(rest, dict(rest))
    assert still_working(rest, {10: ("sh", "S", 3)})                                  # one ended
    assert still_working(rest, {**rest, 12: ("zenity", "S", 0)})                      # one started
    assert still_working({10: ("sh", "S", 3)}, {10: ("xmessage", "S", 3)})            # an exec


def test_a_program_is_at_work_while_it_uses_the_processor_or_waits_for_it_or_a_disk():
    rest = {10: ("mousepad", "S", 40)}
    assert still_working(rest, {10: ("mousepad", "S", 41)})
    assert still_working(rest, {10: ("mousepad", "R", 40)})
    assert still_working(rest, {10: ("mousepad", "D", 40)})
    assert not still_working(rest, {10: ("mousepad", "S", 40)})
    assert not still_working(rest, {10: ("mousepad", "S", 41)}, by_time=False)  # its time left out
    assert still_working(rest, {10: ("mousepad", "R", 41)}, by_time=False)
    assert still_working(rest, {11: ("mousepad", "S", 0)}, by_time=False)


def test_a_process_sessions_activity_is_read_from_the_process_table():
    """A real process session (the one process this module starts): its leader is read, nothing
    outside it is, and once it is gone the session is empty."""
    import subprocess

    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        activity = session_activity(sleeper.pid)
        assert list(activity) == [sleeper.pid] and activity[sleeper.pid][1] in "RSD", activity
        assert session_of(sleeper.pid) == sleeper.pid and session_of(os.getpid()) != sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()
    assert session_activity(sleeper.pid) == {} and session_of(sleeper.pid) is None
