"""Observers of the event bus: the on-desktop status strip, and the one thread that feeds every
observer (metrics, the strip, the console's last-action tracker) in order.

The application service (vision.service) starts them, so ``glassdesk up``, ``glassdesk mcp`` over
stdio and anything embedding the service show the same strip and count the same metrics.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from desktop import overlay as overlay_mod
from vision.events import EventBus
from vision.report import describe_action

log = logging.getLogger("glassdesk.observers")

# How the on-desktop strip words a finished run. Not "cancelled": the strip is in the screenshots,
# and a text-matching model looking for a "Cancel" button must not find it there.
FINISHED_WORDS = {"done": "done", "failed": "failed", "cancelled": "stopped by the operator",
                  "max_steps": "step limit reached", "budget_exceeded": "budget used up"}



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


# ------------------------------------------------------------------------------------ on the desktop


class Narrator:
    """Shows the agent's current action on the session's own desktop (desktop.overlay)."""

    def __init__(self, desktops, enabled: bool = True):
        self.desktops = desktops
        self.enabled = enabled
        self._overlays: dict[str, overlay_mod.Overlay] = {}
        self._failed: set[str] = set()
        self._runs: dict[str, dict] = {}  # session_id -> {"max_steps": N, "step": k}

    def _overlay(self, session_id: str) -> overlay_mod.Overlay | None:
        session = self.desktops.peek(session_id)
        if session is None or session.status != "ready":
            return None
        current = self._overlays.get(session_id)
        if current is not None and current.alive and current.display_name == session.display:
            return current
        if current is not None:
            current.close()
        if session_id in self._failed:
            return None
        try:
            current = self._overlays[session_id] = overlay_mod.Overlay(session.display)
            return current
        except Exception as exc:
            self._failed.add(session_id)
            log.warning("no on-desktop status for session %s: %s", session_id, exc)
            return None

    def observe(self, event: dict) -> None:
        for sid in [s for s in self._overlays if self.desktops.peek(s) is None]:
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
            return f"{of(run['step'])} · {describe_action(action, redact=True)}", "act", overlay_mod.action_points(action), None
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
