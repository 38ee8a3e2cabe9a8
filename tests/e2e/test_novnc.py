"""The live view: the session's noVNC URL opened in a real (headless) Chromium through Playwright.

Checks that the canvas shows the desktop (many colours, the full 1920x1080 framebuffer), saves a
screenshot to artifacts/novnc.png for a person to look at, that the reported URL is a view-only
one (and the server really ignores input from it), and that a wrong password is refused.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest

from desktop.actions import Move

pytestmark = pytest.mark.x11


ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

# Samples the canvas on a grid: distinct colours, and the share of the commonest one.
CANVAS_STATS = """() => {
  const canvas = document.querySelector('#noVNC_container canvas');
  if (!canvas || !canvas.width) return null;
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const counts = new Map();
  let samples = 0;
  for (let y = 0; y < canvas.height; y += 7) {
    for (let x = 0; x < canvas.width; x += 7) {
      const i = (y * canvas.width + x) * 4;
      const key = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
      counts.set(key, (counts.get(key) || 0) + 1);
      samples++;
    }
  }
  const top = Math.max(...counts.values());
  return {width: canvas.width, height: canvas.height, colours: counts.size, top_share: top / samples};
}"""


def with_params(url: str, **params) -> str:
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


@pytest.fixture
def view(browser):
    context = browser.new_context(viewport={"width": 1600, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def connected(page) -> bool:
    return page.evaluate("document.documentElement.classList.contains('noVNC_connected')")


def wait_for_desktop(page, timeout: float = 15) -> dict:
    """Poll until noVNC is connected and its canvas holds a real picture; return the stats."""
    deadline = time.monotonic() + timeout
    stats = None
    while time.monotonic() < deadline:
        if connected(page):
            stats = page.evaluate(CANVAS_STATS)
            if stats and stats["colours"] >= 30 and stats["top_share"] < 0.97:
                return stats
        time.sleep(0.25)
    status = page.evaluate("document.getElementById('noVNC_status').textContent")
    raise AssertionError(f"noVNC never showed the desktop: connected={connected(page)} stats={stats} status={status!r}")


def test_live_view_shows_the_desktop(view, desk, page_server):
    # Something recognisable on screen: the event page in the session's Chromium.
    desk.run_settled(lambda: desk.windows.open_url(page_server.url))
    url = desk.info().novnc_url
    view.goto(url)
    view.wait_for_selector("#noVNC_container canvas", state="attached", timeout=15_000)
    stats = wait_for_desktop(view)
    assert (stats["width"], stats["height"]) == (1920, 1080)  # the whole framebuffer, unscaled
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "novnc.png"
    view.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000

    from PIL import Image

    image = Image.open(shot).convert("RGB")
    assert image.size == (1600, 900)
    colours = image.getcolors(1 << 24)
    assert len(colours) > 50
    assert max(count for count, _ in colours) / (1600 * 900) < 0.9


def test_the_canvas_matches_the_display(view, desk):
    """The picture in the viewer is the session's display: compare a strip of the XFCE panel."""
    view.goto(desk.info().novnc_url)
    wait_for_desktop(view)
    frame = desk.capture().image
    probe = """([x, y]) => Array.from(document.querySelector('#noVNC_container canvas')
                   .getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3))"""
    # the panel at the bottom is static: its pixels must agree (allowing for lossy encodings)
    for x, y in ((5, 1075), (960, 1070), (1915, 1060), (200, 50)):
        deadline = time.monotonic() + 10
        while True:
            seen = view.evaluate(probe, [x, y])
            want = frame.getpixel((x, y))
            if all(abs(a - b) <= 24 for a, b in zip(seen, want)):
                break
            assert time.monotonic() < deadline, f"canvas {seen} != display {want} at {(x, y)}"
            time.sleep(0.25)


def test_reported_url_is_view_only(desk):
    url = desk.info().novnc_url
    query = parse_qs(urlsplit(url).query)
    assert query["view_only"] == ["true"]
    assert query["password"] == [desk.stack.view_password]
    assert desk.stack.view_password != desk.stack.vnc_password
    control = parse_qs(urlsplit(desk.stack.novnc_url(control=True)).query)
    assert control["view_only"] == ["false"] and control["password"] == [desk.stack.vnc_password]


def _hover_canvas_centre(view):
    box = view.locator("#noVNC_container canvas").bounding_box()
    for dx, dy in ((0.5, 0.5), (0.52, 0.5), (0.5, 0.52)):
        view.mouse.move(box["x"] + box["width"] * dx, box["y"] + box["height"] * dy)
        time.sleep(0.1)


def test_view_password_cannot_drive_the_desktop_even_with_a_client_that_tries(view, desk):
    """The server, not just the web client, enforces view-only: the view password connected
    with the client's view_only switched off still moves nothing."""
    desk.perform(Move(x=10, y=10))
    view.goto(with_params(desk.info().novnc_url, view_only="false"))
    wait_for_desktop(view)
    _hover_canvas_centre(view)
    time.sleep(1.0)
    assert desk.executor.cursor() == (10, 10)


def test_control_password_does_drive_the_desktop(view, desk):
    """The positive control for the test above: same gesture, control password, the pointer moves."""
    desk.perform(Move(x=10, y=10))
    view.goto(desk.stack.novnc_url(control=True))
    wait_for_desktop(view)
    deadline = time.monotonic() + 10
    while desk.executor.cursor() == (10, 10):
        assert time.monotonic() < deadline, "input from the control URL never reached the desktop"
        _hover_canvas_centre(view)
    x, y = desk.executor.cursor()
    assert abs(x - 960) < 80 and abs(y - 540) < 80  # the middle of the canvas is the middle of the screen


def test_wrong_password_is_refused(view, desk):
    view.goto(with_params(desk.info().novnc_url, password="wrong-password"))
    status = view.locator("#noVNC_status")
    deadline = time.monotonic() + 15
    text = ""
    while time.monotonic() < deadline:
        text = status.text_content() or ""
        if text:
            break
        time.sleep(0.2)
    # x11vnc's reason, relayed by noVNC: "New connection has been rejected with reason: password check failed!"
    assert "rejected" in text.lower() and ("password" in text.lower() or "authentication" in text.lower()), text
    assert not connected(view)
    stats = view.evaluate(CANVAS_STATS)
    assert stats is None or stats["colours"] <= 2  # nothing of the desktop was shown
