"""How an operation is declared: the data the catalogue (desktop.ops) is written in. Pure: the
declarations hold models and small functions that render an answer as text, nothing that runs."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from desktop.port import Performed

# The services the doors are handed (the QA verbs, calibration, session recordings and evaluations
# are the vision layer's: vision.qa.ops, vision.calibration.ops, vision.recordings.ops, vision.eval.ops).
Service = Literal["desktop", "pages", "qa", "calibration", "recordings", "evals"]

# Where an operation's route is: under one session's (``Operation.scope`` "session": its service
# method takes the session id first), or the server's own (its registry of evaluations: none).
PREFIXES = {"session": "/api/v1/sessions/{session_id}", "server": "/api/v1"}

# The MCP tool groups a profile is made of (vision.mcp.profiles, `glassdesk mcp --tools`): ``core`` is
# what an agent needs to drive the visible desktop and is in every profile; ``desktop`` the other
# desktop, session and vision-pack tools; ``page`` the page layer's; ``qa`` the QA verbs. Each tool
# names its group where it is declared, here or at its decorator (vision.mcp.tools).
Group = Literal["core", "desktop", "page", "qa"]
GROUPS: tuple[Group, ...] = ("core", "desktop", "page", "qa")


@dataclass(frozen=True)
class Hints:
    """The MCP tool annotations: what a client may assume about calling it."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


@dataclass(frozen=True)
class Rest:
    """The operation's REST route. ``path`` is under ``/api/v1/sessions/{session_id}`` (under
    ``/api/v1`` for an operation of the server's: ``Operation.scope``); a field of the request named
    in it (``{tab_id}``) travels in the path, the others in the query (GET) or the body."""

    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    summary: str | None = None
    description: str | None = None
    tags: tuple[str, ...] = ("page",)
    status_code: int = 200
    # A request body every field of which has a default may be left out.
    optional_body: bool = False
    # The answer as REST sends it, when it differs from the service's (the page summary added).
    answer: Any = None
    # The route's name (its OpenAPI operationId is made from it): kept as it was when routes were
    # written by hand, so generated clients of the API keep their method names.
    name: str | None = None
    # The client method's name; the service method's by default.
    client: str | None = None
    # The same operation also served at these paths, with their tags: the network policy is at
    # /network-policy, and at /page/network-policy where the page layer's contract lists it.
    also: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def path_fields(self) -> tuple[str, ...]:
        return tuple(re.findall(r"{(\w+)}", self.path))


@dataclass(frozen=True)
class Tool:
    """The operation's MCP tool. ``text`` renders the answer for the model; the structured content
    is the answer as JSON. The description is tuned prose for models: change it with care."""

    name: str
    title: str
    description: str
    hints: Hints
    # (request, answer) -> what the model reads; for input on the desktop (``Operation.performs``)
    # the words of what was done ("click at (10, 20)"), which the door puts before its outcome
    text: Callable[[Any, Any], str]
    # (request, answer) -> the structured content; by default the answer as JSON
    structured: Callable[[Any, Any], dict] | None = None
    # A page tool's answer ends with the page summary (Playwright MCP's habit), but for the tool
    # that is itself the page's state.
    summary: bool = True
    # (service, answer) -> the one image that says most, or None (read in a worker thread)
    image: Callable[[Any, Any], bytes | None] | None = None
    # The MCP profile group it belongs to (see ``Group``).
    group: Group = "page"
    # (the desktop service) -> whether the server's settings allow it at all; a tool they turn off
    # is not listed (page_evaluate without --allow-evaluate), so no model spends context on it.
    enabled: Callable[[Any], bool] | None = None


@dataclass(frozen=True)
class Operation:
    """One operation of a session's desktop or page layer."""

    service: Service
    method: str  # the service's method: ``method(session_id, **request fields)`` unless ``call`` says otherwise
    request: type[BaseModel] | None
    answer: Any
    acts: bool  # the control plane's guards: refused while a person or a run holds the session
    rest: Rest | None = None
    tool: Tool | None = None
    # Every answer of an acting page or desktop operation carries the page summary (REST: ``page``;
    # MCP: a line of text and ``page`` in the structured content).
    page: bool = False
    call: Callable[[Any, str | None, Any], Any] | None = field(default=None, repr=False)
    # "session": an operation on one session (its route under the session's, its tool takes
    # ``session``, its client method is the session's); "server": the server's own (no session).
    scope: Literal["session", "server"] = "session"

    @property
    def name(self) -> str:
        return f"{self.service}.{self.method}"

    @property
    def performs(self) -> bool:
        """Input on the visible desktop: the service answers a ``Performed`` (what ran, the settled
        screen), which every door shows the same way: REST as an ``ActionResponse`` (``?screenshot=true``
        adds the settled screen), MCP as what was done, the commands that ran and the settled
        screenshot (``screenshot``, true by default), the client as the ``ActionResponse``."""
        return self.answer is Performed

    @property
    def action_name(self) -> str:
        """The ``action`` an input's answer names: its route's last segment (click, open, launch)."""
        return (self.rest.path if self.rest else self.method).rsplit("/", 1)[-1]

    def invoke(self, service: Any, session_id: str | None, request: BaseModel | None) -> Any:
        """Run the operation on ``service`` (the real one, or its remote stand-in); a server
        operation's method takes no session id."""
        if self.call is not None:
            return self.call(service, session_id, request)
        fields = {} if request is None else {name: getattr(request, name) for name in type(request).model_fields}
        if self.scope == "server":
            return getattr(service, self.method)(**fields)
        return getattr(service, self.method)(session_id, **fields)
