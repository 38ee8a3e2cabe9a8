"""A video receipt: a recording of the display with a chapter per step, a ring at every click and
captions for what was typed, made for a reviewer to read.

``VideoReceipt`` wraps a ``Recorder``. While it films, callers note what happens, in video time:
``chapter(title)`` when a step begins, ``click(x, y)``, ``typed(text)`` and ``keys(chord)`` as they
are done. ``finish`` stops ffmpeg and makes the receipt in one more ffmpeg pass over the raw film:

- the rings are drawn into the video (``overlay`` of one ring image, each enabled only between its
  click's time and a second later, centred on the click): never on the display, which the model
  sees;
- the typed text and key chords become a WebVTT file (``captions.vtt``), a subtitle track of the
  video, and are burned in at the bottom (a player without subtitles shows them too);
- the chapters become a WebVTT file (``chapters.vtt``) and the container's own chapters (ffmpeg's
  ffmetadata: an MP4's ``chpl``, a WebM's Matroska chapters).

Without a click the film is not re-encoded (a remux with the chapters and the subtitle track).
The text the callers hand in is written as given: a secret must already be its placeholder.

Everything but ``VideoReceipt`` itself is pure (the cue and chapter texts, the filter graph, the
command lines), tested without ffmpeg.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from desktop import actions
from desktop.errors import RecorderError
from desktop.x11.recorder import Recorder, VideoFormat, find_ffmpeg

log = logging.getLogger("glassdesk.receipt")

__all__ = ["Chapter", "Mark", "ReceiptFiles", "VideoReceipt", "chapters_vtt", "captions_vtt", "describe",
           "ffmetadata", "remove_unfinished",
           "ring_filter", "ring_png", "RING_RGB", "RING_RADIUS", "RING_SECONDS"]

RING_RGB = (255, 0, 255)   # magenta: rare on a desktop, so a reviewer (and a test) finds the mark
RING_RADIUS = 18           # px, the ring's outer radius; its stroke is RING_STROKE wide
RING_STROKE = 4
RING_SECONDS = 1.0         # how long a ring stays after its click
CAPTION_SECONDS = 2.0      # how long a caption stays, unless the next one comes sooner
FINISH_TIMEOUT = 300.0     # the post-processing pass: a re-encode of the whole film

MarkKind = Literal["click", "type", "key"]


@dataclass(frozen=True)
class Chapter:
    start: float  # seconds into the video
    end: float
    title: str


@dataclass(frozen=True)
class Mark:
    t: float  # seconds into the video
    kind: MarkKind
    x: int | None = None
    y: int | None = None
    text: str = ""


@dataclass
class ReceiptFiles:
    video: Path
    chapters: Path
    captions: Path
    duration_s: float
    chapter_count: int
    clicks: int
    notes: list[str] = field(default_factory=list)  # what could not be done (the film stands without it)


# ----------------------------------------------------------------------------------------- pure parts


def _vtt_time(seconds: float) -> str:
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}"


def _one_line(text: str, limit: int = 120) -> str:
    """A cue's text on one line: WebVTT ends a cue at a blank line, and "-->" would start a timing."""
    flat = " ".join(text.split()).replace("-->", "->")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe(action: dict) -> str:
    """An action (desktop.actions' dict form) as a chapter title (pure): desktop.actions.describe's
    words with typed text by its length only, since at the desktop's level a run's secrets are
    already filled in, so the text itself could be one; an action that says what it did in a
    ``summary`` (an OSWorld guest's request, desktop.osworld) by that."""
    if action.get("summary"):
        return f"{action.get('action', '?')}: {action['summary']}"
    return actions.describe(action, redact=True)


def close_chapters(starts: list[tuple[float, str]], duration: float) -> list[Chapter]:
    """Chapters from their start times: each ends where the next begins, the last at the end; a
    chapter that would be empty (two steps in the same instant) keeps a tenth of a second, and the
    ones after it start after it: no instant of the film is in two chapters (a player, and the run
    viewer, would show two steps playing at once)."""
    ordered = sorted(starts, key=lambda s: s[0])
    chapters: list[Chapter] = []
    for i, (start, title) in enumerate(ordered):
        start = min(max(0.0, start, chapters[-1].end if chapters else 0.0), duration)
        end = ordered[i + 1][0] if i + 1 < len(ordered) else duration
        chapters.append(Chapter(start, round(max(min(end, duration), start + 0.1), 3),
                                _one_line(title) or f"step {i + 1}"))
    return chapters


def chapters_vtt(chapters: list[Chapter]) -> str:
    out = ["WEBVTT", ""]
    for i, chapter in enumerate(chapters, 1):
        out += [str(i), f"{_vtt_time(chapter.start)} --> {_vtt_time(chapter.end)}", chapter.title, ""]
    return "\n".join(out)


def _caption(mark: Mark) -> str:
    return f"typed: {_one_line(mark.text)}" if mark.kind == "type" else f"keys: {_one_line(mark.text)}"


def captions_vtt(marks: list[Mark], duration: float) -> str:
    """The typed text and key chords as cues; each stays CAPTION_SECONDS or until the next."""
    cues = sorted((m for m in marks if m.kind in ("type", "key")), key=lambda m: m.t)
    out = ["WEBVTT", ""]
    for i, mark in enumerate(cues):
        end = mark.t + CAPTION_SECONDS
        if i + 1 < len(cues) and cues[i + 1].t - mark.t >= 0.5:
            end = min(end, cues[i + 1].t)  # replaced by the next; one that follows at once is shown with it
        out += [f"{_vtt_time(mark.t)} --> {_vtt_time(end)}", _caption(mark), ""]
    return "\n".join(out)


def _meta_escape(text: str) -> str:
    return "".join("\\" + c if c in "=;#\\\n" else c for c in text)


def ffmetadata(chapters: list[Chapter], title: str = "") -> str:
    """ffmpeg's metadata file: the chapters in milliseconds."""
    out = [";FFMETADATA1"]
    if title:
        out.append(f"title={_meta_escape(_one_line(title))}")
    for chapter in chapters:
        out += ["[CHAPTER]", "TIMEBASE=1/1000", f"START={round(chapter.start * 1000)}",
                f"END={round(chapter.end * 1000)}", f"title={_meta_escape(chapter.title)}"]
    return "\n".join(out) + "\n"


def remove_unfinished(directory: Path, keep: Collection[str] = ()) -> None:
    """Remove what a receipt cut short leaves in its directory (its process killed while filming or
    post-processing; a full disk): the raw film, the post-processing's scratch inputs and whatever of
    the finished files it had written, but those named in ``keep`` (already sealed by their owner).
    For the owner of the directory, once it knows the receipt will never be finished."""
    names = [f".raw-video.{fmt}" for fmt in ("mp4", "webm")] + [f"video.{fmt}" for fmt in ("mp4", "webm")]
    for name in [*names, "chapters.vtt", "captions.vtt", "chapters.ffmeta", "ring.png"]:
        if name not in keep:
            (directory / name).unlink(missing_ok=True)


def ring_png() -> bytes:
    """The mark: a ring of RING_RGB on transparency, (2r+1) px square, centred on its middle pixel."""
    from PIL import Image, ImageDraw

    size = 2 * RING_RADIUS + 1
    image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    ImageDraw.Draw(image).ellipse((0, 0, size - 1, size - 1), outline=(*RING_RGB, 255), width=RING_STROKE)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def ring_filter(clicks: list[Mark], *, video: str = "0:v", ring: str = "1:v", burn: str | None = None) -> str:
    """The filter graph drawing each click's ring (``[out]``), and the captions burned in when
    ``burn`` names a subtitle file in ffmpeg's working directory."""
    parts, last = [], video
    if clicks:
        labels = [f"[r{i}]" for i in range(len(clicks))]
        parts.append(f"[{ring}]split={len(clicks)}{''.join(labels)}" if len(clicks) > 1 else f"[{ring}]null[r0]")
        for i, mark in enumerate(clicks):
            # Never: Receipt.click gives a click's mark its point (a TypeError, as the sums below raised)
            if mark.x is None or mark.y is None:
                raise TypeError(f"a click's mark has no point: {mark}")
            out = f"v{i}"
            a, b = round(mark.t, 3), round(mark.t + RING_SECONDS, 3)
            parts.append(f"[{last}][r{i}]overlay=x={mark.x - RING_RADIUS}:y={mark.y - RING_RADIUS}"
                         f":enable='between(t,{a},{b})':eof_action=pass[{out}]")
            last = out
    if burn:
        style = "FontName=DejaVu Sans,FontSize=14,PrimaryColour=&H00FFFFFF,BackColour=&H80000000,BorderStyle=4"
        parts.append(f"[{last}]subtitles={burn}:force_style='{style}'[burned]")
        last = "burned"
    if not parts:
        return ""
    parts.append(f"[{last}]null[out]")
    return ";".join(parts)


def finish_argv(raw: str, out: str, *, fmt: VideoFormat, clicks: list[Mark], burn: bool,
                fps: int, duration: float) -> list[str]:
    """The post-processing pass (pure; run in the receipt's directory, so names are relative)."""
    argv = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostats", "-y", "-i", raw]
    n = 1
    if clicks:
        # The ring as a still, one frame looped for as long as the film (then each overlay passes
        # the film through: eof_action=pass).
        argv += ["-loop", "1", "-framerate", str(fps), "-t", f"{duration + 1:.3f}", "-i", "ring.png"]
        n += 1
    meta_index, subs_index = n, n + 1
    argv += ["-f", "ffmetadata", "-i", "chapters.ffmeta", "-i", "captions.vtt"]
    graph = ring_filter(clicks, burn="captions.vtt" if burn else None)
    if graph:
        argv += ["-filter_complex", graph, "-map", "[out]"]
        if fmt == "mp4":
            argv += ["-c:v", "libx264", "-preset", "ultrafast", "-crf", "23", "-pix_fmt", "yuv420p"]
        else:
            argv += ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "2M", "-crf", "10"]
    else:
        argv += ["-map", "0:v", "-c:v", "copy"]
    argv += ["-map", f"{subs_index}:s", "-c:s", "mov_text" if fmt == "mp4" else "webvtt",
             "-metadata:s:s:0", "language=eng", "-metadata:s:s:0", "title=actions",
             "-map_metadata", str(meta_index), "-map_chapters", str(meta_index)]
    if fmt == "mp4":
        argv += ["-movflags", "+faststart", "-f", "mp4"]
    else:
        argv += ["-f", "webm"]
    return [*argv, out]


# ----------------------------------------------------------------------------------------- the receipt


class VideoReceipt:
    """One film of one display with its chapters and marks. ``start`` once, ``finish`` once; the
    noting methods are thread-safe and cheap (a list append), and do nothing before ``start``."""

    def __init__(self, display: str, directory: Path, *, fmt: VideoFormat = "mp4", fps: int = 10,
                 title: str = "", burn_captions: bool = True):
        self.directory = Path(directory)
        self.fmt: VideoFormat = fmt
        self.fps = fps
        self.title = title
        self.burn_captions = burn_captions
        self.name = f"video.{fmt}"
        self._raw = self.directory / f".raw-video.{fmt}"
        self._recorder = Recorder(display, self._raw, fps=fps, fmt=fmt)
        self._t0: float | None = None
        self._chapters: list[tuple[float, str]] = []
        self._marks: list[Mark] = []
        self._lock = threading.Lock()
        self._finished: ReceiptFiles | None = None

    @property
    def recording(self) -> bool:
        return self._t0 is not None and self._finished is None

    def start(self) -> None:
        self._recorder.start()
        # The first frame is written: video time 0 was (about) now, less what ffmpeg has already filmed.
        self._t0 = time.monotonic() - self._recorder.filmed_s

    def now(self, at: float | None = None) -> float:
        """Video time of a monotonic instant (default: now)."""
        return max(0.0, (time.monotonic() if at is None else at) - (self._t0 or 0.0))

    def chapter(self, title: str, at: float | None = None) -> None:
        if self.recording:
            with self._lock:
                self._chapters.append((self.now(at), title))

    def click(self, x: int, y: int, at: float | None = None) -> None:
        if self.recording:
            with self._lock:
                self._marks.append(Mark(self.now(at), "click", int(x), int(y)))

    def typed(self, text: str, at: float | None = None) -> None:
        if self.recording and text:
            with self._lock:
                self._marks.append(Mark(self.now(at), "type", text=text))

    def keys(self, chord: str, at: float | None = None) -> None:
        if self.recording and chord:
            with self._lock:
                self._marks.append(Mark(self.now(at), "key", text=chord))

    def note_action(self, action: dict, at: float | None = None) -> None:
        """Mark an executed action (desktop.actions' dict form, display pixels): a ring for every
        click, a caption for typed text (as given: placeholders, not secrets) and key chords."""
        kind = action.get("action")
        if kind in ("click", "double_click", "triple_click", "mouse_down") and action.get("x") is not None:
            self.click(action["x"], action["y"], at)
        elif kind == "drag" and action.get("path"):
            for point in (action["path"][0], action["path"][-1]):  # where it pressed, where it let go
                self.click(point["x"], point["y"], at)
        elif kind == "type":
            self.typed(str(action.get("text", "")), at)
        elif kind in ("key", "hold_key"):
            chords = action.get("keys") or ""
            self.keys(" ".join(chords) if isinstance(chords, list) else str(chords), at)

    def mark_input(self, title: str, action: dict, at: float | None = None) -> None:
        """A chapter for an action done on the desktop while filmed, and its mark: typed text
        captioned by its length only (see ``describe``)."""
        self.chapter(title, at=at)
        if action.get("action") == "type":
            self.typed(f"{len(action.get('text', ''))} characters", at=at)
        else:
            self.note_action(action, at=at)

    def finish(self) -> ReceiptFiles:
        """Stop filming and make the receipt. Raises RecorderError when there is no film at all; a
        post-processing pass that fails leaves the raw film as the video (``notes`` says so)."""
        if self._finished is not None:
            return self._finished
        if self._t0 is None:
            raise RecorderError("no video was made: the receipt was never started")
        try:
            raw = self._recorder.stop()
        except RecorderError:
            self._t0 = None
            if self._raw.is_file() and self._raw.stat().st_size > 0:  # what ffmpeg wrote before it failed
                self._raw.replace(self.directory / self.name)
            else:
                self._raw.unlink(missing_ok=True)
            raise
        duration = max(self.now(), 0.1)
        self._t0 = None  # no more notes
        with self._lock:
            chapters = close_chapters(self._chapters or [(0.0, self.title or "recording")], duration)
            marks = list(self._marks)
        clicks = [m for m in marks if m.kind == "click" and m.t <= duration]
        d = self.directory
        chapters_path, captions_path = d / "chapters.vtt", d / "captions.vtt"
        chapters_path.write_text(chapters_vtt(chapters))
        captions_path.write_text(captions_vtt(marks, duration))
        (d / "chapters.ffmeta").write_text(ffmetadata(chapters, self.title))
        if clicks:
            (d / "ring.png").write_bytes(ring_png())
        notes: list[str] = []
        out = d / self.name
        burn = self.burn_captions and any(m.kind != "click" for m in marks)
        argv = finish_argv(raw.name, self.name, fmt=self.fmt, clicks=clicks, burn=burn, fps=self.fps,
                            duration=duration)
        argv[0] = find_ffmpeg()
        try:
            done = subprocess.run(argv, cwd=d, capture_output=True, timeout=FINISH_TIMEOUT,
                                  env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
            if done.returncode != 0 and burn:  # no font, no libass: the captions stay a track and a file
                notes.append("captions not burned in: " + done.stderr.decode(errors="replace").strip()[-300:])
                argv = finish_argv(raw.name, self.name, fmt=self.fmt, clicks=clicks, burn=False, fps=self.fps,
                                    duration=duration)
                argv[0] = find_ffmpeg()
                done = subprocess.run(argv, cwd=d, capture_output=True, timeout=FINISH_TIMEOUT,
                                      env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
            if done.returncode != 0:
                raise RecorderError(done.stderr.decode(errors="replace").strip()[-500:])
            raw.unlink(missing_ok=True)
        except (RecorderError, subprocess.TimeoutExpired, OSError) as exc:
            log.warning("video receipt in %s: post-processing failed, keeping the bare film: %s", d, exc)
            notes.append(f"no chapters or marks in the video itself (post-processing failed: {exc})")
            out.unlink(missing_ok=True)
            raw.replace(out)
        finally:
            for scratch in ("chapters.ffmeta", "ring.png"):
                (d / scratch).unlink(missing_ok=True)
        self._finished = ReceiptFiles(out, chapters_path, captions_path, round(duration, 3), len(chapters),
                                      len(clicks), notes)
        return self._finished

    def abandon(self) -> None:
        """Stop filming and keep nothing: the run that wanted it never started, or its receipt could
        not be made (nothing will seal what was written of it)."""
        try:
            self._recorder.stop()
        except RecorderError:
            pass
        self._t0 = None
        remove_unfinished(self.directory)
