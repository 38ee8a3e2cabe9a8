"""`glassdesk qa SUITE.yaml`: run a suite of QA verbs for CI, against a running server (--url) or
one embedded in this process, with progress on the terminal, JUnit XML and an HTML report.

Exit status: 0 when every test passed, 1 when any failed (or errored; a server that stops answering
mid-suite too: the tests it did not run are errors in the JUnit and report of what ran), 2 on a
usage error (no such file, a suite that does not parse or validate, no server at --url, a server
that refuses the token: set GLASSDESK_TOKEN). The whole suite is checked before the first test
runs, so a typo costs nothing. Each request waits for its verb's own timeout_ms plus a margin,
never without bound.

Each test starts on a cleared browser (its verb is sent with ``fresh``; ``keep_state: true`` on
the suite or a test says not to), then ``before_each``'s flow steps, the test, and ``after_each``'s
(docs/qa.md, "The suite file").

A suite::

    name: smoke
    session: default            # optional
    keep_state: false           # optional: true keeps cookies, storage and tabs from test to test
    before_each: [...]          # optional: flow steps, as verify_user_flow's
    after_each: [...]           # optional: run even after a failed test
    tests:
      - name: home loads
        verify_page_loads: {url: "http://127.0.0.1:8000/", expected_title: "Home"}
      - name: login works
        verify_user_flow: {start_url: ..., steps: [...], success_condition: {text: "Welcome"}}
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from desktop.errors import describe_validation
from vision.models.qa import (
    VERBS,
    AnalyzeConsoleRequest,
    CaptureBaselineRequest,
    CompareRequest,
    QaRun,
    VerifyElementRequest,
    VerifyPageLoadsRequest,
    VerifyUserFlowRequest,
)

console = Console(stderr=True, soft_wrap=True)

REQUESTS: dict[str, type[BaseModel]] = {
    "verify_page_loads": VerifyPageLoadsRequest, "verify_element_exists": VerifyElementRequest,
    "verify_user_flow": VerifyUserFlowRequest, "capture_visual_baseline": CaptureBaselineRequest,
    "compare_visual_regression": CompareRequest, "analyze_console_errors": AnalyzeConsoleRequest,
}


class UsageError(Exception):
    """The suite or the command line cannot be run as given: exit 2."""


@dataclass
class SuiteTest:
    name: str
    verb: str
    body: dict  # the verb's request; ``fresh`` is decided when the test runs (see Suite.requests)
    fresh: bool = True  # starts on a cleared browser (the suite's and the test's keep_state say no)


@dataclass
class Suite:
    name: str
    session: str
    tests: list[SuiteTest]
    # Flow steps (verify_user_flow's) run before and after each test, as flows of their own.
    before_each: list[dict] = field(default_factory=list)
    after_each: list[dict] = field(default_factory=list)
    test_id_attribute: str | None = None  # what test_id targets match, in the tests' flows and the hooks

    def requests(self, test: SuiteTest, fresh: bool | None = None) -> tuple[dict | None, dict, dict | None]:
        """The requests of one test, in the order they run (pure): before_each's flow (or None),
        the test's verb, after_each's flow (or None). The fresh start comes first of all, so a
        before_each that signs in is not cleared away before the test. ``fresh``: instead of the
        test's own (a retry starts clean)."""
        fresh = test.fresh if fresh is None else fresh
        before = self._hook(f"{test.name} · before_each", self.before_each, fresh=fresh)
        body = {**test.body, "fresh": fresh and before is None}
        after = self._hook(f"{test.name} · after_each", self.after_each, fresh=False)
        return before, body, after

    def _hook(self, name: str, steps: list[dict], *, fresh: bool) -> dict | None:
        if not steps:
            return None
        hook = {"name": name, "steps": steps, "fresh": fresh}
        return {**hook, "test_id_attribute": self.test_id_attribute} if self.test_id_attribute else hook


# What a suite file may say at its top level, and a test besides its name and verb; anything else
# (a misspelt key, a `setup:` this runner does not know) is refused rather than silently ignored.
SUITE_KEYS = ("name", "session", "test_id_attribute", "tests", "keep_state", "before_each", "after_each")
TEST_KEYS = ("name", "keep_state")
HOOKS = ("before_each", "after_each")


def numbered_from_one(message: str) -> str:
    """A validation message's step positions as the reports number them: ``steps.0.action`` ->
    ``step 1 action`` (pure)."""
    return re.sub(r"\bsteps\.(\d+)\.?", lambda m: f"step {int(m.group(1)) + 1} ", message).replace(" :", ":")


def with_env_secrets(body: dict, environ) -> tuple[dict, list[str]]:
    """A flow's ``{{name}}`` placeholders (fill values, scripted typing) that its ``secrets`` do not
    give, taken from the environment variable GLASSDESK_SECRET_<NAME> (pure but for ``environ``):
    an exported suite carries placeholders, never values. The body with them, and what is unset."""
    from vision.evidence.export import PLACEHOLDER, secret_env

    given = dict(body.get("secrets") or {})
    texts = []
    for step in body.get("steps") or []:
        if isinstance(step, dict):
            texts.append(str(step.get("value") or ""))
            texts += [str(a.get("text") or "") for a in step.get("script") or [] if isinstance(a, dict)]
    problems, added = [], {}
    for name in dict.fromkeys(m for text in texts for m in PLACEHOLDER.findall(text)):
        if name in given:
            continue
        value = environ.get(secret_env(name))
        if value is None:
            problems.append(f"{{{{{name}}}}} has no value: give the test `secrets`, or set {secret_env(name)}")
        else:
            added[name] = value
    return ({**body, "secrets": {**given, **added}} if added else body), problems


def load_suite(path: Path) -> Suite:  # noqa: C901
    """The suite file, parsed and every test's request validated (pure but for the read). Every
    problem is listed at once, one line each, so a suite is fixed in one pass."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tests"), list) or not data["tests"]:
        raise UsageError(f"{path}: a suite is a mapping with a non-empty list `tests`")
    problems = []
    unknown_keys = [str(k) for k in data if k not in SUITE_KEYS]
    if unknown_keys:
        problems.append(f"{path}: unknown key(s) {', '.join(unknown_keys)}; a suite takes {', '.join(SUITE_KEYS)}")
    keep_state = data.get("keep_state", False)
    if not isinstance(keep_state, bool):
        problems.append(f"{path}: keep_state: true or false (got {keep_state!r})")
        keep_state = False
    hooks: dict[str, list[dict]] = {}
    for hook in HOOKS:
        steps = data.get(hook) or []
        if not isinstance(steps, list):
            problems.append(f"{path}: {hook}: a list of flow steps, as verify_user_flow's steps")
            continue
        try:  # the same step model as a flow's: what verify_user_flow would refuse is refused now
            VerifyUserFlowRequest.model_validate({"steps": steps} if steps else {"steps": [{"action": "screenshot"}]})
        except ValidationError as exc:
            problems.append(f"{path}: {hook}: {numbered_from_one(describe_validation(exc))}")
            continue
        hooks[hook] = steps
    tests = []
    for number, entry in enumerate(data["tests"], 1):
        where = f"{path}: test {number}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: each test is a mapping with a name and one verb")
            continue
        if entry.get("name") is not None:
            where += f" ({entry['name']})"
        verbs = [k for k in entry if k in VERBS]
        unknown = [k for k in entry if k not in VERBS and k not in TEST_KEYS]
        if unknown or len(verbs) != 1:
            said = ([f"unknown: {', '.join(map(str, unknown))}"] if unknown else []) + \
                ([f"{len(verbs)} verbs: {', '.join(verbs)}"] if len(verbs) > 1 else []) + \
                (["no verb"] if not verbs else [])
            problems.append(f"{where}: give `name`, exactly one of {', '.join(VERBS)}, and optionally keep_state "
                            f"({'; '.join(said)})")
            continue
        keep = entry.get("keep_state", keep_state)
        if not isinstance(keep, bool):
            problems.append(f"{where}: keep_state: true or false (got {keep!r})")
            continue
        verb = verbs[0]
        body = entry[verb] or {}
        if not isinstance(body, dict):
            problems.append(f"{where}: {verb} takes a mapping of its arguments")
            continue
        name = str(entry.get("name") or f"{verb} {number}")
        if verb != "capture_visual_baseline":  # its `name` is the baseline's
            body = {"name": name, **body}
        if verb == "verify_user_flow":
            if data.get("test_id_attribute") is not None:
                body = {"test_id_attribute": data["test_id_attribute"], **body}
            body, unread = with_files_read(body, path.parent)
            if unread:
                problems += [f"{where}: {problem}" for problem in unread]
                continue
            body, unset = with_env_secrets(body, os.environ)
            if unset:
                problems += [f"{where}: {problem}" for problem in unset]
                continue
        try:
            REQUESTS[verb].model_validate(body)
        except ValidationError as exc:
            problems.append(f"{where}: {verb}: {numbered_from_one(describe_validation(exc))}")
            continue
        if body.get("fresh") is True and keep:
            problems.append(f"{where}: keep_state true and {verb}'s fresh true contradict; give one")
            continue
        tests.append(SuiteTest(name=name, verb=verb, body=body, fresh=not keep and body.get("fresh", True)))
    if problems:
        raise UsageError("\n".join(problems))
    return Suite(name=str(data.get("name") or path.stem), session=str(data.get("session") or "default"), tests=tests,
                 before_each=hooks.get("before_each", []), after_each=hooks.get("after_each", []),
                 test_id_attribute=data.get("test_id_attribute"))


def with_files_read(body: dict, folder: Path) -> tuple[dict, list[str]]:
    """A flow's upload steps with their files given as paths (relative to the suite's folder) read
    into ``{name, content_base64}``, as the server takes them; and the paths that could not be read.
    The server never reads a path a request names: the files travel with the request."""
    import base64

    steps = body.get("steps")
    if not isinstance(steps, list):
        return body, []
    problems, read_steps = [], []
    for number, step in enumerate(steps, 1):
        files = step.get("files") if isinstance(step, dict) else None
        if isinstance(files, list) and any(isinstance(f, str) for f in files):
            read = []
            for entry in files:
                if not isinstance(entry, str):
                    read.append(entry)
                    continue
                file = folder / entry
                try:
                    read.append({"name": file.name, "content_base64": base64.b64encode(file.read_bytes()).decode()})
                except OSError as exc:
                    problems.append(f"step {number} files: cannot read {entry!r} ({exc.strerror or exc})")
            step = {**step, "files": read}
        read_steps.append(step)
    return {**body, "steps": read_steps}, problems


def _passed(run: QaRun) -> bool:
    return run.status == "passed"


MAX_RETRIES = 10  # --retries: more than this hides a broken test behind a lucky one

# What a verb's request may take beyond its own timeout_ms before the client gives up: the default
# session's first start, a video's encoding, the evidence written after the verdict.
TIMEOUT_MARGIN_S = 60.0


def request_timeout(verb: str, body: dict) -> float:
    """Seconds to wait for a request's answer: its verb's own timeout plus a margin, never unbounded."""
    timeout_ms = getattr(REQUESTS[verb].model_validate(body), "timeout_ms", 10_000)
    return timeout_ms / 1000 + TIMEOUT_MARGIN_S


class _Lost(Exception):
    """The server stopped answering: the tests after this one are not run."""


def named(run: QaRun, name: str) -> QaRun:
    """The run under its test's name in the suite (pure): the terminal, the JUnit and the report
    then say one name (the server names a baseline's run after the baseline)."""
    cases = [case.model_copy(update={"name": name}) for case in run.test_cases] if len(run.test_cases) == 1 \
        else run.test_cases
    return run.model_copy(update={"name": name, "test_cases": cases})


def run_suite(suite: Suite, base_url: str, *, token: str | None, data_dir: Path | None = None,  # noqa: C901
              junit: Path | None = None, report: Path | None = None, transport: Any = None, retries: int = 0,
              write_healed: tuple[Path, Path] | None = None) -> int:
    """Run the suite; 0 when every test passed, 1 otherwise. Each test is: the fresh start (unless
    keep_state), before_each, the test, after_each (run whenever before_each ran, even after a
    failure: it is the clean-up; its failure fails the test and is a case of its own in the
    reports). A server that stops answering midway leaves the tests not run as errors in the JUnit
    and report of what ran (exit 1, and it says so). ``transport``: an httpx transport instead of
    the network (tests). ``retries``: a test that fails is run again, up to this often, each time on
    a clean start (whatever keep_state says); one that passes on a retry is flaky, and the reports
    keep every attempt. ``write_healed``: (the suite file, where to write it healed): the suite
    rewritten with the healed targets of the tests that passed (write_healed_suite)."""
    import httpx2

    from vision.evidence.qa_runs import BadName, check_run_id, render_junit

    headers = {"authorization": f"Bearer {token}"} if token else {}
    runs: list[QaRun] = []
    earlier: dict[int, list[list[QaRun]]] = {}  # id() of a test's last run -> its failed attempts' runs
    verb_runs: dict[int, QaRun] = {}  # a test's number -> the run of its verb, in its last attempt
    passed: set[int] = set()  # the numbers of the tests that passed (their hooks too)
    failed = flaky = 0
    lost: str | None = None
    session = quote(suite.session, safe="")
    with httpx2.Client(base_url=base_url, headers=headers, timeout=httpx2.Timeout(30), transport=transport) as http:
        try:
            http.get("/healthz").raise_for_status()
        except (httpx2.TransportError, httpx2.HTTPStatusError) as exc:
            raise UsageError(f"no glassdesk server answers at {base_url} ({exc}); start one with `glassdesk up`, "
                             "or leave --url out to run one here") from None

        def one(verb: str, name: str, body: dict, number: int, progress) -> QaRun:
            """One verb request and its run read back; a refusal or an unreadable answer is an
            error run; a server gone raises _Lost."""
            started = time.monotonic()
            try:
                answer = http.post(f"/api/v1/sessions/{session}/qa/{verb}", json=body,
                                   timeout=request_timeout(verb, body))
                _refuse_unauthorised(answer, base_url)
                seconds = time.monotonic() - started
                if answer.status_code != 200:
                    error = _error_of(answer)
                    progress.console.print(f"[red]✗ error[/red] {escape(name)}  [dim]{seconds:.1f} s[/dim]\n"
                                           f"  {escape(error)}")
                    return _error_run(verb, name, error)
                run_id = check_run_id(answer.json()["test_run_id"])
                fetched = http.get(f"/api/v1/qa/runs/{run_id}")
                _refuse_unauthorised(fetched, base_url)
                run = QaRun.model_validate(fetched.json())
                if run.test_run_id != run_id:
                    raise ValueError(f"the server answered run {run.test_run_id!r} for {run_id!r}")
                run = named(run, name)
            except httpx2.TransportError as exc:
                reason = f"the server at {base_url} stopped answering during test {number} ({name}): {exc}"
                progress.console.print(f"[red]✗ error[/red] {escape(name)}\n  {escape(reason)}")
                raise _Lost(reason) from None
            except (ValueError, KeyError, TypeError, BadName) as exc:  # an answer that is not a QA run's
                error = f"the server's answer could not be read: {exc}"
                progress.console.print(f"[red]✗ error[/red] {escape(name)}\n  {escape(error)}")
                return _error_run(verb, name, error)
            if _passed(run):
                progress.console.print(f"[green]✓ passed[/green] {escape(name)}  [dim]{seconds:.1f} s[/dim]")
            else:
                reason = next((c.failure_reason for c in run.test_cases if c.failure_reason), run.status)
                report_url = escape(f"{base_url}/api/v1/qa/runs/{run_id}/report")
                progress.console.print(f"[red]✗ {escape(run.status)}[/red] {escape(name)}  [dim]{seconds:.1f} s[/dim]\n"
                                       f"  {escape(reason)}\n  [dim]{report_url}[/dim]")
            return run

        def run_test(test: SuiteTest, number: int, progress, *, clean: bool) -> tuple[bool, list[QaRun]]:
            """One attempt of a test (before_each, the test, after_each): passed?, and its runs.
            ``clean``: start on a cleared browser whatever the suite says (a retry)."""
            before, body, after = suite.requests(test, fresh=True if clean else None)
            attempt_runs: list[QaRun] = []
            ok = True
            if before is not None:
                hook = one("verify_user_flow", before["name"], before, number, progress)
                if not _passed(hook):  # the test is not run on a page its set-up did not make
                    ok = False
                    attempt_runs.append(hook)
                    attempt_runs.append(_error_run(test.verb, test.name, "not run: before_each did not pass ("
                                                   + _reason_of(hook) + ")"))
            if ok:
                run = one(test.verb, test.name, body, number, progress)
                attempt_runs.append(run)
                ok = _passed(run)
                verb_runs[number] = run
            if after is not None:  # the clean-up runs whatever happened before it
                hook = one("verify_user_flow", after["name"], after, number, progress)
                if not _passed(hook):
                    ok = False
                    attempt_runs.append(hook)
            return ok, attempt_runs

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                      transient=True) as progress:
            task = progress.add_task(f"{suite.name}", total=len(suite.tests))
            for number, test in enumerate(suite.tests, 1):
                if lost is not None:
                    failed += 1
                    runs.append(_error_run(test.verb, test.name, f"not run: {lost}"))
                    continue
                progress.update(task, description=escape(f"[{number}/{len(suite.tests)}] {test.name}"))
                failed_attempts: list[list[QaRun]] = []
                try:
                    for attempt in range(1, retries + 2):
                        retry = attempt > 1
                        if retry:
                            progress.console.print(f"[yellow]↻ retry {attempt - 1} of {retries}[/yellow] "
                                                   f"{escape(test.name)}")
                        ok, attempt_runs = run_test(test, number, progress, clean=retry)
                        if ok or attempt > retries:
                            break
                        failed_attempts.append(attempt_runs)
                except _Lost as exc:
                    lost = str(exc)
                    failed += 1
                    runs += [r for attempt_runs in failed_attempts for r in attempt_runs]
                    runs.append(_error_run(test.verb, test.name, lost))
                    continue
                runs += attempt_runs
                if failed_attempts:
                    earlier[id(attempt_runs[-1])] = failed_attempts
                    if ok:
                        flaky += 1
                        progress.console.print(f"[yellow]~ flaky[/yellow] {escape(test.name)}: passed on attempt "
                                               f"{attempt}")
                if not ok:
                    failed += 1
                else:
                    passed.add(number)
                progress.advance(task)
        if junit is not None:
            def evidence(run_id: str, name: str) -> str:
                if data_dir is not None:  # an embedded server's files stay on this disk
                    return str((data_dir / "qa" / "runs" / run_id / name).resolve())
                return f"{base_url}/api/v1/qa/runs/{quote(run_id, safe='')}/artifacts/{quote(name, safe='')}"

            junit.write_text(render_junit(runs, suite=suite.name, artifact_url=evidence,
                                          earlier=lambda run: earlier.get(id(run), [])), encoding="utf-8")
        if report is not None:
            _write_report(http, report, suite.name, runs, lambda run: earlier.get(id(run), []),
                          gone=lost is not None, links=base_url if data_dir is None else None)
    if write_healed is not None:
        write_healed_suite(*write_healed, {n - 1: verb_runs[n] for n in passed if n in verb_runs})
    colour = "green" if not failed else "red"
    console.print(f"[bold {colour}]{len(suite.tests) - failed} of {len(suite.tests)} passed[/bold {colour}]"
                  + (f" ({flaky} flaky: passed on a retry)" if flaky else "")
                  + escape((f"; JUnit: {junit}" if junit else "") + (f"; report: {report}" if report else "")))
    if lost is not None:
        console.print(f"[red]{escape(lost)}; the tests after it were not run (errors in the reports)[/red]")
    return 0 if not failed else 1


def write_healed_suite(source: Path, target: Path, runs: dict[int, QaRun]) -> list[str]:
    """``source`` rewritten into ``target`` with the heals of the given runs (a test's 0-based
    position -> its passing run) in place, listed at its head and on the terminal. Only a test
    that passed gives its heals: a heal in a failing test may be the regression itself."""
    from vision.qa.heals import healed_suite

    heals = {position: (run.result or {}).get("heals") or [] for position, run in runs.items()}
    heals = {position: found for position, found in heals.items() if found}
    text, listed = healed_suite(source.read_text(encoding="utf-8"), heals, source.name)
    target.write_text(text, encoding="utf-8")
    console.print(f"[yellow]healed suite: {escape(str(target))}[/yellow] ({len(listed)} step(s) re-targeted)")
    for line in listed:
        console.print(f"  {escape(line)}")
    return listed


def _reason_of(run: QaRun) -> str:
    return next((c.failure_reason for c in run.test_cases if c.failure_reason), run.status)


def _refuse_unauthorised(answer, base_url: str) -> None:
    """A token refused is the command line's problem, not a test's: a usage error (exit 2)."""
    if answer.status_code in (401, 403):
        raise UsageError(f"the server at {base_url} refused this client (HTTP {answer.status_code}: "
                         f"{_error_of(answer)}); set GLASSDESK_TOKEN to the server's token")


def _write_report(http, report: Path, name: str, runs: list[QaRun], earlier, *, gone: bool,
                  links: str | None) -> None:
    """The suite in the run viewer's offline form (vision.qa.suite_report), its runs' files and
    verify read from the server while it still answers: a report that opens from disk after the
    server is gone. ``gone``: the server stopped answering, so nothing more is asked of it (its
    runs are listed without their files). ``links``: the server the runs' API links point to (none
    for one embedded here, which ends with the command)."""
    import httpx2

    from vision.models.qa import VerifyReport
    from vision.qa.suite_report import write_suite_report

    def fetch(run_id: str, artifact: str) -> bytes | None:
        # Both names are checked by the caller (only those a glassdesk server makes): no answer
        # can name a path outside the report's folder.
        if gone:
            return None
        try:
            answer = http.get(f"/api/v1/qa/runs/{run_id}/artifacts/{artifact}")
        except httpx2.TransportError:
            return None
        return answer.content if answer.status_code == 200 else None

    def verify(run_id: str) -> VerifyReport | None:
        if gone:
            return None
        try:
            answer = http.get(f"/api/v1/qa/runs/{quote(run_id, safe='')}/verify")
            return VerifyReport.model_validate(answer.json()) if answer.status_code == 200 else None
        except (httpx2.TransportError, ValueError):  # pydantic's ValidationError is a ValueError
            return None

    write_suite_report(report, name, runs, earlier, fetch, verify, links)


def _error_of(answer) -> str:
    try:
        error = answer.json()["error"]
        return f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {answer.status_code}: {answer.text[:300]}"


def _error_run(verb: str, name: str, error: str) -> QaRun:
    """A test the server refused (or that was not run): an error case in the reports, with no evidence."""
    from datetime import datetime

    from vision.models.qa import Summary, TestCase

    return QaRun(test_run_id="-", verb=verb, name=name, timestamp=datetime.now(UTC).isoformat(),
                 status="error", test_cases=[TestCase(name=name, status="error", duration_ms=0,
                                                      failure_reason=error)],
                 summary=Summary(total=1, error=1))


@contextlib.contextmanager
def embedded_server(data_dir: str | None, *, max_sessions: int = 2, warm: int = 0):
    """A server of its own on a free loopback port, with the crash arrangement `glassdesk up` has;
    ``warm`` desktops kept started ahead (an evaluation's episodes claim them)."""
    import uvicorn

    from desktop.session.manager import SessionManager
    from desktop.session.ownership import own_desktops
    from vision.http.app import Settings, create_app

    ownership = own_desktops()
    manager = SessionManager(root=ownership.root, max_sessions=max_sessions)
    # The socket is bound here and handed to uvicorn: no other process can take the port between
    # choosing it and listening on it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        settings = Settings(host="127.0.0.1", port=sock.getsockname()[1], data_dir=data_dir)
        # The app builds the application over ``manager`` (Glassdesk.from_settings, as ``glassdesk up``
        # does), so vision.qa imports no application module; with lifespan off the app closes nothing.
        app = create_app(manager, settings)
        glassdesk = app.state.glassdesk
        if warm:
            manager.keep_warm(warm)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise UsageError("the embedded server did not start")
            time.sleep(0.02)
        try:
            yield settings.public_url, glassdesk.store.root, settings.token
        finally:
            server.should_exit = True
            thread.join(10)
    finally:
        sock.close()
        manager.close()
        ownership.close()


def main(args: argparse.Namespace) -> int:  # noqa: C901
    try:
        suite = load_suite(Path(args.suite))
        if getattr(args, "strict", False):  # every flow fails at a locator that no longer matches
            for test in suite.tests:
                if test.verb == "verify_user_flow":
                    test.body = {**test.body, "strict": True}
        junit = Path(args.junit) if args.junit else None
        report = Path(args.report) if args.report else None
        retries = getattr(args, "retries", 0)
        if not 0 <= retries <= MAX_RETRIES:
            raise UsageError(f"--retries: from 0 to {MAX_RETRIES} (got {retries})")
        if getattr(args, "record_video", False):  # every test filmed, as record_video: true in each would
            for test in suite.tests:
                test.body = {**test.body, "record_video": True}
        heal_with = getattr(args, "heal_with", None)
        if heal_with:  # a step nothing recorded re-finds is re-targeted by this model, in every flow
            if getattr(args, "strict", False):
                raise UsageError("--heal-with and --strict contradict: --strict heals nothing")
            for test in suite.tests:
                if test.verb == "verify_user_flow":
                    test.body = {**test.body, "heal_with": heal_with}
        write_healed = None
        if getattr(args, "write_healed", None):
            source, target = Path(args.suite), Path(args.write_healed)
            if target.resolve() == source.resolve() and not getattr(args, "overwrite", False):
                raise UsageError(f"--write-healed {target} is the suite itself: give another file, or add "
                                 "--overwrite to replace it")
            write_healed = (source, target)
        if args.url:
            return run_suite(suite, args.url.rstrip("/"), token=os.environ.get("GLASSDESK_TOKEN"), junit=junit,
                             report=report, retries=retries, write_healed=write_healed)
        console.print("[dim]no --url: starting a glassdesk server and its desktop here…[/dim]")
        with embedded_server(args.data_dir) as (base, data_dir, token):
            return run_suite(suite, base, token=token, data_dir=Path(data_dir), junit=junit, report=report,
                             retries=retries, write_healed=write_healed)
    except UsageError as exc:
        console.print(f"[red]usage:[/red] {escape(str(exc))}")
        return 2
    except KeyboardInterrupt:
        return 130


def add_parser(sub: Any) -> None:
    qa = sub.add_parser("qa", help="run a suite of QA verbs (YAML) for CI: exit 0 all passed, 1 a failure, 2 usage")
    qa.add_argument("suite", help="the suite file (YAML)")
    qa.add_argument("--url", default=None, help="a running glassdesk server (default: start one here)")
    qa.add_argument("--junit", metavar="OUT.xml", help="write JUnit XML here")
    qa.add_argument("--report", metavar="OUT.html",
                    help="write the HTML report here: the run viewer's offline form of the whole suite, one file "
                         "(files past its size bounds beside it, in OUT_files/)")
    qa.add_argument("--record-video", action="store_true",
                    help="film every test: a video receipt per run (chapters, click rings, captions), in the reports")
    qa.add_argument("--retries", type=int, default=0, metavar="N",
                    help="run a failing test again up to N times, on a clean start; one that passes on a retry is "
                         "reported flaky (default 0)")
    qa.add_argument("--strict", action="store_true",
                    help="a step whose locator no longer matches fails, rather than being healed from what was "
                         "recorded of its element (an exported run's `recorded`)")
    qa.add_argument("--heal-with", metavar="MODEL", default=None,
                    help="a step that nothing recorded re-finds asks MODEL for that one step (its recorded "
                         "instruction, the screen now), is re-targeted where it points, and is reported "
                         "'healed by model'")
    qa.add_argument("--write-healed", metavar="PATH", default=None,
                    help="write the suite here with the healed targets in place (from the tests that passed), the "
                         "heals listed at its head; the suite file itself is kept unless PATH is it and --overwrite")
    qa.add_argument("--overwrite", action="store_true", help="--write-healed may replace the suite file itself")
    qa.add_argument("--data-dir", default=None, help="the embedded server's data dir (default $GLASSDESK_DATA_DIR, "
                                                     "else ./data)")
    qa.set_defaults(func=main)


__all__ = ["add_parser", "load_suite", "main", "run_suite"]
