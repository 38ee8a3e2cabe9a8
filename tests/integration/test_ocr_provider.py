"""The ocr provider on the real desktop: it reads the test page with rapidocr, grounds the
instruction, and the page records where the actions landed. Driven turn by turn, as the loop would:
capture -> provider.turn -> perform each action -> capture again."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop.actions import Click, Type, Wait
from vision.actions import CallResult, Done, Fail
from vision.providers.base import ModelTurn, Observation
from vision.providers.ocr import OcrProvider

pytestmark = pytest.mark.x11

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def ocr(instruction: str) -> OcrProvider:
    return OcrProvider(instruction, model="rapidocr", system="")


def take_turn(provider: OcrProvider, desk, results=()) -> ModelTurn:
    turn = provider.turn(Observation(frame=desk.capture()), list(results))
    assert turn.image_size == (1920, 1080) and turn.usage.total == 0
    assert len(turn.calls) == 1
    return turn


def execute(desk, turn: ModelTurn) -> list[CallResult]:
    for action in turn.calls[0].actions:
        desk.perform(action)
    return [CallResult(turn.calls[0].id, ok=True)]


def run(provider: OcrProvider, desk, max_turns: int = 6) -> tuple[list[ModelTurn], Done | Fail]:
    """Turns until the provider says Done or Fail; every other action is performed on the desktop."""
    turns, results = [], []
    for _ in range(max_turns):
        turn = take_turn(provider, desk, results)
        turns.append(turn)
        last = turn.calls[0].actions[-1]
        if isinstance(last, (Done, Fail)):
            return turns, last
        results = execute(desk, turn)
    raise AssertionError(f"no Done or Fail after {max_turns} turns: {[t.text for t in turns]}")


def test_click_a_button_by_its_label(desk, page, viewport):
    frame = desk.capture()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "ocr-frame.png").write_bytes(frame.png)

    provider = ocr('click "Sign in"')
    turn = provider.turn(Observation(frame=frame), [])
    (click,) = turn.calls[0].actions
    assert isinstance(click, Click) and click.button == "left", turn.text
    assert turn.calls[0].name == "click" and turn.calls[0].raw["target"] == "Sign in"
    # The button sits at CSS (1200, 120) with 26 px text and 10/26 px padding: its box on the display
    # starts at the viewport offset plus that, and is well under 250 x 80 px.
    left, top = viewport[0] + 1200, viewport[1] + 120
    assert left < click.x < left + 250 and top < click.y < top + 80, (click, viewport)

    desk.perform(click)
    event = page.wait_for(lambda e: e["type"] == "click")
    assert event["target"] == "signin"
    assert (event["screenX"], event["screenY"]) == (click.x, click.y)

    done = take_turn(provider, desk, [CallResult(turn.calls[0].id, ok=True)])
    assert done.calls[0].actions == [Done(answer=None)]


def test_type_into_a_field_by_its_label(desk, page):
    text = "hello@example.com"
    turns, end = run(ocr(f'type "{text}" into "Email"'), desk)
    assert isinstance(end, Done), end
    click, typed = turns[0].calls[0].actions
    assert isinstance(click, Click) and typed == Type(text=text)
    assert "box-right" in turns[0].text, turns[0].text  # the field's border was seen, not guessed
    assert page.wait_for(lambda e: e["type"] == "click")["target"] == "email"
    page.wait_for(lambda e: e["type"] == "input" and e["email"] == text)
    assert page.last("input")["email"] == text


def test_read_the_screen(desk, page):
    turns, end = run(ocr("read the screen"), desk)
    assert isinstance(end, Done) and len(turns) == 1
    assert "Sign in" in end.answer and "alpha bravo charlie delta" in end.answer
    assert "second line of text" in end.answer


def test_steps_are_grounded_on_the_fresh_screen(desk, page):
    # The click changes the status text from "ready" to "signed in"; the read happens after it.
    turns, end = run(ocr('click "Sign in", then what does the screen say?'), desk)
    assert isinstance(end, Done) and len(turns) == 2
    assert page.wait_for(lambda e: e["type"] == "click")["target"] == "signin"
    assert "signed in" in end.answer and "ready" not in end.answer.split()


def test_a_missing_target_fails_clearly_and_does_nothing(desk, page):
    provider = ocr('click "Nonexistent button"')
    (wait,) = take_turn(provider, desk).calls[0].actions  # a second look first
    assert isinstance(wait, Wait)
    turn = take_turn(provider, desk)
    (fail,) = turn.calls[0].actions
    assert isinstance(fail, Fail)
    assert fail.reason.startswith("could not find 'Nonexistent button' on the screen; visible text includes:")
    assert "'Sign in'" in fail.reason
    assert not any(e["type"] in ("mousedown", "click", "keydown") for e in page.events)
