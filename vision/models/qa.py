"""The QA verbs as data: their requests and answers, a flow's steps and assertions, the run record.

Every request model forbids unknown fields and checks what it can before anything runs (a step's
action, its target, its key names, a threshold's range, a name that could leave its directory), so
a bad request is a typed 422 (``invalid_request``) through every door and creates nothing.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import shlex
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from PIL import Image
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from desktop.actions import PLACEHOLDER, SCREEN_HEIGHT, SCREEN_WIDTH, Key
from desktop.models import (
    LOCATOR_FIELDS,
    LOCATOR_KINDS,
    REF,
    DropTarget,
    Locating,
    NativeTarget,
    Position,
    Target,
    UploadFile,
    css_string,
    position_words,
)

# The default limits of a comparison (docs/qa.md, "Visual baselines", has the measurements):
# A region of at most 16 pixels passes. Re-rendering the same page in Chromium differs by nothing at
# all; text re-rendered up to 0.3 px to the side leaves specks of at most 14 px once anti-aliasing is
# discounted. What a person sees at a glance is larger: a 24 px chevron icon turned 90 degrees leaves
# regions of 19 px, one changed digit at 22 px 27 px, a check mark turned into a cross 40, a changed
# word at 14 px 49 (at 22 px 75), a struck-through todo item 49, a 1 px border taken away hundreds.
DEFAULT_MAX_REGION_PIXELS = 16
# The limit on the total when neither max_diff_pixels nor max_diff_pixel_ratio is given: 1 % of the
# pixels compared, the verbs' former (and only) limit; it catches a change spread thin over the page.
DEFAULT_MAX_DIFF_PIXEL_RATIO = 0.01


@dataclass(frozen=True)
class Limits:
    """How different two images may be and still match. None leaves that limit out; a comparison
    fails when any limit that applies is passed."""

    max_diff_pixels: int | None = None  # differing pixels in all
    max_diff_pixel_ratio: float | None = DEFAULT_MAX_DIFF_PIXEL_RATIO  # of the pixels compared, 0..1
    max_region_pixels: int | None = DEFAULT_MAX_REGION_PIXELS  # differing pixels in one connected region

# Baseline names double as ids and directory names (vision.qa.baselines): one plain path component.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
Verb = Literal["verify_page_loads", "verify_element_exists", "verify_user_flow", "capture_visual_baseline",
               "compare_visual_regression", "analyze_console_errors"]
VERBS: tuple[str, ...] = Verb.__args__  # type: ignore[attr-defined]
CaseStatus = Literal["passed", "failed", "error", "skipped"]
RunState = Literal["running", "passed", "failed", "error", "skipped", "interrupted"]

Url = Annotated[str, Field(min_length=1, max_length=8000)]
Timeout = Annotated[int, Field(ge=1, le=120_000, description="ms")]
FlowTimeout = Annotated[int, Field(ge=1, le=600_000, description="ms for the whole flow")]
# Each step's own wait (an element, a load); the flow's aggregate timeout bounds them all.
StepTimeout = Annotated[int, Field(ge=1, le=120_000, description="ms this step may wait")]
MAX_TEMPLATE_CHARS = 700_000  # base64 of a template PNG: what fits the 1 MiB body limit


def check_name(value: str) -> str:
    """A baseline's name: letters, digits, '.', '_' and '-', never '..' (pure)."""
    if not re.fullmatch(NAME_PATTERN, value) or ".." in value:
        raise ValueError(f"{value!r}: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit, "
                         "and no '..'")
    return value


BaselineName = Annotated[str, Field(min_length=1, max_length=100, description="letters, digits, '.', '_', '-'"),
                         AfterValidator(check_name)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MaskBox(BaseModel):
    """[x0, y0, x1, y1], exclusive ends, in the pixels of the image compared."""

    x0: int
    y0: int
    x1: int
    y1: int


def _check_mask(value: list) -> list:
    for entry in value:
        if isinstance(entry, str):
            if not entry.strip():
                raise ValueError("mask: a selector may not be empty")
            continue
        if (not isinstance(entry, list) or len(entry) != 4 or not all(isinstance(v, int) for v in entry)
                or not (0 <= entry[0] < entry[2] and 0 <= entry[1] < entry[3])):
            raise ValueError(f"mask: {entry!r} is neither a CSS selector nor a box [x0, y0, x1, y1] with "
                             "0 <= x0 < x1 and 0 <= y0 < y1")
    return value


MaskEntry = Annotated[Annotated[str, Field(min_length=1, max_length=2000)]
                      | Annotated[list[Annotated[int, Field(ge=0, le=100_000)]], Field(min_length=4, max_length=4)],
                      Field(description="a CSS selector, or a box [x0, y0, x1, y1] in the image's pixels")]
Mask = Annotated[list[MaskEntry], Field(max_length=50, description="regions left out of the comparison: CSS "
                                        "selectors (their boxes now) and [x0, y0, x1, y1] boxes"),
                 AfterValidator(_check_mask)]


class Artifact(BaseModel):
    """A file of a run: its name (for the artifacts route), API path and SHA-256."""

    name: str
    path: str
    sha256: str
    kind: str = "screenshot"
    data: str | None = Field(None, description="the image itself, base64, when the request asked for inline_images "
                                               "(never stored: the run keeps the file)")


# ------------------------------------------------------------------------------------ targets


QA_KINDS = LOCATOR_KINDS + ("image", "x,y", "native")


class _Target(Locating, _Body):
    """Where a step acts: an element named as the page API names one (desktop.models.Locating:
    selector, ref, label, text, role, placeholder, test_id, alt, title, with exact, has_text, nth,
    within), or, beyond the page, a control of a native window (``native``: as the desktop tree names
    it), an image on the screen or display pixels. A text target with no modifier is sought in the DOM
    first, then by OCR of the display (canvas apps, windows without accessibility)."""

    native: NativeTarget | None = Field(None, description="a native window's control")
    image: str | None = Field(None, min_length=1, max_length=MAX_TEMPLATE_CHARS,
                              description="base64 PNG of what to find on the screen")
    confidence: float = Field(0.9, gt=0, le=1, description="how close the image must match (0..1]")
    x: int | None = Field(None, ge=0, le=SCREEN_WIDTH - 1, description="display pixels")
    y: int | None = Field(None, ge=0, le=SCREEN_HEIGHT - 1, description="display pixels")

    def target_kinds(self) -> list[str]:
        kinds = self.locator_kinds() + (["image"] if self.image is not None else []) \
            + (["native"] if self.native is not None else [])
        if self.x is not None or self.y is not None:
            kinds.append("x,y")
        return kinds

    def _check_target(self, required: bool, allowed: tuple[str, ...] | None = None) -> list[str]:
        """The target's problems (none: fine), for a step that needs one (``required``) or may
        have one, by the kinds ``allowed`` (None: any)."""
        kinds = self.target_kinds()
        problems = []
        if (self.x is None) != (self.y is None):
            problems.append("give both x and y, or neither")
        if kinds:
            problems += [p for p in self.locator_problems(kinds, QA_KINDS) if not p.startswith("name is")]
        elif required:
            problems.append(f"name the target: one of {', '.join(allowed or QA_KINDS)}")
        elif self.modifiers_given():
            problems.append(f"{', '.join(self.modifiers_given())}: modifiers of a target, and this step has none")
        if kinds and allowed is not None and kinds[0] not in allowed:
            problems.append(f"{kinds[0]}: this takes a target by {', '.join(allowed) or 'nothing'}")
        if self.image is not None:
            try:
                template_png(self.image)
            except ValueError as exc:
                problems.append(str(exc))
        return problems

    def _assertion_target_problems(self, a: Assertion) -> list[str]:
        """An assertion's target rule: the element's assertions need one (text or an image too for
        exists, visible, hidden: found on the screen), the page's and the screen's take none."""
        if a.kind in TARGETED:
            allowed = ON_SCREEN if a.kind in ELEMENT_PRESENCE else DOM_ONLY
            return self._check_target(required=True, allowed=allowed + (("native",) if a.kind in NATIVE_ASSERTIONS
                                                                          else ()))
        return self._check_target(required=False, allowed=())

    def dom_only(self) -> bool:
        """Sought in the page only: any kind but text and image, or text narrowed by a modifier
        (OCR cannot honour nth, within, has_text or exact)."""
        return bool(self.locator_kinds()) and (self.text is None or bool(self.modifiers_given()))

    def dom_target(self, test_id_attribute: str = "data-testid") -> Target:
        """The desktop's Target for the element (a step's own `name` is the accessible name only
        with a role), its test_ids matched on ``test_id_attribute``."""
        fields = {name: getattr(self, name) for name in LOCATOR_FIELDS}
        if self.role is None:
            fields["name"] = None
        return retarget_test_ids(Target(**fields), test_id_attribute)

    def describe(self) -> str:
        if self.locator_kinds():
            return self.locator_words()
        if self.native is not None:
            return self.native.describe()
        if self.image is not None:
            return f"an image (confidence {self.confidence:g})"
        if self.x is not None:
            return f"({self.x}, {self.y})"
        return "nothing"


def retarget_test_ids(target: Target, attribute: str) -> Target:
    """``target`` with its test_id (and its within's) matched on ``attribute`` instead of
    data-testid (pure): Playwright's get_by_test_id is an exact match of that attribute, which a
    CSS attribute selector says for any other one."""
    if attribute == "data-testid":
        return target
    update: dict = {}
    if target.test_id is not None:
        update = {"selector": f"[{attribute}={css_string(target.test_id)}]", "test_id": None}
    if target.within is not None:
        update["within"] = retarget_test_ids(target.within, attribute)
    return target.model_copy(update=update) if update else target


def template_png(value: str) -> bytes:
    """A template image's bytes from its base64 (pure); ValueError when it is not a PNG."""
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("image: not valid base64") from None
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("image: not a PNG")
    try:
        with Image.open(io.BytesIO(data)) as image:
            # The size is in the header: checked before a single pixel is decoded.
            if image.width * image.height > SCREEN_WIDTH * SCREEN_HEIGHT:
                raise ValueError("image: larger than the display")
            image.load()
    except (OSError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ValueError(f"image: the PNG cannot be read ({exc})") from None
    return data


AssertionType = Literal["exists", "visible", "hidden", "enabled", "disabled", "editable", "focused", "checked",
                        "count", "has_class", "has_text", "contains_text", "text_contains", "has_value",
                        "value_equals", "has_values", "has_attribute", "url", "url_matches", "title", "evaluate",
                        "screen_text_contains", "visual_matches"]
# The assertions about the step's element (its target), by what they need besides.
ELEMENT_STATES = ("exists", "visible", "hidden", "enabled", "disabled", "editable", "focused", "checked")
TARGETED = ELEMENT_STATES + ("count", "has_class", "has_text", "contains_text", "text_contains", "has_value",
                             "value_equals", "has_values", "has_attribute")
# The element's assertions a text or an image on the screen can answer too (by OCR, by template).
ELEMENT_PRESENCE = ("exists", "visible", "hidden")
# The element's assertions a native control can answer (desktop.native: its states, text and value).
NATIVE_ASSERTIONS = ELEMENT_STATES + ("count", "has_text", "contains_text", "text_contains", "has_value",
                                      "value_equals")
# Kept under their old names: text_contains is contains_text, value_equals is has_value.
ALIASES = {"text_contains": "contains_text", "value_equals": "has_value"}
REGEX_KINDS = ("has_text", "contains_text", "has_value", "has_attribute")  # take expected_regex
NEEDS_EXPECTED = ("has_class", "has_value", "value_equals", "url", "url_matches", "title", "evaluate",
                  "screen_text_contains")


class VisualLimits(_Body):
    """How different a shot may be from its baseline and still match: compare_visual_regression's
    and a flow's visual_matches. It fails when one region of differing pixels is too large, or
    when too many differ in all. Ratios are fractions (0..1) here and in the answer's diff_ratio;
    the answer's diff_percentage is the same ratio in percent."""

    max_diff_pixels: int | None = Field(
        None, ge=0, le=100_000_000,
        description="differing pixels allowed in all (Playwright's maxDiffPixels); null: no such limit")
    max_diff_pixel_ratio: float | None = Field(
        None, ge=0, le=1,
        description="the fraction (0..1, not percent) of the compared pixels that may differ (Playwright's "
                    "maxDiffPixelRatio); when neither this nor max_diff_pixels is given, "
                    f"{DEFAULT_MAX_DIFF_PIXEL_RATIO:g}")
    threshold: float | None = Field(
        None, ge=0, le=1, description="the former name of max_diff_pixel_ratio (a fraction, 0..1), still accepted; "
                                      "giving both with different values is refused")
    max_region_pixels: int | None = Field(
        DEFAULT_MAX_REGION_PIXELS, ge=0, le=100_000_000,
        description="differing pixels allowed in one 8-connected region, anti-aliasing discounted: a changed word, "
                    "icon or border is one region of dozens to hundreds of pixels, rendering noise single pixels; "
                    "0: any differing pixel fails; null: no region limit")
    pixel_threshold: float = Field(0.1, ge=0, le=1, description="YIQ colour distance counted as a difference, as "
                                                               "in pixelmatch (0..1)")

    @model_validator(mode="after")
    def _one_ratio(self):
        # Merged here, once, so everything after reads max_diff_pixel_ratio alone.
        if self.threshold is not None:
            if self.max_diff_pixel_ratio is not None and self.max_diff_pixel_ratio != self.threshold:
                raise ValueError(f"threshold ({self.threshold:g}) is the former name of max_diff_pixel_ratio "
                                 f"({self.max_diff_pixel_ratio:g}): give one of them")
            self.max_diff_pixel_ratio = self.threshold
        return self

    def limits(self) -> Limits:
        """The limits that apply: the default ratio only when no limit on the total was given."""
        ratio = self.max_diff_pixel_ratio
        if ratio is None and self.max_diff_pixels is None:
            ratio = DEFAULT_MAX_DIFF_PIXEL_RATIO
        return Limits(max_diff_pixels=self.max_diff_pixels, max_diff_pixel_ratio=ratio,
                      max_region_pixels=self.max_region_pixels)


_VISUAL_OPTIONS = tuple(VisualLimits.model_fields)


class Assertion(VisualLimits):
    """What must hold, looked at again until it does or the step's timeout_ms passes (and answered
    the moment it holds); ``not`` asks for the opposite, as Playwright's expect(...).not_ does.
    The element's assertions look at the step's target (the first match; `nth` picks another);
    url, url_matches, title and evaluate at the page; screen_text_contains reads the display by
    OCR; visual_matches compares with a baseline, within the limits of VisualLimits."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: AssertionType
    expected: str | None = Field(None, max_length=2000, description="has_class: a class; has_text, contains_text: "
                                 "the text; has_value: the value (\"\" allowed); has_attribute: the attribute's "
                                 "value (optional); url, title: the whole of it; url_matches: a regular "
                                 "expression; evaluate: a JavaScript expression that must be true-valued")
    expected_list: list[Annotated[str, Field(max_length=2000)]] | None = Field(
        None, max_length=200, description="has_text, contains_text: the texts of all the matching elements, in "
                                          "order; has_values: the selected options' values of a multiple select")
    expected_regex: str | None = Field(None, min_length=1, max_length=2000,
                                       description="has_text, contains_text, has_value, has_attribute: a regular "
                                                   "expression searched for instead of `expected`")
    count: int | None = Field(None, ge=0, le=100_000, description="count: how many elements match")
    attribute: str | None = Field(None, min_length=1, max_length=200, description="has_attribute: its name")
    negate: bool = Field(False, alias="not", description="the opposite must hold")
    baseline_id: BaselineName | None = None

    @model_validator(mode="after")
    def _complete(self):  # noqa: C901
        problems = []
        kind = self.type
        if kind in NEEDS_EXPECTED and self.expected is None and (self.expected_regex is None
                                                                 or self.kind not in REGEX_KINDS):
            problems.append(f"assertion {kind} needs `expected`"
                            + (" or `expected_regex`" if self.kind in REGEX_KINDS else ""))
        given = [k for k in ("expected", "expected_list", "expected_regex") if getattr(self, k) is not None]
        if kind in ("has_text", "contains_text", "text_contains") and len(given) != 1:
            problems.append(f"assertion {kind} needs one of `expected`, `expected_list` or `expected_regex`"
                            + (f" (not {' and '.join(given)})" if given else ""))
        elif kind in REGEX_KINDS and len(given) > 1:
            problems.append(f"assertion {kind}: `expected` or `expected_regex`, not both")
        if self.expected_regex is not None:
            if self.kind not in REGEX_KINDS:
                problems.append(f"expected_regex: only with {', '.join(REGEX_KINDS)} (not {kind})")
            try:
                _regex(self.expected_regex, "assertion.expected_regex")
            except ValueError as exc:
                problems.append(str(exc))
        if self.expected_list is not None and kind not in ("has_text", "contains_text", "text_contains", "has_values"):
            problems.append(f"expected_list: only with has_text, contains_text or has_values (not {kind})")
        if kind == "has_values" and self.expected_list is None:
            problems.append("assertion has_values needs `expected_list`")
        if kind == "count" and self.count is None:
            problems.append("assertion count needs `count`")
        if self.count is not None and kind != "count":
            problems.append(f"count: only with assertion count (not {kind})")
        if kind == "has_attribute" and self.attribute is None:
            problems.append("assertion has_attribute needs `attribute`")
        if self.attribute is not None and kind != "has_attribute":
            problems.append(f"attribute: only with assertion has_attribute (not {kind})")
        if kind in ELEMENT_STATES + ("count",) and self.expected is not None:
            problems.append(f"expected: assertion {kind} takes none")
        if kind == "url_matches" and self.expected is not None:
            try:
                _regex(self.expected, "assertion.expected")
            except ValueError as exc:
                problems.append(str(exc))
        if kind == "visual_matches":
            if self.baseline_id is None:
                problems.append("assertion visual_matches needs `baseline_id`")
            if self.negate:
                problems.append("not: a visual_matches assertion cannot be negated")
        else:
            misplaced = [k for k in _VISUAL_OPTIONS if k in self.model_fields_set]
            if misplaced:
                problems.append(f"{', '.join(misplaced)}: only for a visual_matches assertion, not {kind}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def kind(self) -> str:
        """The type under its one name (text_contains is contains_text, value_equals has_value)."""
        return ALIASES.get(self.type, self.type)


def _regex(pattern: str, where: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{where}: {pattern!r} is not a regular expression ({exc})") from None


StepAction = Literal["navigate", "click", "dblclick", "hover", "check", "uncheck", "fill", "clear", "select",
                     "press", "drag", "scroll_into_view", "reload", "back", "forward", "upload", "wait", "assert",
                     "screenshot", "act", "evaluate", "type", "blur", "wait_for_request", "launch"]
# The kinds of target a step may use: anything in the page; the page's or, by OCR, the screen's text
# and images; pixels too (POINTER).
DOM_ONLY = LOCATOR_KINDS
ON_SCREEN = LOCATOR_KINDS + ("image", "native")
TYPED_INTO = LOCATOR_KINDS + ("native",)  # what a type step types into: a page's element or a native control
POINTER = QA_KINDS
NO_TARGET = ("navigate", "reload", "back", "forward", "screenshot", "act", "evaluate", "wait_for_request", "launch")
WaitState = Literal["attached", "detached", "visible", "hidden"]


class RequestCheck(_Body):
    """A request the page sent since the flow started (Cypress's cy.wait on an alias, Playwright's
    waitForRequest): the first not yet taken by an earlier step whose URL matches (and method),
    waited for, then checked."""

    url_matches: str = Field(min_length=1, max_length=2000, description="a regular expression searched in its URL")
    method: str | None = Field(None, min_length=1, max_length=20, description="GET, POST... (any when left out)")
    status: int | None = Field(None, ge=100, le=599, description="its response's status (waited for)")
    headers: dict[Annotated[str, Field(min_length=1, max_length=200)], Annotated[str, Field(max_length=8000)]] | None \
        = Field(None, max_length=50, description="request headers by name (any case): each value exactly; "
                                                 "{{name}} is a secret of the flow")
    body: dict[Annotated[str, Field(min_length=1, max_length=500)], Any] | None = Field(
        None, max_length=50, description="dotted paths into its JSON (or form) body, each to this value")

    @field_validator("url_matches")
    @classmethod
    def _pattern(cls, value: str) -> str:
        _regex(value, "url_matches")
        return value


class Recorded(_Body):
    """The element as recorded by an export: healed from when the locator no longer matches."""

    # How else to find it and where it was (vision.evidence.export). A step whose own locator no
    # longer matches is healed from it (unless the flow is ``strict``): never onto an element of
    # another role.

    role: str | None = Field(None, max_length=40, description="the element's ARIA role then")
    name: str | None = Field(None, max_length=500, description="its accessible name then")
    locators: list[Target] = Field(default_factory=list, max_length=20,
                                   description="the other locators that named it, best first")
    x: int | None = Field(None, ge=0, le=SCREEN_WIDTH - 1, description="the display pixel acted at")
    y: int | None = Field(None, ge=0, le=SCREEN_HEIGHT - 1)
    box: dict[str, int] | None = None  # its box then (display px), drawn in a heal's images
    # A native window's or a canvas's pixel: the text OCR read there, its box, a PNG centred on it.
    text: str | None = None
    text_box: list[int] | None = None
    image: str | None = Field(None, min_length=1, max_length=MAX_TEMPLATE_CHARS)
    url_after: Url | None = None  # the URL after it: a healed step must reach it
    # Texts the step made appear (vision.perception.effects): a healed step must bring one of them up, read in
    # the page when it has a DOM target, else on the screen by OCR (a native window, a canvas).
    appeared: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(default_factory=list, max_length=8)
    # Where they were read (absent from suites written before it: then by the target's kind).
    appeared_on: Literal["page", "screen"] | None = None
    instruction: str | None = None  # what heal_with's model is asked (the export bounds it)

    @field_validator("image")
    @classmethod
    def _png(cls, value: str | None) -> str | None:
        if value is not None:
            template_png(value)
        return value


HealMethod = Literal["locator", "name", "ocr", "image", "pixel", "model"]


# One healed step of a replay (a flow's ``heals``, its step's ``detail.healed``): what no longer
# matched, how the step was re-targeted (``by``: another recorded locator, the role with a similar
# name, the recorded text by OCR, the recorded template image, the recorded pixel, or heal_with's
# model), what matched, the recorded effect checked after it, and the images before and after the
# healed action with the recorded box (orange) and the healed one (green) drawn. (Described here,
# not in the schema: every MCP listing carries the schema.)
class Heal(BaseModel):
    step: int
    failed: str
    by: HealMethod
    matched: str
    box: dict | None = None
    point: list[int] | None = None
    target: dict = Field(default_factory=dict)  # the new target as step fields: what --write-healed writes
    effect: str | None = None
    recorded_at: list[int] | None = None
    recorded_box: dict | None = None
    before: str | None = None  # artifact names
    after: str | None = None
    model: str | None = None
    said: str | None = None


class FlowStep(_Target):
    """One step. ``name`` is the step's name in reports, except beside ``role``, where it is the
    element's accessible name (as in Playwright's get_by_role)."""

    action: StepAction
    url: Url | None = Field(None, description="navigate: where to (also accepted as `value`)")
    value: str | None = Field(None, max_length=20_000, description="fill: the text to type")
    request: RequestCheck | None = Field(None, description="wait_for_request: the request and its checks")
    command: str | None = Field(None, min_length=1, max_length=2000, description="launch: a command line")
    expression: str | None = Field(None, min_length=1, max_length=20_000,
                                   description="evaluate: JavaScript run in the page (needs --allow-evaluate)")
    option: str | None = Field(None, min_length=1, max_length=2000, description="select: the option's value or label")
    keys: list[str] | str | None = Field(None, description='press: chords in order, e.g. ["ctrl+a", "Delete"]')
    to: DropTarget | None = Field(None, description="drag: the element to drop on, and where on it")
    position: Position | None = Field(None, description="drag: where to press on the dragged element, as to's "
                                                         "position")
    files: list[UploadFile] | None = Field(None, min_length=1, max_length=20,
                                           description="upload: the files, {name, content_base64} (a suite file "
                                                       "may give paths, read by `glassdesk qa`)")
    state: WaitState | None = Field(None, description="wait with a target: attached, detached, visible (default) "
                                                      "or hidden")
    timeout_ms: StepTimeout = 10_000
    name: str | None = Field(None, max_length=500, description="the step's name in reports; beside `role`, the "
                                                              "element's accessible name")
    description: str | None = Field(None, max_length=2000)
    assertion: Assertion | None = None
    # act: an instruction run through vision/act inside the flow
    instruction: str | None = Field(None, min_length=1, max_length=10_000)
    model: str | None = Field(None, max_length=200)
    max_steps: int = Field(10, ge=1, le=100)
    script: list[dict] | None = Field(None, max_length=200, description="act with model 'scripted': the actions")
    expect: list[Expectation] | None = Field(None, max_length=50, description="act: what must hold when its model "
                                             "says done (vision/act's expect); the step fails unless every one "
                                             "holds")
    recorded: Recorded | None = Field(None, description="click, dblclick, hover, fill, check, uncheck")

    @model_validator(mode="after")
    def _fits_the_action(self):  # noqa: C901
        action = self.action
        problems: list[str] = []
        needs = {"fill": "value", "type": "value", "select": "option", "drag": "to", "upload": "files",
                 "assert": "assertion", "act": "instruction", "evaluate": "expression", "wait_for_request": "request",
                 "launch": "command"}
        if action == "navigate":
            self.url = self.url or self.value
            if not self.url:
                problems.append("navigate needs `url`")
        elif action in needs and getattr(self, needs[action]) in (None, ""):
            problems.append(f"{action} needs `{needs[action]}`")
        elif action == "press" and not self.keys:
            problems.append("press needs `keys`")
        for field, used_by in (("to", "drag"), ("position", "drag"), ("files", "upload"), ("state", "wait"),
                               ("command", "launch"),
                               ("expect", "act"), ("expression", "evaluate"), ("request", "wait_for_request")):
            if getattr(self, field) is not None and action != used_by:
                problems.append(f"{field}: only with action {used_by} (not {action})")
        if self.command and action == "launch":
            try:
                if not shlex.split(self.command):
                    problems.append("command: a program to launch, then its arguments")
            except ValueError as exc:
                problems.append(f"command: {exc} (quoted as a shell would)")
        if self.keys and action == "press":
            try:
                Key(keys=self.keys)  # unknown key names are refused now, not halfway through the flow
            except ValidationError as exc:
                problems.append("keys: " + "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors()))
        if action in NO_TARGET:
            problems += self._check_target(required=False, allowed=())
        elif action in ("click", "dblclick", "hover", "fill"):
            problems += self._check_target(required=True, allowed=POINTER)
        elif action in ("check", "uncheck", "clear", "drag", "scroll_into_view", "upload", "select", "blur"):
            problems += self._check_target(required=True, allowed=DOM_ONLY)
        elif action == "press":
            problems += self._check_target(required=False, allowed=DOM_ONLY)
        elif action == "type":
            problems += self._check_target(required=False, allowed=TYPED_INTO)
        elif action == "wait":
            native_states = self.native is not None and self.state in ("visible", "hidden", None)
            problems += self._check_target(required=False, allowed=DOM_ONLY if self.state and not native_states
                                           else ON_SCREEN)
            if self.state and not self.target_kinds():
                problems.append("state: waits for a target; give one")
        elif action == "assert" and self.assertion is not None:
            problems += self._assertion_target_problems(self.assertion)
        if problems:
            raise ValueError("; ".join(dict.fromkeys(problems)))
        return self

    @property
    def key_list(self) -> list[str]:
        return Key(keys=self.keys).keys if self.keys else []

    def heading(self) -> str:
        """The step's name in reports."""
        return (self.name if self.role is None else None) or action_words(self)


def typed_words(value: str) -> str:
    """What a step types, in words that never tell a secret's length (pure): ``(15 characters)``,
    ``({{password}})``, ``(4 characters and {{password}})``."""
    names = [f"{{{{{name}}}}}" for name in PLACEHOLDER.findall(value)]
    plain = len(PLACEHOLDER.sub("", value))
    if not names:
        return f"({plain} characters)"
    return "(" + (f"{plain} characters and " if plain else "") + ", ".join(names) + ")"


def action_words(step: FlowStep) -> str:
    """One line for a step (pure), e.g. ``click selector '#go'``."""
    if step.action == "navigate":
        return f"navigate {step.url}"
    if step.action == "press":
        return f"press {' '.join(step.key_list)}" + (f" on {step.describe()}" if step.target_kinds() else "")
    if step.action == "assert" and step.assertion is not None:
        a = step.assertion
        what = f" {step.describe()}" if step.target_kinds() else ""
        expected = f" {a.expected!r}" if a.expected is not None else ""
        expected += f" {a.expected_list!r}" if a.expected_list is not None else ""
        expected += f" {a.count}" if a.count is not None else ""
        expected = (f" {a.attribute}" if a.attribute else "") + expected
        return (f"assert{' not' if a.negate else ''} {a.type}{what}{expected}"
                + (f" {a.baseline_id}" if a.baseline_id else ""))
    if step.action == "act":
        return f"act {step.instruction!r}"
    if step.action == "launch":
        return f"launch {step.command}"
    if step.action == "wait_for_request" and step.request is not None:
        r = step.request
        return f"wait for a {r.method + ' ' if r.method else ''}request to /{r.url_matches}/" + (
            f" answered {r.status}" if r.status is not None else "")
    if step.action == "evaluate":
        expression = " ".join((step.expression or "").split())
        return f"evaluate {expression[:80] + '…' if len(expression) > 80 else expression}"
    if step.action == "wait" and not step.target_kinds():
        return f"wait {step.timeout_ms} ms"
    if step.action == "wait":
        return f"wait until {step.describe()} is {step.state or 'visible'}"
    if step.action in ("fill", "type"):
        what = f" {step.describe()}" if step.target_kinds() else ""
        return f"{step.action}{what} {typed_words(step.value or '')}"
    if step.action == "select":
        return f"select {step.option!r} in {step.describe()}"
    if step.action == "drag" and step.to is not None:
        return f"drag {step.describe()}{position_words(step.position)} to {step.to.describe()}"
    if step.action == "upload":
        return f"upload {len(step.files or [])} file(s) to {step.describe()}"
    if step.action in ("screenshot", "reload", "back", "forward"):
        return step.action
    return f"{step.action} {step.describe()}"


class Expectation(_Target):
    """A flow's assert step without its action, checked when the model says done: a run is verified
    only when every one holds."""

    # The same assertion, target and rules as an assert step, looked at again until it holds or
    # ``timeout_ms`` passes.

    assertion: Assertion
    timeout_ms: StepTimeout = 5_000
    name: str | None = Field(None, max_length=500, description="the check's name in reports; beside `role`, the "
                                                              "element's accessible name")

    @model_validator(mode="after")
    def _fits_the_assertion(self):
        problems = self._assertion_target_problems(self.assertion)
        if problems:
            raise ValueError("; ".join(dict.fromkeys(problems)))
        return self

    def as_step(self) -> FlowStep:
        """The assert step that checks it (what a flow's step checker takes)."""
        return FlowStep.model_validate({"action": "assert", **self.model_dump(exclude_unset=True, by_alias=True)})

    def words(self) -> str:
        """One line for it, e.g. ``assert has_text selector '#greeting' 'Hello, alice!'``."""
        return self.as_step().heading()


class SuccessCondition(_Body):
    """What must hold at the end of a flow: one of an element (selector), visible text (DOM, else
    OCR), text on the screen (OCR) or the URL (a regular expression)."""

    selector: str | None = Field(None, min_length=1, max_length=2000)
    text: str | None = None
    screen_text: str | None = Field(None, min_length=1, max_length=500)
    url_matches: str | None = Field(None, min_length=1, max_length=2000)

    @model_validator(mode="after")
    def _exactly_one(self):
        given = [k for k in ("selector", "text", "screen_text", "url_matches") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("success_condition: give exactly one of selector, text, screen_text, url_matches")
        if self.url_matches is not None:
            _regex(self.url_matches, "success_condition.url_matches")
        return self

    def describe(self) -> str:
        for kind in ("selector", "text", "screen_text", "url_matches"):
            if getattr(self, kind) is not None:
                return f"{kind} {getattr(self, kind)!r}"
        return "nothing"


# ------------------------------------------------------------------------------------ requests


class _VerbRequest(_Body):
    record_video: bool = Field(False, description="film the display (ffmpeg, 10 fps) while the verb runs: a video "
                                                  "receipt with a chapter per step, a ring at every click and the "
                                                  "typed text and keys as captions")
    video_format: Literal["mp4", "webm"] = Field("mp4", description="mp4 (H.264, the cheaper encoder) or webm (VP8)")
    name: str | None = Field(None, min_length=1, max_length=1000, description="the test's name in reports")
    inline_images: bool = Field(False, description="the answer's images also inline, base64 in each artifact's "
                                                   "`data`, beside their references")
    fresh: bool = Field(False, description="first clear the browser's state (cookies, storage, cache, permissions "
                                           "of every origin; one blank tab left), as page clear-state does")


class VerifyPageLoadsRequest(_VerbRequest):
    url: Url
    expected_title: str | None = Field(None, max_length=2000)
    timeout_ms: Timeout = 10_000


class VerifyElementRequest(_VerbRequest):
    url: Url | None = None
    selector: str | None = Field(None, min_length=1, max_length=2000)
    ref: str | None = Field(None, min_length=1, max_length=40, pattern=REF.pattern, description="e.g. e12")
    # Target's own bounds: an empty text passed here and failed there, a 500 (found by the API fuzz test).
    text: str | None = Field(None, min_length=1, max_length=500, description="text visible in the element")
    should_be_visible: bool = True
    timeout_ms: Timeout = 5000

    @model_validator(mode="after")
    def _one_target(self):
        given = [k for k in ("selector", "ref", "text") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("name the element one way: exactly one of selector, ref, text")
        return self


class VerifyUserFlowRequest(_VerbRequest):
    start_url: Url | None = Field(None, description="opened first; without it the flow starts on the page in front")
    test_id_attribute: str = Field("data-testid", pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]{0,99}$",
                                   description="the attribute `test_id` targets match")
    steps: list[FlowStep] = Field(min_length=1, max_length=200)
    success_condition: SuccessCondition | None = None
    timeout_ms: FlowTimeout = 120_000
    strict: bool = Field(False, description="a step whose locator no longer matches fails rather than being healed "
                                            "from what was recorded of its element")
    # A model asked to re-target a step nothing recorded re-finds (vision.qa.flow, heal_by_model);
    # heal_script: the scripted model's actions, when that is the model (tests).
    heal_with: str | None = Field(None, min_length=1, max_length=200)
    heal_script: list[dict] | None = Field(None, max_length=50)
    secrets: dict[str, str] = Field(default_factory=dict, max_length=50,
                                    description="fill values' {{name}} placeholders; never echoed or stored")


class CaptureBaselineRequest(_VerbRequest):
    url: Url | None = None
    name: BaselineName
    selectors: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=20, description="components shot on their own too")
    full_page: bool = False
    display: bool = Field(False, description="the whole display instead of the page (its panel masked)")
    mask: Mask = Field(default_factory=list)
    timeout_ms: Timeout = 10_000

    @model_validator(mode="after")
    def _one_scope(self):
        if "page" in self.selectors or len(set(self.selectors)) != len(self.selectors):
            raise ValueError("selectors: each once, and not 'page' (the name of the page's own shot)")
        if self.full_page and self.display:
            raise ValueError("full_page and display: choose one (the display has no page below its fold)")
        return self

    @property
    def scope(self) -> Literal["page", "full_page", "display"]:
        return "display" if self.display else "full_page" if self.full_page else "page"


class CompareRequest(VisualLimits, _VerbRequest):
    url: Url | None = None
    baseline_id: BaselineName
    version: int | None = Field(None, ge=1, description="the baseline version (default: the latest)")
    ignore_antialiasing: bool = True
    mask: Mask = Field(default_factory=list)
    timeout_ms: Timeout = 10_000


class AnalyzeConsoleRequest(_VerbRequest):
    url: Url | None = None
    listen_ms: int = Field(1000, ge=0, le=60_000, description="how long to keep listening once the page has loaded "
                                                              "(without url: from now), so an error thrown by a "
                                                              "timer or a late script counts")
    ignore_patterns: list[Annotated[str, Field(max_length=1000)]] = Field(default_factory=list, max_length=50)
    timeout_ms: Timeout = 10_000

    @field_validator("ignore_patterns")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for number, pattern in enumerate(value):
            _regex(pattern, f"ignore_patterns[{number}]")
        return value


class ApproveRequest(_Body):
    test_run_id: str = Field(min_length=1, max_length=128, description="the failed comparison to promote")


# ------------------------------------------------------------------------------------ answers


class _Answer(BaseModel):
    test_run_id: str
    report_url: str = ""


class PageLoadResult(_Answer):
    success: bool
    status_code: int | None = None
    title: str | None = None
    url: str | None = None
    load_time_ms: int | None = None
    console_errors: list[dict] = Field(default_factory=list)
    failed_requests: list[dict] = Field(default_factory=list)
    screenshot: Artifact | None = None
    reason: str | None = Field(None, description="why success is false")


class ElementResult(_Answer):
    success: bool = Field(description="exists, and visible as should_be_visible asks")
    exists: bool
    visible: bool
    found_by: Literal["dom", "ocr"] | None = None
    box: dict | None = Field(None, description="display px: x, y, width, height")
    matches: int = 0
    screenshot: dict[str, Artifact] = Field(default_factory=dict,
                                            description="element: the element; screen: the display with a marker")
    reason: str | None = None


class StepResult(BaseModel):
    index: int
    name: str
    action: str
    status: CaseStatus
    attempts: int = 1
    duration_ms: int = 0
    detail: dict = Field(default_factory=dict)
    failure_reason: str | None = None
    before: str | None = None
    after: str | None = None


class FlowResult(_Answer):
    success: bool
    steps_completed: int
    failure_step: int | None = Field(None, description="1-based; null when the flow passed, or failed at its start "
                                                       "or its success condition")
    failure_reason: str | None = None
    screenshots: list[Artifact] = Field(default_factory=list)
    console_logs: list[dict] = Field(default_factory=list)
    page_errors: list[dict] = Field(default_factory=list, description="every uncaught exception of the flow's whole "
                                                                      "run, whichever step it came after")
    trace_id: str = Field(description="the run's hash-chained evidence (the test_run_id); act steps' vision traces "
                                      "are in act_traces")
    act_traces: list[str] = Field(default_factory=list)
    heals: list[Heal] = Field(default_factory=list)  # each step healed, with its images
    steps: list[StepResult] = Field(default_factory=list)
    video: Artifact | None = None


class Shot(BaseModel):
    name: str
    sha256: str


class BaselineResult(_Answer):
    baseline_id: str
    version: int
    scope: str
    screenshots: list[Shot]
    mask_boxes: list[list[int]] = Field(default_factory=list)


class DiffRegion(BaseModel):
    """A connected region of differing pixels (8-connected, anti-aliasing discounted)."""

    box: list[int] = Field(description="[x0, y0, x1, y1] in the shot's pixels, ends exclusive (as a mask box)")
    pixels: int = Field(description="its differing pixels")


class AppliedLimits(BaseModel):
    """The limits a comparison applied (null: that limit was not applied)."""

    max_diff_pixels: int | None
    max_diff_pixel_ratio: float | None = Field(description="a fraction, 0..1 (the unit of diff_ratio)")
    max_region_pixels: int | None
    pixel_threshold: float


DIFF_RATIO = "differing pixels / pixels compared (masked ones are not), a fraction 0..1 as max_diff_pixel_ratio"
DIFF_PERCENTAGE = "diff_ratio in percent (100 x diff_ratio), kept for compatibility"
DIFF_IMAGE = ("changes in red over a faded copy of the baseline, each region boxed (magenta: over max_region_pixels), "
              "anti-aliasing forgiven in yellow; whenever a pixel differs, passed or not")

# Every region is listed up to a bound: a scatter of thousands of specks would make the record as
# large as the picture, and a person reviewing it reads a few boxes, not thousands. largest_region
# stays as it was (the first of them) for the callers and records that know only it.
MAX_DIFF_REGIONS = 20
DIFF_REGIONS = (f"regions of differing pixels, the largest first, at most {MAX_DIFF_REGIONS} (diff_regions_omitted "
                "counts the rest); the first is largest_region. Absent in records made before it was recorded")
DIFF_REGIONS_OMITTED = "how many regions diff_regions leaves out (regions = len(diff_regions) + this)"


class ShotComparison(BaseModel):
    name: str
    passed: bool
    diff_pixels: int
    diff_ratio: float = Field(0.0, description=DIFF_RATIO)
    diff_percentage: float = Field(description=DIFF_PERCENTAGE)
    regions: int = Field(0, description="how many connected regions of differing pixels")
    largest_region: DiffRegion | None = None
    diff_regions: list[DiffRegion] = Field(default_factory=list, description=DIFF_REGIONS)
    diff_regions_omitted: int = Field(0, description=DIFF_REGIONS_OMITTED)
    baseline_sha256: str
    current_sha256: str
    diff_image: Artifact | None = Field(None, description=DIFF_IMAGE)
    current_image: Artifact | None = None
    baseline_image: Artifact | None = None
    reason: str | None = Field(None, description="why this shot failed, each limit passed")


class CompareResult(_Answer):
    passed: bool
    diff_ratio: float = Field(0.0, description=f"the page shot's {DIFF_RATIO}")
    diff_percentage: float = Field(description=DIFF_PERCENTAGE)
    diff_pixels: int
    largest_region: DiffRegion | None = Field(None, description="the page shot's largest region of differing pixels")
    diff_regions: list[DiffRegion] = Field(default_factory=list, description=f"the page shot's {DIFF_REGIONS}")
    diff_regions_omitted: int = Field(0, description=DIFF_REGIONS_OMITTED)
    diff_image: Artifact | None = Field(None, description=DIFF_IMAGE)
    baseline_sha256: str
    current_sha256: str
    baseline_id: str
    baseline_version: int
    threshold: float | None = Field(description="the max_diff_pixel_ratio applied (its former name), a fraction 0..1")
    limits: AppliedLimits | None = None
    shots: list[ShotComparison] = Field(default_factory=list)
    reason: str | None = None


class ConsoleEntry(BaseModel):
    message: str
    source: str = ""
    line: int = 0


class ConsoleResult(_Answer):
    has_errors: bool
    errors: list[ConsoleEntry]
    warnings: list[ConsoleEntry]
    ignored: int = Field(0, description="errors and warnings left out by ignore_patterns")
    browser_requests: list[ConsoleEntry] = Field(
        default_factory=list, description="failed loads the browser made on its own, not the page (the /favicon.ico "
                                          "it asks every site for): reported apart, never counted as the page's "
                                          "errors, since whether one falls inside the listening time is timing")


# ------------------------------------------------------------------------------------ the run record


class TestCase(BaseModel):
    __test__ = False  # not a pytest class

    name: str
    status: CaseStatus
    duration_ms: int
    screenshots: list[str] = Field(default_factory=list, description="artifact names")
    console_logs: list[dict] = Field(default_factory=list)
    failure_reason: str | None = None
    steps: list[StepResult] = Field(default_factory=list)


class Summary(BaseModel):
    total: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0


class Artifacts(BaseModel):
    screenshots: list[Artifact] = Field(default_factory=list)
    videos: list[Artifact] = Field(default_factory=list)
    traces: list[dict] = Field(default_factory=list)
    other: list[Artifact] = Field(default_factory=list)


class QaRun(BaseModel):
    test_run_id: str
    verb: str
    name: str
    session_id: str | None = None
    timestamp: str = Field(description="when the run started, UTC, RFC 3339")
    duration_ms: int | None = None
    status: RunState
    test_cases: list[TestCase] = Field(default_factory=list)
    summary: Summary = Field(default_factory=Summary)
    artifacts: Artifacts = Field(default_factory=Artifacts)
    result: dict[str, Any] | None = Field(None, description="the verb's answer")


class VerifyReport(BaseModel):
    ok: bool
    problems: list[str]
    records_checked: int = 0
    files_checked: int = 0
