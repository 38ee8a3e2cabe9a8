"""A session's lifecycle without X: a heal that races a delete must not rebuild a closed stack."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from desktop.sessions import Session


@dataclass
class DeadChild:
    alive: bool = False
    restarts: int = 0


@dataclass
class FakeStack:
    """Just what Session uses of a DesktopStack; heal() blocks until the test lets it go."""

    display: str = ""
    browser: object = None
    user: None = None  # the desktop runs as this process's user
    children: dict = field(default_factory=lambda: {"chromium": DeadChild()})
    events: list = field(default_factory=list)
    calls: list = field(default_factory=list)
    healing: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def env(self) -> dict:
        return {}

    def heal(self) -> list[str]:
        self.calls.append("heal")
        self.healing.set()
        self.release.wait(5)
        self.children["chromium"].alive = True
        return ["chromium restarted"]

    def close(self) -> None:
        self.calls.append("close")


def test_a_delete_during_a_heal_waits_for_it_and_then_closes():
    stack = FakeStack()
    session = Session("race", stack)  # type: ignore[arg-type]
    session.status = "ready"
    healer = threading.Thread(target=session.heal)
    healer.start()
    assert stack.healing.wait(5)
    closer = threading.Thread(target=session.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # the delete waits for the heal in progress...
    stack.release.set()
    healer.join(5)
    closer.join(5)
    assert stack.calls == ["heal", "close"]  # ...and then closes what the heal brought back
    assert session.status == "stopped"


def test_no_heal_after_close():
    stack = FakeStack()
    session = Session("closed", stack)  # type: ignore[arg-type]
    session.status = "ready"
    session.close()
    stack.release.set()
    assert session.heal() == [] and stack.calls == ["close"]
