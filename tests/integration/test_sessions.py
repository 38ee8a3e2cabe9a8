"""Session lifecycle and resilience on real processes: isolation, supervision, teardown, expiry.

The destructive tests (killing Chromium, the VNC pair, Xvfb) run on a second session of their
own, so the shared ``desk`` keeps working for everything else.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from desktop.actions import Click, Move
from desktop.errors import SessionNotFound, SessionUnavailable
from desktop.session.liveview import rfb_login
from desktop.session.manager import SessionManager
from desktop.session.stack import tagged_pids

pytestmark = pytest.mark.x11


def wait_for(predicate, timeout: float = 60, what: str = "condition", interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Exception:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_child(session, name: str) -> int:
    child = session.stack.children[name]
    pid = child.popen.pid
    os.killpg(pid, signal.SIGKILL)
    return pid


def rfb_banner(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        return sock.recv(12)


def vnc_login_ok(session) -> bool:
    """The live-view relay can log in to the session's x11vnc with its view-only password."""
    async def login() -> bool:
        _, writer = await rfb_login(session.stack.vnc_port, session.stack.view_password)
        writer.close()
        return True
    return asyncio.run(login())


def healed(session, name: str, old_pid: int) -> bool:
    child = session.stack.children.get(name)
    return (session.status == "ready" and child is not None and child.alive and child.popen.pid != old_pid)


def click_lands(session, page_server, x: int, y: int) -> None:
    page_server.clear()
    session.run_settled(lambda: session.open_url(page_server.url))
    page_server.wait_for(lambda e: e.get("type") == "loaded", timeout=20)
    page_server.clear()
    session.perform(Click(x=x, y=y))
    event = page_server.wait_for(lambda e: e["type"] == "click", timeout=20)
    assert (event["screenX"], event["screenY"]) == (x, y)


@pytest.fixture(scope="module")
def _second_removed_at_the_end(manager, desk):
    yield
    try:
        manager.delete("second")
    except SessionNotFound:
        pass


@pytest.fixture
def second(manager, _second_removed_at_the_end):
    """The second session; made again when a test before this one deleted it (any order holds)."""
    try:
        return manager.get("second")
    except SessionNotFound:
        return manager.create("second")


# ------------------------------------------------------------------ isolation and info


def test_a_second_session_is_isolated(second, desk):
    a, b = desk.stack, second.stack
    assert a.display != b.display
    assert a.vnc_port and b.vnc_port and a.vnc_port != b.vnc_port
    assert a.profile != b.profile and a.workdir != b.workdir and a.home != b.home
    assert b.profile.is_dir() and (b.profile / "Default").exists()
    assert a.tag != b.tag
    assert a.vnc_password != b.vnc_password and a.view_password != b.view_password
    # each Chromium runs on its own profile and its own display
    chromium_b = b.children["chromium"].popen.pid
    assert f"--user-data-dir={b.profile} " in Path(f"/proc/{chromium_b}/cmdline").read_bytes().decode()
    # the Chromium window on each display belongs to that session's own browser process
    for session in (desk, second):
        owners = {w.pid for w in session.windows.list() if "chromium" in w.wm_class.lower()}
        assert owners == {session.stack.children["chromium"].popen.pid}
    # and each display shows its own desktop: moving one pointer leaves the other alone
    desk.perform(Move(x=100, y=100))
    second.perform(Move(x=1800, y=900))
    assert desk.executor.cursor() == (100, 100)
    assert second.executor.cursor() == (1800, 900)


def test_session_info_fields(second):
    info = second.info().model_dump()
    assert {"id", "display", "status", "novnc_url", "created_at", "last_used_at"} <= set(info)
    assert info["id"] == "second"
    assert info["display"].startswith(":") and info["display"][1:].isdigit()
    assert info["status"] == "ready"
    assert info["novnc_url"] == ""  # the live-view link is the server's to hand out (DesktopService)
    assert isinstance(info["created_at"], datetime) and info["created_at"].tzinfo is not None
    assert info["created_at"] <= info["last_used_at"] <= datetime.now(UTC)
    before = info["last_used_at"]
    second.capture()
    assert second.info().last_used_at > before  # using a session touches it


def test_session_info_over_http(api, second):
    info = api.get("/api/v1/sessions/second").json()
    assert info["id"] == "second" and info["status"] == "ready" and info["display"] == second.stack.display
    assert info["novnc_url"].startswith(f"{str(api.base_url).rstrip('/')}/view/second#token=second.view.")
    assert datetime.fromisoformat(info["created_at"]) <= datetime.fromisoformat(info["last_used_at"])
    assert "second" in [s["id"] for s in api.get("/api/v1/sessions").json()]


# ------------------------------------------------------------------ supervision


def test_killed_chromium_comes_back(second, page_server):
    restarts = second.info().restarts
    old = kill_child(second, "chromium")
    wait_for(lambda: healed(second, "chromium", old), what="Chromium to be restarted")
    assert not pid_alive(old)
    window = wait_for(second.stack.chromium_window, 30, "a visible Chromium window")
    assert window
    chromium = [w for w in second.windows.list() if "chromium" in w.wm_class.lower()]
    assert chromium and (chromium[0].x, chromium[0].y, chromium[0].width) == (0, 0, 1920)
    info = second.info()
    assert info.status == "ready"
    assert info.restarts == restarts + 1
    assert any("chromium exited" in e and "restarted" in e for e in info.events), info.events
    click_lands(second, page_server, 987, 654)


def test_killed_vnc_comes_back_while_the_agent_goes_on(second):
    vnc_port = second.stack.vnc_port
    restarts = second.info().restarts
    old_vnc = kill_child(second, "x11vnc")
    statuses, points = set(), 0

    def back() -> bool:  # while the live view heals, the agent's screen and pointer keep working
        nonlocal points
        statuses.add(second.status)
        assert second.capture().width == 1920
        points += 1
        second.perform(Move(x=100 + points % 50, y=100), settle=False)
        assert second.executor.cursor() == (100 + points % 50, 100)
        # (a restart is counted once the part is ready)
        return healed(second, "x11vnc", old_vnc) and second.info().restarts == restarts + 1

    wait_for(back, what="x11vnc to be restarted", interval=0)
    assert statuses == {"ready"} and points >= 1
    assert wait_for(lambda: rfb_banner(vnc_port).startswith(b"RFB"), 20, "the RFB port")
    assert wait_for(lambda: vnc_login_ok(second), 20, "a login with the view-only password")
    assert any("x11vnc exited" in e for e in second.info().events)


def test_killed_xvfb_restarts_the_whole_session(second, page_server):
    old_display = second.stack.display
    before = second.info()
    old_xvfb = kill_child(second, "xvfb")
    # A capture of the dead display is "unavailable, try again" (503), never a failure (500), and
    # from then on the session does not say ready while the display is gone.
    with pytest.raises(SessionUnavailable):
        second.capture()
    assert second.status != "ready" or healed(second, "xvfb", old_xvfb)
    wait_for(lambda: healed(second, "xvfb", old_xvfb), 90, "the whole desktop to restart")
    info = second.info()
    assert info.status == "ready"
    assert any("restarted the whole desktop" in e and "xvfb" in e for e in info.events), info.events
    assert info.restarts == before.restarts + 1  # one for the whole desktop; the count is not reset
    assert set(before.events) <= set(info.events)  # nor is the history
    assert info.display == second.stack.display  # may differ from old_display; reported as it is now
    assert old_display  # (kept for the message if the lines below fail)
    # every part is back, and the handles point at the new display
    for name in ("xvfb", "dbus", "xfce", "chromium", "x11vnc"):
        assert second.stack.children[name].alive, name
    frame = second.capture()
    assert (frame.width, frame.height) == (1920, 1080)
    second.perform(Move(x=321, y=123))
    assert second.executor.cursor() == (321, 123)
    assert wait_for(lambda: vnc_login_ok(second), 20, "a login with the view-only password")
    click_lands(second, page_server, 1111, 777)


def test_delete_leaves_no_process_behind(api, second):
    stack = second.stack
    tag, display = stack.tag, stack.display
    pids = {name: child.popen.pid for name, child in stack.children.items()}
    tagged = tagged_pids(tag)
    assert len(tagged) >= len(pids)  # XFCE and Chromium fork many more
    assert api.delete("/api/v1/sessions/second").status_code == 204
    assert tagged_pids(tag) == []
    for pid in [*pids.values(), *tagged]:
        assert not pid_alive(pid), pid
    # no Xvfb serves that display any more (the lock file, if a new server took the number, is not ours)
    lock = Path(f"/tmp/.X{display[1:]}-lock")
    if lock.exists():
        assert int(lock.read_text().strip() or 0) != pids["xvfb"]
    assert not stack.workdir.exists()
    assert api.get("/api/v1/sessions/second").status_code == 404
    assert second.status == "stopped"


# ------------------------------------------------------------------ idle expiry


def test_idle_sessions_expire_unless_pinned(sessions_root):
    ttl = SessionManager(root=sessions_root, max_sessions=2, idle_ttl_s=2, supervise_every_s=0.3)
    try:
        kept = ttl.create("kept", pinned=True)
        idle = ttl.create("idle")
        idle_tag = idle.stack.tag
        assert idle.status == "ready"
        wait_for(lambda: "idle" not in ttl.sessions, 60, "the idle session to expire")
        wait_for(lambda: idle.status == "stopped", 20, "the expired session to stop")
        assert wait_for(lambda: tagged_pids(idle_tag) == [], 10, "the expired session's processes to end")
        wait_for(lambda: not idle.stack.workdir.exists(), 20, "its directory to be removed")
        time.sleep(2.5)  # past the TTL again: the pinned one stays
        assert "kept" in ttl.sessions and kept.status == "ready"
        assert (datetime.now(UTC) - kept.last_used_at).total_seconds() > ttl.idle_ttl_s
        assert kept.capture().width == 1920
    finally:
        tags = [s.stack.tag for s in ttl.sessions.values()]
        ttl.close()
        for tag in tags:
            assert tagged_pids(tag) == []


def test_a_used_session_does_not_expire(sessions_root):
    ttl = SessionManager(root=sessions_root, max_sessions=1, idle_ttl_s=2, supervise_every_s=0.3)
    try:
        busy = ttl.create("used")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # keep using it for longer than the TTL
            busy.capture()
            time.sleep(0.3)
        assert "used" in ttl.sessions
        # a long job marks it busy: then it survives idling too
        busy.busy = True
        time.sleep(3)
        assert "used" in ttl.sessions
        busy.busy = False
        wait_for(lambda: "used" not in ttl.sessions, 30, "expiry once idle and not busy")
    finally:
        ttl.close()


def _listening_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def test_no_browser_process_listens_on_a_tcp_port(desk):
    """DevTools speaks over a pipe: no Chromium process of the session has a listening TCP
    socket any local process could drive the browser through, past the API's token."""
    browser = desk.stack.children["chromium"].popen.pid
    pids = [p for p in tagged_pids(desk.stack.tag) + [browser]
            if "chrom" in Path(f"/proc/{p}/comm").read_text(errors="replace")]
    assert browser in pids
    listening = _listening_inodes()
    sockets = set()
    for pid in set(pids):
        try:
            for fd in os.scandir(f"/proc/{pid}/fd"):
                target = os.readlink(fd.path)
                if target.startswith("socket:["):
                    sockets.add(target[8:-1])
        except OSError:
            continue
    assert sockets, "the browser has sockets (its pipe's peer is not one, but X is): the scan works"
    assert not sockets & listening
    assert "--remote-debugging-pipe" in Path(f"/proc/{browser}/cmdline").read_bytes().decode()
    assert "--remote-debugging-port" not in Path(f"/proc/{browser}/cmdline").read_bytes().decode()
