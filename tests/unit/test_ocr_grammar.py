"""The ocr provider's pure parts: the instruction grammar, text grounding, the field heuristic,
reading order, and the turn sequence (with a fake OCR engine: no X, no model)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from desktop.actions import Click, DoubleClick, Key, Scroll, Type, Wait
from desktop.frame import Frame
from vision.actions import CallResult, Done, Fail
from vision.perception.fields import field_point
from vision.perception.grounding import GroundingError, find_text, normalise
from vision.perception.ocr import Box, Line, Word, lines_from_rapidocr, read_text, reading_order
from vision.providers.base import Observation
from vision.providers.ocr import InstructionError, OcrProvider, parse_instruction


def one(text: str) -> dict:
    intents = parse_instruction(text)
    assert len(intents) == 1, intents
    data = intents[0].to_dict()
    data.pop("clause")
    return data


# ---------------------------------------------------------------------------------------------
# Grammar


@pytest.mark.parametrize("text,expected", [
    ('click "Sign in"', {"kind": "click", "target": "Sign in"}),
    ("click Sign in", {"kind": "click", "target": "Sign in"}),
    ("CLICK sign in", {"kind": "click", "target": "sign in"}),
    ("click on Cancel", {"kind": "click", "target": "Cancel"}),
    ("left-click Cancel", {"kind": "click", "target": "Cancel"}),
    ("click the Sign in button", {"kind": "click", "target": "Sign in"}),
    ('click the "Sign in" button', {"kind": "click", "target": "Sign in"}),
    ('click on the "Docs" link', {"kind": "click", "target": "Docs"}),
    ("press the Sign in button", {"kind": "click", "target": "Sign in"}),
    ('press the "OK" button', {"kind": "click", "target": "OK"}),
    ("tap Cancel", {"kind": "click", "target": "Cancel"}),
    ("tap on “Cancel”", {"kind": "click", "target": "Cancel"}),
    ("please click OK.", {"kind": "click", "target": "OK"}),
    ("click 'Sign in'", {"kind": "click", "target": "Sign in"}),
    ("click 'Don't save'", {"kind": "click", "target": "Don't save"}),
    ('click "the button"', {"kind": "click", "target": "the button"}),
    ("click Menu", {"kind": "click", "target": "Menu"}),
    ("click Terms and Conditions", {"kind": "click", "target": "Terms and Conditions"}),
    ("double-click bravo", {"kind": "double_click", "target": "bravo"}),
    ("double click bravo", {"kind": "double_click", "target": "bravo"}),
    ('doubleclick "bravo"', {"kind": "double_click", "target": "bravo"}),
    ("right-click alpha", {"kind": "right_click", "target": "alpha"}),
    ("Right click on 'alpha'", {"kind": "right_click", "target": "alpha"}),
    ('type "hello@example.com"', {"kind": "type", "text": "hello@example.com"}),
    ("type Hello World", {"kind": "type", "text": "Hello World"}),
    ("type hello, world", {"kind": "type", "text": "hello, world"}),
    ('type "Rock and roll" into "Song"', {"kind": "type", "text": "Rock and roll", "label": "Song"}),
    ('type "hello@example.com" into "Email"', {"kind": "type", "text": "hello@example.com", "label": "Email"}),
    ('type "x" in "Email"', {"kind": "type", "text": "x", "label": "Email"}),
    ('type "x" into the "Email" field', {"kind": "type", "text": "x", "label": "Email"}),
    ("type hello into Email", {"kind": "type", "text": "hello", "label": "Email"}),
    ("type hello in the Email field", {"kind": "type", "text": "hello", "label": "Email"}),
    ("type log in into Username", {"kind": "type", "text": "log in", "label": "Username"}),
    ('type hello into "First name"', {"kind": "type", "text": "hello", "label": "First name"}),
    ("enter bob@example.com into Email", {"kind": "type", "text": "bob@example.com", "label": "Email"}),
    ('write "note" in Comment', {"kind": "type", "text": "note", "label": "Comment"}),
    ('fill "Email" with "a@b.c"', {"kind": "type", "text": "a@b.c", "label": "Email"}),
    ("fill in the Email field with a@b.c", {"kind": "type", "text": "a@b.c", "label": "Email"}),
    ('type "{{password}}" into "Password"', {"kind": "type", "text": "{{password}}", "label": "Password"}),
    ('type "Mr. Smith."', {"kind": "type", "text": "Mr. Smith."}),
    ("press enter", {"kind": "press", "keys": ["enter"]}),
    ("press Enter.", {"kind": "press", "keys": ["enter"]}),
    ("hit enter", {"kind": "press", "keys": ["enter"]}),
    ("enter", {"kind": "press", "keys": ["enter"]}),
    ("press ctrl+a", {"kind": "press", "keys": ["ctrl+a"]}),
    ("press Ctrl + A", {"kind": "press", "keys": ["Ctrl+A"]}),
    ("press ctrl a", {"kind": "press", "keys": ["ctrl+a"]}),
    ("press ctrl+shift+t", {"kind": "press", "keys": ["ctrl+shift+t"]}),
    ("press the escape key", {"kind": "press", "keys": ["escape"]}),
    ("press tab tab enter", {"kind": "press", "keys": ["tab", "tab", "enter"]}),
    ("press F5", {"kind": "press", "keys": ["F5"]}),
    ("open example.com", {"kind": "open", "url": "example.com"}),
    ("open https://example.com/a?b=1&c=2", {"kind": "open", "url": "https://example.com/a?b=1&c=2"}),
    ('open "http://127.0.0.1:8000/"', {"kind": "open", "url": "http://127.0.0.1:8000/"}),
    ("go to localhost:3000/login", {"kind": "open", "url": "localhost:3000/login"}),
    ("navigate to docs.python.org", {"kind": "open", "url": "docs.python.org"}),
    ("visit the site example.org.", {"kind": "open", "url": "example.org"}),
    ("scroll down", {"kind": "scroll", "direction": "down"}),
    ("scroll up 3", {"kind": "scroll", "direction": "up", "amount": 3}),
    ("scroll down by 10 notches", {"kind": "scroll", "direction": "down", "amount": 10}),
    ("Scroll the page down 2 times", {"kind": "scroll", "direction": "down", "amount": 2}),
    ("read the screen", {"kind": "read"}),
    ("Read the text on the screen", {"kind": "read"}),
    ("read", {"kind": "read"}),
    ("what does the screen say?", {"kind": "read"}),
    ("What's on the screen", {"kind": "read"}),
    ("what is on the page?", {"kind": "read"}),
])
def test_single_clauses(text, expected):
    assert one(text) == expected


def test_case_of_the_text_is_kept_and_the_verb_is_case_insensitive():
    assert one('TYPE "MiXeD"') == {"kind": "type", "text": "MiXeD"}
    assert one("Type MiXeD Case") == {"kind": "type", "text": "MiXeD Case"}


@pytest.mark.parametrize("text,kinds", [
    ('click "Sign in" then type "x"', ["click", "type"]),
    ("click Sign in, then press enter", ["click", "press"]),
    ("click Sign in; press enter; read the screen", ["click", "press", "read"]),
    ("click Sign in and press enter", ["click", "press"]),
    ("click Sign in and then press enter", ["click", "press"]),
    ('Click "Sign in". Then type hi and press enter', ["click", "type", "press"]),
    ("first click Email, then type hi, finally press enter", ["click", "type", "press"]),
    ("open example.com then click More information", ["open", "click"]),
    ("type hello and enter", ["type", "press"]),
])
def test_clauses_run_in_order(text, kinds):
    assert [i.kind for i in parse_instruction(text)] == kinds


def test_separators_inside_quotes_do_not_split():
    intents = parse_instruction('type "a, b; c and d then e" into "Notes" then click "Save and close"')
    assert [i.to_dict()["kind"] for i in intents] == ["type", "click"]
    assert intents[0].text == "a, b; c and d then e" and intents[0].label == "Notes"
    assert intents[1].target == "Save and close"


def test_a_clause_keeps_its_words_for_the_trace():
    intent = parse_instruction('click "Sign in" then press enter')[0]
    assert intent.clause == 'click "Sign in"'
    assert intent.to_dict() == {"kind": "click", "target": "Sign in", "clause": 'click "Sign in"'}


@pytest.mark.parametrize("text", [
    "", "   ", "fly to the moon", "click", "sign in please", "do the thing then click OK", "scroll sideways",
])
def test_unparseable_instructions_fail_listing_the_supported_forms(text):
    with pytest.raises(InstructionError) as err:
        parse_instruction(text)
    message = str(err.value)
    assert "Supported instructions" in message
    for form in ('click "<text>"', 'type "<text>" into "<label>"', "press <keys>", "open <url>", "scroll up|down",
                 "read the screen"):
        assert form in message


def test_a_clause_without_a_verb_joins_the_one_before():
    # Unquoted text that happens to contain a separator stays whole; grounding then finds it or says so.
    assert one("click OK then dance") == {"kind": "click", "target": "OK then dance"}


@pytest.mark.parametrize("text, target", [("press Submit", "Submit"), ("Press Sign in.", "Sign in"),
                                          ('press "Save as"', "Save as"), ("press the OK button", "OK")])
def test_press_naming_no_key_clicks_it(text, target):
    # MiniWoB's "... and press Submit.": what a person reads as a button, not a key that does not exist
    assert one(text) == {"kind": "click", "target": target}


def test_an_unknown_key_among_keys_says_so_and_suggests_click():
    with pytest.raises(InstructionError, match=r"unknown key name 'Sbumit'.*click \"tab then Sbumit\""):
        parse_instruction("press tab then Sbumit")
    with pytest.raises(InstructionError, match=r"unknown key name"):
        parse_instruction("press ctrl+Sbumit")


def test_open_needs_a_url():
    with pytest.raises(InstructionError, match="open needs a URL"):
        parse_instruction("open the settings menu")


@pytest.mark.parametrize("text", ['type ""', "scroll down 0", "scroll down 51", 'type "x" onto the floor please now'])
def test_bad_arguments_are_refused(text):
    with pytest.raises(InstructionError):
        parse_instruction(text)


# ---------------------------------------------------------------------------------------------
# Grounding text


def words_line(text: str, x0: float, y0: float, h: float = 30, char: float = 14, score: float = 1.0) -> Line:
    """A line with word boxes laid out like a monospaced font: ``char`` px per character."""
    words = []
    x = x0
    for word in text.split(" "):
        words.append(Word(word, Box(x, y0, x + len(word) * char, y0 + h)))
        x += (len(word) + 1) * char
    return Line(text, Box(x0 - 4, y0 - 2, x - char + 4, y0 + h + 2), score, tuple(words))


PAGE = [
    words_line("alpha bravo charlie delta", 100, 200),
    words_line("Sign in", 1220, 210),
    words_line("Cancel", 1520, 210),
    words_line("second line of text", 100, 260),
    words_line("Email", 1200, 350),
    words_line("ready", 1200, 440),
]


def test_an_exact_line_is_clicked_at_its_centre():
    match = find_text(PAGE, "Sign in")
    assert match.how == "line" and match.score == 1.0
    assert match.point == PAGE[1].box.centre


def test_matching_ignores_case_and_extra_spaces():
    assert find_text(PAGE, "  SIGN   IN ").point == PAGE[1].box.centre
    assert find_text(PAGE, "cancel").text == "Cancel"


def test_one_word_inside_a_line_gets_its_word_box():
    match = find_text(PAGE, "bravo")
    bravo = PAGE[0].words[1]
    assert match.how == "words" and match.point == bravo.box.centre
    assert PAGE[0].box.cx != match.point[0]  # not the line's centre


def test_a_phrase_across_adjacent_words_gets_their_union():
    match = find_text(PAGE, "charlie delta")
    charlie, delta = PAGE[0].words[2], PAGE[0].words[3]
    assert match.box == charlie.box.union(delta.box)
    assert charlie.box.x0 < match.point[0] < delta.box.x1


def test_a_whole_line_beats_the_same_words_inside_a_longer_line():
    lines = [words_line("Sign in to your account", 100, 100), words_line("Sign in", 100, 400)]
    assert find_text(lines, "Sign in").point == lines[1].box.centre


def test_two_exact_places_are_ambiguous_not_a_guess():
    lines = [words_line("Save", 100, 100), words_line("Save", 800, 600)]
    with pytest.raises(GroundingError, match=r"found 2 matches for 'Save'") as err:
        find_text(lines, "Save")
    assert not err.value.not_found
    assert "(128, 115)" in str(err.value) and "(828, 615)" in str(err.value)


def test_the_same_word_twice_inside_lines_is_ambiguous():
    lines = [words_line("one two one", 100, 100)]
    with pytest.raises(GroundingError, match="found 2 matches for 'one'"):
        find_text(lines, "one")


def test_fuzzy_matches_an_ocr_misreading():
    lines = [*PAGE, words_line("Subrnit order", 600, 700)]
    match = find_text(lines, "Submit order")
    assert match.how == "fuzzy" and 0.8 <= match.score < 1.0
    assert match.point == lines[-1].box.centre


def test_fuzzy_matches_a_typo_in_the_instruction():
    match = find_text(PAGE, "Emial")
    assert match.how == "fuzzy" and match.text == "Email"


def test_fuzzy_prefers_the_best_score():
    lines = [words_line("Settings", 100, 100), words_line("Setting", 100, 500)]
    assert find_text(lines, "Settngs").text == "Settings"  # 0.93 beats 0.86


def test_fuzzy_never_takes_another_number_for_the_target():
    """'4 items left' is 0.92 like '3 items left': close enough for an OCR misreading of letters,
    but another count; an assertion of 3 must not pass on it, nor a click on row 3 land on row 4."""
    lines = [words_line("4 items left", 100, 100), words_line("Row 14", 100, 300)]
    with pytest.raises(GroundingError) as err:
        find_text(lines, "3 items left")
    assert err.value.not_found and "the closest is '4 items left'" in str(err.value)
    with pytest.raises(GroundingError):
        find_text(lines, "Row 15")
    assert find_text([*lines, words_line("3 itens left", 100, 500)], "3 items left").text == "3 itens left"


def test_fuzzy_ties_are_ambiguous():
    lines = [words_line("Cancle", 100, 100), words_line("Cancal", 600, 500)]
    with pytest.raises(GroundingError, match="found 2 matches for 'Cancel'.*equally close"):
        find_text(lines, "Cancel")


def test_below_the_fuzzy_threshold_is_not_found():
    with pytest.raises(GroundingError) as err:
        find_text(PAGE, "Sigh up")
    assert err.value.not_found


def test_the_threshold_is_a_parameter():
    assert find_text(PAGE, "Cnl", fuzzy=0.6).text == "Cancel"  # ratio 0.67
    with pytest.raises(GroundingError):
        find_text(PAGE, "Cnl")


def test_short_targets_are_not_matched_loosely():
    with pytest.raises(GroundingError):
        find_text([words_line("On", 100, 100)], "Ok")


def test_not_found_names_the_target_and_samples_the_screen():
    with pytest.raises(GroundingError) as err:
        find_text(PAGE, "Nonexistent button")
    message = str(err.value)
    assert message.startswith("could not find 'Nonexistent button' on the screen")
    assert "visible text includes: 'alpha bravo charlie delta', 'Sign in', 'Cancel'" in message


def test_not_found_sample_is_short():
    lines = [words_line(f"item number {i}", 100, 30 * i, h=20) for i in range(40)]
    message = str(pytest.raises(GroundingError, find_text, lines, "zebra crossing").value)
    assert "(and 28 more)" in message and message.count("'item number") == 12


def test_not_found_mentions_a_close_miss():
    with pytest.raises(GroundingError, match="the closest is 'Cancel'"):
        find_text(PAGE, "Cancellation")


def test_not_found_on_an_empty_screen():
    with pytest.raises(GroundingError, match=r"\(no readable text\)"):
        find_text([], "OK")


def test_end_punctuation_is_ignored():
    lines = [words_line("Email:", 100, 100), words_line("Next »", 100, 300)]
    assert find_text(lines, "Email").how == "line"
    assert normalise("  Hello,  World! ") == "hello world" and normalise("+") == "+"
    assert find_text([words_line("+", 10, 10)], "+").text == "+"


def test_a_phrase_split_by_the_detector_into_two_close_lines_is_found():
    first = words_line("Forgot", 100, 100)
    second = words_line("password?", first.box.x1 + 10, 100)
    match = find_text([first, second], "Forgot password")
    assert match.box.x0 < first.box.x1 and match.box.x1 > second.box.x0


def test_lines_without_word_boxes_get_proportional_ones():
    line = Line("ab cd", Box(0, 0, 50, 10))
    assert [w.text for w in line.words] == ["ab", "cd"]
    assert line.words[1].box == Box(30, 0, 50, 10)
    assert find_text([line], "cd").point == (40, 5)


def test_rapidocr_output_with_missing_word_groups_is_realigned():
    def quad(x0, y0, x1, y1):
        return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]

    result = SimpleNamespace(
        boxes=[quad(0, 0, 100, 20), quad(0, 50, 60, 70), quad(0, 100, 80, 120)],
        txts=("hello world", "●", "last one"),
        scores=(0.99, 0.9, 0.98),
        # rapidocr drops the group of a line without word boxes: two groups for three lines.
        word_results=((("hello", 0.9, quad(2, 0, 45, 20)), ("world", 0.9, quad(55, 0, 98, 20))),
                      (("last", 0.9, quad(1, 100, 35, 120)), ("one", 0.9, quad(45, 100, 79, 120)))),
    )
    lines = lines_from_rapidocr(result)
    assert [line.text for line in lines] == ["hello world", "●", "last one"]
    assert [w.text for w in lines[2].words] == ["last", "one"]
    assert lines[2].words[1].box == Box(45, 100, 79, 120)
    assert lines[0].words[0].box == Box(2, 0, 45, 20)
    assert lines_from_rapidocr(SimpleNamespace(boxes=None, txts=None)) == []


# ---------------------------------------------------------------------------------------------
# Reading order


def test_reading_order_groups_rows_and_sorts_left_to_right():
    lines = [PAGE[2], PAGE[0], PAGE[3], PAGE[1]]
    rows = reading_order(lines)
    assert [[line.text for line in row] for row in rows] == [
        ["alpha bravo charlie delta", "Sign in", "Cancel"], ["second line of text"]]
    assert read_text(PAGE) == ("alpha bravo charlie delta  Sign in  Cancel\nsecond line of text\nEmail\nready")


def test_read_text_of_nothing_is_empty():
    assert read_text([]) == ""


# ---------------------------------------------------------------------------------------------
# The field next to a label


def canvas(w: int = 800, h: int = 400) -> np.ndarray:
    return np.full((h, w, 3), 255, np.uint8)


def rect(image: np.ndarray, x0: int, y0: int, x1: int, y1: int, colour=(118, 118, 118), fill=None) -> None:
    """A 1 px border [x0, x1] x [y0, y1], optionally filled, with its corner pixels left out."""
    if fill is not None:
        image[y0:y1 + 1, x0:x1 + 1] = fill
    image[y0, x0 + 1:x1] = colour
    image[y1, x0 + 1:x1] = colour
    image[y0 + 1:y1, x0] = colour
    image[y0 + 1:y1, x1] = colour


def glyphs(image: np.ndarray, box: Box) -> None:
    """Fake text: short dark strokes inside the box."""
    for x in range(int(box.x0) + 4, int(box.x1) - 4, 9):
        image[int(box.y0) + 6:int(box.y1) - 6, x:x + 2] = 20


LABEL = Line("Email", Box(100, 100, 180, 136))


def test_a_field_to_the_right_is_clicked_in_its_middle():
    image = canvas()
    glyphs(image, LABEL.box)
    rect(image, 240, 96, 640, 140)
    spot = field_point([LABEL], LABEL.box, image)
    assert spot.how == "box-right"
    assert (spot.x, spot.y) == (440, 118)


def test_a_field_with_text_in_it_is_still_one_box():
    image = canvas()
    rect(image, 240, 96, 640, 140)
    glyphs(image, Box(246, 100, 330, 136))  # prefilled text: short strokes, not a border
    spot = field_point([LABEL], LABEL.box, image)
    assert spot.how == "box-right" and 240 < spot.x < 640 and 96 < spot.y < 140


def test_a_filled_field_counts_too():
    image = canvas()
    rect(image, 240, 96, 640, 140, colour=(90, 90, 90), fill=(235, 240, 250))
    spot = field_point([LABEL], LABEL.box, image)
    assert spot.how == "box-right" and 240 < spot.x < 640


def test_a_field_below_the_label():
    image = canvas()
    rect(image, 100, 150, 500, 190)
    spot = field_point([LABEL], LABEL.box, image)
    assert spot.how == "box-below"
    assert spot.x == round(LABEL.box.cx) and 150 < spot.y < 190 and abs(spot.y - 170) <= 2


def test_a_vertical_rule_or_an_underline_is_not_a_field():
    image = canvas()
    image[60:180, 300] = 118       # a vertical rule right of the label
    image[170, 60:700] = 118       # a horizontal rule below it
    spot = field_point([LABEL], LABEL.box, image)
    assert spot.how == "offset-right"


def test_text_on_the_way_stops_the_scan():
    image = canvas()
    other = Line("Help", Box(220, 100, 280, 136))
    rect(image, 400, 96, 700, 140)  # a box beyond the other text belongs to that text
    glyphs(image, other.box)
    spot = field_point([LABEL, other], LABEL.box, image)
    assert spot.how != "box-right"


def test_without_an_image_the_offset_heuristic_is_used():
    spot = field_point([LABEL], LABEL.box)
    assert (spot.x, spot.y, spot.how) == (round(180 + 2 * 36), 118, "offset-right")


def test_offset_goes_below_when_text_sits_to_the_right():
    neighbour = Line("Phone", Box(200, 100, 300, 136))
    spot = field_point([LABEL, neighbour], LABEL.box)
    assert (spot.x, spot.y, spot.how) == (140, 172, "offset-below")


def test_offset_goes_below_at_the_right_edge_of_the_screen():
    label = Line("Search", Box(1850, 20, 1915, 50))
    spot = field_point([label], label.box)
    assert spot.how == "offset-below" and spot.y == 80


def test_no_room_at_all_is_an_error():
    label = Line("Search", Box(1850, 1040, 1915, 1075))
    with pytest.raises(GroundingError, match="no room for a field"):
        field_point([label], label.box)


# ---------------------------------------------------------------------------------------------
# The provider's turns, with a fake engine


class FakeEngine:
    """Returns the next screen's lines for each OCR call, and counts the calls."""

    def __init__(self, *screens: list[Line]):
        self.screens = list(screens)
        self.calls = 0

    def read(self, image: np.ndarray) -> list[Line]:
        assert image.shape == (1080, 1920, 3)
        self.calls += 1
        return self.screens[min(self.calls, len(self.screens)) - 1]


_seed = iter(range(1, 10_000))


def frame() -> Frame:
    """A white 1920x1080 frame, different from every other one (one pixel holds a counter)."""
    pixels = np.full((1080, 1920, 4), 255, np.uint8)
    n = next(_seed)
    pixels[0, 0, :2] = (n % 256, n // 256)
    return Frame(pixels.tobytes(), 1920, 1080)


def provider(instruction: str, *screens: list[Line], **options) -> tuple[OcrProvider, FakeEngine]:
    engine = FakeEngine(*(screens or (PAGE,)))
    return OcrProvider(instruction, model="rapidocr", system="", engine=engine, **options), engine


def step(p: OcrProvider, results=(), frame_=None):
    return p.turn(Observation(frame=frame_ or frame()), list(results))


def actions(turn) -> list:
    assert len(turn.calls) == 1
    return turn.calls[0].actions


def test_name_and_defaults():
    p, _ = provider("read the screen")
    assert p.name == "ocr/rapidocr" and p.fuzzy == 0.8
    assert OcrProvider("click OK", model="rapidocr", system="x").name == "ocr/rapidocr"


def test_click_then_done():
    p, engine = provider('click "Sign in"')
    turn = step(p)
    assert actions(turn) == [Click(x=PAGE[1].box.centre[0], y=PAGE[1].box.centre[1])]
    assert turn.calls[0].name == "click" and turn.calls[0].raw["target"] == "Sign in"
    assert turn.image_size == (1920, 1080) and turn.usage.total == 0
    assert "Sign in" in turn.text
    done = step(p, [CallResult(turn.calls[0].id, ok=True)])
    assert actions(done) == [Done(answer=None)]
    assert engine.calls == 1  # the Done turn needs no OCR


def test_one_intent_per_turn_each_on_a_fresh_screen():
    p, engine = provider('click "Sign in" then type "hello@example.com" into "Email" then press enter')
    first = step(p)
    assert [type(a) for a in actions(first)] == [Click]
    second = step(p, [CallResult(first.calls[0].id, ok=True)])
    click, typed = actions(second)
    assert isinstance(click, Click) and typed == Type(text="hello@example.com")
    assert (click.x, click.y) == (round(PAGE[4].box.x1 + 2 * PAGE[4].box.height), round(PAGE[4].box.cy))
    assert "offset-right" in second.text and "hello@example.com" not in second.text
    third = step(p, [CallResult(second.calls[0].id, ok=True)])
    assert actions(third) == [Key(keys=["enter"])]
    assert actions(step(p)) == [Done(answer=None)]
    assert engine.calls == 2  # one OCR for each grounded intent, none for press or done
    assert len({first.calls[0].id, second.calls[0].id, third.calls[0].id}) == 3


def test_the_same_frame_is_read_once():
    p, engine = provider("read the screen then click Cancel")
    shot = frame()
    turn = step(p, frame_=shot)
    assert isinstance(actions(turn)[0], Click) and engine.calls == 1
    assert actions(step(p, frame_=shot)) == [Done(answer=read_text(PAGE))]
    assert engine.calls == 1


def test_read_the_screen_answers_with_the_text():
    p, _ = provider("what does the screen say?")
    turn = step(p)
    (done,) = actions(turn)
    assert isinstance(done, Done) and done.answer == read_text(PAGE)
    assert "alpha bravo charlie delta" in done.answer and turn.calls[0].name == "read"


def test_press_open_scroll_need_no_ocr():
    p, engine = provider("press ctrl+a, open example.com, scroll down, scroll up 2, type hi")
    assert actions(step(p)) == [Key(keys=["ctrl+a"])]
    assert actions(step(p)) == [Key(keys=["ctrl+l"]), Type(text="example.com"), Key(keys=["enter"])]
    assert actions(step(p)) == [Scroll(x=960, y=540, direction="down", amount=5)]
    assert actions(step(p)) == [Scroll(x=960, y=540, direction="up", amount=2)]
    assert actions(step(p)) == [Type(text="hi")]
    assert isinstance(actions(step(p))[0], Done)
    assert engine.calls == 0


def test_scroll_amount_option():
    p, _ = provider("scroll down", scroll_amount=9)
    assert actions(step(p)) == [Scroll(x=960, y=540, direction="down", amount=9)]


def test_double_and_right_click():
    p, _ = provider("double-click bravo then right-click alpha")
    (dbl,) = actions(step(p))
    assert isinstance(dbl, DoubleClick) and (dbl.x, dbl.y) == PAGE[0].words[1].box.centre
    (right,) = actions(step(p))
    assert right.button == "right" and (right.x, right.y) == PAGE[0].words[0].box.centre


def test_unparseable_instruction_fails_at_once():
    p, engine = provider("make me a sandwich")
    turn = step(p)
    (fail,) = actions(turn)
    assert isinstance(fail, Fail) and "cannot understand 'make me a sandwich'" in fail.reason
    assert "Supported instructions" in fail.reason and turn.calls[0].name == "parse"
    assert p.parse_error and engine.calls == 0


def test_not_found_fails_with_the_visible_text():
    p, _ = provider('click "Nonexistent button"')
    assert isinstance(actions(step(p))[0], Wait)  # one more look first: the page may still be rendering
    turn = step(p)
    (fail,) = actions(turn)
    assert isinstance(fail, Fail)
    assert fail.reason.startswith("could not find 'Nonexistent button' on the screen; visible text includes:")
    assert turn.calls[0].name == "click"


def test_ambiguity_fails():
    twice = [words_line("Save", 100, 100), words_line("Save", 900, 500)]
    p, _ = provider("click Save", twice)
    (fail,) = actions(step(p))
    assert isinstance(fail, Fail) and "found 2 matches for 'Save'" in fail.reason


def test_a_target_missing_after_our_own_action_gets_one_more_look():
    after = [words_line("Loading", 100, 100)]
    loaded = [*after, words_line("Continue", 500, 500)]
    p, engine = provider('click "Sign in" then click Continue', PAGE, after, loaded)
    step(p)
    wait = step(p)
    assert actions(wait) == [Wait(duration_ms=1000)] and "looking again" in wait.text
    (click,) = actions(step(p))
    assert isinstance(click, Click) and (click.x, click.y) == loaded[1].box.centre
    assert engine.calls == 3


def test_a_second_miss_fails():
    p, _ = provider('click "Sign in" then click Continue', PAGE, [words_line("Loading", 100, 100)])
    step(p)
    assert isinstance(actions(step(p))[0], Wait)
    (fail,) = actions(step(p))
    assert isinstance(fail, Fail) and "could not find 'Continue'" in fail.reason


def test_no_second_look_when_disabled():
    p, _ = provider('click "Sign in" then click Continue', retry_wait_ms=0)
    step(p)
    assert isinstance(actions(step(p))[0], Fail)


def test_a_target_missing_from_the_first_screen_gets_one_more_look():
    """A run started on a page still rendering (a client-side app paints after its load)."""
    loaded = [words_line("Continue", 500, 500)]
    p, engine = provider("click Continue", [words_line("Loading", 100, 100)], loaded)
    assert actions(step(p)) == [Wait(duration_ms=1000)]
    (click,) = actions(step(p))
    assert isinstance(click, Click) and (click.x, click.y) == loaded[0].box.centre


def test_a_failed_step_ends_the_run():
    p, _ = provider("press enter then press tab")
    first = step(p)
    (fail,) = actions(step(p, [CallResult(first.calls[0].id, ok=False, error="action_failed: xdotool exited 1")]))
    assert isinstance(fail, Fail) and "xdotool exited 1" in fail.reason


def test_clicks_stay_on_the_screen():
    edge = [Line("Close", Box(1900, 1070, 1930, 1090))]
    p, _ = provider("click Close", edge)
    (click,) = actions(step(p))
    assert (click.x, click.y) == (1915, 1079)
