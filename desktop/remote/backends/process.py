"""Session servers as local processes: each session a `glassdesk up --single-session` on a port of
its own on loopback, with its own token and data directory.

The plainest backend: no image, no daemon. The tests use it to drive the remote path (the
``RemoteDesktop``, the forwarded page layer and QA, a server killed and replaced) against real
session servers in seconds; a developer can use it to try the control plane's remote mode.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from desktop.errors import SessionUnavailable
from desktop.remote.backends.base import BackendState, Endpoint, SessionSpec
from desktop.remote.desktop import RemoteClient
from desktop.session.stack import free_port

log = logging.getLogger("glassdesk.backends.process")

STOP_WAIT_S = 15.0


def server_args(spec: SessionSpec, port: int, host: str = "127.0.0.1", extra: tuple[str, ...] = ()) -> list[str]:
    """The session server's command line after `glassdesk` (the image's entry point is `glassdesk`)."""
    return ["up", "--single-session", "--host", host, "--port", str(port), *extra]


@dataclass
class _Server:
    process: subprocess.Popen
    port: int
    token: str
    workdir: Path


class ProcessBackend:
    name = "process"

    def __init__(self, *, extra_args: tuple[str, ...] = (), protected_ports: set[int] | None = None):
        self.extra_args = extra_args  # the control plane's fences, passed on (--launch-allow, ...)
        self.protected_ports = protected_ports if protected_ports is not None else set()
        self.servers: dict[str, _Server] = {}

    def start(self, spec: SessionSpec) -> str:
        handle = f"glassdesk-{spec.session_id}-{secrets.token_hex(3)}"
        port = free_port()
        workdir = Path(tempfile.mkdtemp(prefix=f"{handle}-"))
        env = {**os.environ, "GLASSDESK_TOKEN": spec.token, "GLASSDESK_DATA_DIR": str(workdir / "data"),
               "GLASSDESK_PROTECTED_PORTS": ",".join(str(p) for p in sorted(self.protected_ports))}
        with open(workdir / "server.log", "wb") as out:
            process = subprocess.Popen([sys.executable, "-m", "vision.cli",
                                        *server_args(spec, port, extra=self.extra_args)],
                                       env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       cwd=workdir, start_new_session=True)
        self.servers[handle] = _Server(process, port, spec.token, workdir)
        return handle

    def wait_ready(self, handle: str, timeout_s: float) -> Endpoint:
        server = self.servers.get(handle)
        if server is None:
            raise SessionUnavailable(f"{handle}: no such session server")
        endpoint = Endpoint(f"http://127.0.0.1:{server.port}", server.token)
        probe = RemoteClient(endpoint, handle)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if server.process.poll() is not None:
                    raise SessionUnavailable(f"{handle} exited with {server.process.returncode} while starting: "
                                             f"{self._tail(server)}")
                if probe.healthy(timeout_s=2):
                    return endpoint
                time.sleep(0.2)
        finally:
            probe.close()
        raise SessionUnavailable(f"{handle} did not answer within {timeout_s:.0f} s: {self._tail(server)}")

    @staticmethod
    def _tail(server: _Server) -> str:
        try:
            return (server.workdir / "server.log").read_text(errors="replace")[-400:].strip()
        except OSError:
            return "(no log)"

    def state(self, handle: str) -> BackendState:
        server = self.servers.get(handle)
        if server is None:
            return BackendState.gone
        return BackendState.running if server.process.poll() is None else BackendState.dead

    def pid(self, handle: str) -> int | None:
        server = self.servers.get(handle)
        return server.process.pid if server else None

    def apply_network_policy(self, handle: str, spec: SessionSpec) -> None:
        """A local process has no fence of the backend's: its server's proxy is the policy."""

    def stop(self, handle: str) -> None:
        server = self.servers.pop(handle, None)
        if server is None:
            return
        if server.process.poll() is None:
            # SIGTERM: the server closes its desktop itself (and its reaper ends what it could not).
            os.killpg(server.process.pid, signal.SIGTERM)
            try:
                server.process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait()
        shutil.rmtree(server.workdir, ignore_errors=True)

    def owned(self) -> list[str]:
        # A dead control plane's servers are not found by label here: each one's own reaper ends its
        # desktop, and the server itself ends with its process group (start_new_session).
        return []

    def close(self) -> None:
        for handle in list(self.servers):
            self.stop(handle)
