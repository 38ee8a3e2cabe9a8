"""glassdesk as the computer of an openai-agents ``ComputerTool``: ``GlassdeskComputer``
(``AsyncComputer``) and ``SyncGlassdeskComputer`` (``Computer``).

Each method the SDK calls is one ``POST /sessions/{id}/computer/openai`` with the action as the
model wrote it: glassdesk's own converter applies OpenAI's semantics (a keypress list is one
chord, scroll is in pixels at 120 per wheel notch, held ``keys`` on GA actions) and the declared
display size, so the adapter converts nothing. The methods are written once: each returns the
transport's answer, a value from the blocking client and an awaitable from the async one, and the
SDK awaits whatever is awaitable.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agents.computer import AsyncComputer, Button, Computer, Environment

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from vision.client.calls import model
from vision.client.errors import error_class
from vision.client.routes import SessionClient
from vision.client.transport import AsyncGlassdeskClient, GlassdeskClient
from vision.models import OpenAIComputerResult

__all__ = ["GlassdeskComputer", "SyncGlassdeskComputer"]


def screenshot_of(response: Any) -> str:
    """The executor's answer -> the base64 PNG the SDK wants. A call the model got wrong (nothing
    ran) is raised, typed ``invalid_action``: the SDK has no way to show the model a text."""
    result: OpenAIComputerResult = model(OpenAIComputerResult)(response)
    if result.error is not None:
        raise error_class("invalid_action")("invalid_action", result.error, status=response.status_code)
    return result.output.image_url.partition(",")[2]


class _Glassdesk:
    """The computer's actions over one session, for either transport."""

    _client_type: type = GlassdeskClient

    def __init__(self, client: GlassdeskClient | AsyncGlassdeskClient, session: str = "default", *,
                 dimensions: tuple[int, int] = (SCREEN_WIDTH, SCREEN_HEIGHT), environment: Environment = "ubuntu"):
        """``dimensions``: the screen size the model is told and sent (glassdesk scales both ways);
        ``environment``: what the preview tool declares (the desktop is Linux with XFCE)."""
        if not isinstance(client, self._client_type):
            raise TypeError(f"{type(self).__name__} needs a {self._client_type.__name__}")
        self.desk: SessionClient = client.session(session)
        self._dimensions, self._environment = dimensions, environment

    @property
    def environment(self) -> Environment:
        return self._environment

    @property
    def dimensions(self) -> tuple[int, int]:
        return self._dimensions

    def _run(self, action: dict[str, Any], keys: list[str] | None = None):
        if keys:  # GA: keys held during a pointer action
            action = {**action, "keys": list(keys)}
        width, height = self._dimensions
        call = self.desk.computer_openai_call(action=action, display_width=width, display_height=height)
        return self.desk._send(replace(call, read=screenshot_of))

    def screenshot(self):
        return self._run({"type": "screenshot"})

    def click(self, x: int, y: int, button: Button, *, keys: list[str] | None = None):
        return self._run({"type": "click", "x": x, "y": y, "button": button}, keys)

    def double_click(self, x: int, y: int, *, keys: list[str] | None = None):
        return self._run({"type": "double_click", "x": x, "y": y}, keys)

    def scroll(self, x: int, y: int, scroll_x: int, scroll_y: int, *, keys: list[str] | None = None):
        return self._run({"type": "scroll", "x": x, "y": y, "scroll_x": scroll_x, "scroll_y": scroll_y}, keys)

    def type(self, text: str):
        return self._run({"type": "type", "text": text})

    def wait(self):
        return self._run({"type": "wait"})

    def move(self, x: int, y: int, *, keys: list[str] | None = None):
        return self._run({"type": "move", "x": x, "y": y}, keys)

    def keypress(self, keys: list[str]):
        return self._run({"type": "keypress", "keys": list(keys)})

    def drag(self, path: list[tuple[int, int]], *, keys: list[str] | None = None):
        return self._run({"type": "drag", "path": [{"x": x, "y": y} for x, y in path]}, keys)


class GlassdeskComputer(_Glassdesk, AsyncComputer):
    """An openai-agents ``AsyncComputer`` over an ``AsyncGlassdeskClient`` session."""

    _client_type = AsyncGlassdeskClient


class SyncGlassdeskComputer(_Glassdesk, Computer):
    """An openai-agents ``Computer`` over a blocking ``GlassdeskClient`` session."""

    _client_type = GlassdeskClient
