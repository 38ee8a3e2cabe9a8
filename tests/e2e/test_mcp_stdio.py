"""`glassdesk mcp` as a real subprocess over stdio: tools work, and nothing outlives it.

Each test gives the server a unique environment mark; every process it starts (the desktop's Xvfb,
XFCE, Chromium, VNC, and the reaper) inherits it, so the process table shows what is left.
"""

from __future__ import annotations

import base64
import io
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ImageContent
from PIL import Image

from desktop.procs import pids_with_env

pytestmark = pytest.mark.x11

GLASSDESK = str(Path(sys.executable).with_name("glassdesk"))
MARK = "GLASSDESK_TEST_MARK"


def marked(mark: str) -> dict[int, str]:
    """pid -> command name of every live process carrying the mark in its environment."""
    found = {}
    for pid in pids_with_env(MARK, mark):
        try:
            found[pid] = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
    return found


def assert_all_gone(mark: str, wait_s: float = 30) -> None:
    """Poll until no marked process is left; kill and report any that stay."""
    deadline = time.monotonic() + wait_s
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"processes left behind: {left}"


def server_env(tmp_path: Path, mark: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith("GLASSDESK_")}
    env.update({"GLASSDESK_DATA_DIR": str(tmp_path / "data"), MARK: mark})
    return env


def test_stdio_server_lists_tools_takes_a_screenshot_and_cleans_up(tmp_path):
    mark = uuid.uuid4().hex
    params = StdioServerParameters(command=GLASSDESK, args=["mcp", "--session", "mcp-stdio"],
                                   env=server_env(tmp_path, mark), cwd=str(tmp_path))
    seen: dict[int, str] = {}

    async def main():
        with open(tmp_path / "server.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                tools = (await client.list_tools()).tools
                shot = await client.call_tool("desktop_screenshot", {})
                listing = await client.call_tool("session_list", {})
                seen.update(marked(mark))
                return tools, shot, listing

    tools, shot, listing = anyio.run(main)
    log = (tmp_path / "server.log").read_text()
    assert_all_gone(mark)
    assert "closing 1 session" in log, log
    root = re.search(r"session files in (\S+)", log).group(1)
    assert not Path(root).exists()
    assert len(tools) == 21 and all("VISIBLE" in t.description for t in tools)
    assert not shot.is_error, log
    image = [c for c in shot.content if isinstance(c, ImageContent)][0]
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (1920, 1080)
    assert [s["id"] for s in listing.structured_content["sessions"]] == ["mcp-stdio"]
    assert {"Xvfb", "xfce4-session", "x11vnc"} <= set(seen.values()), seen


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_nothing_outlives_a_stopped_or_killed_server(tmp_path, sig):
    """SIGTERM closes the sessions; after SIGKILL the reaper ends what the server started."""
    mark = uuid.uuid4().hex
    with open(tmp_path / "server.log", "w+") as errlog:
        proc = subprocess.Popen([GLASSDESK, "mcp", "--session", "mcp-signal"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errlog, env={**os.environ, **server_env(tmp_path, mark)},
                                cwd=tmp_path)
        try:
            deadline = time.monotonic() + 60
            while "ready on" not in (tmp_path / "server.log").read_text():
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.1)
            assert "Xvfb" in marked(mark).values()
            proc.send_signal(sig)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdin.close()
            proc.stdout.close()
    assert_all_gone(mark)
    root = re.search(r"session files in (\S+)", (tmp_path / "server.log").read_text()).group(1)
    deadline = time.monotonic() + 10
    while Path(root).exists() and time.monotonic() < deadline:  # the reaper removes it after SIGKILL
        time.sleep(0.1)
    assert not Path(root).exists()


def screen_pixel(display: str, x: int, y: int) -> tuple[int, int, int]:
    import mss

    with mss.MSS(display=display) as grabber:
        shot = grabber.grab({"left": x, "top": y, "width": 1, "height": 1})
    return shot.pixel(0, 0)


def test_a_vision_run_over_stdio_shows_the_status_strip_on_the_display(tmp_path):
    """The application service starts the on-desktop strip, so a person watching a `glassdesk mcp`
    session sees what the agent does, as under `glassdesk up`."""
    from desktop.overlay import BACKGROUND, HEIGHT, PANEL_HEIGHT

    # The strip's usual place: bottom right, over the panel; this pixel is inside it, near its end.
    x, y = 1920 - 8 - 4, 1080 - PANEL_HEIGHT + (PANEL_HEIGHT - HEIGHT) // 2 + HEIGHT // 2
    mark = uuid.uuid4().hex
    env = {**server_env(tmp_path, mark), "GLASSDESK_OVERLAY": "1"}
    params = StdioServerParameters(command=GLASSDESK, args=["mcp", "--session", "mcp-strip"], env=env,
                                   cwd=str(tmp_path))
    script = [{"action": "wait", "duration_ms": 3000}, {"action": "done", "answer": "watched"}]

    async def main():
        with open(tmp_path / "server.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await client.call_tool("desktop_screenshot", {"scale": 0.1})  # the session is up
                listing = await client.call_tool("session_list", {})
                display = listing.structured_content["sessions"][0]["display"]
                before = await anyio.to_thread.run_sync(screen_pixel, display, x, y)
                during: list[tuple[int, int, int]] = []

                async def watch() -> None:
                    with anyio.move_on_after(30):
                        while True:
                            pixel = await anyio.to_thread.run_sync(screen_pixel, display, x, y)
                            if pixel == BACKGROUND:
                                during.append(pixel)
                                return
                            await anyio.sleep(0.05)

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(watch)
                    result = await client.call_tool("vision_act", {"instruction": "wait a moment",
                                                                   "model": "scripted", "script": script})
                return before, during, result

    before, during, result = anyio.run(main)
    log = (tmp_path / "server.log").read_text()
    assert not result.is_error and result.structured_content["status"] == "done", log
    assert before != BACKGROUND  # the panel, before the run: no strip yet
    assert during == [BACKGROUND], "the status strip never appeared on the stdio session's display"
    assert_all_gone(mark)
