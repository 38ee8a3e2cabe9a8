"""tests/durations.py, the report of where make test's time went, read off JUnit files written here."""

from __future__ import annotations

from tests.durations import main, node_id, read, summary

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.unit.test_keys" name="test_a" time="0.5"/>
<testcase classname="tests.integration.test_settle" name="test_b[x]" time="12.25"><failure message="m"/></testcase>
<testcase classname="tests.e2e.test_mcp.TestTools" name="test_c" time="3.0"><skipped/></testcase>
<testcase classname="tests.integration.test_settle" name="test_d" time="1.0"/>
</testsuite></testsuites>"""


def test_a_junit_classname_becomes_the_tests_node_id():
    assert node_id("tests.unit.test_keys", "test_a") == "tests/unit/test_keys.py::test_a"
    assert node_id("tests.e2e.test_mcp.TestTools", "test_c") == "tests/e2e/test_mcp.py::TestTools::test_c"


def test_the_summary_sums_each_tier_and_lists_the_slowest_first_with_their_outcome(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(JUNIT)
    cases = read(report)
    assert [(c.tier, c.outcome) for c in cases] == [("unit", "passed"), ("integration", "failure"),
                                                    ("e2e", "skipped"), ("integration", "passed")]
    text = summary(cases, slowest=2)
    assert "integration       2      13.2  tests/integration/test_settle.py (13.2 s)" in text
    assert text.splitlines()[-2:] == ["    12.2 s  tests/integration/test_settle.py::test_b[x]  [failure]",
                                      "     3.0 s  tests/e2e/test_mcp.py::TestTools::test_c  [skipped]"]


def test_no_report_is_said_and_is_no_failure(tmp_path, capsys):
    assert main([str(tmp_path / "missing.xml")]) == 0
    assert "no JUnit report" in capsys.readouterr().err
