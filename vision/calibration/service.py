"""``CalibrationService``: how precisely a model clicks on this display, measured.

The page layer shows numbered targets spread over the whole screen (desktop.browser.targets: full
screen, in a tab of its own). For each target, one vision run asks the model to click it: the same
provider a vision run uses, the same screenshot scaling and coordinate conversion, the same
executor. Where the press landed is read off the page (the browser's own event, display pixels),
and the answer gives each target's error, the mean and the worst, with the model's raw answer. A
run ends as soon as the model's click has been performed (no turn spent on saying done); a model
that has not clicked after ``max_turns`` turns missed that target.
"""

from __future__ import annotations

import io
import time
from typing import Any

import numpy as np
from PIL import Image
from pydantic import ValidationError

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Click, DoubleClick, Drag, MouseDown, TripleClick
from desktop.errors import describe_validation
from vision.actions import CallResult, parse_action
from vision.calibration.layout import distance, layout, summary
from vision.calibration.models import CalibrateRequest, CalibrationResult, ModelCall, Point, TargetResult
from vision.config import create_provider
from vision.errors import InvalidRequest, ModelUnavailable
from vision.models import ActRequest
from vision.providers.base import ModelCallError, ModelTurn, Observation, Provider

INSTRUCTION = ("Click-accuracy test. The screen shows numbered circles. Click the exact centre of the circle "
               "numbered {number}, once, with the left mouse button. Do nothing else.")


# Entering full screen, Chromium shows "To exit full screen, press and hold Esc" over the top middle of
# the page for about 4 s (4.7 s until it has faded, measured): the model's first screenshot must not
# carry it. The band it covers, display pixels (x0, y0, x1, y1), and how long to wait at most.
BUBBLE_BAND = (560, 0, 1360, 140)
BUBBLE_WAIT_S = 10.0
BUBBLE_SHOWS_S = 2.0  # how long after going full screen the bubble may take to show


def same_band(screen: Image.Image, page: Image.Image, band: tuple[int, int, int, int] = BUBBLE_BAND) -> bool:
    """Whether the display shows the page's own pixels in the band: nothing of the browser's over it
    (pure). A few pixels of difference are allowed: the page's screenshot is rendered apart."""
    a = np.asarray(screen.convert("RGB").crop(band), dtype=np.int16)
    b = np.asarray(page.convert("RGB").crop(band), dtype=np.int16)
    if a.shape != b.shape:
        return False
    return int((np.abs(a - b).max(axis=2) > 48).sum()) <= 20


def until_bubble_gone(pages: Any, session: Any) -> None:
    """Wait (at most BUBBLE_WAIT_S) until the display shows the calibration page's own pixels where
    Chromium's full-screen bubble was: the page's screenshot (rendered apart) against the display.
    The bubble comes a moment after the window goes full screen and fades out: a clean band is
    believed once it holds still and the bubble has been seen, or BUBBLE_SHOWS_S passed without it."""
    page = Image.open(io.BytesIO(pages.screenshot(session.id)))
    start = time.monotonic()
    seen, before = False, None
    while time.monotonic() - start < BUBBLE_WAIT_S:
        screen = session.capture().image
        band = np.asarray(screen.convert("RGB").crop(BUBBLE_BAND))
        # Still, too: a bubble fading out is faint enough to pass for the page a moment (CI saw one).
        still = before is not None and np.array_equal(band, before)
        if not same_band(screen, page):
            seen = True
        elif still and (seen or time.monotonic() - start >= BUBBLE_SHOWS_S):
            return
        before = band
        time.sleep(0.2)


def _press(action: Any) -> tuple[int, int] | None:
    """Where an action presses a mouse button, display pixels, or None."""
    if isinstance(action, (Click, DoubleClick, TripleClick, MouseDown)) and action.x is not None \
            and action.y is not None:  # x and y come together (or neither: where the pointer is)
        return action.x, action.y
    if isinstance(action, Drag):
        return action.path[0].x, action.path[0].y
    return None


class UntilClick(Provider):
    """The model's own provider, until it has clicked: then the run is done without another model
    turn. Keeps what the model answered (its raw calls) and where its first press was sent."""

    def __init__(self, inner: Provider):
        super().__init__(inner.instruction, model=inner.model, system=inner.system)
        self.inner = inner
        self.name = inner.name
        self.clicked = False
        self.aimed: tuple[int, int] | None = None
        self.answers: list[list[ModelCall]] = []
        self.texts: list[str] = []
        self.image_size: tuple[int, int] | None = None

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        if self.clicked:
            return ModelTurn(done=True, answer="clicked")
        turn = self.inner.turn(observation, results, note)
        self.image_size = self.image_size or turn.image_size
        self.answers.append([ModelCall(name=c.name, input=c.raw, error=c.error) for c in turn.calls])
        if turn.text:
            self.texts.append(turn.text)
        for call in turn.calls:
            if call.error:
                continue
            for action in call.actions:
                if (point := _press(action)) is not None:
                    self.aimed = self.aimed or point
                    self.clicked = True
        return turn

    def acknowledge(self, safety_check_ids: list[str]) -> None:
        self.inner.acknowledge(safety_check_ids)


class CalibrationService:
    """Calibration over one application (vision.app.service.Glassdesk: its desktops, config and runs)."""

    def __init__(self, glassdesk: Any):
        self.glassdesk = glassdesk

    def calibrate(self, session_id: str | None, request: CalibrateRequest) -> CalibrationResult:
        gd = self.glassdesk
        name = gd.config.resolve(request.model)
        scripted = name.split("/", 1)[0] == "scripted"
        problems = []
        if scripted and (not request.script or len(request.script) != request.targets):
            problems.append(f"script: the scripted model needs one action per target ({request.targets}), got "
                            f"{len(request.script or [])}")
        if not scripted and request.script is not None:
            problems.append(f"script: only for the model 'scripted', not {name!r}")
        for index, entry in enumerate(request.script or []):  # every bad entry at once
            try:
                parse_action(entry)
            except ValidationError as exc:
                problems.append(f"script[{index}]: {describe_validation(exc)}")
        if problems:
            raise InvalidRequest("; ".join(problems))
        points = layout(request.targets)
        # Every provider first: a bad script or a missing API key is refused before the screen changes.
        providers = []
        for number in range(1, len(points) + 1):
            instruction = INSTRUCTION.format(number=number)
            script = [request.script[number - 1]] if request.script is not None else None  # scripted (checked above)
            try:
                inner = create_provider(name, instruction, gd.config, script=script)
            except ModelCallError as exc:
                raise ModelUnavailable(str(exc)) from exc
            providers.append(UntilClick(inner))
        session = gd.desktops.session(session_id)
        pages = gd.desktops.pages
        pages.show_targets(session.id, [list(p) for p in points])
        results: list[TargetResult] = []
        try:
            until_bubble_gone(pages, session)
            for number, (point, provider) in enumerate(zip(points, providers), 1):
                results.append(self._one(session.id, number, point, provider, request, name))
        finally:
            pages.hide_targets(session.id)
        errors = [(r.dx, r.dy) for r in results if r.dx is not None and r.dy is not None]
        size = next((p.image_size for p in providers if p.image_size), None)
        return CalibrationResult(
            model=name, display=Point(x=SCREEN_WIDTH, y=SCREEN_HEIGHT),
            model_image=Point(x=size[0], y=size[1]) if size else None, targets=results,
            clicked=len(errors), missed=len(results) - len(errors), **summary(errors))

    def _one(self, session_id: str, number: int, point: tuple[int, int], provider: UntilClick,
             request: CalibrateRequest, name: str) -> TargetResult:
        gd = self.glassdesk
        pages = gd.desktops.pages
        since = len(pages.target_events(session_id))
        act = ActRequest(instruction=provider.instruction, model=name, max_steps=request.max_turns + 1,
                         budget_seconds=request.budget_seconds)
        run = gd.act(session_id, act, provider=provider)
        if run.status in ("needs_confirmation", "paused", "running"):
            gd.cancel(session_id)  # a calibration run is never continued: end it, so its trace is closed
        presses = [e for e in pages.target_events(session_id, since) if e["kind"] == "down"]
        landed = (presses[0]["x"], presses[0]["y"]) if presses else None
        offset = (landed[0] - point[0], landed[1] - point[1]) if landed else None
        error = (run.error or {}).get("message")
        if landed is None and error is None:
            error = ("the model did not click" if not provider.clicked
                     else "the click was sent but no press reached the page")
        return TargetResult(
            number=number, target=Point(x=point[0], y=point[1]),
            aimed=Point(x=provider.aimed[0], y=provider.aimed[1]) if provider.aimed else None,
            landed=Point(x=landed[0], y=landed[1]) if landed else None,
            dx=offset[0] if offset else None, dy=offset[1] if offset else None,
            error_px=distance(*offset) if offset else None, status="clicked" if landed else "missed",
            run_status=run.status, trace_id=run.trace_id, turns=len(provider.answers), answer=provider.answers,
            text="\n".join(provider.texts), error=error)
