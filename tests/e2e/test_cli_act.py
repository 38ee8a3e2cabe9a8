"""`glassdesk act` with no API key: the offline OCR model clicks a button by its label."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.marks import GLASSDESK

pytestmark = pytest.mark.x11


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GLASSDESK_TOKEN")}
    return env | {"COLUMNS": "200"}


def test_act_clicks_sign_in_offline_and_reports(vision_api, page):
    done = subprocess.run([GLASSDESK, "act", 'click "Sign in"', "--session", "itest",
                           "--url", str(vision_api.base_url)],
                          capture_output=True, text=True, timeout=240, env=_env())
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert re.search(r"step 1/10 .*click at \(\d+, \d+\)", out), out
    assert "done" in out and "/api/v1/traces/" in out
    page.wait_for(lambda e: e["type"] == "click" and e["target"] == "signin")
    report = re.search(r"^\s+(/\S+/report\.html)$", out, re.M)
    assert report and Path(report.group(1)).is_file(), out


def test_act_reports_an_unknown_session_clearly(vision_api):
    done = subprocess.run([GLASSDESK, "act", "read the screen", "--session", "nope", "--url", str(vision_api.base_url)],
                          capture_output=True, text=True, timeout=60, env=_env())
    assert done.returncode == 2 and "session_not_found" in done.stderr


def test_act_without_a_server_says_how_to_start_one():
    done = subprocess.run([GLASSDESK, "act", "read the screen", "--url", "http://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60, env=_env())
    assert done.returncode == 2 and "glassdesk up" in done.stderr
