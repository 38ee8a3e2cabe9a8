"""What a server killed mid-write leaves in the data directory is removed when the next one starts
(no X: the application is built over an empty session manager, as `glassdesk up` builds it)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from desktop.session.manager import SessionManager
from vision.config import VisionConfig
from vision.qa.baselines import UNFINISHED_AGE_S, BaselineStore
from vision.qa.diff import encode_png
from vision.service import Glassdesk


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
