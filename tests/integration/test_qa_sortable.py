"""A real drag-and-drop library's own published tests, ported to `glassdesk qa` (issue 39):
SortableJS's TestCafe suite (tests/assets/sortablejs/Sortable.test.js) as tests/qa/sortable.yaml, run
on the pinned npm package under the repository's own test pages (tests/fakes/todomvc.py's
sortable_root). The port names every upstream test (or says why one is not ported); it passes on
the real library; and the drops it makes at an edge are what decides: each group test that moves
an item fails when it drops at the target's centre instead of its top edge.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.fakes.todomvc import SORTABLE, SORTABLE_PAGES, TodoMvcServer, require, sortable_root

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "tests" / "qa" / "sortable.yaml"
ORIGIN = "http://127.0.0.1:8000"  # the suite's, replaced by the local server's
NOT_PORTED = ("Empty Insert › Insert into empty list if within emptyInsertThreshold",
              "Empty Insert › Do not insert into empty list if outside emptyInsertThreshold")
# The group tests whose item moves: dropped at the target's centre, it lands after the target.
MOVES_ON_TOP = ("Grouping › Move to list of the same group", "Grouping › Move to list with put:true",
                'Grouping › Clone element if pull:"clone"')


def upstream_test_names() -> list[str]:
    """Sortable.test.js's tests as ``fixture › test`` (pure reading of its text)."""
    names, fixture = [], None
    for line in (SORTABLE_PAGES / "Sortable.test.js").read_text().splitlines():
        if found := re.match(r"fixture `([^`]*)`", line):
            fixture = found.group(1)
        elif found := re.match(r"test\('([^']*)'", line):
            names.append(f"{fixture} › {found.group(1)}")
    return names


def suite() -> dict:
    return yaml.safe_load(SUITE.read_text())


def test_the_port_names_every_upstream_test_or_says_why_not():
    upstream = upstream_test_names()
    assert len(upstream) == 18 and len(set(upstream)) == 18
    ported = [test["name"] for test in suite()["tests"]]
    assert ported == [name for name in upstream if name not in NOT_PORTED]
    header = SUITE.read_text().split("\nname:")[0] + "\n"
    assert all(f"#     {name}\n" in header for name in NOT_PORTED)


@pytest.fixture(scope="module")
def qa_url(manager, tmp_path_factory):
    """A glassdesk server of this module's own, with evaluate allowed (the suite's browser.eval)."""
    from desktop.session.stack import free_port
    from tests.conftest import LiveServer
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    glassdesk = Glassdesk.build(manager, data_dir=tmp_path_factory.mktemp("sortable-data"), config=VisionConfig(),
                                allow_evaluate=True)
    port = free_port()
    with LiveServer(create_app(manager, Settings(token=None, port=port, allow_evaluate=True), glassdesk),
                    port=port) as server:
        yield server.url


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    require(SORTABLE)
    with TodoMvcServer(root=sortable_root(tmp_path_factory.mktemp("sortable"))) as served:
        yield served


def run_qa(qa_url: str, tmp_path: Path, capsys, tests: list[dict]) -> tuple[int, dict]:
    """`glassdesk qa` on these tests: its exit code and each test's failure message (None: passed)."""
    from vision.cli import main

    path, junit = tmp_path / "suite.yaml", tmp_path / "junit.xml"
    path.write_text(yaml.safe_dump({"name": "sortable", "tests": tests}, allow_unicode=True, sort_keys=False))
    started = time.monotonic()
    code = main(["qa", str(path), "--url", qa_url, "--junit", str(junit)])
    seconds = time.monotonic() - started
    assert code in (0, 1), f"glassdesk qa refused the suite (exit {code}):\n{capsys.readouterr().err[-5000:]}"
    outcome = {}
    for case in ET.fromstring(junit.read_text()).find("testsuite").findall("testcase"):
        failure = case.find("failure") if case.find("failure") is not None else case.find("error")
        outcome[case.get("name")] = None if failure is None else failure.get("message")
    print(f"glassdesk qa: {len(outcome)} tests in {seconds:.1f} s")
    return code, outcome


def served(app, tests: list[dict]) -> list[dict]:
    return yaml.safe_load(yaml.safe_dump(tests).replace(ORIGIN, app.origin))


@pytest.mark.x11
@pytest.mark.timeout(900)
def test_the_ported_suite_passes_on_the_real_library(qa_url, app, tmp_path, capsys):
    loaded_before = app.hits.count("/Sortable.js")  # the module's other test may have run first
    code, outcome = run_qa(qa_url, tmp_path, capsys, served(app, suite()["tests"]))
    failed = {name: why for name, why in outcome.items() if why is not None}
    assert not failed and code == 0, failed
    assert list(outcome) == [test["name"] for test in suite()["tests"]]
    assert app.hits.count("/Sortable.js") - loaded_before == len(outcome)  # the real library, loaded by every test


@pytest.mark.x11
def test_the_group_tests_that_move_an_item_fail_when_it_is_dropped_at_the_centre(qa_url, app, tmp_path, capsys):
    centred = []
    for test in suite()["tests"]:
        if test["name"] in MOVES_ON_TOP:
            for step in test["verify_user_flow"]["steps"]:
                if step["action"] == "drag":
                    step.pop("position")
                    step["to"].pop("position")
                elif step["action"] == "assert":
                    step["timeout_ms"] = 2000  # the list has settled by then: a failure need not wait 10 s
            centred.append(test)
    assert len(centred) == len(MOVES_ON_TOP)
    code, outcome = run_qa(qa_url, tmp_path, capsys, served(app, centred))
    assert code == 1 and all(why is not None for why in outcome.values()), outcome
    # Each failed where the item landed: second in the other list, not first.
    assert all("#list2 > :nth-child(1)" in why and "Item 2.1" in why for why in outcome.values()), outcome
