"""FakeDesktop: the Desktop port without X. Frames in, actions recorded.

What httpx's MockTransport is to httpx: the loop runs against it exactly as against a real
session, so step mode, approval, budgets, cancel, take-over and redaction are tested with no
display at all. Every performed action changes the screen (the next frame is a new solid colour),
so a trace's before/after images differ as they would on a real desktop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH, _Action
from desktop.errors import GlassdeskError, SessionUnavailable
from desktop.frame import Frame
from desktop.models import Mark, Marks
from desktop.port import Performed


def solid_frame(shade: int, width: int = SCREEN_WIDTH, height: int = SCREEN_HEIGHT) -> Frame:
    """A one-colour frame; ``shade`` picks the colour (BGRA)."""
    pixel = bytes(((shade * 37) % 256, (shade * 91) % 256, (shade * 53) % 256, 255))
    return Frame(pixel * (width * height), width, height)


class FakeDesktop:
    def __init__(self, id: str = "fake", *, url: str | None = "http://fake.test/"):
        self.id = id
        self.busy = False
        self.run_thread: int | None = None
        self.url = url
        self.pointer = (0, 0)
        self.performed: list[_Action] = []
        self.captures = 0
        self.resets = 0
        self.heal_log: list[str] = []  # what a test says was healed under the run (the port's heals)
        # Raised by the next perform (and then forgotten), e.g. SessionUnavailable mid-run.
        self.fail_next: GlassdeskError | None = None
        # While set, the desktop is away (healing): capture and perform raise SessionUnavailable.
        self.down = False
        # Called inside perform, before the action "runs": lets a test act mid-step (pause, cancel).
        self.during_perform: Callable[[_Action], None] | None = None
        # While set, actions work and change nothing on the screen (a click beside every control).
        self.inert = False
        # The numbered controls its marks() answers (set-of-marks); an exception here is raised instead.
        self.controls: list[Mark] | BaseException = []
        self._shade = 0
        self._lock = threading.Lock()

    def heals(self) -> list[str]:
        return list(self.heal_log)

    def capture(self) -> Frame:
        if self.down:
            raise SessionUnavailable(f"session {self.id} is restarting; try again in a few seconds")
        with self._lock:
            self.captures += 1
            return solid_frame(self._shade)

    def perform(self, action: _Action) -> Performed:
        if self.during_perform is not None:
            self.during_perform(action)
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        if self.down:
            raise SessionUnavailable(f"session {self.id} is restarting; try again in a few seconds")
        with self._lock:
            self.performed.append(action)
            self._shade += 0 if self.inert else 1
            x, y = getattr(action, "x", None), getattr(action, "y", None)
            if x is not None and y is not None:
                self.pointer = (x, y)
            frame = solid_frame(self._shade)
        argv = [["fake", action.action, *(f"{k}={v}" for k, v in action.model_dump(exclude={"action"}).items())]]
        return Performed(argv, 1.0, 0, frame, changed=not self.inert)

    def cursor(self) -> tuple[int, int]:
        return self.pointer

    def marks(self, limit: int, image: bool) -> Marks:
        if isinstance(self.controls, BaseException):
            raise self.controls
        return Marks(marks=self.controls[:limit], truncated=len(self.controls) > limit)

    def page_url(self) -> str | None:
        return self.url

    def reset(self) -> None:
        if self.down:
            raise SessionUnavailable(f"session {self.id} is restarting; try again in a few seconds")
        self.resets += 1
        self.url = "about:blank"
