"""`glassdesk qa --report`: a whole suite in the run viewer's offline form.

The report is the run viewer's own page (vision/static/run.{html,js,css}, inlined by
``vision.evidence.runview.offline_html``) over a suite document: a page listing every test (its status,
badges for a flaky pass, a failed retry or a heal, its duration, the failing step's message), each
opening its run's document (``vision.evidence.runview.qa_view``, the one the console's viewer shows) in the
same layout, with a link back to the list.

Why one file rather than an index and a file per run: a CI job keeps one artifact that opens from
anywhere (a download, a mail attachment), the runs' documents are the viewer's as they are, and
the files several runs share (a step's after image is the next step's before; an earlier attempt
often repeats the last one's screens) are held once, by their SHA-256, in the document's ``files``
table, which a file per run could not share. A file per run would also need links between files,
which a browser opening them from an attachment or a zip preview loses.

Size: every image and track is inlined once (deduplicated by content) up to ``IMAGES_MAX`` bytes
for the whole suite, and a film up to ``runview.INLINE_VIDEO_MAX`` each and ``FILMS_MAX`` in all
(the failing tests' files first: they are what a reviewer opens). A file past those bounds is
written beside the report, in ``<report stem>_files/<run id>/<name>``, and linked by that relative
path; the suite page says how many. So a 20-case filmed suite is at most about 130 MB of HTML
(base64 of 96 MB), never 500, and a small suite is one file with nothing beside it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vision.evidence.qa_runs import BadName, check_artifact_name, check_run_id
from vision.evidence.runview import INLINE_VIDEO_MAX, Files, data_uri, offline_html, qa_view
from vision.models.qa import QaRun, VerifyReport
from vision.trace.files import atomic_write

log = logging.getLogger("glassdesk.qa")

# Bounds of what one report inlines (raw bytes; base64 adds a third): see the module's docstring.
IMAGES_MAX = 64 * 1024 * 1024
FILMS_MAX = 32 * 1024 * 1024
# A document's reference to a file of the suite's table (resolved by run.js before a run renders).
FILE_REF = "suite-file:"
#: (test_run_id, artifact name) -> the file's bytes, or None when it cannot be had
Fetch = Callable[[str, str], "bytes | None"]


class SuiteFiles:
    """The files of every run of the report: inlined once each within the bounds, else beside."""

    def __init__(self, folder: Path, fetch: Fetch):
        self.folder, self.fetch = folder, fetch
        self.table: dict[str, str] = {}      # sha256 -> data: URI
        self.beside: dict[str, str] = {}     # sha256 -> a path relative to the report
        self.used = {"image": 0, "film": 0, "track": 0}
        # Each file's place, once it has one: a file several steps show is fetched once. Its bytes
        # are not kept: past the table, a suite's files are on disk, not in this process's memory.
        self._srcs: dict[tuple[str, str], str | None] = {}

    def bytes_of(self, run_id: str, name: str) -> bytes | None:
        try:
            return self.fetch(check_run_id(run_id), check_artifact_name(name))
        except BadName as exc:  # a name no glassdesk server makes: never a path here
            log.warning("not in the report: %s", exc)
            return None

    def src(self, run_id: str, name: str, *, video: bool) -> str | None:
        if (run_id, name) not in self._srcs:
            self._srcs[run_id, name] = self._place(run_id, name, video)
        return self._srcs[run_id, name]

    def _place(self, run_id: str, name: str, video: bool) -> str | None:
        data = self.bytes_of(run_id, name)
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        if digest in self.table:
            return FILE_REF + digest
        if digest in self.beside:
            return self.beside[digest]
        suffix = Path(name).suffix
        # A WebVTT track is always inlined (a page opened from a file may not load one beside it),
        # and it is a few kB: no bound of its own.
        kind = "film" if video else "track" if suffix == ".vtt" else "image"
        bound = {"film": FILMS_MAX, "image": IMAGES_MAX}.get(kind)
        fits = bound is None or ((not video or len(data) <= INLINE_VIDEO_MAX) and self.used[kind] + len(data) <= bound)
        if fits:
            self.used[kind] += len(data)
            self.table[digest] = data_uri(data, suffix)
            return FILE_REF + digest
        target = self.folder / run_id / name  # both checked by bytes_of: one plain component each
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.beside[digest] = f"{self.folder.name}/{run_id}/{name}"
        return self.beside[digest]

    def of_run(self, run_id: str) -> Files:
        return _RunFiles(self, run_id)


class _RunFiles(Files):
    """One run's view of the suite's files, as runview's builders ask for them."""

    def __init__(self, shared: SuiteFiles, run_id: str):
        super().__init__(lambda name: name, mode="inline")
        self.shared, self.run_id = shared, run_id

    def src(self, name: str | None, *, video: bool = False) -> str | None:
        return self.shared.src(self.run_id, name, video=video) if name else None


def _reason(run: QaRun) -> str | None:
    return next((c.failure_reason for c in run.test_cases if c.failure_reason), None)


def _heals(run: QaRun) -> int:
    return len([h for h in (run.result or {}).get("heals") or [] if isinstance(h, dict)])


def _run_view(run: QaRun, files: SuiteFiles, verification: VerifyReport | None, links: str | None) -> dict:
    """A run's viewer document, built here from what the server answered (its record, its verify,
    its files), so it is the console viewer's document whatever server version made the run."""
    chapters = next((a.name for a in run.artifacts.other if a.kind == "chapters"), None)
    text = None
    if chapters and run.test_run_id != "-":
        data = files.bytes_of(run.test_run_id, chapters)
        text = data.decode("utf-8", "replace") if data is not None else None
    check = verification or VerifyReport(ok=False, problems=[])
    try:
        view = qa_view(run, check, files.of_run(run.test_run_id), text)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        # A record of the wrong shape is shown by its verdict, not dropped from the suite.
        view = qa_view(run.model_copy(update={"test_cases": [], "result": None}), check, files.of_run("-"))
        view["error"] = f"this run's record cannot be shown ({type(exc).__name__}: {str(exc)[:300]})"
    if run.test_run_id == "-":
        view["evidence"] = {"ok": False, "text": "No evidence: the server did not run this test (the reason is "
                                                 "below)."}
    elif verification is None:
        view["evidence"] = {"ok": False, "text": "Evidence not checked: the server did not answer its verify."}
    # The API's links work only while that server runs: absolute to it, or none for one that is gone.
    view["exports"] = [{**e, "href": links + e["href"]} for e in view["exports"]] if links else []
    return view


def suite_document(name: str, runs: Sequence[QaRun], earlier: Callable[[QaRun], Sequence[Sequence[QaRun]]],
                   files: SuiteFiles, verify: Callable[[str], VerifyReport | None], links: str | None) -> dict:
    """The suite page's document (pure but for ``files`` and ``verify``): one case per run of the
    suite (as the JUnit has them), each naming its run's document in ``runs``, with its earlier
    attempts' runs after the cases'."""
    # A failed attempt is the runs it made (before_each, the test, after_each): each numbered by its attempt.
    attempts = {id(run): [(n, r) for n, group in enumerate(earlier(run), 1) for r in group] for run in runs}
    every = list(runs) + [r for run in runs for _, r in attempts[id(run)]]
    # The failing runs' files first: within the bounds, what a reviewer opens is the one inlined.
    order = sorted(range(len(every)), key=lambda i: (i >= len(runs), every[i].status == "passed", i))
    views: dict[int, dict] = {}
    for i in order:
        run = every[i]
        views[i] = _run_view(run, files, verify(run.test_run_id) if run.test_run_id != "-" else None, links)
    cases: list[dict[str, Any]] = []
    position = len(runs)
    for number, run in enumerate(runs):
        retried = attempts[id(run)]
        badges = []
        if retried:
            badges.append("flaky" if run.status == "passed" else "retried")
        if _heals(run):
            badges.append("healed")
        note = []
        if retried:
            note.append(f"{'passed' if run.status == 'passed' else run.status} on attempt {len(earlier(run)) + 1}")
        if _heals(run):
            note.append(f"{_heals(run)} step(s) healed")
        cases.append({
            "name": run.name, "status": run.status, "badges": badges, "note": " · ".join(note),
            "duration_ms": run.duration_ms or sum(c.duration_ms for c in run.test_cases),
            "message": _reason(run) if run.status != "passed" else None, "run": number,
            "attempts": [{"attempt": n, "name": r.name, "status": r.status, "message": _reason(r),
                          "run": position + k} for k, (n, r) in enumerate(retried)],
        })
        position += len(retried)
    failed = sum(r.status != "passed" for r in runs)
    flaky = sum("flaky" in c["badges"] for c in cases)
    healed = sum("healed" in c["badges"] for c in cases)
    seconds = sum(c["duration_ms"] for c in cases) / 1000
    beside = len(files.beside)
    return {
        "kind": "suite", "id": name, "title": name, "status": "failed" if failed else "passed",
        "subtitle": " · ".join(p for p in (f"suite of {len(cases)} test(s)",
                                           f"started {runs[0].timestamp}" if runs else "") if p),
        "facts": [[str(len(cases)), "tests"], [str(len(cases) - failed), "passed"], [str(failed), "failed"],
                  [str(flaky), "flaky"], [str(healed), "healed"], [f"{seconds:.1f} s", "duration"]],
        "note": (f"{beside} file(s) past this report's size bounds are beside it in {files.folder.name}/ and "
                 "linked from here: keep the folder with the report.") if beside else "",
        "cases": cases, "runs": [views[i] for i in range(len(every))], "files": files.table,
    }


def write_suite_report(path: Path, name: str, runs: Sequence[QaRun],
                       earlier: Callable[[QaRun], Sequence[Sequence[QaRun]]], fetch: Fetch,
                       verify: Callable[[str], VerifyReport | None], links: str | None) -> Path:
    """The suite's report at ``path``; files past the bounds in ``<stem>_files/`` beside it."""
    files = SuiteFiles(path.with_name(path.stem + "_files"), fetch)
    document = suite_document(name, runs, earlier, files, verify, links)
    atomic_write(path, offline_html(document).encode("utf-8"))
    return path


__all__ = ["FILE_REF", "FILMS_MAX", "IMAGES_MAX", "SuiteFiles", "suite_document", "write_suite_report"]
