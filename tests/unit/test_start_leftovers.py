"""What a server killed mid-write leaves in the data directory is removed when the next one starts
(no X: the application is built over an empty session manager, as `glassdesk up` builds it)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from desktop.session.manager import SessionManager
from vision.app.service import Glassdesk
from vision.config import VisionConfig
from vision.qa.baselines import UNFINISHED_AGE_S, BaselineStore
from vision.qa.diff import encode_png


def _unfinished(store: BaselineStore, name: str, version: int, age_s: float) -> Path:
    """A version directory as a kill -9 leaves it: its PNG written, its meta.json never."""
    directory = store.root / name / f"v{version}"
    directory.mkdir(parents=True)
    (directory / "page.png").write_bytes(encode_png(np.zeros((4, 4, 3), np.uint8)))
    (directory / ".meta.json.1a2b3c4d.tmp").write_bytes(b'{"id": ')
    then = time.time() - age_s
    os.utime(directory, (then, then))
    return directory


def test_a_start_removes_unfinished_baseline_versions_and_keeps_the_rest(tmp_path):
    data = tmp_path / "data"
    store = BaselineStore(data)
    store.create("home", {"page": encode_png(np.full((4, 4, 3), 200, np.uint8))}, url=None, scope="page", mask=[],
                 mask_boxes=[])
    cut_short = _unfinished(store, "home", 2, age_s=UNFINISHED_AGE_S + 5)
    only_unfinished = _unfinished(store, "gone", 1, age_s=UNFINISHED_AGE_S + 5)
    being_written = _unfinished(store, "busy", 1, age_s=1)  # perhaps another server's, writing it now

    (tmp_path / "sessions").mkdir()
    glassdesk = Glassdesk.build(SessionManager(root=tmp_path / "sessions", max_sessions=1), data_dir=data,
                                config=VisionConfig())
    try:
        assert not cut_short.exists() and not only_unfinished.parent.exists()
        assert being_written.is_dir()
        assert [v.version for v in glassdesk.qa.baselines.versions("home")] == [1]
        assert (store.root / "home" / "v1" / "page.png").is_file()
        # The next version takes the number the unfinished one had, as before.
        assert store.create("home", {"page": encode_png(np.zeros((4, 4, 3), np.uint8))}, url=None, scope="page",
                            mask=[], mask_boxes=[]).version == 2
    finally:
        glassdesk.close()


def _recording_cut_short(root: Path, recording_id: str, film: bytes, owner: dict | None) -> Path:
    """A recording's directory as a kill -9 of its server leaves it: filming, the raw film on disk."""
    import json

    directory = root / "recordings" / recording_id
    directory.mkdir(parents=True)
    (directory / "recording.json").write_text(json.dumps({
        "recording_id": recording_id, "session_id": "default", "status": "recording", "format": "mp4",
        "started_at": "2026-11-28T10:00:00Z", "actions": 3}))
    if film:
        (directory / ".raw-video.mp4").write_bytes(film)
    (directory / "chapters.ffmeta").write_text(";FFMETADATA1\n")
    if owner is not None:
        (directory / "owner.json").write_text(json.dumps(owner))
    return directory


def test_a_start_keeps_what_a_killed_recording_filmed_and_closes_it_as_interrupted(tmp_path):
    import hashlib

    from desktop.x11.procs import this_process

    data = tmp_path / "data"
    filmed = _recording_cut_short(data, "20261128T100000-default-aaaaaa", b"fragmented film" * 100,
                                  {"pid": 1, "start_time": 1, "boot_id": "gone", "pid_ns": ""})
    nothing = _recording_cut_short(data, "20261128T100001-default-bbbbbb", b"", None)
    living = _recording_cut_short(data, "20261128T100002-default-cccccc", b"film", this_process().as_dict())

    (tmp_path / "sessions").mkdir()
    glassdesk = Glassdesk.build(SessionManager(root=tmp_path / "sessions", max_sessions=1), data_dir=data,
                                config=VisionConfig())
    try:
        assert sorted(glassdesk.interrupted) == [filmed.name, nothing.name]
        kept = glassdesk.recordings.get(filmed.name)
        assert kept.status == "interrupted" and kept.stopped_at is not None and "stopped" in kept.video.notes[0]
        video = glassdesk.recordings.file(filmed.name, "video.mp4")
        assert video.read_bytes() == b"fragmented film" * 100
        assert hashlib.sha256(video.read_bytes()).hexdigest() == kept.video.sha256
        assert sorted(p.name for p in filmed.iterdir()) == ["captions.vtt", "chapters.vtt", "recording.json",
                                                           "video.mp4"]
        empty = glassdesk.recordings.get(nothing.name)
        assert empty.status == "interrupted" and empty.video is None and "before anything" in empty.video_note
        assert sorted(p.name for p in nothing.iterdir()) == ["recording.json"]
        # another server on the same data dir is still filming this one: left as it is
        assert glassdesk.recordings.get(living.name).status == "recording"
        assert (living / ".raw-video.mp4").is_file()
    finally:
        glassdesk.close()
