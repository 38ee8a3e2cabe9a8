"""The trace: the on-disk evidence of what a run saw and did.

Layout under the data directory (``GLASSDESK_DATA_DIR``, else ``./data``)::

    traces/<trace_id>/meta.json            the run: instruction, model, status, totals, chain head
    traces/<trace_id>/steps.jsonl          one StepRecord per line, append-only
    traces/<trace_id>/step-0001-before.png the observation the model was shown
    traces/<trace_id>/step-0001-after.png  the settled screen after the step's actions
    traces/<trace_id>/owner.json           while the run is unfinished: the process writing it

Every file is written atomically (temp file, fsync, rename), so a reader, or a process restarted
after a crash, sees either the old or the new version of a file, never a torn one. Each PNG's
SHA-256 is in its step record; each record carries the hash of the previous record and its own
hash over its canonical JSON, so editing, removing or reordering records breaks the chain, and
meta.json keeps the chain head so truncating the tail is caught too. ``verify`` checks all of it.

Writing is off the run's hot path: ``record_step`` checks and redacts the step, then hands the PNG
encodes, hashes and fsynced writes to the one trace-writing thread (a bounded queue: a run that
outpaces the disk waits rather than piling up frames). Steps are written in the order recorded,
each exactly as before; ``finish`` and ``hold`` wait for the writes before them, and a reader in
this process (``TraceStore``) waits for an open trace's pending writes, so nobody here sees a
trace behind what was recorded. A crash may lose the steps still queued, never make a trace that
does not verify: the files on disk are only ever replaced whole, in the same order as before.

A run whose server died (a crash, a kill) leaves its trace ``running``. When a server starts,
``TraceStore.close_interrupted`` closes such traces as ``interrupted``, ending at their last
record; it leaves alone any trace whose writer (``owner.json``) still runs, in this process or
another server on the same data directory. Only meta.json changes, so the trace still verifies.

Nothing secret is written: record content passes through ``redact`` (known secret strings, key-like
tokens, credential-named keys, inline base64 images) before it is hashed and stored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import queue
import re
import secrets as _random
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from desktop.x11.procs import ProcessId, alive_checker, this_process
from desktop.frame import Frame

log = logging.getLogger("glassdesk.trace")

GENESIS_HASH = "0" * 64
REDACTED = "[REDACTED]"
IMAGE_OMITTED = "[image omitted]"

# The one list of a run's statuses, for the loop, the trace, the API and the console (which reads
# FINAL_STATUSES from the server). "paused" is a run's state between calls, never written to a trace.
# "interrupted": the server stopped (crashed, was killed) before the run finished; set only by
# TraceStore.close_interrupted when the next server starts, never by the loop.
RunStatus = Literal["running", "paused", "needs_confirmation", "done", "failed", "max_steps", "budget_exceeded",
                    "cancelled", "interrupted"]
FINAL_STATUSES = ("done", "failed", "max_steps", "budget_exceeded", "cancelled", "interrupted")
INTERRUPTED_MESSAGE = ("the server stopped before this run finished (a crash, a kill or a power cut); "
                       "the trace ends at its last recorded step")
OWNER_FILE = "owner.json"
ImageKind = Literal["before", "after"]
# Naive datetimes from callers are taken as UTC, so every stored time compares with every other.
UtcDatetime = Annotated[datetime, AfterValidator(lambda d: d if d.tzinfo else d.replace(tzinfo=timezone.utc))]


# --------------------------------------------------------------------------------------------- models


class ErrorInfo(BaseModel):
    code: str
    message: str


class Usage(BaseModel):
    """Tokens used by one model call, a step, or a whole run."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: "Usage") -> None:
        for name in Usage.model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def plus(self, other: "Usage") -> "Usage":
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields})


class TraceMeta(BaseModel):
    trace_id: str
    session_id: str | None = None
    instruction: str
    model: str
    started_at: UtcDatetime
    finished_at: UtcDatetime | None = None
    status: RunStatus = "running"
    answer: str | None = None
    error: ErrorInfo | None = None
    usage: Usage = Field(default_factory=Usage)
    steps: int = 0
    max_steps: int | None = None
    # Hash of the last committed step record: lets verify notice a truncated steps.jsonl.
    head_hash: str = GENESIS_HASH

    @property
    def duration_s(self) -> float | None:
        return (self.finished_at - self.started_at).total_seconds() if self.finished_at else None


class ToolCallRecord(BaseModel):
    """One call as the model made it, in the model's own coordinate space."""

    id: str
    name: str
    raw: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None  # why the call was not understood / not executed


class CallResultRecord(BaseModel):
    """What running one call produced, as reported back to the model."""

    call_id: str
    ok: bool
    error: str | None = None
    output: str | None = None


class StepRecord(BaseModel):
    index: int  # 1-based, matches the step-NNNN file names
    started_at: UtcDatetime
    finished_at: UtcDatetime
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    actions: list[dict[str, Any]] = Field(default_factory=list)  # display pixels, in execution order
    argv: list[list[str]] = Field(default_factory=list)  # every xdotool command that ran, in order
    results: list[CallResultRecord] = Field(default_factory=list)
    error: ErrorInfo | None = None
    model_ms: int | None = None
    exec_ms: int | None = None
    settle_ms: int | None = None
    usage: Usage = Field(default_factory=Usage)
    url: str | None = None
    model_image_size: tuple[int, int] | None = None
    before_png: str | None = None
    before_sha256: str | None = None
    after_png: str | None = None
    after_sha256: str | None = None
    prev_hash: str = GENESIS_HASH
    hash: str = ""

    @property
    def failed(self) -> bool:
        return self.error is not None or any(not r.ok for r in self.results)


class Trace(BaseModel):
    meta: TraceMeta
    steps: list[StepRecord]
    # steps.jsonl ended in an unterminated line (a write cut short); it was ignored.
    partial_tail: bool = False


class VerifyResult(BaseModel):
    ok: bool
    steps_checked: int
    broken_index: int | None = None  # the first step index (1-based) that fails, if any
    reason: str | None = None
    partial_tail: bool = False


class InvalidTraceId(ValueError):
    pass


class TraceNotFound(LookupError):
    pass


class TraceCorrupt(ValueError):
    pass


# ---------------------------------------------------------------------------------------- redaction

_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=\s]*")
# Bare base64 of an image (Anthropic/OpenAI image blocks): PNG, JPEG, GIF, WebP magic numbers.
_BARE_IMAGE = re.compile(r"^(iVBORw0KGgo|/9j/|R0lGOD|UklGR)[A-Za-z0-9+/=\s]{64,}$")
# Credential shapes worth catching even when nobody told us the value.
# The one key-shaped pattern: an API key (even a masked one, as SDK errors print it) or a bearer token.
_KEY_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,}|Bearer\s+[A-Za-z0-9._~+/\-]{16,}=*)")
_SENSITIVE_KEYS = {"api_key", "apikey", "authorization", "proxy_authorization", "x_api_key", "password",
                   "passwd", "secret", "client_secret", "access_token", "refresh_token", "cookie",
                   "set_cookie"}


def _is_sensitive_key(key: object) -> bool:
    return isinstance(key, str) and key.lower().replace("-", "_") in _SENSITIVE_KEYS


def redact(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``obj`` fit to be written: secrets replaced, credential keys dropped, images omitted.

    Walks dicts, lists and tuples; in strings, replaces each given secret with "[REDACTED]", any
    key-like token (sk-..., Bearer ...) too, and base64 image data with "[image omitted]". Dict
    entries named like credentials (api_key, authorization, ...) are removed outright. Bytes never
    reach a trace: they become a note of their length.
    """
    ordered = sorted({s for s in secrets if s}, key=len, reverse=True)  # longest first: overlaps

    def clean_str(value: str) -> str:
        if _BARE_IMAGE.match(value):
            return IMAGE_OMITTED
        value = _DATA_URL.sub(IMAGE_OMITTED, value)
        for secret in ordered:
            value = value.replace(secret, REDACTED)
        return _KEY_LIKE.sub(REDACTED, value)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return clean_str(value)
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in value.items() if not _is_sensitive_key(k)}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        if isinstance(value, (bytes, bytearray, memoryview)):
            return f"[{len(value)} bytes omitted]"
        return value

    return walk(obj)


# ------------------------------------------------------------------------------------ file helpers


def canonical_json(obj: Any) -> bytes:
    """The one serialisation that is hashed and stored: sorted keys, no spaces, ASCII only.

    ASCII keeps a record on one physical line whatever the text holds (U+2028 and friends are
    escaped), so splitting steps.jsonl on b"\\n" is always right.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def record_hash(record: dict[str, Any]) -> str:
    """SHA-256 of a record's canonical JSON without its own ``hash`` field."""
    return hashlib.sha256(canonical_json({k: v for k, v in record.items() if k != "hash"})).hexdigest()


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old file or the new one, never a mix.

    The data is fsynced before the rename and the directory after it, so the new version also
    survives a power cut once this returns.
    """
    tmp = path.with_name(f".{path.name}.{_random.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def new_trace_id(now: datetime | None = None) -> str:
    """UTC time to the microsecond plus a random suffix: sorts by creation, unique, path-safe."""
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S%fZ-") + _random.token_hex(4)


_TRACE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def check_trace_id(trace_id: str) -> str:
    """Refuse anything but a plain name: no dots, slashes or other path syntax can get through."""
    if not isinstance(trace_id, str) or not _TRACE_ID.fullmatch(trace_id):
        raise InvalidTraceId(f"invalid trace id {trace_id!r}: use letters, digits, '-' and '_' only")
    return trace_id


def _split_lines(data: bytes) -> tuple[list[bytes], bool]:
    """Complete lines of a JSONL file, and whether an unterminated tail was dropped."""
    *lines, tail = data.split(b"\n")
    return [line for line in lines if line.strip()], bool(tail.strip())


def _plain(value: Any) -> Any:
    """The loop's objects (pydantic models, provider dataclasses) as JSON-able data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _png_bytes(image: Frame | bytes) -> bytes:
    return image.png if isinstance(image, Frame) else bytes(image)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _read_owner(directory: Path) -> ProcessId | None:
    try:
        return ProcessId.from_dict(json.loads((directory / OWNER_FILE).read_bytes()))
    except (OSError, ValueError, AttributeError):
        return None


def _closed_here(directory: Path) -> None:
    """A finished trace names no writer any more."""
    with _open_lock:
        _writers.pop(_key(directory), None)
    (directory / OWNER_FILE).unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------ writing

# The writers of the traces this process is writing (created, not yet finished), by directory:
# those traces are never closed as interrupted, whatever /proc says, and a reader here waits for
# their queued writes.
_writers: dict[str, "TraceWriter"] = {}
_open_lock = threading.Lock()


def _key(directory: Path) -> str:
    return str(directory.resolve())


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
    if not _writers:  # nothing open here: no directory to resolve
        return
    with _open_lock:
        writer = _writers.get(_key(directory))
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
        self._lines = bytearray()  # steps.jsonl as last written; this writer is its only author
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

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise OSError(f"trace {self.trace_id}: a step could not be written: {self._failure}") from self._failure

    def add_secrets(self, *values: str) -> None:
        """More strings that must never be written (e.g. a secret resolved mid-run)."""
        with self._lock:
            self._secrets.update(v for v in values if v)

    def _update_meta(self, **changes: Any) -> None:
        self._meta = TraceMeta.model_validate(self._meta.model_dump() | changes)
        self._write_meta()

    def _write_meta(self) -> None:
        atomic_write(self.dir / "meta.json", json.dumps(self._meta.model_dump(mode="json"), indent=2).encode())

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
        usage: Any = None,
        url: str | None = None,
        model_image_size: tuple[int, int] | None = None,
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
            content = redact(_plain({
                "text": text, "reasoning": reasoning, "tool_calls": list(tool_calls), "actions": list(actions),
                "argv": [list(a) for a in argv], "results": list(results), "error": error, "url": url,
            }), self._secrets)
            finished = finished_at or _now()
            record = StepRecord(
                **content, index=index, started_at=started_at or finished, finished_at=finished,
                model_ms=model_ms, exec_ms=exec_ms, settle_ms=settle_ms, usage=_plain(usage) or {},
                model_image_size=model_image_size,
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
        stored = record.model_dump(mode="json") | {
            "before_png": before_png, "before_sha256": before_sha,
            "after_png": after_png, "after_sha256": after_sha, "prev_hash": self._meta.head_hash,
        }
        stored["hash"] = record_hash(stored)
        # Rewrite the whole file atomically rather than append in place: an in-place append cut
        # short by a crash leaves a torn line that readers must second-guess; a rename never
        # does. The copy costs O(steps) per step, trivial at a run's scale (tens of KB).
        self._lines += canonical_json(stored) + b"\n"
        atomic_write(self.dir / "steps.jsonl", bytes(self._lines))
        if after_png:
            self._last_after = (after_png, after_sha)
        self._update_meta(steps=index, head_hash=stored["hash"], usage=self._meta.usage.plus(record.usage))

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
               error: ErrorInfo | dict[str, str] | None = None) -> TraceMeta:
        """Close the trace with its final status. Call once."""
        if status == "running":
            raise ValueError("finish needs a final status, not 'running'")
        with self._lock:
            if self._meta.finished_at is not None:
                raise RuntimeError(f"trace {self.trace_id} is already finished ({self._meta.status})")
            final = redact({"answer": answer, "error": _plain(error)}, self._secrets)
            # The run's end waits for its steps: a finished trace is never missing one recorded
            # (one whose write failed is not in it, and the chain still verifies without it).
            self.flush()
            self._update_meta(status=status, finished_at=_now(), **final)
            _closed_here(self.dir)
            return self.meta


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
               max_steps: int | None = None, secrets: Iterable[str] = ()) -> TraceWriter:
        """Start a trace. ``secrets`` are strings never to be written (typed passwords, keys)."""
        started = _now()
        trace_id = new_trace_id(started)
        directory = self.trace_dir(trace_id)
        self._private_traces_dir()
        directory.mkdir()
        secrets = list(secrets)
        meta = TraceMeta(trace_id=trace_id, session_id=session_id, instruction=redact(instruction, secrets),
                         model=model, started_at=started, max_steps=max_steps)
        writer = TraceWriter(directory, meta, secrets)
        with _open_lock:
            _writers[_key(directory)] = writer
        # Before meta.json: every unfinished trace names the process writing it.
        atomic_write(directory / OWNER_FILE, json.dumps(this_process().as_dict()).encode())
        atomic_write(directory / "steps.jsonl", b"")
        writer._write_meta()  # last: a directory with meta.json is a complete trace
        return writer

    def close_interrupted(self, alive: Callable[[ProcessId], bool] | None = None) -> list[str]:
        """Close as ``interrupted`` every unfinished trace whose writer is gone; returns their ids.

        Left alone: traces this process is writing, and traces whose owner record names a process
        that still runs (``alive``, default: judged from /proc), e.g. another server on the same
        data directory. A trace with no readable owner record was written before owner records
        existed, or by a process that cannot be asked: it is closed. A damaged trace is logged and
        skipped, never a reason not to start.
        """
        alive = alive or alive_checker()
        closed = []
        for meta in self.list_traces():
            if meta.status in FINAL_STATUSES or meta.finished_at is not None:
                continue
            directory = self.trace_dir(meta.trace_id)
            with _open_lock:
                if _key(directory) in _writers:
                    continue
            owner = _read_owner(directory)
            if owner is not None and alive(owner):
                continue
            try:
                self._interrupt(meta)
            except (OSError, ValueError) as exc:
                log.error("trace %s was left unfinished and could not be closed: %s", meta.trace_id, exc)
                continue
            closed.append(meta.trace_id)
        if closed:
            log.warning("closed %d trace(s) left unfinished by a server that stopped: %s", len(closed),
                        ", ".join(closed))
        return closed

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
        changes["finished_at"] = max(last, meta.started_at)
        closed = TraceMeta.model_validate(meta.model_dump() | changes)
        atomic_write(directory / "meta.json", json.dumps(closed.model_dump(mode="json"), indent=2).encode())
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
        return Trace(meta=meta, steps=steps, partial_tail=partial)

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
        """Check the hash chain and every screenshot's SHA-256; report the first break."""
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
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                assert isinstance(record, dict)
            except (ValueError, AssertionError):
                return broken(number, "record is not valid JSON", number - 1)
            if record.get("index") != number:
                return broken(number, f"expected step {number}, found {record.get('index')!r}", number - 1)
            if record.get("prev_hash") != prev:
                return broken(number, "prev_hash does not match the previous record's hash", number - 1)
            if record.get("hash") != record_hash(record):
                return broken(number, "record content does not match its hash", number - 1)
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
        return VerifyResult(ok=True, steps_checked=len(lines), partial_tail=partial)


def verify(trace_id: str, data_dir: str | os.PathLike[str] | None = None) -> VerifyResult:
    """``TraceStore(data_dir).verify(trace_id)``."""
    return TraceStore(data_dir).verify(trace_id)

