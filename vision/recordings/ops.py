"""Session recordings as operations of the catalogue (desktop.ops.declare): start, stop and status
of a session's video receipt, each a REST route under /sessions/{id}/recording, an MCP tool and a
client method, from this one declaration (the service: vision.recordings.service.SessionRecordings)."""

from __future__ import annotations

from desktop.ops.declare import Hints, Operation, Rest, Tool
from vision.models import Recording, RecordingStart

TAGS = ("recordings",)


def _text(_request, answer: Recording) -> str:
    if answer.status == "recording":
        return (f"recording {answer.recording_id} of session {answer.session_id}: filming since "
                f"{answer.started_at:%H:%M:%S} UTC, {answer.actions} action(s) marked")
    if answer.video is None:
        return f"recording {answer.recording_id} {answer.status}; {answer.video_note or 'no video'}"
    video = answer.video
    return (f"recording {answer.recording_id} {answer.status}: {video.url} ({video.duration_s:.1f} s, {video.chapters} "
            f"chapters, {video.clicks} clicks marked), sha256 {video.sha256}; chapters {video.chapters_url}, "
            f"captions {video.captions_url}")


START = ("Manages the VISIBLE desktop sessions: starts filming one, a video receipt of its display (MP4 by "
         "default, 10 fps). Every action done on it until session_record_stop (yours, a vision run's, a QA "
         "verb's, a person's during a take-over) becomes a chapter, with a ring where each click landed; typed "
         "text is captioned by its length only. Nothing is drawn on the desktop itself.")
STOP = ("Manages the VISIBLE desktop sessions: stops filming one and makes the receipt. Returns the video's URL "
        "and SHA-256, its chapters (WebVTT) and captions.")

OPERATIONS: tuple[Operation, ...] = (
    Operation("recordings", "recording_start", RecordingStart, Recording, acts=False,
              rest=Rest("POST", "/recording/start", summary="start filming the session's display: a video receipt "
                        "with a chapter and a mark per action", tags=TAGS, optional_body=True),
              tool=Tool("session_record_start", "Start filming the visible desktop", START, Hints(open_world=False),
                        _text, summary=False, group="desktop")),
    Operation("recordings", "recording_stop", None, Recording, acts=False,
              rest=Rest("POST", "/recording/stop", summary="stop filming and make the receipt: the video, its "
                        "chapters and captions, with their SHA-256", tags=TAGS),
              tool=Tool("session_record_stop", "Stop filming the visible desktop", STOP, Hints(open_world=False),
                        _text, summary=False, group="desktop")),
    Operation("recordings", "recording_status", None, Recording | None, acts=False,
              rest=Rest("GET", "/recording", summary="the session's recording in progress, or null", tags=TAGS)),
)
