"""What the console puts on the desktop itself: the status strip (desktop.overlay) and the visible
pointer glide (desktop.input), on the real Xvfb/XFCE/Chromium session."""

from __future__ import annotations

import time

import pytest

from desktop.actions import Click
from desktop.overlay import BACKGROUND, Overlay, candidates

pytestmark = pytest.mark.x11

SESSION = "itest"


def _focused(desk) -> str:
    return desk.executor._run(["xdotool", "getwindowfocus"]).strip()


def _override_redirect(display: str, window_id: int) -> bool:
    from Xlib import display as xdisplay

    d = xdisplay.Display(display)
    try:
        return bool(d.create_resource_object("window", window_id).get_attributes().override_redirect)
    finally:
        d.close()


@pytest.fixture
def overlay(desk):
    strip = Overlay(desk.stack.display)
    yield strip
    strip.close()


def test_the_strip_lets_clicks_through_and_never_takes_focus(desk, page, viewport, overlay):
    fx, fy = viewport[0] + 300, viewport[1] + 282  # inside the test page's text field
    focus = _focused(desk)
    overlay.show("a click goes through me", "act", at=(fx - 60, fy - 12))
    assert overlay.flush() and overlay.visible
    assert _override_redirect(desk.stack.display, overlay.window_id)
    # It is really there, over the field: a screenshot shows its dark background.
    x, y, w, h = overlay.geometry
    assert (x, y) == (fx - 60, fy - 12)
    assert desk.capture().image.getpixel((x + w - 4, y + h // 2)) == BACKGROUND
    # A click on it reaches the field underneath, at the exact pixel.
    desk.perform(Click(x=fx, y=fy))
    click = page.wait_for(lambda e: e["type"] == "click")
    assert click["target"] == "field" and (click["screenX"], click["screenY"]) == (fx, fy)
    assert _focused(desk) == focus


def test_the_strip_sits_on_the_panel_and_moves_away_from_the_target(desk, page, overlay):
    overlay.show("step 1/10 · click (960, 540)", "act", avoid=[(960, 540)])
    assert overlay.flush()
    x, y, w, h = overlay.geometry
    assert (x, y) == candidates(w, h)[0] and y > 1050  # the empty right-hand side of the bottom panel
    target = (x + w // 2, y + h // 2)
    overlay.show("step 2/10 · click on the panel", "act", avoid=[target])
    assert overlay.flush()
    x2, y2, w2, h2 = overlay.geometry
    assert not (x2 - 10 <= target[0] < x2 + w2 + 10 and y2 - 10 <= target[1] < y2 + h2 + 10)
    # Still on top after Chromium is clicked (and raised) somewhere else.
    desk.perform(Click(x=900, y=700))
    assert overlay.flush()
    assert desk.capture().image.getpixel((x2 + w2 - 4, y2 + h2 // 2)) == BACKGROUND
    overlay.hide()
    assert overlay.flush() and not overlay.visible


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


def test_a_run_shows_its_status_on_the_desktop(vision_api, services, page):

    narrator = services.narrator
    if not narrator.enabled:
        pytest.skip("GLASSDESK_OVERLAY=0")
    script = [{"action": "click", "x": 1880, "y": 1066}, {"action": "done", "answer": "shown"}]
    r = vision_api.post(f"/api/v1/sessions/{SESSION}/vision/act",
                        json={"instruction": "show the strip", "model": "scripted", "script": script})
    assert r.status_code == 200 and r.json()["status"] == "done", r.text
    assert services.listener.caught_up()
    strip = narrator._overlays[SESSION]
    assert strip.flush()
    # The run's last words stay up a moment: "done · 2 steps", back at its usual place.
    x, y, w, h = strip.geometry
    assert strip.visible and (x, y) == candidates(w, h)[0]
    deadline = time.monotonic() + 10
    while desk_pixel(services, x + w - 4, y + h // 2) != BACKGROUND:
        assert time.monotonic() < deadline, "the status strip never appeared on the screen"
        time.sleep(0.05)


def desk_pixel(services, x: int, y: int):
    return services.desktops.session(SESSION).capture().image.getpixel((x, y))
