"""Reading traces, and starting them: TraceStore (create, list, load, image paths, verify,
close_interrupted), over one data directory.

A run whose server died (a crash, a kill) leaves its trace ``running``. When a server starts,
``TraceStore.close_interrupted`` closes such traces as ``interrupted``, ending at their last
record; it leaves alone any trace whose writer (``owner.json``) still runs, in this process or
another server on the same data directory. Only meta.json changes, so the trace still verifies.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from desktop.errors import StorageFull, disk_full
from desktop.x11.procs import ProcessId
from desktop.x11.receipt import remove_unfinished
from vision.trace.files import (
    _TRACE_ID,
    OPEN,
    OWNER_FILE,
    atomic_write,
    check_trace_id,
    close_orphans,
    new_trace_id,
    write_owner,
)
from vision.trace.records import (
    FINAL_STATUSES,
    GENESIS_HASH,
    ImageKind,
    StepRecord,
    Trace,
    TraceCorrupt,
    TraceMeta,
    TraceNotFound,
    VerifyResult,
    VideoSeal,
    meta_seal_problem,
    record_hash,
    redact,
    unlisted_files,
    unrecorded_step_images,
    walk_chain,
)
from vision.trace.writer import (
    RESERVE_BYTES,
    RESERVE_FILE,
    SEAL_FILE,
    VIDEO_SEAL_FILE,
    TraceWriter,
    _now,
    _pending_written,
    write_meta,
)

log = logging.getLogger("glassdesk.trace")

INTERRUPTED_MESSAGE = ("the server stopped before this run finished (a crash, a kill or a power cut); "
                       "the trace ends at its last recorded step")


def _split_lines(data: bytes) -> tuple[list[bytes], bool]:
    """Complete lines of a JSONL file, and whether an unterminated tail was dropped."""
    *lines, tail = data.split(b"\n")
    return [line for line in lines if line.strip()], bool(tail.strip())


# ------------------------------------------------------------------------------------------ reading


def default_data_dir() -> Path:
    return Path(os.environ.get("GLASSDESK_DATA_DIR") or "data")


class TraceStore:
    """All traces under one data directory. Reads only the disk, so it works after a restart."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None):
        self.root = Path(data_dir) if data_dir is not None else default_data_dir()
        self.traces_dir = self.root / "traces"

    def trace_dir(self, trace_id: str) -> Path:
        return self.traces_dir / check_trace_id(trace_id)

    def create(self, instruction: str, *, model: str, session_id: str | None = None,
               max_steps: int | None = None, secrets: Iterable[str] = (), expect: Iterable[dict] = ()) -> TraceWriter:
        """Start a trace. ``secrets`` are strings never to be written (typed passwords, keys);
        ``expect``: the run's expectations as given (vision.models.qa.Expectation's fields)."""
        started = _now()
        trace_id = new_trace_id(started)
        directory = self.trace_dir(trace_id)
        secrets = list(secrets)
        meta = TraceMeta(trace_id=trace_id, session_id=session_id, instruction=redact(instruction, secrets),
                         model=model, started_at=started, max_steps=max_steps, expect=redact(list(expect), secrets))
        writer = TraceWriter(directory, meta, secrets)
        try:
            self._private_traces_dir()
            directory.mkdir()
            # The room its end will need (writer.RESERVE_FILE), held first: no run starts that could not end.
            atomic_write(directory / RESERVE_FILE, b"\0" * RESERVE_BYTES)
            # Before meta.json: every unfinished trace names the process writing it.
            write_owner(directory)
            atomic_write(directory / "steps.jsonl", b"")
            writer._write_meta()  # last: a directory with meta.json is a complete trace
        except OSError as exc:
            shutil.rmtree(directory, ignore_errors=True)  # no run, and no empty directory either
            if disk_full(exc):
                raise StorageFull.of(self.traces_dir, RESERVE_BYTES) from exc
            raise
        OPEN.opened(directory, writer)
        return writer

    def check_room(self, needed: int) -> None:
        """StorageFull unless the disk under the traces has ``needed`` bytes free (a filmed run's
        check before it starts)."""
        self._private_traces_dir()
        if shutil.disk_usage(self.traces_dir).free < needed:
            raise StorageFull.of(self.traces_dir, needed)

    def close_interrupted(self, alive: Callable[[ProcessId], bool] | None = None) -> list[str]:
        """Close as ``interrupted`` every unfinished trace whose writer is gone (vision.trace.files
        close_orphans: another server's, still writing, are left alone); returns their ids. Traces
        this process is writing are left out."""

        def unfinished():
            for meta in self.list_traces():
                if meta.status in FINAL_STATUSES or meta.finished_at is not None:
                    continue
                directory = self.trace_dir(meta.trace_id)
                if directory in OPEN:
                    continue
                yield meta.trace_id, directory, lambda meta=meta: self._interrupt(meta)

        return close_orphans(unfinished(), "trace", alive)

    def _interrupt(self, meta: TraceMeta) -> None:
        """meta.json says ``interrupted``, finished at the last record; the chain is untouched."""
        directory = self.trace_dir(meta.trace_id)
        lines, _ = self._read_lines(meta.trace_id)
        changes: dict[str, Any] = {"status": "interrupted",
                                   "error": {"code": "interrupted", "message": INTERRUPTED_MESSAGE}}
        counted = min(meta.steps, len(lines))
        if len(lines) > meta.steps and self.verify(meta.trace_id).ok:
            # The server died between writing a step and meta.json: the step is whole and chained.
            extra = [StepRecord.model_validate_json(line) for line in lines[meta.steps:]]
            usage = meta.usage.model_copy()
            for step in extra:
                usage.add(step.usage)
            changes.update(steps=len(lines), head_hash=extra[-1].hash, usage=usage)
            counted = len(lines)
        last = StepRecord.model_validate_json(lines[counted - 1]).finished_at if counted else meta.started_at
        # A step cut short by the stop left its screenshots and no record: no part of the evidence.
        kept = [json.loads(line) for line in lines[:counted]]
        for name in unrecorded_step_images((entry.name for entry in os.scandir(directory)), kept):
            (directory / name).unlink(missing_ok=True)
        changes["finished_at"] = max(last, meta.started_at)
        closed = TraceMeta.model_validate(meta.model_dump() | changes)
        if closed.video_hash is None:  # a film cut short with its run: never sealed, never to be
            remove_unfinished(directory)
        write_meta(directory, closed, seal=True)
        (directory / OWNER_FILE).unlink(missing_ok=True)

    def _private_traces_dir(self) -> None:
        """Traces hold screenshots, typed text and page URLs: only the server's user may read them,
        not the desktop's (desktop/x11/user.py), whatever the umask. The data dir itself is made 0700
        when new; an existing one is the owner's choice, but the traces in it are not."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.traces_dir.mkdir(mode=0o700, exist_ok=True)
        self.traces_dir.chmod(0o700)

    def _existing_dir(self, trace_id: str) -> Path:
        directory = self.trace_dir(trace_id)
        _pending_written(directory)  # a trace this process is writing: its recorded steps first
        if not (directory / "meta.json").is_file():
            raise TraceNotFound(f"no trace {trace_id!r}")
        return directory

    def meta(self, trace_id: str) -> TraceMeta:
        return TraceMeta.model_validate_json((self._existing_dir(trace_id) / "meta.json").read_bytes())

    def list_traces(self, limit: int | None = None) -> list[TraceMeta]:
        """Every readable trace's meta, newest first."""
        metas = []
        if self.traces_dir.is_dir():
            for entry in self.traces_dir.iterdir():
                if not _TRACE_ID.fullmatch(entry.name):
                    continue
                try:
                    metas.append(self.meta(entry.name))
                except (TraceNotFound, ValueError, OSError):
                    continue  # half-created or foreign directory: not a trace
        metas.sort(key=lambda m: (m.started_at, m.trace_id), reverse=True)
        return metas[:limit] if limit is not None else metas

    def _read_lines(self, trace_id: str) -> tuple[list[bytes], bool]:
        path = self._existing_dir(trace_id) / "steps.jsonl"
        return _split_lines(path.read_bytes()) if path.exists() else ([], False)

    def load(self, trace_id: str) -> Trace:
        """Meta and steps. A torn last line is skipped (``partial_tail``); other bad lines raise."""
        meta = self.meta(trace_id)
        lines, partial = self._read_lines(trace_id)
        steps = []
        for number, line in enumerate(lines, 1):
            try:
                steps.append(StepRecord.model_validate_json(line))
            except ValueError as exc:
                raise TraceCorrupt(f"trace {trace_id}: line {number} of steps.jsonl is not a step record") from exc
        video = None
        seal = self._existing_dir(trace_id) / VIDEO_SEAL_FILE
        if seal.is_file():
            try:
                video = VideoSeal.model_validate_json(seal.read_bytes())
            except ValueError as exc:
                raise TraceCorrupt(f"trace {trace_id}: {VIDEO_SEAL_FILE} is not a video record") from exc
        return Trace(meta=meta, steps=steps, partial_tail=partial, video=video)

    def video_file(self, trace_id: str, name: str) -> Path:
        """A file of the trace's video receipt (the film, its chapters, its captions), named in
        its seal (TraceNotFound if the run was not filmed or the seal names no such file)."""
        seal = self.load(trace_id).video
        if seal is not None and name in (seal.file, seal.chapters_file, seal.captions_file):
            path = self.trace_dir(trace_id) / name
            if Path(name).name == name and path.is_file():
                return path
        raise TraceNotFound(f"trace {trace_id!r} has no video file {name!r}")

    def image_path(self, trace_id: str, index: int, which: ImageKind) -> Path:
        """The PNG file of step ``index``'s before/after screenshot (TraceNotFound if none)."""
        for step in self.load(trace_id).steps:
            if step.index == index:
                name = step.before_png if which == "before" else step.after_png
                # The name comes from a file on disk: accept a bare file name only.
                if name and Path(name).name == name and not name.startswith("."):
                    path = self.trace_dir(trace_id) / name
                    if path.is_file():
                        return path
                break
        raise TraceNotFound(f"trace {trace_id!r} has no {which} screenshot for step {index}")

    def verify(self, trace_id: str) -> VerifyResult:
        """Check the hash chain, every screenshot's SHA-256, the video's seal and, once the run is
        finished, meta.json against its seal and that no file lies in the trace that the chain
        does not name; report the first break."""
        directory = self._existing_dir(trace_id)
        meta = self.meta(trace_id)
        lines, partial = self._read_lines(trace_id)
        digests: dict[str, str | None] = {}

        def file_sha(name: str) -> str | None:
            if name not in digests:
                path = directory / name
                ok_name = Path(name).name == name and path.is_file()
                digests[name] = hashlib.sha256(path.read_bytes()).hexdigest() if ok_name else None
            return digests[name]

        def broken(index: int, reason: str, checked: int) -> VerifyResult:
            return VerifyResult(ok=False, steps_checked=checked, broken_index=index, reason=reason,
                                partial_tail=partial)

        prev = GENESIS_HASH
        for link in walk_chain(lines):
            number, record = link.number, link.record
            if link.problems or record is None:
                return broken(number, f"record {number}: {link.problems[0]}", number - 1)
            for which in ("before", "after"):
                name, expected = record.get(f"{which}_png"), record.get(f"{which}_sha256")
                if name is None and expected is None:
                    continue
                actual = file_sha(str(name))
                if actual is None:
                    return broken(number, f"{which} screenshot {name} is missing", number - 1)
                if actual != expected:
                    return broken(number, f"{which} screenshot {name} does not match its SHA-256", number - 1)
            prev = record["hash"]

        # The chain cannot see its own tail being cut off; meta.json remembers the head.
        # (More records than meta counts is a crash between the two writes, not tampering.)
        if len(lines) < meta.steps:
            return broken(len(lines) + 1, f"meta.json records {meta.steps} steps, steps.jsonl has {len(lines)}",
                          len(lines))
        if meta.steps and json.loads(lines[meta.steps - 1]).get("hash") != meta.head_hash:
            return broken(meta.steps, "chain head does not match meta.json", len(lines))
        if (problem := self._video_problem(directory, meta, prev)) is not None:
            return VerifyResult(ok=False, steps_checked=len(lines), reason=problem, partial_tail=partial)
        if meta.finished_at is not None and (problem := self._sealed_problem(directory, meta, digests)):
            return VerifyResult(ok=False, steps_checked=len(lines), reason=problem, partial_tail=partial)
        return VerifyResult(ok=True, steps_checked=len(lines), partial_tail=partial)

    @staticmethod
    def _sealed_problem(directory: Path, meta: TraceMeta, screenshots: dict[str, str | None]) -> str | None:
        """A finished trace: meta.json as sealed, and every file of it named by the chain (its steps'
        screenshots, the video's seal and files, the seal itself)."""
        seal = directory / SEAL_FILE
        problem = meta_seal_problem(seal.read_bytes() if seal.is_file() else None,
                                    (directory / "meta.json").read_bytes(), meta.video_hash or meta.head_hash)
        if problem is not None:
            return problem
        listed = {"meta.json", "steps.jsonl", SEAL_FILE, *screenshots}
        if meta.video_hash is not None:
            video = json.loads((directory / VIDEO_SEAL_FILE).read_bytes())  # checked above
            listed |= {VIDEO_SEAL_FILE, video["file"], video["chapters_file"], video["captions_file"]}
        extra = unlisted_files((entry.name for entry in os.scandir(directory)), listed)
        if extra:
            return f"{', '.join(extra)}: in the trace but named by nothing in its chain"
        return None

    @staticmethod
    def _video_problem(directory: Path, meta: TraceMeta, last_hash: str) -> str | None:
        """What is wrong with the video receipt's link of the chain, or None (none, or all well)."""
        path = directory / VIDEO_SEAL_FILE
        if meta.video_hash is None and not path.exists():
            return None
        if not path.is_file():
            return f"video: meta.json records a video, but {VIDEO_SEAL_FILE} is missing"
        try:
            seal = json.loads(path.read_bytes())
            assert isinstance(seal, dict)
        except (ValueError, AssertionError):
            return f"video: {VIDEO_SEAL_FILE} is not valid JSON"
        if seal.get("hash") != record_hash(seal):
            return f"video: {VIDEO_SEAL_FILE}'s content does not match its hash"
        if seal.get("hash") != meta.video_hash:
            return f"video: {VIDEO_SEAL_FILE} is not the one meta.json records"
        if seal.get("prev_hash") != last_hash:
            return "video: its record does not follow the last step's (prev_hash)"
        for key in ("file", "chapters_file", "captions_file"):
            name = seal.get(key)
            file = directory / str(name)
            if not isinstance(name, str) or Path(name).name != name or not file.is_file():
                return f"video: {name} is missing"
            digest = hashlib.sha256()
            with open(file, "rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
            if digest.hexdigest() != seal.get(key.replace("file", "sha256")):
                return f"video: {name} does not match its SHA-256"
        return None


def verify(trace_id: str, data_dir: str | os.PathLike[str] | None = None) -> VerifyResult:
    """``TraceStore(data_dir).verify(trace_id)``."""
    return TraceStore(data_dir).verify(trace_id)
