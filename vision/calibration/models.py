"""The calibration's request and answer (pure pydantic: the wire models of POST .../calibrate, the
MCP tool vision_calibrate and the client's ``calibrate``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_TARGETS = 48


class CalibrateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="provider/model to calibrate, as for a vision run (anthropic/..., "
                                                "openai/..., chat/..., scripted); default from config or API keys")
    targets: int = Field(12, ge=1, le=MAX_TARGETS, description="how many numbered targets, spread over the "
                                                               "whole screen, corners included")
    max_turns: int = Field(3, ge=1, le=10, description="model turns per target before it counts as missed (a "
                                                       "model may look at the screen first)")
    budget_seconds: float = Field(120, gt=0, le=600, description="wall-clock budget per target")
    script: list[dict] | None = Field(None, description="for model 'scripted' only: one action per target, in "
                                                        "target order, each replayed as that target's answer")


class Point(BaseModel):
    x: int
    y: int


class ModelCall(BaseModel):
    """One call of the model's answer, as it wrote it (its own coordinate space)."""

    name: str
    input: dict
    error: str | None = None


class TargetResult(BaseModel):
    number: int = Field(description="the number shown in the target, 1-based")
    target: Point = Field(description="the target's centre, display pixels")
    aimed: Point | None = Field(None, description="where the model's click was sent, display pixels: its "
                                                  "answer through the provider's coordinate conversion")
    landed: Point | None = Field(None, description="where the page saw the press, display pixels")
    dx: int | None = Field(None, description="landed minus target, display pixels")
    dy: int | None = None
    error_px: float | None = Field(None, description="distance from the target's centre, display pixels")
    status: Literal["clicked", "missed"] = Field(description="missed: no press reached the page")
    run_status: str = Field(description="the vision run's status (done once the model clicked)")
    trace_id: str
    turns: int = Field(description="model turns this target took")
    answer: list[list[ModelCall]] = Field(default_factory=list, description="the model's raw answer, per turn")
    text: str = Field("", description="the model's text, its turns joined")
    error: str | None = None


class CalibrationResult(BaseModel):
    model: str
    display: Point = Field(description="the display's size")
    model_image: Point | None = Field(None, description="the size of the screenshot the model was shown")
    targets: list[TargetResult]
    clicked: int = Field(description="targets whose click reached the page")
    missed: int
    mean_error_px: float | None = Field(None, description="mean distance over the clicked targets")
    worst_error_px: float | None = None
    mean_dx: float | None = Field(None, description="mean offset on x over the clicked targets: a bias shows here")
    mean_dy: float | None = None
