"""What a trace is made of: the run's and the steps' records, the run statuses, token usage, the
verify result; ``redact``, through which everything written passes; and the canonical JSON and
record hash that chain the steps (see the package docstring).

Only pydantic and the standard library: ``vision.client`` imports these models, and must not pull
in the desktop (Xlib, mss) or the server (fastapi) with them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from desktop.models import ElementAt, Mark, NativeElement

GENESIS_HASH = "0" * 64
REDACTED = "[REDACTED]"
IMAGE_OMITTED = "[image omitted]"

# The one list of a run's statuses, for the loop, the trace, the API and the console (which reads
# FINAL_STATUSES from the server). "paused" is a run's state between calls, never written to a trace.
# "interrupted": the server stopped (crashed, was killed) before the run finished; set only by
# TraceStore.close_interrupted when the next server starts, never by the loop.
# "done_after_heal": the model said done and its last acting step worked, but the desktop was restarted
# under the run (the browser or the whole desktop; each heal is a step of the trace, code
# desktop_healed): what it did before the heal may be gone, so its done is not a plain one.
RunStatus = Literal["running", "paused", "needs_confirmation", "done", "done_after_heal", "failed", "max_steps",
                    "budget_exceeded", "cancelled", "interrupted"]
FINAL_STATUSES = ("done", "done_after_heal", "failed", "max_steps", "budget_exceeded", "cancelled", "interrupted")
ImageKind = Literal["before", "after"]
# Naive datetimes from callers are taken as UTC, so every stored time compares with every other.
UtcDatetime = Annotated[datetime, AfterValidator(lambda d: d if d.tzinfo else d.replace(tzinfo=UTC))]


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

    def add(self, other: Usage) -> None:
        for name in Usage.model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def plus(self, other: Usage) -> Usage:
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
    # The run's expectations as given (vision.models.qa.Expectation's fields): an export asserts them.
    expect: list[dict[str, Any]] = Field(default_factory=list)
    # The run's expectations as checked when the model said done (vision.models.CheckResult's
    # fields): verified True when every one held, False when one did not, None when none was checked.
    verified: bool | None = None
    checks: list[dict[str, Any]] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    steps: int = 0
    max_steps: int | None = None
    # Hash of the last committed step record: lets verify notice a truncated steps.jsonl.
    head_hash: str = GENESIS_HASH
    # The video receipt's seal (video.json), the chain's last link when the run was filmed.
    video_hash: str | None = None

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


class Spot(BaseModel):
    """What was at a pointer action's pixel with no DOM element there: OCR's text (and its box on
    the display) and a template image centred on the pixel (base64 PNG)."""

    text: str | None = None
    text_box: list[int] | None = None
    image: str | None = None


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
    # Absent from traces written before it: the hash is over the record as written, so they verify.
    settled_by: list[str] = Field(default_factory=list, description="per action, what ended its settle wait: "
                                                                    "frame, damage, network, navigation, dialog, "
                                                                    "timeout")
    usage: Usage = Field(default_factory=Usage)
    url: str | None = None
    # Absent from traces written before it (as settled_by). Per action, in the order of `actions`:
    # what was under a pointer action's pixel with the browser in front (desktop.browser.hit), else null.
    elements: list[ElementAt | None] = Field(default_factory=list,
                                             description="per action (as `actions`): the element under its pixel "
                                                         "just before it ran, with verified locators; null for "
                                                         "an action with no pixel or the browser not in front")
    # Absent from traces written before it. Per action (as `elements`): the accessibility node under a
    # pointer action's pixel on a native window (desktop.x11.atspi), else null.
    natives: list[NativeElement | None] = Field(default_factory=list,
                                                description="per action (as `actions`): the native control "
                                                            "under its pixel just before it ran, read over the "
                                                            "accessibility bus; null for an action with no pixel, "
                                                            "the browser in front, or nothing there answering")
    # Absent from traces written before it. Per action (as `elements`): for a pointer action no DOM
    # element names (a native window, a canvas), the text OCR read at its pixel and a template image
    # around it (vision.perception.spot), which a replay re-finds the target by; else null.
    spots: list[Spot | None] = Field(default_factory=list,
                                     description="per action (as `actions`): for a pointer action with no DOM "
                                                 "element to name it, the OCR text at its pixel and a template "
                                                 "image around it, read before it ran; else null")
    # Absent from traces written before it (as spots): the texts the step made appear, that a test of
    # it would assert and a healed replay of it must bring up again (vision.perception.effects): read from the
    # page in front ("page": one element shows each) or, after a click on a native window or a
    # canvas, by OCR of the region that changed ("screen"). Bounded and short; never a secret's value.
    appeared: list[str] = Field(default_factory=list,
                                description="texts visible after the step that were not before it (a few, short)")
    appeared_on: Literal["page", "screen"] | None = Field(None, description="where `appeared` was read: the "
                                                                            "page's elements, or the screen by OCR")
    # A step whose clicks, keys, typing or scrolls all worked and changed nothing on the screen nor
    # the page's address (absent from traces written before it: not known).
    no_effect: bool = Field(False, description="every action worked and nothing on the screen changed")
    # With expect_each_step: the expectations as they stood right after the step (CheckResult's fields).
    checks: list[dict[str, Any]] = Field(default_factory=list)
    # Absent from traces written before it. With vision/act's marks: what the model's "[7]" meant.
    marks: list[Mark] | None = Field(None, description="with set-of-marks (vision/act's marks): the numbered "
                                                       "controls the model was shown, drawn on the step's "
                                                       "screenshot (the trace keeps it plain) and listed with "
                                                       "it; null: the model saw the plain screen")
    model_image_size: tuple[int, int] | None = None
    before_png: str | None = None
    before_sha256: str | None = None
    after_png: str | None = None
    after_sha256: str | None = None
    # Who acted. Absent from records written before a person's input was recorded: the agent.
    by: Literal["agent", "operator"] = Field("agent", description="operator: a person's input during a "
                                                                  "take-over, recorded as it arrived")
    prev_hash: str = GENESIS_HASH
    hash: str = ""

    @property
    def failed(self) -> bool:
        return self.error is not None or any(not r.ok for r in self.results)


class VideoSeal(BaseModel):
    """A video receipt's files and their SHA-256, chained after the last step (``video.json``):
    ``prev_hash`` is that step's hash and meta.json's ``video_hash`` this record's, so the trace's
    verify covers the film, its chapters and its captions."""

    file: str
    sha256: str
    format: Literal["mp4", "webm"]
    chapters_file: str
    chapters_sha256: str
    captions_file: str
    captions_sha256: str
    duration_s: float
    chapters: int
    clicks: int
    notes: list[str] = Field(default_factory=list)
    sealed_at: UtcDatetime
    prev_hash: str = GENESIS_HASH
    hash: str = ""


class Trace(BaseModel):
    meta: TraceMeta
    steps: list[StepRecord]
    video: VideoSeal | None = None
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


# --------------------------------------------------------------------------------------- hash chain


SECRET_PIECE_MIN = 3  # characters: a shorter run shared with a secret is too common to mean it


def redact_pieces(text: str, secrets: Iterable[str], min_len: int = SECRET_PIECE_MIN) -> str:
    """``text`` with every run of ``min_len`` characters or more that is part of a secret replaced
    by "[REDACTED]" (pure). For text a person typed: a password typed with a pause or a corrected
    typo arrives as pieces (``hunt``, BackSpace, ``er2``), none of them the whole value that
    ``redact`` looks for. Errs on the safe side: a common run shared with a secret goes too."""
    pieces = [s for s in secrets if len(s) >= min_len]
    if not pieces:
        return text
    longest = max(map(len, pieces))
    out, i = [], 0
    while i < len(text):
        # The longest run from i that is inside some secret (no longer than the longest secret).
        end = next((j for j in range(min(len(text), i + longest), i + min_len - 1, -1)
                    if any(text[i:j] in s for s in pieces)), None)
        if end is None:
            out.append(text[i])
            i += 1
        else:
            out.append(REDACTED if not out or out[-1] != REDACTED else "")
            i = end
    return "".join(out)


def canonical_json(obj: Any) -> bytes:
    """The one serialisation that is hashed and stored: sorted keys, no spaces, ASCII only.

    ASCII keeps a record on one physical line whatever the text holds (U+2028 and friends are
    escaped), so splitting steps.jsonl on b"\\n" is always right.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def record_hash(record: dict[str, Any]) -> str:
    """SHA-256 of a record's canonical JSON without its own ``hash`` field."""
    return hashlib.sha256(canonical_json({k: v for k, v in record.items() if k != "hash"})).hexdigest()


@dataclass(frozen=True)
class Link:
    """One line of a hash chain, read: its record (None when the line is not a JSON object) and
    what is wrong with it as a link (nothing when it holds)."""

    number: int
    record: dict[str, Any] | None
    problems: tuple[str, ...]


def walk_chain(lines: Iterable[bytes | str]) -> Iterator[Link]:
    """Each line of a hash chain (a trace's steps.jsonl, a QA run's manifest.jsonl), numbered from 1,
    checked as a link (pure): a JSON object, numbered in its place, carrying the previous record's
    hash (from GENESIS_HASH) and its own. After a line that is not JSON, the next record's
    ``prev_hash`` cannot be checked."""
    prev: str | None = GENESIS_HASH
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            assert isinstance(record, dict)
        except (ValueError, AssertionError):
            prev = None
            yield Link(number, None, ("not valid JSON",))
            continue
        problems = []
        if record.get("index") != number:
            problems.append(f"numbered {record.get('index')!r}, where it is record {number}")
        if prev is not None and record.get("prev_hash") != prev:
            problems.append("prev_hash does not match the previous record's hash")
        if record.get("hash") != record_hash(record):
            problems.append("content does not match its hash")
        prev = record.get("hash")
        yield Link(number, record, tuple(problems))


def meta_seal(meta_json: bytes, last_link: str) -> dict[str, str]:
    """What a finished trace's ``seal.json`` holds: meta.json's SHA-256 chained after the trace's
    last link (its video's seal, else its last step). Without it a forged status, answer or
    instruction in meta.json verified as intact under "Evidence verified"."""
    seal = {"meta_sha256": hashlib.sha256(meta_json).hexdigest(), "prev_hash": last_link}
    return seal | {"hash": record_hash(seal)}


def meta_seal_problem(seal_json: bytes | None, meta_json: bytes, last_link: str) -> str | None:
    """What is wrong with a finished trace's seal of its meta.json, or None (pure)."""
    if seal_json is None:
        return "meta.json: the trace is finished but not sealed (seal.json is missing)"
    try:
        seal = json.loads(seal_json)
        assert isinstance(seal, dict)
    except (ValueError, AssertionError):
        return "seal.json is not valid JSON"
    if seal.get("hash") != record_hash(seal):
        return "seal.json's content does not match its hash"
    if seal.get("prev_hash") != last_link:
        return "seal.json does not follow the trace's last record (prev_hash)"
    if seal.get("meta_sha256") != hashlib.sha256(meta_json).hexdigest():
        return "meta.json: does not match its seal (edited after the run finished)"
    return None


_STEP_IMAGE = re.compile(r"step-\d{4,}-(?:before|after)\.png")


def unrecorded_step_images(present: Iterable[str], records: Iterable[dict[str, Any]]) -> list[str]:
    """The step screenshots in a trace's directory that none of ``records`` names (pure), sorted:
    what a writer stopped between storing a step's images and appending its record left behind."""
    named = {record.get(f"{which}_png") for record in records for which in ("before", "after")}
    return sorted(name for name in set(present) if _STEP_IMAGE.fullmatch(name) and name not in named)


def unlisted_files(present: Iterable[str], listed: Iterable[str]) -> list[str]:
    """The files of a trace's directory that nothing in its chain names (pure), sorted. A name
    starting with a dot is a write in progress (atomic_write's temp file, a film being made) and
    no part of the evidence; ``report.html`` is the offline viewer rendered from the trace, made
    again on demand, and says itself what verify answered when it was made."""
    return sorted(name for name in set(present) - set(listed) - {"report.html"} if not name.startswith("."))
