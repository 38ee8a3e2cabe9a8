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
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import numpy as np
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ImageContent
from PIL import Image

from tests import marks
from tests.answers import mcp_tool_names
from tests.marks import GLASSDESK, assert_all_gone, marked

pytestmark = pytest.mark.x11

def server_env(tmp_path: Path, mark: str) -> dict[str, str]:
    # PYTHONPATH too: the MCP client passes a child only a few variables of its own, and the server
    # must import the code under test (a worktree's), not whatever is installed.
    env = {k: v for k, v in os.environ.items() if k.startswith("GLASSDESK_") or k == "PYTHONPATH"}
    return marks.server_env(env | {"GLASSDESK_DATA_DIR": str(tmp_path / "data")}, mark)


def test_stdio_server_lists_tools_takes_a_screenshot_and_cleans_up(tmp_path):
    mark = uuid.uuid4().hex
    params = StdioServerParameters(command=GLASSDESK, args=["mcp", "--session", "mcp-stdio", "--allow-evaluate",
                                                            "--tools", "all"],
                                   env=server_env(tmp_path, mark), cwd=str(tmp_path))
    seen: dict[int, str] = {}

    async def main():
        with open(tmp_path / "server.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                tools = (await client.list_tools()).tools
                shot = await client.call_tool("desktop_screenshot", {})
                listing = await client.call_tool("session_list", {})
                evaluated = await client.call_tool("page_evaluate", {"expression": "6 * 7"})
                seen.update(marked(mark))
                return tools, shot, listing, evaluated

    tools, shot, listing, evaluated = anyio.run(main)
    log = (tmp_path / "server.log").read_text()
    assert_all_gone(mark)
    assert "closing 1 session" in log, log
    root = re.search(r"session files in (\S+)", log).group(1)
    assert not Path(root).exists()
    assert {t.name for t in tools} == mcp_tool_names(evaluate=True)
    assert all("VISIBLE" in t.description for t in tools)
    assert evaluated.structured_content["result"] == 42, "--allow-evaluate reaches the page service"
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
        # All of this process's environment but its owner mark (marks.without_owner).
        env = marks.server_env({**os.environ, "GLASSDESK_DATA_DIR": str(tmp_path / "data")}, mark)
        proc = subprocess.Popen([GLASSDESK, "mcp", "--session", "mcp-signal"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errlog, env=env, cwd=tmp_path)
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


def listening(port: int) -> list[str]:
    """The local addresses of every TCP socket listening on ``port`` (as /proc/net writes them)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(port_hex, 16) == port:
                found.append(address)
    return found


@pytest.mark.serial("the screenshot must be taken within the run's 6 s wait: under other workers' load it was not")
def test_over_stdio_the_viewer_shows_the_strip_and_the_models_screenshot_does_not(tmp_path):
    """`glassdesk mcp` has no API, so it serves the live viewer itself, on loopback only: the link
    the agent hands out opens the desktop in Chromium with the status strip over it, while the
    screenshot the model gets during the run shows no strip (nor does its OCR read one)."""
    from playwright.sync_api import sync_playwright

    from vision.perception.ocr import read_text, shared_engine

    mark = uuid.uuid4().hex
    env = {**server_env(tmp_path, mark), "GLASSDESK_OVERLAY": "1"}
    params = StdioServerParameters(command=GLASSDESK, args=["mcp", "--session", "mcp-strip"], env=env,
                                   cwd=str(tmp_path))
    script = [{"action": "wait", "duration_ms": 6000}, {"action": "done", "answer": "watched"}]
    strip_up, shot_taken = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def watch(url: str) -> None:
        """In its own thread: Playwright's sync API must not share the thread anyio runs in."""
        strip = "() => document.getElementById('strip').hidden ? '' : document.getElementById('strip-text').textContent"
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1600, "height": 900})
                page.goto(url)
                page.wait_for_function("() => document.body.dataset.state === 'live'", timeout=30_000)
                page.wait_for_function(f"() => ({strip})().startsWith('step 1')", timeout=60_000, polling=100)
                seen["before"] = page.evaluate(strip)
                strip_up.set()
                shot_taken.wait(60)
                seen["after"] = page.evaluate(strip)  # still step 1: the shot was taken mid-run
                page.wait_for_function(f"() => ({strip})().startsWith('done')", timeout=60_000, polling=100)
                seen["done"] = page.evaluate(strip)
                browser.close()
        except Exception as exc:  # reported by the main thread
            seen["error"] = exc
            strip_up.set()

    async def main():
        with open(tmp_path / "server.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await client.call_tool("desktop_screenshot", {"scale": 0.1})  # the session is up
                link = (await client.call_tool("live_view_url", {})).structured_content["url"]
                seen["link"] = link
                seen["listening"] = listening(urlsplit(link).port)
                watcher = threading.Thread(target=watch, args=(link,), daemon=True)
                watcher.start()
                async with anyio.create_task_group() as tasks:
                    async def run() -> None:
                        seen["result"] = await client.call_tool("vision_act", {
                            "instruction": "wait while a person watches", "model": "scripted", "script": script})
                    tasks.start_soon(run)
                    await anyio.to_thread.run_sync(strip_up.wait, 90)
                    shot = await client.call_tool("desktop_screenshot", {})
                    shot_taken.set()
                await anyio.to_thread.run_sync(watcher.join, 90)
                return shot

    shot = anyio.run(main)
    log = (tmp_path / "server.log").read_text()
    assert "error" not in seen, f"{seen.get('error')!r}\n{log}"
    link = urlsplit(str(seen["link"]))
    assert link.hostname == "127.0.0.1" and link.path == "/view/mcp-strip" and link.fragment.startswith("token=")
    assert seen["listening"] == ["0100007F"]  # the viewer: on 127.0.0.1, and nothing else
    assert listening(link.port) == [], "the viewer is gone with the server"
    result = seen["result"]
    assert not result.is_error and result.structured_content["status"] == "done", log
    assert str(seen["before"]).startswith("step 1/") and seen["after"] == seen["before"], seen
    assert seen["done"] == "done · 2 steps"
    image = [c for c in shot.content if isinstance(c, ImageContent)][0]
    frame = np.asarray(Image.open(io.BytesIO(base64.b64decode(image.data))).convert("RGB"))[:, :, ::-1].copy()
    text = read_text(shared_engine().read(frame)).lower()
    assert "applications" in text  # the OCR reads this screen (the panel's menu button)...
    assert "step 1" not in text and "glassdesk" not in text and "wait 6" not in text  # ...and no strip
    assert_all_gone(mark)
