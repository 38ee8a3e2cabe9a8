"""The run viewer's document (vision.evidence.runview): pure builders over a trace or a QA run, and the offline
page that embeds it. The browser's side is tests/e2e/test_run_viewer.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

from PIL import Image

from desktop.frame import Frame
from desktop.x11.receipt import Chapter, chapters_vtt
from vision.evidence.runview import (
    Files,
    action_marks,
    offline_html,
    parse_vtt,
    qa_view,
    shown_status,
    trace_view,
    write_report,
)
from vision.models.qa import Artifact, Artifacts, QaRun, StepResult, TestCase, VerifyReport
from vision.trace.records import StepRecord, Trace, TraceMeta, VerifyResult, VideoSeal
from vision.trace.store import TraceStore

T0 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
HOSTILE = '</script><script>alert("x")</script><!-- \u2028'
LIVE = Files(lambda name: f"/files/{name}")


def step(index: int, **fields) -> StepRecord:
    start = T0 + timedelta(seconds=2 * index)
    return StepRecord(index=index, started_at=start, finished_at=start + timedelta(seconds=1), **fields)


SEAL = VideoSeal(file="video.mp4", sha256="ab", format="mp4", chapters_file="chapters.vtt", chapters_sha256="cd",
                 captions_file="captions.vtt", captions_sha256="ef", duration_s=4.0, chapters=3, clicks=2, sealed_at=T0)


CHECKED = {"verified": True, "checks": [{"check": "assert url 'http://app/home'", "passed": True,
                                        "saw": "URL 'http://app/home'", "duration_ms": 3}]}


def trace(video: VideoSeal | None = None, **meta_fields) -> Trace:
    meta = TraceMeta(**{"trace_id": "20260501T120000000000Z-abcd1234", "instruction": "sign in",
                        "model": "scripted", "started_at": T0, "finished_at": T0 + timedelta(seconds=9),
                        "status": "done", "steps": 3, "max_steps": 10, **CHECKED, **meta_fields})
    return Trace(meta=meta, video=video, steps=[
        step(1, text="Clicking Sign in.", actions=[{"action": "click", "x": 960, "y": 540, "button": "left"}],
             before_png="step-0001-before.png", after_png="step-0001-after.png"),
        step(2, text="the operator: click at 10,20", by="operator", actions=[{"action": "click", "x": 10, "y": 20}]),
        step(3, text=HOSTILE, actions=[{"action": "drag", "path": [{"x": 0, "y": 0}, {"x": 100, "y": 50}]}],
             before_png="step-0003-before.png", error={"code": "desktop_healed", "message": "the browser restarted"}),
    ])


def test_chapters_are_read_back_as_the_receipt_wrote_them() -> None:
    written = [Chapter(0.0, 1.25, "step 1: Clicking Sign in."), Chapter(1.25, 3.5, "step 2: operator click at 10,20"),
               Chapter(3.5, 62.125, "step 3: a: b")]
    cues = parse_vtt(chapters_vtt(written))
    assert cues == [{"start": 0.0, "end": 1.25, "title": "step 1: Clicking Sign in."},
                    {"start": 1.25, "end": 3.5, "title": "step 2: operator click at 10,20"},
                    {"start": 3.5, "end": 62.125, "title": "step 3: a: b"}]
    assert parse_vtt("WEBVTT\n\n") == []


def test_marks_are_the_recorded_pixels() -> None:
    marks = action_marks([{"action": "click", "x": 5, "y": 6},
                          {"action": "drag", "path": [{"x": 1, "y": 2}, {"x": 30, "y": 40}]},
                          {"action": "zoom", "region": {"x0": 1, "y0": 2, "x1": 3, "y1": 4}}])
    assert [(m["kind"], m.get("x"), m.get("y")) for m in marks if m["kind"] == "point"] == \
        [("point", 5, 6), ("point", 30, 40), ("point", 1, 2)]
    assert [m["points"] for m in marks if m["kind"] == "path"] == [[[1, 2], [30, 40]]]
    assert [m["box"] for m in marks if m["kind"] == "box"] == [[1, 2, 3, 4]]


def test_a_vision_run_maps_steps_to_chapters_and_marks_the_persons_steps() -> None:
    vtt = chapters_vtt([Chapter(0.0, 1.0, "step 1: x"), Chapter(1.0, 1.5, "step 2: operator click at 10,20"),
                        Chapter(1.5, 4.0, "step 3: y")])
    view = trace_view(trace(SEAL), VerifyResult(ok=True, steps_checked=3), LIVE, vtt)
    assert view["video"]["src"] == "/files/video.mp4" and view["video"]["captions_src"] == "/files/captions.vtt"
    steps = view["steps"]
    assert [s["by"] for s in steps] == ["agent", "operator", "agent"]
    assert [s["chapter"]["start"] for s in steps] == [0.0, 1.0, 1.5]
    assert steps[1]["title"] == "click at (10, 20)" and steps[1]["images"] == []  # a person's step: no screenshot
    assert [i["src"] for i in steps[0]["images"]] == ["/files/1/before", "/files/1/after"]
    assert steps[0]["images"][0]["marks"][0] | {"tip": ""} == {"kind": "point", "action": "click", "x": 960, "y": 540,
                                                              "label": "1", "tip": ""}
    assert steps[2]["heals"] == [{"text": "the browser restarted"}] and steps[2]["status"] == "failed"
    assert view["facts"][0] == ["3 / 11", "steps (1 by the operator)"]  # the console's count
    assert view["evidence"] == {"ok": True, "text": "Evidence verified: hash chain and screenshot SHA-256 of 3 "
                                                    "steps and the video's intact, the run's record (meta.json, "
                                                    "sealed) and no file beside them."}
    hrefs = [e["href"] for e in view["exports"]]
    assert "/api/v1/traces/20260501T120000000000Z-abcd1234/export?format=playwright-py" in hrefs
    broken = trace_view(trace(), VerifyResult(ok=False, steps_checked=1, broken_index=2, reason="hash mismatch"), LIVE)
    assert broken["evidence"] == {"ok": False, "text": "Evidence broken at step 2: hash mismatch"}
    assert view["status"] == trace().meta.status and broken["status"] == "unverified"  # not its record's claim
    assert view["verdict"] == {"ok": True, "text": "Verified: 1 of 1 expectations held when the model said done.",
                               "checks": [{"text": "assert url 'http://app/home': URL 'http://app/home'",
                                           "passed": True}]}
    assert all(s["chapter"] is None for s in broken["steps"])  # no film, no chapters


def test_a_done_nothing_checked_is_shown_unverified_and_a_failed_check_says_what_it_saw() -> None:
    claimed = trace_view(trace(verified=None, checks=[]), VerifyResult(ok=True, steps_checked=3), LIVE)
    assert claimed["status"] == "unverified"  # the evidence holds, but only the model said done
    assert claimed["verdict"] == {"ok": None, "checks": [], "text": "Unverified: the run carried no expectation "
                                                                    "(expect), so its done is the model's word."}
    failed = trace_view(trace(status="failed", verified=False, checks=[
        {"check": "assert has_value label 'Name' 'alice'", "passed": False, "duration_ms": 5000,
         "saw": "label 'Name': expected the value 'alice'; saw ''"}]), VerifyResult(ok=True, steps_checked=3), LIVE)
    assert failed["status"] == "failed" and failed["verdict"]["ok"] is False
    assert failed["verdict"]["text"] == ("Failed check: the model said done, but 1 of 1 expectations did not "
                                         "hold.")
    assert failed["verdict"]["checks"][0]["text"].endswith("saw ''") and not failed["verdict"]["checks"][0]["passed"]
    # a run that ended before its model said done has no verdict: its status says why
    assert trace_view(trace(status="max_steps", verified=None, checks=[]), VerifyResult(ok=True, steps_checked=3),
                      LIVE)["verdict"] is None


def test_a_badge_shows_the_claim_only_when_the_evidence_holds_or_the_run_still_runs() -> None:
    assert shown_status("done", verified=True, running=False) == "done"
    assert shown_status("done", verified=True, running=False, checked=False) == "unverified"
    for success in ("done", "done_after_heal", "passed"):
        assert shown_status(success, verified=False, running=False) == "unverified"
    assert shown_status("failed", verified=False, running=False) == "failed"  # no success claimed
    assert shown_status("running", verified=False, running=True) == "running"


def test_images_are_inlined_offline(tmp_path: Path) -> None:
    png = tmp_path / "a.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    files = Files(lambda name: f"/files/{name}", lambda name: png, mode="inline")
    view = trace_view(trace(), VerifyResult(ok=True, steps_checked=3), files)
    assert view["steps"][0]["images"][0]["src"] == "data:image/png;base64,iVBORw0KGgpmYWtl"
    # A file gone: shown as missing, the rest of the report still made.
    gone = Files(lambda name: f"/files/{name}", lambda name: tmp_path / "gone.png", mode="inline")
    view = trace_view(trace(), VerifyResult(ok=False, steps_checked=0, reason="gone"), gone)
    assert view["steps"][0]["images"][0]["src"] is None and len(view["steps"]) == 3


def qa_run(heal_images: bool = True) -> QaRun:
    shot = {"name": "page", "passed": False, "diff_pixels": 900, "diff_percentage": 0.5, "regions": 2,
            "largest_region": {"box": [100, 150, 300, 350], "pixels": 700}, "reason": "a region of 700 px",
            "baseline_image": {"name": "baseline-card-page.png"}, "current_image": {"name": "current-card-page.png"},
            "diff_image": {"name": "diff-card-page.png"}}
    compared = {"baseline_id": "card", "baseline_version": 2, "passed": False, "reason": "page: a region",
                "diff_pixels": 900, "shots": [shot]}
    healed = {"failed": "role button 'Go'", "by": "name", "matched": "role button 'Go!'", "recorded_at": [40, 50],
              "point": [44, 55], "box": {"x": 30, "y": 40, "width": 20, "height": 30}, "before": "heal-2-before.png",
              "model": None}
    names = ["step-000-start.png", "step-001-after.png", "step-002-after.png", "baseline-card-page.png",
             "current-card-page.png", "diff-card-page.png"] + (["heal-2-before.png"] if heal_images else [])
    steps = [StepResult(index=1, name="click '#card'", action="click", status="passed", before="step-000-start.png",
                        after="step-001-after.png", detail={"point": [200, 250], "healed": healed}),
             StepResult(index=2, name="assert visual_matches card", action="assert", status="failed",
                        failure_reason="baseline card: page: a region", before="step-001-after.png",
                        after="step-002-after.png",
                        detail={**compared, "console": [{"level": "error", "text": "boom"}]})]
    return QaRun(test_run_id="20260501T120000000000Z-feedbeef", verb="verify_user_flow", name="card flow",
                 timestamp="2026-05-01T12:00:00Z", status="failed",
                 test_cases=[TestCase(name="card flow", status="failed", duration_ms=900, steps=steps,
                                      failure_reason="step 2 (assert visual_matches card): baseline card")],
                 artifacts=Artifacts(screenshots=[Artifact(name=n, path="", sha256="0") for n in names],
                                     videos=[Artifact(name="video.mp4", path="", sha256="ab", kind="video")],
                                     other=[Artifact(name="chapters.vtt", path="", sha256="0", kind="chapters")]),
                 result={"heals": [{"step": 2, "failed": "x", "by": "pixel", "matched": "y"}]})


def test_a_qa_flow_has_its_click_its_heal_and_its_visual_review() -> None:
    vtt = chapters_vtt([Chapter(0.5, 1.0, "step 1: click '#card'"), Chapter(1.0, 3.0, "step 2: assert")])
    view = qa_view(qa_run(), VerifyReport(ok=True, problems=[], records_checked=9, files_checked=8), LIVE, vtt)
    click, check = view["steps"]
    assert click["chapter"]["start"] == 0.5 and check["chapter"]["start"] == 1.0
    before = click["images"][0]
    assert before["src"] == "/files/step-000-start.png"
    points = [(m["x"], m["y"], m["label"]) for m in before["marks"] if m["kind"] == "point"]
    assert points == [(200, 250, "1"), (40, 50, "recorded"), (44, 55, "healed")]
    assert [m["box"] for m in before["marks"] if m["kind"] == "box"] == [[30, 40, 50, 70]]
    heal = click["heals"][0]
    assert heal["text"].startswith("healed step 1: role button 'Go' no longer matched; healed by name")
    assert [i["src"] for i in heal["images"]] == ["/files/heal-2-before.png"]  # an image the record names
    # The run's own list of heals: shown on the step it names when that step carried none.
    assert [h["text"] for h in check["heals"]] == ["healed step 2: x no longer matched; healed by pixel: y"]
    review = check["comparisons"][0]
    assert review["approvable"] is True and review["baseline_id"] == "card" and review["baseline_version"] == 2
    assert review["test_run_id"] == "20260501T120000000000Z-feedbeef"
    assert [i["label"] for i in review["shots"][0]["images"]] == ["Baseline", "Current", "Difference"]
    assert all(i["marks"][0]["box"] == [100, 150, 300, 350] for i in review["shots"][0]["images"])
    assert check["console"] == ["error: boom"] and check["errors"] == ["baseline card: page: a region"]
    assert view["video"]["src"] == "/files/video.mp4" and view["video"]["chapters_src"] == "/files/chapters.vtt"
    assert "/api/v1/qa/runs/20260501T120000000000Z-feedbeef/export?format=yaml" in [e["href"] for e in view["exports"]]
    assert view["evidence"]["ok"] and "9 records, 8 files" in view["evidence"]["text"]
    # A heal naming a file the run does not list shows no image of it.
    assert qa_view(qa_run(heal_images=False), VerifyReport(ok=True, problems=[]), LIVE)["steps"][0]["heals"][0][
        "images"] == []


def test_a_passed_comparison_is_not_approvable_and_broken_evidence_says_why() -> None:
    run = qa_run()
    run.test_cases[0].steps[1].status = "passed"
    view = qa_view(run, VerifyReport(ok=False, problems=["artifact a.png: does not match its SHA-256"]), LIVE)
    assert view["steps"][1]["comparisons"][0]["approvable"] is False
    assert view["evidence"] == {"ok": False, "text": "Evidence broken: artifact a.png: does not match its SHA-256"}
    assert run.status == "failed" and view["status"] == "failed"  # a failure is shown as claimed
    run.status = "passed"
    assert qa_view(run, VerifyReport(ok=False, problems=["x"]), LIVE)["status"] == "unverified"


class Scripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts: list[tuple[dict, str]] = []
        self._open: dict | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._open = dict(attrs)
            self.scripts.append((self._open, ""))

    def handle_data(self, data):
        if self._open is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._open = None


def test_the_offline_page_embeds_the_document_whole_and_loads_nothing() -> None:
    view = trace_view(trace(), VerifyResult(ok=True, steps_checked=3), LIVE)
    page = offline_html(view)
    parser = Scripts()
    parser.feed(page)
    # Two scripts, whatever the run's text holds: the document (JSON) and the viewer's code.
    assert [attrs.get("type") for attrs, _ in parser.scripts] == ["application/json", "module"]
    assert json.loads(parser.scripts[0][1]) == json.loads(json.dumps(view))
    assert "src=" not in "".join(str(a) for a, _ in parser.scripts)
    assert "/console/assets/" not in page  # style, script and icon inlined: nothing from a server
    assert "<title>done · sign in</title>" in page


def test_the_report_beside_a_trace_links_its_files_by_name(tmp_path: Path) -> None:
    store = TraceStore(tmp_path)
    writer = store.create("Click the middle", model="m")
    img = Image.new("RGB", (1920, 1080), "white")
    shot = Frame(img.convert("RGBA").tobytes("raw", "BGRA"), 1920, 1080)
    writer.record_step(before=shot, after=shot, actions=[{"action": "click", "x": 960, "y": 540}])
    writer.record_step(before=shot, actions=[{"action": "move", "x": 10, "y": 10}])
    writer.finish("done")
    path = write_report(store, writer.trace_id)
    assert path == store.trace_dir(writer.trace_id) / "report.html"
    parser = Scripts()
    parser.feed(path.read_text())
    view = json.loads(parser.scripts[0][1])
    srcs = [[i["src"] for i in s["images"]] for s in view["steps"]]
    # Step 2's before is step 1's after: the same file, linked by its name beside the report.
    assert srcs == [["step-0001-before.png", "step-0001-after.png"], ["step-0001-after.png"]]
    assert all((path.parent / src).is_file() for group in srcs for src in group)
    assert view["evidence"]["text"].startswith("Evidence verified")
    assert store.verify(writer.trace_id).ok  # the report is not part of the evidence


def test_a_record_of_the_wrong_shape_is_damaged_evidence_not_a_server_fault() -> None:
    import pytest

    from vision.errors import QaRunCorruptError
    from vision.evidence.runview import qa_run_view

    run = qa_run()
    run.test_cases[0].steps[1].detail["shots"] = ["not a shot"]  # an edited record that still parses

    class Qa:
        def run(self, test_run_id):
            return run

        def verify(self, test_run_id):
            return VerifyReport(ok=False, problems=["record 3: hash mismatch"])

        def artifact(self, test_run_id, name):
            raise AssertionError("live mode reads no file")

    with pytest.raises(QaRunCorruptError, match="cannot be rendered"):
        qa_run_view(Qa(), run.test_run_id)


def test_a_comparison_approved_already_says_which_version_it_became() -> None:
    from types import SimpleNamespace

    from vision.evidence.runview import qa_run_view

    run = qa_run()

    class Qa:
        baselines = SimpleNamespace(versions=lambda baseline_id: [
            SimpleNamespace(version=2, approved_from=None), SimpleNamespace(version=3, approved_from=run.test_run_id)])

        def run(self, test_run_id):
            return run

        def verify(self, test_run_id):
            return VerifyReport(ok=True, problems=[])

    review = qa_run_view(Qa(), run.test_run_id)["steps"][1]["comparisons"][0]
    assert review["approved_as"] == 3 and review["approvable"] is False
    Qa.baselines = SimpleNamespace(versions=lambda baseline_id: [SimpleNamespace(version=2, approved_from="other")])
    review = qa_run_view(Qa(), run.test_run_id)["steps"][1]["comparisons"][0]
    assert "approved_as" not in review and review["approvable"] is True


def test_every_recorded_region_is_boxed_and_an_old_record_boxes_its_largest() -> None:
    from vision.evidence.runview import shot_regions

    two = [{"box": [10, 20, 30, 40], "pixels": 300}, {"box": [200, 20, 220, 40], "pixels": 90}]
    assert shot_regions({"diff_regions": two, "largest_region": two[0]}) == two
    # A record made before every region was recorded: its largest, as before.
    assert shot_regions({"largest_region": two[0], "regions": 2}) == [two[0]]
    assert shot_regions({"diff_regions": [], "largest_region": two[1]}) == [two[1]]
    assert shot_regions({"regions": 0}) == [] and shot_regions({"diff_regions": [{"box": "x"}, 3]}) == []
    run = qa_run()
    shot = run.test_cases[0].steps[1].detail["shots"][0]
    shot["diff_regions"] = two
    view = qa_view(run, VerifyReport(ok=True, problems=[]), LIVE)
    review = view["steps"][1]["comparisons"][0]["shots"][0]
    assert review["boxed"] == 2 and len(review["images"]) == 3
    for image in review["images"]:  # baseline, current and diff: each region boxed on each
        assert [m["box"] for m in image["marks"]] == [[10, 20, 30, 40], [200, 20, 220, 40]]


def test_a_running_flow_shows_the_steps_recorded_so_far_and_says_it_is_live(tmp_path: Path) -> None:
    from vision.evidence.qa_runs import QaRunStore, build_run
    from vision.evidence.runview import with_steps_so_far

    store = QaRunStore(tmp_path)
    writer = store.create("verify_user_flow", "card flow", session_id="s1", request={})
    writer.record("note", message="fresh start")
    for index, name in ((1, "click '#card'"), (2, "navigate /next")):
        writer.record("step", **StepResult(index=index, name=name, action=name.split()[0], status="passed",
                                           detail={"point": [200, 250]}).model_dump(mode="json"))
    run = build_run(store.records(writer.run_id))
    assert run.status == "running" and run.test_cases == []  # the case record comes at the end
    view = qa_view(with_steps_so_far(run, store.records(writer.run_id)), VerifyReport(ok=True, problems=[]), LIVE)
    assert view["live"] is True and [s["title"] for s in view["steps"]] == ["click '#card'", "navigate /next"]
    # Numbered as the flow numbered them (a record's own index is its place in the manifest).
    assert [(s["index"], s["id"]) for s in view["steps"]] == [(1, "step-1"), (2, "step-2")]
    assert view["facts"][0] == ["2", "steps so far"]
    assert view["steps"][0]["images"] == [] and view["steps"][0]["status"] == "passed"
    # Finished: the case's own steps, and no longer live.
    writer.record("case", name="card flow", status="passed", duration_ms=5,
                  steps=[StepResult(index=1, name="click '#card'", action="click", status="passed").model_dump()])
    writer.finish("passed")
    done = build_run(store.records(writer.run_id))
    assert with_steps_so_far(done, store.records(writer.run_id)) is done
    assert qa_view(done, VerifyReport(ok=True, problems=[]), LIVE)["live"] is False
    # A running verb with no steps (a comparison) shows none until it is done.
    other = store.create("compare_visual_regression", "cmp", session_id="s1", request={})
    bare = build_run(store.records(other.run_id))
    assert with_steps_so_far(bare, store.records(other.run_id)) is bare


def test_a_vision_run_is_live_until_its_status_is_final() -> None:
    running = trace()
    running.meta.status = "running"
    assert trace_view(running, VerifyResult(ok=True, steps_checked=3), LIVE)["live"] is True
    assert trace_view(trace(), VerifyResult(ok=True, steps_checked=3), LIVE)["live"] is False


def test_the_etag_changes_with_the_runs_files_and_only_then(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from vision.evidence.qa_runs import QaRunStore
    from vision.evidence.runview import run_etag

    store = TraceStore(tmp_path)
    runs = QaRunStore(tmp_path)
    glassdesk = SimpleNamespace(store=store, qa=SimpleNamespace(runs=runs, baselines=SimpleNamespace(
        root=tmp_path / "qa" / "baselines")))
    writer = runs.create("verify_user_flow", "flow", session_id=None, request={})
    first = run_etag(glassdesk, writer.run_id)
    assert first and first.startswith('"') and run_etag(glassdesk, writer.run_id) == first
    writer.record("step", index=1, name="n", action="click", status="passed")
    second = run_etag(glassdesk, writer.run_id)
    assert second != first
    # A baseline approved meanwhile changes what the run's review says: so does its ETag.
    (tmp_path / "qa" / "baselines" / "card" / "v2").mkdir(parents=True)
    assert run_etag(glassdesk, writer.run_id) not in (first, second)
    # A vision trace: its directory's files.
    trace_writer = store.create("look", model="scripted")
    seen = run_etag(glassdesk, trace_writer.trace_id)
    assert seen and run_etag(glassdesk, trace_writer.trace_id) == seen
    trace_writer.finish("done", answer="ok")
    assert run_etag(glassdesk, trace_writer.trace_id) != seen
    assert run_etag(glassdesk, "20260101T000000000000Z-00000000") is None
    assert run_etag(glassdesk, "../etc") is None and run_etag(glassdesk, "a.b") is None
