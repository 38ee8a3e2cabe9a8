"""`glassdesk up` killed with kill -9 mid-run: nothing of it is left, and the next server on the
same data dir closes its run as `interrupted`, still verifiable.

Each server runs as a real subprocess with its own port, data dir, temp dir and an environment
mark (inherited by every desktop process that keeps its environment). "Its processes" are taken
from the process table before the kill: every descendant, every process in a session one of them
leads (Chromium's), and every marked process; each by pid and start time, as pids are reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx2
import pytest

from desktop.session.stack import free_port
from desktop.x11.procs import pids_with_env, session_pids, start_time
from tests.marks import GLASSDESK, MARK

pytestmark = pytest.mark.x11

LONG_RUN = [{"action": "wait", "duration_ms": 1500}] * 40 + [{"action": "done", "answer": "never reached"}]


def wait_until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        result = predicate()
        if result:
            return result
        assert time.monotonic() < deadline, f"not within {seconds:.0f}s: {what}"
        time.sleep(0.1)


def film_seconds(film: bytes) -> float:
    """How long a film plays, by its decoded frames (a film cut short has no duration in its header)."""
    with tempfile.NamedTemporaryFile(suffix=".mp4") as f:
        f.write(film)
        f.flush()
        out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                              "stream=nb_read_frames,r_frame_rate", "-of", "json", f.name],
                             capture_output=True, text=True, timeout=60)
    stream = json.loads(out.stdout)["streams"][0]
    num, _, den = stream["r_frame_rate"].partition("/")
    return int(stream["nb_read_frames"]) / (int(num) / int(den or 1))


def children_of() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry.name}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    return children


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


class Up:
    """One `glassdesk up` subprocess."""

    def __init__(self, tmp_path: Path, temp_dir: Path, name: str):
        self.mark = uuid.uuid4().hex
        self.port = free_port()
        env = {k: v for k, v in os.environ.items()
               if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GLASSDESK_TOKEN", "GLASSDESK_OWNER")}
        env |= {"GLASSDESK_DATA_DIR": str(tmp_path / "data"), "TMPDIR": str(temp_dir), MARK: self.mark}
        self.log = tmp_path / f"{name}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([GLASSDESK, "up", "--port", str(self.port)], stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
        self.client = httpx2.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=60)
        wait_until(self._healthy, 180, f"glassdesk up answers /healthz\n{self.output()}")
        self.root = Path(re.search(r"session files in (\S+)", self.output()).group(1))

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def _healthy(self) -> bool:
        assert self.proc.poll() is None, f"glassdesk up exited with {self.proc.returncode}\n{self.output()}"
        try:
            return self.client.get("/healthz").status_code == 200
        except httpx2.TransportError:
            return False

    def processes(self) -> dict[int, int]:
        """pid -> start time of every process this server started, as the table shows them now."""
        tree, found, todo = children_of(), set(), [self.proc.pid]
        while todo:
            for child in tree.get(todo.pop(), []):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        found |= set(session_pids(found)) | set(pids_with_env(MARK, self.mark))
        return {pid: start for pid in found if (start := start_time(pid)) is not None}

    def reaper(self) -> int:
        for pid in self.processes():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"desktop.session.ownership" in argv and str(self.root).encode() in argv:
                return pid
        raise AssertionError("the server has no reaper")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.client.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)
        self.client.close()


def alive(processes: dict[int, int]) -> dict[int, str]:
    return {pid: comm(pid) for pid, start in processes.items() if start_time(pid) == start}


def assert_gone(server: Up, processes: dict[int, int], seconds: float = 30) -> None:
    """Poll until none of them is left and the server's temp dir is gone; kill and report leftovers."""
    def gone() -> bool:
        return not alive(processes) and not pids_with_env(MARK, server.mark) and not server.root.exists()

    deadline = time.monotonic() + seconds
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = alive(processes) | {pid: comm(pid) for pid in pids_with_env(MARK, server.mark)}
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"processes left behind: {left}"
    assert not server.root.exists(), f"{server.root} left behind"


@pytest.fixture
def temp_dir():
    """The servers' temp dir: short, as dbus's socket path under it must fit in 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="gd-crash-"))
    path.chmod(0o711)  # as /tmp is for it: a root server's desktop user must pass through (desktop/x11/user.py)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def servers():
    started: list[Up] = []
    yield started
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
        for pid in pids_with_env(MARK, server.mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_a_killed_server_leaves_nothing_and_its_run_reads_interrupted(tmp_path, temp_dir, servers):
    first = Up(tmp_path, temp_dir, "first")
    servers.append(first)

    def long_run() -> None:
        try:
            with httpx2.Client(timeout=600) as client:
                client.post(f"http://127.0.0.1:{first.port}/api/v1/sessions/default/vision/act",
                            json={"instruction": "wait a long time", "model": "scripted", "max_steps": 50,
                                  "script": LONG_RUN})
        except httpx2.TransportError:
            pass  # the server is killed under it

    recording = first.client.post("/api/v1/sessions/default/recording/start").json()
    filming_since = time.monotonic()
    threading.Thread(target=long_run, daemon=True).start()
    running = wait_until(lambda: [m for m in first.client.get("/api/v1/traces").json() if m["steps"] >= 2],
                         120, "the run records two steps")
    # the session's film has closed a fragment or two (one at each keyframe, every 2 s)
    time.sleep(max(0.0, 5 - (time.monotonic() - filming_since)))
    trace_id = running[0]["trace_id"]
    assert running[0]["status"] == "running"
    processes = first.processes()
    names = set(alive(processes).values())
    assert {"Xvfb", "xfce4-session", "x11vnc", "chromium"} <= names, names

    first.kill()
    assert_gone(first, processes)  # the reaper ended them and removed the temp dir

    second = Up(tmp_path, temp_dir, "second")
    servers.append(second)
    said = "2 run(s) and recording(s) left unfinished by a server that stopped are now marked interrupted"
    assert said in second.output(), second.output()
    trace = second.client.get(f"/api/v1/traces/{trace_id}").json()
    meta = trace["meta"]
    assert meta["status"] == "interrupted" and meta["error"]["code"] == "interrupted"
    assert meta["steps"] >= 2 and meta["steps"] == len(trace["steps"])
    assert meta["finished_at"] == trace["steps"][-1]["finished_at"]
    verification = second.client.get(f"/api/v1/traces/{trace_id}/verify").json()
    assert verification["ok"] and verification["steps_checked"] == meta["steps"], verification
    report = second.client.get(f"/api/v1/traces/{trace_id}/report").text
    assert '"status": "interrupted"' in report and "Evidence verified" in report
    # the session's recording: what was filmed is kept, playable, with its SHA-256; no scratch left
    kept = second.client.get(f"/api/v1/recordings/{recording['recording_id']}").json()
    assert kept["status"] == "interrupted" and kept["video"]["notes"], kept
    film = second.client.get(kept["video"]["url"]).content
    assert hashlib.sha256(film).hexdigest() == kept["video"]["sha256"]
    assert film_seconds(film) >= 2.0
    left = sorted(p.name for p in (tmp_path / "data" / "recordings" / recording["recording_id"]).iterdir())
    assert left == ["captions.vtt", "chapters.vtt", "recording.json", "video.mp4"], left

    processes = second.processes()
    second.stop()  # a clean stop leaves nothing either
    assert_gone(second, processes)


def test_a_restart_ends_what_a_server_killed_with_its_reaper_left(tmp_path, temp_dir, servers):
    first = Up(tmp_path, temp_dir, "first")
    servers.append(first)
    processes = first.processes()
    reaper = first.reaper()
    os.kill(reaper, signal.SIGKILL)  # a kill of everything: the OOM killer, a container stop
    first.kill()
    wait_until(lambda: start_time(reaper) is None, 10, "the reaper is dead")
    left = alive(processes)
    assert {"Xvfb", "xfce4-session", "x11vnc", "chromium"} <= set(left.values()), left
    assert first.root.exists()

    second = Up(tmp_path, temp_dir, "second")
    servers.append(second)
    assert "left by a glassdesk that was killed" in second.output(), second.output()
    assert_gone(first, processes, seconds=0)  # ended before the new server answered

    processes = second.processes()
    second.stop()
    assert_gone(second, processes)
