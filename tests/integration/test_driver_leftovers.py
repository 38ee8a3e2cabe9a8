"""A kill -9 of the server leaves no ``playwright-artifacts-*`` directory (no X needed).

Playwright's driver makes one in its temp dir for each browser it launches and removes it only
when the browser is closed cleanly. A stand-in server owns its desktops as `glassdesk up` does
(desktop.session.ownership.own_desktops), launches a headless Chromium through glassdesk's one driver, and is
killed; its reaper then removes the session root, which is where the directory now is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop.browser.chromium import CHROMIUM

SERVER = r"""
import json, os, signal, sys
from pathlib import Path
from desktop.browser.chromium import CHROMIUM, driver
from desktop.session.ownership import own_desktops

own = own_desktops()
loop = driver()
playwright = loop.run(loop.playwright(), 60)
# The browser's own environment, as a session's is (DesktopStack.env): the server's temp dir.
browser_env = {**os.environ, "TMPDIR": "/tmp"}
browser = loop.run(playwright.chromium.launch(executable_path=CHROMIUM, headless=True, env=browser_env), 60)
found = sorted(str(p) for p in Path(os.environ["TMPDIR"]).rglob("playwright-artifacts-*"))
print(json.dumps({"root": str(own.root), "artifacts": found}), flush=True)
sys.stdin.readline()
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")
def test_a_killed_servers_driver_leaves_no_artifacts_directory(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("GLASSDESK_OWNER", None)
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        info = json.loads(proc.stdout.readline())
        root = Path(info["root"])
        assert info["artifacts"], info  # the driver made one for the browser
        proc.stdin.write("crash\n")
        proc.stdin.flush()
        assert proc.wait(30) == -signal.SIGKILL
        deadline = time.monotonic() + 30
        while root.exists() and time.monotonic() < deadline:  # the reaper ends the browser, removes the root
            time.sleep(0.1)
        assert not root.exists()
        assert list(tmp_path.rglob("playwright-artifacts-*")) == []
        # It was in the session root, not loose in the temp dir, whoever removed it.
        assert all(Path(a).is_relative_to(root) for a in info["artifacts"]), info
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
