"""Settle detection as a pure state machine, and Screen.settle driven by a fake clock and fake frames."""

from __future__ import annotations

import pytest

from desktop import screen as screen_mod
from desktop.screen import Frame, Screen, SettlePolicy


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


# ------------------------------------------------------------------ Screen.settle, no X


class FakeClock:
    def __init__(self):
        self.now = 100.0  # seconds, arbitrary origin
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class ScriptedScreen(Screen):
    """Frames from a script: frame i's pixels are script(i). Each capture takes 5 ms of fake time."""

    def __init__(self, clock: FakeClock, script):
        super().__init__(":fake")
        self.clock, self.script, self.captures = clock, script, 0

    def capture(self) -> Frame:
        pixels = self.script(self.captures)
        self.captures += 1
        self.clock.now += 0.005
        return Frame(bytes([pixels]) * 16, 2, 2)


@pytest.fixture
def clock(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(screen_mod, "time", clock)
    return clock


def test_screen_settle_waits_out_an_animation_and_returns_the_final_frame(clock):
    # frames 0..5 differ from each other, then everything stays the same
    screen = ScriptedScreen(clock, lambda i: min(i, 6))
    before = Frame(bytes([99]) * 16, 2, 2)
    frame, settle_ms = screen.settle(before=before, quiet_ms=60, first_change_ms=150, timeout_ms=3000, interval_ms=15)
    assert frame.bgra == bytes([6]) * 16
    # the last change was seen at capture 6; the quiet period must have passed after it
    changed_at_ms = 7 * 5 + 6 * 15
    assert settle_ms >= changed_at_ms + 60 - 1
    assert settle_ms < 3000
    assert all(s == pytest.approx(0.015) for s in clock.sleeps)


def test_screen_settle_counts_a_change_that_landed_before_the_first_poll(clock):
    # every frame equals the first one, but it differs from the frame before the action
    screen = ScriptedScreen(clock, lambda i: 1)
    before = Frame(bytes([0]) * 16, 2, 2)
    _, settle_ms = screen.settle(before=before, quiet_ms=60, first_change_ms=400, timeout_ms=3000)
    # settled after the quiet period following the change, not after first_change_ms
    assert 60 <= settle_ms < 400


def test_screen_settle_with_no_visible_effect_gives_up_after_first_change_ms(clock):
    screen = ScriptedScreen(clock, lambda i: 1)
    before = Frame(bytes([1]) * 16, 2, 2)
    frame, settle_ms = screen.settle(before=before, quiet_ms=60, first_change_ms=150, timeout_ms=3000)
    assert 150 <= settle_ms < 200
    assert frame.bgra == bytes([1]) * 16


def test_screen_settle_with_a_blinking_screen_stops_at_the_timeout(clock):
    screen = ScriptedScreen(clock, lambda i: i % 2)
    _, settle_ms = screen.settle(quiet_ms=60, first_change_ms=150, timeout_ms=500)
    assert 500 <= settle_ms < 560


def test_frame_same_pixels():
    a = Frame(b"\x01" * 16, 2, 2)
    assert a.same_pixels(Frame(b"\x01" * 16, 2, 2))
    assert not a.same_pixels(Frame(b"\x02" * 16, 2, 2))
    assert not a.same_pixels(None)
