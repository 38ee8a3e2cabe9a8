"""The session-backend contract: where a remote session runs (a container, a pod, a process).

The control plane (the API, MCP, console, loop, traces and QA) asks a backend for one session
server per session: the glassdesk image (or program) running ``glassdesk up --single-session`` with
its own token. The backend only starts, watches and stops it and says how to reach it; everything
spoken to it goes through ``desktop.remote.desktop``. /work/BACKEND-CONTRACT.md is the agreed shape (the
Kubernetes backend is written against it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

# Labels on every container or pod a control plane starts: which are ours, whose, and for which
# session (the orphan clean-up at start and `docker ps --filter label=...` read them).
LABEL_NAME = "app.kubernetes.io/name"
LABEL_ROLE = "glassdesk.dev/role"
LABEL_SESSION = "glassdesk.dev/session"
LABEL_OWNER = "glassdesk.dev/owner"


def labels(session_id: str, owner: str) -> dict[str, str]:
    return {LABEL_NAME: "glassdesk", LABEL_ROLE: "session", LABEL_SESSION: session_id, LABEL_OWNER: owner}


@dataclass(frozen=True)
class SessionSpec:
    """What the control plane asks of one remote session."""

    session_id: str
    token: str  # random per session: the session server's GLASSDESK_TOKEN
    memory_mb: int  # the limit (on Kubernetes the request too)
    cpus: float
    allow: tuple[str, ...] = ()  # the browser's network policy (desktop.network.policy host patterns)
    deny: tuple[str, ...] = ()


@dataclass(frozen=True)
class Endpoint:
    """How the control plane reaches a session server."""

    base_url: str  # e.g. "http://10.1.2.3:8000", or "http://session" with ``uds``
    token: str
    uds: str | None = None  # a Unix socket path when the server listens on one
    host: str | None = None  # the Host header to send, when base_url names the server by an address it does
    #                          not answer to (a container's IP: the server answers to its --public-host)


class BackendState(StrEnum):
    starting = "starting"
    running = "running"
    dead = "dead"  # it exited or was killed: report it, then replace or close it
    gone = "gone"  # nothing of that name exists (deleted, or never started)


class SessionBackend(Protocol):
    name: str

    def start(self, spec: SessionSpec) -> str:
        """Create the container/pod/process; returns its handle (a name)."""

    def wait_ready(self, handle: str, timeout_s: float) -> Endpoint:
        """Wait until its server answers /healthz. Raises desktop.errors.SessionUnavailable (dead,
        or not ready in time: the message says which)."""

    def state(self, handle: str) -> BackendState: ...

    def apply_network_policy(self, handle: str, spec: SessionSpec) -> None:
        """Make what the backend itself enforces of a session's network policy (beyond the session
        server's own proxy, which the control plane sets over HTTP) follow ``spec``'s allow/deny,
        on a server already running: a warm pool's server claimed by a session with a policy. Nothing
        where the backend enforces none. Raises desktop.errors.SessionUnavailable when it cannot."""

    def stop(self, handle: str) -> None:
        """Idempotent; leaves nothing behind (no container, volume, process or file)."""

    def owned(self) -> list[str]:
        """The handles labelled as this kind of control plane's, dead or alive, whoever started
        them: what a starting server cleans up when their owner is gone."""

    def close(self) -> None: ...
