"""Who the desktop runs as (desktop/x11/user.py): the policy, without starting a desktop."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from desktop.browser.chromium import write_preferences
from desktop.errors import StackError
from desktop.session.stack import DesktopStack
from desktop.x11.user import (
    DESKTOP_USER,
    DesktopUser,
    desktop_user,
    ensure_x11_socket_dir,
    hand_over,
    may_traverse,
    open_without_links,
    popen_kwargs,
    remove_stale_ice_sockets,
    run_as_argv,
    share_traversal,
    unreachable_dir,
)

USER = DesktopUser(DESKTOP_USER, 54321, 54322)


def account(uid: int, gid: int):
    def lookup(name: str) -> pwd.struct_passwd:
        assert name == DESKTOP_USER
        return pwd.struct_passwd((name, "x", uid, gid, "", "/nonexistent", "/usr/sbin/nologin"))
    return lookup


def missing(name: str):
    raise KeyError(name)


def test_a_server_that_is_not_root_runs_its_desktop_as_itself():
    assert desktop_user(euid=1000, lookup=missing) is None
    assert popen_kwargs(None) == {}
    assert run_as_argv(None) == []


def test_a_root_server_runs_its_desktop_as_the_desktop_account():
    assert desktop_user(euid=0, lookup=account(54321, 54322)) == USER


def test_a_root_server_without_the_account_says_how_to_create_it():
    with pytest.raises(StackError, match=r"glassdesk-desktop.*does not exist: run `make setup` as root"):
        desktop_user(euid=0, lookup=missing)


def test_an_account_that_is_root_after_all_is_refused():
    for uid, gid in ((0, 54322), (54321, 0)):
        with pytest.raises(StackError, match="must be an unprivileged account"):
            desktop_user(euid=0, lookup=account(uid, gid))


def test_how_a_process_is_started_as_the_desktop_user():
    assert popen_kwargs(USER) == {"user": 54321, "group": 54322, "extra_groups": []}
    assert run_as_argv(USER) == ["setpriv", "--reuid=54321", "--regid=54322", "--clear-groups", "--"]


def test_the_argv_prefix_runs_a_program_as_the_user():
    # As root (CI) the prefix really changes user (setpriv takes numeric ids: no account needed).
    user = USER if os.geteuid() == 0 else None

    def ids(flag: str) -> list[int]:
        done = subprocess.run([*run_as_argv(user), "id", flag], capture_output=True, text=True, check=True, cwd="/")
        return [int(value) for value in done.stdout.split()]

    if user:
        assert (ids("-u"), ids("-g"), ids("-G")) == ([user.uid], [user.gid], [user.gid])  # no root groups kept
    else:
        assert ids("-u") == [os.getuid()]


@pytest.mark.parametrize(("mode", "owner", "group", "allowed"), [
    (0o700, 54321, 0, True),      # its own
    (0o070, 54321, 54322, False),  # its own, but the owner bits say no (owner bits win)
    (0o710, 0, 54322, True),      # the server's, shared with its group: the workdir
    (0o700, 0, 54322, False),     # the server's alone
    (0o701, 0, 0, True),          # anyone may pass
    (0o1777, 0, 0, True),         # /tmp
    (0o770, 0, 0, False),
])
def test_may_traverse(mode, owner, group, allowed):
    assert may_traverse(mode, owner, group, USER) is allowed


def test_the_first_closed_directory_on_the_way_is_named():
    stranger = DesktopUser("stranger", 54321, 54322)
    root = Path(tempfile.mkdtemp())  # in /tmp: every directory above it is open to all
    try:
        inner = root / "a" / "b"
        inner.mkdir(parents=True, mode=0o755)
        assert unreachable_dir(inner, DesktopUser("me", os.getuid(), os.getgid())) is None
        root.chmod(0o700)
        assert unreachable_dir(inner, stranger) == root
        root.chmod(0o711)
        assert unreachable_dir(inner, stranger) is None
        (root / "a").chmod(0o700)
        assert unreachable_dir(inner, stranger) == root / "a"
    finally:
        shutil.rmtree(root)


def test_a_shared_directory_can_be_passed_through_not_listed(tmp_path):
    me = DesktopUser("me", os.getuid(), os.getgid())
    share_traversal(tmp_path, me)
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o710
    assert tmp_path.stat().st_gid == me.gid
    share_traversal(tmp_path / "absent", None)  # the desktop runs as the server's user: nothing to do


def test_hand_over_gives_everything_below_and_follows_no_link(tmp_path):
    # As root (CI) the tree goes to a stranger; otherwise to ourselves, which still checks the walk.
    user = USER if os.geteuid() == 0 else DesktopUser("me", os.getuid(), os.getgid())
    outside = tmp_path / "outside"
    outside.write_text("the server's")
    before = outside.stat()
    home = tmp_path / "home"
    (home / ".config/deep").mkdir(parents=True, mode=0o755)
    (home / ".config/deep/file").write_text("x")
    (home / "link").symlink_to(outside)
    hand_over(home, user)
    for path in (home, home / ".config", home / ".config/deep", home / ".config/deep/file", home / "link"):
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (user.uid, user.gid), path
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    after = outside.stat()
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)  # the link's target is untouched


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root server makes the X socket directory")
def test_the_x_socket_directory_is_made_as_root_x_servers_make_it(tmp_path):
    path = tmp_path / ".X11-unix"
    ensure_x11_socket_dir(path)
    info = path.lstat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o1777)
    path.chmod(0o755)
    os.chown(path, 54321, 54321)  # as a desktop user could leave it
    ensure_x11_socket_dir(path)
    info = path.lstat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o1777)
    path.rmdir()
    path.write_text("not a directory")
    with pytest.raises(StackError, match="not a directory"):
        ensure_x11_socket_dir(path)


def test_the_desktop_environment_names_the_user_it_runs_as(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    stack = DesktopStack(tmp_path)
    server_user = os.environ.get("USER")
    assert stack.env().get("USER") == server_user
    stack.user = USER
    env = stack.env()
    assert (env["USER"], env["LOGNAME"]) == (DESKTOP_USER, DESKTOP_USER)
    # Not the server's (it may be closed to it), nor the shared /tmp: the session's own, 0700 to it.
    assert env["TMPDIR"] == str(tmp_path / "tmp")


def test_chromium_keeps_its_sandbox_unless_told_otherwise(tmp_path, monkeypatch):
    stack = DesktopStack(tmp_path)
    monkeypatch.delenv("GLASSDESK_CHROMIUM_NO_SANDBOX", raising=False)
    assert stack.chromium_sandbox() is True  # as root too: Chromium never runs as root
    monkeypatch.setenv("GLASSDESK_CHROMIUM_NO_SANDBOX", "1")
    assert stack.chromium_sandbox() is False


def test_the_server_opens_nothing_in_the_desktops_tree_through_a_link(tmp_path):
    # As root (CI) what is made goes to a stranger; otherwise to ourselves.
    owner = USER if os.geteuid() == 0 else None
    servers = tmp_path / "servers"
    servers.mkdir()
    (servers / "Preferences").write_text('{"the": "server\'s"}')
    profile = tmp_path / "profile"
    profile.mkdir()
    default = profile / "Default"
    default.symlink_to(servers)  # a directory on the way is a link
    with pytest.raises(OSError):
        os.close(open_without_links(profile, "Default", "Preferences"))
    with pytest.raises(OSError):
        write_preferences(profile, owner)
    assert sorted(p.name for p in servers.iterdir()) == ["Preferences"]
    assert (servers / "Preferences").read_text() == '{"the": "server\'s"}'

    default.unlink()
    default.mkdir()
    (default / "Preferences").symlink_to(servers / "Preferences")  # the file itself is a link
    write_preferences(profile, owner)
    assert (servers / "Preferences").read_text() == '{"the": "server\'s"}'  # the link was replaced
    assert not (default / "Preferences").is_symlink()

    (default / "Preferences").unlink()
    os.mkfifo(default / "Preferences")  # a plain open and read would block
    write_preferences(profile, owner)
    assert (default / "Preferences").is_file()

    (default / "Preferences").write_text('{"profile": {"exit_type": "Crashed", "name": "mine"}}')
    write_preferences(profile, owner)
    prefs = json.loads((default / "Preferences").read_text())
    assert prefs["profile"]["exit_type"] == "Normal" and prefs["profile"]["name"] == "mine"
    assert [p.name for p in default.iterdir()] == ["Preferences"]  # no temporary file left


def test_a_new_profiles_preferences_are_made_for_its_owner(tmp_path):
    owner = USER if os.geteuid() == 0 else DesktopUser("me", os.getuid(), os.getgid())
    write_preferences(tmp_path, owner)
    for path in (tmp_path / "Default", tmp_path / "Default" / "Preferences"):
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (owner.uid, owner.gid), path
    assert json.loads((tmp_path / "Default" / "Preferences").read_text())["profile"]["exited_cleanly"] is True


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root server hands session files to another user")
def test_session_files_the_desktop_user_cannot_reach_are_refused_before_anything_starts(monkeypatch):
    monkeypatch.setattr("desktop.session.stack.desktop_users.claim", lambda: USER)
    root = Path(tempfile.mkdtemp())  # 0700, root's alone; everything above it is open
    try:
        stack = DesktopStack(root / "sessions" / "s1")
        with pytest.raises(StackError, match=rf"cannot reach {stack.workdir}: {root} is closed to it"):
            stack.start()
        assert stack.children == {}
    finally:
        shutil.rmtree(root)


def test_only_the_session_manager_sockets_of_gone_processes_are_removed(tmp_path):
    gone = next(pid for pid in range(4_000_000, 4_100_000) if not os.path.exists(f"/proc/{pid}"))
    sockets = []
    for name in (str(gone), str(os.getpid())):  # a dead xfce4-session's, and a live process's
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(tmp_path / name))
        sockets.append(sock)
    (tmp_path / str(gone + 1)).write_text("not a socket")
    try:
        assert remove_stale_ice_sockets(tmp_path) == 1
    finally:
        for sock in sockets:
            sock.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([str(os.getpid()), str(gone + 1)])
    assert remove_stale_ice_sockets(tmp_path / "absent") == 0
