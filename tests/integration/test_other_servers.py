"""A session never reaches another glassdesk server of the same host (issue 33, item 1): with a
second server running (`glassdesk up`, no token, its own desktop), code on this server's desktop
(curl through the proxy its environment names) and this server's browser are refused the other
server's API and its session's live view, in every spelling of this machine, and each refusal is
in the session's record; the other server saw nothing. Once it stops, its ports are free again.

The registry itself (entries, staleness, trusted directories) is tested without X in
tests/unit/test_servers_registry.py."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import httpx2
import pytest

from desktop.network import netns
from desktop.network.servers import PREFIX, Entry
from desktop.session.stack import free_port
from tests.marks import GLASSDESK, marked_pids, server_env
from tests.programs import launched_curl

pytestmark = pytest.mark.x11

SID = "itest"


class OtherServer:
    """`glassdesk up` as a process of its own: its own port, data and temp dirs, no token."""

    def __init__(self, root: Path):
        self.port = free_port()
        self.mark = uuid.uuid4().hex
        temp = root / "tmp"
        temp.mkdir()
        temp.chmod(0o711)  # a root server's desktop user passes through, as through /tmp
        env = server_env({**os.environ, "TMPDIR": str(temp), "GLASSDESK_DATA_DIR": str(root / "data")}, self.mark)
        self.log = (root / "server.log").open("wb")
        self.proc = subprocess.Popen([GLASSDESK, "up", "--port", str(self.port)], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.client = httpx2.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)
        try:
            self._wait_ready(root)
        except BaseException:
            self.stop()  # nothing of it outlives a start that failed
            raise

    def _wait_ready(self, root: Path) -> None:
        deadline = time.monotonic() + 120
        while True:
            assert self.proc.poll() is None, f"the other server exited: {(root / 'server.log').read_text()[-2000:]}"
            try:
                if self.client.get("/api/v1/sessions/default").json().get("status") == "ready":
                    break
            except (httpx2.TransportError, ValueError):
                pass
            assert time.monotonic() < deadline, "the other server's default session did not become ready"
            time.sleep(0.2)

    def registered_ports(self) -> set[int]:
        """The ports its registry entry names: its API's and its session's live view and proxy."""
        registry = Path("/tmp") / f"{PREFIX}{os.geteuid()}"
        ports: set[int] = set()
        for path in registry.glob(f"{self.proc.pid}-*.json"):
            ports |= Entry.parse(path.read_text()).ports
        return ports

    def sessions(self) -> list[str]:
        return sorted(s["id"] for s in self.client.get("/api/v1/sessions").json())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in marked_pids(self.mark):  # what its reaper did not end, if it was killed
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.client.close()
        self.log.close()


@pytest.fixture(scope="module")
def other():
    with tempfile.TemporaryDirectory(prefix="gd-other-") as root:
        Path(root).chmod(0o711)
        server = OtherServer(Path(root))
        try:
            yield server
        finally:
            server.stop()


def ok(response):
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


def blocked_since(client, after: int) -> list[tuple[int, str]]:
    entries = ok(client.get(f"/api/v1/sessions/{SID}/network-policy/blocked", params={"after": after}))
    return [(e["port"], e["reason"]) for e in entries]


def last_seq(client) -> int:
    entries = ok(client.get(f"/api/v1/sessions/{SID}/network-policy/blocked"))
    return entries[-1]["seq"] if entries else 0


@pytest.mark.skipif(netns.support() is not None, reason=f"no network namespaces: {netns.support()}")
def test_code_on_the_desktop_cannot_reach_another_servers_api_or_live_view(netapi, other, desk, manager):
    client, _port = netapi
    theirs = other.registered_ports()
    assert other.port in theirs and len(theirs) >= 3, theirs  # its API, its session's live view and proxy
    assert theirs <= manager.control_ports(), "the other server's ports are not among the refused ones"
    after = last_seq(client)
    before = other.sessions()
    home = desk.stack.home
    create = ["-X", "POST", "-H", "content-type: application/json", "--data", '{"id": "pwned"}']
    for address in ("127.0.0.1", "0.0.0.0", "localhost", "[::1]"):
        answer = launched_curl(client, SID, home, f"http://{address}:{other.port}/api/v1/sessions", *create)
        assert answer == "403", (address, answer)
    for port in theirs:  # /healthz answered without a token; a live view's port; a proxy's
        assert launched_curl(client, SID, home, f"http://127.0.0.1:{port}/healthz") == "403", port
    assert other.sessions() == before == ["default"]  # nothing was created there
    refused = blocked_since(client, after)
    assert {reason for _, reason in refused} == {"control_plane"}, refused
    assert {port for port, _ in refused} == theirs, refused


def test_the_browser_cannot_open_another_servers_pages(netapi, other):
    client, _port = netapi
    for path in ("/api/v1/sessions", "/healthz", "/"):
        answer = client.post(f"/api/v1/sessions/{SID}/desktop/open",
                             json={"url": f"http://127.0.0.1:{other.port}{path}"})
        assert answer.status_code == 422, answer.text
        assert "network policy" in answer.json()["error"]["message"], answer.text


def test_a_stopped_servers_ports_are_no_longer_refused(manager, tmp_path):
    with tempfile.TemporaryDirectory(prefix="gd-other-") as root:
        Path(root).chmod(0o711)
        server = OtherServer(Path(root))
        try:
            port = server.port
            assert port in manager.control_ports()
        finally:
            server.stop()
    assert port not in manager.control_ports()
