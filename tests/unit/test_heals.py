"""Heals (issue 25): what a pixel with no DOM element records (vision/perception/spot.py), how such a
step and a person's take-over export (vision/evidence/export.py), a heal's images and its writing back into
a suite (vision/qa/heals.py). Pure: no X, no browser, no OCR engine (a stand-in reader)."""

from __future__ import annotations

import base64
import io
from datetime import UTC, datetime

import numpy as np
import pytest
import yaml
from PIL import Image

from vision.cli.qa import REQUESTS
from vision.evidence.export import OPERATOR_NOTE, export_trace
from vision.models.qa import Heal, Recorded
from vision.perception.ocr import Box, Line
from vision.perception.spot import TEMPLATE_W, spot_at, template_at
from vision.qa.heals import HEALED_COLOUR, RECORDED_COLOUR, heal_images, heal_line, healed_suite
from vision.trace.records import Spot, StepRecord, Trace, TraceMeta

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def png_of(rgb: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, "PNG")
    return out.getvalue()


def screen() -> np.ndarray:
    """A grey 400x300 screen with a dark 'button' at (100..180, 100..130) and a stripe pattern."""
    rgb = np.full((300, 400, 3), 200, np.uint8)
    rgb[100:130, 100:180] = (40, 60, 200)
    rgb[110:120, 110:170] = (250, 250, 250)
    return rgb


# ------------------------------------------------------------------------------------ the spot


def test_a_spot_holds_the_text_at_the_pixel_and_a_template_centred_on_it():
    rgb = screen()
    seen = []

    def reader(bgr, keep):  # the region read: OCR answers in its own pixels
        seen.append(bgr.shape)
        assert (keep.x0, keep.y0, keep.x1, keep.y1) == (80, -4, 201, 69)  # the template's region, and a margin
        return [Line("Save", Box(95, 10, 135, 25)), Line("Cancel", Box(300, 10, 350, 25))]

    spot = spot_at(rgb, 140, 115, reader=reader)
    # the region was read around the pixel (its top-left clamped to the screen: (0, 83))
    assert seen == [(64, 400, 3)]
    assert spot["text"] == "Save" and spot["text_box"] == [95, 93, 135, 108]
    template = np.asarray(Image.open(io.BytesIO(base64.b64decode(spot["image"]))).convert("RGB"))
    assert template.shape == (49, TEMPLATE_W + 1, 3)  # centred: the pixel is its middle one
    assert (template[24, 48] == rgb[115, 140]).all() and (template == rgb[91:140, 92:189]).all()


def test_a_spot_never_pictures_a_secret_and_a_flat_place_has_no_template():
    rgb = screen()
    shown = [Line("hunter2", Box(95, 10, 135, 25))]
    spot = spot_at(rgb, 140, 115, secrets=["hunter2"], reader=lambda bgr, keep: shown)
    assert "image" not in spot  # the text (redacted by the trace writer) stays; no picture of the secret
    assert template_at(np.full((300, 400, 3), 7, np.uint8), 200, 200) is None
    # an icon OCR reads as one character: no text to find it by, its template only
    icon = spot_at(rgb, 140, 115, reader=lambda bgr, keep: [Line("0", Box(130, 20, 150, 40))])
    assert "text" not in icon and icon["image"]
    assert spot_at(np.full((300, 400, 3), 7, np.uint8), 200, 200, reader=lambda bgr, keep: []) is None


# ------------------------------------------------------------------------------------ export


def trace_with(steps) -> Trace:
    return Trace(meta=TraceMeta(trace_id="20260101T000000Z-abcd1234", instruction="save the file", model="scripted",
                                started_at=NOW, status="done"), steps=steps)


def test_a_native_click_exports_with_its_text_and_template_and_replays_from_them():
    image = base64.b64encode(png_of(screen()[91:140, 92:189])).decode()
    native = StepRecord(index=1, started_at=NOW, finished_at=NOW, text="click Save",
                        actions=[{"action": "click", "x": 140, "y": 115}], elements=[None],
                        spots=[Spot(text="Save", text_box=[95, 93, 135, 108], image=image)])
    text = export_trace(trace_with([native]), "yaml")
    step = yaml.safe_load(text)["tests"][0]["verify_user_flow"]["steps"][0]
    assert step["action"] == "click" and (step["x"], step["y"]) == (140, 115)
    assert step["recorded"] == {"x": 140, "y": 115, "text": "Save", "text_box": [95, 93, 135, 108], "image": image,
                                "instruction": "save the file (this step: click Save)"}
    REQUESTS["verify_user_flow"].model_validate(yaml.safe_load(text)["tests"][0]["verify_user_flow"])
    assert "OCR read 'Save' there; a template image of it is recorded" in text
    ts = export_trace(trace_with([native]), "playwright-ts")
    assert "await page.mouse.click(140, 115);" in ts and "// no page element: the recorded display pixel" in ts


def test_an_operators_take_over_exports_as_steps_a_person_did():
    from desktop.models import ElementAt, Target

    agent = StepRecord(index=1, started_at=NOW, finished_at=NOW, text="click the field",
                       actions=[{"action": "click", "x": 300, "y": 200}],
                       elements=[ElementAt(x=300, y=200, css_x=300, css_y=113, tag="input", role="textbox",
                                           name="Email", box={"x": 290, "y": 190, "width": 20, "height": 20},
                                           locators=[Target(role="textbox", name="Email", exact=True)])])
    person = StepRecord(index=2, started_at=NOW, finished_at=NOW, text="the operator: click at (640, 400)",
                        actions=[{"action": "click", "x": 640, "y": 400}], by="operator")
    typed = StepRecord(index=3, started_at=NOW, finished_at=NOW, text="the operator: type 3 characters",
                       actions=[{"action": "type", "text": "abc"}], by="operator")
    trace = trace_with([agent, person, typed])
    text = export_trace(trace, "yaml")
    steps = yaml.safe_load(text)["tests"][0]["verify_user_flow"]["steps"]
    assert steps[1] == {"action": "click", "x": 640, "y": 400}
    assert steps[2]["action"] == "act" and steps[2]["script"] == [{"action": "type", "text": "abc"}]
    assert text.count(f"# {OPERATOR_NOTE}") == 2  # each of the person's steps says so; the agent's does not
    head = text.split("- {action: click, x: 640")[0]
    assert head.rstrip().endswith("# no page element: the recorded display pixel")
    for fmt, mark in (("playwright-ts", "// "), ("playwright-py", "# ")):
        spec = export_trace(trace, fmt)
        assert spec.count(mark + OPERATOR_NOTE) == 2


# ------------------------------------------------------------------------------------ images, reports


def test_a_heals_images_show_the_recorded_box_and_the_healed_one():
    before, after = png_of(screen()), png_of(np.full((300, 400, 3), 200, np.uint8))
    heal = {"recorded_box": {"x": 100, "y": 100, "width": 80, "height": 30},
            "box": {"x": 250, "y": 200, "width": 60, "height": 20}}
    for drawn in heal_images(before, after, heal):
        rgb = np.asarray(Image.open(io.BytesIO(drawn)).convert("RGB"))
        assert tuple(rgb[115, 98]) == RECORDED_COLOUR   # the recorded box's left edge
        assert tuple(rgb[210, 248]) == HEALED_COLOUR    # the healed box's
        assert tuple(rgb[115, 140]) == tuple(screen()[115, 140]) or tuple(rgb[115, 140]) == (200, 200, 200)
    # no recorded box (an older export): a box round the recorded pixel
    drawn, _ = heal_images(before, after, {"recorded_at": [50, 50], "point": [300, 250]})
    rgb = np.asarray(Image.open(io.BytesIO(drawn)).convert("RGB"))
    assert tuple(rgb[50, 36]) == RECORDED_COLOUR and tuple(rgb[250, 286]) == HEALED_COLOUR


def test_a_heal_by_model_says_so_in_its_line():
    heal = Heal(step=2, failed="role button named 'Go' (exact)", by="model", matched="(10, 20): button 'Start'",
                model="scripted", effect="the URL became http://x/done")
    line = heal_line(2, heal.model_dump())
    assert line == ("healed step 2: role button named 'Go' (exact) no longer matched; healed by model: (10, 20): "
                    "button 'Start' (healed by model scripted); effect: the URL became http://x/done")


# ------------------------------------------------------------------------------------ writing back


SUITE = """\
# Exported by glassdesk from trace t.
name: signup
tests:
  - name: sign up
    verify_user_flow:
      start_url: "http://127.0.0.1:8000/signup"
      steps:
        - {action: fill, role: textbox, name: Email, exact: true, value: ada,
           recorded: {role: textbox, name: Email, locators: [{selector: '#email'}], x: 170, y: 232}}
        - {action: fill, selector: '#pw', value: '{{pw}}'}
        - {action: click, x: 140, y: 115, recorded: {x: 140, y: 115, text: Save, text_box: [120, 108, 160, 122]}}
  - name: other
    verify_page_loads: {url: "http://127.0.0.1:8000/"}
"""


def test_a_healed_suite_has_the_healed_targets_in_place_and_lists_them():
    heals = {0: [Heal(step=1, failed="role textbox named 'Email' (exact)", by="locator", matched="selector '#email'",
                      target={"selector": "#email"}).model_dump(),
                 Heal(step=3, failed="(140, 115)", by="ocr", matched="text 'Save' at (340, 215)",
                      target={"x": 340, "y": 215}).model_dump()]}
    text, listed = healed_suite(SUITE, heals, "signup.yaml")
    data = yaml.safe_load(text)
    steps = data["tests"][0]["verify_user_flow"]["steps"]
    assert steps[0] == {"action": "fill", "selector": "#email", "value": "ada",
                        "recorded": {"role": "textbox", "name": "Email", "locators": [{"selector": "#email"}],
                                     "x": 170, "y": 232}}
    assert steps[1] == {"action": "fill", "selector": "#pw", "value": "{{pw}}"}  # the placeholder, as written
    assert steps[2]["x"] == 340 and steps[2]["recorded"]["text_box"] == [320, 208, 360, 222]
    assert data["tests"][1] == {"name": "other", "verify_page_loads": {"url": "http://127.0.0.1:8000/"}}
    assert len(listed) == 2 and text.startswith("# Healed by glassdesk qa --write-healed from signup.yaml: 2 step(s)")
    assert "#   test 'sign up': healed step 1: role textbox named 'Email' (exact) no longer matched; healed by " \
           "locator: selector '#email'" in text
    REQUESTS["verify_user_flow"].model_validate(data["tests"][0]["verify_user_flow"])


def test_recorded_refuses_an_image_that_is_not_a_png():
    with pytest.raises(ValueError, match="not a PNG"):
        Recorded(image=base64.b64encode(b"GIF89a....").decode())


def test_a_qa_runs_assertion_exports_without_the_visual_defaults_its_record_keeps():
    """A run keeps its request whole (every default); a count assertion exported with the visual
    limits' defaults beside it would be refused by the suite that replays it."""
    from vision.evidence.export import export_qa_run
    from vision.models.qa import VerifyUserFlowRequest

    request = VerifyUserFlowRequest.model_validate({"start_url": "http://127.0.0.1:8000/", "steps": [
        {"action": "assert", "selector": "li.completed", "assertion": {"type": "count", "count": 1}}]})
    records = [{"kind": "started", "test_run_id": "r1", "verb": "verify_user_flow",
                "request": request.model_dump(mode="json", by_alias=True)}]
    flow = yaml.safe_load(export_qa_run(records, "yaml"))["tests"][0]["verify_user_flow"]
    assert flow["steps"][0]["assertion"] == {"type": "count", "count": 1}
    REQUESTS["verify_user_flow"].model_validate(flow)
