"""Calibration as an operation of the catalogue (desktop.ops.declare): the REST route
POST /sessions/{id}/calibrate, the MCP tool ``vision_calibrate`` and the client's ``calibrate``, from
this one declaration."""

from __future__ import annotations

from desktop.ops.declare import Hints, Operation, Rest, Tool
from vision.calibration.models import CalibrateRequest, CalibrationResult

DESCRIPTION = (
    "Acts on the VISIBLE desktop: shows numbered targets over the whole screen (full screen, in a tab of its own, "
    "closed afterwards), asks `model` to click each one (one vision run per target, through the same provider, "
    "screenshot scaling and coordinate conversion as vision_act) and measures where each click landed, as the page "
    "saw it. Returns each target's error in display pixels (dx, dy, distance), the mean and the worst, and the "
    "model's raw answers: how far to trust this model's clicks at this resolution. Costs one or two model calls "
    "per target.")


def summary_text(_request: CalibrateRequest | None, result: CalibrationResult) -> str:
    head = (f"{result.model}: {result.clicked} of {len(result.targets)} targets clicked; mean error "
            f"{result.mean_error_px} px, worst {result.worst_error_px} px, mean offset "
            f"({result.mean_dx}, {result.mean_dy})")
    lines = [head]
    for t in result.targets:
        where = (f"landed ({t.landed.x}, {t.landed.y}), off ({t.dx}, {t.dy}) = {t.error_px} px" if t.landed
                 else f"MISSED: {t.error}")
        lines.append(f"  {t.number}: target ({t.target.x}, {t.target.y}) {where}")
    return "\n".join(lines)


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "calibration", "calibrate", CalibrateRequest, CalibrationResult, acts=True,
        call=lambda service, session, request: service.calibrate(session, request),
        rest=Rest("POST", "/calibrate", tags=("vision",), name="calibrate",
                  summary="how precisely a model clicks on this display: targets, one run each, errors in pixels",
                  description="Shows numbered targets over the whole screen and asks the model to click each, "
                              "through the same provider and coordinate conversion as a vision run; answers each "
                              "target's error in display pixels, the mean and the worst (docs/calibration.md)."),
        tool=Tool("vision_calibrate", "Measure how precisely a model clicks", DESCRIPTION,
                  Hints(open_world=True), summary_text, summary=False, group="desktop")),
)
