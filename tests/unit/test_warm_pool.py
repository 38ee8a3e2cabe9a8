"""The warm pool's bookkeeping (desktop.session.manager.SessionManager.keep_warm) without X: desktops
are stand-ins whose start waits for the test, so the limit, the one-at-a-time filler and a create
that waits for the pooled desktop holding the last place can be watched step by step. The real
desktops are tests/integration/test_warm_pool.py's."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from desktop.browser.record import PageRecord
from desktop.errors import InvalidAction, SessionLimit
from desktop.network.policy import NetworkPolicy
from desktop.session import manager as manager_module
from desktop.session.manager import SessionManager, check_warm


class GatedStack:
    """A desktop whose start finishes when ``gate`` is set; counts how many start at once."""

    gate = threading.Event()
    starting = 0
    most_at_once = 0
    lock = threading.Lock()

    def __init__(self, workdir, config=None, *, network=None, control_ports=frozenset):
        self.record = PageRecord()  # its heals are the session's
        self.workdir = Path(workdir)
        self.network = network
        self.display, self.user, self.tag, self.started_at = "", None, "t", 0.0
        self.restarts, self.events, self.dead = 0, [], []

    def start(self):
        cls = type(self)
        with cls.lock:
            cls.starting += 1
            cls.most_at_once = max(cls.most_at_once, cls.starting)
        try:
            assert cls.gate.wait(10), "the test never let the start finish"
            self.workdir.mkdir(parents=True, exist_ok=True)
            self.started_at = time.monotonic()
        finally:
            with cls.lock:
                cls.starting -= 1

    def env(self):
        return {"DISPLAY": self.display}

    def run_prefix(self):
        return []  # no cgroup, no other user

    def dead_parts(self):
        return list(self.dead)

    def own_ports(self):
        return set()

    def set_network(self, policy):
        self.network = policy

    def close(self):
        pass


@pytest.fixture
def manager(monkeypatch, tmp_path):
    monkeypatch.setattr(manager_module, "DesktopStack", GatedStack)
    GatedStack.gate.set()
    GatedStack.most_at_once = 0
    made = SessionManager(root=tmp_path, max_sessions=3, supervise_every_s=3600)
    yield made
    GatedStack.gate.set()
    made.close()


def wait_for(predicate, timeout: float = 5):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("warm, limit, problems", [
    (0, 1, 0), (2, 3, 0), (-1, 10, 1), (3, 3, 1), (1, 0, 1), (-1, 0, 2),
])
def test_check_warm(warm, limit, problems):
    assert len(check_warm(warm, limit)) == problems


def test_the_pool_fills_one_at_a_time_within_the_limit_and_a_claim_takes_its_desktop(manager):
    manager.create("a")
    GatedStack.gate.clear()
    manager.keep_warm(2)
    wait_for(lambda: manager.pool.starting is not None)
    first = manager.pool.starting
    time.sleep(0.2)
    assert GatedStack.starting == 1, "one start at a time"
    GatedStack.gate.set()
    wait_for(lambda: manager.warm_ready == 2)
    assert GatedStack.most_at_once == 1
    assert manager.pool.starting is None and [s.id for s in manager.list()] == ["a"], "1 + 2 of 3: full, not listed"

    b = manager.create("b", network=NetworkPolicy.parse(deny=["x.test"]))
    assert b.stack is first and b.status == "ready" and [str(p) for p in b.stack.network.deny] == ["x.test"]
    assert (manager.root / "b").is_symlink() and (manager.root / "b").resolve() == first.workdir.resolve()
    time.sleep(0.2)
    assert manager.warm_ready == 1 and manager.pool.starting is None, "a + b + one pooled: no place for another"
    manager.create("c")  # claims the last pooled one
    with pytest.raises(SessionLimit):
        manager.create("d")
    manager.delete("b")
    assert not (manager.root / "b").exists() and not first.workdir.exists()
    wait_for(lambda: manager.warm_ready == 1)  # b's place went back to the pool


def test_a_create_waits_for_the_pooled_desktop_that_holds_the_last_place(manager):
    manager.max_sessions = 2
    manager.create("a")
    GatedStack.gate.clear()
    manager.keep_warm(1)
    wait_for(lambda: manager.pool.starting is not None)
    starting = manager.pool.starting
    got: list = []
    creator = threading.Thread(target=lambda: got.append(manager.create("b")))
    creator.start()
    time.sleep(0.3)
    assert creator.is_alive() and not got, "neither refused nor started cold: it waits"
    GatedStack.gate.set()
    creator.join(5)
    assert got and got[0].stack is starting and got[0].id == "b"


def test_a_pooled_desktop_that_died_is_replaced_not_handed_out(manager):
    manager.keep_warm(1)
    wait_for(lambda: manager.warm_ready == 1)
    dead = manager.pool.ready[0].item
    dead.dead = ["xvfb"]
    manager._check_pool()
    wait_for(lambda: manager.warm_ready == 1 and manager.pool.ready[0].item is not dead)
    manager.pool.ready[0].item.dead = ["chromium"]  # died since the supervisor's last look
    fresh = manager.create("a")
    assert fresh.stack.dead_parts() == [], "a claim never gets a dead desktop: it starts one"


def test_a_refused_pool_size_changes_nothing(manager):
    manager.keep_warm(1)
    with pytest.raises(InvalidAction, match="0 or more"):
        manager.keep_warm(-1)
    with pytest.raises(InvalidAction, match="at most 2"):
        manager.keep_warm(3)
    assert manager.warm == 1
    wait_for(lambda: manager.warm_ready == 1)
    manager.keep_warm(0)
    assert manager.warm_ready == 0
