"""Settle detection as a pure state machine, and Screen.settle driven by a fake clock and fake frames."""

from __future__ import annotations

import pytest

from desktop.frame import Frame
from desktop.x11 import screen as screen_mod
from desktop.x11.screen import Screen, SettlePolicy


def run_policy(policy: SettlePolicy, changes, step: float = 10, until: float = 10_000) -> float:
    """Feed observations every ``step`` ms; ``changes(t)`` says whether the frame at t differs.
    Returns the time at which the policy called it settled."""
    t = 0.0
    while t <= until:
        if policy.observe(t, changes(t)):
            return t
        t += step
    raise AssertionError("never settled")


def test_settles_quiet_ms_after_the_last_change():
    policy = SettlePolicy(quiet_ms=60, first_change_ms=150, timeout_ms=3000)
    # the screen changes at 0..200 ms, then holds still
    settled = run_policy(policy, lambda t: t <= 200)
    assert settled == 260


def test_not_settled_before_quiet_ms_has_passed():
    policy = SettlePolicy(quiet_ms=60, first_change_ms=150, timeout_ms=3000)
    assert policy.observe(0, True) is False
    assert policy.observe(30, False) is False
    assert policy.observe(59, False) is False
    assert policy.observe(60, False) is True


def test_a_new_change_restarts_the_quiet_period():
    policy = SettlePolicy(quiet_ms=60, first_change_ms=150, timeout_ms=3000)
    assert policy.observe(0, True) is False
    assert policy.observe(50, False) is False
    assert policy.observe(55, True) is False   # changed again
    assert policy.observe(100, False) is False  # only 45 ms quiet
    assert policy.observe(115, False) is True


def test_late_first_change_after_a_quiet_start_still_gets_its_quiet_period():
    policy = SettlePolicy(quiet_ms=60, first_change_ms=150, timeout_ms=3000)
    assert policy.observe(0, False) is False
    assert policy.observe(100, True) is False  # the app repainted at 100 ms
    assert policy.observe(150, False) is False  # first_change_ms no longer applies
    assert policy.observe(160, False) is True


def test_damage_already_there_at_the_start_may_be_asked_a_shorter_stillness():
    """After the browser has shown the input's effect, its damage is the effect: only a page still
    moving (a new change within ``start_quiet_ms``) is asked the full ``quiet_ms``."""
    at_rest = SettlePolicy(quiet_ms=35, first_change_ms=10, timeout_ms=3000, start_quiet_ms=25)
    assert at_rest.observe(0, True) is False
    assert at_rest.observe(24, False) is False
    assert at_rest.observe(25, False) is True
    moving = SettlePolicy(quiet_ms=35, first_change_ms=10, timeout_ms=3000, start_quiet_ms=25)
    assert moving.observe(0, True) is False
    assert moving.observe(17, True) is False  # the next frame of an animation
    assert moving.observe(42, False) is False  # 25 ms after it is not enough any more
    assert moving.observe(52, False) is True
    assert run_policy(SettlePolicy(quiet_ms=35, first_change_ms=10, timeout_ms=500, start_quiet_ms=25),
                      lambda t: True, step=16) == 512  # an endless animation still ends at the bound
    without = SettlePolicy(quiet_ms=35, first_change_ms=10, timeout_ms=3000)
    without.observe(0, True)
    assert without.deadline_ms() == 35
    # Whether the screen moved after the wait began: what asks the browser for more frames.
    assert not at_rest.moved and moving.moved and not without.moved


def test_settles_after_first_change_ms_when_nothing_changes():
    policy = SettlePolicy(quiet_ms=60, first_change_ms=150, timeout_ms=3000)
    settled = run_policy(policy, lambda t: False)
    assert settled == 150
    fresh = SettlePolicy(quiet_ms=60, first_change_ms=150, timeout_ms=3000)
    assert fresh.observe(149.9, False) is False
    assert fresh.observe(150, False) is True


def test_constant_change_stops_at_the_timeout():
    policy = SettlePolicy(quiet_ms=60, first_change_ms=150, timeout_ms=3000)
    settled = run_policy(policy, lambda t: True)
    assert settled == 3000


@pytest.mark.parametrize("quiet,first,timeout", [(20, 50, 500), (100, 400, 1000), (60, 150, 3000)])
def test_never_later_than_the_timeout(quiet, first, timeout):
    for pattern in (lambda t: True, lambda t: int(t / 30) % 2 == 0, lambda t: t < timeout - 1):
        policy = SettlePolicy(quiet_ms=quiet, first_change_ms=first, timeout_ms=timeout)
        assert run_policy(policy, pattern, step=7) <= timeout + 7


def test_deadline_is_when_it_settles_if_nothing_more_changes():
    policy = SettlePolicy(quiet_ms=50, first_change_ms=400, timeout_ms=3000)
    assert policy.deadline_ms() == 400
    policy.observe(30, True)
    assert policy.deadline_ms() == 80
    policy.observe(2990, True)
    assert policy.deadline_ms() == 3000  # never past the timeout


def test_timed_out_only_when_still_changing_at_the_timeout():
    blinking = SettlePolicy(quiet_ms=50, first_change_ms=400, timeout_ms=500)
    run_policy(blinking, lambda t: int(t / 30) % 2 == 0)
    assert blinking.timed_out
    quiet = SettlePolicy(quiet_ms=50, first_change_ms=400, timeout_ms=500)
    run_policy(quiet, lambda t: False)
    assert not quiet.timed_out
    settled = SettlePolicy(quiet_ms=50, first_change_ms=400, timeout_ms=500)
    run_policy(settled, lambda t: t < 100)
    assert not settled.timed_out


def test_a_caret_blinking_every_600_ms_settles_within_one_quiet_window():
    # the caret's damage: one small rectangle at 0, 600, 1200 ms...
    policy = SettlePolicy()
    settled = run_policy(policy, lambda t: t % 600 == 0, step=10)
    assert settled == policy.quiet_ms and not policy.timed_out


# ------------------------------------------------------------------ Screen.settle on damage events, no X


class FakeClock:
    def __init__(self):
        self.now = 100.0  # seconds, arbitrary origin

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now


class FakeWatch:
    """Damage at the given ms after the mark, on the fake clock; wait() jumps the clock to the
    next damage (True) or by its timeout (False), as select() on the X connection would."""

    def __init__(self, clock: FakeClock, damage_ms):
        self.clock, self.damage = clock, sorted(damage_ms)
        self.origin = clock.now
        self.waits: list[float] = []

    def _due(self) -> bool:
        now_ms = (self.clock.now - self.origin) * 1000
        due = [t for t in self.damage if t <= now_ms + 1e-9]
        self.damage = [t for t in self.damage if t > now_ms + 1e-9]
        return bool(due)

    def drain(self) -> bool:
        return self._due()

    def wait(self, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        if self._due():
            return True
        now_ms = (self.clock.now - self.origin) * 1000
        if self.damage and self.damage[0] <= now_ms + timeout_s * 1000:
            self.clock.now = self.origin + self.damage[0] / 1000
            return self._due()
        self.clock.now += timeout_s
        return False


class DamagedScreen(Screen):
    """A Screen whose damage comes from a FakeWatch; counts its captures."""

    def __init__(self, clock: FakeClock, damage_ms, action_ms: float = 5):
        super().__init__(":fake")
        self.clock, self.captures = clock, 0
        self._watch = FakeWatch(clock, damage_ms)
        clock.now += action_ms / 1000  # the action ran between mark() and settle()

    def capture(self) -> Frame:
        self.captures += 1
        return Frame(bytes([self.captures]) * 16, 2, 2)


@pytest.fixture
def clock(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(screen_mod, "time", clock)
    return clock


def test_screen_settle_waits_out_a_burst_and_captures_once(clock):
    # repaints at 10, 25 and 60 ms after the mark: settled 50 ms after the last one
    screen = DamagedScreen(clock, [10, 25, 60])
    frame, settle_ms, settled, *_ = screen.settle(quiet_ms=50, first_change_ms=400, timeout_ms=3000)
    assert settled and screen.captures == 1
    assert settle_ms == pytest.approx(60 + 50 - 5, abs=1)  # from the settle's start, 5 ms after the mark
    assert screen._watch.waits and all(w > 0 for w in screen._watch.waits)  # waited, never spun


def test_screen_settle_counts_damage_that_landed_while_the_action_ran(clock):
    screen = DamagedScreen(clock, [2], action_ms=5)  # repainted before settle() was called
    _, settle_ms, settled, *_ = screen.settle(quiet_ms=50, first_change_ms=400, timeout_ms=3000)
    assert settled and settle_ms == pytest.approx(50, abs=1)  # a quiet window from the start, not first_change_ms


def test_screen_settle_sees_a_change_300_ms_after_the_action(clock):
    screen = DamagedScreen(clock, [305])
    _, settle_ms, settled, *_ = screen.settle(quiet_ms=50, first_change_ms=400, timeout_ms=3000)
    assert settled and settle_ms == pytest.approx(305 + 50 - 5, abs=1)


def test_screen_settle_with_no_visible_effect_gives_up_after_first_change_ms(clock):
    screen = DamagedScreen(clock, [])
    _, settle_ms, settled, *_ = screen.settle(quiet_ms=50, first_change_ms=400, timeout_ms=3000)
    assert settled and settle_ms == pytest.approx(400, abs=1) and screen.captures == 1


def test_screen_settle_with_a_blinking_caret_settles(clock):
    screen = DamagedScreen(clock, [t for t in range(300, 5000, 600)])  # caret: 300, 900, 1500 ms...
    _, settle_ms, settled, *_ = screen.settle(quiet_ms=50, first_change_ms=400, timeout_ms=3000)
    assert settled and settle_ms == pytest.approx(300 + 50 - 5, abs=1)


def test_screen_settle_with_an_animation_stops_at_the_timeout_flagged(clock):
    screen = DamagedScreen(clock, list(range(0, 5000, 16)))  # 60 fps
    frame, settle_ms, settled, *_ = screen.settle(quiet_ms=50, first_change_ms=400, timeout_ms=500)
    assert not settled and 500 <= settle_ms < 520 and screen.captures == 1


def test_frame_same_pixels():
    a = Frame(b"\x01" * 16, 2, 2)
    assert a.same_pixels(Frame(b"\x01" * 16, 2, 2))
    assert not a.same_pixels(Frame(b"\x02" * 16, 2, 2))
    assert not a.same_pixels(None)
