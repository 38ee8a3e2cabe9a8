"""`glassdesk qa SUITE.yaml` for CI: the example suite in docs/qa against its own pages, exit codes
0 / 1 / 2, JUnit that parses with the right failures, an HTML report that opens from disk (its browser side:
tests/e2e/test_suite_report.py), and the
embedded server when no --url is given."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.marks import without_owner
from tests.reports import embedded_document, suite_images
from vision.cli import main
from vision.qa.suite_report import FILE_REF

pytestmark = pytest.mark.x11

DOCS = Path(__file__).resolve().parents[2] / "docs" / "qa"
EXAMPLE_ORIGIN = "http://127.0.0.1:8000"


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def pages():
    """docs/qa served as the example says (python3 -m http.server), on a free port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(DOCS)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def suite_file(tmp_path: Path, origin: str, text: str | None = None) -> Path:
    text = text if text is not None else (DOCS / "smoke.yaml").read_text()
    path = tmp_path / "suite.yaml"
    path.write_text(text.replace(EXAMPLE_ORIGIN, origin))
    return path


def test_the_example_suite_passes_with_junit_and_a_report(vision_api, pages, tmp_path):
    junit, report = tmp_path / "junit.xml", tmp_path / "report.html"
    code = main(["qa", str(suite_file(tmp_path, pages)), "--url", str(vision_api.base_url),
                 "--junit", str(junit), "--report", str(report)])
    assert code == 0
    suite = ET.fromstring(junit.read_text()).find("testsuite")
    assert suite.get("name") == "smoke" and suite.get("tests") == "4" and suite.get("failures") == "0"
    assert [c.get("name") for c in suite.findall("testcase")] == [
        "home loads", "sign-in link is visible", "login works", "no console errors"]
    # The report: the suite's tests, each its run's viewer document, every image inlined (a small
    # suite is one file, nothing beside it), the evidence checked by the server that ran it.
    doc = embedded_document(report)
    assert [(c["name"], c["status"]) for c in doc["cases"]] == [
        ("home loads", "passed"), ("sign-in link is visible", "passed"), ("login works", "passed"),
        ("no console errors", "passed")]
    images = suite_images(doc)
    assert images and all(image["src"] in [FILE_REF + key for key in doc["files"]] for _, image in images)
    assert all(view["evidence"]["text"].startswith("Evidence verified") for view in doc["runs"])
    assert not (tmp_path / "report_files").exists()


def test_a_failing_test_exits_1_and_junit_names_it(vision_api, pages, tmp_path):
    text = f"""name: failing
tests:
  - name: right title
    verify_page_loads: {{url: "{EXAMPLE_ORIGIN}/index.html", expected_title: "Example shop"}}
  - name: wrong title
    verify_page_loads: {{url: "{EXAMPLE_ORIGIN}/index.html", expected_title: "Another shop"}}
"""
    junit = tmp_path / "junit.xml"
    assert main(["qa", str(suite_file(tmp_path, pages, text)), "--url", str(vision_api.base_url),
                 "--junit", str(junit)]) == 1
    suite = ET.fromstring(junit.read_text()).find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    failed = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["wrong title"]
    assert "expected 'Another shop'" in failed[0].find("failure").get("message")
    assert "/artifacts/page.png" in failed[0].find("system-out").text


@pytest.mark.parametrize("text, says", [
    (None, "cannot read"),
    ("tests: [", "not valid YAML"),
    ("tests: []", "non-empty list"),
    ("tests:\n  - name: x\n    verify_everything: {}", "exactly one of"),
    ("tests:\n  - name: x\n    verify_user_flow: {start_url: 'http://127.0.0.1:9/', steps: [{action: jump}]}",
     "step 1 action"),  # numbered from 1, as the reports number steps
    ("setup: []\ntests:\n  - name: x\n    verify_page_loads: {url: 'http://127.0.0.1:9/'}",
     "unknown key(s) setup"),
    ("before_each: [{action: jump}]\ntests:\n  - name: x\n    verify_page_loads: {url: 'http://127.0.0.1:9/'}",
     "before_each: step 1 action"),
    ("keep_state: maybe\ntests:\n  - name: x\n    verify_page_loads: {url: 'http://127.0.0.1:9/'}",
     "keep_state: true or false"),
    ("test:\n  - name: x\ntests:\n  - name: y\n    verify_page_loads: {url: 'http://127.0.0.1:9/'}",
     "a suite takes name, session, test_id_attribute, tests, keep_state, before_each, after_each"),
    ("tests:\n  - name: x\n    compare_visual_regression: {baseline_id: home, threshold: -1}", "threshold"),
])
def test_usage_errors_exit_2_before_anything_runs(vision_api, tmp_path, capsys, text, says, services):
    before = set(services.qa.runs.list_ids())
    path = tmp_path / "suite.yaml"
    if text is not None:
        path.write_text(text)
    assert main(["qa", str(path), "--url", str(vision_api.base_url)]) == 2
    assert says in capsys.readouterr().err
    assert set(services.qa.runs.list_ids()) == before


def test_every_problem_of_a_suite_is_listed_at_once(tmp_path):
    from vision.cli.qa import UsageError, load_suite

    path = tmp_path / "suite.yaml"
    path.write_text("setup: []\ntests:\n"
                    "  - name: a\n    verify_page_loads: {}\n"
                    "  - name: b\n    verify_page_loads: {url: 'http://127.0.0.1:9/'}\n"
                    "  - name: c\n    verify_everything: {}\n")
    with pytest.raises(UsageError) as raised:
        load_suite(path)
    lines = str(raised.value).splitlines()
    assert len(lines) == 3, lines  # the unknown key, test 1's missing url, test 3's unknown verb; test 2 is fine
    assert "unknown key(s) setup" in lines[0] and "test 1 (a)" in lines[1] and "url" in lines[1]
    assert "test 3" in lines[2]


def test_no_server_at_the_url_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "suite.yaml"
    path.write_text("tests:\n  - name: x\n    verify_page_loads: {url: 'http://127.0.0.1:9/'}\n")
    assert main(["qa", str(path), "--url", "http://127.0.0.1:9"]) == 2
    assert "no glassdesk server answers" in capsys.readouterr().err


def test_without_url_an_embedded_server_runs_the_suite(pages, tmp_path):
    text = f"""name: embedded
tests:
  - name: home loads
    verify_page_loads: {{url: "{EXAMPLE_ORIGIN}/index.html", expected_title: "Example shop"}}
"""
    junit = tmp_path / "junit.xml"
    env = without_owner({**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    done = subprocess.run([sys.executable, "-m", "vision.cli", "qa", str(suite_file(tmp_path, pages, text)),
                           "--junit", str(junit), "--data-dir", str(tmp_path / "data")],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = ET.fromstring(junit.read_text()).find("testsuite").find("testcase").find("system-out").text
    shot = Path(out.splitlines()[1].removeprefix("screenshot: "))
    assert shot.is_file() and shot.is_relative_to(tmp_path / "data")  # the evidence stays on this disk
