"""QA runs on disk: the evidence of each verb call, hash-chained like a vision trace.

Layout under the data directory::

    qa/runs/<test_run_id>/meta.json        the run's head: verb, name, status, times, record count, chain head
    qa/runs/<test_run_id>/manifest.jsonl   one record per line, each chained to the one before
    qa/runs/<test_run_id>/<artifact>       screenshots, diff images, videos: each named in one record
    qa/runs/<test_run_id>/owner.json       while the run is unfinished: the process writing it

Each record carries the hash of the previous one and its own hash over its canonical JSON
(``vision.trace.records.canonical_json``); every file written is named in an ``artifact`` record with its
SHA-256 and the UTC time it was taken. meta.json is itself derived from the chain (canonical JSON
of the first and last records' facts), so ``verify`` recomputes it and compares bytes: an edited
byte in any record, any artifact or meta.json, a removed or an extra file, is a problem it names.

A run a dead server left ``running`` is closed when the next server starts (``close_interrupted``):
an ``interrupted`` record is appended to its chain, so the run still verifies.

The run record (``QaRun``) and its JUnit XML are computed from the manifest (its report is the run
viewer's: vision.evidence.runview).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from desktop.errors import InvalidRequest
from desktop.x11.procs import ProcessId
from desktop.x11.receipt import remove_unfinished
from vision.errors import QaRunCorruptError, QaRunNotFoundError
from vision.evidence.report import heal_line, xml_text
from vision.models.qa import Artifact, Artifacts, QaRun, StepResult, Summary, TestCase, VerifyReport
from vision.trace.files import OPEN, OWNER_FILE, ChainFile, atomic_write, close_orphans, new_trace_id, write_owner
from vision.trace.records import _is_sensitive_key, canonical_json, redact, walk_chain

log = logging.getLogger("glassdesk.qa")

META_FILE = "meta.json"
MANIFEST = "manifest.jsonl"
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
# An artifact's file name: one plain component, never hidden, never '..'.
_ARTIFACT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,159}")
INTERRUPTED_MESSAGE = ("the server stopped before this run finished (a crash, a kill or a power cut); the evidence "
                       "ends at its last record")

#: (test_run_id, artifact name) -> URL of that file
ArtifactUrl = Callable[[str, str], str]


class QaRunNotFound(LookupError):
    pass


class BadName(ValueError):
    pass


class QaRunCorrupt(ValueError):
    """A run's manifest parses but its records do not make a run (an edited field, a wrong type):
    verify names what is wrong."""


# The structure of a run: ids, artifact names, hashes, paths, counts and states. A secret is never
# looked for in these (a secret "20" would otherwise eat the year out of the run id and break every
# link and file name); every other string - request values, step details, reasons, console lines,
# what a probe read - is free text, and redacted.
STRUCTURAL_KEYS = frozenset({
    "kind", "index", "ts", "prev_hash", "hash", "test_run_id", "trace_id", "session_id", "verb", "name",
    "sha256", "baseline_sha256", "current_sha256", "path", "report_url", "size", "type", "status", "step", "shot",
    "which", "before", "after", "screenshots", "baseline_id", "version", "baseline_version", "action", "attempts",
    "duration_ms",
})


def redact_free_text(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` with the secrets replaced in its free text, its structure (STRUCTURAL_KEYS) left
    exactly as it was; credential-named keys dropped, as ``vision.trace.records.redact`` does (pure)."""
    if isinstance(value, dict):
        return {key: item if key in STRUCTURAL_KEYS else redact_free_text(item, secrets)
                for key, item in value.items() if not _is_sensitive_key(key)}
    if isinstance(value, (list, tuple)):
        return [redact_free_text(item, secrets) for item in value]
    return redact(value, secrets)


def safe_stem(stem: str, limit: int = 100) -> str:
    """A file name's stem every artifact check accepts (pure): runs of other characters become '-',
    runs of dots one dot (no '..' anywhere), starting and ending with a letter or digit."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", stem)
    base = re.sub(r"\.{2,}", ".", base).strip("-._")[:limit].strip("-._")
    return base or "file"


# A template image of the request (a step's `image` target, a recorded `image`), stored as a file of
# the run: redaction omits image data from every record, so the request keeps this reference instead.
TEMPLATE_REF = "artifact:"
_PNG_B64 = "iVBORw0KGgo"


def _map_images(value: Any, change: Callable[[str], str], key: str | None = None) -> Any:
    """``value`` with ``change`` applied to every string under an ``image`` key, at any depth (pure)."""
    if isinstance(value, dict):
        return {k: _map_images(v, change, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_images(v, change) for v in value]
    return change(value) if key == "image" and isinstance(value, str) else value


def split_templates(request: Any) -> tuple[Any, dict[str, bytes]]:
    """``request`` with each base64 PNG under an ``image`` key replaced by ``artifact:<name>``, and
    those files by name (``template-<sha256 prefix>.png``: one file for a template used twice) (pure)."""
    import base64
    import binascii

    files: dict[str, bytes] = {}

    def to_file(value: str) -> str:
        if not value.startswith(_PNG_B64):
            return value
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return value
        name = f"template-{_sha(data)[:20]}.png"
        files[name] = data
        return TEMPLATE_REF + name

    return _map_images(request, to_file), files


def join_templates(records: Sequence[dict], read: Callable[[str], bytes]) -> list[dict]:
    """The records with the started request's template references back as base64 PNGs, each read
    (``read``: an artifact's bytes by name) only if the manifest lists it with that SHA-256; a
    missing or altered file stays a reference, which the replay then refuses by name."""
    import base64

    listed = {r.get("name"): r.get("sha256") for r in records if r.get("kind") == "artifact"}

    def from_file(value: str) -> str:
        if not value.startswith(TEMPLATE_REF):
            return value
        name = value[len(TEMPLATE_REF):]
        try:
            data = read(check_artifact_name(name))
        except (OSError, BadName, QaRunNotFound):
            return value
        return base64.b64encode(data).decode() if listed.get(name) == _sha(data) else value

    return [_map_images(r, from_file) if r.get("kind") == "started" else r for r in records]


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise BadName(f"invalid test_run_id {run_id!r}: use letters, digits, '-' and '_' only")
    return run_id


def check_artifact_name(name: str) -> str:
    if not isinstance(name, str) or not _ARTIFACT.fullmatch(name) or ".." in name:
        raise BadName(f"invalid artifact name {name!r}: take a name from the run's artifacts")
    return name


def api_artifact_url(run_id: str, name: str) -> str:
    return f"/api/v1/qa/runs/{quote(run_id)}/artifacts/{quote(name)}"


def _now() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------------ writing

class RunWriter:
    """Appends the records and files of one run. Thread-safe; get one from ``QaRunStore.create``."""

    def __init__(self, store: QaRunStore, directory: Path, run_id: str, secrets: Iterable[str] = ()):
        self.store = store
        self.dir = directory
        self.run_id = run_id
        self._secrets = {s for s in secrets if s}
        self._manifest = ChainFile(directory / MANIFEST)
        self._records: list[dict] = []
        self._names: set[str] = set()
        self._lock = threading.Lock()
        self.finished = False

    @property
    def head(self) -> str:
        return self._manifest.head

    def record(self, kind: str, **content: Any) -> dict:
        """Append one record (redacted, timestamped, chained); meta.json follows it."""
        with self._lock:
            if self.finished:
                raise RuntimeError(f"run {self.run_id} is finished")
            stored = redact_free_text({"kind": kind, **content}, self._secrets)
            stored.update(index=len(self._records) + 1, ts=rfc3339(_now()))
            self._records.append(self._manifest.append(stored))
            atomic_write(self.dir / META_FILE, canonical_json(derive_meta(self._records)))
            if kind == "finished":
                self.finished = True
            return stored

    def artifact(self, stem: str, data: bytes, *, kind: str = "screenshot", ext: str = "png",
                 **about: Any) -> Artifact:
        """Store a file of the run under a fresh name and record it with its SHA-256 and time."""
        with self._lock:
            base = safe_stem(stem)
            name, n = f"{base}.{ext}", 1
            while name in self._names:
                n += 1
                name = f"{base}-{n}.{ext}"
            self._names.add(name)
            atomic_write(self.dir / name, data)
        digest = _sha(data)
        self.record("artifact", name=name, sha256=digest, size=len(data), type=kind, **about)
        return Artifact(name=name, path=api_artifact_url(self.run_id, name), sha256=digest, kind=kind)

    def adopt(self, name: str, *, kind: str) -> Artifact:
        """Record a file something else wrote into the run's directory (a video) with its SHA-256."""
        check_artifact_name(name)
        digest = hashlib.sha256()
        with open(self.dir / name, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        with self._lock:
            self._names.add(name)
        self.record("artifact", name=name, sha256=digest.hexdigest(), size=(self.dir / name).stat().st_size, type=kind)
        return Artifact(name=name, path=api_artifact_url(self.run_id, name), sha256=digest.hexdigest(), kind=kind)

    def redacted(self, value: Any) -> Any:
        """``value`` as this run stores it: the caller's answer must not carry a secret the
        evidence hides (a probe's text, an assertion quoting a field, a console line)."""
        return redact_free_text(value, self._secrets)

    def finish(self, status: str, result: dict | None = None, reason: str | None = None) -> dict:
        """Close the run; the stored (redacted) ``finished`` record."""
        stored = self.record("finished", status=status, result=result, reason=reason)
        OPEN.closed(self.dir)
        return stored


def _artifact_problems(directory: Path, records: list[dict], problems: list[str]) -> int:
    """Adds to ``problems`` what is wrong with the run's files against the artifacts its records
    list (each one a name the run can serve, present, matching its SHA-256; no file unlisted);
    returns how many listed files were checked."""
    listed = {str(r.get("name")): str(r.get("sha256")) for r in records if r.get("kind") == "artifact"}
    files = 0
    for name, expected in listed.items():
        try:  # the check serving applies: every file listed must be one the run can serve
            check_artifact_name(name)
        except BadName:
            problems.append(f"artifact {name!r}: not a name a run's file may have")
            continue
        path = directory / name
        if not path.is_file():
            problems.append(f"artifact {name}: missing")
            continue
        files += 1
        if _sha(path.read_bytes()) != expected:
            problems.append(f"artifact {name}: does not match its SHA-256")
    for entry in directory.iterdir():
        if entry.name not in listed and entry.name not in (MANIFEST, META_FILE, OWNER_FILE) \
                and not entry.name.startswith("."):
            problems.append(f"file {entry.name}: not in the manifest")
    return files


def derive_meta(records: Sequence[dict]) -> dict:
    """meta.json's content, a pure function of the chain (so verify can recompute it); QaRunCorrupt
    when the records do not have the fields it is made of."""
    try:
        return _derive_meta(records)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise QaRunCorrupt(f"the run's records do not make its head ({type(exc).__name__}: {exc})") from None


def _derive_meta(records: Sequence[dict]) -> dict:
    first = records[0]
    last = records[-1]
    done = last if last.get("kind") in ("finished", "interrupted") else None
    started = _parse_time(first["ts"])
    duration = round((_parse_time(done["ts"]) - started).total_seconds() * 1000) if done else None
    return {"test_run_id": first.get("test_run_id"), "verb": first.get("verb"), "name": first.get("name"),
            "session_id": first.get("session_id"), "timestamp": first["ts"],
            "status": (done.get("status") or "interrupted") if done else "running",
            "finished_at": done["ts"] if done else None, "duration_ms": duration,
            "records": len(records), "head_hash": last["hash"]}


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# ------------------------------------------------------------------------------------ the store


class QaRunStore:
    """Every QA run under one data directory; reads only the disk, so it works after a restart."""

    def __init__(self, data_dir: str | Path):
        self.root = Path(data_dir)
        self.runs_dir = self.root / "qa" / "runs"

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / check_run_id(run_id)

    def create(self, verb: str, name: str, *, session_id: str | None, request: dict,
               secrets: Iterable[str] = ()) -> RunWriter:
        started = _now()
        run_id = new_trace_id(started)
        # Runs hold screenshots and typed text: the server's user only (as traces: vision.trace).
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)  # the data dir: made, never re-moded
        for directory in (self.runs_dir.parent, self.runs_dir):
            directory.mkdir(mode=0o700, exist_ok=True)
            directory.chmod(0o700)
        directory = self.run_dir(run_id)
        directory.mkdir()
        writer = RunWriter(self, directory, run_id, secrets)
        OPEN.opened(directory, writer)  # before its owner file: this process never sweeps it
        write_owner(directory)
        # Template images leave the request as files of the run (each written whole, atomically,
        # before the record that names them), so an export gives them back (records_with_templates).
        request, templates = split_templates(request)
        for template, data in templates.items():
            atomic_write(directory / template, data)
        writer.record("started", test_run_id=run_id, verb=verb, name=name, session_id=session_id, request=request)
        for template in templates:
            writer.adopt(template, kind="template")
        return writer

    def _existing(self, run_id: str) -> Path:
        directory = self.run_dir(run_id)
        if not (directory / MANIFEST).is_file():
            raise QaRunNotFound(f"no QA run {run_id!r}")
        return directory

    def records(self, run_id: str) -> list[dict]:
        """The manifest's records (lines that do not parse are left out: verify names them)."""
        data = (self._existing(run_id) / MANIFEST).read_bytes()
        records = []
        for line in data.split(b"\n"):
            if line.strip():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    records.append(record)
        return records

    def records_with_templates(self, run_id: str) -> list[dict]:
        """The records, the request's template images read back from the run's files: what an
        export of the run writes, so a re-exported suite replays with its templates."""
        directory = self._existing(run_id)
        return join_templates(self.records(run_id), lambda name: (directory / name).read_bytes())

    def file(self, run_id: str, name: str) -> Path:
        """An artifact's file, by a name the manifest lists (and only such a name)."""
        check_artifact_name(name)
        listed = any(r.get("kind") == "artifact" and r.get("name") == name for r in self.records(run_id))
        path = self.run_dir(run_id) / name
        if not listed or not path.is_file():
            raise QaRunNotFound(f"run {run_id!r} has no artifact {name!r}; its record lists them")
        return path

    def load(self, run_id: str) -> QaRun:
        return build_run(self.records(run_id))

    def list_ids(self) -> list[str]:
        if not self.runs_dir.is_dir():
            return []
        return sorted((e.name for e in self.runs_dir.iterdir() if _RUN_ID.fullmatch(e.name)), reverse=True)

    def verify(self, run_id: str) -> VerifyReport:
        """Every problem with the run's evidence: the chain, each artifact's SHA-256, meta.json,
        files the manifest does not name."""
        directory = self._existing(run_id)
        problems: list[str] = []
        data = (directory / MANIFEST).read_bytes()
        *lines, tail = data.split(b"\n")
        if tail.strip():
            problems.append("manifest.jsonl ends in an unterminated line")
        records: list[dict] = []
        for link in walk_chain(lines):
            problems += [f"record {link.number}: {problem}" for problem in link.problems]
            if link.record is not None:
                records.append(link.record)
        files = _artifact_problems(directory, records, problems)
        meta_path = directory / META_FILE
        if records:
            try:
                meta = canonical_json(derive_meta(records))
            except QaRunCorrupt as exc:
                meta = None
                problems.append(f"manifest.jsonl: {exc}")
            if not meta_path.is_file():
                problems.append("meta.json: missing")
            elif meta is not None and meta_path.read_bytes() != meta:
                problems.append("meta.json: does not match the manifest (edited, or the manifest's tail was cut)")
        else:
            problems.append("manifest.jsonl: no records")
        return VerifyReport(ok=not problems, problems=problems, records_checked=len(records), files_checked=files)

    def close_interrupted(self, alive: Callable[[ProcessId], bool] | None = None) -> list[str]:
        """Close as ``interrupted`` every unfinished run whose writer is gone (vision.trace.files
        close_orphans, as for traces); returns their ids. Runs this process is writing are left out."""

        def unfinished():
            for run_id in self.list_ids():
                directory = self.run_dir(run_id)
                try:
                    records = self.records(run_id)
                except (QaRunNotFound, OSError):
                    continue
                if not records or records[-1].get("kind") in ("finished", "interrupted"):
                    continue
                if directory in OPEN:
                    continue
                yield run_id, directory, lambda directory=directory, records=records: self._interrupt(directory,
                                                                                                        records)

        return close_orphans(unfinished(), "QA run", alive)

    def _interrupt(self, directory: Path, records: list[dict]) -> None:
        data = (directory / MANIFEST).read_bytes()
        if not data.endswith(b"\n"):  # a torn tail cannot be chained to: keep the whole lines
            data = data[: data.rfind(b"\n") + 1]
        record = ChainFile(directory / MANIFEST, data, head=records[-1]["hash"]).append(
            {"kind": "interrupted", "status": "error", "reason": INTERRUPTED_MESSAGE, "index": len(records) + 1,
             "ts": rfc3339(_now())})
        atomic_write(directory / META_FILE, canonical_json(derive_meta([*records, record])))
        # A film cut short with the run was never adopted into its chain: its pieces go, as a trace's do.
        remove_unfinished(directory, keep={r["name"] for r in records if r.get("kind") == "artifact"})
        (directory / OWNER_FILE).unlink(missing_ok=True)


# ------------------------------------------------------------------------------------ reading a run


@contextmanager
def reading_run(test_run_id: str) -> Iterator[None]:
    """The run store's own errors as typed ones: a bad id, no such run, a damaged one."""
    try:
        yield
    except BadName as exc:
        raise InvalidRequest(str(exc)) from None
    except QaRunNotFound as exc:
        raise QaRunNotFoundError(str(exc)) from None
    except QaRunCorrupt as exc:
        raise QaRunCorruptError(f"QA run {test_run_id}: {exc}; verifying the run says what is damaged") from None


@contextmanager
def corrupt_if_malformed() -> Iterator[None]:
    """A run that builds but whose free-form parts (the verb's answer, a step's detail) have the
    wrong shape cannot be rendered: damaged evidence, not a fault of the server."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise QaRunCorrupt(f"its records cannot be rendered ({type(exc).__name__}: {str(exc)[:300]})") from None


# ------------------------------------------------------------------------------------ the record


def build_run(records: Sequence[dict]) -> QaRun:
    """The run as the API shows it, from its manifest (pure); QaRunCorrupt when its records do not
    make one (an edited field: verify says which)."""
    if not records:
        raise QaRunCorrupt("the run's manifest has no readable record")
    try:
        return _build_run(records)
    except QaRunCorrupt:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:  # pydantic's ValidationError too
        raise QaRunCorrupt(f"the run's records do not make a run ({type(exc).__name__}: {str(exc)[:300]})") from None


def _build_run(records: Sequence[dict]) -> QaRun:
    meta = derive_meta(records)
    artifacts = Artifacts()
    cases: list[TestCase] = []
    run_id = str(meta["test_run_id"])
    result = None
    for record in records:
        kind = record.get("kind")
        if kind == "artifact":
            artifact = Artifact(name=record["name"], path=api_artifact_url(run_id, record["name"]),
                                sha256=record["sha256"], kind=record.get("type", "screenshot"))
            bucket = {"screenshot": artifacts.screenshots, "diff": artifacts.screenshots,
                      "video": artifacts.videos}.get(artifact.kind, artifacts.other)
            bucket.append(artifact)
        elif kind == "trace":
            artifacts.traces.append({"trace_id": record.get("trace_id"), "path": record.get("path"),
                                     "step": record.get("step")})
        elif kind == "case":
            cases.append(TestCase(name=record.get("name") or meta["verb"], status=record.get("status", "error"),
                                  duration_ms=record.get("duration_ms") or 0,
                                  screenshots=record.get("screenshots") or [],
                                  console_logs=record.get("console_logs") or [],
                                  failure_reason=record.get("failure_reason"),
                                  steps=[StepResult.model_validate(s) for s in record.get("steps") or []]))
        elif kind == "finished":
            result = record.get("result")
    status = meta["status"]
    if status in ("running", "interrupted") or (status == "error" and not cases):
        # A run cut short has its one case, unfinished: an error with the reason.
        reason = next((r.get("reason") for r in reversed(records) if r.get("kind") in ("finished", "interrupted")),
                      None) or ("still running" if status == "running" else INTERRUPTED_MESSAGE)
        if not cases and status != "running":
            cases.append(TestCase(name=meta["name"] or meta["verb"], status="error",
                                  duration_ms=meta["duration_ms"] or 0, failure_reason=reason))
    summary = Summary(total=len(cases))
    for case in cases:
        setattr(summary, case.status, getattr(summary, case.status) + 1)
    return QaRun(test_run_id=run_id, verb=meta["verb"], name=meta["name"] or meta["verb"],
                 session_id=meta["session_id"], timestamp=meta["timestamp"], duration_ms=meta["duration_ms"],
                 status=status, test_cases=cases, summary=summary, artifacts=artifacts, result=result)


# ------------------------------------------------------------------------------------ JUnit


# A test's last run -> its failed attempts before it (glassdesk qa --retries), each attempt the
# runs it made (before_each, the test, after_each), in order.
Earlier = Callable[[QaRun], Sequence[Sequence[QaRun]]]


def _none_earlier(run: QaRun) -> Sequence[Sequence[QaRun]]:
    return ()


def _reason_line(run: QaRun) -> str:
    return next((c.failure_reason for c in run.test_cases if c.failure_reason), run.status)[:300]


def render_junit(runs: Sequence[QaRun], suite: str = "glassdesk.qa",
                 artifact_url: ArtifactUrl = api_artifact_url, earlier: Earlier = _none_earlier) -> str:
    """JUnit XML: one testcase per verb call or flow. A failure carries its reason; the paths of
    its screenshots go in system-out (pure). A test run again after failing (``earlier``: the
    runs of its failed attempts) is one testcase with its last attempt's verdict, a ``flaky``
    property when that passed, and every attempt in system-out, as Playwright's JUnit reporter
    does."""
    cases: list[ET.Element] = []
    counts = {"failures": 0, "errors": 0, "skipped": 0}
    total_ms = 0
    for run in runs:
        for case in run.test_cases or [TestCase(name=run.name, status="error", duration_ms=run.duration_ms or 0,
                                                failure_reason="the run recorded no result")]:
            total_ms += case.duration_ms
            element = ET.Element("testcase", classname=xml_text(f"{suite}.{run.verb}"), name=xml_text(case.name),
                                 time=f"{case.duration_ms / 1000:.3f}")
            reason = case.failure_reason or case.status
            if case.status == "failed":
                counts["failures"] += 1
                failure = ET.SubElement(element, "failure", message=xml_text(reason[:1000]), type="failure")
                failure.text = xml_text(reason)
            elif case.status == "error":
                counts["errors"] += 1
                error = ET.SubElement(element, "error", message=xml_text(reason[:1000]), type="error")
                error.text = xml_text(reason)
            elif case.status == "skipped":
                counts["skipped"] += 1
                ET.SubElement(element, "skipped", message=xml_text(reason[:1000]))
            lines = [f"test_run_id: {run.test_run_id}"]
            lines += [f"screenshot: {artifact_url(run.test_run_id, name)}" for name in case.screenshots]
            for step in case.steps:  # each heal, with its images
                healed = step.detail.get("healed")
                if isinstance(healed, dict):
                    lines.append(heal_line(step.index, healed))
                    lines += [f"heal {key} (recorded box orange, healed box green): "
                              f"{artifact_url(run.test_run_id, healed[key])}"
                              for key in ("before", "after") if isinstance(healed.get(key), str)]
            retried = earlier(run)
            if retried:
                properties = ET.Element("properties")
                if case.status == "passed":
                    ET.SubElement(properties, "property", name="flaky", value="true")
                ET.SubElement(properties, "property", name="attempts", value=str(len(retried) + 1))
                element.insert(0, properties)
                lines += [f"attempt {n} ({r.name}): {r.status}: {_reason_line(r)} (test_run_id {r.test_run_id})"
                          for n, group in enumerate(retried, 1) for r in group]
            ET.SubElement(element, "system-out").text = xml_text("\n".join(lines))
            cases.append(element)
    attrs = {"tests": str(len(cases)), "failures": str(counts["failures"]), "errors": str(counts["errors"]),
             "skipped": str(counts["skipped"]), "time": f"{total_ms / 1000:.3f}"}
    root = ET.Element("testsuites", {"name": "glassdesk"} | attrs)
    stamp = runs[0].timestamp if runs else rfc3339(_now())
    element = ET.SubElement(root, "testsuite", {"name": xml_text(suite), "timestamp": xml_text(stamp[:19])} | attrs)
    element.extend(cases)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
