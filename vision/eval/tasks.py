"""A task: where it starts, its setup (not shown to the agent), what decides success, its budgets;
and a task set read from YAML with every problem listed at once (pure but for the read)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from desktop.errors import describe_validation
from vision.models import MAX_STEPS_CAP
from vision.models.qa import Expectation, FlowStep, Url

TaskId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$",
                              description="letters, digits, '.', '_', ':', '-'")]
EPISODE = "{episode}"  # in a start url: the episode's number, so each model sees the same problems in turn


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Start(_Body):
    url: Url | None = Field(None, description=f"opened on a cleared browser before the setup; {EPISODE} in it is "
                                              "the episode's number (a seed, for pages that take one)")
    state: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
                              description="a saved state each episode's new desktop starts from (POST "
                                          "/sessions/{id}/states): logged in; always a new desktop, whatever --fresh")


class Task(_Body):
    id: TaskId
    instruction: str | None = Field(None, min_length=1, max_length=10_000, description="what the agent is told")
    instruction_from: str | None = Field(None, min_length=1, max_length=2000,
                                         description="a CSS selector whose text, read after the setup, is the "
                                                     "instruction (a page that writes its own, as MiniWoB++'s #query)")
    start: Start = Field(default_factory=Start)
    setup: list[FlowStep] = Field(default_factory=list, max_length=200,
                                  description="flow steps run before the agent starts, not shown to it")
    expect: list[Expectation] = Field(min_length=1, max_length=50,
                                      description="what must hold at the end: the episode succeeded only if every "
                                                  "one does (the verified-run checks)")
    max_steps: int = Field(10, ge=1, le=MAX_STEPS_CAP)
    budget_seconds: float = Field(300, gt=0, le=3600)

    @model_validator(mode="after")
    def _one_instruction(self) -> Task:
        if (self.instruction is None) == (self.instruction_from is None):
            raise ValueError("give one of instruction or instruction_from")
        return self

    def start_url(self, episode: int) -> str | None:
        return self.start.url.replace(EPISODE, str(episode)) if self.start.url else None


NAME_MAX = 200  # characters of a task set's name


class TaskSet(_Body):
    name: str = Field(min_length=1, max_length=NAME_MAX)
    tasks: list[Task] = Field(min_length=1, max_length=1000)

    @model_validator(mode="after")
    def _unique_ids(self) -> TaskSet:
        twice = [task_id for task_id, count in Counter(t.id for t in self.tasks).items() if count > 1]
        if twice:
            raise ValueError(f"task ids must be unique: {', '.join(twice)} given more than once")
        return self


class TaskError(ValueError):
    """A task set that cannot be run as given; the message lists every problem, one line each."""


def parse_tasks(data, name: str) -> TaskSet:
    """A task set from parsed YAML: ``{name, tasks: [...]}`` or a bare list of tasks. Each task is
    checked on its own, so every bad task is named at once."""
    if isinstance(data, list):
        data = {"name": name, "tasks": data}
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list) or not data["tasks"]:
        raise TaskError(f"{name}: a task set is a mapping with a non-empty list `tasks` (or that list alone)")
    problems = [f"{name}: unknown key(s) {', '.join(map(str, set(data) - {'name', 'tasks'}))}; a task set takes "
                "name and tasks"] if set(data) - {"name", "tasks"} else []
    tasks = []
    for number, entry in enumerate(data["tasks"], 1):
        label = entry.get("id") if isinstance(entry, dict) and isinstance(entry.get("id"), str) else None
        try:
            tasks.append(Task.model_validate(entry))
        except ValidationError as exc:
            problems.append(f"{name}: task {number}{f' ({label})' if label else ''}: {describe_validation(exc)}")
    if not problems:
        try:
            return TaskSet(name=str(data.get("name") or name), tasks=tasks)
        except ValidationError as exc:
            problems.append(f"{name}: {describe_validation(exc)}")
    raise TaskError("\n".join(problems))


def load_tasks(path: Path) -> TaskSet:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise TaskError(f"{path} is not valid YAML: {exc}") from None
    return parse_tasks(data, str(path))
