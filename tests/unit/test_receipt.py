"""The video receipt's pure parts: chapters, captions, ffmpeg's metadata, the ring and its filter."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from desktop.x11.receipt import (
    RING_RADIUS,
    RING_RGB,
    Mark,
    captions_vtt,
    chapters_vtt,
    close_chapters,
    ffmetadata,
    finish_argv,
    ring_filter,
    ring_png,
)
from vision.run.loop import step_title


def test_chapters_end_where_the_next_begins_and_the_last_at_the_end():
    chapters = close_chapters([(2.5, "step 2: b"), (0.0, "step 1: a"), (2.5, "step 3: c")], 9.0)
    # Two in the same instant: the first keeps a tenth of a second, the next starts after it (a film
    # instant in two chapters showed two steps playing at once in the run viewer).
    assert [(c.start, c.end, c.title) for c in chapters] == [(0.0, 2.5, "step 1: a"), (2.5, 2.6, "step 2: b"),
                                                             (2.6, 9.0, "step 3: c")]
    assert all(a.end <= b.start for a, b in zip(chapters, chapters[1:]))
    vtt = chapters_vtt(chapters)
    assert vtt.startswith("WEBVTT\n\n1\n00:00:00.000 --> 00:00:02.500\nstep 1: a\n")
    assert "00:00:02.600 --> 00:00:09.000\nstep 3: c" in vtt


def test_a_title_cannot_break_a_cue_or_the_metadata():
    (chapter,) = close_chapters([(0.0, "two\n\nlines --> and = ; # \\")], 1.0)
    assert chapter.title == "two lines -> and = ; # \\"
    meta = ffmetadata([chapter], title="run")
    assert meta.startswith(";FFMETADATA1\ntitle=run\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=1000\n")
    assert "title=two lines -> and \\= \\; \\# \\\\\n" in meta


def test_captions_for_typing_and_keys_only_and_stacked_when_at_once():
    marks = [Mark(1.0, "click", 5, 5), Mark(2.0, "type", text="hi {{word}}"), Mark(2.1, "key", text="ctrl+a"),
             Mark(9.0, "key", text="Return")]
    vtt = captions_vtt(marks, 10.0)
    assert "click" not in vtt
    assert "00:00:02.000 --> 00:00:04.000\ntyped: hi {{word}}" in vtt  # the next came at once: shown together
    assert "00:00:02.100 --> 00:00:04.100\nkeys: ctrl+a" in vtt
    assert "00:00:09.000 --> 00:00:11.000\nkeys: Return" in vtt


def test_the_ring_is_centred_on_its_middle_pixel():
    image = np.asarray(Image.open(io.BytesIO(ring_png())).convert("RGBA"))
    assert image.shape[:2] == (2 * RING_RADIUS + 1, 2 * RING_RADIUS + 1)
    ys, xs = np.nonzero(image[..., 3] > 0)
    assert abs(xs.mean() - RING_RADIUS) < 0.5 and abs(ys.mean() - RING_RADIUS) < 0.5
    assert tuple(image[RING_RADIUS, 0, :3]) == RING_RGB and image[RING_RADIUS, RING_RADIUS, 3] == 0  # hollow


def test_each_click_gets_an_overlay_enabled_for_its_second_at_its_pixel():
    graph = ring_filter([Mark(1.25, "click", 100, 200), Mark(3.0, "click", 40, 50)])
    assert graph.startswith("[1:v]split=2[r0][r1];")
    assert f"[0:v][r0]overlay=x={100 - RING_RADIUS}:y={200 - RING_RADIUS}:enable='between(t,1.25,2.25)'" in graph
    assert "[v0][r1]overlay=x=22:y=32:enable='between(t,3.0,4.0)'" in graph and graph.endswith("[v1]null[out]")
    assert ring_filter([]) == ""
    assert ring_filter([], burn="captions.vtt").startswith("[0:v]subtitles=captions.vtt:")


def test_without_a_click_the_film_is_remuxed_not_reencoded():
    argv = finish_argv("raw.mp4", "video.mp4", fmt="mp4", clicks=[], burn=False, fps=10, duration=3.0)
    assert argv[argv.index("-c:v") + 1] == "copy" and "-filter_complex" not in argv
    assert argv[argv.index("-c:s") + 1] == "mov_text" and argv[argv.index("-map_chapters") + 1] == "1"
    webm = finish_argv("raw.webm", "video.webm", fmt="webm", clicks=[Mark(1, "click", 1, 1)], burn=True, fps=10,
                       duration=3.0)
    assert webm[webm.index("-c:v") + 1] == "libvpx" and webm[webm.index("-c:s") + 1] == "webvtt"
    assert webm[webm.index("-map_chapters") + 1] == "2"  # the ring is input 1


def test_a_steps_title_says_what_it_did_with_placeholders():
    actions = [{"action": "click", "x": 3, "y": 4}, {"action": "type", "text": "{{pw}}"},
               {"action": "key", "keys": ["ctrl+a", "Delete"]}, {"action": "screenshot"}]
    assert step_title(2, "Log  in\n", actions) == 'step 2: Log in (click at (3, 4); type "{{pw}}"; key ctrl+a Delete)'
    assert step_title(1, "", []) == "step 1: looked"


def test_the_seal_chains_the_video_after_the_last_step_and_verify_checks_it(tmp_path):
    from vision.trace.store import TraceStore

    store = TraceStore(tmp_path)
    writer = store.create("film it", model="scripted")
    writer.record_step(text="one", actions=[{"action": "click", "x": 1, "y": 2}])
    writer.record_step(text="two", actions=[{"action": "type", "text": "hi"}], by="operator")
    for name, data in (("video.mp4", b"film"), ("chapters.vtt", b"WEBVTT\n"), ("captions.vtt", b"WEBVTT\n")):
        (writer.dir / name).write_bytes(data)
    seal = writer.seal_video(file="video.mp4", fmt="mp4", chapters_file="chapters.vtt", captions_file="captions.vtt",
                             duration_s=1.0, chapters=2, clicks=1)
    writer.finish("done")
    trace = store.load(writer.trace_id)
    assert [s.by for s in trace.steps] == ["agent", "operator"]
    assert trace.video == seal and seal.prev_hash == trace.steps[-1].hash == trace.meta.head_hash
    assert trace.meta.video_hash == seal.hash and store.verify(writer.trace_id).ok
    assert store.video_file(writer.trace_id, "captions.vtt").read_bytes() == b"WEBVTT\n"

    (writer.dir / "captions.vtt").write_bytes(b"WEBVTT\n\nchanged")
    assert store.verify(writer.trace_id).reason == "video: captions.vtt does not match its SHA-256"
    (writer.dir / "captions.vtt").write_bytes(b"WEBVTT\n")
    sealed = (writer.dir / "video.json").read_bytes()
    (writer.dir / "video.json").write_bytes(sealed.replace(b'"clicks":1', b'"clicks":0'))
    assert store.verify(writer.trace_id).reason == "video: video.json's content does not match its hash"
    (writer.dir / "video.json").unlink()
    assert "video.json is missing" in store.verify(writer.trace_id).reason


def test_a_trace_without_a_film_verifies_as_before(tmp_path):
    from vision.trace.store import TraceStore

    store = TraceStore(tmp_path)
    writer = store.create("no film", model="scripted")
    writer.record_step(text="one")
    writer.finish("done")
    assert store.verify(writer.trace_id).ok and store.load(writer.trace_id).video is None
