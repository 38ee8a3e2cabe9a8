"""The operator console: a web page to watch, steer and audit the agent, and the API it uses.

``install_console(app, services)`` adds:

- ``GET /``                         the console page (static HTML; holds no secret, loads without auth)
- ``/console/assets/*``             its JS and CSS; ``/console/novnc/*`` the noVNC client (Debian's)
- ``GET  /api/v1/console/info``     what the start form offers (models), feature switches
- ``GET  /api/v1/console/sessions`` every session with its current or last run (a snapshot)
- ``GET  /api/v1/sessions/{id}/live``      how to connect the view-only live view (VNC password)
- ``POST /api/v1/sessions/{id}/takeover``  {"on": true}: pause the agent, get the control password;
                                           {"on": false}: back to view-only, resume the agent
- ``GET  /api/v1/events``           Server-Sent Events from the EventBus, replaying recent ones
- ``GET  /api/v1/stats``            per-model statistics computed from the trace store
- ``GET  /metrics``                 Prometheus exposition (vision.metrics)

Auth: with GLASSDESK_TOKEN set, everything but ``/``, ``/console/*`` (public code) and /healthz
needs ``Authorization: Bearer``. The page asks for the token, keeps it in sessionStorage and sends
it on every fetch, the event stream included (a fetch-read stream, not EventSource, which cannot
send headers). VNC passwords reach the browser only as answers to those authenticated calls; the
control password only when the operator takes over.

On the desktop itself, a Narrator shows the agent's current action in a small click-through strip
(desktop.overlay) that moves away from the action's target.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from desktop import overlay as overlay_mod
from desktop.sessions import LiveView
from desktop.stack import StackError, novnc_dir
from vision.config import DEFAULT_ANTHROPIC, DEFAULT_OPENAI
from vision.events import EventBus
from vision.metrics import Metrics
from vision.trace import TraceMeta, TraceStore

log = logging.getLogger("glassdesk.console")

STATIC = Path(__file__).parent / "static"
TAKEOVER_REASON = "operator took over"
KEEPALIVE_S = 15.0
FINAL = ("done", "failed", "max_steps", "budget_exceeded", "cancelled")
# How the on-desktop strip words a finished run. Not "cancelled": the strip is in the screenshots,
# and a text-matching model looking for a "Cancel" button must not find it there.
FINISHED_WORDS = {"done": "done", "failed": "failed", "cancelled": "stopped by the operator",
                  "max_steps": "step limit reached", "budget_exceeded": "budget used up"}

# The console page may talk to its own origin and to the websockify port of a session (another
# port: CSP 'self' does not cover it, hence ws:/wss:). No inline script, no framing. Inline style
# is allowed for one reason: the trace report opens as a blob: document made by this page (its
# screenshots must be fetched with the token), such documents inherit this policy, and the report
# is styled inline. The console builds its DOM with textContent only, so no markup is injected.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' blob: data:; "
       "connect-src 'self' ws: wss:; font-src 'self'; object-src 'none'; base-uri 'none'; "
       "form-action 'none'; frame-ancestors 'none'")
PAGE_HEADERS = {"content-security-policy": CSP, "cache-control": "no-store", "referrer-policy": "no-referrer",
                "x-content-type-options": "nosniff", "x-frame-options": "DENY"}


# ------------------------------------------------------------------------------------ wording


def short_action(action: dict[str, Any]) -> str:
    """A terse line for the on-desktop strip. Deliberately free of page words (typed text is only
    counted): the strip is in the screenshots, and text-matching models must not find it there."""
    kind = str(action.get("action", "?"))
    mods = "+".join(action.get("modifiers") or [])
    name = kind.replace("_", " ")
    if action.get("button") not in (None, "left"):
        name = f"{action['button']} {name}"
    if mods:
        name = f"{mods}+{name}"
    at = f"({action['x']}, {action['y']})" if action.get("x") is not None and action.get("y") is not None else ""
    if kind == "drag" and action.get("path"):
        a, b = action["path"][0], action["path"][-1]
        return f"drag ({a['x']}, {a['y']}) → ({b['x']}, {b['y']})"
    if kind == "scroll":
        return f"scroll {action.get('direction', '')} ×{action.get('amount', '?')} {at}".strip()
    if kind == "type":
        n = len(str(action.get("text", "")))
        return f"type {n} character{'s' if n != 1 else ''}"
    if kind in ("key", "hold_key"):
        keys = action.get("keys")
        keys = " ".join(keys) if isinstance(keys, list) else str(keys or "")
        return f"{name} {keys[:40]}"
    if kind == "wait":
        return f"wait {action.get('duration_ms', 0) / 1000:g} s"
    return f"{name} {at}".strip()


# ------------------------------------------------------------------------------------ the bus tap


def latest_seq(bus: EventBus, hint: int = 0) -> int:
    recent = bus.recent(hint)
    return recent[-1]["seq"] if recent else hint


class BusListener:
    """Feeds every EventBus event, in order, to plain (synchronous) handlers on one thread.

    The bus delivers to asyncio queues, so the thread runs its own small event loop. Events still
    in the bus's recent buffer when it starts are replayed first, so nothing published before the
    console existed is lost.
    """

    def __init__(self, bus: EventBus, handlers: list):
        self.bus = bus
        self.handlers = handlers
        self.processed_seq = 0
        self._cond = threading.Condition()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._consume()), daemon=True,
                                        name="glassdesk-console-events")
        self._thread.start()
        self._ready.wait(5)

    async def _consume(self) -> None:
        queue = self.bus.subscribe()
        try:
            last = 0
            for event in self.bus.recent(0):
                self._dispatch(event)
                last = event["seq"]
            self._ready.set()
            while True:
                event = await queue.get()
                if event["seq"] > last:
                    last = event["seq"]
                    self._dispatch(event)
        finally:
            self.bus.unsubscribe(queue)

    def _dispatch(self, event: dict) -> None:
        for handler in self.handlers:
            try:
                handler(event)
            except Exception:  # one handler's bug must not starve the others
                log.exception("console event handler failed on %s", event.get("kind"))
        with self._cond:
            self.processed_seq = event["seq"]
            self._cond.notify_all()

    def caught_up(self, timeout: float = 2.0) -> bool:
        """Wait until every event published so far has been handled."""
        target = latest_seq(self.bus, self.processed_seq)
        with self._cond:
            return self._cond.wait_for(lambda: self.processed_seq >= target, timeout)


# ------------------------------------------------------------------------------------ on the desktop


class Narrator:
    """Shows the agent's current action on the session's own desktop (desktop.overlay)."""

    def __init__(self, manager, enabled: bool = True):
        self.manager = manager
        self.enabled = enabled
        self._overlays: dict[str, overlay_mod.Overlay] = {}
        self._failed: set[str] = set()
        self._runs: dict[str, dict] = {}  # session_id -> {"max_steps": N, "step": k}

    def _overlay(self, session_id: str) -> overlay_mod.Overlay | None:
        session = self.manager.sessions.get(session_id)
        if session is None or session.status != "ready":
            return None
        current = self._overlays.get(session_id)
        if current is not None and current.alive and current.display_name == session.stack.display:
            return current
        if current is not None:
            current.close()
        if session_id in self._failed:
            return None
        try:
            current = self._overlays[session_id] = overlay_mod.Overlay(session.stack.display)
            return current
        except Exception as exc:
            self._failed.add(session_id)
            log.warning("no on-desktop status for session %s: %s", session_id, exc)
            return None

    def observe(self, event: dict) -> None:
        for sid in [s for s in self._overlays if s not in self.manager.sessions]:
            self._overlays.pop(sid).close()
        if not self.enabled or not event.get("session_id"):
            return
        shown = self.text_for(event)
        if shown is None:
            return
        overlay = self._overlay(event["session_id"])
        if overlay is not None:
            text, tone, avoid, hide_after = shown
            overlay.show(text, tone, avoid=avoid, hide_after=hide_after)

    def text_for(self, event: dict) -> tuple[str, str, list, float | None] | None:
        """(text, tone, points to avoid, hide after s) for an event, or None to leave the strip be."""
        kind, sid = event.get("kind"), event.get("session_id")
        run = self._runs.setdefault(sid, {"max_steps": None, "step": 0})

        def of(k: int) -> str:
            return f"step {k}/{run['max_steps']}" if run["max_steps"] else f"step {k}"

        if kind == "run_started":
            run.update(max_steps=event.get("max_steps"), step=0)
            return f"{of(1)} · thinking…", "wait", [], None
        if kind == "action":
            action = event.get("action") or {}
            run["step"] = event.get("step") or run["step"]
            return f"{of(run['step'])} · {short_action(action)}", "act", overlay_mod.action_points(action), None
        if kind == "step":
            step = (event.get("step") or {}).get("index", run["step"])
            run["step"] = step
            run["max_steps"] = event.get("max_steps") or run["max_steps"]
            return f"{of(step + 1)} · thinking…", "wait", [], None
        if kind == "retrying":
            return f"model busy · retry {event.get('attempt')} in {event.get('wait_s', 0):.0f} s", "wait", [], None
        if kind == "needs_confirmation":
            return "waiting for the operator to approve", "wait", [], None
        if kind == "acknowledged":
            return "approved by the operator · continuing", "act", [], None
        if kind == "paused":
            return f"paused · {event.get('reason') or 'by the operator'}", "wait", [], None
        if kind == "resumed":
            return "resumed", "act", [], 3.0
        if kind == "takeover":
            return ("operator has control", "wait", [], None) if event.get("on") else \
                   ("agent has control again", "act", [], 3.0)
        if kind == "run_finished":
            self._runs.pop(sid, None)
            status = str(event.get("status", "finished"))
            steps = event.get("steps")
            tone = "ok" if status == "done" else "bad" if status in ("failed", "cancelled") else "wait"
            suffix = f" · {steps} step{'s' if steps != 1 else ''}" if steps is not None else ""
            return f"{FINISHED_WORDS.get(status, status)}{suffix}", tone, [], 4.0
        return None

    def close(self) -> None:
        for overlay in self._overlays.values():
            overlay.close()
        self._overlays.clear()


# ------------------------------------------------------------------------------------ statistics


def trace_summary(meta: TraceMeta, steps: list) -> dict[str, Any]:
    """What the statistics need from one finished trace."""
    timed = [s for s in steps if s.model_ms is not None]
    return {
        "model": meta.model, "status": meta.status, "steps": meta.steps,
        "tokens": meta.usage.input_tokens + meta.usage.output_tokens,
        "step_ms": [(s.model_ms or 0) + (s.exec_ms or 0) + (s.settle_ms or 0) for s in timed],
        "model_ms": [s.model_ms or 0 for s in timed if s.model_ms],
        "exec_ms": [s.exec_ms or 0 for s in timed],
        "settle_ms": [s.settle_ms or 0 for s in timed],
        "duration_s": meta.duration_s,
    }


def model_stats(summaries: list[dict[str, Any]], running: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Per model: runs, done rate, mean steps / tokens / step latency. Pure; newest model first."""
    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 1) if values else None

    by_model: dict[str, list[dict]] = {}
    for summary in summaries:
        by_model.setdefault(summary["model"], []).append(summary)
    out = []
    for model in sorted(set(by_model) | set(running or {})):
        runs = by_model.get(model, [])
        statuses: dict[str, int] = {}
        for r in runs:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        done = statuses.get("done", 0)
        step_ms = [v for r in runs for v in r["step_ms"]]
        out.append({
            "model": model, "runs": len(runs), "running": (running or {}).get(model, 0), "done": done,
            "done_rate": round(done / len(runs), 3) if runs else None, "statuses": statuses,
            "mean_steps": mean([r["steps"] for r in runs]), "mean_tokens": mean([r["tokens"] for r in runs]),
            "mean_step_ms": mean(step_ms), "steps_timed": len(step_ms),
            "mean_model_ms": mean([v for r in runs for v in r["model_ms"]]),
            "mean_exec_ms": mean([v for r in runs for v in r["exec_ms"]]),
            "mean_settle_ms": mean([v for r in runs for v in r["settle_ms"]]),
            "mean_duration_s": mean([r["duration_s"] for r in runs if r["duration_s"] is not None]),
        })
    return out


class StatsCache:
    """Finished traces never change: summarise each once."""

    def __init__(self, store: TraceStore):
        self.store = store
        self._done: dict[str, dict] = {}
        self._lock = threading.Lock()

    def compute(self) -> list[dict[str, Any]]:
        summaries, running = [], {}
        for meta in self.store.list_traces():
            if meta.status in ("running", "needs_confirmation"):
                running[meta.model] = running.get(meta.model, 0) + 1
                continue
            with self._lock:
                summary = self._done.get(meta.trace_id)
            if summary is None:
                try:
                    summary = trace_summary(meta, self.store.load(meta.trace_id).steps)
                except Exception:  # an unreadable trace: count the run, not its steps
                    summary = trace_summary(meta, [])
                with self._lock:
                    self._done[meta.trace_id] = summary
            summaries.append(summary)
        return model_stats(summaries, running)


# ------------------------------------------------------------------------------------ runtime


class ConsoleRuntime:
    """What the console keeps per EventBus: the event tap, metrics, the narrator, take-overs."""

    def __init__(self, services):
        self.services = services
        self.last_action: dict[str, dict] = {}
        self.metrics = Metrics(self.snapshot_counts)
        self.narrator = Narrator(services.manager, enabled=overlay_mod.enabled())
        self.stats = StatsCache(services.store)
        self.listener = BusListener(services.bus, [self.metrics.observe, self._track, self.narrator.observe])

    def _track(self, event: dict) -> None:
        sid, kind = event.get("session_id"), event.get("kind")
        if not sid:
            return
        if kind == "action":
            self.last_action[sid] = {"step": event.get("step"), "action": event.get("action"), "ts": event.get("ts")}
        elif kind in ("run_started", "run_finished"):
            self.last_action.pop(sid, None)

    def snapshot_counts(self) -> dict[str, Any]:
        sessions: dict[str, int] = {}
        for session in list(self.services.manager.sessions.values()):
            sessions[session.status] = sessions.get(session.status, 0) + 1
        runners = self.services.runners.existing().values()
        return {
            "sessions": sessions,
            "active": sum(r.active for r in runners),
            "paused": sum(r.pause_reason is not None for r in runners),
            "awaiting": sum(r.state is not None and r.state.pending is not None for r in runners),
        }


_RUNTIMES: "weakref.WeakKeyDictionary[EventBus, ConsoleRuntime]" = weakref.WeakKeyDictionary()
_RUNTIMES_LOCK = threading.Lock()


def runtime_for(services) -> ConsoleRuntime:
    """One runtime per EventBus, however many apps share the services."""
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(services.bus)
        if runtime is None:
            runtime = _RUNTIMES[services.bus] = ConsoleRuntime(services)
        return runtime


# ------------------------------------------------------------------------------------ HTTP


class TakeoverRequest(BaseModel):
    on: bool = Field(description="true: pause the agent and hand mouse and keyboard to the operator")


def _run_view(runner, meta: TraceMeta | None) -> dict[str, Any] | None:
    state = runner.state if runner is not None else None
    if state is not None:
        checks = [c.__dict__ for c in state.pending.safety_checks] if state.pending else []
        return {
            "trace_id": state.trace.trace_id, "status": state.status, "instruction": state.instruction,
            "model": state.provider.name, "step": len(state.steps), "max_steps": state.request.max_steps,
            "tokens": state.usage.total, "pending_safety_checks": checks, "active": runner.active,
            "answer": state.answer, "error": state.error,
        }
    if meta is None:
        return None
    return {
        "trace_id": meta.trace_id, "status": meta.status, "instruction": meta.instruction, "model": meta.model,
        "step": meta.steps, "max_steps": meta.max_steps, "tokens": meta.usage.input_tokens + meta.usage.output_tokens,
        "pending_safety_checks": [], "active": False, "answer": meta.answer,
        "error": meta.error.model_dump() if meta.error else None,
    }


def _model_choices(config) -> tuple[list[str], str | None]:
    choices = ["scripted", "ocr"]
    if os.environ.get("ANTHROPIC_API_KEY"):
        choices.append(DEFAULT_ANTHROPIC)
    if os.environ.get("OPENAI_API_KEY"):
        choices.append(DEFAULT_OPENAI)
    choices += list(config.aliases) + list(config.models)
    try:
        default = config.resolve(None)
    except Exception:
        default = None
    if default:
        choices.insert(0, default)
    return list(dict.fromkeys(choices)), default


def console_router(services) -> APIRouter:
    runtime = runtime_for(services)
    manager, runners, bus = services.manager, services.runners, services.bus
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "console.html", media_type="text/html", headers=PAGE_HEADERS)

    @router.get("/api/v1/console/info", tags=["console"])
    def info() -> dict[str, Any]:
        models, default = _model_choices(services.config)
        seen = {m.model for m in services.store.list_traces(limit=200)}
        return {
            "version": "0.1.0", "models": models + sorted(seen - set(models)), "default_model": default,
            "overlay": runtime.narrator.enabled, "novnc": _novnc_path() is not None,
            "max_steps_cap": 50,
        }

    @router.get("/api/v1/console/sessions", tags=["console"])
    def sessions() -> dict[str, Any]:
        seq = latest_seq(bus, runtime.listener.processed_seq)
        latest: dict[str, TraceMeta] = {}
        for meta in services.store.list_traces(limit=500):
            if meta.session_id and meta.session_id not in latest:
                latest[meta.session_id] = meta
        existing = runners.existing()
        out = []
        for session in manager.list():
            runner = existing.get(session.id)
            out.append({
                "id": session.id, "status": session.status, "display": session.stack.display,
                "created_at": session.created_at.isoformat(),
                "paused": bool(runner and runner.pause_reason is not None),
                "pause_reason": runner.pause_reason if runner else None,
                "takeover": session.takeover_since is not None,
                "run": _run_view(runner, latest.get(session.id)),
                "last_action": runtime.last_action.get(session.id),
            })
        return {"seq": seq, "sessions": out}

    @router.get("/api/v1/sessions/{session_id}/live", response_model=LiveView, tags=["console"])
    def live_view(session_id: str) -> LiveView:
        """Connection details of the view-only live view (the control password only via takeover)."""
        return services.desktops.live_view(session_id, control=False)

    @router.post("/api/v1/sessions/{session_id}/takeover", response_model=LiveView, tags=["console"])
    def takeover(session_id: str, body: TakeoverRequest) -> LiveView:
        """Hand mouse and keyboard to the operator (the agent pauses between steps), or give them back."""
        runner = runners.get(session_id)
        services.desktops.set_takeover(session_id, body.on)
        if body.on:
            runner.pause(TAKEOVER_REASON)
        elif runner.pause_reason == TAKEOVER_REASON:
            runner.resume()
        bus.publish("takeover", session_id=session_id, on=body.on)
        return services.desktops.live_view(session_id, control=body.on)

    @router.get("/api/v1/events", tags=["console"], response_class=StreamingResponse,
                responses={200: {"content": {"text/event-stream": {}}}})
    async def events(request: Request, after: int = 0, session_id: str | None = None):
        """Server-Sent Events: every loop event (``id`` = seq). Events after ``after`` (or the
        Last-Event-ID header) still in the recent buffer are replayed first."""
        try:
            after = max(after, int(request.headers.get("last-event-id") or 0))
        except ValueError:
            pass

        def frame(event: dict) -> str:
            return f"id: {event['seq']}\nevent: {event['kind']}\ndata: {json.dumps(event, default=str)}\n\n"

        async def stream():
            # Subscribed here, not before: a stream that never starts (the client left before the
            # headers went out) never runs its ``finally``, and its queue would stay on the bus.
            queue = bus.subscribe()
            try:
                last = after
                yield ": glassdesk events\n\n"
                for event in bus.recent(after):
                    last = event["seq"]
                    if session_id in (None, event.get("session_id")):
                        yield frame(event)
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                    except asyncio.TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    if event["seq"] <= last:
                        continue
                    last = event["seq"]
                    if session_id in (None, event.get("session_id")):
                        yield frame(event)
            finally:
                bus.unsubscribe(queue)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    @router.get("/api/v1/stats", tags=["console"])
    def stats() -> dict[str, Any]:
        """Per model, from the trace store: runs, done rate, mean steps, tokens and step latency."""
        return {"models": runtime.stats.compute(), "computed_at": time.time()}

    @router.get("/metrics", tags=["meta"], response_class=Response,
                responses={200: {"content": {"text/plain": {}}}})
    def metrics() -> Response:
        """Prometheus metrics. Needs the bearer token when GLASSDESK_TOKEN is set."""
        runtime.listener.caught_up()
        return Response(runtime.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return router


def _novnc_path() -> Path | None:
    try:
        return novnc_dir()
    except StackError:
        return None


def install_console(app: FastAPI, services) -> None:
    """Serve the console, its API and its static files from ``app``."""
    app.include_router(console_router(services))
    app.mount("/console/assets", StaticFiles(directory=STATIC), name="console-assets")
    if (novnc := _novnc_path()) is not None:
        app.mount("/console/novnc", StaticFiles(directory=novnc), name="console-novnc")
