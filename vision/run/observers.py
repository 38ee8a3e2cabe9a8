"""Observers of the event bus: the live viewer's status strip, and the one thread that feeds every
observer (metrics, the strip, the console's last-action tracker) in order.

The application service (vision.app.service) starts them, so ``glassdesk up``, ``glassdesk mcp`` over
stdio and anything embedding the service show the same strip and count the same metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vision.evidence.report import describe_action
from vision.run.events import EventBus

log = logging.getLogger("glassdesk.observers")

# How the strip words a finished run. Not "cancelled": a person reading "cancelled" next to the
# agent's desktop looks for what cancelled it; "stopped by the operator" says who did.
FINISHED_WORDS = {"done": "done", "failed": "failed", "cancelled": "stopped by the operator",
                  "max_steps": "step limit reached", "budget_exceeded": "budget used up",
                  "done_after_heal": "done, after the desktop restarted"}



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
                                        name="glassdesk-observers")
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
                log.exception("event observer failed on %s", event.get("kind"))
        with self._cond:
            self.processed_seq = event["seq"]
            self._cond.notify_all()

    def caught_up(self, timeout: float = 2.0) -> bool:
        """Wait until every event published so far has been handled."""
        target = latest_seq(self.bus, self.processed_seq)
        with self._cond:
            return self._cond.wait_for(lambda: self.processed_seq >= target, timeout)


# ------------------------------------------------------------------------------------ the strip


def strip_enabled(env: Mapping[str, str] | None = None) -> bool:
    """GLASSDESK_OVERLAY: the viewer's status strip is on unless set to 0/false/no/off."""
    value = (env if env is not None else os.environ).get("GLASSDESK_OVERLAY", "1")
    return value.strip().lower() not in ("0", "false", "no", "off")


def action_points(action: dict) -> list[tuple[int, int]]:
    """Every display point an action dict touches: its x/y, a drag path, a zoom region's corners."""
    points = []
    if action.get("x") is not None and action.get("y") is not None:
        points.append((int(action["x"]), int(action["y"])))
    points += [(int(p["x"]), int(p["y"])) for p in action.get("path") or []]
    if region := action.get("region"):
        points += [(region["x0"], region["y0"]), (region["x1"], region["y1"]),
                   (region["x0"], region["y1"]), (region["x1"], region["y0"])]
    return points


@dataclass(frozen=True)
class Strip:
    """What the strip says now. ``avoid``: display points the current action targets (the viewer
    keeps the strip away from them); ``seq`` grows with every change, so a watcher sends only news."""

    text: str
    tone: str  # act | wait | ok | bad
    avoid: tuple[tuple[int, int], ...]
    seq: int
    until: float | None = None  # clock time it hides at; None: until the next change

    def as_json(self) -> dict:
        return {"text": self.text, "tone": self.tone, "avoid": [list(p) for p in self.avoid]}


class Narrator:
    """The status strip of each session: what the agent is doing, in a few words.

    The live viewer (vision.http.viewer) draws it over the picture, in the person's browser. It is never
    drawn on the desktop itself, so the model's screenshots, OCR and visual comparisons see only
    the desktop (an on-screen strip once put "failed · 4 steps" into a model's own observations).
    """

    def __init__(self, enabled: bool = True, clock: Callable[[], float] = time.monotonic):
        self.enabled = enabled
        self._clock = clock
        self._strips: dict[str, Strip] = {}
        self._runs: dict[str | None, dict] = {}  # session_id -> {"max_steps": N, "step": k}
        self._seq = 0
        self._lock = threading.Lock()

    def observe(self, event: dict) -> None:
        sid = event.get("session_id")
        if not sid:
            return
        if event.get("kind") == "session_deleted":
            with self._lock:
                self._strips.pop(sid, None)
                self._runs.pop(sid, None)
            return
        if not self.enabled:
            return
        shown = self.text_for(event)
        if shown is None:
            return
        text, tone, avoid, hide_after = shown
        with self._lock:
            self._seq += 1
            self._strips[sid] = Strip(text, tone, tuple(avoid), self._seq,
                                      self._clock() + hide_after if hide_after else None)

    def current(self, session_id: str) -> Strip | None:
        """The strip as it should look now; None when there is nothing to show."""
        with self._lock:
            strip = self._strips.get(session_id)
        if strip is None or (strip.until is not None and self._clock() >= strip.until):
            return None
        return strip

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
            return f"{of(run['step'])} · {describe_action(action, redact=True)}", "act", action_points(action), None
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
