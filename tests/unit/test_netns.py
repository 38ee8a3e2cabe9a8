"""A network namespace per session (desktop.network.netns): names, who owns them, how a desktop
program is started in one, and what happens without root. No namespace is made here (the real
ones: tests/integration/test_netns.py and test_desktop_network.py)."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from desktop.network import netns
from desktop.session.stack import DesktopStack
from desktop.x11.user import DesktopUser
from desktop.x11.windows import may_execute


def test_a_namespace_is_named_by_its_server_and_session():
    name = netns.namespace_name(4242, 987654, "0123abcd")
    assert name == "glassdesk-4242-987654-0123abcd"
    assert netns.owner_of(name) == (4242, 987654)
    assert netns.name_for("ab12").startswith(f"glassdesk-{os.getpid()}-")
    assert netns.owner_of(netns.name_for("ab12"))[0] == os.getpid()
    for foreign in ("glassdesk-x-1-ab", "other-1-2-ab", "glassdesk-1-2", "glassdesk-1-2-AB", "glassdesk-1-2-a/b"):
        assert netns.owner_of(foreign) is None, foreign


@pytest.mark.parametrize("tag", ["", "A1", "a/b", "a-b", "a" * 33])
def test_a_bad_session_tag_is_refused(tag):
    with pytest.raises(ValueError, match="session tag"):
        netns.namespace_name(1, 2, tag)


def test_a_program_enters_the_namespace_as_root_then_becomes_the_desktop_user(tmp_path):
    """nsenter first (entering needs CAP_SYS_ADMIN), setpriv after it; Xvfb stays outside (its clients
    reach it by its socket file), x11vnc stays the server's."""
    stack = DesktopStack(tmp_path)
    user = DesktopUser("glassdesk-desktop", 1234, 1235)
    stack.user = user
    assert stack.desktop_launch("xfce") == ([], {"user": 1234, "group": 1235, "extra_groups": []})
    stack.namespace = netns.SessionNamespace("glassdesk-1-2-ab")
    prefix, kwargs = stack.desktop_launch("xfce")
    assert prefix == ["nsenter", "--net=/run/netns/glassdesk-1-2-ab", "--",
                      "setpriv", "--reuid=1234", "--regid=1235", "--clear-groups", "--"]
    assert kwargs == {}  # Popen starts nsenter as root; the uid changes after it
    assert stack.desktop_launch() == (prefix, {})  # a launched program: the same
    assert stack.desktop_launch("xvfb") == ([], {"user": 1234, "group": 1235, "extra_groups": []})
    assert stack.desktop_launch("x11vnc") == ([], {})


def test_every_desktop_program_is_told_of_the_session_s_proxy(tmp_path):
    stack = DesktopStack(tmp_path)
    assert "http_proxy" not in stack.env()

    class Proxy:
        port = 40123

    stack.proxy = Proxy()  # type: ignore[assignment]
    env = stack.env()
    assert env["http_proxy"] == env["HTTPS_PROXY"] == "http://127.0.0.1:40123" and env["no_proxy"] == ""


def test_may_execute_reads_the_mode_bits_for_the_desktop_user(tmp_path):
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\n")
    info = program.stat()
    program.chmod(stat.S_IRWXU)  # the owner's alone
    assert may_execute(str(program), info.st_uid, info.st_gid)
    assert not may_execute(str(program), info.st_uid + 1, info.st_gid + 1)
    program.chmod(stat.S_IRWXU | stat.S_IXOTH)
    assert may_execute(str(program), info.st_uid + 1, info.st_gid + 1)
    assert not may_execute(str(tmp_path / "missing"), 0, 0)


def test_without_root_there_is_no_namespace_and_it_says_why(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = netns._support()
    assert reason is not None and "not run as root" in reason and "CAP_SYS_ADMIN" in reason


def test_without_ip_there_is_no_namespace_and_it_says_which_package(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda program: None if program == "ip" else "/usr/bin/" + program)
    assert "iproute2" in netns._support()


def test_the_dead_servers_namespaces_are_removed_and_the_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(netns, "NETNS_DIR", tmp_path)
    for name in ("glassdesk-10-100-aa", "glassdesk-10-100-bb", "glassdesk-11-110-cc", "glassdesk-12-120-dd",
                 "somebody-else", "glassdesk-probe"):
        (tmp_path / name).touch()
    removed = []

    def ip(*args, timeout=10):
        assert args[:2] == ("netns", "delete")
        removed.append(args[2])
        (tmp_path / args[2]).unlink()
        return subprocess.CompletedProcess(["ip", *args], 0, "", "")

    monkeypatch.setattr(netns, "_ip", ip)
    assert netns.remove_dead(lambda pid, start: (pid, start) == (11, 110)) == [
        "glassdesk-10-100-aa", "glassdesk-10-100-bb", "glassdesk-12-120-dd"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["glassdesk-11-110-cc", "glassdesk-probe", "somebody-else"]
    assert netns.remove_owned_by(11, 110) == 1 and removed[-1] == "glassdesk-11-110-cc"


def test_the_server_reports_how_its_sessions_network_is_fenced(tmp_path, monkeypatch):
    """What /healthz and glassdesk up's start-up line say (SessionManager.network_isolation)."""
    from desktop.session.manager import SessionManager
    from desktop.session.stack import StackConfig

    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    manager = SessionManager(root=tmp_path / "off", stack_config=StackConfig(network_namespace=False))
    try:
        assert manager.network_isolation() == ("browser_only", "network namespaces are turned off for this server")
    finally:
        manager.close()
    manager = SessionManager(root=tmp_path / "on")
    try:
        monkeypatch.setattr(netns, "support", lambda: "the server does not run as root (...)")
        assert manager.network_isolation() == ("browser_only", "the server does not run as root (...)")
        monkeypatch.setattr(netns, "support", lambda: None)
        assert manager.network_isolation() == ("namespace", None)
    finally:
        manager.close()
