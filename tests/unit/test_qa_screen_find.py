"""vision.qa.screen_find on rendered screens (no X): text drawn with pillow onto a 1920x1080 image
of a fake canvas app is found by the real OCR engine at the pixels it was drawn at; a template cut
from the screen is found at its exact box, and an altered one is not at a high confidence."""

from __future__ import annotations

import io
import threading

import numpy as np
import pyscreeze
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from desktop.errors import InvalidRequest
from vision.perception import ocr as ocr_engine
from vision.qa import screen_find
from vision.qa.screen_find import (
    AmbiguousOnScreen,
    Found,
    NotOnScreen,
    find_image_on_screen,
    find_text_on_screen,
    screen_text,
)

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
BUTTON = (800, 500, 1060, 560)            # the canvas button's rectangle, display px
BUTTON_TEXT_AT = (930, 530)               # the centre of its label


def png_of(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def font(size: int = 26) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(FONT, size)


def app_screen(label: str = "Submit order", extra: tuple[tuple[int, int, str], ...] = ()) -> tuple[Image.Image, tuple]:
    """A fake canvas app: a heading, a line of words, and a blue button whose label is only pixels.
    Returns the image and the label's ink box."""
    image = Image.new("RGB", (1920, 1080), (236, 239, 244))
    draw = ImageDraw.Draw(image)
    draw.text((100, 100), "Checkout: review your basket", font=font(), fill=(20, 20, 20))
    draw.text((100, 200), "alpha bravo charlie delta", font=font(), fill=(20, 20, 20))
    draw.rounded_rectangle(BUTTON, radius=10, fill=(37, 99, 235))
    draw.text(BUTTON_TEXT_AT, label, font=font(), fill="white", anchor="mm")
    for x, y, text in extra:
        draw.text((x, y), text, font=font(), fill=(20, 20, 20))
    return image, draw.textbbox(BUTTON_TEXT_AT, label, font=font(), anchor="mm")


@pytest.fixture(scope="module")
def screen():
    image, ink = app_screen()
    return image, png_of(image), ink


def inside(box, outer, slack: int = 0) -> bool:
    return (outer[0] - slack <= box[0] and outer[1] - slack <= box[1]
            and box[2] <= outer[2] + slack and box[3] <= outer[3] + slack)


# ------------------------------------------------------------------------------------------- text


def test_text_on_a_canvas_button_is_found_where_it_was_drawn(screen):
    _, png, ink = screen
    found = find_text_on_screen(png, "Submit order")
    assert found.how == "ocr" and found.score == 1.0
    # The OCR box hugs the drawn ink (a few px of margin), and it sits inside the button.
    assert inside(ink, found.box, slack=0) and inside(found.box, ink, slack=12), (found, ink)
    assert inside(found.box, BUTTON), found
    assert abs(found.x - BUTTON_TEXT_AT[0]) <= 4 and abs(found.y - BUTTON_TEXT_AT[1]) <= 6, found


def test_a_word_inside_a_longer_line_gets_its_own_box(screen):
    image, png, _ = screen
    draw = ImageDraw.Draw(image.copy())
    before = draw.textlength("alpha ", font=font())
    word = draw.textbbox((100 + before, 200), "bravo", font=font())
    found = find_text_on_screen(png, "Bravo")  # case-insensitive, as the ocr provider's clicks are
    assert inside(found.box, word, slack=12), (found, word)  # the word, not the whole line
    assert word[0] <= found.x <= word[2] and word[1] <= found.y <= word[3], (found, word)


def test_missing_text_says_what_was_looked_for_and_samples_what_is_visible(screen):
    _, png, _ = screen
    with pytest.raises(NotOnScreen) as caught:
        find_text_on_screen(png, "Place order now")
    message = str(caught.value)
    assert message.startswith("could not find 'Place order now' on the screen"), message
    assert "'Submit order'" in message and "'Checkout: review your basket'" in message, message


def test_the_same_text_twice_is_ambiguous_and_names_both_places():
    image, _ = app_screen(extra=((1400, 800, "Submit order"),))
    with pytest.raises(AmbiguousOnScreen) as caught:
        find_text_on_screen(png_of(image), "Submit order")
    assert isinstance(caught.value, NotOnScreen)  # a step that needs one place fails on it
    assert "found 2 matches for 'Submit order'" in str(caught.value), caught.value


def test_screen_text_reads_in_reading_order(screen):
    _, png, _ = screen
    assert screen_text(png).splitlines() == ["Checkout: review your basket", "alpha bravo charlie delta",
                                             "Submit order"]


def test_one_screen_is_read_once_and_the_engine_is_shared(screen, monkeypatch):
    """Asking twice about one screenshot runs OCR once; different screens use the process's one engine,
    from several threads at once."""
    engine = ocr_engine.shared_engine()
    reads = []

    class Counting:
        def read(self, image):
            reads.append(image.shape)
            return engine.read(image)

    monkeypatch.setattr(screen_find, "shared_engine", lambda: Counting())
    image, _ = app_screen(label="Pay now")
    png = png_of(image)
    assert find_text_on_screen(png, "Pay now").how == "ocr"
    assert "Pay now" in screen_text(png)
    assert reads == [(1080, 1920, 3)]
    assert ocr_engine.shared_engine() is engine

    labels = ["Ship it", "Keep going", "Order more"]
    results: dict[str, Found | BaseException] = {}

    def look(label: str) -> None:
        try:
            results[label] = find_text_on_screen(png_of(app_screen(label=label)[0]), label)
        except BaseException as exc:  # noqa: BLE001 -- reported by the assertion below
            results[label] = exc

    threads = [threading.Thread(target=look, args=(label,)) for label in labels]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for label in labels:
        assert isinstance(results[label], Found) and inside(results[label].box, BUTTON), (label, results[label])
    assert len(reads) == 4


@pytest.mark.parametrize("text", ["", "   ", None])
def test_an_empty_text_is_a_clear_error(screen, text):
    with pytest.raises(InvalidRequest, match="nothing to look for"):
        find_text_on_screen(screen[1], text)


def test_a_screenshot_that_is_not_an_image_is_a_clear_error():
    with pytest.raises(InvalidRequest, match="screenshot is not a readable image"):
        find_text_on_screen(b"not a png at all", "Submit order")
    with pytest.raises(InvalidRequest, match="screenshot is empty"):
        screen_text(b"")


# ------------------------------------------------------------------------------------------ image


def test_a_template_cut_from_the_screen_is_found_at_its_exact_box(screen):
    image, png, _ = screen
    cut = (790, 490, 1070, 570)
    found = find_image_on_screen(png, png_of(image.crop(cut)), confidence=0.95)
    assert found == Found(x=930, y=530, box=cut, how="image", score=1.0)


def test_an_altered_template_is_not_found_at_a_high_confidence(screen):
    image, png, _ = screen
    cut = (790, 490, 1070, 570)
    altered, _ = app_screen(label="Cancel order")
    template = png_of(altered.crop(cut))
    with pytest.raises(NotOnScreen) as caught:
        find_image_on_screen(png, template, confidence=0.95)
    message = str(caught.value)
    assert message.startswith("could not find the 280x80 template image on the screen at confidence 0.95"), message
    assert "highest confidence = 0." in message, message
    # The unaltered one at that confidence is there: it is the change that failed the match.
    assert find_image_on_screen(png, png_of(image.crop(cut)), confidence=0.95).box == cut


def test_a_smooth_template_lands_on_its_best_position_not_the_first_one_above_the_threshold():
    """pyscreeze answers the first position in reading order above the confidence; a soft shape still
    correlates well a few pixels off, so that first position is not the shape's place."""
    image = Image.new("RGB", (1920, 1080), (255, 255, 255))
    ImageDraw.Draw(image).ellipse((1200, 300, 1320, 420), fill=(200, 30, 30))
    image = image.filter(ImageFilter.GaussianBlur(12))
    cut = (1160, 260, 1360, 460)
    template = image.crop(cut)
    screen_bgr = np.ascontiguousarray(np.asarray(image)[:, :, ::-1])
    template_bgr = np.ascontiguousarray(np.asarray(template)[:, :, ::-1])
    first = pyscreeze.locate(template_bgr, screen_bgr, grayscale=False, confidence=0.9)
    assert (first.left, first.top) != cut[:2]  # the premise: the raw answer is off
    found = find_image_on_screen(png_of(image), png_of(template), confidence=0.9)
    assert found.box == cut and found.score >= 0.999, found


def test_a_template_shown_twice_answers_the_first_in_reading_order(screen):
    image, _, _ = screen
    cut = (790, 490, 1070, 570)
    twice = image.copy()
    twice.paste(image.crop(cut), (200, 800))   # lower on the screen
    twice.paste(image.crop(cut), (1500, 100))  # higher, to the right
    found = find_image_on_screen(png_of(twice), png_of(image.crop(cut)))
    assert found.box == (1500, 100, 1780, 180), found


@pytest.mark.parametrize("confidence", [0, -0.5, 1.01, float("nan"), "high", True])
def test_a_bad_confidence_is_a_clear_error(screen, confidence):
    image, png, _ = screen
    with pytest.raises(InvalidRequest, match="confidence must be a number above 0 and at most 1"):
        find_image_on_screen(png, png_of(image.crop((790, 490, 1070, 570))), confidence=confidence)


def test_templates_that_cannot_be_matched_are_clear_errors(screen):
    image, png, _ = screen
    with pytest.raises(InvalidRequest, match="single flat colour"):
        find_image_on_screen(png, png_of(Image.new("RGB", (40, 40), (236, 239, 244))))
    with pytest.raises(InvalidRequest, match=r"template image \(1921x10\) is larger than the screen \(1920x1080\)"):
        find_image_on_screen(png, png_of(Image.new("RGB", (1921, 10))))
    with pytest.raises(InvalidRequest, match="template image is not a readable image"):
        find_image_on_screen(png, b"\x89PNG\r\n\x1a\n broken")
