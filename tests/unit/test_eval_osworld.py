"""OSWorld's tasks read as glassdesk tasks where they map, and refused with one line per part
where they do not (vision.eval.osworld); the shapes are those of OSWorld's own Chrome tasks."""

from __future__ import annotations

import json
import re

import pytest

from vision.eval.osworld import Unmapped, from_osworld, load
from vision.eval.tasks import TaskError

TOPIC = "https://discussions.example.org/t/the-banter-thread/4412"


def chrome_task(**evaluator) -> dict:
    """The way OSWorld's Chrome tasks start: Chrome with its DevTools port, socat forwarding it, the
    page in a tab, the window activated."""
    return {
        "id": "a96b564e-dbe9-42c3-9ccf-b4498073438a", "snapshot": "chrome",
        "instruction": "Open the topic with the most replies.",
        "config": [
            {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
            {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://discussions.example.org/"]}},
            {"type": "activate_window", "parameters": {"window_name": "Google Chrome"}},
            {"type": "sleep", "parameters": {"seconds": 1.5}},
        ],
        "evaluator": evaluator or {"func": "is_expected_active_tab", "result": {"type": "active_tab_info"},
                                   "expected": {"type": "rule", "rules": {"type": "url", "url": TOPIC}}},
    }


def test_a_chrome_task_checked_by_its_active_tab_is_a_task_that_starts_on_its_page():
    task = from_osworld(chrome_task())
    assert task.id == "a96b564e-dbe9-42c3-9ccf-b4498073438a" and task.instruction.startswith("Open the topic")
    assert task.start.url == "https://discussions.example.org/"
    assert [(s.action, s.timeout_ms) for s in task.setup] == [("wait", 1500)]
    (check,) = task.expect
    assert check.assertion.type == "url_matches"
    pattern = re.compile(check.assertion.expected)
    assert pattern.search(TOPIC) and pattern.search(TOPIC + "/")  # as OSWorld's compare_urls
    assert not pattern.search(TOPIC + "5") and not pattern.search("https://evil.test/?" + TOPIC)


def test_the_approximate_and_pattern_metrics_are_url_checks_too():
    approximate = from_osworld(chrome_task(func="is_expected_active_tab_approximate",
                                           result={"type": "active_url_from_accessTree"},
                                           expected={"type": "rule", "rules": {"type": "url", "url": TOPIC + "?u=1"}}))
    pattern = re.compile(approximate.expect[0].assertion.expected)
    assert pattern.search(TOPIC + "?u=2") and pattern.search(TOPIC) and not pattern.search(TOPIC + "x")
    patterns = from_osworld(chrome_task(func=["is_expected_url_pattern_match", "is_expected_active_tab"],
                                        result=[{"type": "active_tab_info"}, {"type": "active_tab_info"}],
                                        expected=[{"type": "rule", "rules": {"expected": ["/t/", "banter"]}},
                                                  {"type": "rule", "rules": {"type": "url", "url": TOPIC}}]))
    assert [c.assertion.expected for c in patterns.expect][:2] == ["/t/", "banter"] and len(patterns.expect) == 3


def test_what_has_no_counterpart_is_refused_one_line_per_part():
    task = chrome_task(func="check_accessibility_tree", result={"type": "accessibility_tree"}, expected={})
    task["config"] += [{"type": "execute", "parameters": {"command": ["pkill", "chrome"]}},
                       {"type": "launch", "parameters": {"command": ["gimp"]}},
                       {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://b.example.org/"]}}]
    with pytest.raises(Unmapped) as refused:
        from_osworld(task)
    assert refused.value.problems == [
        "config step 6: execute: glassdesk's task setup has no such step",
        "config step 7: launch of gimp: a task starts on a page of the session's browser, not with a program",
        "config: opens 2 pages: a glassdesk task starts on one",
        "evaluator: check_accessibility_tree on accessibility_tree: no counterpart among glassdesk's checks (the "
        "page's URL, title, elements, text; the screen)",
    ]
    with pytest.raises(Unmapped, match="joined by \"or\""):
        from_osworld(chrome_task(func=["is_expected_active_tab"], conj="or", result=[], expected=[]))


def test_a_directory_loads_what_maps_and_says_what_it_did_not_and_none_mapping_is_an_error(tmp_path):
    (tmp_path / "chrome").mkdir()
    (tmp_path / "chrome" / "good.json").write_text(json.dumps(chrome_task()))
    unmapped = chrome_task(func="check_json", result={"type": "vm_file"})
    (tmp_path / "chrome" / "tree.json").write_text(json.dumps(unmapped))
    (tmp_path / "broken.json").write_text("{")
    tasks, refused = load(f"osworld:{tmp_path}")
    assert [t.id for t in tasks.tasks] == ["a96b564e-dbe9-42c3-9ccf-b4498073438a"]
    assert len(refused) == 2 and refused[0].startswith(f"{tmp_path / 'broken.json'}: cannot be read as JSON")
    assert refused[1].startswith("tree.json: evaluator: check_json on vm_file")
    (tmp_path / "chrome" / "good.json").unlink()
    with pytest.raises(TaskError) as none:
        load(f"osworld:{tmp_path}")
    assert "no OSWorld task here maps" in str(none.value) and "tree.json: evaluator" in str(none.value)
    with pytest.raises(TaskError, match="no such file"):
        load(f"osworld:{tmp_path / 'absent'}")
