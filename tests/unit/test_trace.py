"""The trace store: atomic files, hash chain, redaction, restart, id safety. No X needed."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from desktop.actions import Click
from desktop.screen import Frame
from vision.providers.base import CallResult, ToolCall, Usage
from vision.trace import (
    GENESIS_HASH, InvalidTraceId, TraceNotFound, TraceStore, TraceWriter, canonical_json, check_trace_id,
    new_trace_id, redact,
)

SECRET = "hunter2-very-secret"
DATA_URL = "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUg" * 20


def frame(color: str, box: tuple[int, int, int, int] | None = None) -> Frame:
    img = Image.new("RGB", (1920, 1080), color)
    if box:
        ImageDraw.Draw(img).rectangle(box, fill="black")
    return Frame(img.convert("RGBA").tobytes("raw", "BGRA"), 1920, 1080)


def record_three(writer: TraceWriter) -> list[Frame]:
    frames = [frame("white"), frame("white", (100, 100, 300, 200)), frame("gray"), frame("navy")]
    writer.record_step(
        before=frames[0], after=frames[1], text="I will click the button.",
        tool_calls=[ToolCall(id="c1", name="computer", raw={"action": "left_click", "coordinate": [640, 360]},
                             actions=[Click(x=960, y=540)])],
        actions=[Click(x=960, y=540)], argv=[["xdotool", "mousemove", "960", "540", "click", "--delay", "0", "1"]],
        results=[CallResult(call_id="c1", ok=True)], model_ms=1200, exec_ms=12, settle_ms=80,
        usage=Usage(input_tokens=1500, output_tokens=40), url="https://example.test/", model_image_size=(1280, 720),
    )
    writer.record_step(
        before=frames[1], after=frames[2], text=f"Typing the password {SECRET} now, see {DATA_URL}",
        tool_calls=[{"id": "c2", "name": "computer", "raw": {"action": "type", "text": SECRET, "api_key": "k-123"}}],
        actions=[{"action": "type", "text": SECRET}], argv=[["xdotool", "type", "--delay", "12", "--", SECRET]],
        results=[{"call_id": "c2", "ok": True, "output": f"typed {SECRET}"}], model_ms=900, usage={"input_tokens": 10},
    )
    writer.record_step(
        before=frames[2], after=frames[3], text="Pressing enter.",
        actions=[{"action": "key", "keys": ["Return"]}], argv=[["xdotool", "key", "Return"]],
        results=[{"call_id": "c3", "ok": False, "error": "window vanished"}],
        error={"code": "action_failed", "message": "xdotool exited 1"},
    )
    return frames


@pytest.fixture
def store(tmp_path: Path) -> TraceStore:
    return TraceStore(tmp_path)


@pytest.fixture
def trace_id(store: TraceStore) -> str:
    writer = store.create("Log in to the test site", model="scripted/test", session_id="s1", max_steps=10,
                          secrets=[SECRET])
    record_three(writer)
    writer.finish("done", answer="Logged in")
    return writer.trace_id


def steps_file(store: TraceStore, trace_id: str) -> Path:
    return store.trace_dir(trace_id) / "steps.jsonl"


def test_layout_and_reload_after_restart(store: TraceStore, trace_id: str) -> None:
    directory = store.trace_dir(trace_id)
    names = sorted(p.name for p in directory.iterdir())
    # A step's "before" is the previous "after": stored once, referenced by name.
    assert names == ["meta.json", "step-0001-after.png", "step-0001-before.png", "step-0002-after.png",
                     "step-0003-after.png", "steps.jsonl"]

    trace = TraceStore(store.root).load(trace_id)  # a fresh store: nothing in memory
    meta = trace.meta
    assert (meta.status, meta.answer, meta.steps, meta.max_steps, meta.session_id) == ("done", "Logged in", 3, 10, "s1")
    assert meta.usage.input_tokens == 1510 and meta.usage.output_tokens == 40
    assert meta.finished_at is not None and meta.finished_at >= meta.started_at
    assert [s.index for s in trace.steps] == [1, 2, 3]
    first, second, third = trace.steps
    assert first.prev_hash == GENESIS_HASH and second.prev_hash == first.hash and meta.head_hash == third.hash
    assert first.actions == [{"action": "click", "x": 960, "y": 540, "button": "left", "modifiers": []}]
    assert first.tool_calls[0].raw == {"action": "left_click", "coordinate": [640, 360]}
    assert first.model_image_size == (1280, 720) and first.url == "https://example.test/"
    assert (first.model_ms, first.exec_ms, first.settle_ms) == (1200, 12, 80)
    assert second.before_png == "step-0001-after.png"
    assert third.error is not None and third.error.code == "action_failed" and third.failed
    png = (store.trace_dir(trace_id) / first.after_png).read_bytes()
    assert hashlib.sha256(png).hexdigest() == first.after_sha256
    assert Image.open(store.image_path(trace_id, 2, "before")).getpixel((150, 150)) == (0, 0, 0)
    assert store.verify(trace_id).ok


def test_lines_are_canonical_and_hashed(store: TraceStore, trace_id: str) -> None:
    for line in steps_file(store, trace_id).read_bytes().splitlines():
        record = json.loads(line)
        assert canonical_json(record) == line
        body = {k: v for k, v in record.items() if k != "hash"}
        assert hashlib.sha256(canonical_json(body)).hexdigest() == record["hash"]


def test_editing_one_byte_breaks_the_chain_at_that_record(store: TraceStore, trace_id: str) -> None:
    path = steps_file(store, trace_id)
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"Typing", b"Typinh", 1)
    path.write_bytes(b"\n".join(lines))
    result = store.verify(trace_id)
    assert not result.ok and result.broken_index == 2 and "hash" in result.reason
    assert store.load(trace_id).steps[1].text.startswith("Typinh")  # still readable, just not trusted


def test_rehashed_forgery_breaks_the_next_link(store: TraceStore, trace_id: str) -> None:
    path = steps_file(store, trace_id)
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    records[0]["text"] = "I did something else."
    records[0]["hash"] = hashlib.sha256(canonical_json({k: v for k, v in records[0].items() if k != "hash"})).hexdigest()
    path.write_bytes(b"".join(canonical_json(r) + b"\n" for r in records))
    result = store.verify(trace_id)
    assert not result.ok and result.broken_index == 2 and "prev_hash" in result.reason


def test_truncation_is_caught_by_the_head_in_meta(store: TraceStore, trace_id: str) -> None:
    path = steps_file(store, trace_id)
    path.write_bytes(b"".join(line + b"\n" for line in path.read_bytes().splitlines()[:2]))
    result = store.verify(trace_id)
    assert not result.ok and result.broken_index == 3


def test_altered_png_breaks_its_hash(store: TraceStore, trace_id: str) -> None:
    path = store.trace_dir(trace_id) / "step-0002-after.png"
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF
    path.write_bytes(bytes(data))
    result = store.verify(trace_id)
    assert not result.ok and result.broken_index == 2 and "step-0002-after.png" in result.reason


def test_missing_png_is_reported(store: TraceStore, trace_id: str) -> None:
    (store.trace_dir(trace_id) / "step-0001-after.png").unlink()
    result = store.verify(trace_id)
    assert not result.ok and result.broken_index == 1 and "missing" in result.reason


def test_no_secret_or_inline_image_is_written(store: TraceStore, trace_id: str) -> None:
    for path in store.trace_dir(trace_id).iterdir():
        data = path.read_bytes()
        assert SECRET.encode() not in data, path.name
        assert b"k-123" not in data and b"api_key" not in data, path.name
        if path.suffix != ".png":
            assert b"base64," not in data and b"iVBORw0KGgo" not in data, path.name
    second = TraceStore(store.root).load(trace_id).steps[1]
    assert second.text == "Typing the password [REDACTED] now, see [image omitted]"
    assert second.argv == [["xdotool", "type", "--delay", "12", "--", "[REDACTED]"]]
    assert second.tool_calls[0].raw == {"action": "type", "text": "[REDACTED]"}


def test_secrets_in_meta_are_redacted(store: TraceStore) -> None:
    writer = store.create(f"Use the key {SECRET}", model="m", secrets=[SECRET])
    writer.finish("failed", error={"code": "model_call_failed", "message": "Bad key sk-abcdefghijklmnopqrstuv"})
    meta = store.meta(writer.trace_id)
    assert meta.instruction == "Use the key [REDACTED]"
    assert meta.error is not None and meta.error.message == "Bad key [REDACTED]"


def test_redact_walks_nested_data() -> None:
    data = {"a": [SECRET, {"b": f"x{SECRET}y", "Authorization": "Bearer abc", "x-api-key": "k"}],
            "img": DATA_URL, "bare": "iVBORw0KGgo" + "A" * 100, "blob": b"\x89PNG", "n": 3, "none": None}
    assert redact(data, [SECRET, ""]) == {
        "a": ["[REDACTED]", {"b": "x[REDACTED]y"}], "img": "[image omitted]", "bare": "[image omitted]",
        "blob": "[4 bytes omitted]", "n": 3, "none": None,
    }


def test_partial_trailing_line_does_not_break_reading(store: TraceStore, trace_id: str) -> None:
    path = steps_file(store, trace_id)
    with open(path, "ab") as f:  # a crash in the middle of an in-place append
        f.write(b'{"index":4,"text":"half a rec')
    trace = TraceStore(store.root).load(trace_id)
    assert [s.index for s in trace.steps] == [1, 2, 3] and trace.partial_tail
    result = store.verify(trace_id)
    assert result.ok and result.steps_checked == 3 and result.partial_tail


def test_no_temp_files_left_behind(store: TraceStore, trace_id: str) -> None:
    assert not [p for p in store.trace_dir(trace_id).iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("bad", ["../x", "..", "a/b", "/etc", "", ".hidden", "a\\b", "x\x00", "a" * 200])
def test_trace_id_validation_rejects_paths(store: TraceStore, bad: str) -> None:
    with pytest.raises(InvalidTraceId):
        check_trace_id(bad)
    with pytest.raises(InvalidTraceId):
        store.load(bad)


def test_unknown_trace_is_not_found(store: TraceStore) -> None:
    with pytest.raises(TraceNotFound):
        store.load(new_trace_id())


def test_generated_ids_are_valid_sortable_and_unique() -> None:
    ids = [new_trace_id() for _ in range(200)]
    assert len(set(ids)) == 200 and all(check_trace_id(i) for i in ids)
    assert [i.split("-")[0] for i in ids] == sorted(i.split("-")[0] for i in ids)


def test_listing_is_newest_first_and_skips_junk(store: TraceStore) -> None:
    created = [store.create(f"task {n}", model="m").trace_id for n in range(3)]
    (store.traces_dir / "not-a-trace").mkdir()  # no meta.json: a creation that never completed
    listed = TraceStore(store.root).list_traces()
    assert [m.trace_id for m in listed] == created[::-1]
    assert [m.instruction for m in listed] == ["task 2", "task 1", "task 0"]
    assert [m.trace_id for m in store.list_traces(limit=1)] == [created[2]]


def test_data_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GLASSDESK_DATA_DIR", str(tmp_path / "elsewhere"))
    writer = TraceStore().create("x", model="m")
    assert (tmp_path / "elsewhere" / "traces" / writer.trace_id / "meta.json").is_file()


def test_finished_trace_takes_no_more_steps(store: TraceStore) -> None:
    writer = store.create("x", model="m")
    writer.finish("cancelled")
    with pytest.raises(RuntimeError):
        writer.record_step(text="late")
    with pytest.raises(RuntimeError):
        writer.finish("done")
    assert store.meta(writer.trace_id).status == "cancelled"


def test_invalid_step_writes_nothing(store: TraceStore) -> None:
    writer = store.create("x", model="m")
    with pytest.raises(ValueError):
        writer.record_step(before=frame("white"), results=[{"ok": "maybe"}])
    assert sorted(p.name for p in writer.dir.iterdir()) == ["meta.json", "steps.jsonl"]
    writer.record_step(text="fine")
    assert store.verify(writer.trace_id).ok


def test_naive_times_are_taken_as_utc(store: TraceStore) -> None:
    writer = store.create("x", model="m")
    naive = datetime(2025, 1, 1, 12, 0, 0)
    step = writer.record_step(started_at=naive, finished_at=naive)
    assert step.started_at.tzinfo is not None and step.started_at.hour == 12


def test_a_held_run_shows_its_status_on_disk_and_can_resume_and_finish(tmp_path):
    store = TraceStore(tmp_path)
    writer = store.create("pay the bill", model="openai/computer-use-preview")
    writer.record_step(text="asks for approval")
    writer.hold("needs_confirmation")
    assert store.meta(writer.trace_id).status == "needs_confirmation"
    writer.hold("running")
    writer.record_step(text="approved, continues")
    writer.finish("done", answer="paid")
    assert store.meta(writer.trace_id).status == "done" and store.verify(writer.trace_id).ok
    with pytest.raises(RuntimeError):
        writer.hold("running")
