"""A real app's own published end-to-end tests, ported to `glassdesk qa` (issue 21): Playwright's
demo-todo-app.spec.ts as tests/qa/todomvc.yaml, run on TodoMVC's React example (tests/fakes/todomvc.py,
fetched by `make todomvc`). The port names every test of the spec; the suite passes on the app; and
each bug injected into the app is caught.

A bug is run against only the tests that name it (BUGS[...].caught_by): the whole suite once per bug
would cost the clean run's time six times over. Each of those tests passes in the clean run, so a
failure on the bugged app is the bug's doing.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
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


# ------------------------------------------------------------------------------ glassdesk qa

@pytest.fixture(scope="module")
def qa_url(manager, tmp_path_factory):
    """A glassdesk server of this module's own, with evaluate allowed: the spec's localStorage
    checks are `evaluate` assertions (waitForFunction in the spec)."""
    from desktop.session.stack import free_port
    from tests.conftest import LiveServer
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    glassdesk = Glassdesk.build(manager, data_dir=tmp_path_factory.mktemp("todomvc-data"), config=VisionConfig(),
                                allow_evaluate=True)
    port = free_port()
    with LiveServer(create_app(manager, Settings(token=None, port=port, allow_evaluate=True), glassdesk),
                    port=port) as server:
        yield server.url


def run_qa(qa_url: str, tmp_path: Path, capsys, origin: str, names: tuple[str, ...] | None = None) -> tuple[int, dict]:
    """`glassdesk qa` on the suite (only the tests ``names``, when given) with the app at ``origin``:
    its exit code and, from its JUnit, each test's failure message (None when it passed)."""
    from vision.cli import main

    suite = yaml.safe_load(SUITE.read_text().replace(ORIGIN, origin))
    if names is not None:
        suite["tests"] = [test for test in suite["tests"] if test["name"] in names]
        assert [t["name"] for t in suite["tests"]] == [n for n in suite_names() if n in names]
    path, junit = tmp_path / "suite.yaml", tmp_path / "junit.xml"
    path.write_text(yaml.safe_dump(suite, allow_unicode=True, sort_keys=False), encoding="utf-8")
    started = time.monotonic()
    code = main(["qa", str(path), "--url", qa_url, "--junit", str(junit)])
    seconds = time.monotonic() - started
    assert code in (0, 1), f"glassdesk qa refused the suite (exit {code}):\n{capsys.readouterr().err[-5000:]}"
    cases = ET.fromstring(junit.read_text()).find("testsuite").findall("testcase")
    outcome = {}
    for case in cases:
        failure = case.find("failure") if case.find("failure") is not None else case.find("error")
        outcome[case.get("name")] = None if failure is None else failure.get("message")
    print(f"glassdesk qa: {len(cases)} tests in {seconds:.1f} s ({seconds / max(1, len(cases)):.1f} s a test)")
    return code, outcome


# The upstream suite's 21 tests in one run: 179 s of a CI run at load, over the default hang guard
# (300 s) when the machine is busier (each test then takes 10-26 s instead of 5-8).
@pytest.mark.x11
@pytest.mark.timeout(900)
def test_the_ported_suite_passes_on_the_app(qa_url, tmp_path, capsys):
    with TodoMvcServer() as app:
        code, outcome = run_qa(qa_url, tmp_path, capsys, app.origin)
    failed = {name: why for name, why in outcome.items() if why is not None}
    assert not failed and code == 0, failed
    assert list(outcome) == spec_test_names(SPEC_FILE.read_text())


@pytest.mark.x11
@pytest.mark.parametrize("bug", list(BUGS))
def test_each_injected_bug_is_caught(qa_url, tmp_path, capsys, bug):
    with TodoMvcServer(bug) as app:
        code, outcome = run_qa(qa_url, tmp_path, capsys, app.origin, BUGS[bug].caught_by)
    assert list(outcome) and set(outcome) == set(BUGS[bug].caught_by)
    failed = [name for name, why in outcome.items() if why is not None]
    assert code == 1 and failed, f"{bug} ({BUGS[bug].what}) went unnoticed: {outcome}"
    assert set(failed) == set(BUGS[bug].caught_by), outcome


# ------------------------------------------------------------------------------ a replay that heals


@pytest.mark.x11
def test_a_run_on_the_app_replays_healed_over_renamed_ids_and_classes(qa_url, tmp_path, capsys):
    """A flow recorded on the app by its CSS (the new-todo field's id, the toggle's class) exports
    with what was recorded of each element; on the app with those renamed, the replay heals both
    steps by the other recorded locators, reports each with its images, and passes; --strict fails."""
    import httpx2

    from tests.fakes.todomvc import RENAMES
    from vision.cli import main

    flow = {"steps": [{"action": "fill", "selector": "#new-todo", "value": "buy milk"},
                      {"action": "press", "keys": ["Return"]},
                      {"action": "click", "selector": ".toggle"},
                      {"action": "assert", "selector": "li.completed", "assertion": {"type": "count", "count": 1}}],
            "fresh": True}
    with TodoMvcServer() as app, httpx2.Client(base_url=qa_url, timeout=120) as api:
        r = api.post("/api/v1/sessions/default/qa/verify_user_flow", json={"start_url": app.origin + "/", **flow})
        assert r.status_code == 200 and r.json()["success"], r.text
        text = api.get(f"/api/v1/qa/runs/{r.json()['test_run_id']}/export").text
        origin = app.origin
    steps = yaml.safe_load(text)["tests"][0]["verify_user_flow"]["steps"]
    assert steps[0]["recorded"]["role"] == "textbox" and steps[2]["recorded"]["role"] == "checkbox"
    with TodoMvcServer(patches=RENAMES) as renamed, httpx2.Client(base_url=qa_url, timeout=120) as api:
        path, junit = tmp_path / "todo.yaml", tmp_path / "junit.xml"
        path.write_text(text.replace(origin, renamed.origin))
        assert main(["qa", str(path), "--url", qa_url, "--junit", str(junit)]) == 0
        said = junit.read_text()
        assert said.count("healed step ") == 2 and said.count("heal after (recorded box orange") == 2
        assert "healed step 1: selector '#new-todo' no longer matched; healed by locator: role textbox named " \
               "'What needs to be done?' (exact)" in said
        assert "healed step 3: selector '.toggle' no longer matched; healed by locator: " in said
        assert main(["qa", str(path), "--url", qa_url, "--strict"]) == 1
        latest = api.get("/api/v1/qa/runs").json()
    assert latest  # the runs are there to read back (the reports above were made from them)
