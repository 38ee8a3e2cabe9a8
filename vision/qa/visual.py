"""Visual baselines: captured (capture_visual_baseline), compared (compare_visual_regression, and a
flow's ``visual_matches`` assertion through ``compare_now``) and approved, over the pixel
comparison (``vision.qa.diff``) and the versioned store (``vision.qa.baselines``).
"""

from __future__ import annotations

import time

from desktop.errors import ElementNotFound, InvalidRequest
from desktop.session.manager import Session
from vision.evidence.qa_runs import QaRunStore, RunWriter, corrupt_if_malformed, reading_run
from vision.models.qa import (
    MAX_DIFF_REGIONS,
    AppliedLimits,
    BaselineResult,
    CaptureBaselineRequest,
    CompareRequest,
    CompareResult,
    DiffRegion,
    Shot,
    ShotComparison,
    VisualLimits,
    check_name,
)
from vision.qa.baselines import BaselineStore
from vision.qa.diff import ImageSizeMismatch, compare, decode_png, diff_image, judge, mask_boxes
from vision.qa.driver import Driver, FinishRun, StartRun, _stem

# The XFCE panel at the bottom of the display (desktop/assets/xfce4-panel.xml; its window is at
# y 1051, 29 px tall): masked in every display-wide comparison. Its window buttons show whatever
# else is open on the desktop (their number, titles and widths), not the page compared.
PANEL_BOX = [0, 1051, 1920, 1080]


class Visual:
    """Baselines captured, compared (with a run, or within a flow's step) and approved."""

    def __init__(self, driver: Driver, baselines: BaselineStore, runs: QaRunStore, run: StartRun, finish: FinishRun):
        self.driver = driver
        self.desktops = driver.desktops
        self.pages = driver.pages
        self.baselines = baselines
        self.runs = runs
        self._run = run
        self._finish = finish

    def _capture(self, session: Session, scope: str, selectors: list[str],
                 missing: dict[str, str] | None = None) -> dict[str, bytes]:
        """The page (or display) shot and one per component selector, each once the screen is
        still. With ``missing``, a component not on the page is noted there (selector -> why)
        instead of raising."""
        if scope == "display":
            shots = {"page": _still(lambda: self.desktops.screenshot(session.id).png, DISPLAY_GAP_S)}
        else:
            shots = {"page": _still(lambda: self.pages.screenshot(session.id, full_page=scope == "full_page"))}
        for selector in selectors:
            try:
                shots[selector] = _still(lambda selector=selector: self.pages.screenshot(session.id, selector=selector))
            except ElementNotFound as exc:
                if missing is None:
                    raise
                missing[selector] = exc.message
        return shots

    def _mask_boxes(self, session: Session, mask: list, scope: str) -> list[list[int]]:
        boxes = [list(entry) for entry in mask if not isinstance(entry, str)]
        selectors = [entry for entry in mask if isinstance(entry, str)]
        if selectors:
            boxes += self.pages.boxes(session.id, selectors, scope)
        if scope == "display":
            boxes.append(list(PANEL_BOX))
        return boxes

    def capture_visual_baseline(self, session_id: str | None, request: CaptureBaselineRequest) -> BaselineResult:
        session = self.driver.acting(session_id, request.url) if request.url else self.desktops.session(session_id)
        self.driver.check_selectors(session, request.selectors + [m for m in request.mask if isinstance(m, str)])
        with self._run("capture_visual_baseline", request.name, session, request) as run:
            if request.url:
                self.driver.navigate(session, request.url, time.monotonic() + request.timeout_ms / 1000)
            scope = request.scope
            shots = self._capture(session, scope, request.selectors)
            boxes = self._mask_boxes(session, request.mask, scope)
            url = self.pages.state(session.id).url if scope != "display" or request.url else request.url
            meta = self.baselines.create(request.name, shots, url=url, scope=scope, mask=request.mask,
                                         mask_boxes=boxes)
            names = []
            for shot_name, png in shots.items():
                names.append(run.artifact(f"baseline-{_stem(shot_name)}", png, shot=shot_name).name)
            result = BaselineResult(test_run_id=run.run_id, baseline_id=meta.id, version=meta.version, scope=scope,
                                    screenshots=[Shot(name=s.name, sha256=s.sha256) for s in meta.screenshots],
                                    mask_boxes=boxes)
            return self._finish(run, "passed", result, {
                "name": f"baseline {request.name}", "screenshots": names})

    def compare_visual_regression(self, session_id: str | None, request: CompareRequest) -> CompareResult:
        meta = self.baselines.get(request.baseline_id, request.version)  # a missing one: 404, nothing made
        session = self.driver.acting(session_id, request.url) if request.url else self.desktops.session(session_id)
        self.driver.check_selectors(session, [m for m in request.mask if isinstance(m, str)])
        with self._run("compare_visual_regression", request.name, session, request) as run:
            receipt = getattr(run, "video", None)
            if receipt is not None:  # the verb is the one step of its film: its chapter, for a viewer to seek to
                receipt.chapter(run.redacted(f"step 1: compare with baseline {meta.id} v{meta.version}"))
            if request.url:
                self.driver.navigate(session, request.url, time.monotonic() + request.timeout_ms / 1000)
            result = self._compare(run, session, meta, request, ignore_antialiasing=request.ignore_antialiasing,
                                   mask=request.mask)
            shots = [a for s in result.shots for a in (s.baseline_image, s.current_image, s.diff_image) if a]
            return self._finish(run, "passed" if result.passed else "failed", result, {
                "name": request.name or f"visual regression: {meta.id} v{meta.version}",
                "screenshots": [a.name for a in shots], "failure_reason": result.reason})

    def compare_now(self, session: Session, baseline_id: str, options: VisualLimits,
                    run: RunWriter | None = None) -> dict:
        """A flow's visual_matches: the comparison within the flow's run (``run``: its images are
        kept there, named after the baseline), not a run of its own."""
        meta = self.baselines.get(check_name(baseline_id))
        return self._compare(run, session, meta, options, prefix=f"{meta.id}-").model_dump(mode="json")

    def _compare(self, run: RunWriter | None, session: Session, meta, options: VisualLimits, *,
                 ignore_antialiasing: bool = True, mask: list | None = None, prefix: str = "") -> CompareResult:
        limits = options.limits()
        components = [s.name for s in meta.screenshots if s.name != "page"]
        missing: dict[str, str] = {}
        current = self._capture(session, meta.scope, components, missing)
        selectors = [m for m in meta.mask if isinstance(m, str)] + [m for m in mask or [] if isinstance(m, str)]
        boxes = [list(b) for b in meta.mask_boxes] + [list(m) for m in mask or [] if not isinstance(m, str)]
        if selectors:
            boxes += self.pages.boxes(session.id, selectors, meta.scope)
        if meta.scope == "display" and PANEL_BOX not in boxes:
            boxes.append(list(PANEL_BOX))
        shots: list[ShotComparison] = []
        for shot in meta.screenshots:
            base_png = self.baselines.image(meta.id, shot.name, meta.version)
            stem = prefix + _stem(shot.name)
            if shot.name in missing:  # a component gone from the page: that shot fails, with why
                gone = ShotComparison(name=shot.name, passed=False, diff_pixels=0, diff_ratio=1.0,
                                      diff_percentage=100.0, baseline_sha256=shot.sha256, current_sha256="",
                                      reason=f"not on the page now ({missing[shot.name]})")
                if run is not None:
                    gone.baseline_image = run.artifact(f"baseline-{stem}", base_png, shot=shot.name)
                shots.append(gone)
                continue
            now_png = current[shot.name]
            base, now = decode_png(base_png), decode_png(now_png)
            compared = ShotComparison(name=shot.name, passed=False, diff_pixels=0, diff_percentage=0.0,
                                      baseline_sha256=shot.sha256, current_sha256=_sha256(now_png))
            picture = None
            try:
                masked = mask_boxes(base.shape[0], base.shape[1], boxes) if shot.name == "page" and boxes else None
                diff = compare(base, now, pixel_threshold=options.pixel_threshold,
                               ignore_antialiasing=ignore_antialiasing, mask=masked)
                compared.diff_pixels = diff.diff_pixels
                compared.diff_ratio = round(diff.diff_fraction, 8)
                compared.diff_percentage = round(diff.diff_percentage, 6)
                compared.regions = len(diff.regions)
                listed = [DiffRegion(box=list(r.box), pixels=r.pixels) for r in diff.regions[:MAX_DIFF_REGIONS]]
                compared.diff_regions = listed
                compared.diff_regions_omitted = len(diff.regions) - len(listed)
                if listed:
                    compared.largest_region = listed[0]
                reasons = judge(diff, limits)
                compared.passed = not reasons
                compared.reason = "; ".join(reasons) or None
                # Whenever a pixel differs, passed or not: what was let through is there to be seen.
                if diff.diff_pixels or (diff.antialiased is not None and diff.antialiased.any()):
                    picture = diff_image(base, now, diff, max_region_pixels=limits.max_region_pixels)
            except ImageSizeMismatch as exc:
                compared.reason = str(exc)
                compared.diff_pixels = int(now.shape[0] * now.shape[1])
                compared.diff_ratio, compared.diff_percentage = 1.0, 100.0
            if run is not None:
                compared.baseline_image = run.artifact(f"baseline-{stem}", base_png, shot=shot.name)
                compared.current_image = run.artifact(f"current-{stem}", now_png, shot=shot.name)
                if picture is not None:
                    compared.diff_image = run.artifact(f"diff-{stem}", picture, kind="diff", shot=shot.name)
            shots.append(compared)
        page = shots[0]
        failed = [s for s in shots if not s.passed]
        reason = "; ".join(f"{s.name}: {s.reason}" for s in failed) or None
        return CompareResult(test_run_id=run.run_id if run else "", passed=not failed,
                             diff_ratio=page.diff_ratio, diff_percentage=page.diff_percentage,
                             diff_pixels=page.diff_pixels, largest_region=page.largest_region,
                             diff_regions=page.diff_regions, diff_regions_omitted=page.diff_regions_omitted,
                             diff_image=page.diff_image, baseline_sha256=page.baseline_sha256,
                             current_sha256=page.current_sha256, baseline_id=meta.id, baseline_version=meta.version,
                             threshold=limits.max_diff_pixel_ratio,
                             limits=AppliedLimits(max_diff_pixels=limits.max_diff_pixels,
                                                  max_diff_pixel_ratio=limits.max_diff_pixel_ratio,
                                                  max_region_pixels=limits.max_region_pixels,
                                                  pixel_threshold=options.pixel_threshold),
                             shots=shots, reason=reason)

    def baseline_list(self) -> list:
        return self.baselines.list()

    def approve(self, baseline_id: str, test_run_id: str) -> BaselineResult:
        """Promote a failed comparison's current images to the baseline's next version."""
        try:
            check_name(baseline_id)
        except ValueError as exc:
            raise InvalidRequest(f"baseline_id: {exc}") from None
        meta = self.baselines.get(baseline_id)
        with reading_run(test_run_id):
            run = self.runs.load(test_run_id)
        result = run.result or {}
        if run.verb == "verify_user_flow":
            # A flow's failed visual_matches step keeps its comparison as the step's detail
            # (vision.qa.flow), with the images in the flow's run: promoted the same way.
            result = next((s.detail for case in run.test_cases for s in case.steps if s.status == "failed"
                           and s.detail.get("baseline_id") == baseline_id and s.detail.get("shots")), {})
        elif run.verb != "compare_visual_regression":
            result = {}
        if result.get("baseline_id") != baseline_id:
            raise InvalidRequest(f"run {test_run_id} is not a comparison with baseline {baseline_id!r}; approve "
                                 "the test_run_id that compare_visual_regression answered, or a flow's whose "
                                 "visual_matches step failed")
        if run.status != "failed":
            raise InvalidRequest(f"run {test_run_id} {run.status}; only a failed comparison's images are promoted")
        check = self.runs.verify(test_run_id)
        if not check.ok:
            raise InvalidRequest(f"run {test_run_id}'s evidence does not verify ({'; '.join(check.problems)}); "
                                 "nothing was promoted")
        shots: dict[str, bytes] = {}
        with reading_run(test_run_id), corrupt_if_malformed():
            for shot in result.get("shots") or []:
                image = shot.get("current_image")
                if not image:
                    raise InvalidRequest(f"run {test_run_id} has no current image of {shot['name']!r} (it was not on "
                                         "the page): there is nothing to promote; compare again")
                shots[shot["name"]] = self.runs.file(test_run_id, image.get("name", "")).read_bytes()
            compared = int(result["baseline_version"])
        if compared == meta.version and [s.name for s in meta.screenshots] != list(shots):
            raise InvalidRequest(f"run {test_run_id} compared other shots than baseline {baseline_id!r} has now")
        promoted = self.baselines.promote(baseline_id, shots, over_version=compared, from_run=test_run_id)
        return BaselineResult(test_run_id=test_run_id, baseline_id=promoted.id, version=promoted.version,
                              scope=promoted.scope, screenshots=[Shot(name=s.name, sha256=s.sha256)
                                                                 for s in promoted.screenshots],
                              mask_boxes=promoted.mask_boxes)


# A shot is taken again until two in a row are the same, as Playwright's toHaveScreenshot does: a
# comparison strict enough to catch a changed icon also catches the browser's loading throbber
# (the tab's spinner and the stop button linger a moment after the page's load event, seen in
# display shots) and whatever the page still animates. The display is grabbed in milliseconds,
# so its two shots are DISPLAY_GAP_S apart (several of the throbber's frames); a page screenshot
# waits for a frame of its own. A screen still changing at STILL_TIMEOUT_S is taken as it is then.
DISPLAY_GAP_S = 0.1
STILL_TIMEOUT_S = 3.0


def _still(take, gap_s: float = 0.0) -> bytes:
    """``take()`` again until it answers the same bytes twice in a row (at most STILL_TIMEOUT_S)."""
    deadline = time.monotonic() + STILL_TIMEOUT_S
    shot = take()
    while time.monotonic() < deadline:
        if gap_s:
            time.sleep(gap_s)
        again = take()
        if again == shot:
            break
        shot = again
    return shot


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
