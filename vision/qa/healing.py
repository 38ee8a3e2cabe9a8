"""A flow step's heal (verify_user_flow, vision.qa.flow): a step replaying a recorded run whose own
locator finds nothing, or whose recorded pixel no longer shows what was recorded there, is
re-targeted from what was recorded of its target (its other locators, a similar accessible name,
its text by OCR, its template image, its pixel, or heal_with's model), only onto the same kind of
element, and its recorded effect is checked after it, so that a heal never hides a regression.
The images of each heal are vision.qa.heals'."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from desktop.errors import ElementNotFound, GlassdeskError, InvalidRequest
from desktop.models import LOCATOR_FIELDS, Target
from vision.evidence.qa_runs import RunWriter
from vision.models.qa import FlowStep, Heal, VerifyUserFlowRequest, retarget_test_ids, template_png
from vision.qa.driver import POLL_S, StepFailed, _reason
from vision.qa.native import NativeNotFound


def ms_until(step_deadline: float) -> int:
    """The whole milliseconds left of a step (at least 1): what a call within the step is given."""
    return max(1, int((step_deadline - time.monotonic()) * 1000))


class Healer:
    """The heals of one flow on one session: ``act`` carries out a step, healing it when it can
    (``do`` carries out a step as it is written); each heal goes to ``heals`` with its images."""

    def __init__(self, flows: Any, session_id: str, request: VerifyUserFlowRequest, run: RunWriter,
                 heals: list[Heal], do: Callable[[int, FlowStep, float], dict]):
        self.desktops, self.pages, self.ask = flows.desktops, flows.pages, flows.ask
        self.session_id, self.request, self.run, self.heals, self.do = session_id, request, run, heals, do
        self._asked: dict[str, str] = {}  # a step's heading -> why heal_with's model did not heal it

    def act(self, index: int, step: FlowStep, step_deadline: float) -> dict:
        """Carry out one step; what it did (for the record). A step with a recorded element (an
        exported run) whose own locator finds nothing is healed from the record (``heal``), unless
        the flow is strict; a pixel step with what was recorded there (a native window, a canvas)
        is done at its pixel while that still shows it, else healed (``act_on_screen``)."""
        rec = step.recorded
        if rec is None or step.action not in HEALABLE or not step.target_kinds():
            return self.do(index, step, step_deadline)
        if step.native is not None:
            return self.act_native(index, step, step_deadline)
        if step.x is not None and step.y is not None and (rec.text or rec.image):
            return self.act_on_screen(index, step, step_deadline)
        # The locator gets part of the step's time: the rest is the heal's.
        first = min(step_deadline, time.monotonic() + HEAL_AFTER_S) if not self.request.strict else step_deadline
        try:
            return self.do(index, step, first)
        except ElementNotFound as exc:
            if self.request.strict:
                raise StepFailed(f"{exc.message} (strict: not healed from the recorded element)") from None
            missed = exc.message
        healed = self.heal(step, step_deadline) or self.heal_by_model(step, step_deadline)
        if healed is None:
            raise StepFailed(f"{missed}; not healed: nothing recorded of the element ({rec.role or 'no role'} "
                             f"{rec.name!r}) matches an element of the same role"
                             + self._model_said(step)) from None
        return self.healed(index, step, *healed, step_deadline)

    def act_native(self, index: int, step: FlowStep, step_deadline: float) -> dict:
        """A native control's step with what was recorded at its pixel (an exported run): the control
        found by its program, role and name first, wherever its window is now; where none shows, healed
        by the recorded text (OCR) or image on the screen, or by heal_with's model."""
        first = step_deadline if self.request.strict else min(step_deadline, time.monotonic() + HEAL_AFTER_S)
        try:
            return self.do(index, step, first)
        except NativeNotFound as exc:
            if self.request.strict:
                raise StepFailed(f"{exc} (strict: not healed from what was recorded there)") from None
            missed = str(exc)
        rec = step.recorded
        assert rec is not None
        on_screen = self.find_on_screen(step, self.desktops.screenshot(self.session_id).png) \
            if rec.text or rec.image else None
        healed = on_screen or self.heal_by_model(step, step_deadline)
        if healed is None:
            raise StepFailed(f"{missed}; not healed: {recorded_words(rec)} is nowhere on the screen"
                             + self._model_said(step))
        return self.healed(index, step, *healed, step_deadline)

    def act_on_screen(self, index: int, step: FlowStep, step_deadline: float) -> dict:
        """A pixel step with the text and image recorded at its pixel: done there while the screen
        still shows them there; else re-targeted where the text (OCR) or the image (template) now
        is, or by the model of heal_with. A screen that shows neither anywhere fails the step:
        the recorded pixel alone is not a heal (it is the target that no longer shows)."""
        rec = step.recorded
        assert rec is not None
        png = self.desktops.screenshot(self.session_id).png
        if still_at(png, rec):
            return self.do(index, step, step_deadline)
        what = recorded_words(rec)
        if self.request.strict:
            raise StepFailed(f"{step.describe()}: {what} is no longer at the pixel (strict: not healed)")
        healed = self.find_on_screen(step, png) or self.heal_by_model(step, step_deadline)
        if healed is None:
            raise StepFailed(f"{step.describe()}: {what} is no longer at the pixel, nor anywhere on the screen; "
                             "not healed" + self._model_said(step))
        return self.healed(index, step, *healed, step_deadline)

    def healed(self, index: int, step: FlowStep, retargeted: FlowStep, note: dict, step_deadline: float) -> dict:
        """The step done on its healed target, with its evidence: the screen just before and just
        after, each with the recorded box and the healed one drawn (files of their own; the step's
        screenshots stay as taken), and the recorded effect checked: a healed step whose effect
        does not happen fails, so a heal never hides a regression."""
        from vision.qa.heals import heal_images

        rec = step.recorded
        assert rec is not None
        sid = self.session_id
        before = self.desktops.screenshot(sid).png
        # The recorded texts already showing before the healed action are not its effect.
        # Read where they were recorded; a suite older than appeared_on: by the target (a pixel step
        # with no role is a native window or a canvas, with no DOM to read).
        on_screen = rec.appeared_on == "screen" if rec.appeared_on else step.x is not None and rec.role is None
        shown_before = self._shown(rec.appeared, on_screen, before) if rec.appeared and not rec.url_after else []
        detail = self.do(index, retargeted, step_deadline)
        point = detail.get("point")
        heal = Heal(step=index, failed=step.describe(), **note,
                    point=list(point) if isinstance(point, (list, tuple)) and len(point) == 2 else None,
                    recorded_at=[rec.x, rec.y] if rec.x is not None and rec.y is not None else None,
                    recorded_box=rec.box)
        missed = None
        if rec.url_after:
            missed = self._effect(rec.url_after, step_deadline)
            heal.effect = f"the URL became {rec.url_after}" if missed is None else f"did not happen: {missed}"
        elif rec.appeared:
            wanted = [t for t in rec.appeared if t not in shown_before]
            if wanted:
                seen, missed = self._texts_effect(wanted, on_screen, step_deadline)
                heal.effect = f"{seen!r} appeared" if missed is None else f"did not happen: {missed}"
            else:  # nothing it could make appear is absent: the evidence says so, and claims no effect
                heal.effect = "not checked: every recorded text showed before the healed action"
        after = self.desktops.screenshot(sid).png
        drawn = heal_images(before, after, heal.model_dump())
        for which, image in zip(("before", "after"), drawn, strict=True):
            shot = self.run.artifact(f"step-{index:03d}-heal-{which}", image, kind="heal", step=index,
                                      which=f"heal-{which}")
            setattr(heal, which, shot.name)
        self.heals.append(heal)
        out = {**detail, "healed": heal.model_dump(mode="json", exclude_none=True)}
        if missed is not None:
            raise StepFailed(f"healed by {heal.by} ({heal.matched}), but the recorded effect did not happen: "
                             f"{missed}", detail=out)  # the failed step keeps its heal and images
        return out

    def _effect(self, url: str, step_deadline: float) -> str | None:
        """None once the page's URL is the recorded one (looked at until the step's deadline, at
        most EFFECT_WAIT_S); else what it is."""
        deadline = min(step_deadline, time.monotonic() + EFFECT_WAIT_S)
        while True:
            now = self.pages.state(self.session_id).url or ""
            if now == url:
                return None
            if time.monotonic() >= deadline:
                return f"the URL is {now!r}, not {url!r}"
            time.sleep(POLL_S)

    def _shown(self, texts: list[str], on_screen: bool, png: bytes | None = None) -> list[str]:
        """Which of ``texts`` show now: on the screen by OCR (of ``png`` when given), else in the
        page's text (whitespace and case aside, as screen_text_contains compares)."""
        if on_screen:
            from vision.qa.screen_find import screen_text

            now = squash(screen_text(png if png is not None else self.desktops.screenshot(self.session_id).png))
        else:
            try:
                now = squash(self.pages.content(self.session_id, "text").content)
            except GlassdeskError:  # no page to read (a dialog, the browser not there): nothing shows
                return []
        return [t for t in texts if squash(t) in now]

    def _texts_effect(self, texts: list[str], on_screen: bool, step_deadline: float) -> tuple[str | None, str | None]:
        """(the recorded text that showed, None) once one of ``texts`` shows (looked at until the
        step's deadline, at most EFFECT_WAIT_S); else (None, what is missing)."""
        deadline = min(step_deadline, time.monotonic() + EFFECT_WAIT_S)
        while True:
            shown = self._shown(texts, on_screen)
            if shown:
                return shown[0], None
            if time.monotonic() >= deadline:
                where = "the screen (OCR)" if on_screen else "the page"
                return None, f"{where} does not show {' or '.join(repr(t) for t in texts)}"
            time.sleep(POLL_S)

    def find_on_screen(self, step: FlowStep, png: bytes) -> tuple[FlowStep, dict] | None:
        """The step re-targeted where its recorded text (OCR) or template image now is on the
        screen, the pixel keeping its offset from the text; a text or image found at more than one
        place is no heal. With a role recorded (a page's element), the element there must be of
        that kind, as for every heal."""
        from vision.qa.screen_find import NotOnScreen, find_image_on_screen, find_text_on_screen

        rec = step.recorded
        assert rec is not None
        element_at = getattr(self.desktops, "element_at", None)

        def fits(x: int, y: int) -> bool:
            if rec.role is None:
                return True
            return element_at is not None and same_element_kind(element_at(self.session_id, x, y), rec)

        def moved(x: int, y: int, by: str, matched: str, box: tuple[int, int, int, int]):
            at = step.model_copy(update={**dict.fromkeys(LOCATOR_FIELDS), "exact": False, "image": None,
                                         "native": None, "x": x, "y": y})
            return at, {"by": by, "matched": matched, "target": {"x": x, "y": y},
                        "box": {"x": box[0], "y": box[1], "width": box[2] - box[0], "height": box[3] - box[1]}}

        if rec.text:
            try:
                found = find_text_on_screen(png, rec.text)
            except NotOnScreen:
                found = None
            if found is not None:
                dx, dy = 0, 0
                if rec.text_box and rec.x is not None and rec.y is not None:
                    dx = rec.x - (rec.text_box[0] + rec.text_box[2]) // 2
                    dy = rec.y - (rec.text_box[1] + rec.text_box[3]) // 2
                x, y = on_display(found.x + dx, found.y + dy)
                if fits(x, y):
                    return moved(x, y, "ocr", f"text {rec.text!r} at ({x}, {y})", found.box)
        if rec.image:
            try:
                found = find_image_on_screen(png, template_png(rec.image), TEMPLATE_CONFIDENCE)
            except NotOnScreen:
                found = None
            if found is not None and fits(found.x, found.y):
                return moved(found.x, found.y, "image",
                             f"the recorded image at ({found.x}, {found.y}), score {found.score:.2f}", found.box)
        return None

    def heal_by_model(self, step: FlowStep, step_deadline: float) -> tuple[FlowStep, dict] | None:
        """heal_with: the model is shown the screen now and asked for this one step (its recorded
        instruction); the step is re-targeted where it points. With the browser in front and a role
        recorded, the element there must have that role: a model does not make a heal onto another
        kind of element."""
        model = self.request.heal_with
        ask = self.ask
        if model is None or ask is None:
            return None
        rec = step.recorded
        instruction = (rec.instruction if rec is not None and rec.instruction else None) or step.heading()
        asked = (f"Replaying a recorded test, this step no longer finds its target: {step.heading()}. "
                 f"The step was: {instruction}. Point at its target on the screen now: one "
                 f"{'click' if step.action != 'hover' else 'move'} on it, nothing else.")
        try:
            point = ask(self.session_id, model, asked, self.request.heal_script)
        except GlassdeskError as exc:
            self._asked[step.heading()] = f"the model {model} could not be asked: {_reason(exc)}"
            return None
        if point is None:
            self._asked[step.heading()] = f"the model {model} pointed at nothing"
            return None
        x, y = on_display(int(point["x"]), int(point["y"]))
        element = None
        element_at = getattr(self.desktops, "element_at", None)
        if element_at is not None:
            element = element_at(self.session_id, x, y)
        if rec is not None and rec.role is not None and (element is None or element.role != rec.role):
            seen = f"{element.role} {element.name!r}" if element is not None else "no page element"
            self._asked[step.heading()] = (f"the model {model} pointed at ({x}, {y}): {seen}, not a {rec.role}; "
                                           "not taken")
            return None
        # The new target: the element's best locator there when the page has one, else the pixel.
        if element is not None and element.locators:
            target = element.locators[0]
            fields = target.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
            retargeted = on_target(step, target)
            matched = f"({x}, {y}): {element.role} {element.name!r}, {target.describe()}"
            box = element.box
        else:
            fields = {"x": x, "y": y}
            retargeted = step.model_copy(update={**dict.fromkeys(LOCATOR_FIELDS), "exact": False, "image": None,
                                                 "native": None, "x": x, "y": y})
            matched = f"({x}, {y})"
            box = None
        return retargeted, {"by": "model", "matched": matched, "target": fields, "box": box,
                            "model": point.get("model") or model, "said": (point.get("said") or "")[:500] or None}

    def _model_said(self, step: FlowStep) -> str:
        said = self._asked.get(step.heading())
        return f"; heal_with: {said}" if said else ""

    def heal(self, step: FlowStep, step_deadline: float) -> tuple[FlowStep, dict] | None:  # noqa: C901
        """The step on what was recorded of its element: the other recorded locators, then the
        role and a similar accessible name in the accessibility snapshot, then the recorded text by
        OCR and the template image (when recorded), then the recorded pixel. A candidate counts
        only when it is one element, of the recorded role, with a name like the recorded one (read
        under its pixel, as the recording was): never another kind of element."""
        rec = step.recorded
        pages, sid = self.pages, self.session_id
        element_at = getattr(self.desktops, "element_at", None)
        if rec is None or element_at is None:
            return None

        def fits(box: dict | None) -> tuple[bool, Any]:
            if not box:
                return False, None
            found = element_at(sid, box["x"] + box["width"] // 2, box["y"] + box["height"] // 2)
            return same_element_kind(found, rec), found

        def probe(target: Target) -> dict:
            return pages.probe(sid, retarget_test_ids(target, self.request.test_id_attribute), "visible",
                               max(1, min(HEAL_PROBE_MS, ms_until(step_deadline))))

        def fields(target: Target) -> dict:
            return target.model_dump(mode="json", exclude_none=True, exclude_defaults=True)

        for alternative in rec.locators:
            found = probe(alternative)
            if found["exists"] and found["visible"] and found.get("matches") == 1:
                ok, element = fits(found.get("box"))
                if ok:
                    return on_target(step, alternative), {"by": "locator", "matched": alternative.describe(),
                                                    "box": found.get("box"), "target": fields(alternative)}
        if rec.role and rec.name:
            snapshot = pages.content(sid, "accessibility").content
            named = closest_name(str(snapshot), rec.role, rec.name)
            if named is not None:
                candidate = Target(role=rec.role, name=named, exact=True)
                found = probe(candidate)
                if found["exists"] and found["visible"] and found.get("matches") == 1 and fits(found.get("box"))[0]:
                    return on_target(step, candidate), {"by": "name", "matched": candidate.describe(),
                                                  "box": found.get("box"), "target": fields(candidate)}
        if rec.text or rec.image:
            on_screen = self.find_on_screen(step, self.desktops.screenshot(sid).png)
            if on_screen is not None:
                return on_screen
        if rec.x is not None and rec.y is not None:
            element = element_at(sid, rec.x, rec.y)
            if same_element_kind(element, rec):
                return (step.model_copy(update={**dict.fromkeys(LOCATOR_FIELDS), "exact": False, "x": rec.x,
                                                "y": rec.y}),
                        {"by": "pixel", "matched": f"({rec.x}, {rec.y}): {element.role} {element.name!r}",
                         "box": element.box, "target": {"x": rec.x, "y": rec.y}})
        return None


def squash(text: str) -> str:
    return " ".join(text.split()).casefold()



# Steps healed from a recorded element, and how long their own locator is given first.
HEALABLE = ("click", "dblclick", "hover", "fill", "check", "uncheck")
HEAL_AFTER_S = 3.0
HEAL_PROBE_MS = 1000
EFFECT_WAIT_S = 5.0  # how long a healed step's recorded effect (its URL, its texts) is waited for
TEMPLATE_CONFIDENCE = 0.9  # a recorded template image must match this well to be the target
# How far (px) the recorded text or image may have moved and still be "at the pixel" (a repaint, a
# font's hinting): beyond it the target has moved, and finding it again is a heal.
STILL_PX = 4
# How alike a healed element's accessible name must be to the recorded one: the same words in
# much the same order (difflib's ratio over the words, at least this), or the same letters and
# digits once spaces and punctuation are dropped ("E-mail" for "Email"). Words, not letters:
# "Delete account" is 86% the letters of "Create account" and half its words.
NAME_SIMILARITY = 0.6
_SNAPSHOT_LINE = re.compile(r'^\s*-\s+([a-z]+)(?:\s+"((?:[^"\\]|\\.)*)")?')


def similar_names(a: str | None, b: str | None) -> bool:
    """Whether a heal may take name ``a`` for the recorded ``b`` (pure)."""
    import difflib

    words_a, words_b = re.findall(r"\w+", (a or "").casefold()), re.findall(r"\w+", (b or "").casefold())
    if "".join(words_a) == "".join(words_b):
        return True
    return difflib.SequenceMatcher(None, words_a, words_b).ratio() >= NAME_SIMILARITY


def same_element_kind(element, rec) -> bool:
    """The element read under a candidate's pixel is the recorded kind: the same role (or tag, with
    no role recorded) and, when a name was recorded, a similar one (pure)."""
    if element is None:
        return False
    if rec.role is not None and element.role != rec.role:
        return False
    if rec.name and not similar_names(element.name, rec.name):
        return False
    return True


def closest_name(snapshot: str, role: str, name: str) -> str | None:
    """The accessible name, among the snapshot's elements of ``role``, most like ``name`` (pure),
    if alike enough: Playwright's aria snapshot lines read ``- button "Save" [ref=e3]``."""
    import difflib

    best, score = None, 0.0
    for line in snapshot.splitlines():
        m = _SNAPSHOT_LINE.match(line)
        if m and m.group(1) == role and m.group(2):
            candidate = m.group(2).replace('\\"', '"')
            if similar_names(candidate, name):
                ratio = difflib.SequenceMatcher(None, candidate.casefold(), name.casefold()).ratio()
                if ratio > score:
                    best, score = candidate, ratio
    return best


def on_target(step: FlowStep, target: Target) -> FlowStep:
    """The step retargeted: its locator fields replaced by the target's."""
    fields = {**dict.fromkeys(LOCATOR_FIELDS), "exact": False,
              **target.model_dump(exclude_none=True, exclude_defaults=True)}
    return step.model_copy(update=fields)


def on_display(x: int, y: int) -> tuple[int, int]:
    from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH

    return max(0, min(SCREEN_WIDTH - 1, x)), max(0, min(SCREEN_HEIGHT - 1, y))


def recorded_words(rec) -> str:
    """What was recorded at a pixel, in words (pure)."""
    parts = ([f"the text {rec.text!r}"] if rec.text else []) + (["the recorded image"] if rec.image else [])
    return " and ".join(parts) or "what was recorded"


def still_at(png: bytes, rec) -> bool:
    """The screen still shows, at the recorded pixel, what was recorded there: the template image
    within STILL_PX of its place, or (no image recorded) the text OCR read there, over the pixel."""
    from vision.qa.screen_find import NotOnScreen, find_image_on_screen, find_text_on_screen

    if rec.x is None or rec.y is None:
        return False
    if rec.image:
        template = template_png(rec.image)
        try:
            found = find_image_on_screen(around(png, rec.x, rec.y, template), template, TEMPLATE_CONFIDENCE)
        except (NotOnScreen, InvalidRequest):
            return False
        # The crop is the template's region grown by STILL_PX on each side: found at its centre, or near.
        return True if found else False
    try:
        found = find_text_on_screen(png, rec.text)
    except NotOnScreen:
        return False
    x0, y0, x1, y1 = found.box
    return x0 - STILL_PX <= rec.x <= x1 + STILL_PX and y0 - STILL_PX <= rec.y <= y1 + STILL_PX


def around(png: bytes, x: int, y: int, template: bytes) -> bytes:
    """The screenshot's region where the template was recorded, grown by STILL_PX on each side, as PNG."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(template)) as t:
        tw, th = t.size
    with Image.open(io.BytesIO(png)) as screen:
        left, top = x - tw // 2 - STILL_PX, y - th // 2 - STILL_PX
        box = (max(0, left), max(0, top), min(screen.width, left + tw + 2 * STILL_PX),
               min(screen.height, top + th + 2 * STILL_PX))
        out = io.BytesIO()
        screen.crop(box).save(out, "PNG")
    return out.getvalue()
