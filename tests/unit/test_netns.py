"""A network namespace per session (desktop.network.netns): names, who owns them, how a desktop
program is started in one, and what happens without root. No namespace is made here (the real
ones: tests/integration/test_netns.py and test_desktop_network.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from desktop.network import netns
from desktop.session.stack import DesktopStack
from desktop.x11.user import DesktopUser


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
    """nsenter before setpriv (entering needs CAP_SYS_ADMIN); Xvfb stays outside (its clients reach
    it by its socket file), x11vnc stays the server's."""
    stack = DesktopStack(tmp_path)
    stack.user = DesktopUser("glassdesk-desktop-1", 1234, 1235)
    as_user = ["setpriv", "--reuid=1234", "--regid=1235", "--clear-groups", "--"]
    assert stack.run_prefix() == as_user  # no namespace (not root): as before
    stack.namespace = netns.SessionNamespace("glassdesk-1-2-ab")
    inside = ["nsenter", "--net=/run/netns/glassdesk-1-2-ab", "--"]
    assert stack.run_prefix() == [*inside, *as_user]  # a part, a launched program, Chromium's launcher
    assert stack.run_prefix(outside_namespace=True) == as_user  # Xvfb
    assert stack.run_prefix(server_side=True) == []  # x11vnc
    assert stack.OUTSIDE_NAMESPACE >= {"xvfb", "x11vnc"}


def test_every_desktop_program_is_told_of_the_session_s_proxy(tmp_path):
    stack = DesktopStack(tmp_path)
    assert "http_proxy" not in stack.env()

    class Proxy:
        port = 40123

    stack.proxy = Proxy()  # type: ignore[assignment]
    env = stack.env()
    assert env["http_proxy"] == env["HTTPS_PROXY"] == "http://127.0.0.1:40123" and env["no_proxy"] == ""


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


def test_the_server_reports_how_its_sessions_network_is_fenced(monkeypatch):
    """What /healthz and glassdesk up's start-up lines say (desktop.session.stack.isolation)."""
    from desktop.session import stack

    monkeypatch.setattr(netns, "support", lambda: "the server does not run as root (...)")
    found = stack.isolation()
    assert found["network"] == "browser_only"
    assert any(p.startswith("network: the server does not run as root") and "only Chromium" in p
               for p in found["degraded"]), found
    monkeypatch.setattr(netns, "support", lambda: None)
    found = stack.isolation()
    assert found["network"] == "namespace" and not any(p.startswith("network:") for p in found["degraded"])


def test_the_browser_listens_for_devtools_only_inside_its_namespace_and_only_with_page_code(tmp_path):
    """A DevTools port runs code in pages (the --allow-evaluate fence) and, on the server's loopback,
    would be every local process's: so only both (desktop.session.stack.DesktopStack.devtools_port)."""
    from desktop.browser.chromium import DEVTOOLS_PORT
    from desktop.session.stack import StackConfig

    def switches(stack):
        return [a for a in stack.chromium_args() if a.startswith("--remote-debugging")]

    for page_code, namespace in ((False, None), (True, None), (False, "glassdesk-1-2-ab")):
        stack = DesktopStack(tmp_path, config=StackConfig(page_code=page_code))
        stack.proxy = type("Proxy", (), {"port": 3128})()
        stack.namespace = netns.SessionNamespace(namespace) if namespace else None
        assert stack.devtools_port is None and switches(stack) == [], (page_code, namespace)
    stack.config = StackConfig(page_code=True)
    assert stack.devtools_port == DEVTOOLS_PORT
    assert switches(stack) == [f"--remote-debugging-port={DEVTOOLS_PORT}", "--remote-debugging-address=127.0.0.1"]
