"""Each test starts clean, without X: the origins the browser's state is cleared for (pure), a
suite's fresh start, keep_state, before_each and after_each as the requests `glassdesk qa` sends
(in order, against a scripted server), and the suite file's new keys refused with every problem
listed at once."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import httpx2
import pytest

from desktop.browser.record import PageRecord, origin_of
from desktop.browser.state import cookie_origins
from tests.fakes.qa_api import QaApi
from vision.cli.qa import UsageError, load_suite, run_suite

# ------------------------------------------------------------------------------------ origins


@pytest.mark.parametrize("url, origin", [
    ("http://127.0.0.1:8000/a/b?c#d", "http://127.0.0.1:8000"),
    ("https://Example.COM/", "https://example.com"),
    ("https://example.com:443/x", "https://example.com"),
    ("http://example.com:80", "http://example.com"),
    ("http://example.com:8080?q", "http://example.com:8080"),
    ("https://user:pw@example.com/x", "https://example.com"),
    ("http://[::1]:8000/", "http://[::1]:8000"),
    ("http://[::1]/", "http://[::1]"),
    ("about:blank", None), ("data:text/html,hi", None), ("blob:http://a/1", None), ("chrome://newtab", None),
    ("http:///nohost", None),
])
def test_the_origin_of_a_url_is_the_one_the_browser_keeps_storage_under(url, origin):
    assert origin_of(url) == origin


def test_a_cookies_domain_gives_both_schemes():
    assert cookie_origins([{"domain": ".Example.com"}, {"domain": "127.0.0.1"}, {"domain": ""}]) == {
        "http://example.com", "https://example.com", "http://127.0.0.1", "https://127.0.0.1"}


def test_the_record_keeps_origins_in_order_and_forgets_the_oldest_past_its_bound(monkeypatch):
    import desktop.browser.record as record_module

    monkeypatch.setattr(record_module, "ORIGINS", 3)
    record = PageRecord()
    for origin in ("http://a", "http://b", "http://a", "http://c", "http://d"):
        record.saw(origin)
    assert list(record.origins) == ["http://b", "http://c", "http://d"]


# ------------------------------------------------------------------------------------ the suite file


def suite(tmp_path, text: str):
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return load_suite(path)


PAGE = "verify_page_loads: {url: 'http://127.0.0.1:9/'}"
SIGN_IN = "[{action: navigate, url: 'http://127.0.0.1:9/signin'}, {action: click, selector: '#go'}]"


def test_tests_start_fresh_unless_the_suite_or_the_test_keeps_state(tmp_path):
    fresh = suite(tmp_path, f"tests:\n  - name: a\n    {PAGE}\n  - name: b\n    keep_state: true\n    {PAGE}\n")
    assert [(t.name, t.fresh) for t in fresh.tests] == [("a", True), ("b", False)]
    assert [fresh.requests(t)[1]["fresh"] for t in fresh.tests] == [True, False]
    kept = suite(tmp_path, f"keep_state: true\ntests:\n  - name: a\n    {PAGE}\n"
                           f"  - name: b\n    keep_state: false\n    {PAGE}\n")
    assert [t.fresh for t in kept.tests] == [False, True]
    # A verb's own fresh: false says the same as keep_state.
    own = suite(tmp_path, "tests:\n  - name: a\n    verify_page_loads: {url: 'http://127.0.0.1:9/', fresh: false}\n")
    assert own.tests[0].fresh is False and own.requests(own.tests[0])[1]["fresh"] is False


def test_with_before_each_the_fresh_start_comes_before_it_not_between_it_and_the_test(tmp_path):
    loaded = suite(tmp_path, f"before_each: {SIGN_IN}\nafter_each: [{{action: screenshot}}]\n"
                             f"tests:\n  - name: a\n    {PAGE}\n  - name: b\n    keep_state: true\n    {PAGE}\n")
    before, body, after = loaded.requests(loaded.tests[0])
    assert before["fresh"] is True and body["fresh"] is False and after["fresh"] is False
    assert before["name"] == "a · before_each" and after["name"] == "a · after_each"
    assert before["steps"][0]["url"] == "http://127.0.0.1:9/signin" and "start_url" not in before
    before, body, _ = loaded.requests(loaded.tests[1])
    assert before["fresh"] is False and body["fresh"] is False


def test_without_hooks_there_is_no_hook_request(tmp_path):
    loaded = suite(tmp_path, f"before_each: []\ntests:\n  - name: a\n    {PAGE}\n")
    before, _, after = loaded.requests(loaded.tests[0])
    assert before is None and after is None


def test_every_problem_with_the_new_keys_is_listed_at_once(tmp_path):
    with pytest.raises(UsageError) as raised:
        suite(tmp_path, "keep_state: sometimes\n"
                        "before_each: [{action: navigate, url: 'http://127.0.0.1:9/'}, {action: jump}]\n"
                        "after_each: {action: screenshot}\n"
                        "tests:\n"
                        f"  - name: a\n    keep_state: 1\n    {PAGE}\n"
                        "  - name: b\n    keep_state: true\n"
                        "    verify_page_loads: {url: 'http://127.0.0.1:9/', fresh: true}\n"
                        f"  - name: c\n    fresh: true\n    {PAGE}\n"
                        f"  - name: d\n    {PAGE}\n")
    lines = str(raised.value).splitlines()
    assert len(lines) == 6, lines  # test d is fine
    assert "keep_state: true or false (got 'sometimes')" in lines[0]
    assert "before_each: step 2 action" in lines[1]
    assert "after_each: a list of flow steps" in lines[2]
    assert "test 1" in lines[3] and "keep_state: true or false (got 1)" in lines[3]
    assert "test 2 (b)" in lines[4] and "contradict" in lines[4]
    assert "test 3" in lines[5] and "unknown: fresh" in lines[5]


# ------------------------------------------------------------------------------------ the order of requests


def hooked(tmp_path, keep: str = ""):
    return suite(tmp_path, f"{keep}before_each: {SIGN_IN}\nafter_each: [{{action: screenshot}}]\n"
                           f"tests:\n  - name: a\n    {PAGE}\n  - name: b\n    {PAGE}\n")


def test_before_each_the_test_and_after_each_run_in_order_for_each_test(tmp_path):
    server = QaApi()
    code = run_suite(hooked(tmp_path), "http://gd", token=None, transport=httpx2.MockTransport(server))
    assert code == 0
    assert [(verb, body["name"], body["fresh"]) for verb, body in server.posts] == [
        ("verify_user_flow", "a · before_each", True), ("verify_page_loads", "a", False),
        ("verify_user_flow", "a · after_each", False),
        ("verify_user_flow", "b · before_each", True), ("verify_page_loads", "b", False),
        ("verify_user_flow", "b · after_each", False)]


def test_after_each_runs_after_a_failed_test_and_its_own_failure_is_reported(tmp_path):
    server = QaApi(fails=lambda body, attempt: body["name"] in ("a", "b · after_each"))
    junit = tmp_path / "junit.xml"
    code = run_suite(hooked(tmp_path), "http://gd", token=None, junit=junit, transport=httpx2.MockTransport(server))
    assert code == 1
    assert [body["name"] for _, body in server.posts] == [
        "a · before_each", "a", "a · after_each", "b · before_each", "b", "b · after_each"]
    cases = {c.get("name"): c for c in ET.fromstring(junit.read_text()).find("testsuite").findall("testcase")}
    assert set(cases) == {"a", "b", "b · after_each"}  # a passing hook is not a case of its own
    assert cases["a"].find("failure") is not None and cases["b"].find("failure") is None
    assert "b · after_each went wrong" in cases["b · after_each"].find("failure").get("message")


def test_a_failed_before_each_skips_its_test_but_not_after_each(tmp_path):
    server = QaApi(fails=lambda body, attempt: body["name"] == "a · before_each")
    junit = tmp_path / "junit.xml"
    code = run_suite(hooked(tmp_path), "http://gd", token=None, junit=junit, transport=httpx2.MockTransport(server))
    assert code == 1
    assert [body["name"] for _, body in server.posts] == [
        "a · before_each", "a · after_each", "b · before_each", "b", "b · after_each"]
    cases = {c.get("name"): c for c in ET.fromstring(junit.read_text()).find("testsuite").findall("testcase")}
    assert "not run: before_each did not pass (a · before_each went wrong)" in cases["a"].find("error").get("message")


def test_keep_state_sends_no_fresh_start_at_all(tmp_path):
    server = QaApi()
    run_suite(hooked(tmp_path, keep="keep_state: true\n"), "http://gd", token=None,
              transport=httpx2.MockTransport(server))
    assert [body["fresh"] for _, body in server.posts] == [False] * 6
