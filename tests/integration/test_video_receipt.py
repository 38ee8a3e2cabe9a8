"""A vision run's video receipt on the real desktop: the film, its chapters, a ring where each
click landed (found on frames ffmpeg extracts), the captions, and the SHA-256 in the trace's chain."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.fakes.testpage import at

pytestmark = pytest.mark.x11

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "video"


def ring_pixels(png: Path) -> np.ndarray:
    """The mask of the ring's colour (after H.264's chroma subsampling: loosely magenta)."""
    rgb = np.asarray(Image.open(png).convert("RGB")).astype(int)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (r > 170) & (b > 170) & (g < 110)


def ring_centre(png: Path) -> tuple[float, float] | None:
    ys, xs = np.nonzero(ring_pixels(png))
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
    assert len(titles) == len(script) and titles[0].startswith("step 1:") and f"click at {bx},{by}" in titles[0]
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
        found = [(t, c) for t, p in shots if (c := ring_centre(p)) is not None]
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
