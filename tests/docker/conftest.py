"""Fixtures for tests against a real Docker daemon and glassdesk's real image (run by
`make docker-test`, which starts a private daemon, exports its DOCKER_HOST and builds the image;
`pytest tests` leaves this directory out: tests/conftest.py).

- ``docker_client``: the Docker SDK client for $DOCKER_HOST. Without a daemon the tests FAIL, saying
  how to get one: a docker test that skipped would pass CI having tested nothing.
- ``glassdesk_image``: the image's tag ($GLASSDESK_IMAGE, default glassdesk:test), checked present.
- ``netns(pid)``, ``NetnsTransport``: reach a container that has its own network namespace
  (`--network none`: the test daemons have no bridge, so ports cannot be published) from this
  process: sockets made inside ``netns`` belong to the container's namespace, so a server started
  there is on the container's loopback, and a client connects to the container's loopback.
  Needs root (CAP_SYS_ADMIN), as the daemon does.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass

import httpx2
import pytest

DEFAULT_IMAGE = "glassdesk:test"
HOW = ("run them with `make docker-test`, or start a daemon with `docker/test/dockerd.sh start DIR`, "
       "export the DOCKER_HOST it prints and build the image with `docker/test/build-image.sh`")
# Every container the tests start carries it, so a test run can find and remove its leftovers.
TEST_LABEL = "glassdesk.dev/test"

_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns into a network namespace: {os.strerror(err)} (the docker tests need root)")


@contextmanager
def netns(pid: int):
    """Run the block with this thread in the network namespace of process ``pid``.

    The namespace is per thread, and a socket stays in the one it was made in, so what the block
    binds or connects keeps working after it (a server's accept loop on another thread included)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)


class NetnsTransport(httpx2.HTTPTransport):
    """An HTTP transport whose connections are made in another process's network namespace."""

    def __init__(self, pid: int, **kwargs):
        super().__init__(**kwargs)
        self.pid = pid

    def handle_request(self, request):
        with netns(self.pid):
            return super().handle_request(request)


@pytest.fixture(scope="session")
def docker_client():
    """The Docker SDK client for the daemon at $DOCKER_HOST; fails (does not skip) without one."""
    import docker

    host = os.environ.get("DOCKER_HOST")
    if not host:
        pytest.fail(f"DOCKER_HOST is not set, so there is no Docker daemon to test against: {HOW}", pytrace=False)
    try:
        client = docker.DockerClient(base_url=host, timeout=120)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach it is reported the same way
        pytest.fail(f"the Docker daemon at DOCKER_HOST={host} does not answer ({exc}): {HOW}", pytrace=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def glassdesk_image(docker_client) -> str:
    """The tag of the image under test ($GLASSDESK_IMAGE, default glassdesk:test), present in the daemon."""
    import docker

    tag = os.environ.get("GLASSDESK_IMAGE") or DEFAULT_IMAGE
    try:
        docker_client.images.get(tag)
    except docker.errors.ImageNotFound:
        pytest.fail(f"the image {tag} is not in the daemon at {os.environ['DOCKER_HOST']}: {HOW}", pytrace=False)
    return tag


@dataclass
class RunningGlassdesk:
    """A container of the image running `glassdesk up` in its own network namespace."""

    container: object  # docker.models.containers.Container
    token: str
    port: int = 8080

    @property
    def pid(self) -> int:
        """The container's init process on this host (its network namespace is the container's)."""
        self.container.reload()
        pid = self.container.attrs["State"]["Pid"]
        if not pid:
            pytest.fail(f"the container is not running ({self.container.attrs['State']}); its log:\n{self.logs()}")
        return pid

    def client(self, token: str | None = "own", timeout: float = 60) -> httpx2.Client:
        """An HTTP client to the container's API, with its token unless ``token=None``."""
        headers = {"Authorization": f"Bearer {self.token if token == 'own' else token}"} if token else {}
        return httpx2.Client(base_url=f"http://127.0.0.1:{self.port}", headers=headers, timeout=timeout,
                             transport=NetnsTransport(self.pid))

    def logs(self) -> str:
        return self.container.logs(tail=60).decode(errors="replace")

    def wait_healthy(self, timeout: float = 120) -> None:
        """Wait until /healthz answers 200; fails with the container's log if it exits first."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            self.container.reload()
            if self.container.status != "running":
                pytest.fail(f"the container exited ({self.container.attrs['State']}); its log:\n{self.logs()}")
            try:
                with self.client(token=None, timeout=5) as http:
                    if http.get("/healthz").status_code == 200:
                        return
            except httpx2.TransportError as exc:
                last = exc
            time.sleep(0.5)
        pytest.fail(f"/healthz did not answer within {timeout} s (last: {last}); the container's log:\n{self.logs()}")


def run_glassdesk(docker_client, image: str, *, name_prefix: str = "glassdesk-test", env: dict | None = None,
                  command: list[str] | None = None, **run_kwargs) -> RunningGlassdesk:
    """Start the image as the README says to run it (--init, seccomp unconfined for Chromium's sandbox,
    1 GB of /dev/shm), in its own network namespace, with a fresh token."""
    token = secrets.token_hex(16)
    container = docker_client.containers.run(
        image, command=command, detach=True, init=True, shm_size="1g", security_opt=["seccomp=unconfined"],
        network_mode="none", environment={"GLASSDESK_TOKEN": token, **(env or {})},
        labels={TEST_LABEL: "1"}, name=f"{name_prefix}-{secrets.token_hex(4)}", **run_kwargs)
    return RunningGlassdesk(container=container, token=token)


@pytest.fixture(scope="module")
def glassdesk_container(docker_client, glassdesk_image):
    """One running glassdesk container for a test module, healthy; removed (with its processes) after."""
    running = run_glassdesk(docker_client, glassdesk_image)
    try:
        running.wait_healthy()
        yield running
    finally:
        running.container.remove(force=True)
