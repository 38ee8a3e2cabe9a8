"""Prometheus metrics, derived from the loop's events on the EventBus.

The loop already publishes everything worth counting (run_started, step, retrying, run_finished,
...), so metrics are a pure consumer of those events: no counters inside the loop, and whatever
drives a run (HTTP, SSE, MCP, the console) is counted the same way. Gauges that describe *now*
(sessions, active and paused runs) are read at scrape time.

Exposed at ``GET /metrics`` by vision.http.console; like every path but /healthz it needs the bearer
token when GLASSDESK_TOKEN is set (configure Prometheus with ``authorization: credentials: ...``).

Each Metrics object has its own registry, so several apps in one process (tests) never collide.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.process_collector import ProcessCollector

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RUN_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
UNKNOWN = "unknown"


class _NowCollector:
    """Gauges computed when Prometheus scrapes: sessions by status, runs in progress / paused."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]):
        self.snapshot = snapshot

    def describe(self):
        return []

    def collect(self):
        now = self.snapshot()
        sessions = GaugeMetricFamily("glassdesk_sessions", "Desktop sessions by status", labels=["status"])
        for status, count in sorted(now.get("sessions", {}).items()):
            sessions.add_metric([status], count)
        yield sessions
        yield GaugeMetricFamily("glassdesk_sessions_warm", "Sessions started ahead, ready to be claimed by a create "
                                "(glassdesk up --warm); not in glassdesk_sessions, counted toward the session limit",
                                value=now.get("warm", 0))
        yield GaugeMetricFamily("glassdesk_runs_active", "Runs executing right now", value=now.get("active", 0))
        yield GaugeMetricFamily("glassdesk_runs_paused", "Runs paused by an operator (incl. take-over)",
                                value=now.get("paused", 0))
        yield GaugeMetricFamily("glassdesk_runs_awaiting_approval", "Runs held for a safety-check decision",
                                value=now.get("awaiting", 0))


class Metrics:
    """Counters and histograms fed by ``observe(event)``; ``render()`` is the exposition text."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]] | None = None, *, process: bool = True):
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.runs_started = Counter("glassdesk_runs_started", "Runs started", ["model"], registry=r)
        self.runs = Counter("glassdesk_runs", "Runs finished, by final status", ["model", "status"], registry=r)
        self.verdicts = Counter("glassdesk_run_verdicts", "Runs whose model said done, by what was checked: verified "
                                "(every expectation held), failed_check (one did not), unverified (none given)",
                                ["model", "verdict"], registry=r)
        self.steps = Counter("glassdesk_steps", "Steps recorded (one model turn and its actions)", ["model"],
                             registry=r)
        self.actions = Counter("glassdesk_actions", "Actions executed, by kind", ["model", "action"], registry=r)
        self.errors = Counter("glassdesk_errors", "Errors by code; level=step (the run went on) or run (it ended)",
                              ["code", "level"], registry=r)
        self.retries = Counter("glassdesk_model_retries", "Model calls retried after a transient failure",
                               ["model"], registry=r)
        self.safety_checks = Counter("glassdesk_safety_checks", "Safety checks raised by a model", ["code"],
                                     registry=r)
        self.tokens = Counter("glassdesk_tokens", "Model tokens used", ["model", "kind"], registry=r)
        self.step_latency = Histogram("glassdesk_step_latency_seconds",
                                      "Time per step phase: model call, executing actions, waiting to settle",
                                      ["model", "phase"], buckets=LATENCY_BUCKETS, registry=r)
        self.run_duration = Histogram("glassdesk_run_duration_seconds", "Wall-clock time from start to finish",
                                      ["model"], buckets=RUN_BUCKETS, registry=r)
        # Evaluations the server runs (POST /api/v1/evals): the episodes by model and outcome, so a
        # model's success rate is watched over time (a drop after a provider's upgrade shows).
        self.eval_episodes = Counter("glassdesk_eval_episodes", "Evaluation episodes finished, by model, task and "
                                     "outcome: success or failure (the task's checks), environment_error (not the "
                                     "model's: a desktop or provider failure)", ["model", "task", "outcome"],
                                     registry=r)
        self.eval_false_claims = Counter("glassdesk_eval_false_claims", "Evaluation episodes whose model said done "
                                         "while the task's checks failed", ["model", "task"], registry=r)
        if snapshot is not None:
            r.register(_NowCollector(snapshot))
        if process:
            ProcessCollector(registry=r)
        self._models: dict[str, str] = {}      # trace_id -> model
        self._started: dict[str, float] = {}   # trace_id -> event time of run_started
        self._lock = threading.Lock()
        self.seen_seq = 0

    def _model(self, event: dict[str, Any]) -> str:
        return event.get("model") or self._models.get(event.get("trace_id", ""), UNKNOWN)

    def observe(self, event: dict[str, Any]) -> None:
        """Account one EventBus event. Unknown kinds are ignored; each seq is counted once."""
        with self._lock:
            seq = event.get("seq", 0)
            if seq and seq <= self.seen_seq:
                return
            self.seen_seq = max(self.seen_seq, seq)
            handler = getattr(self, f"_on_{event.get('kind')}", None)
            if handler:
                handler(event)

    def observe_all(self, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            self.observe(event)

    def _on_run_started(self, e: dict[str, Any]) -> None:
        model = e.get("model") or UNKNOWN
        trace_id = e.get("trace_id", "")
        self._models[trace_id] = model
        self._started[trace_id] = e.get("ts", 0.0)
        self.runs_started.labels(model).inc()

    def _on_step(self, e: dict[str, Any]) -> None:
        model = self._model(e)
        step = e.get("step") or {}
        self.steps.labels(model).inc()
        for phase in ("model", "exec", "settle"):
            ms = step.get(f"{phase}_ms")
            if ms is not None and (phase != "model" or ms > 0):  # a held turn replayed costs no model call
                self.step_latency.labels(model, phase).observe(ms / 1000)
        usage = step.get("usage") or {}
        for kind in TOKEN_KINDS:
            if usage.get(kind):
                self.tokens.labels(model, kind.removesuffix("_tokens")).inc(usage[kind])
        for action in step.get("actions") or []:
            self.actions.labels(model, str(action.get("action", UNKNOWN))).inc()
        if error := step.get("error"):
            self.errors.labels(error.get("code", UNKNOWN), "step").inc()

    def _on_retrying(self, e: dict[str, Any]) -> None:
        self.retries.labels(self._model(e)).inc()

    def _on_needs_confirmation(self, e: dict[str, Any]) -> None:
        for check in e.get("checks") or []:
            self.safety_checks.labels(str(check.get("code", UNKNOWN))).inc()

    def _on_run_finished(self, e: dict[str, Any]) -> None:
        model = self._model(e)
        trace_id = e.get("trace_id", "")
        self.runs.labels(model, e.get("status") or UNKNOWN).inc()
        if (verdict := run_verdict(e.get("status"), e.get("verified"))) is not None:
            self.verdicts.labels(model, verdict).inc()
        if error := e.get("error"):
            self.errors.labels(error.get("code", UNKNOWN), "run").inc()
        started = self._started.pop(trace_id, None)
        if started and e.get("ts"):
            self.run_duration.labels(model).observe(max(0.0, e["ts"] - started))
        self._models.pop(trace_id, None)

    def observe_episode(self, model: str, task: str, outcome: str, false_claim: bool) -> None:
        """An evaluation's episode, finished (vision.eval.service)."""
        self.eval_episodes.labels(model=model, task=task, outcome=outcome).inc()
        if false_claim:
            self.eval_false_claims.labels(model=model, task=task).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def run_verdict(status: str | None, verified: bool | None) -> str | None:
    """What was checked of a run whose model said done (pure): verified, failed_check or
    unverified; None for a run that ended otherwise (a model that gave up, a budget, a cancel)."""
    if verified is True:
        return "verified"
    if verified is False:
        return "failed_check"
    return "unverified" if status in ("done", "done_after_heal") else None
