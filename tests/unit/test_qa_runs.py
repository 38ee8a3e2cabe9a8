"""The QA run store without X: the hash chain, verify catching any edited byte, JUnit and HTML from
the record, crash recovery; and the request models refusing bad input."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET

import pytest
from pydantic import ValidationError

from desktop.x11.procs import this_process
from vision.evidence.qa_runs import BadName, QaRunNotFound, QaRunStore, build_run, render_junit
from vision.models.qa import (
    CaptureBaselineRequest,
    CompareRequest,
    FlowStep,
    VerifyElementRequest,
    VerifyUserFlowRequest,
    action_words,
)
from vision.qa.diff import Limits

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
                       "rkJggg==")


def a_run(store: QaRunStore, *, status: str = "failed", finish: bool = True):
    run = store.create("verify_user_flow", "login works", session_id="s1", request={"start_url": "http://x/"},
                       secrets=["hunter2"])
    before = run.artifact("start", PNG)
    after = run.artifact("step-001-after", PNG + b"x")
    step = {"index": 1, "name": "click text 'Go'", "action": "click", "status": status, "attempts": 1,
            "duration_ms": 12, "detail": {"point": [10, 20], "typed": "hunter2"}, "before": before.name,
            "after": after.name, "failure_reason": None if status == "passed" else "no element for text 'Go'"}
    run.record("step", **step)
    if finish:
        run.record("case", name="login works", status=status, duration_ms=40, screenshots=[after.name],
                   console_logs=[], failure_reason=step["failure_reason"], steps=[step])
        run.finish(status, result={"success": status == "passed"})
    return run


def test_a_run_verifies_and_reads_back_as_its_record(tmp_path):
    store = QaRunStore(tmp_path)
    run = a_run(store)
    check = store.verify(run.run_id)
    assert check.ok, check.problems
    assert check.records_checked == 6 and check.files_checked == 2
    record = store.load(run.run_id)
    assert record.status == "failed" and record.summary.total == 1 and record.summary.failed == 1
    assert [a.name for a in record.artifacts.screenshots] == ["start.png", "step-001-after.png"]
    assert record.timestamp.endswith("Z") and record.duration_ms is not None
    assert record.test_cases[0].steps[0].failure_reason == "no element for text 'Go'"
    # The secret never reaches the disk.
    for file in store.run_dir(run.run_id).iterdir():
        assert b"hunter2" not in file.read_bytes(), file.name


@pytest.mark.parametrize("target", ["manifest.jsonl", "start.png", "step-001-after.png", "meta.json"])
def test_verify_catches_one_flipped_byte_in_any_file(tmp_path, target):
    store = QaRunStore(tmp_path)
    run = a_run(store)
    path = store.run_dir(run.run_id) / target
    data = bytearray(path.read_bytes())
    where = len(data) // 2
    data[where] ^= 0x01
    path.write_bytes(bytes(data))
    check = store.verify(run.run_id)
    assert not check.ok and check.problems, target


def test_verify_catches_removed_extra_and_truncated(tmp_path):
    store = QaRunStore(tmp_path)
    run = a_run(store)
    directory = store.run_dir(run.run_id)
    (directory / "start.png").unlink()
    (directory / "planted.png").write_bytes(PNG)
    lines = (directory / "manifest.jsonl").read_bytes().splitlines(keepends=True)
    (directory / "manifest.jsonl").write_bytes(b"".join(lines[:-1]))
    problems = store.verify(run.run_id).problems
    assert any("start.png: missing" in p for p in problems), problems
    assert any("planted.png: not in the manifest" in p for p in problems), problems
    assert any("meta.json" in p for p in problems), problems


def test_a_run_left_running_by_a_dead_server_is_closed_as_interrupted(tmp_path, monkeypatch):
    store = QaRunStore(tmp_path)
    run = a_run(store, finish=False)
    # a film adopted into the chain stays; the pieces of one cut short with the run go
    (run.dir / "chapters.vtt").write_text("WEBVTT\n")
    run.adopt("chapters.vtt", kind="chapters")
    (run.dir / ".raw-video.mp4").write_bytes(b"\0" * 64)
    (run.dir / "ring.png").write_bytes(PNG)
    assert store.close_interrupted() == []  # this process still writes it
    from vision.evidence import qa_runs as runs_module
    from vision.trace.files import OpenEvidence

    monkeypatch.setattr(runs_module, "OPEN", OpenEvidence())  # as a new server process sees it
    assert store.close_interrupted(alive=lambda owner: owner == this_process()) == []  # the owner still runs
    assert store.close_interrupted(alive=lambda owner: False) == [run.run_id]
    record = store.load(run.run_id)
    assert record.status == "error" and record.test_cases[0].status == "error"
    assert "server stopped" in record.test_cases[0].failure_reason
    assert store.verify(run.run_id).ok
    assert not (store.run_dir(run.run_id) / "owner.json").exists()
    assert (run.dir / "chapters.vtt").is_file()
    assert not (run.dir / ".raw-video.mp4").exists() and not (run.dir / "ring.png").exists()


def test_junit_has_one_case_per_run_and_the_failures_with_reasons_and_screenshots(tmp_path):
    store = QaRunStore(tmp_path)
    failed, passed = a_run(store), a_run(store, status="passed")
    xml = render_junit([store.load(failed.run_id), store.load(passed.run_id)])
    root = ET.fromstring(xml)
    suite = root.find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1" and suite.get("errors") == "0"
    cases = suite.findall("testcase")
    failure = cases[0].find("failure")
    assert failure is not None and "no element for text 'Go'" in failure.get("message")
    assert cases[1].find("failure") is None
    out = cases[0].find("system-out").text
    assert f"/api/v1/qa/runs/{failed.run_id}/artifacts/step-001-after.png" in out


def test_artifacts_are_served_by_listed_name_only(tmp_path):
    store = QaRunStore(tmp_path)
    run = a_run(store)
    assert store.file(run.run_id, "start.png").read_bytes() == PNG
    for bad in ("../meta.json", "..", ".hidden", "a/b.png", "manifest.jsonl"):
        with pytest.raises((BadName, QaRunNotFound)):
            store.file(run.run_id, bad)
    with pytest.raises(BadName):
        store.run_dir("../../etc")
    with pytest.raises(QaRunNotFound):
        store.load("20990101T000000000000Z-00000000")


def test_build_run_of_a_running_run_has_no_case_yet(tmp_path):
    store = QaRunStore(tmp_path)
    run = a_run(store, finish=False)
    record = build_run(store.records(run.run_id))
    assert record.status == "running" and record.test_cases == []


# ------------------------------------------------------------------------------- request models


@pytest.mark.parametrize("body, says", [
    ({"action": "jump"}, "action"),
    ({"action": "click"}, "name the target"),
    ({"action": "click", "selector": "#a", "text": "A"}, "one way"),
    ({"action": "fill", "selector": "#a"}, "fill needs `value`"),
    ({"action": "press", "keys": ["nokey"]}, "unknown key"),
    ({"action": "navigate"}, "navigate needs `url`"),
    ({"action": "assert", "assertion": {"type": "text_contains", "selector": "#a"}}, "extra"),
    ({"action": "assert", "selector": "#a", "assertion": {"type": "text_contains"}}, "needs one of `expected`"),
    ({"action": "assert", "assertion": {"type": "url_matches", "expected": "("}}, "not a regular expression"),
    ({"action": "assert", "assertion": {"type": "visual_matches", "baseline_id": "../x"}}, "no '..'"),
    ({"action": "click", "image": "bm90IGEgcG5n"}, "not a PNG"),
    ({"action": "click", "x": 10}, "both x and y"),
    ({"action": "select", "x": 1, "y": 2, "option": "a"}, "takes a target by"),
    ({"action": "act"}, "act needs `instruction`"),
])
def test_a_bad_step_is_refused_with_what_is_wrong(body, says):
    with pytest.raises(ValidationError) as caught:
        FlowStep.model_validate(body)
    assert says in str(caught.value), str(caught.value)


def test_requests_refuse_bad_names_thresholds_and_targets():
    with pytest.raises(ValidationError, match="no '..'"):
        CaptureBaselineRequest(name="../escape")
    with pytest.raises(ValidationError, match="no '..'"):
        CaptureBaselineRequest(name="a..b")
    with pytest.raises(ValidationError):
        CompareRequest(baseline_id="home", threshold=-0.1)
    with pytest.raises(ValidationError):
        CompareRequest(baseline_id="home", pixel_threshold=1.5)
    with pytest.raises(ValidationError, match="exactly one"):
        VerifyElementRequest(selector="#a", text="b")
    for text in ("", "x" * 501):  # refused here, not by the Target it becomes (that was a 500)
        with pytest.raises(ValidationError, match="text"):
            VerifyElementRequest(text=text)
    with pytest.raises(ValidationError, match="neither a CSS selector nor a box"):
        CaptureBaselineRequest(name="home", mask=[[10, 10, 5, 20]])
    with pytest.raises(ValidationError):
        VerifyUserFlowRequest(start_url="http://x/", steps=[])
    flow = VerifyUserFlowRequest(start_url="http://x/", steps=[{"action": "navigate", "value": "http://y/"},
                                                               {"action": "press", "keys": "ctrl+a Delete"}],
                                 success_condition={"text": "Welcome"})
    assert flow.steps[0].url == "http://y/" and flow.steps[1].key_list == ["ctrl+a", "Delete"]
    assert [action_words(s) for s in flow.steps] == ["navigate http://y/", "press ctrl+a Delete"]


def test_visual_limits_default_alias_and_refusals():
    from vision.models.qa import Assertion

    # By default: a region limit, and the ratio 0.01 on the total.
    assert CompareRequest(baseline_id="home").limits() == Limits(None, 0.01, 16)
    # `threshold` is max_diff_pixel_ratio's former name: either one, or both when they agree.
    assert CompareRequest(baseline_id="home", threshold=0.02).limits().max_diff_pixel_ratio == 0.02
    assert CompareRequest(baseline_id="home", max_diff_pixel_ratio=0.02, threshold=0.02).limits().max_diff_pixel_ratio \
        == 0.02
    with pytest.raises(ValidationError, match="former name of max_diff_pixel_ratio"):
        CompareRequest(baseline_id="home", max_diff_pixel_ratio=0.02, threshold=0.05)
    # A count given alone is the only limit on the total (as in Playwright); both: each applies.
    assert CompareRequest(baseline_id="home", max_diff_pixels=100).limits() == Limits(100, None, 16)
    assert CompareRequest(baseline_id="home", max_diff_pixels=100, max_diff_pixel_ratio=0.5,
                          max_region_pixels=None).limits() == Limits(100, 0.5, None)
    for bad in ({"max_diff_pixels": -1}, {"max_diff_pixel_ratio": 1.5}, {"max_region_pixels": -3}, {"threshold": 2}):
        with pytest.raises(ValidationError):
            CompareRequest(baseline_id="home", **bad)
    strictest = CompareRequest(baseline_id="home", max_region_pixels=0, max_diff_pixel_ratio=1)
    assert strictest.limits() == Limits(None, 1, 0)
    # The same options on a flow's visual_matches, and only there.
    a = Assertion(type="visual_matches", baseline_id="home", threshold=0.03, max_region_pixels=40)
    assert a.limits() == Limits(None, 0.03, 40)
    with pytest.raises(ValidationError, match="former name"):
        Assertion(type="visual_matches", baseline_id="home", threshold=0.03, max_diff_pixel_ratio=0.01)
    with pytest.raises(ValidationError, match="max_region_pixels: only for a visual_matches assertion"):
        Assertion(type="url_matches", expected="x", max_region_pixels=40)


def test_a_suite_file_takes_the_visual_options_and_refuses_their_conflicts(tmp_path):
    from vision.cli.qa import UsageError, load_suite

    path = tmp_path / "suite.yaml"
    path.write_text("tests:\n"
                    "  - name: strict\n"
                    "    compare_visual_regression: {baseline_id: home, max_diff_pixels: 0, max_region_pixels: 4,\n"
                    "                                max_diff_pixel_ratio: 0.001, pixel_threshold: 0.2}\n"
                    "  - name: old name\n"
                    "    compare_visual_regression: {baseline_id: home, threshold: 0.02}\n"
                    "  - name: flow\n"
                    "    verify_user_flow:\n"
                    "      start_url: http://127.0.0.1:9/\n"
                    "      steps: [{action: assert, assertion: {type: visual_matches, baseline_id: home,\n"
                    "                                           max_region_pixels: 40}}]\n")
    suite = load_suite(path)
    assert [CompareRequest.model_validate(t.body).limits() for t in suite.tests[:2]] == [
        Limits(0, 0.001, 4), Limits(None, 0.02, 16)]
    path.write_text("tests:\n"
                    "  - name: both\n"
                    "    compare_visual_regression: {baseline_id: home, threshold: 0.02, max_diff_pixel_ratio: 0.01}\n"
                    "  - name: misplaced\n"
                    "    verify_user_flow:\n"
                    "      start_url: http://127.0.0.1:9/\n"
                    "      steps: [{action: assert,\n"
                    "               assertion: {type: url_matches, expected: x, max_diff_pixels: 3}}]\n")
    with pytest.raises(UsageError) as caught:
        load_suite(path)
    said = str(caught.value)
    assert "test 1 (both)" in said and "former name of max_diff_pixel_ratio" in said
    assert "test 2 (misplaced)" in said and "max_diff_pixels: only for a visual_matches" in said


def test_request_schema_is_json_serialisable():
    json.dumps(VerifyUserFlowRequest.model_json_schema())


def _png_claiming(width: int, height: int) -> bytes:
    """A 1x1 PNG whose header claims another size (the pixel data stays 1x1)."""
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return PNG[:8] + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk)) + PNG[33:]


def test_a_template_larger_than_the_display_is_refused_from_its_header():
    from vision.models.qa import template_png

    template_png(base64.b64encode(PNG).decode())
    huge = base64.b64encode(_png_claiming(4000, 4000)).decode()
    with pytest.raises(ValueError, match="larger than the display"):  # not decoded: its data would not read
        template_png(huge)
