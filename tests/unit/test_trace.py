"""The trace store: atomic files, hash chain, redaction, restart, id safety. No X needed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import threading
from datetime import datetime
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

import vision.trace.writer as writer_module
from desktop.actions import Click
from desktop.errors import StorageFull
from desktop.frame import Frame
from vision.actions import CallResult, ToolCall
from vision.evidence.report import render_junit
from vision.evidence.runview import Files, trace_view
from vision.providers.base import Usage
from vision.trace.files import OWNER_FILE, check_trace_id, new_trace_id
from vision.trace.records import (
    FINAL_STATUSES,
    GENESIS_HASH,
    InvalidTraceId,
    TraceNotFound,
    canonical_json,
    redact,
    unrecorded_step_images,
)
from vision.trace.store import TraceStore
from vision.trace.writer import TraceWriter

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
        results=[CallResult(call_id="c1", ok=True, screen=frames[1], url="https://example.test/")],
        model_ms=1200, exec_ms=12, settle_ms=80,
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
    assert names == ["meta.json", "seal.json", "step-0001-after.png", "step-0001-before.png",
                     "step-0002-after.png", "step-0003-after.png", "steps.jsonl"]

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


def test_a_calls_screen_stays_out_of_the_record() -> None:
    from vision.trace.writer import _plain

    plain = _plain(CallResult(call_id="c1", ok=True, screen=frame("white"), url="https://example.test/"))
    assert plain == {"call_id": "c1", "ok": True, "error": None, "output": None, "image_png": None}


def test_lines_are_canonical_and_hashed(store: TraceStore, trace_id: str) -> None:
    for line in steps_file(store, trace_id).read_bytes().splitlines():
        record = json.loads(line)
        assert canonical_json(record) == line
        body = {k: v for k, v in record.items() if k != "hash"}
        assert hashlib.sha256(canonical_json(body)).hexdigest() == record["hash"]


def test_the_chain_walk_names_every_problem_of_each_link() -> None:
    """walk_chain (pure) is what both a trace's and a QA run's verify read their chain with."""
    from vision.trace.records import GENESIS_HASH, record_hash, walk_chain

    def link(index: int, prev: str, **fields) -> dict:
        record = {"index": index, "prev_hash": prev, **fields}
        return record | {"hash": record_hash(record)}

    first = link(1, GENESIS_HASH, text="a")
    second = link(2, first["hash"], text="b")
    lines = [canonical_json(first), canonical_json(second)]
    assert [(w.number, w.problems) for w in walk_chain(lines)] == [(1, ()), (2, ())]
    edited = canonical_json({**second, "text": "c"})
    assert [w.problems for w in walk_chain([lines[0], edited])][1] == ("content does not match its hash",)
    # Out of place and rehashed over another head: two problems of one link, both named.
    moved = link(3, "f" * 64, text="b")
    assert list(walk_chain([lines[0], canonical_json(moved)]))[1].problems == (
        "numbered 3, where it is record 2", "prev_hash does not match the previous record's hash")
    # A line that is not JSON: its own problem; the next link's prev_hash cannot be judged.
    walked = list(walk_chain([b"{torn", lines[1]]))
    assert walked[0].record is None and walked[0].problems == ("not valid JSON",)
    assert walked[1].problems == ()


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
    records[0]["hash"] = hashlib.sha256(
        canonical_json({k: v for k, v in records[0].items() if k != "hash"})).hexdigest()
    path.write_bytes(b"".join(canonical_json(r) + b"\n" for r in records))
    result = store.verify(trace_id)
    assert not result.ok and result.broken_index == 2 and "prev_hash" in result.reason


def test_truncation_is_caught_by_the_head_in_meta(store: TraceStore, trace_id: str) -> None:
    path = steps_file(store, trace_id)
    path.write_bytes(b"".join(line + b"\n" for line in path.read_bytes().splitlines()[:2]))
    result = store.verify(trace_id)
    assert not result.ok and result.broken_index == 3


@pytest.mark.parametrize("field, forged", [("status", "done_after_heal"), ("answer", "Logged in as admin"),
                                           ("instruction", "something else"), ("model", "gpt-5"), ("steps", 2)])
def test_a_forged_field_of_a_finished_runs_meta_fails_verify_naming_the_file(store, trace_id, field, forged):
    path = store.trace_dir(trace_id) / "meta.json"
    meta = json.loads(path.read_bytes())
    assert meta[field] != forged
    path.write_text(json.dumps(meta | {field: forged}, indent=2))
    result = store.verify(trace_id)
    assert not result.ok and "meta.json" in result.reason, result


def test_a_finished_run_without_its_seal_or_with_a_forged_one_fails_verify(store, trace_id):
    seal = store.trace_dir(trace_id) / "seal.json"
    original = seal.read_bytes()
    record = json.loads(original)
    seal.write_text(json.dumps(record | {"meta_sha256": "0" * 64}))
    assert "does not match its hash" in store.verify(trace_id).reason
    seal.unlink()
    result = store.verify(trace_id)
    assert not result.ok and "not sealed" in result.reason
    seal.write_bytes(original)
    assert store.verify(trace_id).ok


def test_a_file_the_chain_does_not_name_fails_verify_and_a_rendered_report_does_not(store, trace_id):
    directory = store.trace_dir(trace_id)
    (directory / "report.html").write_text("<p>rendered from the trace</p>")
    (directory / ".meta.json.1234abcd.tmp").write_bytes(b"a write in progress")
    assert store.verify(trace_id).ok
    (directory / "step-0009-after.png").write_bytes(b"planted")
    result = store.verify(trace_id)
    assert not result.ok and result.reason.startswith("step-0009-after.png:"), result


def test_a_running_trace_verifies_unsealed_and_is_sealed_when_it_ends(store):
    writer = store.create("still going", model="scripted/test")
    record_three(writer)
    writer.flush()
    assert store.verify(writer.trace_id).ok
    assert not (store.trace_dir(writer.trace_id) / "seal.json").exists()
    writer.finish("failed", error={"code": "x", "message": "y"})
    assert store.verify(writer.trace_id).ok and (store.trace_dir(writer.trace_id) / "seal.json").exists()


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
    assert sorted(p.name for p in writer.dir.iterdir()) == [".reserve", "meta.json", "owner.json", "steps.jsonl"]
    writer.record_step(text="fine")
    assert store.verify(writer.trace_id).ok


def test_naive_times_are_taken_as_utc(store: TraceStore) -> None:
    writer = store.create("x", model="m")
    naive = datetime(2025, 1, 1, 12, 0, 0)
    writer.record_step(started_at=naive, finished_at=naive)
    [step] = store.load(writer.trace_id).steps  # a reader in this process waits for the write
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


# ------------------------------------------------------------- runs a stopped server left unfinished

GONE = {"pid": 4_000_000, "start_time": 1, "boot_id": "b", "pid_ns": "n"}  # the server that wrote it


def left_by_a_dead_server(tmp_path: Path, steps: int = 2, owner: dict | None = GONE,
                          hold: str | None = None) -> TraceStore:
    """A data dir holding one unfinished trace written by another process (copied out of the
    directory this process wrote it in, so nothing here knows it as open)."""
    writer = TraceStore(tmp_path / "writing").create("fill the form", model="scripted", max_steps=10)
    for index in range(steps):
        writer.record_step(before=frame("white"), after=frame("gray", (10 * index, 0, 20, 20)), text=f"step {index}",
                           usage={"input_tokens": 100, "output_tokens": 5})
    if hold:
        writer.hold(hold)
    writer.flush()  # what the dead server had written
    target = tmp_path / "data" / "traces" / writer.trace_id
    shutil.copytree(writer.dir, target)
    if owner is None:
        (target / OWNER_FILE).unlink()
    else:
        (target / OWNER_FILE).write_text(json.dumps(owner))
    return TraceStore(tmp_path / "data")


def nobody_alive(_owner) -> bool:
    return False


def test_a_run_whose_server_died_is_closed_as_interrupted_at_its_last_record(tmp_path: Path) -> None:
    store = left_by_a_dead_server(tmp_path)
    [trace_id] = [m.trace_id for m in store.list_traces()]
    before = store.load(trace_id)
    assert before.meta.status == "running" and before.meta.finished_at is None

    # Judged against the real process table: pid 4000000 does not run here.
    assert store.close_interrupted() == [trace_id]

    after = TraceStore(store.root).load(trace_id)
    assert after.meta.status == "interrupted" and "interrupted" in FINAL_STATUSES
    assert after.meta.finished_at == before.steps[-1].finished_at
    assert after.meta.error.code == "interrupted" and "server stopped" in after.meta.error.message
    assert (after.meta.steps, after.meta.head_hash, after.meta.usage) == (2, before.meta.head_hash, before.meta.usage)
    assert after.steps == before.steps
    assert store.verify(trace_id).ok
    assert (store.trace_dir(trace_id) / "seal.json").exists()  # its meta as closed is sealed
    assert not (store.trace_dir(trace_id) / OWNER_FILE).exists()
    assert store.close_interrupted() == []  # once


def test_a_film_cut_short_with_its_run_is_removed_when_the_run_is_closed(tmp_path: Path) -> None:
    store = left_by_a_dead_server(tmp_path)
    [trace_id] = [m.trace_id for m in store.list_traces()]
    directory = store.trace_dir(trace_id)
    for name in (".raw-video.mp4", "chapters.vtt", "captions.vtt", "chapters.ffmeta"):  # kill -9 while filming
        (directory / name).write_bytes(b"" if name.endswith(".vtt") else b"partial")
    assert store.close_interrupted() == [trace_id]
    assert sorted(p.name for p in directory.iterdir() if not p.name.startswith("step-")) == [
        "meta.json", "seal.json", "steps.jsonl"]
    assert store.verify(trace_id).ok


def test_the_screenshots_of_a_step_cut_short_are_removed_when_the_run_is_closed(tmp_path: Path) -> None:
    """kill -9 between storing a step's images and appending its record (seen in CI)."""
    store = left_by_a_dead_server(tmp_path)
    [trace_id] = [m.trace_id for m in store.list_traces()]
    directory = store.trace_dir(trace_id)
    recorded = sorted(p.name for p in directory.glob("step-*.png"))
    (directory / "step-0003-before.png").write_bytes(b"\x89PNG half")
    (directory / "step-0003-after.png").write_bytes(b"\x89PNG half")
    (directory / "notes.txt").write_text("not a step's image: still reported")
    assert store.close_interrupted(nobody_alive) == [trace_id]
    assert sorted(p.name for p in directory.glob("step-*.png")) == recorded
    assert store.verify(trace_id).reason == "notes.txt: in the trace but named by nothing in its chain"
    (directory / "notes.txt").unlink()
    assert store.verify(trace_id).ok


def test_unrecorded_step_images_are_the_step_screenshots_no_record_names() -> None:
    records = [{"before_png": "step-0001-before.png", "after_png": "step-0001-after.png"},
               {"before_png": "step-0001-after.png", "after_png": None}]
    present = ["step-0001-before.png", "step-0001-after.png", "step-0002-after.png", "step-0002-before.png",
               "meta.json", "step-0002-after.png.bak", ".step-0003-after.png.1a2b.tmp"]
    assert unrecorded_step_images(present, records) == ["step-0002-after.png", "step-0002-before.png"]


def test_a_run_without_steps_ends_when_it_started(tmp_path: Path) -> None:
    store = left_by_a_dead_server(tmp_path, steps=0)
    [trace_id] = store.close_interrupted(nobody_alive)
    meta = store.meta(trace_id)
    assert meta.status == "interrupted" and meta.finished_at == meta.started_at and meta.duration_s == 0
    assert store.verify(trace_id).ok


def test_a_run_waiting_for_approval_is_interrupted_too(tmp_path: Path) -> None:
    store = left_by_a_dead_server(tmp_path, hold="needs_confirmation")
    [trace_id] = store.close_interrupted(nobody_alive)
    assert store.meta(trace_id).status == "interrupted"


def test_a_trace_whose_writer_still_runs_is_left_alone(tmp_path: Path) -> None:
    """Another server on the same data dir, mid-run."""
    store = left_by_a_dead_server(tmp_path)
    asked = []
    assert store.close_interrupted(lambda owner: asked.append(owner) or True) == []
    assert asked and asked[0].pid == GONE["pid"]
    assert [m.status for m in store.list_traces()] == ["running"]


def test_a_trace_this_process_is_writing_is_never_touched(tmp_path: Path) -> None:
    store = TraceStore(tmp_path)
    writer = store.create("live", model="scripted")
    writer.record_step(text="working")
    assert TraceStore(tmp_path).close_interrupted(nobody_alive) == []  # even if /proc said otherwise
    writer.record_step(text="still working")
    writer.finish("done")
    assert store.meta(writer.trace_id).status == "done" and store.verify(writer.trace_id).ok
    assert not (writer.dir / OWNER_FILE).exists()  # a finished trace names no writer


def test_a_trace_from_before_owner_records_is_closed(tmp_path: Path) -> None:
    store = left_by_a_dead_server(tmp_path, owner=None)
    assert len(store.close_interrupted(lambda owner: True)) == 1


def test_a_step_written_just_before_the_crash_is_counted(tmp_path: Path) -> None:
    """The server died between steps.jsonl and meta.json: the record is whole and chained."""
    store = left_by_a_dead_server(tmp_path, steps=3)
    [meta] = store.list_traces()
    three = store.meta(meta.trace_id)
    stale = three.model_copy(update={"steps": 2, "head_hash": store.load(meta.trace_id).steps[1].hash,
                                     "usage": Usage(input_tokens=200, output_tokens=10)})
    (store.trace_dir(meta.trace_id) / "meta.json").write_text(stale.model_dump_json())
    assert store.verify(meta.trace_id).ok

    store.close_interrupted(nobody_alive)
    closed = store.load(meta.trace_id)
    assert closed.meta.steps == 3 and closed.meta.head_hash == closed.steps[2].hash
    assert closed.meta.usage.input_tokens == 300 and closed.meta.finished_at == closed.steps[2].finished_at
    assert store.verify(meta.trace_id).ok


def test_finished_traces_are_not_touched(store: TraceStore, trace_id: str) -> None:
    before = (store.trace_dir(trace_id) / "meta.json").read_bytes()
    assert store.close_interrupted(nobody_alive) == []
    assert (store.trace_dir(trace_id) / "meta.json").read_bytes() == before


def test_an_interrupted_run_reads_as_such_in_the_report_and_junit(tmp_path: Path) -> None:
    store = left_by_a_dead_server(tmp_path)
    [trace_id] = store.close_interrupted(nobody_alive)
    trace = store.load(trace_id)
    view = trace_view(trace, store.verify(trace_id), Files(lambda name: name))
    assert view["status"] == "interrupted" and view["evidence"]["text"].startswith("Evidence verified")
    assert "server stopped before this run finished" in view["error"]
    junit = render_junit(trace.meta, trace.steps)
    assert 'type="interrupted"' in junit and 'failures="1"' in junit


def test_traces_are_the_servers_alone_whatever_the_umask(tmp_path):
    data = tmp_path / "data"
    old = os.umask(0)
    try:
        TraceStore(data).create("look", model="scripted")
        (data / "traces").chmod(0o755)  # as an older glassdesk left it
        TraceStore(data).create("look again", model="scripted")
    finally:
        os.umask(old)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "traces").stat().st_mode) == 0o700


# ------------------------------------------------------------- writing off the run's hot path


def test_recording_does_not_wait_for_the_disk_but_finishing_does(store: TraceStore, monkeypatch) -> None:
    gate = threading.Event()
    real = writer_module.atomic_write

    def held_png(path: Path, data: bytes) -> None:
        if path.suffix == ".png":
            assert gate.wait(20)
        real(path, data)

    monkeypatch.setattr(writer_module, "atomic_write", held_png)
    writer = store.create("x", model="m")
    for index in range(3):
        writer.record_step(before=frame("white"), after=frame("gray", (10 * index, 0, 20, 20)), text=f"step {index}")
    # all three recorded while no screenshot could be written yet
    assert not list(writer.dir.glob("*.png")) and json.loads((writer.dir / "meta.json").read_bytes())["steps"] == 0
    gate.set()
    writer.finish("done")
    meta = json.loads((writer.dir / "meta.json").read_bytes())  # straight from the disk
    assert meta["steps"] == 3 and meta["status"] == "done"
    trace = store.load(writer.trace_id)
    assert [s.text for s in trace.steps] == ["step 0", "step 1", "step 2"]
    assert [s.prev_hash for s in trace.steps[1:]] == [s.hash for s in trace.steps[:-1]]
    assert store.verify(writer.trace_id).ok


def test_a_reader_in_this_process_sees_every_step_recorded(store: TraceStore) -> None:
    writer = store.create("x", model="m")
    for index in range(5):
        writer.record_step(after=frame("gray", (index, 0, 20, 20)), text=f"step {index}")
    assert store.meta(writer.trace_id).steps == 5 and len(store.load(writer.trace_id).steps) == 5
    assert store.verify(writer.trace_id).ok


def test_a_failed_write_leaves_a_trace_that_verifies_without_it(store: TraceStore, monkeypatch) -> None:
    real = writer_module.atomic_write

    def disk_full_at_step_two(path: Path, data: bytes) -> None:
        if path.name == "step-0002-after.png":
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(writer_module, "atomic_write", disk_full_at_step_two)
    writer = store.create("x", model="m")
    writer.record_step(before=frame("white"), after=frame("gray"), text="one")
    writer.record_step(before=frame("gray"), after=frame("navy"), text="two")
    writer.flush()
    with pytest.raises(StorageFull, match="is full"):  # typed: a 507 with what is full, not a 500
        writer.record_step(text="three")
    writer.finish("failed")
    meta = store.meta(writer.trace_id)
    assert meta.steps == 1 and meta.status == "failed"
    assert [s.text for s in store.load(writer.trace_id).steps] == ["one"]
    assert store.verify(writer.trace_id).ok


def test_the_chain_file_both_stores_append_with_rewrites_it_whole_and_each_record_names_the_one_before(tmp_path):
    from vision.trace.files import ChainFile
    from vision.trace.records import GENESIS_HASH, walk_chain

    chain = ChainFile(tmp_path / "records.jsonl")
    first = chain.append({"kind": "started", "index": 1})
    second = chain.append({"kind": "finished", "index": 2})
    assert first["prev_hash"] == GENESIS_HASH and second["prev_hash"] == first["hash"] and chain.head == second["hash"]
    lines = (tmp_path / "records.jsonl").read_bytes().splitlines()
    assert [(w.number, w.problems) for w in walk_chain(lines)] == [(1, ()), (2, ())]
    # carried on from what is on disk (a QA run closed as interrupted by the next server)
    ChainFile(tmp_path / "records.jsonl", b"\n".join(lines) + b"\n", head=second["hash"]).append({"index": 3})
    assert [w.problems for w in walk_chain((tmp_path / "records.jsonl").read_bytes().splitlines())] == [(), (), ()]
