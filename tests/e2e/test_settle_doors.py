"""A click whose handler fetches and changes the page 300 ms later is answered with the change,
through every door that acts: REST, MCP, the Anthropic and OpenAI executors and the vision loop
(issue 22). Each door's answer image is compared with the same door's own screenshot taken
once the change has happened, in that door's image size: the answer must already show it.
"""

from __future__ import annotations

import base64
import io
import time

import numpy as np
import pytest
from PIL import Image

from tests.fakes.mcp_client import call, image_of
from tests.fakes.testpage import at
from vision import coords

pytestmark = pytest.mark.x11

SID = "itest"
LATER = (1300, 455)        # #later: its click fetches /slow (300 ms), then changes #status
STATUS = (1210, 365, 1590, 395)  # inside #status, page px
DECLARED = (1280, 720)     # what the vendor executors' model is told the screen is


def _png(data: str) -> Image.Image:
    picture = Image.open(io.BytesIO(base64.b64decode(data.removeprefix("data:image/png;base64,"))))
    picture.load()
    return picture.convert("RGB")


def _crop(picture: Image.Image, viewport) -> np.ndarray:
    """The status text's box, in this picture's own scale."""
    sx, sy = picture.width / 1920, picture.height / 1080
    x0, y0 = at(viewport, *STATUS[:2])
    x1, y1 = at(viewport, *STATUS[2:])
    return np.asarray(picture.crop((round(x0 * sx), round(y0 * sy), round(x1 * sx), round(y1 * sy))))


def _rest(api, x, y):
    answer = api.post(f"/api/v1/sessions/{SID}/desktop/click?screenshot=true", json={"x": x, "y": y}).json()
    return _png(answer["screenshot"]), answer["settled_by"]


def _rest_shot(api):
    picture = Image.open(io.BytesIO(api.get(f"/api/v1/sessions/{SID}/desktop/screenshot").content))
    picture.load()
    return picture.convert("RGB")


def _anthropic(api, x, y):
    point = list(coords.pixels(*DECLARED).from_display(x, y))
    answer = api.post(f"/api/v1/sessions/{SID}/computer/anthropic",
                      json={"tool_version": "computer_20251124", "display_width_px": DECLARED[0],
                            "display_height_px": DECLARED[1], "input": {"action": "left_click", "coordinate": point}})
    assert answer.status_code == 200, answer.text
    return _png(answer.json()["content"][-1]["source"]["data"]), None


def _anthropic_shot(api):
    answer = api.post(f"/api/v1/sessions/{SID}/computer/anthropic",
                      json={"tool_version": "computer_20251124", "display_width_px": DECLARED[0],
                            "display_height_px": DECLARED[1], "input": {"action": "screenshot"}})
    return _png(answer.json()["content"][-1]["source"]["data"])


def _openai(api, x, y):
    px, py = coords.pixels(*DECLARED).from_display(x, y)
    answer = api.post(f"/api/v1/sessions/{SID}/computer/openai",
                      json={"display_width": DECLARED[0], "display_height": DECLARED[1],
                            "action": {"type": "click", "x": px, "y": py, "button": "left"}})
    assert answer.status_code == 200, answer.text
    return _png(answer.json()["output"]["image_url"]), None


def _openai_shot(api):
    answer = api.post(f"/api/v1/sessions/{SID}/computer/openai",
                      json={"display_width": DECLARED[0], "display_height": DECLARED[1],
                            "action": {"type": "screenshot"}})
    return _png(answer.json()["output"]["image_url"])


@pytest.mark.parametrize("door", ["rest", "mcp", "anthropic", "openai"])
def test_a_late_change_is_in_the_answer_of_every_door(door, vision_api, server, page, viewport, desk):
    act, shoot = {
        "rest": (_rest, _rest_shot),
        "mcp": (lambda api, x, y: (image_of(call(server, "desktop_click", {"x": x, "y": y, "session": SID}))
                                   .convert("RGB"), None),
                lambda api: image_of(call(server, "desktop_screenshot", {"session": SID})).convert("RGB")),
        "anthropic": (_anthropic, _anthropic_shot),
        "openai": (_openai, _openai_shot),
    }[door]
    x, y = at(viewport, *LATER)
    vision_api.post(f"/api/v1/sessions/{SID}/desktop/move", json={"x": x, "y": y})  # no hover repaint at the click
    for _ in range(3):  # three clicks in a row, each answered with its own change
        before = _crop(shoot(vision_api), viewport)
        page.clear()
        shown, settled_by = act(vision_api, x, y)
        page.wait_for(lambda e: e.get("type") == "changed-later")
        time.sleep(0.2)
        after = _crop(shoot(vision_api), viewport)
        assert not np.array_equal(before, after), "the click changed nothing on the page"
        assert np.array_equal(_crop(shown, viewport), after), f"{door}: answered before the change showed"
        if settled_by is not None:
            assert settled_by == "network"


def test_a_late_change_is_in_the_vision_step_that_made_it(services, page, viewport, desk):
    """The loop's step waits for the request its click started: its trace says so."""
    from vision.models import ActRequest

    x, y = at(viewport, *LATER)
    page.clear()
    script = [{"action": "click", "x": x, "y": y}, {"action": "click", "x": x, "y": y}, {"action": "done"}]
    steps = []
    result = services.act(SID, ActRequest(instruction="click the late one", model="scripted", script=script,
                                          max_steps=len(script)), steps.append)
    assert result.status == "done", result.error
    clicks = [step for step in steps if step.settled_by]
    assert [step.settled_by for step in clicks] == [["network"], ["network"]]
