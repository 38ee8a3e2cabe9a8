"""QaService's own logic without X: damaged evidence answered with typed errors (never a 5xx),
secrets kept out of the answer without touching the run's structure, artifact names every check
accepts, baseline directories for the server's user only."""

from __future__ import annotations

import base64
import stat
import time
from types import SimpleNamespace

import pytest

from desktop.errors import GlassdeskError, SessionUnavailable
from desktop.models import Tab
from tests.fakes.services import FakeDesktops
from vision.errors import QaRunCorruptError
from vision.evidence.qa_runs import QaRunStore, check_artifact_name, safe_stem
from vision.models.qa import PageLoadResult, VerifyUserFlowRequest
from vision.qa.driver import _stem
from vision.qa.service import QaService
from vision.qa.verbs import browsers_own

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
                       "rkJggg==")


def no_act(session_id, request):
    raise AssertionError("no flow here runs an act step")


def a_service(tmp_path) -> QaService:
    return QaService(SimpleNamespace(pages=None), tmp_path, act=no_act)  # type: ignore[arg-type]


def report_of(qa: QaService):
    """The run's report as its REST route makes it: the run viewer's offline form."""
    from vision.evidence.runview import offline_html, qa_run_view

    return lambda run_id: offline_html(qa_run_view(qa, run_id, mode="inline"))


def a_finished_run(store: QaRunStore, secrets=()):
    run = store.create("verify_user_flow", "login", session_id="s1", request={"start_url": "http://x/"},
                       secrets=secrets)
    shot = run.artifact("start", PNG)
    step = {"index": 1, "name": "click", "action": "click", "status": "failed", "attempts": 1, "duration_ms": 3,
            "detail": {"point": [1, 2]}, "before": shot.name, "after": shot.name, "failure_reason": "nope"}
    run.record("case", name="login", status="failed", duration_ms=9, screenshots=[shot.name], console_logs=[],
               failure_reason="nope", steps=[step])
    run.finish("failed", result={"success": False, "shots": [{"name": "page", "diff_pixels": 3,
                                                               "diff_percentage": 0.5, "passed": False}]})
    return run


# ------------------------------------------------------------------------------- damaged evidence


def _edit(path, old: bytes, new: bytes, count: int = 1) -> None:
    data = path.read_bytes()
    assert old in data, (old, data[:400])
    path.write_bytes(data.replace(old, new, count))


@pytest.mark.parametrize("old, new", [
    (b'"ts":"20', b'"ts":"X0'),                       # a record's time no longer parses: ValueError
    (b'"status":"failed","steps"', b'"status":"failex","steps"'),  # a case's status: ValidationError
    (b'"name":"start.png"', b'"nbme":"start.png"'),   # an artifact record without its name: KeyError
    (b'"duration_ms":9', b'"duration_ms":"x"'),       # a wrong type
    (b'"diff_pixels":3', b'"diff_pixels":"3"'),       # the answer the report renders
])
def test_an_edited_record_verifies_as_broken_and_reads_as_a_typed_error(tmp_path, old, new):
    qa = a_service(tmp_path)
    run = a_finished_run(qa.runs)
    _edit(qa.runs.run_dir(run.run_id) / "manifest.jsonl", old, new)
    check = qa.verify(run.run_id)
    assert not check.ok and check.problems
    for read in (qa.run, qa.junit, report_of(qa)):
        try:
            read(run.run_id)
        except GlassdeskError as exc:
            assert exc.status < 500 and exc.code == "qa_run_corrupt", (read, exc.code, exc.status)
    # Its files are still served by the names its records list.
    if b"nbme" not in new:
        assert qa.artifact(run.run_id, "start.png").read_bytes() == PNG


def test_a_record_that_does_not_build_is_qa_run_corrupt(tmp_path):
    qa = a_service(tmp_path)
    run = a_finished_run(qa.runs)
    _edit(qa.runs.run_dir(run.run_id) / "manifest.jsonl", b'"ts":"20', b'"ts":"X0')
    with pytest.raises(QaRunCorruptError) as caught:
        qa.run(run.run_id)
    assert caught.value.status == 409 and "verifying the run says what is damaged" in caught.value.message
    assert any("records do not make" in p for p in qa.verify(run.run_id).problems)


def test_every_flipped_byte_of_the_manifest_is_found_and_never_a_server_error(tmp_path):
    qa = a_service(tmp_path)
    run = a_finished_run(qa.runs)
    manifest = qa.runs.run_dir(run.run_id) / "manifest.jsonl"
    original = manifest.read_bytes()
    for where in range(0, len(original) - 1, 3):  # the last byte is the final newline
        data = bytearray(original)
        data[where] ^= 0x01
        manifest.write_bytes(bytes(data))
        check = qa.verify(run.run_id)
        assert not check.ok and check.problems, where
        for read in (qa.run, qa.junit, report_of(qa)):
            try:
                read(run.run_id)
            except GlassdeskError as exc:
                assert exc.status < 500, (where, read, exc.code)
    manifest.write_bytes(original)
    assert qa.verify(run.run_id).ok


# ------------------------------------------------------------------------------- secrets


def test_a_secret_in_the_run_ids_digits_is_redacted_from_free_text_only(tmp_path):
    store = QaRunStore(tmp_path)
    secret = "20"  # every run id (and every timestamp) of this century starts with it
    run = store.create("verify_user_flow", "flow", session_id="s1", request={"value": "pin 20"}, secrets=[secret])
    assert run.run_id.startswith("20")
    shot = run.artifact("step-001-after", PNG, step=1)
    run.record("step", index=1, name="fill", action="fill", status="passed", detail={"text": "you typed 20"},
               before=shot.name, after=shot.name)
    run.finish("passed", result={"screenshots": [shot.model_dump()], "reason": "saw 20", "test_run_id": run.run_id})
    record = store.load(run.run_id)
    assert record.test_run_id == run.run_id and record.timestamp.startswith("20")
    assert record.artifacts.screenshots[0].name == shot.name == "step-001-after.png"
    assert record.artifacts.screenshots[0].sha256 == shot.sha256
    assert record.artifacts.screenshots[0].path == f"/api/v1/qa/runs/{run.run_id}/artifacts/step-001-after.png"
    assert record.result["screenshots"][0]["path"] == shot.path and record.result["reason"] == "saw [REDACTED]"
    manifest = (store.run_dir(run.run_id) / "manifest.jsonl").read_text()
    assert "pin 20" not in manifest and "you typed 20" not in manifest and "[REDACTED]2" not in manifest
    assert store.verify(run.run_id).ok


def test_the_answer_is_the_redacted_one(tmp_path):
    qa = a_service(tmp_path)
    run = qa.runs.create("verify_page_loads", "x", session_id="s1", request={}, secrets=["hunter2"])
    run.t0 = time.monotonic()
    result = PageLoadResult(test_run_id=run.run_id, success=False, title="welcome hunter2",
                            reason="title 'welcome hunter2'", console_errors=[{"text": "pw=hunter2"}])
    answer = qa._finish(run, "failed", result, {"name": "x", "failure_reason": result.reason})
    assert "hunter2" not in answer.model_dump_json()
    assert answer.title == "welcome [REDACTED]" and answer.test_run_id == run.run_id


def test_an_error_leaving_a_run_does_not_carry_the_secret(tmp_path):
    qa = a_service(tmp_path)
    request = VerifyUserFlowRequest(start_url="http://x/", steps=[{"action": "wait"}], secrets={"pw": "hunter2"})
    with pytest.raises(SessionUnavailable) as caught:
        with qa._run("verify_user_flow", None, SimpleNamespace(id="s1"), request, ("hunter2",)):
            raise SessionUnavailable("typed hunter2 into a dead desktop")
    assert "hunter2" not in caught.value.message and "hunter2" not in str(caught.value)


# ------------------------------------------------------------------------------- names and modes


@pytest.mark.parametrize("stem", ["..", "a..b", "...x...", "_x_", "-.-", "shot/../../etc", "ü" * 80,
                                  "a" * 59 + ".b", "x" * 99 + "..", "#c > .d:nth-child(2)"])
def test_every_stem_makes_a_name_the_run_can_serve(tmp_path, stem):
    for name in (f"{safe_stem(stem)}.png", f"baseline-{_stem(stem)}.png"):
        assert check_artifact_name(name) == name
    store = QaRunStore(tmp_path)
    run = store.create("capture_visual_baseline", "b", session_id=None, request={})
    artifact = run.artifact(f"baseline-{_stem(stem)}", PNG)
    assert store.file(run.run_id, artifact.name).read_bytes() == PNG


def test_verify_names_a_listed_file_serving_would_refuse(tmp_path):
    store = QaRunStore(tmp_path)
    run = store.create("verify_page_loads", "x", session_id=None, request={})
    (store.run_dir(run.run_id) / "a..b.png").write_bytes(PNG)
    run.record("artifact", name="a..b.png", sha256="0" * 64, size=1, type="screenshot")
    run.finish("passed")
    assert any("not a name" in p for p in store.verify(run.run_id).problems)


def test_baselines_are_made_with_the_service_and_their_directories_are_private(tmp_path):
    qa = a_service(tmp_path)
    assert qa.baselines is qa.baselines
    qa.baselines.create("home", {"page": PNG}, url=None, scope="page", mask=[], mask_boxes=[])
    for directory in (tmp_path / "qa", tmp_path / "qa" / "baselines", tmp_path / "qa" / "baselines" / "home",
                      tmp_path / "qa" / "baselines" / "home" / "v1"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory


# ------------------------------------------------------------------------------- verbs over fakes


def loaded(how, url, timeout_ms) -> dict:
    return {"status": 200, "url": "http://x/", "load_time_ms": 5}


def a_faked_service(tmp_path) -> tuple[QaService, FakeDesktops]:
    """A service over the fakes: a page at http://x/ titled "t" that loads at once and printed one
    error, whose screenshots (page and desktop) are the one-pixel PNG and where "#gone" matches
    nothing."""
    desktops = FakeDesktops()
    desktops.desk.display = ":99"  # what a recording of the session is told to film
    desktops.screen = PNG
    pages = desktops.pages
    pages.tabs_ = [Tab(id="t1", url="http://x/", title="t", active=True)]
    pages.console_ = [{"seq": 1, "level": "error", "text": "boom", "url": "http://x/", "line": 1}]
    pages.navigate_does = loaded
    pages.image = PNG
    pages.absent = {"#gone"}
    return QaService(desktops, tmp_path, act=no_act), desktops  # type: ignore[arg-type]


def test_a_dead_browser_and_desktop_make_verify_page_loads_a_failure_with_reasons_not_an_error(tmp_path):
    from desktop.errors import PageUnavailable
    from vision.models.qa import VerifyPageLoadsRequest

    qa, desktops = a_faked_service(tmp_path)

    def dead(how, url, timeout_ms):
        raise PageUnavailable("the browser of session s1 is restarting")

    desktops.pages.navigate_does = dead
    desktops.pages.network_fails = SessionUnavailable("session s1: chromium died")
    desktops.screenshot_fails = SessionUnavailable("session s1: Xvfb died")
    answer = qa.verify_page_loads("s1", VerifyPageLoadsRequest(url="http://x/", timeout_ms=1000))
    assert answer.success is False and answer.screenshot is None
    assert "did not load" in answer.reason and "chromium died" in answer.reason and "Xvfb died" in answer.reason
    run = qa.run(answer.test_run_id)
    assert run.status == "failed" and qa.verify(answer.test_run_id).ok


def test_timeout_ms_bounds_verify_page_loads_with_its_retries(tmp_path):
    from desktop.errors import PageTimeoutError
    from vision.models.qa import VerifyPageLoadsRequest

    qa, desktops = a_faked_service(tmp_path)

    def slow(how, url, timeout_ms):
        time.sleep(timeout_ms / 1000)  # a navigation that uses all the time it is given, then times out
        raise PageTimeoutError("navigation timed out")

    desktops.pages.navigate_does = slow
    answer = qa.verify_page_loads("s1", VerifyPageLoadsRequest(url="http://x/", timeout_ms=300))
    assert answer.success is False and "timed out" in answer.reason
    # The first attempt had the verb's whole time: no time was left for another.
    assert len(desktops.pages.navigations) == 1 and desktops.pages.navigations[0] <= 300


def test_retries_happen_at_one_level_only(tmp_path):
    from desktop.errors import PageUnavailable

    qa, desktops = a_faked_service(tmp_path)
    calls = []

    def flaky():
        calls.append(1)
        raise PageUnavailable("detached", retry_after=1)

    session = desktops.desk
    with pytest.raises(PageUnavailable):
        qa.driver.retrying(session, lambda: qa.driver.retrying(session, flaky))
    assert len(calls) == 3  # not 3 x 3
    calls.clear()
    with pytest.raises(PageUnavailable):
        qa.driver.retrying(session, flaky)
    assert len(calls) == 3  # and the level is free again afterwards


def test_a_second_qa_verb_on_a_session_waits_then_is_session_busy_and_creates_nothing(tmp_path, monkeypatch):
    import threading

    from desktop.errors import SessionBusy
    from vision.models.qa import VerifyPageLoadsRequest
    from vision.qa import service as service_module

    monkeypatch.setattr(service_module, "VERB_QUEUE_WAIT_S", 0.2)
    qa, desktops = a_faked_service(tmp_path)
    entered, release = threading.Event(), threading.Event()

    def held(how, url, timeout_ms):
        entered.set()
        release.wait(30)
        return {"status": 200, "url": "http://x/", "load_time_ms": 5}

    desktops.pages.navigate_does = held
    answers = []
    first = threading.Thread(target=lambda: answers.append(
        qa.verify_page_loads("s1", VerifyPageLoadsRequest(url="http://x/", timeout_ms=60_000))))
    first.start()
    try:
        assert entered.wait(30)
        with pytest.raises(SessionBusy) as caught:
            qa.verify_page_loads("s1", VerifyPageLoadsRequest(url="http://x/"))
        assert caught.value.retry_after and caught.value.retry_after > 1 and "QA verb" in caught.value.message
        assert len(qa.runs.list_ids()) == 1  # the refused one made no run
        with pytest.raises(SessionBusy):  # a vision run is kept out meanwhile
            qa.check_idle("s1")
        qa.check_idle("another")
    finally:
        release.set()
        first.join(30)
    assert answers and answers[0].success
    qa.check_idle("s1")
    desktops.pages.navigate_does = loaded
    assert qa.verify_page_loads("s1", VerifyPageLoadsRequest(url="http://x/")).success


# ------------------------------------------------------------------------------- video


def test_record_video_without_ffmpeg_is_refused_before_anything_is_made(tmp_path, monkeypatch):
    from desktop.errors import RecorderUnavailable
    from vision.models.qa import VerifyPageLoadsRequest

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    qa, _ = a_faked_service(tmp_path)
    with pytest.raises(RecorderUnavailable) as caught:
        qa.verify_page_loads("s1", VerifyPageLoadsRequest(url="http://x/", record_video=True))
    assert caught.value.status == 503 and "ffmpeg is not installed" in caught.value.message
    assert qa.runs.list_ids() == []


class FailingRecorder:
    """Writes part of a file, then fails where it is told to: start or stop."""

    fails_at = "start"
    filmed_s = 0.0

    def __init__(self, display, out_path, **kwargs):
        self.out_path = out_path

    def start(self):
        from desktop.errors import RecorderError

        self.out_path.write_bytes(b"\x1aE\xdf\xa3 partial webm")
        if self.fails_at == "start":
            raise RecorderError("ffmpeg exited with code 1 before recording")

    def stop(self):
        from desktop.errors import RecorderError

        raise RecorderError("ffmpeg stopped recording on its own (exit code 1)")


@pytest.mark.parametrize("fails_at", ["start", "stop"])
def test_a_recording_that_fails_leaves_a_finished_run_that_verifies(tmp_path, monkeypatch, fails_at):
    import desktop.x11.recorder
    from vision.models.qa import VerifyPageLoadsRequest

    monkeypatch.setattr(desktop.x11.recorder, "find_ffmpeg", lambda: "/usr/bin/ffmpeg")
    monkeypatch.setattr(FailingRecorder, "fails_at", fails_at)
    monkeypatch.setattr(desktop.x11.recorder, "Recorder", FailingRecorder)
    import desktop.x11.receipt

    monkeypatch.setattr(desktop.x11.receipt, "Recorder", FailingRecorder)
    qa, _ = a_faked_service(tmp_path)
    answer = qa.verify_page_loads("s1", VerifyPageLoadsRequest(url="http://x/", record_video=True))
    assert answer.success
    run = qa.run(answer.test_run_id)
    assert run.status == "passed"
    check = qa.verify(answer.test_run_id)
    assert check.ok, check.problems  # no file the manifest does not list
    records = qa.runs.records(answer.test_run_id)
    assert any(r["kind"] == "note" and "no video" in r["message"] for r in records)
    # A partial film written before a failed stop is kept, listed with its hash.
    assert [v.name for v in run.artifacts.videos] == (["video.mp4"] if fails_at == "stop" else [])


# ------------------------------------------------------------------------------- approve


def a_failed_comparison(qa: QaService, version: int) -> str:
    run = qa.runs.create("compare_visual_regression", "cmp", session_id="s1", request={})
    current = run.artifact("current-page", PNG)
    run.record("case", name="cmp", status="failed", duration_ms=1, screenshots=[current.name])
    run.finish("failed", result={"baseline_id": "home", "baseline_version": version, "passed": False,
                                 "shots": [{"name": "page", "current_image": current.model_dump()}]})
    return run.run_id


def test_approve_is_a_conflict_once_done_or_when_the_compared_version_is_not_the_latest(tmp_path):
    from vision.errors import BaselineConflict

    qa = a_service(tmp_path)
    qa.baselines.create("home", {"page": PNG}, url=None, scope="page", mask=[], mask_boxes=[])
    first, second = a_failed_comparison(qa, 1), a_failed_comparison(qa, 1)
    assert qa.approve("home", first).version == 2
    with pytest.raises(BaselineConflict, match="approved already: it is version 2") as caught:
        qa.approve("home", first)
    assert caught.value.status == 409
    with pytest.raises(BaselineConflict, match="compared version 1 .* at version 2 now"):
        qa.approve("home", second)
    assert [v.version for v in qa.baselines.versions("home")] == [1, 2]
    assert qa.approve("home", a_failed_comparison(qa, 2)).version == 3


def test_ignore_patterns_look_at_the_first_10k_characters_of_a_line_only(tmp_path):
    from vision.models.qa import AnalyzeConsoleRequest

    qa, desktops = a_faked_service(tmp_path)
    lines = [{"level": "error", "text": "noise: IGNOREME", "url": "", "line": 1},
             {"level": "error", "text": "x" * 20_000 + " IGNOREME", "url": "", "line": 2}]
    desktops.pages.console = lambda session_id, since=0, level=None: lines
    answer = qa.analyze_console_errors("s1", AnalyzeConsoleRequest(ignore_patterns=["IGNOREME"]))
    assert answer.ignored == 1 and [e.line for e in answer.errors] == [2]


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("verb, body, code", [
    ("verify_user_flow", {"start_url": "http://x/", "steps": [{"action": "fill", "selector": "#pw",
                                                               "value": "{{nope}}"}], "secrets": {"pw": "x"}},
     "invalid_request"),
    ("verify_user_flow", {"start_url": "http://x/", "steps": [{"action": "assert", "assertion": {
        "type": "visual_matches", "baseline_id": "ghost"}}]}, "baseline_not_found"),
    ("verify_user_flow", {"start_url": "http://x/", "steps": [{"action": "click", "selector": "((bad"}]},
     "invalid_selector"),
    ("verify_user_flow", {"start_url": "http://x/", "steps": [{"action": "wait"}],
                          "success_condition": {"selector": "((bad"}}, "invalid_selector"),
    ("verify_element_exists", {"selector": "((bad"}, "invalid_selector"),
    ("capture_visual_baseline", {"name": "home", "mask": ["((bad"]}, "invalid_selector"),
    ("capture_visual_baseline", {"name": "home", "selectors": ["((bad"]}, "invalid_selector"),
])
def test_bad_input_is_a_typed_4xx_and_makes_no_run(tmp_path, verb, body, code):
    from vision.cli.qa import REQUESTS

    qa, _ = a_faked_service(tmp_path)
    with pytest.raises(GlassdeskError) as caught:
        getattr(qa, verb)("s1", REQUESTS[verb].model_validate(body))
    assert caught.value.code == code and 400 <= caught.value.status < 500, caught.value
    assert qa.runs.list_ids() == [] and not (tmp_path / "qa" / "baselines" / "home").exists()


def test_a_component_gone_at_compare_time_is_a_failed_shot_with_the_reason(tmp_path):
    from vision.models.qa import CompareRequest

    qa, _ = a_faked_service(tmp_path)
    qa.baselines.create("card", {"page": PNG, "#gone": PNG}, url=None, scope="page", mask=[], mask_boxes=[])
    answer = qa.compare_visual_regression("s1", CompareRequest(baseline_id="card"))
    assert answer.passed is False
    page, gone = answer.shots
    assert page.passed and not gone.passed and "not on the page now" in gone.reason
    assert "#gone: not on the page now" in answer.reason
    assert qa.run(answer.test_run_id).status == "failed" and qa.verify(answer.test_run_id).ok


# ------------------------------------------------------------------------------- layering


def test_the_qa_package_imports_nothing_of_the_application_service():
    """QaService is given the desktop service, a data directory and ``act``: no module of
    vision/qa imports vision.app.service, not even deferred or for type checking (an import circle)."""
    import ast
    from pathlib import Path

    import vision.qa

    offenders = []
    for path in sorted(Path(vision.qa.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            if any(name == "vision.app.service" or name.startswith("vision.app.service.") for name in names):
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, offenders


# ------------------------------------------------------------------------------- a fresh start


class Clearing:
    """The page service's clear_state, recorded; failing when told to."""

    def __init__(self, store: QaRunStore, fail: GlassdeskError | None = None):
        self.store, self.fail, self.calls = store, fail, []

    def clear_state(self, session_id):
        self.calls.append((session_id, len(self.store.list_ids())))  # how many runs existed then
        if self.fail is not None:
            raise self.fail
        from desktop.models import ClearedState, Tab

        return ClearedState(origins=["http://a"], closed_tabs=2, duration_ms=7,
                            tab=Tab(id="t9", url="about:blank", title="", active=True))


@pytest.mark.parametrize("fresh", [True, False])
def test_a_fresh_verb_clears_the_browser_before_its_run_is_made_and_notes_it(tmp_path, fresh):
    from vision.models.qa import VerifyPageLoadsRequest

    qa = a_service(tmp_path)
    qa.pages = Clearing(qa.runs)
    request = VerifyPageLoadsRequest(url="http://x/", fresh=fresh)
    with qa._run("verify_page_loads", "t", SimpleNamespace(id="s1"), request) as run:
        run.finish("passed", result={})
    assert qa.pages.calls == ([("s1", 0)] if fresh else [])
    manifest = (qa.runs.run_dir(run.run_id) / "manifest.jsonl").read_text()
    assert ("fresh start: the browser's state cleared in 7 ms (1 origin(s), 2 tab(s) closed)" in manifest) is fresh


def test_a_browser_that_cannot_be_cleared_is_an_error_and_makes_no_run(tmp_path):
    from vision.models.qa import VerifyPageLoadsRequest

    qa = a_service(tmp_path)
    qa.pages = Clearing(qa.runs, fail=SessionUnavailable("the browser is restarting"))
    with pytest.raises(SessionUnavailable):
        with qa._run("verify_page_loads", "t", SimpleNamespace(id="s1"), VerifyPageLoadsRequest(url="http://x/",
                                                                                             fresh=True)):
            raise AssertionError("the verb's work does not start")
    assert qa.runs.list_ids() == []


def test_a_comparison_records_every_region_up_to_a_bound_and_counts_the_rest(tmp_path):
    import io

    from PIL import Image

    from vision.models.qa import MAX_DIFF_REGIONS, CompareRequest

    def png(spots: list[tuple[int, int, int]]) -> bytes:
        image = Image.new("RGB", (400, 100), "white")
        for x, y, size in spots:
            image.paste((0, 0, 0), (x, y, x + size, y + size))
        out = io.BytesIO()
        image.save(out, "PNG")
        return out.getvalue()

    # MAX_DIFF_REGIONS + 5 separate squares, each a size of its own (2..), 14 px apart: so many regions.
    spots = [(14 * (i % 28), 10 + 40 * (i // 28), 2 + i % 9) for i in range(MAX_DIFF_REGIONS + 5)]
    qa, desktops = a_faked_service(tmp_path)
    qa.baselines.create("dots", {"page": png([])}, url=None, scope="page", mask=[], mask_boxes=[])
    desktops.pages.screenshot = lambda session_id, **kw: png(spots)
    answer = qa.compare_visual_regression("s1", CompareRequest(baseline_id="dots"))
    page = answer.shots[0]
    assert page.regions == MAX_DIFF_REGIONS + 5 and len(page.diff_regions) == MAX_DIFF_REGIONS
    assert page.diff_regions_omitted == 5
    sizes = [r.pixels for r in page.diff_regions]
    assert sizes == sorted(sizes, reverse=True) and page.largest_region == page.diff_regions[0]
    # Each listed box is one of the squares drawn, to the pixel (ends exclusive).
    drawn = {(x, y, x + s, y + s) for x, y, s in spots}
    assert all(tuple(r.box) in drawn for r in page.diff_regions), page.diff_regions
    assert answer.diff_regions == page.diff_regions and answer.diff_regions_omitted == 5
    # The run's record keeps them: the viewer reads them back from it.
    stored = qa.run(answer.test_run_id).result["shots"][0]
    assert len(stored["diff_regions"]) == MAX_DIFF_REGIONS and stored["diff_regions_omitted"] == 5


def test_a_flow_navigation_that_times_out_says_the_steps_own_timeout_not_its_last_trys(tmp_path):
    """A timed-out navigation is tried again within the step's budget; the last try has only what is
    left of it (down to 1 ms). The failure names what the step allowed."""
    from desktop.errors import PageTimeoutError

    qa, desktops = a_faked_service(tmp_path)

    def slow(how, url, timeout_ms):
        time.sleep(min(timeout_ms, 150) / 1000)
        raise PageTimeoutError(f"http://x/slow: not load within {timeout_ms} ms")

    desktops.pages.navigate_does = slow
    answer = qa.verify_user_flow("s1", VerifyUserFlowRequest(
        steps=[{"action": "navigate", "url": "http://x/slow", "timeout_ms": 400}]))
    assert answer.success is False
    assert len(desktops.pages.navigations) > 1  # it was tried again, with less time each try
    reason = answer.failure_reason
    assert "within the step's timeout of 400 ms" in reason, reason


def test_only_the_browsers_own_favicon_request_is_told_apart():
    failed = "Failed to load resource: the server responded with a status of 404 (File not found)"
    assert browsers_own({"text": failed, "url": "http://127.0.0.1:8000/favicon.ico"})
    assert not browsers_own({"text": failed, "url": "http://127.0.0.1:8000/img/favicon.ico.png"})
    assert not browsers_own({"text": failed, "url": "http://127.0.0.1:8000/app.js"})
    assert not browsers_own({"text": "Uncaught TypeError: favicon", "url": "http://127.0.0.1:8000/favicon.ico"})


def test_a_dom_condition_is_looked_at_often_in_its_first_second_then_every_poll():
    import time

    from vision.qa.driver import FIRST_POLL_S, POLL_S, poll_pause

    assert poll_pause(time.monotonic()) == FIRST_POLL_S < POLL_S
    assert poll_pause(time.monotonic() - 2) == POLL_S
