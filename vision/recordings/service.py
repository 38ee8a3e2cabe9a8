"""Session recordings: a video receipt of a session's display between a start and a stop, whatever
acts on it meanwhile (direct actions, vision runs, QA verbs, a person who took over).

``SessionRecordings`` is the service of the catalogue's ``recording_start`` / ``recording_stop`` /
``recording_status`` (vision/recordings/ops.py: REST, MCP, client from one declaration). Each
recording is a directory ``recordings/<recording_id>/`` of the data dir: the film with its chapters
and captions (desktop/x11/receipt.py) and ``recording.json``, which names each file with its
SHA-256 (served by ``GET /api/v1/recordings/{id}`` and ``.../{name}``).

A recording a stopped server was making (its ``owner.json`` names a process that is gone) is closed
as ``interrupted`` when the next server starts (``close_interrupted``): the film is fragmented, so
what was filmed up to its last whole fragment plays, and is kept as the recording's video, without
chapters or marks (they were made into the film only at its stop); the scratch files go.

Every action the session performs while filmed is one chapter (``click at (640, 412)``), with a ring
where a click landed. Typed text is captioned by its length only ("typed 12 characters"): at the
desktop's level a run's secrets are already filled in, so the text itself could be one. A vision run
or QA verb that is filmed itself (``record_video``) captions its typing with its placeholders.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from desktop.errors import RecorderError, RecorderUnavailable
from desktop.x11.procs import ProcessId
from desktop.x11.receipt import describe, remove_unfinished
from desktop.x11.recorder import VideoFormat
from vision.errors import NotRecording, RecordingInProgress, RecordingNotFound
from vision.models import Recording, VideoOut
from vision.trace.files import OWNER_FILE, atomic_write, close_orphans, write_owner

log = logging.getLogger("glassdesk.recording")

MANIFEST = "recording.json"
INTERRUPTED_NOTE = ("the server stopped while this was filmed: the film ends at its last whole fragment, "
                    "with no chapters, rings or captions in it")


class _Active:
    def __init__(self, info: Recording, receipt, session, watcher):
        self.info, self.receipt, self.session, self.watcher = info, receipt, session, watcher


class SessionRecordings:
    """One recording at a time per session; started and stopped by whoever calls."""

    def __init__(self, desktops, data_dir: Path):
        self.desktops = desktops
        self.root = Path(data_dir) / "recordings"
        self._active: dict[str, _Active] = {}
        self._lock = threading.Lock()

    def recording_start(self, session_id: str | None, video_format: VideoFormat = "mp4",
                        title: str | None = None) -> Recording:
        from desktop.session.manager import Session
        from desktop.x11.receipt import VideoReceipt
        from desktop.x11.recorder import find_ffmpeg

        session = self.desktops.existing(session_id)
        if not isinstance(session, Session):
            raise RecorderUnavailable(f"session {session.id}'s display cannot be filmed by this server (it runs "
                                      "elsewhere)")
        find_ffmpeg()
        with self._lock:
            if session.id in self._active:
                raise RecordingInProgress(f"session {session.id} is already being recorded "
                                          f"({self._active[session.id].info.recording_id}); stop it first")
            started = datetime.now(UTC)
            recording_id = f"{started:%Y%m%dT%H%M%S}-{session.id}-{secrets.token_hex(3)}"
            directory = self.root / recording_id
            directory.mkdir(parents=True, mode=0o700)
            receipt = VideoReceipt(session.display, directory, fmt=video_format, title=title or f"session {session.id}")
            try:
                receipt.start()
            except RecorderError:
                receipt.abandon()
                directory.rmdir()
                raise
            info = Recording(recording_id=recording_id, session_id=session.id, status="recording",
                             format=video_format, title=title, started_at=started)

            def watch(action: dict, at: float) -> None:
                active.info.actions += 1
                receipt.mark_input(f"{active.info.actions}. {describe(action)}", action, at=at)

            active = self._active[session.id] = _Active(info, receipt, session, watch)
            session.input_watchers.append(watch)
            write_owner(directory)
            self._write(info)
            return info.model_copy()

    def note_operator(self, session_id: str, gestures) -> None:
        """A person's input during a take-over, marked on the session's film if it is being filmed."""
        with self._lock:
            active = self._active.get(session_id)
        if active is None:
            return
        for gesture in gestures:
            action = gesture.action
            active.info.actions += 1
            active.receipt.mark_input(f"{active.info.actions}. operator {describe(action)}", action, at=gesture.started)

    def recording_stop(self, session_id: str | None) -> Recording:
        session_key = self._key(session_id)
        with self._lock:
            active = self._active.pop(session_key, None)
        if active is None:
            raise NotRecording(f"session {session_key} is not being recorded; start a recording first")
        return self._stop(active)

    def recording_status(self, session_id: str | None) -> Recording | None:
        """The session's recording in progress, or None."""
        session_key = self._key(session_id)
        with self._lock:
            active = self._active.get(session_key)
        return active.info.model_copy() if active is not None else None

    def _key(self, session_id: str | None) -> str:
        return self.desktops.existing(session_id).id

    def _stop(self, active: _Active) -> Recording:
        try:
            active.session.input_watchers.remove(active.watcher)
        except ValueError:
            pass
        info = active.info
        info.status, info.stopped_at = "stopped", datetime.now(UTC)
        try:
            files = active.receipt.finish()
        except RecorderError as exc:
            info.video_note = f"no video: {exc.message}"
        else:
            names = (files.video.name, files.chapters.name, files.captions.name)
            digests = {name: _sha256(files.video.parent / name) for name in names}
            base = f"/api/v1/recordings/{info.recording_id}"
            info.video = VideoOut(url=f"{base}/{names[0]}", sha256=digests[names[0]], format=info.format,
                                  chapters_url=f"{base}/{names[1]}", captions_url=f"{base}/{names[2]}",
                                  duration_s=files.duration_s, chapters=files.chapter_count, clicks=files.clicks,
                                  notes=files.notes)
        self._write(info)
        (self.root / info.recording_id / OWNER_FILE).unlink(missing_ok=True)
        return info.model_copy()

    def close_interrupted(self, alive: Callable[[ProcessId], bool] | None = None) -> list[str]:
        """Close as ``interrupted`` every recording a stopped server was making (see the module's
        docstring; vision.trace.files close_orphans: another server's are left alone); returns their
        ids. This server's own are left out."""

        def unfinished():
            for directory in sorted(self.root.glob("*/")) if self.root.is_dir() else []:
                try:
                    info = Recording.model_validate_json((directory / MANIFEST).read_bytes())
                except (OSError, ValueError):
                    continue
                if info.status == "recording" and info.session_id not in self._active:
                    yield info.recording_id, directory, lambda d=directory, i=info: self._interrupt(d, i)

        return close_orphans(unfinished(), "recording", alive)

    def _interrupt(self, directory: Path, info: Recording) -> None:
        raw = directory / f".raw-video.{info.format}"
        info.status = "interrupted"
        info.stopped_at = datetime.fromtimestamp(raw.stat().st_mtime, UTC) if raw.is_file() else info.started_at
        if raw.is_file() and raw.stat().st_size > 0:
            video = directory / f"video.{info.format}"
            raw.replace(video)
            for name in ("chapters.vtt", "captions.vtt"):
                atomic_write(directory / name, b"WEBVTT\n")
            base = f"/api/v1/recordings/{info.recording_id}"
            info.video = VideoOut(url=f"{base}/{video.name}", sha256=_sha256(video), format=info.format,
                                  chapters_url=f"{base}/chapters.vtt", captions_url=f"{base}/captions.vtt",
                                  duration_s=round((info.stopped_at - info.started_at).total_seconds(), 3),
                                  chapters=0, clicks=0, notes=[INTERRUPTED_NOTE])
            remove_unfinished(directory, keep={video.name, "chapters.vtt", "captions.vtt"})
        else:
            remove_unfinished(directory)
            info.video_note = "no video: the server stopped before anything was filmed"
        self._write(info)
        (directory / OWNER_FILE).unlink(missing_ok=True)

    def session_ended(self, session_id: str) -> None:
        """A deleted session's recording is stopped: its film ends with its display."""
        with self._lock:
            active = self._active.pop(session_id, None)
        if active is not None:
            self._stop(active)

    def close(self) -> None:
        with self._lock:
            active, self._active = list(self._active.values()), {}
        for one in active:
            self._stop(one)

    def _write(self, info: Recording) -> None:
        manifest = json.dumps(info.model_dump(mode="json"), indent=2).encode()
        atomic_write(self.root / info.recording_id / MANIFEST, manifest)

    # ------------------------------------------------------------------ reading

    def get(self, recording_id: str) -> Recording:
        path = self._dir(recording_id) / MANIFEST
        try:
            return Recording.model_validate_json(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise RecordingNotFound(f"no recording {recording_id!r}") from exc

    def file(self, recording_id: str, name: str) -> Path:
        info = self.get(recording_id)
        video = info.video
        names = {video.url.rsplit("/", 1)[1], video.chapters_url.rsplit("/", 1)[1],
                 video.captions_url.rsplit("/", 1)[1]} if video else set()
        if name not in names:
            raise RecordingNotFound(f"recording {recording_id} has no file {name!r}")
        return self._dir(recording_id) / name

    def _dir(self, recording_id: str) -> Path:
        if not recording_id or "/" in recording_id or recording_id.startswith(".") or len(recording_id) > 200:
            raise RecordingNotFound(f"no recording {recording_id!r}")
        return self.root / recording_id


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
