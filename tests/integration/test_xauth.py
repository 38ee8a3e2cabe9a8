"""X authorization on every display (issue 23, item 2), on the real stack: a client without the
display's cookie is refused (another local account such as ``nobody``, or this user without the
session's authority file), while the session itself - screenshots, input, windows, the live view,
a video - works, and what it starts finds the cookie through XAUTHORITY."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess

import pytest

from desktop.actions import Click, Move
from desktop.session.liveview import rfb_login
from desktop.x11.recorder import Recorder
from desktop.x11.user import run_as_argv

pytestmark = pytest.mark.x11



def client(argv: list[str], env: dict[str, str], prefix: list[str] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, *argv], env=env, capture_output=True, text=True, timeout=20)


def bare_env(display: str, home: str) -> dict[str, str]:
    """DISPLAY and nothing else that could name a cookie (no XAUTHORITY, a HOME without one)."""
    return {"PATH": os.environ["PATH"], "DISPLAY": display, "HOME": home}


def test_a_client_without_the_cookie_is_refused(desk, tmp_path):
    display = desk.stack.display
    env = bare_env(display, str(tmp_path))
    for argv in (["xdpyinfo"], ["xdotool", "getmouselocation"], ["wmctrl", "-l"]):
        done = client(argv, env)
        assert done.returncode != 0 and "Authorization required" in done.stderr, (argv, done)
    if os.geteuid() == 0:  # another local account: nobody
        nobody = ["runuser", "-u", "nobody", "--"]
        for argv in (["xdpyinfo"], ["xdotool", "getmouselocation"]):
            done = client(argv, env, nobody)
            assert done.returncode != 0 and "Authorization required" in done.stderr, (argv, done)
        # nor can nobody read the cookie: the session's directory is closed to it
        done = client(["cat", str(desk.stack.xauthority)], env, nobody)
        assert done.returncode != 0


def test_the_authority_file_is_the_desktop_users_alone(desk):
    info = os.stat(desk.stack.xauthority)
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == (desk.stack.user.uid if desk.stack.user else os.getuid())
    # what the session starts carries it, and with it the desktop's user connects
    env = desk.stack.env()
    assert env["XAUTHORITY"] == str(desk.stack.xauthority)
    done = client(["xdpyinfo"], env, run_as_argv(desk.stack.user))
    assert done.returncode == 0 and f"name of display:    {desk.stack.display}" in done.stdout, done.stderr


def test_the_session_works_with_authorization_on(desk, page_server, tmp_path):
    assert desk.capture().width == 1920  # in-process screenshots (mss) and damage (python-xlib)
    desk.perform(Move(x=400, y=300))
    assert desk.executor.cursor() == (400, 300)
    desk.open_url(page_server.url)
    desk.perform(Click(x=960, y=600))
    assert any("chromium" in w.wm_class.lower() for w in desk.windows.list())

    async def login() -> bool:  # the live view: x11vnc reads the display with the cookie
        _, writer = await rfb_login(desk.stack.vnc_port, desk.stack.view_password)
        writer.close()
        return True
    assert asyncio.run(login())
    recorder = Recorder(desk.display, tmp_path / "video.webm", fps=5)  # ffmpeg x11grab
    recorder.start()
    assert recorder.stop().stat().st_size > 0
