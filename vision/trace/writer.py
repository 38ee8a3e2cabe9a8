"""Writing a trace: TraceWriter, and the one thread that writes every trace of the process.

Writing is off the run's hot path: ``record_step`` checks and redacts the step, then hands the PNG
encodes, hashes and fsynced writes to the one trace-writing thread (a bounded queue: a run that
outpaces the disk waits rather than piling up frames). Steps are written in the order recorded,
each exactly as before; ``finish`` and ``hold`` wait for the writes before them, and a reader in
this process (``TraceStore``) waits for an open trace's pending writes, so nobody here sees a
trace behind what was recorded. A crash may lose the steps still queued, never make a trace that
does not verify: the files on disk are only ever replaced whole, in the same order as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from desktop.errors import StorageFull, disk_full
from desktop.frame import Frame
from vision.trace.files import OPEN, ChainFile, atomic_write
from vision.trace.records import (
    ErrorInfo,
    ImageKind,
    RunStatus,
    StepRecord,
    TraceMeta,
    VideoSeal,
    canonical_json,
    meta_seal,
    record_hash,
    redact,
)

log = logging.getLogger("glassdesk.trace")

VIDEO_SEAL_FILE = "video.json"
SEAL_FILE = "seal.json"  # a finished trace's last link: meta.json's SHA-256 (records.meta_seal)
# Space held from a trace's start to its end, freed just before the final meta.json and seal are
# written: a run whose disk filled up still ends, said so and sealed, instead of staying "running".
# A dot-file: no part of the evidence (records.unlisted_files).
RESERVE_FILE = ".reserve"
RESERVE_BYTES = 64 * 1024


def _plain(value: Any) -> Any:
    """The loop's objects (pydantic models, provider dataclasses) as JSON-able data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.metadata.get("trace", True)}  # a field marked trace=False (a frame) stays out
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _png_bytes(image: Frame | bytes) -> bytes:
    return image.png if isinstance(image, Frame) else bytes(image)


def _now() -> datetime:
    return datetime.now(UTC)


def write_meta(directory: Path, meta: TraceMeta, *, seal: bool = False) -> None:
    """meta.json, and for a finished trace its seal after it (seal.json: the chain's last link).
    A crash between the two leaves a finished trace unsealed, which verify reports as such."""
    data = json.dumps(meta.model_dump(mode="json"), indent=2).encode()
    if seal:
        (directory / RESERVE_FILE).unlink(missing_ok=True)  # the room the last writes need, on a full disk
    atomic_write(directory / "meta.json", data)
    if seal:
        atomic_write(directory / SEAL_FILE, canonical_json(meta_seal(data, meta.video_hash or meta.head_hash)))


# ------------------------------------------------------------------------------------------ writing

# Steps recorded but not yet on disk, at most: each holds its two frames (8 MB each at 1080p),
# so a run that outpaces the disk waits here rather than filling memory.
WRITE_QUEUE = 8


class _WriteThread:
    """The one thread that writes traces: jobs run in the order submitted, across all traces."""

    def __init__(self):
        self._queue: queue.Queue[Callable[[], None]] = queue.Queue(maxsize=WRITE_QUEUE)
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="glassdesk-trace-writer", daemon=True)
                self._thread.start()
        self._queue.put(job)  # blocks while WRITE_QUEUE steps wait

    def _run(self) -> None:
        while True:
            self._queue.get()()  # a job reports its own failure to its writer


_write_thread = _WriteThread()


def _pending_written(directory: Path) -> None:
    """A trace this process is writing (vision.trace.files.OPEN): its queued steps on disk first."""
    writer = OPEN.writer(directory)
    if writer is not None:
        writer.flush()



class TraceWriter:
    """Appends the steps of one run to its trace. One writer per trace; thread-safe.

    Get one from ``TraceStore.create``. Call ``record_step`` once per step and ``finish`` once.
    """

    def __init__(self, directory: Path, meta: TraceMeta, secrets: Iterable[str] = ()):
        self.dir = directory
        self._meta = meta
        self._secrets: set[str] = {s for s in secrets if s}
        self._steps = ChainFile(directory / "steps.jsonl", head=meta.head_hash)
        self._last_after: tuple[str, str] | None = None  # (file name, sha256) of the last after PNG
        self._lock = threading.Lock()  # callers, one at a time; the write thread never takes it
        self._recorded = meta.steps  # steps handed to the write thread; meta.steps: those on disk
        self._pending = 0  # steps handed over and not yet written (or failed)
        self._written = threading.Condition()
        self._failure: BaseException | None = None  # a write that failed: no step is written after it

    @property
    def trace_id(self) -> str:
        return self._meta.trace_id

    @property
    def meta(self) -> TraceMeta:
        self.flush()
        return self._meta.model_copy(deep=True)

    def flush(self) -> None:
        """Wait until every step recorded so far is on disk (or its write has failed)."""
        with self._written:
            self._written.wait_for(lambda: self._pending == 0)

    def check_written(self) -> None:
        """Raise what stopped a recorded step from reaching the disk (StorageFull for a full disk),
        once every step recorded so far has been tried: a run must not claim what its trace lost."""
        self.flush()
        self._raise_failure()

    def _raise_failure(self) -> None:
        if self._failure is None:
            return
        if disk_full(self._failure):
            raise StorageFull.of(self.dir.parent) from self._failure
        raise OSError(f"trace {self.trace_id}: a step could not be written: {self._failure}") from self._failure

    def add_secrets(self, *values: str) -> None:
        """More strings that must never be written (e.g. a secret resolved mid-run)."""
        with self._lock:
            self._secrets.update(v for v in values if v)

    def _update_meta(self, **changes: Any) -> None:
        self._meta = TraceMeta.model_validate(self._meta.model_dump() | changes)
        self._write_meta()

    def _write_meta(self) -> None:
        write_meta(self.dir, self._meta)

    def _store_image(self, index: int, which: ImageKind, image: Frame | bytes | None) -> tuple[str | None, str | None]:
        if image is None:
            return None, None
        png = _png_bytes(image)
        digest = hashlib.sha256(png).hexdigest()
        # The loop captures once: a step's "before" is usually the previous step's "after".
        # Point at that file instead of storing the same observation twice.
        if which == "before" and self._last_after and self._last_after[1] == digest:
            return self._last_after
        name = f"step-{index:04d}-{which}.png"
        atomic_write(self.dir / name, png)
        return name, digest

    def record_step(
        self,
        *,
        before: Frame | bytes | None = None,
        after: Frame | bytes | None = None,
        started_at: datetime | None = None,
        finished_at: datetime | None = None,
        text: str = "",
        reasoning: str = "",
        tool_calls: Iterable[Any] = (),
        actions: Iterable[Any] = (),
        argv: Iterable[Iterable[str]] = (),
        results: Iterable[Any] = (),
        error: ErrorInfo | dict[str, str] | None = None,
        model_ms: int | None = None,
        exec_ms: int | None = None,
        settle_ms: int | None = None,
        settled_by: Iterable[str] = (),
        usage: Any = None,
        url: str | None = None,
        model_image_size: tuple[int, int] | None = None,
        by: str = "agent",
        elements: Iterable[Any] = (),
        natives: Iterable[Any] = (),
        spots: Iterable[Any] = (),
        appeared: Iterable[str] = (),
        appeared_on: str | None = None,
        no_effect: bool = False,
        checks: Iterable[dict] = (),
        marks: Iterable[Any] | None = None,
    ) -> None:
        """Record one step; the write thread stores its screenshots, then its record, then the
        updated meta (``flush`` waits for it). Raises at once on a step that does not validate,
        and OSError once a previous step's write has failed.

        Accepts the loop's own objects: ``tool_calls`` as provider ToolCalls or dicts with
        id/name/raw, ``actions`` as Action models or dicts (display pixels), ``results`` as
        CallResults or dicts, ``usage`` as a Usage or dict. Pass ``started_at``
        (when the step's observation was taken); both times default to now.
        """
        with self._lock:
            if self._meta.status != "running":
                raise RuntimeError(f"trace {self.trace_id} is finished ({self._meta.status})")
            self._raise_failure()
            index = self._recorded + 1
            # Validate and redact everything here, in the caller: a bad step raises at once and
            # nothing of it reaches the disk.
            # A spot's template image is glassdesk's own crop of the screen (vision.perception.spot,
            # which leaves it out where a secret shows), not text a model or page wrote: it is kept,
            # where redact would omit it as image data; the spot's text is redacted as any text.
            spot_list = [dict(s) if isinstance(s, dict) else None for s in _plain(list(spots))]
            images = [s.pop("image", None) if s is not None else None for s in spot_list]
            content = redact(_plain({
                "text": text, "reasoning": reasoning, "tool_calls": list(tool_calls), "actions": list(actions),
                "argv": [list(a) for a in argv], "results": list(results), "error": error, "url": url,
                "elements": list(elements), "natives": list(natives), "spots": spot_list, "appeared": list(appeared),
                "checks": list(checks), "marks": None if marks is None else list(marks),
            }), self._secrets)
            for spot, image in zip(content["spots"], images, strict=True):
                if spot is not None and isinstance(image, str):
                    spot["image"] = image
            finished = finished_at or _now()
            record = StepRecord(
                **content, index=index, started_at=started_at or finished, finished_at=finished,
                model_ms=model_ms, exec_ms=exec_ms, settle_ms=settle_ms, settled_by=list(settled_by),
                usage=_plain(usage) or {},
                model_image_size=model_image_size, by=by, appeared_on=appeared_on if content["appeared"] else None,
                no_effect=no_effect,
            )
            self._recorded = index
            with self._written:
                self._pending += 1
            # Under the lock: steps reach the (FIFO) write thread in the order they were recorded.
            _write_thread.submit(lambda: self._write_step(record, before, after))

    def _write_step(self, record: StepRecord, before: Frame | bytes | None, after: Frame | bytes | None) -> None:
        """On the write thread: the step's screenshots, then its record, then the updated meta,
        exactly as they were written in the caller before. After a failed write, none is."""
        try:
            if self._failure is None:
                self._store_step(record, before, after)
        except BaseException as exc:
            self._failure = exc
            log.error("trace %s: step %d could not be written: %s", self.trace_id, record.index, exc)
        finally:
            with self._written:
                self._pending -= 1
                self._written.notify_all()

    def _store_step(self, record: StepRecord, before: Frame | bytes | None, after: Frame | bytes | None) -> None:
        index = record.index
        before_png, before_sha = self._store_image(index, "before", before)
        after_png, after_sha = self._store_image(index, "after", after)
        stored = self._steps.append(record.model_dump(mode="json") | {
            "before_png": before_png, "before_sha256": before_sha, "after_png": after_png, "after_sha256": after_sha,
        })
        if after_png and after_sha:  # stored together: a name always has its digest
            self._last_after = (after_png, after_sha)
        self._update_meta(steps=index, head_hash=stored["hash"], usage=self._meta.usage.plus(record.usage))

    def seal_video(self, *, file: str, fmt: str, chapters_file: str, captions_file: str, duration_s: float,
                   chapters: int, clicks: int, notes: Iterable[str] = ()) -> VideoSeal:
        """Chain the run's video receipt after its last step: the files (already in the trace's
        directory) hashed into ``video.json``, whose hash meta.json keeps. Call once, after the
        last step and before ``finish``."""
        with self._lock:
            if self._meta.status not in ("running", "needs_confirmation"):
                raise RuntimeError(f"trace {self.trace_id} is finished ({self._meta.status})")
            if self._meta.video_hash is not None:
                raise RuntimeError(f"trace {self.trace_id} already has its video")
            self.flush()  # the seal follows the last step on disk
            self._raise_failure()

            def sha(name: str) -> str:
                digest = hashlib.sha256()
                with open(self.dir / name, "rb") as f:
                    while chunk := f.read(1 << 20):
                        digest.update(chunk)
                return digest.hexdigest()

            seal = VideoSeal(file=file, sha256=sha(file), format=fmt, chapters_file=chapters_file,
                             chapters_sha256=sha(chapters_file), captions_file=captions_file,
                             captions_sha256=sha(captions_file), duration_s=duration_s, chapters=chapters,
                             clicks=clicks, notes=redact(list(notes), self._secrets), sealed_at=_now(),
                             prev_hash=self._meta.head_hash)
            stored = seal.model_dump(mode="json")
            stored["hash"] = record_hash(stored)
            atomic_write(self.dir / VIDEO_SEAL_FILE, canonical_json(stored))
            self._update_meta(video_hash=stored["hash"])
            return VideoSeal.model_validate(stored)

    def hold(self, status: RunStatus) -> None:
        """Mark a run that is paused between calls (``needs_confirmation``), or ``running`` again,
        so a reader of the store sees why it is not moving."""
        with self._lock:
            if self._meta.finished_at is not None:
                raise RuntimeError(f"trace {self.trace_id} is already finished ({self._meta.status})")
            self.flush()  # after the steps before it, as a reader of meta.json expects
            self._raise_failure()
            self._update_meta(status=status)

    def finish(self, status: RunStatus, answer: str | None = None,
               error: ErrorInfo | dict[str, str] | None = None, *, verified: bool | None = None,
               checks: list[dict] | None = None) -> TraceMeta:
        """Close the trace with its final status (and its expectations as checked). Call once."""
        if status == "running":
            raise ValueError("finish needs a final status, not 'running'")
        with self._lock:
            if self._meta.finished_at is not None:
                raise RuntimeError(f"trace {self.trace_id} is already finished ({self._meta.status})")
            final = redact({"answer": answer, "error": _plain(error), "verified": verified, "checks": checks or []},
                           self._secrets)
            # The run's end waits for its steps: a finished trace is never missing one recorded
            # (one whose write failed is not in it, and the chain still verifies without it).
            self.flush()
            self._meta = TraceMeta.model_validate(self._meta.model_dump() | {
                "status": status, "finished_at": _now(), **final})
            write_meta(self.dir, self._meta, seal=True)
            OPEN.closed(self.dir)
            return self.meta
