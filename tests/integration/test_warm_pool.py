"""The warm pool (glassdesk up --warm N; desktop.session.manager.SessionManager.keep_warm) on real
desktops: a create claims a desktop started before it was asked for, the pool refills behind it,
a claim holds nothing of another session, the pool counts toward the limit and shows in /metrics,
idle expiry leaves it alone, a pooled desktop that dies is replaced, and a shutdown stops it.

One manager (2 sessions at most, 1 kept warm) for the tests that do not shut it down, each arranging the
sessions it starts from, and one of its own for the test that does: six desktops in the file's order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from desktop.errors import InvalidAction, SessionLimit
from desktop.network import netns
from desktop.session.manager import WARM_PREFIX, SessionManager
from desktop.session.stack import tagged_pids
from tests.conftest import session_files

pytestmark = pytest.mark.x11

IDLE_TTL_S = 2.0

# /set stores a cookie (header) and a localStorage item (script); /check reports what the browser
# holds for the origin: the Cookie header the server gets, localStorage and the tab's history length.
REPORT = ("fetch('/report?page={page}&ls=' + encodeURIComponent(localStorage.getItem('k') || '') + "
          "'&h=' + history.length)")
SET = f"<!doctype html><script>localStorage.setItem('k', 'from-a'); {REPORT.format(page='set')}</script>set"
CHECK = f"<!doctype html><script>{REPORT.format(page='check')}</script>check"


class StateSite:
    def __init__(self):
        self.reports: list[dict] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urlsplit(self.path)
                headers = {}
                if url.path == "/report":
                    query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
                    site.reports.append({**query, "cookie": self.headers.get("Cookie", "")})
                    body = b""
                else:
                    body = (SET if url.path == "/set" else CHECK).encode()
                    if url.path == "/set":
                        headers["Set-Cookie"] = "a=from-a; Max-Age=3600; Path=/"
                self.send_response(200)
                for name, value in {"content-type": "text/html", "content-length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def visit(self, session, page: str) -> dict:
        count = len(self.reports)
        session.open_url(f"{self.url}/{page}")
        wait_for(lambda: len(self.reports) > count and self.reports[-1]["page"] == page, 20, f"the {page} report")
        return self.reports[-1]


def wait_for(predicate, timeout: float = 60, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def cookies(session) -> list[dict]:
    from desktop.browser.chromium import driver

    return driver().run(session.stack.browser.context.cookies(), 10)


def in_front_tab(session, expression: str):
    async def work(pages):
        return await (await pages.front()).evaluate(expression)

    return session.stack.browser.call(work, 10)


@pytest.fixture(scope="module")
def site():
    served = StateSite()
    yield served
    served.server.shutdown()


@contextlib.contextmanager
def pool_manager(data_dir):
    """A manager of 2 sessions at most, 1 kept warm, and the application service over it."""
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig

    with session_files() as root:
        manager = SessionManager(root=root, max_sessions=2, idle_ttl_s=IDLE_TTL_S)
        glassdesk = Glassdesk.build(manager, data_dir=data_dir, config=VisionConfig())
        glassdesk.desktops.viewer_url = "http://127.0.0.1:9"  # where live-view links point; not opened here
        manager.keep_warm(1)
        try:
            yield manager, glassdesk
        finally:
            manager.close()


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """Shared by the tests that do not shut it down; each arranges the sessions it starts from."""
    with pool_manager(tmp_path_factory.mktemp("data")) as made:
        yield made


def arrange(manager, *session_ids: str) -> None:
    """Exactly these sessions (pinned: the idle TTL is short), whatever ran before (any order holds)."""
    for session in manager.list():
        if session.id not in session_ids:
            manager.delete(session.id)
    for session_id in session_ids:
        if session_id not in manager.sessions:
            manager.create(session_id, pinned=True)


def warm_stacks(manager) -> list:
    return [p.item for p in manager.pool.ready]


def metric(glassdesk, name: str) -> float:
    for line in glassdesk.metrics.render().decode().splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def test_a_create_claims_a_desktop_started_before_it_and_the_pool_refills(pool, site):
    manager, glassdesk = pool
    arrange(manager)
    wait_for(lambda: manager.warm_ready == 1, 90, "the pool to fill")
    pooled = warm_stacks(manager)[0]
    assert pooled.workdir.name.startswith(WARM_PREFIX) and manager.list() == [], "a pooled desktop is nobody's"
    assert metric(glassdesk, "glassdesk_sessions_warm") == 1
    asked_at = time.monotonic()

    info = glassdesk.desktops.create("pool-a", pinned=True, deny=["blocked.test"], dialogs="accept")

    a = manager.get("pool-a")
    assert a.stack is pooled and 0 < pooled.started_at < asked_at, "the desktop was up before it was asked for"
    assert info.id == "pool-a" and info.status == "ready" and info.events == [] and info.restarts == 0
    # Its options, set at the claim: the network policy (the proxy's), the dialog mode, pinned.
    assert [str(p) for p in a.stack.proxy.policy.deny] == ["blocked.test"]
    assert a.stack.record.dialog_policy == "accept" and "pool-a" in manager.pinned
    # Its own id: its files under root/<id>, a live view of its own.
    assert (manager.root / "pool-a").resolve() == pooled.workdir.resolve()
    assert "pool-a" in glassdesk.desktops.live_view("pool-a", control=False).novnc_url
    assert a.rfb_target(control=False)[0] == pooled.vnc_port
    assert a.capture().width == 1920
    if netns.support() is None:  # its network namespace, made as it warmed, the proxy inside (netns)
        inode = a.stack.namespace.path.stat().st_ino
        assert os.stat(f"/proc/{a.stack.children['chromium'].popen.pid}/ns/net").st_ino == inode
        assert a.stack.namespace.argv()[1] in a.windows.launch_prefix  # what launch starts, in it
        assert a.windows.env["http_proxy"] == f"http://127.0.0.1:{a.stack.proxy.port}"
    # The pool refills behind it (one place left under the limit of 2).
    wait_for(lambda: manager.warm_ready == 1, 90, "the pool to refill")
    assert warm_stacks(manager)[0] is not pooled
    assert metric(glassdesk, "glassdesk_sessions_warm") == 1
    assert metric(glassdesk, 'glassdesk_sessions{status="ready"}') == 1, "pooled sessions are not listed as sessions"


def test_a_claim_holds_nothing_of_a_session_used_before(pool, site):
    manager, glassdesk = pool
    arrange(manager, "pool-a")
    a = manager.get("pool-a")
    seen = site.visit(a, "set")
    assert seen["ls"] == "from-a"
    again = site.visit(a, "check")  # the test can tell: A holds both
    assert again["cookie"] == "a=from-a" and again["ls"] == "from-a"
    assert any(c["name"] == "a" for c in cookies(a))

    wait_for(lambda: manager.warm_ready == 1, 90, "the pool to refill")
    pooled = warm_stacks(manager)[0]
    b = manager.create("pool-b", pinned=True)

    assert b.stack is pooled and b.stack.profile != a.stack.profile
    assert cookies(b) == []
    assert in_front_tab(b, "location.href") == "about:blank" and in_front_tab(b, "history.length") == 1
    assert b.page_url() == "about:blank"
    report = site.visit(b, "check")
    assert report["cookie"] == "" and report["ls"] == "", "B has none of A's cookies or storage"
    assert report["h"] == "2", "B's history: its blank start page and this one, nothing visited before"


def test_the_pool_counts_toward_the_limit_and_outlives_idle_expiry(pool):
    manager, glassdesk = pool
    arrange(manager, "pool-a", "pool-b")
    # Two sessions of two: no place for a pooled desktop, and none is started.
    time.sleep(1.5)
    assert manager.warm_ready == 0 and manager.pool.starting is None
    assert metric(glassdesk, "glassdesk_sessions_warm") == 0
    with pytest.raises(SessionLimit):
        manager.create("pool-c")
    with pytest.raises(InvalidAction, match="at most 1"):
        manager.keep_warm(2)  # the limit of 2 holds the default session and one warm at most
    with pytest.raises(InvalidAction, match="0 or more"):
        manager.keep_warm(-1)
    assert manager.warm == 1, "a refused size changes nothing"

    # One deleted: its place goes to the pool, whose desktop idles past the TTL and stays.
    manager.delete("pool-a")
    assert not (manager.root / "pool-a").exists()
    wait_for(lambda: manager.warm_ready == 1, 90, "the pool to refill")
    pooled = warm_stacks(manager)[0]
    # The limit counts the pooled desktop: one session and it make two of two, so a cold start
    # now would be refused (a create claims the pooled one instead).
    with pytest.raises(SessionLimit, match="1 of them started ahead"):
        manager._claim(None, held=manager._pooled())
    time.sleep(IDLE_TTL_S + 1.5)
    assert warm_stacks(manager) == [pooled] and not pooled.dead_parts()


def test_a_pooled_desktop_that_dies_is_replaced_and_a_shutdown_stops_the_pool(tmp_path):
    with pool_manager(tmp_path) as (manager, _):  # its own: the test shuts it down
        wait_for(lambda: manager.warm_ready == 1, 90, "the pool to fill")
        pooled = warm_stacks(manager)[0]
        os.killpg(pooled.children["xvfb"].popen.pid, signal.SIGKILL)
        wait_for(lambda: manager.warm_ready == 1 and warm_stacks(manager)[0] is not pooled, 90,
                 "the dead pooled desktop to be replaced")
        wait_for(lambda: not tagged_pids(pooled.tag) and not pooled.workdir.exists(), 20,
                 "the dead one's remains to go")

        replacement = warm_stacks(manager)[0]
        manager.close()
        assert not tagged_pids(replacement.tag) and not replacement.workdir.exists()
        assert manager.warm_ready == 0 and not manager.pool._filler.is_alive()
