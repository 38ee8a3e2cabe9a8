"""Programs a test runs on a session's desktop, as `launch` does (the desktop's user, environment
and network namespace): curl, to see what a program there reaches."""

from __future__ import annotations

import time
import uuid
from pathlib import Path


def launched_curl(client, sid: str, home: Path, url: str, *options: str) -> str:
    """Run curl on the session's desktop (as launch does: the desktop's user, environment and
    namespace) and wait for it: the status line's code ("200", "403"), or curl's error."""
    name = f"curl-{uuid.uuid4().hex[:8]}"
    args = ["-sS", "--max-time", "8", "-o", f"{name}.body", "-D", f"{name}.head", "--stderr", f"{name}.err",
            *options, url]
    answer = client.post(f"/api/v1/sessions/{sid}/desktop/launch", json={"command": "curl", "args": args})
    assert answer.status_code == 200, answer.text
    pid = answer.json()["result"]["pid"]
    deadline = time.monotonic() + 30
    while _running(pid):
        assert time.monotonic() < deadline, f"curl {url} still runs"
        time.sleep(0.05)
    head = (home / f"{name}.head").read_text() if (home / f"{name}.head").exists() else ""
    if head:
        return head.split()[1]
    return "error: " + (home / f"{name}.err").read_text().strip()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False
