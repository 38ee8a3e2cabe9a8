"""One desktop account per session (desktop/x11/user.py): the pool, its claims and its locks."""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
import sys
import time

import pytest

from desktop.errors import DesktopUsersExhausted, StackError
from desktop.x11.user import (
    DesktopUser,
    DesktopUsers,
    isolation_problems,
    kill_all,
    pick_account,
    pool_accounts,
)


def entry(name: str, uid: int, gid: int | None = None) -> pwd.struct_passwd:
    return pwd.struct_passwd((name, "x", uid, uid + 1 if gid is None else gid, "", "/nonexistent", "/usr/sbin/nologin"))


def test_the_pool_is_the_numbered_accounts_in_order():
    entries = [entry("glassdesk-desktop-10", 910), entry("glassdesk-desktop-2", 902), entry("glassdesk-desktop", 900),
               entry("glassdesk-desktop-x", 903), entry("root", 0), entry("glassdesk-desktop-", 904)]
    assert pool_accounts(entries) == [DesktopUser("glassdesk-desktop-2", 902, 903, True),
                                      DesktopUser("glassdesk-desktop-10", 910, 911, True)]


def test_a_pool_account_that_is_root_is_refused():
    with pytest.raises(StackError, match="must be an unprivileged account"):
        pool_accounts([entry("glassdesk-desktop-1", 0)])
    with pytest.raises(StackError, match="must be an unprivileged account"):
        pool_accounts([entry("glassdesk-desktop-1", 900, 0)])


def test_the_first_account_not_taken_is_picked():
    pool = [DesktopUser(f"glassdesk-desktop-{n}", 900 + n, 950 + n, True) for n in (1, 2, 3)]
    assert pick_account(pool, set()) == pool[0]
    assert pick_account(pool, {901, 902}) == pool[2]
    assert pick_account(pool, {901, 902, 903}) is None
    assert pick_account([], set()) is None


def test_a_server_that_is_not_root_is_reported_degraded():
    assert "not root" in isolation_problems(euid=1000)[0]
    no_pool = DesktopUsers(entries=lambda: [])
    assert "no desktop-user pool" in isolation_problems(euid=0, users=no_pool)[0]
    pool = DesktopUsers(entries=lambda: [entry("glassdesk-desktop-1", 901)])
    assert isolation_problems(euid=0, users=pool) == []


def test_the_shared_account_or_the_servers_own_is_never_killed_whole():
    for user in (DesktopUser("glassdesk-desktop", 999, 999, exclusive=False),
                 DesktopUser("me", os.getuid(), os.getgid(), exclusive=True)):
        with pytest.raises(ValueError, match="not an account of one session"):
            kill_all(user)


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the pool is used only by a root server")


def spare_accounts(count: int) -> list[pwd.struct_passwd]:
    """Real pool accounts of this host (docker/install-system-deps.sh made them), from the end of
    the pool so the sessions other tests start are not in the way; skips without them."""
    accounts = pool_accounts(pwd.getpwall())
    if len(accounts) < count + 1:
        pytest.skip("needs the desktop-user pool: run docker/install-system-deps.sh as root")
    return [pwd.getpwnam(a.name) for a in accounts[-count:]]


@root_only
def test_claims_are_exclusive_across_processes_and_exhaustion_says_how_to_grow(tmp_path):
    entries = spare_accounts(2)
    users = DesktopUsers(tmp_path / "locks", entries=lambda: entries)
    (tmp_path / "locks").mkdir()
    # Another server holds the first account: its lock, in another process.
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600); "
        "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()"),
        str(tmp_path / "locks" / entries[0].pw_name)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        got = users.claim()
        assert got.name == entries[1].pw_name and got.exclusive
        with pytest.raises(DesktopUsersExhausted, match=r"grow the pool: `sudo GLASSDESK_DESKTOP_USERS=\d+ bash"):
            users.claim()
        users.release(got)
        assert users.claim() == got  # given back, taken again
    finally:
        holder.stdin.close()
        holder.wait(5)
    users.release(got)
    assert users.claim().name == entries[0].pw_name  # the other server is gone: its lock with it


@root_only
def test_an_account_running_a_process_is_not_free_until_the_reap_ends_it(tmp_path):
    entries = spare_accounts(1)
    users = DesktopUsers(tmp_path / "locks", entries=lambda: entries)
    user = users.accounts()[0]
    # What a killed server left: a detached process of the account, in a session of its own.
    left = subprocess.Popen(["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--",
                             "setsid", "sleep", "300"], cwd="/")
    try:
        # Until setpriv has switched, the child is root's (seen once on a loaded machine): the
        # account is busy from the moment the process is the account's.
        deadline = time.monotonic() + 10
        while _real_uid(left.pid) != user.uid and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _real_uid(left.pid) == user.uid
        with pytest.raises(DesktopUsersExhausted):
            users.claim()
        assert users.reap_free() == 1
        assert left.wait(5) == -9
        assert users.claim() == user
        assert users.reap_free() == 0  # a held account is never reaped
    finally:
        if left.poll() is None:
            left.kill()
        users.release(user)


def _real_uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("Uid:"))
    except (OSError, StopIteration):
        return None


def test_what_is_degraded_is_reported_at_start_once_and_in_the_health_answer(monkeypatch, caplog):
    from desktop.session import stack

    monkeypatch.setattr(stack.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(stack, "_LAYOUT", [None])
    monkeypatch.setattr(stack, "_REPORTED", [])
    monkeypatch.setattr(stack.netns, "support", lambda: "the server does not run as root (...)")  # not cached
    found = stack.isolation()
    assert found["desktop_users"] == "server user" and found["cgroups"] == "none"
    assert found["network"] == "browser_only"
    assert [p.split(":")[0] for p in found["degraded"]] == ["not root", "no writable cgroup file system (cgroup v1 "
                                                            "freezer or v2 at /sys/fs/cgroup)", "network"]
    with caplog.at_level("WARNING", logger="glassdesk.stack"):
        assert stack.report_isolation() == found
        stack.report_isolation()
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["session isolation degraded"] * 3  # once each


def test_the_health_answer_carries_the_isolation_report():
    from fastapi.testclient import TestClient

    from desktop.session.manager import SessionManager
    from vision.http.app import create_app
    from vision.settings import Settings

    manager = SessionManager(max_sessions=1)
    try:
        with TestClient(create_app(manager, Settings()), base_url="http://127.0.0.1") as client:
            body = client.get("/healthz").json()
        assert body["isolation"] == manager.isolation and set(body["isolation"]) == {"desktop_users", "cgroups",
                                                                                     "network", "degraded"}
    finally:
        manager.close()


def test_a_program_the_sessions_account_may_not_execute_is_refused_before_it_starts(tmp_path):
    from desktop.x11.windows import WindowError, Windows

    program = tmp_path / "servers-only"
    program.write_text("#!/bin/sh\ntouch ran\n")
    program.chmod(0o700)  # this user's alone
    stranger = DesktopUser("glassdesk-desktop-9", 54321, 54322, True)
    windows = Windows({"PATH": str(tmp_path), "HOME": str(tmp_path)}, ["/bin/true"], stranger)
    with pytest.raises(WindowError, match=r"'servers-only' .* cannot be started by the desktop's user"):
        windows.launch("servers-only", [])
    program.chmod(0o755)
    _, pid = windows.launch("servers-only", [])  # the prefix (/bin/true) runs in its place: nothing is touched
    # launch drops its Popen, so subprocess's own clean-up may have reaped the child already.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    assert not (tmp_path / "ran").exists()
