"""Reading only what changed (vision.perception.ocr.IncrementalReader): the lines of a recent screen
are reused where its pixels are unchanged, and every region that changed is read again.

With the real engine on rendered 1920x1080 screens (no X): after one screen is read, the next one
with a line reworded, a word appended to a line, a text wiped and a text added is read by regions,
and what a find answers is what it answers on a full read of the new screen -- the new texts where
they were drawn, the old ones not at all. Then the planning, with fakes, step by step.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from vision.perception import ocr
from vision.perception.grounding import find_text
from vision.perception.ocr import Box, IncrementalReader, Line, Rect
from vision.qa.screen_find import NotOnScreen, find_text_on_screen, screen_text

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
BACKGROUND = (236, 239, 244)


def font(size: int = 26) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(FONT, size)


def png_of(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def bgr(image: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image)[:, :, ::-1])


def first_screen() -> Image.Image:
    image = Image.new("RGB", (1920, 1080), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((100, 100), "Checkout: review your basket", font=font(), fill=(20, 20, 20))
    draw.text((100, 200), "alpha bravo charlie delta", font=font(), fill=(20, 20, 20))
    draw.text((100, 400), "Total", font=font(), fill=(20, 20, 20))
    draw.text((100, 700), "Status: waiting for payment", font=font(), fill=(20, 20, 20))
    draw.text((1400, 300), "Remove me soon", font=font(), fill=(20, 20, 20))
    draw.rounded_rectangle((800, 500, 1060, 560), radius=10, fill=(37, 99, 235))
    draw.text((930, 530), "Submit order", font=font(), fill="white", anchor="mm")
    return image


def next_screen(first: Image.Image) -> tuple[Image.Image, dict[str, tuple]]:
    """The first screen repainted in places, as a page repaints: one word of a line replaced, text
    appended right after a word, a line reworded, a text wiped, a text added where there was none.
    Returns it and the ink boxes of what was drawn."""
    image = first.copy()
    draw = ImageDraw.Draw(image)
    ink = {}
    draw.rectangle(draw.textbbox((100, 200), "alpha bravo charlie delta", font=font()), fill=BACKGROUND)
    draw.text((100, 200), "alpha bravo charlie omega", font=font(), fill=(20, 20, 20))
    draw.text((100, 400), "Total: 42 items", font=font(), fill=(20, 20, 20))
    ink["Total: 42 items"] = draw.textbbox((100, 400), "Total: 42 items", font=font())
    draw.rectangle((90, 690, 700, 740), fill=BACKGROUND)
    draw.text((100, 700), "Status: payment received", font=font(), fill=(20, 20, 20))
    ink["payment received"] = draw.textbbox((100, 700), "Status: payment received", font=font())
    draw.rectangle((1390, 290, 1800, 340), fill=BACKGROUND)
    draw.text((1400, 900), "Thank you", font=font(), fill=(20, 20, 20))
    ink["Thank you"] = draw.textbbox((1400, 900), "Thank you", font=font())
    return image, ink


def inside(box, outer, slack: int = 0) -> bool:
    return (outer[0] - slack <= box[0] and outer[1] - slack <= box[1]
            and box[2] <= outer[2] + slack and box[3] <= outer[3] + slack)


@pytest.fixture(scope="module")
def screens():
    first = first_screen()
    second, ink = next_screen(first)
    return first, second, ink


# ------------------------------------------------------------------------ the real engine, end to end


def test_a_changed_screen_is_read_by_regions_and_finds_what_is_there_now(screens):
    first, second, ink = screens
    engine = ocr.shared_engine()
    engine.forget()
    submit = find_text_on_screen(png_of(first), "Submit order")
    assert find_text_on_screen(png_of(first), "Remove me soon").how == "ocr"

    png = png_of(second)
    found = find_text_on_screen(png, "Thank you")  # appeared where there was nothing
    assert engine.last_how == "regions"  # the rest of the screen came from the first read
    assert inside(ink["Thank you"], found.box) and inside(found.box, ink["Thank you"], slack=12), found
    status = find_text_on_screen(png, "payment received")  # a line reworded: the words of the new line
    assert status.score == 1.0 and inside(status.box, ink["payment received"], slack=12), status
    for gone in ("Remove me soon", "waiting for payment", "charlie delta"):  # wiped or reworded away
        with pytest.raises(NotOnScreen):
            find_text_on_screen(png, gone)
    # A line that changed anywhere is read again whole: one line, not the old one plus a fragment.
    total = find_text_on_screen(png, "Total: 42 items")
    assert total.score == 1.0 and inside(ink["Total: 42 items"], total.box), total
    assert find_text_on_screen(png, "charlie omega").score == 1.0
    # What did not change is the first read's answer, to the pixel.
    assert find_text_on_screen(png, "Submit order") == submit
    text = screen_text(png).splitlines()
    assert "alpha bravo charlie omega" in text and "alpha bravo charlie delta" not in text, text


def test_reading_by_regions_answers_as_a_full_read_of_the_new_screen(screens):
    first, second, _ = screens
    engine = ocr.shared_engine()
    engine.forget()
    engine.read(bgr(first))
    by_regions = engine.read(bgr(second))
    assert engine.last_how == "regions"
    full = engine._read_full(bgr(second))
    assert sorted(line.text for line in by_regions) == sorted(line.text for line in full)
    for line in full:  # the same boxes, up to the pixel of jitter two full reads also show
        twin = next(other for other in by_regions if other.text == line.text)
        assert max(abs(a - b) for a, b in zip((line.box.x0, line.box.y0, line.box.x1, line.box.y1),
                                              (twin.box.x0, twin.box.y0, twin.box.x1, twin.box.y1))) <= 3, \
            (line, twin)
    for target in ("Total: 42 items", "payment received", "Thank you", "Submit order", "charlie omega"):
        assert find_text(by_regions, target).text == find_text(full, target).text, target


def test_the_same_pixels_again_are_not_read_again(screens):
    first, _, _ = screens
    engine = ocr.shared_engine()
    lines = engine.read(bgr(first))
    assert engine.read(bgr(first)) == lines and engine.last_how == "same"


def test_every_model_the_engine_loads_runs_without_spinning_threads(screens):
    """Each model session (detection, angle, recognition) is built with onnxruntime's threads
    sleeping between pieces of work, not spinning on a core others wait for (ocr.NO_SPINNING)."""
    first, _, _ = screens
    engine = ocr.shared_engine()
    engine.forget()
    engine.read(bgr(first))
    loaded = engine._load()
    models = [loaded.text_det, loaded.text_cls, loaded.text_rec]
    assert all(model is not None for model in models), models
    key, value = ocr.NO_SPINNING
    for model in models:
        options = model.session.session.get_session_options()
        try:
            set_to = options.get_session_config_entry(key)
        except RuntimeError:  # onnxruntime's answer for an option never set: its default, spinning
            set_to = "unset"
        assert set_to == value, f"{type(model).__name__}'s session: {key} is {set_to}"


# ----------------------------------------------------------------------------- planning, with fakes


def line(text: str, x0: float, y0: float, x1: float, y1: float) -> Line:
    return Line(text, Box(x0, y0, x1, y1))


def quad(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)


def test_changed_rects_are_tight_and_near_changes_are_one():
    old = np.zeros((200, 300, 3), np.uint8)
    new = old.copy()
    new[10:20, 30:40] = 255
    new[12:18, 50:60] = 255    # 10 px from the first: the same change
    new[150:160, 200:210, 1] = 1  # one channel is a change too
    rows = (old != new).any(axis=(1, 2))
    assert ocr.changed_rects(old, new, rows) == [Rect(30, 10, 60, 20), Rect(200, 150, 210, 160)]
    assert ocr.changed_rects(old, old, np.zeros(200, bool)) == []


def test_windows_are_multiples_of_32_and_stay_on_the_screen():
    assert ocr.window_for(Rect(500, 500, 510, 510), 1920, 1080) == Rect(468, 468, 564, 564)
    assert ocr.window_for(Rect(0, 1070, 10, 1080), 1920, 1080) == Rect(0, 984, 96, 1080)
    assert ocr.window_for(Rect(0, 0, 1900, 1000), 1920, 1080) == Rect(0, 0, 1920, 1080)


def test_a_line_near_a_change_is_dropped_and_its_region_holds_it_whole():
    lines = [line("near", 100, 100, 400, 130), line("far", 100, 600, 400, 630), line("next", 420, 100, 600, 130)]
    regions, kept = ocr.plan_regions([Rect(300, 135, 310, 140)], lines, 1920, 1080, pad=16)
    # "near" is 5 px from the change: dropped, its region holds it whole; "next" (20 px on) is kept.
    assert [k.text for k in kept] == ["far", "next"]
    assert len(regions) == 1 and regions[0].holds(lines[0].box) and not regions[0].touches(lines[2].box)


def test_regions_whose_windows_overlap_are_merged():
    regions, _ = ocr.plan_regions([Rect(100, 100, 110, 110), Rect(200, 100, 210, 110), Rect(1500, 900, 1510, 910)],
                                  [], 1920, 1080, pad=16)
    assert regions == [Rect(84, 84, 226, 126), Rect(1484, 884, 1526, 926)]


def test_lines_come_out_in_the_detectors_order():
    lines = [line("b", 300, 104, 400, 130), line("c", 10, 200, 90, 230), line("a", 10, 100, 90, 130)]
    assert [x.text for x in ocr.detector_order(lines)] == ["a", "b", "c"]


class Fake:
    """A fake engine: a full read answers ``full``; detection answers the quads of ``boxes`` inside
    each window (cut to it, as the detector's boxes are); recognition names each quad by its place."""

    def __init__(self, full: list[Line], boxes: list[tuple[str, tuple]]):
        self.full, self.boxes = full, boxes
        self.calls: list[tuple] = []
        self.reader = IncrementalReader(self.read_full, self.detect, self.recognise)

    def read_full(self, image):
        self.calls.append(("full",))
        return list(self.full)

    def detect(self, image, windows):
        self.calls.append(("detect", tuple(windows)))
        out = []
        for w in windows:
            quads = [quad(max(b[0], w.x0), max(b[1], w.y0), min(b[2], w.x1), min(b[3], w.y1))
                     for _, b in self.boxes if Rect(w.x0, w.y0, w.x1, w.y1).touches(Box(*b))]
            out.append(np.array(quads, np.float32).reshape(-1, 4, 2))
        return out

    def recognise(self, image, quads):
        self.calls.append(("recognise", len(quads)))
        out = []
        for q in quads:
            box = Box.from_quad(q)
            name = next(t for t, b in self.boxes if Box(*b).contains(box.cx, box.cy))
            out.append(Line(name if Box(*next(b for t, b in self.boxes if t == name)) == box else name + "(cut)",
                            box))
        return out


def test_a_small_change_is_detected_in_a_window_around_it_and_the_rest_reused():
    before = np.zeros((1080, 1920, 3), np.uint8)
    fake = Fake([line("title", 100, 100, 400, 130), line("status", 100, 700, 400, 730)],
                [("title", (100, 100, 400, 130)), ("status", (100, 700, 400, 730))])
    assert [x.text for x in fake.reader.read(before)] == ["title", "status"] and fake.reader.last_how == "full"
    after = before.copy()
    after[710:720, 150:200] = 255  # inside "status"
    fake.calls.clear()
    lines = fake.reader.read(after)
    assert fake.reader.last_how == "regions"
    assert [x.text for x in lines] == ["title", "status"]
    (detect, windows), recognise = fake.calls
    assert detect == "detect" and len(windows) == 1 and windows[0].area < 1920 * 1080 // 20
    assert recognise == ("recognise", 1)  # only "status" is recognised again
    fake.calls.clear()
    assert fake.reader.read(after) == lines and fake.calls == [] and fake.reader.last_how == "same"


def test_text_running_past_its_region_grows_it_until_the_whole_line_is_read():
    before = np.zeros((1080, 1920, 3), np.uint8)
    fake = Fake([], [])
    fake.reader.read(before)
    after = before.copy()
    after[700:720, 100:120] = 255  # the start of a long new line; the detector finds all of it
    fake.boxes = [("long line", (95, 695, 900, 725))]
    fake.calls.clear()
    lines = fake.reader.read(after)
    assert [x.text for x in lines] == ["long line"], lines  # not "long line(cut)"
    windows = [c[1] for c in fake.calls if c[0] == "detect"]
    assert len(windows) == 2 and windows[1][0].x1 >= 900 + ocr.PAD  # the row band, in one more round


def test_a_change_over_most_of_the_screen_is_a_full_read():
    fake = Fake([line("x", 10, 10, 50, 30)], [])
    fake.reader.read(np.zeros((1080, 1920, 3), np.uint8))
    fake.calls.clear()
    fake.reader.read(np.full((1080, 1920, 3), 9, np.uint8))
    assert fake.calls == [("full",)] and fake.reader.last_how == "full"
    fake.calls.clear()
    fake.reader.read(np.zeros((600, 800, 3), np.uint8))  # another size: nothing to compare with
    assert fake.calls == [("full",)]


def test_the_closest_recent_screen_is_the_one_compared():
    fake = Fake([], [])
    a = np.zeros((1080, 1920, 3), np.uint8)
    b = np.full((1080, 1920, 3), 200, np.uint8)
    fake.reader.read(a)
    fake.reader.read(b)
    c = b.copy()
    c[500:510, 500:510] = 0
    fake.calls.clear()
    fake.reader.read(c)
    assert fake.reader.last_how == "regions" and [k for k, *_ in fake.calls] == ["detect", "recognise"]
