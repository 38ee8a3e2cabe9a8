"""No secret of the server reaches the visible desktop: not its processes, not a launched program."""

from __future__ import annotations

import pytest

from desktop.procs import session_pids
from desktop.service import DesktopService
from desktop.stack import tagged_pids

pytestmark = pytest.mark.x11

SECRETS = {"ANTHROPIC_API_KEY": "sk-ant-envtest-0123456789abcdef", "OPENAI_API_KEY": "sk-envtest-0123456789abcdef",
           "GLASSDESK_TOKEN": "envtest-token-0123456789abcdef"}


def environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            pairs = [item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item]
    except OSError:  # ended meanwhile
        return {}
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def test_no_desktop_process_nor_launched_program_carries_a_secret(manager, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    desktops = DesktopService(manager)
    desktops.create("envtest")
    try:
        session = desktops.existing("envtest")
        _, launched = desktops.launch("envtest", "sleep", ["30"])
        pids = set(tagged_pids(session.stack.tag)) | {launched}
        pids |= set(session_pids({c.popen.pid for c in session.stack.children.values()}))
        names = {pid: open(f"/proc/{pid}/comm").read().strip() for pid in pids if environ(pid)}
        assert {"Xvfb", "xfce4-session", "x11vnc", "sleep"} <= set(names.values()), names
        leaks = {(names[pid], k) for pid in names for k, v in environ(pid).items() if v in SECRETS.values()}
        assert leaks == set()
    finally:
        desktops.delete("envtest")
