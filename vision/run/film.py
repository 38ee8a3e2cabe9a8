"""A run's film (``record_video``): refused before anything is made where it cannot be filmed,
started with the run, and sealed into its trace after the last step as a video receipt (its
chapters, captions and SHA-256 chained; desktop.x11.receipt makes it). A film that will not start
or cannot be finished costs the run nothing but the film: the answer's ``video_note`` says why."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from vision.models import VideoOut
from vision.trace.records import redact
from vision.trace.store import TraceStore
from vision.trace.writer import TraceWriter

if TYPE_CHECKING:
    from desktop.x11.receipt import VideoReceipt
    from desktop.x11.recorder import VideoFormat

log = logging.getLogger("glassdesk.loop")

# Makes a run's video receipt: (trace directory, format, title) -> an unstarted VideoReceipt.
Film = Callable[[Path, "VideoFormat", str], "VideoReceipt"]

# Free space a filmed run needs under the data dir before it starts: a 1080p MP4 at 10 fps takes
# 1-5 MiB a minute (a busy screen up to ~20), and its receipt a second copy while it is made, so
# 256 MiB films a long run with room to spare; below it the run is refused with storage_full.
FILM_ROOM_BYTES = 256 * 2**20


def check_can_film(film: Film | None, store: TraceStore, session_id: str) -> Film:
    """Refuse a filmed run before anything is made: a display this server cannot film (it runs
    elsewhere), no ffmpeg, or no room for the film. The film, when it can be made."""
    if film is None:
        from desktop.errors import RecorderUnavailable

        raise RecorderUnavailable(f"session {session_id}'s display cannot be filmed by this server "
                                  "(it runs elsewhere); run without record_video")
    from desktop.x11.recorder import find_ffmpeg

    find_ffmpeg()
    store.check_room(FILM_ROOM_BYTES)
    return film


def start_film(film: Film, trace: TraceWriter, instruction: str, video_format: VideoFormat,
               secrets: list[str]) -> tuple[VideoReceipt | None, str | None]:
    """The run filmed from now: (the receipt being made, None), or (None, why there is none)."""
    from desktop.errors import RecorderError

    receipt = film(trace.dir, video_format, redact(instruction, secrets))
    try:
        receipt.start()
    except RecorderError as exc:
        log.warning("run %s: no video: %s", trace.trace_id, exc.message)
        return None, f"no video: {exc.message}"
    return receipt, None


def seal_film(receipt: VideoReceipt, trace: TraceWriter) -> tuple[VideoOut | None, str | None]:
    """The receipt made and chained into the trace after the last step: (what the answer says of
    it, None), or (None, why there is none; what was made of it removed, or the trace would not
    verify)."""
    try:
        files = receipt.finish()
        seal = trace.seal_video(file=files.video.name, fmt=receipt.fmt, chapters_file=files.chapters.name,
                                captions_file=files.captions.name, duration_s=files.duration_s,
                                chapters=files.chapter_count, clicks=files.clicks, notes=files.notes)
    except Exception as exc:  # the run's verdict stands without its film
        log.warning("run %s: no video: %s", trace.trace_id, exc)
        receipt.abandon()
        return None, f"no video: {getattr(exc, 'message', None) or exc}"
    base = f"/api/v1/traces/{trace.trace_id}/video"
    return VideoOut(url=f"{base}/{seal.file}", sha256=seal.sha256, format=seal.format,
                    chapters_url=f"{base}/{seal.chapters_file}", captions_url=f"{base}/{seal.captions_file}",
                    duration_s=seal.duration_s, chapters=seal.chapters, clicks=seal.clicks, notes=seal.notes), None
