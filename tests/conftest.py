"""Shared fixtures: the real desktop stack, the event-recording page, and the API server."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest
import uvicorn

from desktop.session.manager import SessionManager
from desktop.session.stack import free_port
from tests.fakes.site import TestSite
from tests.fakes.testpage import TestPage

# Every server a test starts as a child process (session servers, the fake cluster's pods, MCP over
# stdio) must run the code under test, from this checkout, whatever the venv's editable install
# points at and whatever the caller's environment holds.
REPO = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)


@contextmanager
def session_files():
    """A directory for session files the desktop's user can pass through (pytest's own temporary
    directories are 0700 and root's when the suite runs as root: desktop/x11/user.py)."""
    root = Path(tempfile.mkdtemp(prefix="glassdesk-test-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def sessions_root():
    with session_files() as root:
        yield root


@pytest.fixture(scope="session")
def manager():
    with session_files() as root:
        manager = SessionManager(root=root, max_sessions=4)
        yield manager
        manager.close()


@pytest.fixture(scope="session")
def desk(manager):
    """One real visible desktop (Xvfb + XFCE + Chromium + x11vnc) for the run."""
    return manager.create("itest")


@pytest.fixture(scope="session")
def page_server():
    server = TestPage()
    yield server
    server.close()


@pytest.fixture(scope="session")
def site():
    """The page layer's local test site (tests/fakes/site.py)."""
    served = TestSite()
    yield served
    served.close()


@pytest.fixture
def page(desk, page_server):
    """The test page freshly loaded in the session's Chromium, with its event log cleared."""
    page_server.clear()
    desk.run_settled(lambda: desk.open_url(page_server.url))
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    page_server.clear()
    return page_server


@pytest.fixture(scope="session")
def viewport(desk, page_server):
    """Where the page's (0,0) is on the display: clicked once and measured, never assumed."""
    from desktop.actions import Click

    page_server.clear()
    desk.run_settled(lambda: desk.open_url(page_server.url))
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    desk.perform(Click(x=960, y=700))
    event = page_server.wait_for(lambda e: e.get("type") == "click")
    return event["screenX"] - event["clientX"], event["screenY"] - event["clientY"]


class LiveServer:
    """The app on a real uvicorn on loopback. ``port``: the one its Settings name, so the live-view
    links it hands out point at it. ``lifespan``: "on" runs the app's lifespan (tests/fakes/app_server.py)."""

    def __init__(self, app, port: int | None = None, lifespan: str = "off"):
        self.port = port or free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan=lifespan))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("API server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(5)


@pytest.fixture(scope="session")
def api(manager, desk):
    """The real API server (uvicorn, loopback, no token) over the session manager."""
    from vision.http.app import Settings, create_app

    port = free_port()
    with LiveServer(create_app(manager, Settings(token=None, port=port)), port=port) as server:
        with httpx2.Client(base_url=server.url, timeout=60) as client:
            yield client


@pytest.fixture(scope="session")
def services(manager, tmp_path_factory):
    """The application service (trace store in a temp data dir, default config)."""
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig

    return Glassdesk.build(manager, data_dir=tmp_path_factory.mktemp("data"), config=VisionConfig())


@pytest.fixture(scope="session")
def vision_api(manager, desk, services):
    """The real API server with the vision routes, over the shared services."""
    from vision.http.app import Settings, create_app

    port = free_port()
    with LiveServer(create_app(manager, Settings(token=None, port=port), services), port=port) as server:
        with httpx2.Client(base_url=server.url, timeout=120) as client:
            yield client


@pytest.fixture(scope="module")
def qa_site():
    """The QA verbs' local site (tests/fakes/qa_site.py), one per test module."""
    from tests.fakes.qa_site import QaSite

    served = QaSite()
    yield served
    served.close()


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium through Playwright (no browser download), one per test module:
    Playwright's sync API keeps an event loop running in this thread while it is open, which
    would break the asyncio.run of later modules (the MCP tests)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"], headless=True)
        yield browser
        browser.close()


@pytest.fixture
def no_paused_run(services):
    """A paused run (step mode, safety checks) left by a failing test must not leak into the next."""
    yield
    runner = services.runner("itest")
    if runner.state is not None and not runner.active:
        runner.cancel()


# make test hands whole files to its workers in collection order (pytest-xdist, --dist loadfile
# --no-loadscope-reorder), each as the one before is done: the real-X tiers first, the quick pure ones
# last, so that the last minutes are spent on many short files across every worker, not on one long
# file alone (xdist's default order, files with the most tests first, ran a one-test file of 150 s last).
TIER_ORDER = {"integration": 0, "e2e": 1, "protocol": 2, "unit": 3}


def tier_rank(item) -> int:
    parts = Path(str(item.path)).relative_to(Path(__file__).parent).parts
    return TIER_ORDER.get(parts[0], len(TIER_ORDER)) if len(parts) > 1 else len(TIER_ORDER)


def pytest_collection_modifyitems(config, items):
    unexplained = [item.nodeid for item in items for mark in item.iter_markers("serial")
                   if not (mark.args or mark.kwargs.get("reason"))]
    if unexplained:
        raise pytest.UsageError("a serial mark says why the test cannot run beside others, "
                                "@pytest.mark.serial('...'); without one: " + ", ".join(unexplained))
    items.sort(key=tier_rank)  # stable: each file's tests stay together and in order


# tests/docker needs a Docker daemon and the built image (`make docker-test` provides both): it is
# collected only when named on the command line, so `pytest tests` (make test) leaves it out.
DOCKER_TESTS = Path(__file__).parent / "docker"


def pytest_ignore_collect(collection_path, config):
    if collection_path != DOCKER_TESTS:
        return None
    for arg in config.args:
        named = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if named == DOCKER_TESTS or DOCKER_TESTS in named.parents:
            return None
    return True
