"""Sessions as Docker containers: one container of the glassdesk image per session, running
`glassdesk up --single-session`, driven over HTTP by the control plane (desktop.remote.desktop).

Networking: each container on a user-defined bridge network (``glassdesk-sessions``, made when
missing), in a network namespace of its own; its server listens on port 8080 there with a random
token of its own, and the control plane reaches it at the container's address (no port is
published: these daemons run without the default bridge and without iptables, and a user-defined
bridge still works). Its own namespace is what lets several sessions run at once: the X server's and
XFCE's abstract Unix sockets (``@/tmp/.X11-unix/X0``, ``@/tmp/.ICE-unix/<pid>``) belong to the
network namespace, and two containers sharing the host's collide on them (tested: the second
session's XFCE cannot start). It also keeps each session's VNC server and policy proxy, on its own
loopback, out of the other sessions' reach. ``network="host"`` remains for a daemon where a bridge
cannot be made: one session at a time, on a port of the host's loopback. ``--network none`` with a
Unix socket was the other way offered, but would leave the browser no network at all. Without
iptables the bridge has no NAT: the browser reaches the host (the gateway address), not beyond,
unless the daemon runs with its usual iptables rules.

Limits: memory (no swap beyond it) and CPUs per container, pids bounded, /dev/shm 1 GiB (Chromium's
shared memory; tmpfs pages count against the memory limit). The figures are in docs/scaling.md.
Ownership: every container carries desktop.remote.backends.base's labels, the owner being this control
plane's instance id; a control plane that starts removes what one of the same id left.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time

# docker.client, not docker: the type checker takes this repository's docker/ folder (the image's
# files, no __init__.py) for the package. The SDK is untyped either way.
import docker.client
import docker.errors

from desktop.errors import SessionUnavailable
from desktop.remote.backends.base import (
    LABEL_OWNER,
    LABEL_ROLE,
    BackendState,
    Endpoint,
    SessionSpec,
    labels,
)
from desktop.remote.desktop import RemoteClient
from desktop.session.stack import free_port

log = logging.getLogger("glassdesk.backends.docker")

DEFAULT_IMAGE = "glassdesk:latest"
DEFAULT_NETWORK = "glassdesk-sessions"
SERVER_PORT = 8080  # in the container's own namespace (bridge networking)
PIDS_LIMIT = 4096  # an idle session runs ~141; Chromium adds a few per tab and renderer
STOP_TIMEOUT_S = 10  # SIGTERM first: the session server closes its desktop, then SIGKILL


def default_owner(port: int | None = None) -> str:
    return os.environ.get("GLASSDESK_INSTANCE") or f"{socket.gethostname()}-{port or 0}"


class DockerBackend:
    name = "docker"

    def __init__(self, *, image: str | None = None, owner: str | None = None, extra_args: tuple[str, ...] = (),
                 protected_ports: set[int] | None = None, client: docker.client.DockerClient | None = None,
                 network: str | None = None):
        self.image = image or os.environ.get("GLASSDESK_IMAGE", DEFAULT_IMAGE)
        self.network = network or os.environ.get("GLASSDESK_DOCKER_NETWORK", DEFAULT_NETWORK)
        self.protected_ports = protected_ports if protected_ports is not None else set()
        self.owner = owner or default_owner(min(self.protected_ports, default=None))
        self.extra_args = extra_args
        self.client = client or docker.client.from_env()
        self.endpoints: dict[str, Endpoint] = {}
        self._made_network = False
        if self.network != "host" and not self.client.networks.list(names=[self.network]):
            self.client.networks.create(self.network, driver="bridge", labels={LABEL_ROLE: "sessions"})
            self._made_network = True

    def start(self, spec: SessionSpec) -> str:
        # Also its hostname, which Docker would cut at a '.' (a pooled server's id has one).
        name = f"glassdesk-{spec.session_id.replace('.', '-')}-{secrets.token_hex(3)}"
        host = self.network == "host"
        port = free_port() if host else SERVER_PORT
        # On a bridge it listens on its namespace's address and answers to its own name (--public-host).
        where = ["--host", "127.0.0.1"] if host else ["--host", "0.0.0.0", "--public-host", name]
        argv = ["up", "--single-session", *where, "--port", str(port), *self.extra_args]
        environment = {"GLASSDESK_TOKEN": spec.token, "GLASSDESK_PORT": str(port),  # the image's HEALTHCHECK reads it
                       "GLASSDESK_PROTECTED_PORTS": ",".join(str(p) for p in sorted(self.protected_ports))}
        try:
            container = self.client.containers.run(
                self.image, argv, name=name, hostname=name, detach=True,
                entrypoint=["glassdesk"], environment=environment, labels=labels(spec.session_id, self.owner),
                network_mode=self.network if host else None, network=None if host else self.network,
                init=True, security_opt=["seccomp=unconfined"],  # Chromium's sandbox needs it
                mem_limit=f"{spec.memory_mb}m", memswap_limit=f"{spec.memory_mb}m", nano_cpus=int(spec.cpus * 1e9),
                pids_limit=PIDS_LIMIT, shm_size="1g")
        except docker.errors.ImageNotFound as exc:
            raise SessionUnavailable(f"no image {self.image!r} on the Docker daemon: build it (make docker-test "
                                     "does) or name another with GLASSDESK_IMAGE") from exc
        except docker.errors.APIError as exc:
            self.stop(name)
            raise SessionUnavailable("Docker could not start the session's container: "
                                     f"{exc.explanation or exc}") from exc
        if host:
            self.endpoints[name] = Endpoint(f"http://127.0.0.1:{port}", spec.token)
        else:
            container.reload()
            address = container.attrs["NetworkSettings"]["Networks"][self.network]["IPAddress"]
            self.endpoints[name] = Endpoint(f"http://{address}:{port}", spec.token, host=f"{name}:{port}")
        return name

    def wait_ready(self, handle: str, timeout_s: float) -> Endpoint:
        endpoint = self.endpoints.get(handle)
        if endpoint is None:
            raise SessionUnavailable(f"{handle}: no such session container")
        probe = RemoteClient(endpoint, handle)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self.state(handle) in (BackendState.dead, BackendState.gone):
                    raise SessionUnavailable(f"container {handle} stopped while starting: {self._logs(handle)}")
                if probe.healthy(timeout_s=2):
                    return endpoint
                time.sleep(0.25)
        finally:
            probe.close()
        raise SessionUnavailable(f"container {handle} did not answer within {timeout_s:.0f} s: {self._logs(handle)}")

    def _logs(self, handle: str) -> str:
        try:
            return self.client.containers.get(handle).logs(tail=8).decode(errors="replace").strip()[-600:]
        except docker.errors.DockerException:
            return "(no logs)"

    def state(self, handle: str) -> BackendState:
        try:
            status = self.client.containers.get(handle).status
        except docker.errors.NotFound:
            return BackendState.gone
        return {"running": BackendState.running, "created": BackendState.starting,
                "restarting": BackendState.starting}.get(status, BackendState.dead)

    def apply_network_policy(self, handle: str, spec: SessionSpec) -> None:
        """The bridge network has no per-container egress rules: the server's proxy is the policy."""

    def stop(self, handle: str) -> None:
        self.endpoints.pop(handle, None)
        try:
            container = self.client.containers.get(handle)
        except docker.errors.NotFound:
            return
        try:
            if container.status == "running":
                container.stop(timeout=STOP_TIMEOUT_S)
            container.remove(force=True, v=True)  # with its anonymous volumes: nothing left behind
        except docker.errors.NotFound:
            pass

    def owned(self) -> list[str]:
        found = self.client.containers.list(all=True, filters={"label": [f"{LABEL_ROLE}=session",
                                                                         f"{LABEL_OWNER}={self.owner}"]})
        return [c.name for c in found]

    def close(self) -> None:
        if self._made_network and not self.owned():
            try:
                self.client.networks.get(self.network).remove()
            except docker.errors.APIError:  # another control plane's sessions still use it
                pass
        self.client.close()
