"""What the console puts on the desktop itself: only the visible pointer glide (desktop.x11.input), on the
real Xvfb/XFCE/Chromium session. (The status strip is drawn in the live viewer, never on the
desktop: tests/e2e/test_live_view.py.)"""

from __future__ import annotations

import pytest

from desktop.actions import Click

pytestmark = pytest.mark.x11

SESSION = "itest"


def test_the_pointer_glides_to_its_target_before_the_click(desk, page):
    executor = desk.executor
    saved = executor.glide_ms
    executor._run(["xdotool", "mousemove", "100", "900"])
    try:
        executor.glide_ms = 150
        done = desk.perform(Click(x=1200, y=700))
        glide, click = done.executed
        assert glide[:2] == ["xdotool", "mousemove"] and "click" not in glide and "sleep" in glide
        moves = [(int(glide[i + 1]), int(glide[i + 2])) for i, w in enumerate(glide) if w == "mousemove"]
        assert len(moves) >= 5 and moves[0] != (100, 900) and moves[-1] != (1200, 700)
        event = page.wait_for(lambda e: e["type"] == "click")
        assert (event["screenX"], event["screenY"]) == (1200, 700)
        # Turned off: the click's own argv only.
        page.clear()
        executor.glide_ms = 0
        done = desk.perform(Click(x=300, y=900))
        assert len(done.executed) == 1 and "click" in done.executed[0]
        event = page.wait_for(lambda e: e["type"] == "click")
        assert (event["screenX"], event["screenY"]) == (300, 900)
    finally:
        executor.glide_ms = saved
