"""desktop.network.servers: every glassdesk server of the host registers its control-plane ports,
and every session's proxy refuses the live ones (a session once reached another server's API).
The pure rules, then the registry on a directory of the test's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from desktop.network.servers import (
    PREFIX,
    Entry,
    ServerRegistry,
    entry_alive,
    live_ports,
    still_as_read,
    trusted_dir,
)
from desktop.x11.procs import ProcessId, this_process

ME = ProcessId(100, 5000, "boot-a", "pid:[1]")


def test_an_entry_round_trips_and_anything_else_is_refused():
    entry = Entry(ME, frozenset({8000, 5901}))
    assert Entry.parse(entry.to_json()) == entry
    for text in ("", "[]", "{}", json.dumps({**ME.as_dict(), "ports": [0]}),
                 json.dumps({**ME.as_dict(), "ports": [70000]}), json.dumps({**ME.as_dict(), "ports": ["80"]}),
                 json.dumps({"ports": [80]})):
        with pytest.raises(ValueError):
            Entry.parse(text)


def test_an_owner_is_alive_only_as_the_same_process_of_the_same_boot():
    assert entry_alive(ME, ME, 5000)
    assert not entry_alive(ME, ME, None)  # gone
    assert not entry_alive(ME, ME, 5001)  # the pid reused by another process
    assert not entry_alive(replace(ME, boot_id="boot-b"), ME, 5000)  # another boot
    # another pid namespace (a container's server) cannot be looked up: its ports stay refused
    assert entry_alive(replace(ME, pid_ns="pid:[2]"), ME, None)


def test_only_the_live_entries_ports_count():
    dead = Entry(replace(ME, pid=200, start_time=1), frozenset({9000}))
    live = Entry(replace(ME, pid=300, start_time=7), frozenset({8000, 8001}))
    started = {200: 2, 300: 7}
    assert live_ports([dead, live], ME, started.get) == {8000, 8001}


@pytest.mark.parametrize("name, uid, mode, trusted", [
    (f"{PREFIX}0", 0, 0o40755, True),
    (f"{PREFIX}1000", 1000, 0o40755, True),
    (f"{PREFIX}1000", 0, 0o40755, True),  # root may keep any account's
    (f"{PREFIX}0", 1000, 0o40755, False),  # squatted under root's name
    (f"{PREFIX}1000", 1000, 0o40777, False),  # anybody could remove its entries
    (f"{PREFIX}1000", 1000, 0o40775, False),
    (f"{PREFIX}x", 0, 0o40755, False),
    (f"{PREFIX}0", 0, 0o120777, False),  # a symbolic link
])
def test_a_directory_is_trusted_only_when_its_account_alone_may_write_it(tmp_path, name, uid, mode, trusted):
    st = os.stat_result((mode, 0, 0, 0, uid, 0, 0, 0, 0, 0))
    assert trusted_dir(tmp_path / name, st) is trusted


def test_servers_see_each_others_ports_and_not_a_withdrawn_ones(tmp_path):
    one, two = ServerRegistry(tmp_path), ServerRegistry(tmp_path)
    one.publish({8000, 5901})
    two.publish({9000})
    assert one.ports() == two.ports() == {8000, 5901, 9000}
    one.publish({8000})  # a session deleted: its port is no longer the plane's
    assert two.ports() == {8000, 9000}
    one.withdraw()
    assert two.ports() == {9000}
    assert oct(os.stat(one.dir).st_mode & 0o777) == "0o755"


def test_a_dead_servers_entry_counts_for_nothing_and_the_next_server_removes_it(tmp_path):
    child = subprocess.run([sys.executable, "-c", (
        "import sys; from pathlib import Path; from desktop.network.servers import ServerRegistry; "
        "ServerRegistry(Path(sys.argv[1])).publish({7777})"), str(tmp_path)], check=True, capture_output=True)
    assert child.returncode == 0
    registry_dir = tmp_path / f"{PREFIX}{os.geteuid()}"
    assert len(os.listdir(registry_dir)) == 1  # the dead server's entry is still there
    fresh = ServerRegistry(tmp_path)
    assert fresh.ports() == set()
    fresh.publish({8000})
    assert os.listdir(registry_dir) == [fresh.name]


def test_a_foreign_or_loose_directory_is_not_believed(tmp_path):
    loose = tmp_path / f"{PREFIX}{os.geteuid()}"
    loose.mkdir(mode=0o755)
    loose.chmod(0o777)
    (loose / "x.json").write_text(Entry(this_process(), frozenset({4444})).to_json())
    assert ServerRegistry(tmp_path).ports() == set()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can remove a directory another account squats")
def test_root_removes_a_directory_squatted_under_its_name_before_writing(tmp_path):
    squat = tmp_path / f"{PREFIX}0"
    squat.mkdir(mode=0o755)
    os.chown(squat, 65534, 65534)
    (squat / "fake.json").write_text(Entry(this_process(), frozenset({4444})).to_json())
    registry = ServerRegistry(tmp_path)
    assert registry.ports() == set()  # the squatter's entry is not believed
    registry.publish({8000})
    assert os.stat(squat).st_uid == 0 and os.listdir(squat) == [registry.name]
    assert registry.ports() == {8000}


def test_a_read_in_the_same_tick_as_a_change_is_not_trusted_later():
    tick = 20_000_000
    assert still_as_read(1_000, 1_000, 1_000 + tick + 1)
    assert not still_as_read(1_000, 1_000, 1_000 + tick // 2)  # read in the change's tick: read again
    assert not still_as_read(2_000, 1_000, 10**12)


def test_a_server_that_registers_right_after_a_read_is_seen_by_the_next_one(tmp_path):
    """Reads are cached by the directory's time; a change right after a read is still seen."""
    one, two = ServerRegistry(tmp_path), ServerRegistry(tmp_path)
    for port in range(9100, 9110):
        assert port not in one.ports()
        two.publish({port})
        assert port in one.ports()
