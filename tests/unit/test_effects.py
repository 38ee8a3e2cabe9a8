"""The texts a step made appear (vision/perception/effects.py): which are kept, which an export proposes, and
the assertions and heal effect an export writes for them. Pure: no X, no browser."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import yaml

from desktop.models import ElementAt, Target
from vision.cli.qa import REQUESTS
from vision.evidence.export import export_qa_run, export_trace
from vision.perception.effects import MAX_CHARS, appeared, changed_box, ocr_appeared, propose, specific
from vision.trace.records import StepRecord, Trace, TraceMeta

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_only_new_short_unique_texts_without_secrets_are_kept():
    before = ["Sign in", "Your cart", "Delete", "Delete"]
    after = ["Sign in", "Saved  your\nchanges", "Delete", "Delete", "Delete", "x" * (MAX_CHARS + 1), "Hi open sesame",
             "ok", "Item added", "Item added", "Welcome"]
    # "Delete" was there; two "Item added" name no one element; the long one is a paragraph; the
    # secret's is dropped whole (never "[REDACTED]"); whitespace is normalised.
    assert appeared(before, after, ["open sesame"]) == ["Saved your changes", "ok", "Welcome"]
    assert appeared([], ["A1", "A1"], unique=False) == ["A1"]
    assert len(appeared([], [f"text {i}" for i in range(50)])) == 8


def test_a_tester_asserts_words_not_clocks_counts_or_ids():
    assert specific("Saved")
    assert specific("3 items left")
    for noise in ("12:41", "Updated 12:41:07", "2026-11-27", "42", "-17.5 %", "1234567", "deadbeef-0042", "Ok"[0]):
        assert not specific(noise), noise
    # Messages first, then single words, in the page's order among equals; at most three.
    assert propose(["Close", "12:00", "Profile saved", "OK", "Your changes are live", "Undo"]) == \
        ["Profile saved", "Your changes are live", "Close"]
    assert propose(["Saved", "Saved", "42"]) == ["Saved"]
    assert propose(["xmessag ^ _ □ ×", "okay", "Hello from the other side"])[0] == "Hello from the other side"


def test_ocr_reads_only_what_changed_and_only_new_lines():
    before = np.zeros((100, 200, 3), np.uint8)
    after = before.copy()
    after[40:50, 60:90] = 255
    assert changed_box(before, before) is None
    assert changed_box(before, after) == (52, 32, 98, 58)
    crops = []

    def read(rgb):
        crops.append(rgb.shape)
        return ["Title", "xmessage"] if len(crops) % 2 else ["Title", "Hello there", "xmessag", "okay"]

    # A line read again a letter short is the same line, not a new one.
    assert ocr_appeared(before, after, read) == ["Hello there", "okay"]
    assert crops == [(26, 46, 3), (26, 46, 3)]  # the changed region, twice: never the whole screen
    assert ocr_appeared(before, after, read, max_area=100) == []  # too large a change: not read


def _trace(appeared_texts, on, url_after="http://127.0.0.1:8000/form") -> Trace:
    button = ElementAt(x=200, y=300, css_x=200, css_y=213, tag="button", role="button", name="Save",
                       box={"x": 180, "y": 290, "width": 40, "height": 20},
                       locators=[Target(role="button", name="Save", exact=True)], url="http://127.0.0.1:8000/form")
    steps = [StepRecord(index=1, started_at=NOW, finished_at=NOW, actions=[{"action": "click", "x": 200, "y": 300}],
                        elements=[button], url=url_after, appeared=appeared_texts, appeared_on=on),
             StepRecord(index=2, started_at=NOW, finished_at=NOW, actions=[{"action": "click", "x": 990, "y": 127}],
                        elements=[None], spots=[{"text": "START", "text_box": [960, 120, 1020, 134]}],
                        appeared=["Game over", "00:12"], appeared_on="screen")]
    return Trace(meta=TraceMeta(trace_id="20260101T000000Z-abcd1234", instruction="save the form", model="scripted",
                                started_at=NOW, status="done"), steps=steps)


def test_texts_that_appeared_are_proposed_as_assertions_and_as_the_heal_effect():
    trace = _trace(["Profile saved", "12:41", "Undo"], "page")
    suite = yaml.safe_load(export_trace(trace, "yaml"))
    steps = suite["tests"][0]["verify_user_flow"]["steps"]
    assert steps[0]["recorded"]["appeared"] == ["Profile saved", "Undo"]
    assert steps[0]["recorded"]["appeared_on"] == "page"  # where a healed replay looks for them
    assert steps[1:3] == [{"action": "assert", "text": "Profile saved", "exact": True,
                           "assertion": {"type": "visible"}},
                          {"action": "assert", "text": "Undo", "exact": True, "assertion": {"type": "visible"}}]
    # The native window's: read by OCR, asserted by OCR, and the pixel step's effect.
    assert steps[3]["recorded"]["appeared"] == ["Game over"]
    assert steps[3]["recorded"]["appeared_on"] == "screen"
    assert steps[4] == {"action": "assert", "assertion": {"type": "screen_text_contains", "expected": "Game over"}}
    assert len(steps) == 5  # the clock is not asserted
    REQUESTS["verify_user_flow"].model_validate(suite["tests"][0]["verify_user_flow"])  # it replays as written
    ts = export_trace(trace, "playwright-ts")
    py = export_trace(trace, "playwright-py")
    assert 'await expect(page.getByText("Profile saved", { exact: true })).toBeVisible();' in ts
    assert "expect(page.get_by_text('Profile saved', exact=True)).to_be_visible()" in py
    assert "not exported: assertion screen_text_contains" in ts  # Playwright has no OCR: said so


def test_a_qa_runs_steps_carry_what_they_made_appear_as_their_effect():
    request = {"start_url": "http://127.0.0.1:8000/form", "steps": [{"action": "click", "role": "button",
                                                                     "name": "Save"}]}
    element = {"x": 200, "y": 300, "css_x": 200, "css_y": 213, "box": {"x": 180, "y": 290, "width": 40, "height": 20},
               "tag": "button", "role": "button", "name": "Save",
               "locators": [{"role": "button", "name": "Save"}, {"selector": "#save"}]}
    records = [{"kind": "started", "test_run_id": "r1", "verb": "verify_user_flow", "request": request},
               {"kind": "case", "steps": [{"index": 1, "detail": {"element": element,
                                                                  "appeared": ["42", "Profile saved"]}}]}]
    suite = yaml.safe_load(export_qa_run(records, "yaml"))
    assert suite["tests"][0]["verify_user_flow"]["steps"][0]["recorded"]["appeared"] == ["Profile saved"]
    assert suite["tests"][0]["verify_user_flow"]["steps"][0]["recorded"]["appeared_on"] == "page"



def test_a_step_that_loaded_another_page_proposes_its_url_not_its_texts():
    trace = _trace(["Welcome back"], "page", url_after="http://127.0.0.1:8000/home")
    steps = yaml.safe_load(export_trace(trace, "yaml"))["tests"][0]["verify_user_flow"]["steps"]
    assert [s.get("assertion", {}).get("type") for s in steps[:2]] == [None, "url"]
    assert "appeared" not in steps[0]["recorded"] and "Welcome back" not in str(steps)
    trace = _trace(["Welcome back"], "page")
    trace.steps[0].settled_by = ["navigation"]  # a page loaded at the same address
    assert "Welcome back" not in export_trace(trace, "yaml")


def test_a_runs_template_images_are_kept_as_files_and_come_back_for_an_export(tmp_path):
    import base64
    import io

    from PIL import Image

    from vision.evidence.qa_runs import QaRunStore, join_templates, split_templates

    out = io.BytesIO()
    Image.new("RGB", (12, 10), (200, 30, 30)).save(out, "PNG")
    png = base64.b64encode(out.getvalue()).decode()
    request = {"steps": [{"action": "click", "image": png},
                         {"action": "click", "x": 5, "y": 6, "recorded": {"x": 5, "y": 6, "image": png, "text": "GO"}},
                         {"action": "fill", "label": "Name", "value": "iVBORw0KGgo-typed, not an image key"}]}
    stripped, files = split_templates(request)
    assert len(files) == 1 and stripped["steps"][0]["image"] == "artifact:" + next(iter(files))
    assert stripped["steps"][1]["recorded"]["image"] == stripped["steps"][0]["image"]
    assert stripped["steps"][2] == request["steps"][2]
    # Through a real store: the request as recorded holds references; the export's records the images.
    store = QaRunStore(tmp_path)
    run = store.create("verify_user_flow", "t", session_id="s", request=request)
    run.finish("passed")
    started = store.records(run.run_id)[0]
    assert png not in str(started) and started["request"]["steps"][0]["image"].startswith("artifact:template-")
    back = store.records_with_templates(run.run_id)
    assert back[0]["request"] == request
    assert store.verify(run.run_id).ok, store.verify(run.run_id)
    # A file that is not the one recorded is never read back as the template.
    assert join_templates(store.records(run.run_id), lambda name: b"other")[0]["request"]["steps"][0]["image"] \
        == started["request"]["steps"][0]["image"]
