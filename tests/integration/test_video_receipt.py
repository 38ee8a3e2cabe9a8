"""A vision run's video receipt on the real desktop: the film, its chapters, a ring where each
click landed (found on frames ffmpeg extracts), the captions, and the SHA-256 in the trace's chain."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.fakes.rfb import RfbControl
from tests.fakes.testpage import at

pytestmark = pytest.mark.x11

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "video"


def ring_pixels(png: Path) -> np.ndarray:
    """The mask of the ring's colour (after H.264's chroma subsampling: loosely magenta)."""
    rgb = np.asarray(Image.open(png).convert("RGB")).astype(int)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (r > 170) & (b > 170) & (g < 110)


def ring_centre(png: Path, near: tuple[int, int] | None = None) -> tuple[float, float] | None:
    """The centre of the ring colour in a frame, or in the 120 px square around ``near`` (two clicks
    a moment apart show two rings): None when there are too few such pixels to be a ring."""
    mask = ring_pixels(png)
    if near is not None:
        x0, y0 = max(0, near[0] - 60), max(0, near[1] - 60)
        ys, xs = np.nonzero(mask[y0:near[1] + 60, x0:near[0] + 60])
        xs, ys = xs + x0, ys + y0
    else:
        ys, xs = np.nonzero(mask)
    if len(xs) < 100:  # a ring is ~400 px; a few stray pixels are not one
        return None
    return float(xs.mean()), float(ys.mean())


def frames(video: Path, start: float, seconds: float, out: Path) -> list[tuple[float, Path]]:
    """The frames of [start, start + seconds] as PNGs, with their times."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("f-*.png"):
        old.unlink()
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-ss", f"{start:.3f}", "-i", str(video), "-t", f"{seconds:.3f}",
                    "-vf", "fps=10", str(out / "f-%03d.png")], check=True)
    return [(start + (i - 1) / 10, p) for i, p in ((int(p.stem[2:]), p) for p in sorted(out.glob("f-*.png")))]


def probe(video: Path) -> dict:
    done = subprocess.run(["ffprobe", "-v", "error", "-print_format", "json", "-show_chapters", "-show_streams",
                           str(video)], check=True, capture_output=True)
    return json.loads(done.stdout)


def test_a_filmed_run_has_chapters_rings_captions_and_a_chained_sha(vision_api, page, viewport, services):
    bx, by = at(viewport, 1260, 145)   # the Sign in button
    fx, fy = at(viewport, 300, 280)    # the text field
    script = [
        {"action": "click", "x": bx, "y": by},
        {"action": "wait", "duration_ms": 1500},
        {"action": "click", "x": fx, "y": fy},
        {"action": "type", "text": "hi {{word}}"},
        {"action": "key", "keys": ["ctrl+a"]},
        {"action": "wait", "duration_ms": 1500},
        {"action": "done", "answer": "filmed"},
    ]
    r = vision_api.post("/api/v1/sessions/itest/vision/act",
                        json={"instruction": "sign in on film", "model": "scripted", "script": script,
                              "secrets": {"word": "s3cr3t-film"}, "record_video": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done", body
    video = body["video"]
    assert video and video["format"] == "mp4" and video["clicks"] == 2 and video["chapters"] == len(script), body
    trace_id = body["trace_id"]
    trace_dir = services.store.trace_dir(trace_id)
    path = trace_dir / "video.mp4"
    served = vision_api.get(video["url"])
    assert served.status_code == 200 and served.headers["content-type"] == "video/mp4"
    assert served.content == path.read_bytes()
    import hashlib

    assert hashlib.sha256(served.content).hexdigest() == video["sha256"]

    # Chapters: one per step, in the MP4 and in chapters.vtt, titled with the step.
    info = probe(path)
    titles = [c["tags"]["title"] for c in info["chapters"]]
    assert len(titles) == len(script) and titles[0].startswith("step 1:") and f"click at ({bx}, {by})" in titles[0]
    assert {s["codec_name"] for s in info["streams"]} >= {"h264", "mov_text"}
    vtt = vision_api.get(video["chapters_url"])
    assert vtt.status_code == 200 and vtt.text.startswith("WEBVTT") and titles[2] in vtt.text
    captions = (trace_dir / "captions.vtt").read_text()
    assert "typed: hi {{word}}" in captions and "keys: ctrl+a" in captions
    for file in trace_dir.iterdir():  # the secret typed on film is its placeholder everywhere
        assert b"s3cr3t-film" not in file.read_bytes(), file.name

    # A ring where each click landed, within 3 px, in the click's chapter; never on the screen
    # the model saw (the trace's screenshots).
    starts = [float(c["start_time"]) for c in info["chapters"]]
    for step, (x, y) in ((1, (bx, by)), (3, (fx, fy))):
        shots = frames(path, starts[step - 1], 1.5, ARTIFACTS / f"step{step}")
        found = [(t, c) for t, p in shots if (c := ring_centre(p, near=(x, y))) is not None]
        assert found, f"no ring in step {step}'s first 1.5 s"
        for _t, (cx, cy) in found:
            assert abs(cx - x) <= 3 and abs(cy - y) <= 3, (step, (cx, cy), (x, y))
        first = next(p for t, p in shots if t == found[0][0])
        Image.open(first).save(ARTIFACTS / f"ring-step{step}.png")  # for a person to look at (CI keeps artifacts/)
    for step in services.store.load(trace_id).steps:
        for name in (step.before_png, step.after_png):
            if name:
                assert not ring_pixels(trace_dir / name).any(), name
    # Before the first click no ring: the mark belongs to the click, not to the film.
    (still,) = frames(path, 0.0, 0.1, ARTIFACTS / "start")[:1]
    assert ring_centre(still[1]) is None

    # The SHA-256 is in the chain: the trace verifies, and a changed video does not.
    trace = vision_api.get(f"/api/v1/traces/{trace_id}").json()
    assert trace["video"]["sha256"] == video["sha256"]
    assert trace["video"]["prev_hash"] == trace["steps"][-1]["hash"]
    assert trace["meta"]["video_hash"] == trace["video"]["hash"]
    assert vision_api.get(f"/api/v1/traces/{trace_id}/verify").json()["ok"] is True
    original = path.read_bytes()
    try:
        path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        verdict = vision_api.get(f"/api/v1/traces/{trace_id}/verify").json()
        assert verdict["ok"] is False and "video.mp4 does not match its SHA-256" in verdict["reason"]
    finally:
        path.write_bytes(original)
    assert services.store.verify(trace_id).ok
    (trace_dir / "video.json").unlink()
    assert "video.json is missing" in services.store.verify(trace_id).reason


@pytest.mark.serial("a person's input is read off a live film at its timestamps: frames dropped under load")
def test_a_takeover_puts_the_persons_input_on_the_record_and_on_film(vision_api, page, viewport, services,
                                                                    no_paused_run):
    bx, by = at(viewport, 1260, 145)   # the Sign in button
    fx, fy = at(viewport, 300, 280)    # the text field
    run = {"instruction": "sign in, with help", "model": "scripted", "record_video": True, "autopilot": False,
           "script": [{"action": "click", "x": bx, "y": by}, {"action": "done", "answer": "helped"}]}
    first = vision_api.post("/api/v1/sessions/itest/vision/act", json=run)
    assert first.status_code == 200 and first.json()["status"] == "running", first.text
    control = vision_api.post("/api/v1/sessions/itest/takeover", json={"on": True})
    assert control.status_code == 200, control.text
    person = RfbControl(str(vision_api.base_url).rstrip("/"), control.json()["token"])
    try:
        person.click(fx, fy)
        person.sync()
        # A person types once they see the field take the click: x11vnc may inject a pointer event
        # after keys sent right behind it (CI once saw "hi" reach the button focused before).
        page.wait_for(lambda e: e["type"] == "click" and e["target"] == "field")
        person.key(0x68)
        person.key(0x69)  # "hi"
        person.key(0xFFE3, 0x61)  # ctrl+a
        person.sync()
        page.wait_for(lambda e: e["type"] == "input" and e["field"] == "hi")
        # While they have control: the run's counters count their steps, the agent's budget does not.
        view = services.view("itest")
        trace_id = first.json()["trace_id"]
        assert view.step == services.store.meta(trace_id).steps == 4 and view.operator_steps == 3
    finally:
        person.close()
        assert vision_api.post("/api/v1/sessions/itest/takeover", json={"on": False}).status_code == 200
    done = vision_api.post("/api/v1/sessions/itest/vision/act", json={**run, "autopilot": True})
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["status"] == "done", body
    assert [(s["index"], s["by"]) for s in body["steps"]] == [(1, "agent"), (2, "operator"), (3, "operator"),
                                                              (4, "operator"), (5, "agent")]
    trace = services.store.load(trace_id)
    assert [s.by for s in trace.steps] == ["agent", "operator", "operator", "operator", "agent"]
    assert [s.actions for s in trace.steps[1:4]] == [[{"action": "click", "x": fx, "y": fy, "button": "left"}],
                                                     [{"action": "type", "text": "hi"}],
                                                     [{"action": "key", "keys": ["ctrl+a"]}]]
    assert trace.steps[0].finished_at <= trace.steps[1].started_at <= trace.steps[3].finished_at
    assert services.store.verify(trace_id).ok
    report = vision_api.get(f"/api/v1/traces/{trace_id}/report").text
    assert "by the operator" in report

    # On film: the person's click has its ring, their typing its caption, their steps their chapters.
    path = services.store.trace_dir(trace_id) / "video.mp4"
    info = probe(path)
    titles = [c["tags"]["title"] for c in info["chapters"]]
    assert len(titles) == 5 and titles[1] == f"step 2: operator click at ({fx}, {fy})", titles
    assert "typed: hi" in (path.parent / "captions.vtt").read_text()
    shots = frames(path, float(info["chapters"][1]["start_time"]), 1.5, ARTIFACTS / "operator")
    found = [c for _, p in shots if (c := ring_centre(p, near=(fx, fy))) is not None]
    assert found and all(abs(cx - fx) <= 3 and abs(cy - fy) <= 3 for cx, cy in found), (found, (fx, fy))


def test_a_persons_press_lands_on_their_pixel_wherever_the_agent_left_the_pointer(vision_api, page, viewport,
                                                                                  no_paused_run):
    """x11vnc skips a motion to the position it injected last, though the agent's xdotool moved the
    pointer since: a second take-over whose first event is a press on the first one's pixel pressed
    where the agent had left the pointer. The relay tells x11vnc where the pointer is as control begins."""
    fx, fy = at(viewport, 300, 280)    # the text field
    bx, by = at(viewport, 1260, 145)   # the Sign in button
    for take in (1, 2):
        page.clear()
        control = vision_api.post("/api/v1/sessions/itest/takeover", json={"on": True})
        assert control.status_code == 200, control.text
        person = RfbControl(str(vision_api.base_url).rstrip("/"), control.json()["token"])
        try:
            person.click(fx, fy, arrive=False)
            person.sync()
            pressed = page.wait_for(lambda e: e["type"] == "mousedown")
            assert pressed["target"] == "field", (take, pressed)
        finally:
            person.close()
            assert vision_api.post("/api/v1/sessions/itest/takeover", json={"on": False}).status_code == 200
        # The agent moves the pointer elsewhere (x11vnc still holds the person's last pixel).
        page.clear()
        assert vision_api.post("/api/v1/sessions/itest/desktop/click", json={"x": bx, "y": by}).status_code == 200
        assert page.wait_for(lambda e: e["type"] == "mousedown")["target"] == "signin"


def test_a_session_recording_films_whatever_acts_and_marks_each_action(vision_api, page, viewport, services):
    import hashlib

    bx, by = at(viewport, 1260, 145)
    S = "/api/v1/sessions/itest"
    assert vision_api.post(f"{S}/recording/stop").json()["error"]["code"] == "not_recording"
    assert vision_api.get(f"{S}/recording").json() is None
    started = vision_api.post(f"{S}/recording/start", json={"title": "by hand"})
    assert started.status_code == 200 and started.json()["status"] == "recording", started.text
    try:
        again = vision_api.post(f"{S}/recording/start")
        assert again.status_code == 409 and again.json()["error"]["code"] == "recording_in_progress"
        time.sleep(0.5)
        assert vision_api.post(f"{S}/desktop/click", json={"x": bx, "y": by}).status_code == 200
        time.sleep(1.2)
        assert vision_api.post(f"{S}/desktop/type", json={"text": "not-on-film"}).status_code == 200
        assert vision_api.get(f"{S}/recording").json()["actions"] == 2
        time.sleep(0.5)
    finally:
        stopped = vision_api.post(f"{S}/recording/stop")
    assert stopped.status_code == 200, stopped.text
    body = stopped.json()
    assert body["status"] == "stopped" and body["video"]["chapters"] == 2 and body["video"]["clicks"] == 1, body
    video = vision_api.get(body["video"]["url"])
    assert video.headers["content-type"] == "video/mp4"
    assert hashlib.sha256(video.content).hexdigest() == body["video"]["sha256"]
    assert vision_api.get(f"/api/v1/recordings/{body['recording_id']}").json() == body
    captions = vision_api.get(body["video"]["captions_url"]).text
    assert "typed: 11 characters" in captions and "not-on-film" not in captions
    path = services.recordings.file(body["recording_id"], "video.mp4")
    info = probe(path)
    assert [c["tags"]["title"] for c in info["chapters"]] == [f"1. click at ({bx}, {by})", "2. type 11 characters"]
    shots = frames(path, float(info["chapters"][0]["start_time"]), 1.0, ARTIFACTS / "session")
    found = [c for _, p in shots if (c := ring_centre(p, near=(bx, by))) is not None]
    assert found and all(abs(cx - bx) <= 3 and abs(cy - by) <= 3 for cx, cy in found), (found, (bx, by))
