"""An evaluation run by the server: its request and its status (pure pydantic, for the doors and
the client; the evaluation itself is vision.eval)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_EPISODES = 1000
MAX_PARALLEL = 16
MAX_RETRIES = 5


Outcome = Literal["success", "failure", "environment_error"]


class Episode(BaseModel):
    model: str
    task: str
    episode: int
    outcome: Outcome
    claimed: bool = Field(False, description="the model said done")
    status: str | None = Field(None, description="how the run ended")
    error: dict | None = None
    steps: int = 0
    tokens: int = 0
    trace_id: str | None = None
    report_url: str | None = None
    instruction: str | None = None
    checks: list[dict] = Field(default_factory=list)
    reward: dict[str, float] | None = Field(None, description="a benchmark's own reward, where it gives one")
    overhead_s: float = Field(0.0, description="a clean desktop, the start and the setup: before the model's turn")
    wall_s: float = 0.0
    environment_errors: list[str] = Field(default_factory=list, description="attempts spoiled by the environment, "
                                                                            "each tried again on a fresh desktop")

    @property
    def false_claim(self) -> bool:
        return self.claimed and self.outcome == "failure"


class Rate(BaseModel):
    model: str
    task: str | None = Field(None, description="null: every task of the model")
    episodes: int = Field(description="episodes the environment let finish: the rate's denominator")
    successes: int
    rate: float | None
    ci95: tuple[float, float]
    false_claims: int
    environment_errors: int = Field(description="episodes never carried out (every attempt spoiled), left out of "
                                                "the rate")
    retried: int = Field(description="attempts spoiled by the environment and tried again")
    mean_steps: float | None
    median_wall_s: float | None
    tokens: int
    fell: bool | None = Field(None, description="with a baseline: the rate fell beyond chance (Fisher's exact test, "
                                                "one-sided, p < 0.05)")
    baseline_rate: float | None = None


class EvalResult(BaseModel):
    eval_id: str
    name: str
    started_at: str
    finished_at: str | None = None
    models: list[str]
    tasks: list[str]
    episodes_per_task: int
    parallel: int
    baseline: str | None = None
    rates: list[Rate] = Field(default_factory=list, description="per model and task, then per model (task null)")
    episodes: list[Episode] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def rate(self, model: str, task: str | None = None) -> Rate | None:
        return next((r for r in self.rates if r.model == model and r.task == task), None)


class EvalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: str | list[dict[str, Any]] = Field(
        description="miniwob:TASK,TASK (or miniwob:all, miniwob:oracle), or the tasks themselves as a task file "
                    "lists them (docs/eval.md)")
    models: list[str] = Field(min_length=1, max_length=10,
                              description="provider/model names, or oracle (MiniWoB++ only); each once")
    episodes: int = Field(5, ge=1, le=MAX_EPISODES, description="per task and model")
    parallel: int = Field(1, ge=1, le=MAX_PARALLEL, description="episodes at once, each on its own desktop")
    retries: int = Field(2, ge=0, le=MAX_RETRIES, description="fresh desktops a spoiled episode is tried on")
    fresh: Literal["new", "reset", "clear"] = Field("new", description="how each episode gets a clean desktop")
    record_video: bool = False
    name: str | None = Field(None, min_length=1, max_length=200)


class EvalRef(BaseModel):
    """One evaluation, by the id its start answered."""

    model_config = ConfigDict(extra="forbid")

    eval_id: str = Field(description="the id eval_start (POST /evals) answered")


class EvalStatus(BaseModel):
    eval_id: str
    status: Literal["running", "done", "failed"]
    episodes_done: int
    episodes_total: int
    error: str | None = Field(None, description="why a failed evaluation stopped")
    result: EvalResult | None = Field(None, description="the rates and every episode, once done")
