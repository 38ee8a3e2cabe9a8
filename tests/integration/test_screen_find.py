"""vision.qa.screen_find on the real desktop: text drawn on a <canvas> in Chromium (no DOM text to
find it by) is found by OCR of the display at the pixel where the page drew it, and a click there
lands on it; a template cut from one screenshot is found in the next at the same box. The page is
served by the local test site (tests/fakes/site.py) and reports what really happened to it."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from desktop.actions import Click, DoubleClick
from tests.fakes import site as site_pages
from vision.qa.screen_find import NotOnScreen, find_image_on_screen, find_text_on_screen

pytestmark = pytest.mark.x11

LABEL = "Place order"
REPAINTED = "Order placed"

# A canvas app's button: a rectangle and a label drawn with fillText, then the label's box reported
# in viewport CSS px (the canvas's place plus the text's own metrics), as the ground truth.
CANVAS_PAGE = site_pages._page("canvas app", f"""
<canvas id="app" class="at" width="500" height="160" style="left: 340px; top: 260px"></canvas>
<script>
  const canvas = document.getElementById('app');
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#eef2f7'; ctx.fillRect(0, 0, 500, 160);
  ctx.fillStyle = '#1d4ed8'; ctx.fillRect(120, 40, 260, 80);
  ctx.font = '28px "DejaVu Sans"'; ctx.fillStyle = '#ffffff'; ctx.textBaseline = 'alphabetic';
  const m = ctx.measureText('{LABEL}');
  const x = 250 - m.width / 2, y = 90;
  ctx.fillText('{LABEL}', x, y);
  const r = canvas.getBoundingClientRect();
  report({{type: 'drawn', x0: r.left + x - m.actualBoundingBoxLeft, y0: r.top + y - m.actualBoundingBoxAscent,
          x1: r.left + x + m.actualBoundingBoxRight, y1: r.top + y + m.actualBoundingBoxDescent,
          domText: document.body.innerText}});
  // A double click repaints the button with another label (the screen of the step after an action).
  canvas.addEventListener('dblclick', () => {{
    ctx.fillStyle = '#1d4ed8'; ctx.fillRect(120, 40, 260, 80);
    ctx.fillStyle = '#ffffff'; ctx.fillText('{REPAINTED}', 250 - ctx.measureText('{REPAINTED}').width / 2, 90);
  }});
</script>""")


@pytest.fixture
def canvas_app(desk, site, monkeypatch):
    monkeypatch.setitem(site_pages.PAGES, "/qa-canvas", CANVAS_PAGE)
    site.clear()
    desk.run_settled(lambda: desk.open_url(site.url("/qa-canvas")))
    drawn = site.wait_for(lambda e: e.get("type") == "drawn" and e.get("page") == "/qa-canvas")
    assert LABEL not in drawn["domText"]  # only the pixels say it: the DOM cannot find it
    return drawn


def test_text_on_a_canvas_is_found_at_its_display_pixel_and_a_click_there_lands_on_it(desk, site, canvas_app):
    drawn = canvas_app
    found = find_text_on_screen(desk.capture().png, LABEL)
    assert found.how == "ocr" and found.score == 1.0, found

    desk.perform(Click(x=found.x, y=found.y))
    click = site.wait_for(lambda e: e.get("type") == "click" and e.get("page") == "/qa-canvas")
    assert click["target"] == "app" and (click["screenX"], click["screenY"]) == (found.x, found.y), click
    # Where the page drew the label, in display px (the viewport's offset from the click itself):
    dx, dy = click["screenX"] - click["clientX"], click["screenY"] - click["clientY"]
    ink = (drawn["x0"] + dx, drawn["y0"] + dy, drawn["x1"] + dx, drawn["y1"] + dy)
    assert ink[0] <= found.x <= ink[2] and ink[1] <= found.y <= ink[3], (found, ink)
    # The OCR box holds the ink, with no more than a few pixels around it.
    x0, y0, x1, y1 = found.box
    assert x0 <= ink[0] + 2 and y0 <= ink[1] + 2 and x1 >= ink[2] - 2 and y1 >= ink[3] - 2, (found, ink)
    assert ink[0] - x0 <= 12 and ink[1] - y0 <= 12 and x1 - ink[2] <= 12 and y1 - ink[3] <= 12, (found, ink)


def test_a_template_cut_from_the_screen_is_found_again_and_text_not_shown_is_not(desk, canvas_app):
    first = desk.capture().png
    button = find_text_on_screen(first, LABEL)
    x0, y0, x1, y1 = button.box
    cut = (x0 - 20, y0 - 10, x1 + 20, y1 + 10)
    out = io.BytesIO()
    Image.open(io.BytesIO(first)).crop(cut).save(out, "PNG")
    found = find_image_on_screen(desk.capture().png, out.getvalue(), confidence=0.95)
    assert found.box == cut and found.how == "image", (found, cut)

    with pytest.raises(NotOnScreen, match=f"could not find 'Payment received' on the screen.*'{LABEL}'"):
        find_text_on_screen(first, "Payment received")


def test_after_the_canvas_repaints_its_label_the_new_one_is_found_and_the_old_one_is_not(desk, canvas_app):
    """The screen of the step after an action: only the repainted region is read again (the rest
    from the read before), and what it says now is what is found."""
    from vision.perception.ocr import shared_engine

    before = find_text_on_screen(desk.capture().png, LABEL)
    desk.perform(DoubleClick(x=before.x, y=before.y))
    png = desk.capture().png
    found = find_text_on_screen(png, REPAINTED)
    assert shared_engine().last_how == "regions"
    assert found.score == 1.0 and abs(found.y - before.y) <= 6 and abs(found.x - before.x) <= 12, (found, before)
    with pytest.raises(NotOnScreen):
        find_text_on_screen(png, LABEL)
