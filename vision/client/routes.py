"""Every route of the API as a method that builds a ``Call``, written once for both transports.

A method here returns ``self._send(call)``: the blocking client's ``_send`` returns the typed
answer, the async client's returns a coroutine of it (so ``await desk.click(...)``). Request
bodies and answers are the API's own pydantic models, imported from where the routes define
them; the methods for the input primitives, the page actions and the QA verbs are generated from
those models, so a field the server adds is a field the client takes.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from desktop.actions import INPUT_ACTIONS, Region, Zoom, _Action
from desktop.models import (
    ActionResponse,
    CreateSession,
    LiveView,
    SavedState,
    SaveStateRequest,
    SessionInfo,
)
from desktop.ops.declare import Operation
from vision.app.ops import catalogue
from vision.client.calls import Call, act_event, bind, body, image, model, raw, signature_of, text
from vision.models import (
    ActRequest,
    ActResult,
    AnthropicBrowserRequest,
    AnthropicBrowserResult,
    AnthropicComputerRequest,
    AnthropicComputerResult,
    GeminiComputerRequest,
    GeminiComputerResult,
    OpenAIComputerRequest,
    OpenAIComputerResult,
    Recording,
    RunControl,
    TakeoverRequest,
)
from vision.models.qa import (
    ApproveRequest,
    BaselineResult,
    QaRun,
    VerifyReport,
)
from vision.trace.records import Trace, TraceMeta, VerifyResult

if TYPE_CHECKING:
    from vision.client.calls import Image

ExportFormat = Literal["yaml", "playwright-ts", "playwright-py"]

API = "/api/v1"


def _seg(value: str) -> str:
    """A path segment: an id with a slash or a dot-dot must not reach another route."""
    return quote(str(value), safe="")


class _Bound:
    """Routes of one session: they send through the client that made them."""

    def __init__(self, client: Any, session_id: str):
        self._client = client
        self.id = session_id

    def _send(self, call: Call):
        return self._client._send(call)

    def _path(self, suffix: str) -> str:
        return f"{API}/sessions/{_seg(self.id)}{suffix}"


# ----------------------------------------------------------------------------------- desktop


class SessionClient(_Bound):
    """One session: its lifecycle, its desktop primitives, its vision runs, and ``page`` and
    ``qa`` for its page layer and QA verbs. Made by ``client.session(id)``; sends nothing itself."""

    def __init__(self, client: Any, session_id: str):
        super().__init__(client, session_id)
        self.page = PageClient(client, session_id)
        self.qa = QaClient(client, session_id)

    def __repr__(self) -> str:
        return f"<glassdesk session {self.id!r}>"

    # --- lifecycle

    def info(self) -> SessionInfo:
        return self._send(Call("GET", self._path(""), model(SessionInfo)))

    def delete(self) -> None:
        return self._send(Call("DELETE", self._path("")))

    def save_state(self, name: str, files: list[str] | None = None) -> SavedState:
        """This session's browser cookies and local storage, and the home ``files`` (relative to the
        home), kept as ``name`` (create_session(state=name) starts from it)."""
        data = body(SaveStateRequest, None, {"name": name, "files": files or []}, "invalid_request")
        return self._send(Call("POST", self._path("/states"), model(SavedState), json=data))

    def live_view(self) -> LiveView:
        """A view-only live-view link and token (short-lived) for watching the session."""
        return self._send(Call("GET", self._path("/live"), model(LiveView)))

    def takeover(self, on: bool = True) -> LiveView:
        """Hand mouse and keyboard to a person (agents' actions are refused, a run pauses), with a
        control link; ``on=False`` hands them back. Earlier control links are revoked either way."""
        data = body(TakeoverRequest, None, {"on": on}, "invalid_request")
        return self._send(Call("POST", self._path("/takeover"), model(LiveView), json=data))

    # --- pixels

    def screenshot(self, *, region: Region | tuple[int, int, int, int] | None = None, scale: float | None = None,
                   format: str | None = None, quality: int | None = None) -> Image:
        """The display (or ``region`` of it, in display pixels) as an image; ``coordinates`` says
        how its pixels map back to the display when scaled or cropped."""
        params: dict[str, Any] = {}
        if region is not None:
            box = region if isinstance(region, Region) else Region.model_validate(list(region))
            params["region"] = f"{box.x0},{box.y0},{box.x1},{box.y1}"
        for name, value in (("scale", scale), ("format", format), ("quality", quality)):
            if value is not None:
                params[name] = value
        return self._send(Call("GET", self._path("/desktop/screenshot"), image, params=params or None))

    def perform(self, action: _Action, *, screenshot: bool = False) -> ActionResponse:
        """Run one input action given as the API's model, e.g. ``Click(x=10, y=20)``."""
        fields = type(action).model_fields
        name = fields["action"].default if "action" in fields else None
        if not isinstance(name, str) or INPUT_ACTIONS.get(name) is not type(action):
            raise TypeError(f"not an input action: {type(action).__name__} (one of {', '.join(INPUT_ACTIONS)})")
        return getattr(self, name)(action, screenshot=screenshot)

    def zoom(self, region: Region | tuple[int, int, int, int], scale: float = 1.0) -> ActionResponse:
        """A crop of the display (``result.image``: base64 PNG); no input, nothing changes."""
        data = body(Zoom, None, {"region": region, "scale": scale}, "invalid_action")
        return self._send(Call("POST", self._path("/desktop/zoom"), model(ActionResponse), json=data))

    # --- the vendor-native executors

    def computer_openai(self, request: OpenAIComputerRequest | None = None, **fields) -> OpenAIComputerResult:
        """An OpenAI computer_call's ``action`` or ``actions``, verbatim (a keypress is one chord,
        scroll is in pixels); the answer is what its computer_call_output needs."""
        return self._send(self.computer_openai_call(request, **fields))

    def computer_openai_call(self, request: OpenAIComputerRequest | None = None, **fields) -> Call:
        data = body(OpenAIComputerRequest, request, fields, "invalid_request")
        return Call("POST", self._path("/computer/openai"), model(OpenAIComputerResult), json=data)

    def computer_gemini(self, request: GeminiComputerRequest | None = None, **fields) -> GeminiComputerResult:
        """A Gemini turn's ``function_calls`` (name, args, id), verbatim; the answer's
        ``function_responses`` are what the next request's user content needs, one per call."""
        return self._send(self.computer_gemini_call(request, **fields))

    def computer_gemini_call(self, request: GeminiComputerRequest | None = None, **fields) -> Call:
        data = body(GeminiComputerRequest, request, fields, "invalid_request")
        return Call("POST", self._path("/computer/gemini"), model(GeminiComputerResult), json=data)

    def computer_anthropic(self, request: AnthropicComputerRequest | None = None, **fields) -> AnthropicComputerResult:
        """An Anthropic computer tool_use's ``input`` (and ``name``, ``tool_use_id``), verbatim; the
        answer is the tool_result's content (the whole block with ``tool_use_id``)."""
        return self._send(self.computer_anthropic_call(request, **fields))

    def computer_anthropic_call(self, request: AnthropicComputerRequest | None = None, **fields) -> Call:
        data = body(AnthropicComputerRequest, request, fields, "invalid_request")
        return Call("POST", self._path("/computer/anthropic"), model(AnthropicComputerResult), json=data)

    def computer_anthropic_browser(self, request: AnthropicBrowserRequest | None = None,
                                   **fields) -> AnthropicBrowserResult:
        """Anthropic browser toolset tool_use blocks (``tool_uses``, with the toolset's ``configs``
        and any staged ``files``), verbatim, run on the session's visible Chromium; the answer's
        ``tool_results`` are ready to send back."""
        return self._send(self.computer_anthropic_browser_call(request, **fields))

    def computer_anthropic_browser_call(self, request: AnthropicBrowserRequest | None = None, **fields) -> Call:
        data = body(AnthropicBrowserRequest, request, fields, "invalid_request")
        return Call("POST", self._path("/computer/anthropic-browser"), model(AnthropicBrowserResult), json=data)

    # --- vision runs

    def act(self, instruction: str | ActRequest | None = None, **fields) -> ActResult:
        """Run an instruction until done, a budget or a cancel; blocks until the run returns."""
        return self._send(self._act_call(instruction, fields, stream=False))

    def act_stream(self, instruction: str | ActRequest | None = None, **fields):
        """The same run as its events arrive: each step a ``StepSummary``, then the ``ActResult``.
        An iterator (``for``) from the blocking client, an async iterator (``async for``) from
        the async one. Closing it early cancels the run on the server: a ``break`` out of a
        ``for`` does (the generator is closed at once), an ``async for`` needs ``await it.aclose()``."""
        return self._client._stream(self._act_call(instruction, fields, stream=True), act_event)

    def _act_call(self, instruction, fields: dict, *, stream: bool) -> Call:
        if isinstance(instruction, ActRequest):
            data = body(ActRequest, instruction, fields, "invalid_request")
        else:
            data = body(ActRequest, None, {**({"instruction": instruction} if instruction else {}), **fields},
                        "invalid_request")
        return Call("POST", self._path("/vision/act"), model(ActResult), json=data,
                    headers={"accept": "text/event-stream"} if stream else None)

    def cancel(self) -> RunControl:
        return self._send(Call("POST", self._path("/vision/cancel"), model(RunControl)))

    def pause(self) -> RunControl:
        return self._send(Call("POST", self._path("/vision/pause"), model(RunControl)))

    def resume(self) -> RunControl:
        return self._send(Call("POST", self._path("/vision/resume"), model(RunControl)))


# -------------------------------------------------------------------------------------- page


class PageClient(_Bound):
    """The page layer of a session's visible browser: ``desk.page``."""

    def _path(self, suffix: str) -> str:
        return super()._path(f"/page{suffix}")

    def download(self, name: str) -> bytes:
        return self._send(Call("GET", self._path(f"/downloads/{_seg(name)}"), raw))

    def screenshot(self, *, full_page: bool = False, selector: str | None = None) -> Image:
        params = {"full_page": str(full_page).lower(), **({"selector": selector} if selector else {})}
        return self._send(Call("GET", self._path("/screenshot"), image, params=params))


# ---------------------------------------------------------------------------------------- qa


class QaClient(_Bound):
    """The six QA verbs on a session: ``desk.qa``. Each leaves a run (``client.qa_run(id)``)."""

    def _path(self, suffix: str) -> str:
        return super()._path(f"/qa{suffix}")


# ------------------------------------------------------------------------------ the client's


class Routes:
    """The routes not tied to one session; ``session(id)`` gives those that are."""

    def _send(self, call: Call):  # the transports define it
        raise NotImplementedError

    def _stream(self, call: Call, event: Callable[[str, str], Any]):
        raise NotImplementedError

    def session(self, session_id: str = "default") -> SessionClient:
        """The routes of one session (nothing is sent; ``default`` is started on first use)."""
        return SessionClient(self, session_id)

    def health(self) -> dict:
        return self._send(Call("GET", "/healthz", model(dict)))

    def sessions(self) -> list[SessionInfo]:
        return self._send(Call("GET", f"{API}/sessions", model(list[SessionInfo])))

    def create_session(self, request: CreateSession | None = None, **fields) -> SessionInfo:
        """Start a desktop: ``id``, ``network`` ({allow, deny}), ``dialogs``, ``state`` (a saved state to
        start from); see CreateSession."""
        data = body(CreateSession, request, fields, "invalid_request")
        return self._send(Call("POST", f"{API}/sessions", model(SessionInfo), json=data))

    def states(self) -> list[SavedState]:
        return self._send(Call("GET", f"{API}/states", model(list[SavedState])))

    def delete_state(self, name: str) -> None:
        return self._send(Call("DELETE", f"{API}/states/{_seg(name)}"))

    def events(self, after: int = 0, session_id: str | None = None):
        """The server's event stream (every run's events, ``seq`` increasing), endless: an iterator
        of dicts (async iterator from the async client), recent events after ``after`` first."""
        params = {"after": after, **({"session_id": session_id} if session_id else {})}
        call = Call("GET", f"{API}/events", params=params, headers={"accept": "text/event-stream"})
        return self._stream(call, lambda kind, data: json.loads(data))

    def stats(self) -> dict:
        """Per model, from the trace store: runs, done rate, mean steps, tokens, step latency."""
        return self._send(Call("GET", f"{API}/stats", model(dict)))

    # --- traces

    def traces(self, limit: int = 100) -> list[TraceMeta]:
        return self._send(Call("GET", f"{API}/traces", model(list[TraceMeta]), params={"limit": limit}))

    def trace(self, trace_id: str) -> Trace:
        return self._send(Call("GET", f"{API}/traces/{_seg(trace_id)}", model(Trace)))

    def verify_trace(self, trace_id: str) -> VerifyResult:
        return self._send(Call("GET", f"{API}/traces/{_seg(trace_id)}/verify", model(VerifyResult)))

    def trace_image(self, trace_id: str, index: int, which: Literal["before", "after"] = "after") -> Image:
        return self._send(Call("GET", f"{API}/traces/{_seg(trace_id)}/steps/{int(index)}/{_seg(which)}.png", image))

    def trace_report(self, trace_id: str) -> str:
        return self._send(Call("GET", f"{API}/traces/{_seg(trace_id)}/report", text))

    def trace_junit(self, trace_id: str) -> str:
        return self._send(Call("GET", f"{API}/traces/{_seg(trace_id)}/junit.xml", text))

    def recording(self, recording_id: str) -> Recording:
        """A session recording (started with ``desk.recording_start()``): its state and receipt."""
        return self._send(Call("GET", f"{API}/recordings/{_seg(recording_id)}", model(Recording)))

    def recording_file(self, recording_id: str, name: str) -> bytes:
        """A session recording's file: the video, ``chapters.vtt`` or ``captions.vtt``."""
        return self._send(Call("GET", f"{API}/recordings/{_seg(recording_id)}/{_seg(name)}", raw))

    def trace_video(self, trace_id: str, name: str) -> bytes:
        """A filmed run's video receipt: the video, ``chapters.vtt`` or ``captions.vtt``."""
        return self._send(Call("GET", f"{API}/traces/{_seg(trace_id)}/video/{_seg(name)}", raw))

    def export_trace(self, trace_id: str, format: ExportFormat = "yaml") -> str:
        """The run as a test: a glassdesk qa suite (yaml), or a Playwright spec (playwright-ts, playwright-py)."""
        return self._send(Call("GET", f"{API}/traces/{_seg(trace_id)}/export", text, params={"format": format}))

    # --- QA runs and baselines

    def qa_run(self, test_run_id: str) -> QaRun:
        return self._send(Call("GET", f"{API}/qa/runs/{_seg(test_run_id)}", model(QaRun)))

    def verify_qa_run(self, test_run_id: str) -> VerifyReport:
        return self._send(Call("GET", f"{API}/qa/runs/{_seg(test_run_id)}/verify", model(VerifyReport)))

    def export_qa_run(self, test_run_id: str, format: ExportFormat = "yaml") -> str:
        """A verify_user_flow run as a test: a glassdesk qa suite (yaml), or a Playwright spec."""
        return self._send(Call("GET", f"{API}/qa/runs/{_seg(test_run_id)}/export", text, params={"format": format}))

    def qa_junit(self, test_run_id: str) -> str:
        return self._send(Call("GET", f"{API}/qa/runs/{_seg(test_run_id)}/junit.xml", text))

    def qa_report(self, test_run_id: str) -> str:
        return self._send(Call("GET", f"{API}/qa/runs/{_seg(test_run_id)}/report", text))

    def qa_artifact(self, test_run_id: str, name: str) -> Image:
        return self._send(Call("GET", f"{API}/qa/runs/{_seg(test_run_id)}/artifacts/{_seg(name)}", image))

    def baselines(self) -> list[dict]:
        return self._send(Call("GET", f"{API}/qa/baselines", model(list[dict])))

    def approve_baseline(self, baseline_id: str, test_run_id: str) -> BaselineResult:
        data = body(ApproveRequest, None, {"test_run_id": test_run_id}, "invalid_request")
        return self._send(Call("POST", f"{API}/qa/baselines/{_seg(baseline_id)}/approve", model(BaselineResult),
                               json=data))


# ------------------------------------------------------------------------------ the catalogue's


def _operation_method(op: Operation) -> Callable:
    """A route method for a catalogue operation (desktop.ops): its request's fields as arguments
    (or the request model itself), checked by the model before anything is sent; the fields named
    in the path travel in it, the rest in the query (GET) or the body."""
    rest = op.rest
    if rest is None:
        raise TypeError(f"{op.name}: no REST route to call")
    kind = op.request
    in_path = rest.path_fields
    signature = signature_of(kind) if kind is not None else inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)])
    answer = model(rest.answer or op.answer)
    code = "invalid_action" if "/desktop/" in rest.path else "invalid_request"  # as the server words it
    shown = signature
    if op.performs:  # an input also takes ?screenshot=true: the settled screen in the answer
        shown = signature.replace(parameters=[*signature.parameters.values(), inspect.Parameter(
            "screenshot", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool)])

    def method(self, *args, **kwargs):
        query = {"screenshot": "true"} if op.performs and kwargs.pop("screenshot", False) else None
        if kind is None:
            signature.bind(self, *args, **kwargs)  # it takes nothing: say so, as a plain method would
            fields: dict[str, Any] = {}
        elif len(args) == 1 and not kwargs and isinstance(args[0], kind):
            fields = body(kind, args[0], {}, code)
        else:
            fields = body(kind, None, bind(signature, args, kwargs), code)
        path = rest.path
        for name in in_path:
            path = path.replace(f"{{{name}}}", _seg(fields.pop(name)))
        suffix = f"{API}/sessions/{_seg(self.id)}{path}" if op.scope == "session" else f"{API}{path}"
        if rest.method == "GET":
            query = {name: value for name, value in fields.items() if value is not None}
            return self._send(Call("GET", suffix, answer, params=query or None))
        sends_body = kind is not None and any(name not in in_path for name in kind.model_fields)
        return self._send(Call(rest.method, suffix, answer, params=query, json=fields if sends_body else None))

    method.__name__ = rest.client or op.method
    method.__signature__ = shown.replace(return_annotation=rest.answer or op.answer)  # type: ignore[attr-defined]
    method.__doc__ = rest.summary and rest.summary[0].upper() + rest.summary[1:] + "."
    return method


# ``desk``, ``desk.page``, ``desk.qa``; recordings and calibration are the session's
# (``desk.recording_start()``, ``desk.calibrate``); evaluations the server's (``client.start_eval``)
_OWNERS = {"desktop": SessionClient, "pages": PageClient, "qa": QaClient, "recordings": SessionClient,
           "calibration": SessionClient, "evals": Routes}
for _op in catalogue():
    if _op.rest is not None:
        setattr(_OWNERS[_op.service], _op.rest.client or _op.method, _operation_method(_op))
