"""A flow's steps and assertions on a control of a native window (a step's ``native`` target, named
as the desktop tree names it): found over the session's accessibility bus, acted on with real input
(DesktopService.native_click and native_type: refused when none, several or a covered control
matches), judged by the page's assertions (vision.qa.expect) on what the control's node says.

A control not there yet (a window still opening) is looked for again until the step's time is up,
as Playwright waits for an element; several matching is said at once (waiting would not choose).
A click the pointer did not land on fails its step: the control read under the pointer just before
the press was something else."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from desktop.actions import Key, Move, Type
from desktop.errors import AmbiguousElement, ElementCovered, ElementNotFound
from desktop.models import NativeTarget
from desktop.native import centre, the_one
from desktop.port import Performed
from vision.models.qa import Assertion, FlowStep, typed_words
from vision.qa.driver import POLL_S, AssertionFailed, StepFailed, poll_pause
from vision.qa.expect import closest, judge, native_seen, normalise, wanted


class NativeNotFound(StepFailed):
    """No control the step's target names showed (or one did, covered) within the step's time: what a
    replay heals from what was recorded at the step's pixel (vision.qa.healing)."""


class NativeSteps:
    """The native-target parts of a flow, on one desktop service."""

    def __init__(self, desktops):
        self.desktops = desktops

    def point_at(self, sid: str, step: FlowStep, deadline: float) -> dict:
        """click, dblclick (real clicks at the control's middle) and hover (the pointer moved there)."""
        target = _target(step)
        if step.action == "hover":
            match = self._waited(step, deadline, lambda: the_one(self.desktops.native_find(sid, target)))
            x, y = centre(match)
            done = self.desktops.perform(sid, Move(x=x, y=y))
            return {"point": [x, y], "found_by": "native", "node": _said(match.model_dump()),
                    "executed": done.executed}
        clicks = 2 if step.action == "dblclick" else 1
        return _landed(step, self._waited(step, deadline,
                                          lambda: self.desktops.native_click(sid, target, clicks=clicks)))

    def typed(self, sid: str, step: FlowStep, deadline: float, typing: Type | None, *, clear: bool) -> dict:
        """fill (``clear``: what the control held is replaced; an empty value only clears it) and type
        (added where the click put the caret). The detail says what was typed in words, never the text
        (it may hold a secret)."""
        target = _target(step)
        if typing is None:  # fill with nothing: the control emptied
            done = self._waited(step, deadline, lambda: self.desktops.native_click(sid, target))
            detail = _landed(step, done, executed=False)
            self.desktops.perform(sid, Key(keys=["ctrl+a", "BackSpace"]))
            return detail
        done = self._waited(step, deadline, lambda: self.desktops.native_type(sid, target, typing.text, clear))
        return {**_landed(step, done, executed=False), "typed": typed_words(step.value or "")}

    def wait(self, sid: str, step: FlowStep, deadline: float) -> dict:
        """Until a control the target names shows (state visible, the default) or none does (hidden)."""
        hidden = step.state == "hidden"
        started = time.monotonic()
        while True:
            found = self.desktops.native_find(sid, _target(step))
            if (found.count == 0) == hidden:
                return {"count": found.count, "found_by": "native",
                        "waited_ms": round((time.monotonic() - started) * 1000)}
            if time.monotonic() >= deadline:
                raise StepFailed(f"{step.describe()} was not {step.state or 'visible'} within {step.timeout_ms} ms"
                                 + (f" ({found.error})" if found.error else ""))
            time.sleep(poll_pause(started))

    def check(self, sid: str, step: FlowStep, a: Assertion, deadline: float) -> dict:
        """An assertion about the controls the target names, looked at until it holds or ``deadline``."""
        target = _target(step)
        started = time.monotonic()
        looks = 0
        while True:
            found = self.desktops.native_find(sid, target)
            seen = native_seen(found)
            looks += 1
            held, saw = judge(a, seen)
            if held != a.negate:
                return {"saw": saw, "count": seen["count"], "looks": looks, "found_by": "native",
                        "waited_ms": round((time.monotonic() - started) * 1000)}
            if time.monotonic() >= deadline:
                raise AssertionFailed(f"{target.describe()}: expected {wanted(a)}; saw {saw}"
                                      + (f" ({found.error})" if found.error else "")
                                      + self._closest(sid, target, a, seen))
            time.sleep(poll_pause(started))

    def _closest(self, sid: str, target: NativeTarget, a: Assertion, seen: dict) -> str:
        """For a failed assertion, the closest name there was: among the matches' texts (has_text,
        contains_text), or among the names of the program's controls of that role when none matched."""
        if a.negate:
            return ""
        if seen["count"] and a.kind in ("has_text", "contains_text") and a.expected is not None:
            texts = [normalise(e["text"]) for e in seen["elements"]]
            near = closest(a.expected, texts)
            return f"; the closest match: {near!r}" if near and near != texts[0] else ""
        if seen["count"] or target.name is None or target.role is None:
            return ""
        others = self.desktops.native_find(sid, NativeTarget(app=target.app, role=target.role, within=target.within))
        near = closest(target.name, [m.name for m in others.matches])
        return f"; the closest {target.role}: {near!r}" if near else ""

    def _waited(self, step: FlowStep, deadline: float, act: Callable[[], Any]) -> Any:
        """``act`` tried again while its control is not there (or is covered) until ``deadline``."""
        started = time.monotonic()
        while True:
            try:
                return act()
            except AmbiguousElement as exc:
                raise StepFailed(exc.message) from None
            except (ElementNotFound, ElementCovered) as exc:
                if time.monotonic() + POLL_S >= deadline:
                    waited = round((time.monotonic() - started) * 1000)
                    raise NativeNotFound(f"{exc.message} (looked for {waited} ms)") from None
            time.sleep(POLL_S)


def _target(step: FlowStep) -> NativeTarget:
    assert step.native is not None
    return step.native


def _said(node: dict) -> dict:
    return {key: node.get(key) for key in ("ref", "role", "name", "application")}


def _landed(step: FlowStep, done: Performed, *, executed: bool = True) -> dict:
    """The detail of an action on a native control; a step fails when the pointer landed elsewhere."""
    result = done.result or {}
    node = result.get("node") or {}
    if result.get("landed") is False:
        raise StepFailed(f"{step.describe()}: the pointer landed on {result.get('landed_on')}, not on "
                         f"{node.get('role')} {node.get('name', '')!r} ({node.get('ref')})")
    x, y, width, height = node.get("box") or (0, 0, 0, 0)
    return {"point": [x + width // 2, y + height // 2], "found_by": "native", "node": _said(node),
            "landed": result.get("landed"), **({"executed": done.executed} if executed else {})}
