"""A session's lifecycle without X: heals that race a delete, heals of the live view that leave
the agent alone, failures that reveal a dead desktop, and the bounded queue for the action lock."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from desktop.actions import Click, HoldKey, Key, Type, Wait
from desktop.browser.record import PageRecord
from desktop.errors import ScreenshotFailed, SessionBusy, SessionUnavailable
from desktop.session.manager import Session
from desktop.session.settle import InputSettle
from desktop.x11.input import ACTION_MS, FAST_TYPE_MS_PER_CHAR, TYPE_MS_PER_CHAR, Executed, expected_ms
from desktop.x11.screen import ScreenshotError
from tests.fakes.desktop import solid_frame


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
    record: PageRecord = field(default_factory=PageRecord)  # its heals are the session's
    healing: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    restarts: int = 0
    last_healed: list = field(default_factory=list)
    dying: list = field(default_factory=list)  # parts seen dead only once heal() looks (died of another)

    def env(self) -> dict:
        return {}

    def run_prefix(self) -> list[str]:
        return []  # no cgroup, no other user

    def dead_parts(self) -> list[str]:
        return [name for name, child in self.children.items() if not child.alive]

    def heal(self, parts=None) -> list[str]:
        self.calls.append(("heal", sorted(parts)) if parts is not None else "heal")
        for name in self.dying:
            self.children[name] = DeadChild()
        self.last_healed = [name for name in self.dead_parts() if parts is None or name in parts]
        self.healing.set()
        self.release.wait(5)
        for name in parts or list(self.children):
            self.children[name].alive = True
        return ["restarted"]

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


# ------------------------------------------------------------------ the live view heals aside


def test_a_dead_viewer_part_heals_without_the_action_lock_or_leaving_ready():
    stack = FakeStack(children={"xvfb": DeadChild(alive=True), "x11vnc": DeadChild()})
    session = Session("view", stack)  # type: ignore[arg-type]
    session.status = "ready"
    seen: list[str] = []
    holder_has_lock, let_go = threading.Event(), threading.Event()

    def hold_the_action_lock():  # as a long wait action would
        with session.action_lock:
            holder_has_lock.set()
            let_go.wait(5)

    holder = threading.Thread(target=hold_the_action_lock)
    holder.start()
    assert holder_has_lock.wait(5)
    healer = threading.Thread(target=session.heal)
    healer.start()
    assert stack.healing.wait(5)  # it heals while the lock is held by someone else...
    seen.append(session.status)   # ...and the session stays ready meanwhile
    stack.release.set()
    healer.join(5)
    let_go.set()
    holder.join(5)
    assert not healer.is_alive()
    assert stack.calls == [("heal", ["x11vnc"])] and seen == ["ready"] and session.status == "ready"


def test_a_dead_core_part_takes_the_session_out_of_ready_while_it_heals():
    stack = FakeStack(children={"chromium": DeadChild(), "x11vnc": DeadChild()})
    session = Session("core", stack)  # type: ignore[arg-type]
    session.status = "ready"
    healer = threading.Thread(target=session.heal)
    healer.start()
    assert stack.healing.wait(5)
    assert session.status == "restarting"
    stack.release.set()
    healer.join(5)
    assert stack.calls == ["heal"] and session.status == "ready"


def test_a_heal_is_recorded_as_what_the_stack_restarted_not_what_was_seen_dead_before():
    # Xvfb killed: Chromium, its client, is seen dead first; by the time the stack looks, Xvfb is too,
    # and the whole desktop is restarted. The run's record must say so (it said "chromium").
    stack = FakeStack(children={"chromium": DeadChild(), "xvfb": DeadChild(alive=True)}, dying=["xvfb"])
    stack.release.set()
    session = Session("whole", stack)  # type: ignore[arg-type]
    session.status = "ready"
    session.heal()
    assert stack.last_healed == ["chromium", "xvfb"] and session.heals() == ["desktop"]


# ------------------------------------------------------------------ a failure that reveals a dead desktop


class BrokenScreen:
    def capture(self):
        raise ScreenshotError("could not capture display :99: XGetImage failed")

    def close(self):
        pass


def test_a_capture_failing_on_a_dead_display_is_unavailable_and_marks_restarting_at_once():
    stack = FakeStack(children={"xvfb": DeadChild(), "chromium": DeadChild(alive=True)})
    session = Session("gone", stack)  # type: ignore[arg-type]
    session.status, session.screen = "ready", BrokenScreen()
    with pytest.raises(SessionUnavailable) as info:
        session.capture()
    assert "xvfb died" in info.value.message and info.value.retry_after
    assert session.status == "restarting"  # not "ready" until the supervisor's next look
    stack.release.set()
    session.heal()
    assert session.status == "ready" and stack.calls == ["heal"]


def test_a_capture_failing_with_everything_alive_is_still_screenshot_failed():
    stack = FakeStack(children={"xvfb": DeadChild(alive=True), "x11vnc": DeadChild()})  # only the view is down
    session = Session("odd", stack)  # type: ignore[arg-type]
    session.status, session.screen = "ready", BrokenScreen()
    with pytest.raises(ScreenshotFailed):
        session.capture()
    assert session.status == "ready"


def test_a_session_whose_desktop_has_not_started_yet_is_unavailable_not_a_missing_screen():
    """Until its desktop first starts a session has no screen (Session._bind): a read of its display
    that does not ask for a ready session first (its windows) answers session_unavailable, as one
    that does, where it once failed on the missing screen (AttributeError, a 500)."""
    session = Session("new", FakeStack(children={}))  # type: ignore[arg-type]
    assert session.screen is None and session.status == "starting"
    with pytest.raises(SessionUnavailable):
        session.list_windows()


# ------------------------------------------------------------------ one action at a time, a bounded queue


class QuietScreen:
    def capture(self):
        return solid_frame(1, 4, 4)

    def mark(self):
        pass

    def close(self):
        pass

    def active_pid(self):
        return None  # no browser in front: the settle is the damage's alone

    def pid_at(self, x, y):
        return None  # no window there: no native control to read

    def settle(self, *, first_change_ms=400, timeout_ms=3000):
        from desktop.x11.screen import Settled

        return Settled(solid_frame(2, 4, 4), 0, True, False)


class GatedExecutor:
    """Runs nothing; an action "runs" until the test opens the gate."""

    glide_ms = 0

    def __init__(self):
        self.started, self.gate, self.ran = threading.Event(), threading.Event(), []

    def keep_one_click(self, action):
        pass

    def run(self, action, before_act=None, glide=True):
        self.started.set()
        self.gate.wait(10)
        self.ran.append(action.action)
        return Executed([], 0.0)


def queued_session() -> tuple[Session, GatedExecutor]:
    session = Session("q", FakeStack(children={}))  # type: ignore[arg-type]
    session.status, session.screen = "ready", QuietScreen()
    session.executor = executor = GatedExecutor()
    # The reads and the settle work on the display's handles as bound: these, as _bind would.
    session.settle = InputSettle(session.id, session.stack, session._screen, executor, session.accessibility)
    return session, executor


def test_an_action_behind_a_long_one_is_refused_at_once_with_when_to_come_back():
    session, executor = queued_session()
    first = threading.Thread(target=session.perform, args=(Wait(duration_ms=30_000),))
    first.start()
    assert executor.started.wait(5)
    with pytest.raises(SessionBusy) as info:  # (at once: the wait would outlast the queue anyway)
        session.perform(Click(x=1, y=1), queue_s=5)
    executor.gate.set()
    first.join(5)
    assert 25 <= info.value.retry_after <= 31, info.value.retry_after
    assert "wait action" in info.value.message
    assert executor.ran == ["wait"]  # the refused click never ran


def test_an_action_behind_a_short_one_waits_for_it_then_runs():
    session, executor = queued_session()
    first = threading.Thread(target=session.perform, args=(Key(keys=["a"]),))
    first.start()
    assert executor.started.wait(5)
    opener = threading.Timer(0.3, executor.gate.set)  # the key "ends" while the click waits
    opener.start()
    session.perform(Click(x=1, y=1), queue_s=5)
    first.join(5)
    assert executor.ran == ["key", "click"]


def test_an_action_still_running_past_its_estimate_is_busy_after_the_bounded_wait():
    session, executor = queued_session()
    first = threading.Thread(target=session.perform, args=(Key(keys=["a"]),))
    first.start()
    assert executor.started.wait(5)
    with pytest.raises(SessionBusy) as info:
        session.perform(Click(x=1, y=1), queue_s=0.3)
    executor.gate.set()
    first.join(5)
    assert info.value.retry_after == 1  # overran its estimate: nothing better to say than soon


def test_a_run_step_waits_as_long_as_it_takes():
    session, executor = queued_session()
    first = threading.Thread(target=session.perform, args=(Wait(duration_ms=30_000),))
    first.start()
    assert executor.started.wait(5)
    threading.Timer(0.3, executor.gate.set).start()
    session.perform(Click(x=1, y=1))  # queue_s=None: the loop's own steps
    first.join(5)
    assert executor.ran == ["wait", "click"]


def test_expected_durations():
    assert expected_ms(Wait(duration_ms=30_000)) == 30_000 + ACTION_MS
    assert expected_ms(HoldKey(keys="shift", duration_ms=700)) == 700 + ACTION_MS
    assert expected_ms(Type(text="x" * 50)) == 50 * TYPE_MS_PER_CHAR + ACTION_MS
    # long text takes the fast path (desktop.x11.input.XTestTyper)
    assert expected_ms(Type(text="x" * 1000)) == 1000 * FAST_TYPE_MS_PER_CHAR + ACTION_MS
    assert expected_ms(Click(x=5, y=5), glide_ms=150) == ACTION_MS + 150
    assert expected_ms(Click(), glide_ms=150) == ACTION_MS  # no pointer move, no glide


def test_a_live_view_that_cannot_restart_is_retried_later_not_at_every_look():
    from desktop.errors import StackError

    class FailingStack(FakeStack):
        def heal(self, parts=None):
            self.calls.append("heal")
            raise StackError("x11vnc failed to start: port in use")

    stack = FailingStack(children={"xvfb": DeadChild(alive=True), "x11vnc": DeadChild()})
    session = Session("noview", stack)  # type: ignore[arg-type]
    session.status = "ready"
    assert session.heal() == ["x11vnc failed to start: port in use"]
    assert session.heal() == [] and session.heal() == []  # the supervisor looks every 0.5 s
    assert stack.calls == ["heal"] and len(stack.events) == 1 and session.status == "ready"


def test_a_reset_queues_like_an_action():
    session, executor = queued_session()
    first = threading.Thread(target=session.perform, args=(Wait(duration_ms=30_000),))
    first.start()
    assert executor.started.wait(5)
    with pytest.raises(SessionBusy) as info:  # behind a long action, a reset is refused too...
        session.reset(queue_s=5)
    executor.gate.set()
    first.join(5)
    assert info.value.retry_after >= 25

    resetting, done = threading.Event(), threading.Event()
    session.stack.reset = lambda: (resetting.set(), done.wait(10))  # type: ignore[attr-defined]
    resetter = threading.Thread(target=session.reset)
    resetter.start()
    assert resetting.wait(5)
    with pytest.raises(SessionBusy) as info:  # ...and an action behind a reset is told about it
        session.perform(Click(x=1, y=1), queue_s=0.5)
    done.set()
    resetter.join(5)
    assert "a reset" in info.value.message and info.value.retry_after >= 1
    assert executor.ran == ["wait"]


def test_the_wait_that_keeps_a_click_one_click_is_spent_before_the_screen_is_watched_for_its_effect():
    """What the screen does while a click waits out the last one's double-click time (a caret's
    blink, the last click's late paint) is not this click's effect: the mark comes after the wait."""
    session, executor = queued_session()
    order: list[str] = []
    executor.keep_one_click = lambda action: order.append(f"wait before the {action.action}")
    session.screen.mark = lambda: order.append("mark")
    executor.gate.set()
    session.perform(Click(x=1, y=1))
    assert order == ["wait before the click", "mark"] and executor.ran == ["click"]


class FlakyPointer:
    """An executor whose pointer reads fail ``failures`` times (xdotool while XFCE restarts xfwm4)."""

    glide_ms = 0

    def __init__(self, failures: int):
        self.failures, self.reads = failures, 0

    def cursor(self):
        from desktop.x11.input import ActionFailed

        self.reads += 1
        if self.reads <= self.failures:
            raise ActionFailed("xdotool getmouselocation failed", ["xdotool", "getmouselocation"], "X error")
        return 10, 20


@pytest.mark.parametrize("failures, answer", [(1, (10, 20)), (2, (10, 20)), (99, "session_unavailable")])
def test_a_failed_pointer_read_is_tried_again_and_then_is_a_503_not_a_500(failures, answer):
    from desktop.errors import SessionUnavailable

    session, _ = queued_session()
    session.down_error = lambda: None  # no part the supervisor heals is down
    session.executor = FlakyPointer(failures)
    if answer == "session_unavailable":
        with pytest.raises(SessionUnavailable) as raised:
            session.cursor()
        assert raised.value.status == 503 and raised.value.retry_after == 1
        assert session.executor.reads == 3
    else:
        assert session.cursor() == answer
