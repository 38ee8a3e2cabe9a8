"""`glassdesk qa SUITE.yaml`: run a suite of QA verbs for CI, against a running server (--url) or
one embedded in this process, with progress on the terminal, JUnit XML and an HTML report.

Exit status: 0 when every test passed, 1 when any failed (or errored; a server that stops answering
mid-suite too: the tests it did not run are errors in the JUnit and report of what ran), 2 on a
usage error (no such file, a suite that does not parse or validate, no server at --url, a server
that refuses the token: set GLASSDESK_TOKEN). The whole suite is checked before the first test
runs, so a typo costs nothing. Each request waits for its verb's own timeout_ms plus a margin,
never without bound.

A suite::

    name: smoke
    session: default            # optional
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
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from desktop.errors import describe_validation
from vision.qa.models import (
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
    body: dict


@dataclass
class Suite:
    name: str
    session: str
    tests: list[SuiteTest]


# What a suite file may say at its top level; anything else (a misspelt key, a `setup:` this runner
# does not know) is refused rather than silently ignored.
SUITE_KEYS = ("name", "session", "test_id_attribute", "tests")


def numbered_from_one(message: str) -> str:
    """A validation message's step positions as the reports number them: ``steps.0.action`` ->
    ``step 1 action`` (pure)."""
    return re.sub(r"\bsteps\.(\d+)\.?", lambda m: f"step {int(m.group(1)) + 1} ", message).replace(" :", ":")


def load_suite(path: Path) -> Suite:
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
    tests = []
    for number, entry in enumerate(data["tests"], 1):
        where = f"{path}: test {number}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: each test is a mapping with a name and one verb")
            continue
        verbs = [k for k in entry if k in VERBS]
        unknown = [k for k in entry if k not in VERBS and k != "name"]
        if unknown or len(verbs) != 1:
            problems.append(f"{where}: give `name` and exactly one of {', '.join(VERBS)}"
                            + (f" (unknown: {', '.join(map(str, unknown))})" if unknown else ""))
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
                problems += [f"{where} ({name}): {problem}" for problem in unread]
                continue
        try:
            REQUESTS[verb].model_validate(body)
        except ValidationError as exc:
            problems.append(f"{where} ({name}): {verb}: {numbered_from_one(describe_validation(exc))}")
            continue
        tests.append(SuiteTest(name=name, verb=verb, body=body))
    if problems:
        raise UsageError("\n".join(problems))
    return Suite(name=str(data.get("name") or path.stem), session=str(data.get("session") or "default"), tests=tests)


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


# What a verb's request may take beyond its own timeout_ms before the client gives up: the default
# session's first start, a video's encoding, the evidence written after the verdict.
TIMEOUT_MARGIN_S = 60.0


def request_timeout(test: SuiteTest) -> float:
    """Seconds to wait for a test's answer: its verb's own timeout plus a margin, never unbounded."""
    timeout_ms = getattr(REQUESTS[test.verb].model_validate(test.body), "timeout_ms", 10_000)
    return timeout_ms / 1000 + TIMEOUT_MARGIN_S


def run_suite(suite: Suite, base_url: str, *, token: str | None, data_dir: Path | None = None,
              junit: Path | None = None, report: Path | None = None, transport: Any = None) -> int:
    """Run the suite; 0 when every test passed, 1 otherwise. A server that stops answering midway
    leaves the tests not run as errors in the JUnit and report of what ran (exit 1, and it says so).
    ``transport``: an httpx transport instead of the network (tests)."""
    import httpx2

    from vision.qa.runs import BadName, check_run_id, render_html, render_junit

    headers = {"authorization": f"Bearer {token}"} if token else {}
    runs: list[QaRun] = []
    failed = 0
    lost: str | None = None
    session = quote(suite.session, safe="")
    with httpx2.Client(base_url=base_url, headers=headers, timeout=httpx2.Timeout(30), transport=transport) as http:
        try:
            http.get("/healthz").raise_for_status()
        except (httpx2.TransportError, httpx2.HTTPStatusError) as exc:
            raise UsageError(f"no glassdesk server answers at {base_url} ({exc}); start one with `glassdesk up`, "
                             "or leave --url out to run one here") from None
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                      transient=True) as progress:
            task = progress.add_task(f"{suite.name}", total=len(suite.tests))
            for number, test in enumerate(suite.tests, 1):
                if lost is not None:
                    failed += 1
                    runs.append(_error_run(test, f"not run: {lost}"))
                    continue
                progress.update(task, description=f"[{number}/{len(suite.tests)}] {test.name}")
                started = time.monotonic()
                try:
                    answer = http.post(f"/api/v1/sessions/{session}/qa/{test.verb}", json=test.body,
                                       timeout=request_timeout(test))
                    _refuse_unauthorised(answer, base_url)
                    seconds = time.monotonic() - started
                    if answer.status_code != 200:
                        error = _error_of(answer)
                        failed += 1
                        progress.console.print(f"[red]✗ error[/red] {test.name}  [dim]{seconds:.1f} s[/dim]\n  {error}")
                        runs.append(_error_run(test, error))
                        continue
                    run_id = check_run_id(answer.json()["test_run_id"])
                    fetched = http.get(f"/api/v1/qa/runs/{run_id}")
                    _refuse_unauthorised(fetched, base_url)
                    run = QaRun.model_validate(fetched.json())
                    if run.test_run_id != run_id:
                        raise ValueError(f"the server answered run {run.test_run_id!r} for {run_id!r}")
                except httpx2.TransportError as exc:
                    lost = f"the server at {base_url} stopped answering during test {number} ({test.name}): {exc}"
                    failed += 1
                    progress.console.print(f"[red]✗ error[/red] {test.name}\n  {lost}")
                    runs.append(_error_run(test, lost))
                    continue
                except (ValueError, KeyError, TypeError, BadName) as exc:  # an answer that is not a QA run's
                    failed += 1
                    error = f"the server's answer could not be read: {exc}"
                    progress.console.print(f"[red]✗ error[/red] {test.name}\n  {error}")
                    runs.append(_error_run(test, error))
                    continue
                runs.append(run)
                if _passed(run):
                    progress.console.print(f"[green]✓ passed[/green] {test.name}  [dim]{seconds:.1f} s[/dim]")
                else:
                    failed += 1
                    reason = next((c.failure_reason for c in run.test_cases if c.failure_reason), run.status)
                    progress.console.print(f"[red]✗ {run.status}[/red] {test.name}  [dim]{seconds:.1f} s[/dim]\n"
                                           f"  {reason}\n  [dim]{base_url}/api/v1/qa/runs/{run_id}/report[/dim]")
                progress.advance(task)
        if junit is not None:
            def evidence(run_id: str, name: str) -> str:
                if data_dir is not None:  # an embedded server's files stay on this disk
                    return str((data_dir / "qa" / "runs" / run_id / name).resolve())
                return f"{base_url}/api/v1/qa/runs/{quote(run_id, safe='')}/artifacts/{quote(name, safe='')}"

            junit.write_text(render_junit(runs, suite=suite.name, artifact_url=evidence), encoding="utf-8")
        if report is not None:
            files = report.with_name(report.stem + "_files")
            local = _download(http, runs, files) if lost is None else {}
            page = render_html(runs, artifact_url=lambda run_id, name: local.get((run_id, name), ""),
                               title=suite.name)
            report.write_text(page, encoding="utf-8")
    colour = "green" if not failed else "red"
    console.print(f"[bold {colour}]{len(suite.tests) - failed} of {len(suite.tests)} passed[/bold {colour}]"
                  + (f"; JUnit: {junit}" if junit else "") + (f"; report: {report}" if report else ""))
    if lost is not None:
        console.print(f"[red]{lost}; the tests after it were not run (errors in the reports)[/red]")
    return 0 if not failed else 1


def _refuse_unauthorised(answer, base_url: str) -> None:
    """A token refused is the command line's problem, not a test's: a usage error (exit 2)."""
    if answer.status_code in (401, 403):
        raise UsageError(f"the server at {base_url} refused this client (HTTP {answer.status_code}: "
                         f"{_error_of(answer)}); set GLASSDESK_TOKEN to the server's token")


def _download(http, runs: list[QaRun], directory: Path) -> dict[tuple[str, str], str]:
    """The runs' screenshots beside the report, so it opens from disk after the server is gone.
    Run ids and file names come from the server: only those the server itself would accept are
    used as path parts, so no answer can write outside ``directory``."""
    from vision.qa.runs import BadName, check_artifact_name, check_run_id

    local: dict[tuple[str, str], str] = {}
    for run in runs:
        for artifact in run.artifacts.screenshots:
            try:
                run_id, name = check_run_id(run.test_run_id), check_artifact_name(artifact.name)
            except BadName as exc:
                console.print(f"[yellow]not downloaded: {exc}[/yellow]")
                continue
            answer = http.get(f"/api/v1/qa/runs/{run_id}/artifacts/{name}")
            if answer.status_code != 200:
                continue
            target = directory / run_id / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(answer.content)
            local[(run_id, name)] = f"{directory.name}/{run_id}/{name}"
    return local


def _error_of(answer) -> str:
    try:
        error = answer.json()["error"]
        return f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {answer.status_code}: {answer.text[:300]}"


def _error_run(test: SuiteTest, error: str) -> QaRun:
    """A test the server refused: an error case in the reports, with no evidence."""
    from datetime import datetime

    from vision.qa.models import Summary, TestCase

    return QaRun(test_run_id="-", verb=test.verb, name=test.name, timestamp=datetime.now(UTC).isoformat(),
                 status="error", test_cases=[TestCase(name=test.name, status="error", duration_ms=0,
                                                      failure_reason=error)],
                 summary=Summary(total=1, error=1))


@contextlib.contextmanager
def embedded_server(data_dir: str | None):
    """A server of its own on a free loopback port, with the crash arrangement `glassdesk up` has."""
    import uvicorn

    from desktop.session.manager import SessionManager
    from desktop.x11.procs import own_desktops
    from vision.http.app import Settings, create_app

    ownership = own_desktops()
    manager = SessionManager(root=ownership.root, max_sessions=2)
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


def main(args: argparse.Namespace) -> int:
    try:
        suite = load_suite(Path(args.suite))
        junit = Path(args.junit) if args.junit else None
        report = Path(args.report) if args.report else None
        if args.url:
            return run_suite(suite, args.url.rstrip("/"), token=os.environ.get("GLASSDESK_TOKEN"), junit=junit,
                             report=report)
        console.print("[dim]no --url: starting a glassdesk server and its desktop here…[/dim]")
        with embedded_server(args.data_dir) as (base, data_dir, token):
            return run_suite(suite, base, token=token, data_dir=Path(data_dir), junit=junit, report=report)
    except UsageError as exc:
        console.print(f"[red]usage:[/red] {exc}")
        return 2
    except KeyboardInterrupt:
        return 130


def add_parser(sub: Any) -> None:
    qa = sub.add_parser("qa", help="run a suite of QA verbs (YAML) for CI: exit 0 all passed, 1 a failure, 2 usage")
    qa.add_argument("suite", help="the suite file (YAML)")
    qa.add_argument("--url", default=None, help="a running glassdesk server (default: start one here)")
    qa.add_argument("--junit", metavar="OUT.xml", help="write JUnit XML here")
    qa.add_argument("--report", metavar="OUT.html", help="write the HTML report here (screenshots beside it)")
    qa.add_argument("--data-dir", default=None, help="the embedded server's data dir (default $GLASSDESK_DATA_DIR, "
                                                     "else ./data)")
    qa.set_defaults(func=main)


__all__ = ["add_parser", "load_suite", "main", "run_suite"]
