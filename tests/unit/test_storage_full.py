"""A full disk under the data directory (issue 33, item 3), on a real, small tmpfs: a run refused
before it starts is a typed 507 and leaves no directory; a run whose disk fills up mid-run ends,
failed with storage_full, finished and sealed, and verifies; a filmed run checks its room first.
The loop runs on the FakeDesktop (no X); the disk is real."""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from desktop.actions import Click
from desktop.errors import StorageFull, typed_os_error
from tests.fakes.desktop import FakeDesktop
from vision.actions import Done
from vision.config import VisionConfig
from vision.models import ActRequest
from vision.providers.function import FunctionProvider, calls
from vision.run import film as film_module
from vision.run.events import EventBus
from vision.run.loop import Runner
from vision.trace.store import TraceStore

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs takes root")


@pytest.fixture
def small_disk():
    """A 2 MiB tmpfs of the test's own, and a way to fill it to the last byte."""
    mount = Path(tempfile.mkdtemp(prefix="gd-full-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()


def fill(disk: Path, leave: int = 0) -> Path:
    """Write a filler until the disk has at most ``leave`` bytes free."""
    filler = disk / f"filler-{len(list(disk.glob('filler-*')))}"
    with open(filler, "wb") as fh:
        try:
            while os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize > leave:
                fh.write(b"\0" * 4096)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_a_run_on_a_full_disk_is_refused_typed_and_leaves_no_directory(small_disk):
    store = TraceStore(small_disk)
    store.create("made before the disk filled", model="m").finish("done")
    fill(small_disk)
    with pytest.raises(StorageFull) as refused:
        store.create("never starts", model="m")
    assert refused.value.status == 507 and refused.value.code == "storage_full"
    assert str(store.traces_dir) in refused.value.message and "MiB free" in refused.value.message
    assert len(list(store.traces_dir.iterdir())) == 1  # the earlier trace, and no empty directory


def test_a_run_whose_disk_fills_up_ends_failed_finished_and_sealed(small_disk):
    store = TraceStore(small_disk)
    desktop = FakeDesktop()
    filled: list[Path] = []

    def click_then_fill(action) -> None:
        if not filled:
            filled.append(fill(small_disk))

    desktop.during_perform = click_then_fill
    provider = FunctionProvider(lambda ctx: calls(Click(x=10 * ctx.turn, y=20), text=f"click {ctx.turn}")
                                if ctx.turn < 5 else calls(Done(answer="never")))
    runner = Runner(desktop, store, VisionConfig(), EventBus())
    # Steps are written off the run's thread: the loss is met at the next step (the call raises the
    # 507) or when the run ends (its answer says failed); either way, never "done".
    try:
        result = runner.act(ActRequest(instruction="click until the disk is full", max_steps=8), provider=provider)
        error = result.error
        assert result.status == "failed", result
    except StorageFull as exc:
        error = exc.to_dict()
    assert error["code"] == "storage_full" and "is full" in error["message"], error
    [meta] = store.list_traces()
    assert meta.status == "failed" and meta.finished_at is not None
    assert meta.error.code == "storage_full" and "is full" in meta.error.message
    assert store.verify(meta.trace_id).ok  # sealed to what was written
    assert runner.state is None  # nothing left "running"
    filled[0].unlink()  # space again: the next run works as before
    result = runner.act(ActRequest(instruction="once more"), provider=FunctionProvider(lambda ctx: calls(Done())))
    assert result.status == "done"


def test_a_filmed_run_is_refused_before_anything_is_made_without_room_for_its_film(small_disk, monkeypatch):
    store = TraceStore(small_disk)
    runner = Runner(FakeDesktop(), store, VisionConfig(), EventBus(), film=lambda *args: None)
    monkeypatch.setattr("desktop.x11.recorder.find_ffmpeg", lambda: "/usr/bin/ffmpeg")
    assert film_module.FILM_ROOM_BYTES > 2 * 2**20  # more than the whole of this disk
    with pytest.raises(StorageFull, match="256 MiB needed"):
        runner.act(ActRequest(instruction="film me", record_video=True),
                   provider=FunctionProvider(lambda ctx: calls(Done())))
    assert store.list_traces() == []


def test_a_full_disk_that_escapes_an_operation_is_storage_full_and_any_other_os_error_a_crash(tmp_path):
    typed = typed_os_error(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "video.mp4")))
    assert isinstance(typed, StorageFull) and str(tmp_path / "run") in typed.message
    assert isinstance(typed_os_error(OSError(errno.EDQUOT, "Disk quota exceeded")), StorageFull)
    assert typed_os_error(OSError(errno.EACCES, "Permission denied", "/x")) is None
    assert typed_os_error(ValueError("no")) is None
