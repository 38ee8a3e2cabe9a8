"""`glassdesk qa`'s client against a scripted server (httpx MockTransport), no X: a refused token is
a usage error, a server lost mid-suite leaves the JUnit of what ran, every request has a bounded
timeout, and nothing a hostile server answers can write outside the report's folder."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import httpx2
import pytest

from tests.fakes.qa_api import QaApi
from tests.reports import embedded_document
from vision.cli.qa import TIMEOUT_MARGIN_S, Suite, SuiteTest, UsageError, run_suite
from vision.models.qa import Artifact, Artifacts, QaRun, TestCase

RUN_ID = "20260101T000000000000Z-0000abcd"


def a_suite(*names: str, session: str = "default") -> Suite:
    return Suite(name="s", session=session, tests=[
        SuiteTest(name=n, verb="verify_page_loads", body={"name": n, "url": "http://x/", "timeout_ms": 2000})
        for n in names])


def a_run(run_id: str = RUN_ID, artifact: str = "page.png") -> dict:
    return QaRun(test_run_id=run_id, verb="verify_page_loads", name="t", timestamp="2026-01-01T00:00:00.000Z",
                 status="passed", test_cases=[TestCase(name="t", status="passed", duration_ms=1)],
                 artifacts=Artifacts(screenshots=[Artifact(name=artifact, path="/x", sha256="0" * 64)])
                 ).model_dump(mode="json")


def one_run() -> QaApi:
    """Every verb request is the run RUN_ID, with one screenshot."""
    server = QaApi()
    server.on_post = lambda number: httpx2.Response(200, json={"test_run_id": RUN_ID})
    server.run = a_run()
    return server


def test_a_refused_token_is_a_usage_error_naming_glassdesk_token(tmp_path):
    server = one_run()
    server.on_post = lambda n: httpx2.Response(401, json={"error": {"code": "unauthorized", "message": "no"}})
    with pytest.raises(UsageError, match="GLASSDESK_TOKEN"):
        run_suite(a_suite("a"), "http://gd", token="wrong", transport=httpx2.MockTransport(server))


def test_a_server_lost_mid_suite_leaves_the_junit_of_what_ran_and_the_rest_as_errors(tmp_path):
    server = one_run()

    def post(number):
        if number == 2:
            raise httpx2.ConnectError("connection refused")
        return httpx2.Response(200, json={"test_run_id": RUN_ID})

    server.on_post = post
    junit, report = tmp_path / "junit.xml", tmp_path / "report.html"
    code = run_suite(a_suite("one", "two", "three"), "http://gd", token=None, junit=junit, report=report,
                     transport=httpx2.MockTransport(server))
    assert code == 1 and len(server.posts) == 2  # the third was not tried against a server that is gone
    suite = ET.fromstring(junit.read_text()).find("testsuite")
    assert suite.get("tests") == "3" and suite.get("errors") == "2"
    cases = suite.findall("testcase")
    assert cases[0].find("error") is None
    assert "stopped answering during test 2" in cases[1].find("error").get("message")
    assert "not run" in cases[2].find("error").get("message")
    assert report.is_file()


def test_every_request_has_a_bounded_timeout_from_its_verb(tmp_path):
    server = one_run()
    run_suite(a_suite("a"), "http://gd", token=None, transport=httpx2.MockTransport(server))
    post = next(r for r in server.seen if r.method == "POST")
    assert post.extensions["timeout"]["read"] == 2 + TIMEOUT_MARGIN_S
    assert all(r.extensions["timeout"]["read"] is not None for r in server.seen)


def test_the_session_name_is_escaped_in_the_url(tmp_path):
    server = one_run()
    run_suite(a_suite("a", session="a/../b?c"), "http://gd", token=None, transport=httpx2.MockTransport(server))
    post = next(r for r in server.seen if r.method == "POST")
    assert post.url.raw_path.startswith(b"/api/v1/sessions/a%2F..%2Fb%3Fc/qa/verify_page_loads")


@pytest.mark.parametrize("run_id, artifact", [("../../evil", "page.png"), (RUN_ID, "../../evil.png"),
                                              (RUN_ID, "..")])
def test_a_hostile_server_cannot_write_outside_the_report_folder(tmp_path, run_id, artifact):
    server = one_run()
    server.on_post = lambda n: httpx2.Response(200, json={"test_run_id": run_id})
    server.run = a_run(run_id, artifact)
    out = tmp_path / "out"
    out.mkdir()
    code = run_suite(a_suite("a"), "http://gd", token=None, report=out / "report.html",
                     transport=httpx2.MockTransport(server))
    assert code in (0, 1)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["out/report.html"], written


def flaky(failures: int) -> QaApi:
    """Test `a` fails its first ``failures`` attempts, then passes; `b` always passes."""
    return QaApi(fails=lambda body, attempt: body["name"] == "a" and attempt <= failures,
                 reason=lambda body: "the counter showed 2")


def test_a_test_that_passes_on_a_retry_is_flaky_with_every_attempt_on_record(tmp_path):
    server = flaky(failures=1)
    junit, report = tmp_path / "junit.xml", tmp_path / "report.html"
    suite = a_suite("a", "b")
    for test in suite.tests:
        test.fresh = False  # keep_state: true, so that the retry's clean start shows
    code = run_suite(suite, "http://gd", token=None, junit=junit, report=report, retries=2,
                     transport=httpx2.MockTransport(server))
    assert code == 0
    assert [(b["name"], b["fresh"]) for b in server.bodies] == [("a", False), ("a", True), ("b", False)]
    suite = ET.fromstring(junit.read_text()).find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("2", "0")
    a = suite.findall("testcase")[0]
    assert {p.get("name"): p.get("value") for p in a.find("properties")} == {"flaky": "true", "attempts": "2"}
    assert "attempt 1 (a): failed: the counter showed 2" in a.find("system-out").text
    # The report lists the test as flaky, its failed attempt openable with its reason.
    doc = embedded_document(report)
    a, b = doc["cases"]
    assert (a["status"], a["badges"], b["badges"]) == ("passed", ["flaky"], [])
    assert [(x["status"], x["message"]) for x in a["attempts"]] == [("failed", "the counter showed 2")]
    assert doc["runs"][a["attempts"][0]["run"]]["status"] == "failed"


def test_a_test_that_fails_every_attempt_fails_and_no_retry_runs_without_retries(tmp_path):
    server = flaky(failures=3)
    junit = tmp_path / "junit.xml"
    assert run_suite(a_suite("a"), "http://gd", token=None, junit=junit, retries=2,
                     transport=httpx2.MockTransport(server)) == 1
    assert len(server.bodies) == 3
    case = ET.fromstring(junit.read_text()).find("testsuite/testcase")
    assert case.find("failure") is not None
    assert {p.get("name"): p.get("value") for p in case.find("properties")} == {"attempts": "3"}
    once = flaky(failures=1)
    assert run_suite(a_suite("a"), "http://gd", token=None, transport=httpx2.MockTransport(once)) == 1
    assert len(once.bodies) == 1


def test_brackets_in_names_and_messages_are_printed_as_written_and_the_suite_runs_to_the_end(tmp_path, capsys):
    # Rich reads [/x] as a closing tag and [b] as bold: unescaped, the first raised MarkupError and
    # ended the run (exit 1, no JUnit); the second vanished from the terminal.
    server = QaApi(fails=lambda body, attempt: body["name"].startswith("a test"),
                   reason=lambda body: "saw 'Item [/b] 1.1' in [data-property-name=\"name\"]")
    junit = tmp_path / "junit.xml"
    code = run_suite(a_suite("a test [/x] named", "[v2] the next [b]one[/b]"), "http://gd", token=None, junit=junit,
                     transport=httpx2.MockTransport(server))
    assert code == 1  # one failed: the exit code of a failure, not of a crash
    cases = ET.fromstring(junit.read_text()).findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == ["a test [/x] named", "[v2] the next [b]one[/b]"]
    assert cases[1].find("failure") is None
    err = capsys.readouterr().err
    assert "a test [/x] named" in err and "saw 'Item [/b] 1.1' in [data-property-name=\"name\"]" in err
    assert "[v2] the next [b]one[/b]" in err


def test_a_models_words_with_brackets_print_as_written_in_glassdesk_act(capsys):
    from vision.cli.command import _print_step

    _print_step({"index": 1, "actions": [{"action": "type", "text": "[/x]"}], "model_ms": 1, "exec_ms": 2,
                 "settle_ms": 3, "error": None, "text": "I typed [/x] into [b]the field"}, 10)
    err = capsys.readouterr().err
    assert "I typed [/x] into [b]the field" in err


def test_a_test_goes_by_its_suite_name_in_the_terminal_the_junit_and_the_report(tmp_path, capsys):
    """The server names a baseline's run after the baseline ("baseline counter"): the suite's
    name for the test is the one every output says."""
    server = one_run()  # its run and test case are named "t"
    junit, report = tmp_path / "junit.xml", tmp_path / "report.html"
    assert run_suite(a_suite("counter baseline"), "http://gd", token=None, junit=junit, report=report,
                     transport=httpx2.MockTransport(server)) == 0
    assert "counter baseline" in capsys.readouterr().err
    [case] = ET.fromstring(junit.read_text()).find("testsuite").findall("testcase")
    assert case.get("name") == "counter baseline"
    document = embedded_document(report)
    assert document["cases"][0]["name"] == "counter baseline", document["cases"]
