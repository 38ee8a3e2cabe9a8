"""A third-party client: the MCP Inspector CLI (npm) against `glassdesk mcp` over stdio.

The inspector comes from .venv/inspector (installed by `make test`: a pinned version), else from
$GLASSDESK_INSPECTOR, else `npx -y` fetches the same pinned version. Skipped only without npx.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.answers import mcp_tool_names
from tests.marks import GLASSDESK, assert_all_gone, marked, server_env

pytestmark = pytest.mark.x11

INSPECTOR_VERSION = "2.12.0"
LOCAL = Path(sys.prefix) / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


def inspector() -> list[str]:
    if os.environ.get("GLASSDESK_INSPECTOR"):
        return [os.environ["GLASSDESK_INSPECTOR"]]
    if LOCAL.exists():
        return [str(LOCAL)]
    if shutil.which("npx") is None:
        pytest.skip("npx (Node.js) is not installed, so the MCP Inspector CLI cannot run")
    return ["npx", "-y", f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}"]


def run_inspector(tmp_path: Path, *method: str) -> dict:
    mark = uuid.uuid4().hex
    # The inspector passes the server only a few variables of its own environment; -e adds ours
    # (PYTHONPATH too, so the server runs the code under test, not whatever is installed).
    env = {k: v for k, v in os.environ.items()
           if (k.startswith("GLASSDESK_") and k != "GLASSDESK_INSPECTOR") or k == "PYTHONPATH"}
    env = server_env(env | {"GLASSDESK_DATA_DIR": str(tmp_path / "data")}, mark)
    flags = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
    argv = [*inspector(), "--cli", *flags, GLASSDESK, "mcp", "--session", "inspector", *method]
    out, err = tmp_path / "inspector.out", tmp_path / "inspector.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, text=True, cwd=tmp_path)
        # Looked at while it runs: the desktop's processes are found by the server's owner mark,
        # which marked() learns from the server's own processes (tests/marks.py).
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            marked(mark)
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
        returncode = proc.wait()
    assert_all_gone(mark)
    assert returncode == 0, f"{out.read_text()[-2000:]}\n{err.read_text()[-4000:]}"
    return json.loads(out.read_text())


def test_inspector_lists_the_tools(tmp_path):
    listing = run_inspector(tmp_path, "--method", "tools/list")
    tools = {t["name"]: t for t in listing["tools"]}
    assert len(tools) == len(mcp_tool_names()) and "desktop_screenshot" in tools and "vision_act" in tools
    assert all("VISIBLE" in t["description"] for t in tools.values())
    assert tools["desktop_screenshot"]["annotations"]["readOnlyHint"] is True
    assert tools["desktop_click"]["inputSchema"]["properties"]["x"]["maximum"] == 1919


def test_inspector_calls_desktop_screenshot(tmp_path):
    result = run_inspector(tmp_path, "--method", "tools/call", "--tool-name", "desktop_screenshot",
                           "--tool-arg", "scale=0.25")
    assert result["isError"] is False
    kinds = [c["type"] for c in result["content"]]
    assert kinds == ["text", "image"] and result["content"][1]["mimeType"] == "image/png"
    assert "480x270" in result["content"][0]["text"]
    assert result["structuredContent"]["session"] == "inspector"
