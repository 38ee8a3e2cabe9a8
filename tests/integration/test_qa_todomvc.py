"""A real app's own published end-to-end tests, ported to `glassdesk qa` (issue 21): Playwright's
demo-todo-app.spec.ts as tests/qa/todomvc.yaml, run on TodoMVC's React example (tests/fakes/todomvc.py,
fetched by `make todomvc`). The port names every test of the spec; the suite passes on the app; and
each bug injected into the app is caught.

A bug is run against only the tests that name it (BUGS[...].caught_by): the whole suite once per bug
would cost the clean run's time six times over. Each of those tests passes in the clean run, so a
failure on the bugged app is the bug's doing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.fakes.todomvc import APP_ROOT, BUGS, SPEC, SPEC_FILE, TodoMvcServer, patched, require, spec_test_names

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "tests" / "qa" / "todomvc.yaml"
ORIGIN = "http://127.0.0.1:8000"  # the suite's, replaced by the local server's


def suite_names() -> list[str]:
    return [test["name"] for test in yaml.safe_load(SUITE.read_text())["tests"]]


def test_the_port_has_every_test_of_the_spec_one_to_one():
    require(SPEC)
    spec = spec_test_names(SPEC_FILE.read_text())
    assert len(spec) == 24 and len(set(spec)) == 24
    assert suite_names() == spec
    assert all(name in spec for bug in BUGS.values() for name in bug.caught_by)


def test_every_bug_applies_once_and_changes_what_is_served():
    import httpx2

    with TodoMvcServer() as clean:
        for name, bug in BUGS.items():
            with TodoMvcServer(name) as bugged:
                served = httpx2.get(f"{bugged.origin}/{bug.file}").text
                original = httpx2.get(f"{clean.origin}/{bug.file}").text
            assert original == (APP_ROOT / bug.file).read_text() and bug.old in original, name
            assert bug.new in served and bug.old not in served and served != original, name


def test_a_bug_whose_text_is_not_there_is_refused(tmp_path):
    (tmp_path / "js").mkdir()
    bug = BUGS["counter_off_by_one"]
    (tmp_path / bug.file).write_text("no such text here")
    with pytest.raises(ValueError, match="occurs 0 times"):
        patched(tmp_path, bug)
    (tmp_path / bug.file).write_text(bug.old * 2)
    with pytest.raises(ValueError, match="occurs 2 times"):
        patched(tmp_path, bug)


def test_the_app_runs_offline_in_chromium(browser):
    """The app itself, driven by Playwright directly: it renders, adds a todo, keeps it under the
    localStorage key the spec reads, and asks nothing of any other origin."""
    with TodoMvcServer() as app:
        context = browser.new_context()
        page = context.new_page()
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(app.origin + "/")
        page.get_by_placeholder("What needs to be done?").fill("buy some cheese")
        page.get_by_placeholder("What needs to be done?").press("Enter")
        page.locator("#todo-list li").first.wait_for()
        assert page.locator("#todo-list li").all_inner_texts() == ["buy some cheese"]
        assert page.evaluate("JSON.parse(localStorage['react-todos']).map((t) => t.title)") == ["buy some cheese"]
        context.close()
    assert requested and all(url.startswith(app.origin + "/") for url in requested), requested
