"""`glassdesk qa --report`'s suite document (vision.qa.suite_report): every test listed with its
verdict and opening its run's viewer document, each file held once, and the size bounds that send
a file beside the report. The page in a browser: tests/e2e/test_suite_report.py."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.reports import embedded_document
from vision.models.qa import Artifact, Artifacts, QaRun, StepResult, TestCase, VerifyReport
from vision.qa import suite_report
from vision.qa.suite_report import FILE_REF, SuiteFiles, suite_document, write_suite_report

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
                       "rkJggg==")
OTHER_PNG = PNG[:-12] + b"\x00" * 12  # other bytes, another file (not a valid PNG: never decoded here)
VERIFIED = VerifyReport(ok=True, problems=[], records_checked=5, files_checked=3)


def run_id(n: int) -> str:
    return f"20260101T000000000000Z-{n:08x}"


def flow(n: int, status: str, *, heals: int = 0, film: bool = False) -> QaRun:
    """A flow of two steps; a failed one fails its second with a message. Step 1's after image is
    step 2's before, as the flow records it."""
    steps = [StepResult(index=1, name="click '#go'", action="click", status="passed", before="start.png",
                        after="step-1.png", detail={"point": [10, 20]}),
             StepResult(index=2, name="assert text", action="assert", status=status, before="step-1.png",
                        after="step-2.png", failure_reason="expected 'Welcome'; saw 'Sign in'"
                        if status == "failed" else None)]
    reason = "step 2 (assert text): expected 'Welcome'; saw 'Sign in'" if status == "failed" else None
    videos = [Artifact(name="video.mp4", path="", sha256="0", kind="video")] if film else []
    other = [Artifact(name="chapters.vtt", path="", sha256="0", kind="chapters")] if film else []
    return QaRun(test_run_id=run_id(n), verb="verify_user_flow", name=f"flow {n}",
                 timestamp="2026-01-01T00:00:00Z", duration_ms=1500, status=status,
                 test_cases=[TestCase(name=f"flow {n}", status=status, duration_ms=1500, steps=steps,
                                      failure_reason=reason)],
                 artifacts=Artifacts(screenshots=[Artifact(name=name, path="", sha256="0")
                                                  for name in ("start.png", "step-1.png", "step-2.png")],
                                     videos=videos, other=other),
                 result={"heals": [{"step": 1, "failed": "a", "by": "name", "matched": "b"}] * heals})


class Server:
    """The files a server would answer: every run's images are the same PNG but step 2's."""

    def __init__(self, film: bytes = b"film"):
        self.asked: list[tuple[str, str]] = []
        self.film = film

    def __call__(self, run: str, name: str) -> bytes | None:
        self.asked.append((run, name))
        if name == "video.mp4":
            return self.film
        if name == "chapters.vtt":
            return b"WEBVTT\n\n00:00.000 --> 00:01.000\nstep 1: click\n"
        return OTHER_PNG if name == "step-2.png" else PNG


def document(tmp_path: Path, runs, earlier=lambda run: [], server=None) -> tuple[dict, SuiteFiles]:
    files = SuiteFiles(tmp_path / "report_files", server or Server())
    return suite_document("smoke", runs, earlier, files, lambda rid: VERIFIED, None), files


def test_every_test_is_listed_with_its_verdict_and_opens_its_runs_document(tmp_path):
    passed, failed, healed = flow(1, "passed"), flow(2, "failed"), flow(3, "passed", heals=2)
    doc, files = document(tmp_path, [passed, failed, healed])
    assert doc["kind"] == "suite" and doc["title"] == "smoke" and doc["status"] == "failed"
    assert [(c["name"], c["status"], c["badges"]) for c in doc["cases"]] == [
        ("flow 1", "passed", []), ("flow 2", "failed", []), ("flow 3", "passed", ["healed"])]
    assert doc["cases"][1]["message"] == "step 2 (assert text): expected 'Welcome'; saw 'Sign in'"
    assert doc["cases"][0]["message"] is None and doc["cases"][2]["note"] == "2 step(s) healed"
    assert dict(doc["facts"])["3"] == "tests" and ["1", "failed"] in doc["facts"] and ["1", "healed"] in doc["facts"]
    # Each case's run is the viewer's document of that run: its steps, its failure, its evidence.
    view = doc["runs"][doc["cases"][1]["run"]]
    assert view["kind"] == "qa" and view["id"] == run_id(2) and view["status"] == "failed"
    assert [s["status"] for s in view["steps"]] == ["passed", "failed"]
    assert view["steps"][1]["errors"] == ["expected 'Welcome'; saw 'Sign in'"]
    assert view["evidence"]["text"].startswith("Evidence verified")
    assert view["exports"] == []  # an embedded server's links die with the command


def test_each_file_is_held_once_whoever_shows_it(tmp_path):
    server = Server()
    doc, files = document(tmp_path, [flow(1, "passed"), flow(2, "failed")], server=server)
    # Step 1's after is step 2's before: each run's three files asked for once each.
    assert sorted(server.asked) == sorted((run_id(n), name) for n in (1, 2)
                                          for name in ("start.png", "step-1.png", "step-2.png"))
    srcs = [i["src"] for view in doc["runs"] for s in view["steps"] for i in s["images"]]
    assert len(srcs) == 8 and all(src.startswith(FILE_REF) for src in srcs)
    # Two different contents among eight images of two runs: two data: URIs in the report.
    assert len(doc["files"]) == 2 and {src[len(FILE_REF):] for src in srcs} == set(doc["files"])
    assert all(uri.startswith("data:image/png;base64,") for uri in doc["files"].values())
    assert not (tmp_path / "report_files").exists() and doc["note"] == ""


def test_a_flaky_test_keeps_its_earlier_attempts_openable(tmp_path):
    first, last = flow(1, "failed"), flow(2, "passed")
    doc, _ = document(tmp_path, [last], earlier=lambda run: [[first]] if run is last else [])
    [case] = doc["cases"]
    assert case["status"] == "passed" and case["badges"] == ["flaky"] and case["note"] == "passed on attempt 2"
    [attempt] = case["attempts"]
    assert attempt["status"] == "failed" and "expected 'Welcome'" in attempt["message"]
    assert doc["runs"][attempt["run"]]["id"] == run_id(1) and doc["runs"][case["run"]]["id"] == run_id(2)
    assert ["1", "flaky"] in doc["facts"] and doc["status"] == "passed"
    # An attempt of several runs (the test and its after_each): each numbered by its attempt.
    hook = flow(3, "failed").model_copy(update={"name": "flow 2 · after_each"})
    retried = flow(4, "failed")
    doc, _ = document(tmp_path, [retried], earlier=lambda run: [[first, hook], [flow(5, "failed")]])
    [case] = doc["cases"]
    assert case["badges"] == ["retried"] and case["note"] == "failed on attempt 3"
    assert [(a["attempt"], a["name"]) for a in case["attempts"]] == [(1, "flow 1"), (1, "flow 2 · after_each"),
                                                                     (2, "flow 5")]
    assert [doc["runs"][a["run"]]["id"] for a in case["attempts"]] == [run_id(1), run_id(3), run_id(5)]


def test_files_past_the_bounds_go_beside_the_report_and_the_failing_tests_come_first(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_report, "IMAGES_MAX", 3 * len(PNG))  # one run's three images
    monkeypatch.setattr(suite_report, "INLINE_VIDEO_MAX", 10)
    server = Server(film=b"x" * 11)  # over the film bound: linked, never inlined

    def per_run(run, name):  # each run's images its own: nothing shared between the two
        data = server(run, name)
        return data if name.endswith((".mp4", ".vtt")) else PNG[:-10] + run[-4:].encode() + name[4:10].encode()

    passed, failed = flow(1, "passed", film=True), flow(2, "failed", film=True)
    doc, files = document(tmp_path, [passed, failed], server=per_run)
    # The failing run was built first, though listed second: its images are the ones inlined.
    failing, passing = doc["runs"][1], doc["runs"][0]
    assert all(i["src"].startswith(FILE_REF) for s in failing["steps"] for i in s["images"])
    assert [i["src"] for i in passing["steps"][0]["images"]] == [f"report_files/{run_id(1)}/start.png",
                                                                 f"report_files/{run_id(1)}/step-1.png"]
    assert (tmp_path / "report_files" / run_id(1) / "start.png").read_bytes() == per_run(run_id(1), "start.png")
    assert failing["video"]["src"] == f"report_files/{run_id(2)}/video.mp4"
    assert (tmp_path / "report_files" / run_id(2) / "video.mp4").read_bytes() == b"x" * 11
    # The chapters are inlined whatever the bounds: a file: page may not load a track beside it.
    assert failing["video"]["chapters_src"].startswith(FILE_REF)
    assert failing["steps"][0]["chapter"]["title"] == "step 1: click"
    # The same film's bytes in the other run: the same file beside, not a second copy.
    assert passing["video"]["src"] == failing["video"]["src"]
    assert "4 file(s) past this report's size bounds" in doc["note"]  # the film and 3 images


def test_the_bound_on_images_holds_for_a_large_suite(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_report, "IMAGES_MAX", 3 * 100)
    counter = iter(range(10_000))

    def unique(run, name):  # every image different: nothing to share
        return bytes([next(counter) % 256]) * 100

    doc, files = document(tmp_path, [flow(n, "passed") for n in range(1, 6)], server=unique)
    assert len(doc["files"]) == 3 and files.used["image"] == 300
    beside = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "report_files").rglob("*.png"))
    # 5 runs of 3 files each (step 1's after is step 2's before: fetched once), 3 inlined
    assert len(beside) == 5 * 3 - 3 and "12 file(s) past" in doc["note"]
    assert len(doc["files"]) * 100 <= suite_report.IMAGES_MAX


def test_a_test_the_server_did_not_run_is_listed_with_why_and_no_evidence(tmp_path):
    refused = QaRun(test_run_id="-", verb="verify_page_loads", name="refused", timestamp="2026-01-01T00:00:00Z",
                    status="error", test_cases=[TestCase(name="refused", status="error", duration_ms=0,
                                                         failure_reason="invalid_request: bad URL")])
    server = Server()
    doc, _ = document(tmp_path, [refused], server=server)
    assert doc["cases"][0]["message"] == "invalid_request: bad URL" and doc["cases"][0]["status"] == "error"
    view = doc["runs"][0]
    assert view["evidence"] == {"ok": False, "text": "No evidence: the server did not run this test (the reason is "
                                                     "below)."}
    assert server.asked == []


@pytest.mark.parametrize("rid, name", [("../../evil", "page.png"), (run_id(1), "../evil.png")])
def test_a_name_no_server_makes_is_never_a_path(tmp_path, rid, name):
    files = SuiteFiles(tmp_path / "report_files", Server())
    assert files.src(rid, name, video=True) is None
    assert not list(tmp_path.rglob("*"))


def test_the_report_is_the_viewers_page_with_the_suite_embedded(tmp_path):
    path = write_suite_report(tmp_path / "report.html", "smoke", [flow(1, "passed"), flow(2, "failed")],
                              lambda run: [], Server(), lambda rid: None, "http://gd:8080")
    page = path.read_text()
    assert "<title>failed · smoke</title>" in page and "/console/assets/" not in page
    doc = embedded_document(page)
    assert [c["name"] for c in doc["cases"]] == ["flow 1", "flow 2"]
    # No verify answered: said, not claimed verified; the API's links point at the server that ran it.
    assert doc["runs"][0]["evidence"]["text"].startswith("Evidence not checked")
    assert all(e["href"].startswith("http://gd:8080/api/v1/qa/runs/") for e in doc["runs"][0]["exports"])
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
