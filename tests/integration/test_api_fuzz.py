"""Schemathesis against the real server over HTTP: every route of the OpenAPI, requests generated
from it (valid and not), on a real desktop session; no answer may be a server error (5xx), and
every answer must be what the schema declares: its status, its content type, its headers and its
body (``CONFORMANCE``). A 503 ``session_unavailable`` with a Retry-After is not counted as a server
error: it is the documented answer while the desktop restarts, which the fuzzing itself can cause
(a generated key may close the browser); it must still match the schema. Path parameters name
things that exist (a session of its own, a trace of a run on it), so the handlers run for real
rather than stopping at "not found".

What would harm the machine or block is bounded here, not skipped: the session is a throwaway one;
``launch`` may start only ``true``; an ``open`` (or a page navigation, a new tab) that would leave
the machine goes to a closed local port; waits, key holds, typing and page timeouts are kept short;
a vision run gets a model family that does not exist (there is no model here), so it is refused
before it starts. Left out: creating sessions
(each is a whole desktop: ``test_api`` covers it), deleting other than a missing one, and the
event stream (it never ends by design: ``test_console`` reads it).
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import quote

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from desktop.errors import SessionNotFound
from desktop.x11.windows import WindowError, check_url
from tests.conftest import LiveServer
from vision.models import ActRequest

pytestmark = pytest.mark.x11

SID = "fuzz"
# The answer is what the schema says: a declared status, content type and headers, a body that validates.
CONFORMANCE = [status_code_conformance, content_type_conformance, response_headers_conformance,
               response_schema_conformance]
EXAMPLES = 20  # per route: enough for the shapes that matter, and the whole file stays near a minute
# A route whose request has nothing to vary (no body, no query, its path parameters fixed here: POST
# .../reset) is one request made again and again; a reset restarts the browser (~2 s), and 20 of
# them were a tenth of the file.
EXAMPLES_FIXED = 3
# The waits a generated request may ask for, bounded (what is fuzzed is the answer, not the wait):
# a desktop wait or key hold, a page operation's timeout, a QA verb's (see bounded).
WAIT_MS, PAGE_TIMEOUT_MS, QA_TIMEOUT_MS, LISTEN_MS = 50, 150, 500, 100


@pytest.fixture(scope="module")
def fuzzed(manager, desk, tmp_path_factory):
    """The real app on its own session and trace store, with one trace to look at."""
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    manager.create(SID)
    settings = Settings(token=None, launch_allow=frozenset({"true"}), data_dir=str(tmp_path_factory.mktemp("fuzz")))
    glassdesk = Glassdesk.build(manager, data_dir=settings.data_dir, config=VisionConfig(),
                                launch_allow=settings.launch_allow, strip=False)
    trace = glassdesk.act(SID, ActRequest(instruction="look", model="scripted",
                                          script=[{"action": "click", "x": 900, "y": 600},
                                                  {"action": "done", "answer": "seen"}])).trace_id
    from vision.models.qa import VerifyPageLoadsRequest

    qa_run = glassdesk.qa.verify_page_loads(SID, VerifyPageLoadsRequest(url="about:blank")).test_run_id
    with LiveServer(create_app(manager, settings, glassdesk)) as server:
        yield server.url, trace, qa_run
    try:
        manager.delete(SID)
    except SessionNotFound:
        pass


@pytest.fixture(scope="module")
def api_schema(fuzzed):
    url, _, _ = fuzzed
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    return schema.exclude(method="POST", path="/api/v1/sessions").exclude(path="/api/v1/events")


def bounded(case, fields: frozenset[str] = frozenset()) -> None:
    """Keep a generated request from leaving the machine or holding the session for long; what
    still gets through is as random as schemathesis made it. ``fields``: the body's properties in
    the schema (a wait left out is given its bound only where the body may name it)."""
    body = case.body
    if not isinstance(body, dict):
        return
    path = case.operation.path
    if path.endswith(("/desktop/open", "/page/navigate", "/page/tabs")) and isinstance(body.get("url"), str):
        try:
            check_url(body["url"])
        except WindowError:
            pass  # refused before the browser sees it: keep it
        else:
            body["url"] = f"http://127.0.0.1:9/?u={quote(body['url'][:200])}"  # a closed port: refused at once
    if path.endswith(("/desktop/wait", "/desktop/hold_key")):
        bound(body, "duration_ms", WAIT_MS, fields)
    if path.endswith("/desktop/type") and isinstance(body.get("text"), str):
        body["text"] = body["text"][:40]
    if "/page/" in path:
        bound(body, "timeout_ms", PAGE_TIMEOUT_MS, fields)  # waits for an element, a load: short
    if path.endswith("/page/fill") and isinstance(body.get("value"), str):
        body["value"] = body["value"][:40]
    if path.endswith(("/vision/act", "/calibrate")):
        body["model"] = "nothing/here"  # no model runs: refused as model_unavailable before it starts
    if path.endswith("/computer/gemini"):
        bounded_gemini(body)
    if "/qa/" in path:
        bounded_qa(body, fields)


def closed_port(url):
    """A URL the browser would open, sent to a closed local port instead (refused at once); one it
    refuses anyway is kept as it is."""
    if not isinstance(url, str):
        return url
    try:
        check_url(url)
    except WindowError:
        return url
    return f"http://127.0.0.1:9/?u={quote(url[:200])}"


def bounded_gemini(body: dict) -> None:
    """Gemini's executor: a few calls (each answers with its own screenshot, and wait_5_seconds
    waits 5 s), and whatever navigate and search would type into the address bar sent to a closed
    port (typed text that is no URL would go to a search engine)."""
    def closed(value):
        return f"http://127.0.0.1:9/?u={quote(value[:200])}" if isinstance(value, str) and value else value

    calls = body.get("function_calls")
    if isinstance(calls, list):
        del calls[3:]
        for call in calls:
            args = call.get("args") if isinstance(call, dict) else None
            if isinstance(args, dict) and "url" in args:
                args["url"] = closed(args["url"])
    if "search_url" in body:
        body["search_url"] = closed(body["search_url"])


def bounded_qa(body: dict, fields: frozenset[str]) -> None:
    """The QA verbs: every URL to a closed port, every wait short, no video, no model run."""
    for key in ("url", "start_url"):
        if key in body:
            body[key] = closed_port(body[key])
    # bound: a string of digits is a wait too (it failed CI twice: a verify_element_exists given
    # "timeout_ms": "99999" waited past the client's 60 s, which Hypothesis then called flaky).
    bound(body, "timeout_ms", QA_TIMEOUT_MS, fields)
    bound(body, "listen_ms", LISTEN_MS, fields)  # analyze_console_errors listens after the load: up to 60 s
    body.pop("record_video", None)
    for step in body.get("steps") or [] if isinstance(body.get("steps"), list) else []:
        if not isinstance(step, dict):
            continue
        for key in ("url", "value"):
            if step.get("action") == "navigate" and key in step:
                step[key] = closed_port(step[key])
        bound(step, "timeout_ms", PAGE_TIMEOUT_MS)
        if step.get("action") == "act":
            step["model"] = "nothing/here"


def body_fields(raw_schema: dict, path: str, method: str) -> frozenset[str]:
    """The properties of an operation's JSON body in the OpenAPI (its $ref followed once)."""
    body = raw_schema["paths"][path][method.lower()].get("requestBody") or {}
    schema = body.get("content", {}).get("application/json", {}).get("schema", {})
    for part in [schema, *schema.get("anyOf", []), *schema.get("allOf", [])]:
        ref = part.get("$ref", "")
        if ref.startswith("#/components/schemas/"):
            return frozenset(raw_schema["components"]["schemas"][ref.rsplit("/", 1)[1]].get("properties", {}))
        if "properties" in part:
            return frozenset(part["properties"])
    return frozenset()


def bound(body: dict, key: str, limit: int, fields: frozenset[str] = frozenset()) -> None:
    """Bound a duration, also when it comes as a string of digits (a "negative" case the API
    still accepts: pydantic reads "38423" as 38423, and the request would wait that long), and,
    when ``fields`` has it, left out (the API's default then: a desktop wait's 1 s, a page wait's 10 s)."""
    if key not in body:
        if key in fields:
            body[key] = limit
        return
    value = body.get(key)
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.strip().isdigit()):
        body[key] = min(int(float(value)), limit) if value == value else limit  # (NaN is refused anyway)


def restarting(response) -> bool:
    """503 session_unavailable or page_unavailable with a Retry-After: the honest answer while the
    desktop or its browser restarts. The fuzzing itself may cause that (a key that closes the
    browser: alt+F4, ctrl+w; a page closed under a page operation); not a bug."""
    if response.status_code != 503 or "retry-after" not in response.headers:
        return False
    try:
        return response.json()["error"]["code"] in ("session_unavailable", "page_unavailable")
    except (ValueError, KeyError, TypeError):
        return False


# Every route in one test (their failures are reported together): ~90 s alone (175 s in a CI run at
# load before fixed-shape routes got fewer examples and left-out waits their bound); the default
# bound (300 s) is a hang guard, and this test's is larger.
@pytest.mark.timeout(900)
def test_every_answer_is_declared_and_none_is_a_server_error(fuzzed, api_schema):
    # (Schemathesis's own pytest parametrisation does not run under pytest 9; its strategies do.)
    _, trace, qa_run = fuzzed
    fixed = {"session_id": SID, "trace_id": trace, "test_run_id": qa_run}
    failures, tried, answers, seen_5xx = {}, [], Counter(), []
    for result in api_schema.get_all_operations():
        operation = result.ok()
        path_parameters = {k: v for k, v in fixed.items() if f"{{{k}}}" in operation.path}
        if operation.method.upper() == "DELETE":
            path_parameters["session_id"] = "missing"  # the one delete: of a session that is not there
        cases = st.one_of(*(operation.as_strategy(mode, path_parameters=path_parameters)
                            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)))

        fields = body_fields(api_schema.raw_schema, operation.path, operation.method)
        fixed_shape = not (operation.body or operation.query) and all(
            parameter.name in path_parameters for parameter in operation.path_parameters)

        @given(case=cases)
        @settings(max_examples=EXAMPLES_FIXED if fixed_shape else EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck),
                  phases=[Phase.explicit, Phase.generate])
        def run(case):
            bounded(case, fields)  # noqa: B023 (run is called in this iteration, below)
            try:
                response = case.call(timeout=60)
            except requests.exceptions.ReadTimeout:
                # Say which request (once only "Read timed out", inside a FlakyFailure).
                raise AssertionError(f"no answer in 60 s to {case.operation.label} {case.body!r:.500} "
                                     f"(query {case.query!r:.200})") from None
            answers[response.status_code] += 1
            if restarting(response):
                case.validate_response(response, checks=CONFORMANCE)
                return
            if response.status_code >= 500:
                seen_5xx.append(f"{case.operation.label} {case.body!r:.300} -> "
                                f"{response.status_code} {response.text[:500]}")
            case.validate_response(response, checks=[not_a_server_error, *CONFORMANCE])

        tried.append(operation.label)
        try:
            run()
        except Exception as exc:  # every route is tried; all failures are reported together
            # Hypothesis's FlakyFailure says only "(1 sub-exception)": what failed is inside it.
            inner = "".join(f"\n  {type(e).__name__}: {e}"[:1500] for e in getattr(exc, "exceptions", ()))
            failures[operation.label] = f"{type(exc).__name__}: {exc}"[:3000] + inner
    assert len(tried) >= 35, tried
    print(f"\n{len(tried)} routes, answers {dict(sorted(answers.items()))}")
    assert answers[200] and sum(n for code, n in answers.items() if code >= 400)  # both kinds were sent
    assert not failures, ("\n".join(seen_5xx) + "\n\n"
                          + "\n\n".join(f"{label}:\n{why}" for label, why in failures.items()))
