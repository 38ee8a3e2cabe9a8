"""A video of a session's display: Debian's ffmpeg grabbing the X screen (x11grab) into WebM or MP4.

Optional and off by default: nothing runs, and nothing is spent, until ``start``. ffmpeg runs as the
server's user (the display accepts it, as it accepts x11vnc), in its own process session, with an
environment of PATH, DISPLAY and XAUTHORITY only (the server's authority file, desktop.x11.xauth).
It grabs the whole screen with the pointer drawn in, at a
constant frame rate (frames repeated when the screen is still), encoded for speed over size: the
machine's cores belong to the desktop being recorded.

``stop`` ends ffmpeg the way that leaves a playable file: ``q`` on its stdin (it finishes the file:
WebM cues and duration, MP4 index), then SIGINT (the same, by signal), and only then SIGKILL. The
MP4 is fragmented, so even a killed recording plays up to its last fragment; a WebM is a stream and
plays without its end. If ffmpeg's display goes away (the session ends), ffmpeg ends on its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Literal

from desktop.errors import RecorderError, RecorderUnavailable

__all__ = ["Recorder", "RecorderError", "RecorderUnavailable", "ffmpeg_argv", "find_ffmpeg"]

VideoFormat = Literal["webm", "mp4"]

STARTED_TIMEOUT = 15.0   # ffmpeg has written its first frame: the recording covers what follows start()
CATCH_UP_TIMEOUT = 10.0  # at stop, for a lagging ffmpeg to have written the frames up to the stop
QUIT_TIMEOUT = 15.0      # after "q": it encodes the frames it holds and writes the file's end
INTERRUPT_TIMEOUT = 5.0  # after SIGINT


def find_ffmpeg() -> str:
    """ffmpeg's path, or RecorderUnavailable saying how to install it."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise RecorderUnavailable("ffmpeg is not installed, so the display cannot be recorded: install Debian's "
                                  "ffmpeg (apt-get install ffmpeg; docker/install-system-deps.sh does)")
    return ffmpeg


def ffmpeg_argv(display: str, out_path: Path, *, fps: int, fmt: VideoFormat) -> list[str]:
    """The ffmpeg command line for a recording (pure)."""
    if fmt == "webm":
        # VP8 at libvpx's fastest real-time settings: VP9 at 1080p costs a core on its own.
        codec = ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "2M", "-crf", "10",
                 "-f", "webm"]
    else:
        # Fragmented: every keyframe closes a fragment, so the file plays even if ffmpeg is killed.
        codec = ["-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-crf", "23",
                 "-movflags", "+frag_keyframe+empty_moov+default_base_moof", "-f", "mp4"]
    # -progress: how far the file has got, on stdout, for start's readiness and stop's catching up.
    return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostats", "-progress", "pipe:1",
            "-stats_period", "0.2", "-y",
            "-f", "x11grab", "-framerate", str(fps), "-draw_mouse", "1", "-i", display,
            # A constant rate out (still screens repeat frames), a keyframe every 2 s for seeking,
            # the pixel format every player decodes, and each frame written as it is encoded (a still
            # screen encodes to a few bytes: buffered, nothing would reach the file for minutes).
            "-r", str(fps), "-fps_mode", "cfr", "-g", str(2 * fps), "-pix_fmt", "yuv420p", *codec,
            "-flush_packets", "1", str(out_path)]


class _Progress:
    """ffmpeg's ``-progress`` lines, read on a thread (the pipe must be drained or ffmpeg blocks):
    the frames written and the video time reached so far."""

    def __init__(self, stream: IO[bytes]):
        self.frames = 0
        self.seconds = 0.0
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), name="ffmpeg-progress", daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in stream:
                key, _, value = raw.decode(errors="replace").strip().partition("=")
                with self._cond:
                    if key == "frame" and value.isdigit():
                        self.frames = int(value)
                    elif key == "out_time_us" and value.lstrip("-").isdigit():
                        self.seconds = max(self.seconds, int(value) / 1e6)
                    self._cond.notify_all()

    def wait(self, reached, timeout: float, alive) -> bool:
        """Wait until ``reached()`` (under the lock), ffmpeg ended, or the timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not reached():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not alive():
                    return reached()
                self._cond.wait(min(remaining, 0.1))
            return True


class Recorder:
    """One recording of one display. ``start`` once, ``stop`` once (a second ``stop`` answers the
    same file); also a context manager."""

    def __init__(self, display: str, out_path: Path, *, fps: int = 10, fmt: VideoFormat = "webm"):
        if not isinstance(display, str) or not display.startswith(":") or not display[1:].replace(".", "").isdigit():
            raise ValueError(f"not an X display name: {display!r} (expected e.g. ':5')")
        if isinstance(fps, bool) or not isinstance(fps, int) or not 1 <= fps <= 60:
            raise ValueError(f"fps must be a whole number from 1 to 60, not {fps!r}")
        if fmt not in ("webm", "mp4"):
            raise ValueError(f"fmt must be 'webm' or 'mp4', not {fmt!r}")
        self.display = display
        self.out_path = Path(out_path)
        self.fps = fps
        self.fmt: VideoFormat = fmt
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._stopped: Path | None = None
        self._progress: _Progress | None = None
        self._started_at = 0.0
        self._lock = threading.Lock()

    @property
    def recording(self) -> bool:
        return self._proc is not None and self._stopped is None and self._proc.poll() is None

    @property
    def filmed_s(self) -> float:
        """Video time written so far (ffmpeg's progress)."""
        return self._progress.seconds if self._progress else 0.0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        """Start ffmpeg; returns once it has written the file's first frame (or raises RecorderError
        with ffmpeg's own words)."""
        with self._lock:
            if self._proc is not None:
                raise RecorderError("this recorder was already started; a recorder makes one video")
            ffmpeg = find_ffmpeg()
            if not self.out_path.parent.is_dir():
                raise RecorderError(f"cannot record to {self.out_path}: its directory does not exist")
            self.out_path.unlink(missing_ok=True)  # "the file exists" below must mean this ffmpeg made it
            argv = ffmpeg_argv(self.display, self.out_path, fps=self.fps, fmt=self.fmt)
            argv[0] = ffmpeg
            self._stderr = tempfile.TemporaryFile()
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DISPLAY": self.display}
            if os.environ.get("XAUTHORITY"):  # the server's authority file: every display's cookie
                env["XAUTHORITY"] = os.environ["XAUTHORITY"]
            proc = self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                 stderr=self._stderr, env=env, start_new_session=True)
            assert proc.stdout is not None  # stdout=PIPE
            progress = self._progress = _Progress(proc.stdout)
            alive = self._alive
            if not progress.wait(lambda: progress.frames >= 1, STARTED_TIMEOUT, alive):
                if alive():
                    self._end()
                    raise self._failed(f"ffmpeg wrote no video within {STARTED_TIMEOUT:.0f}s")
                raise self._failed(f"ffmpeg exited with code {self._proc.wait()} before recording")
            self._started_at = time.monotonic()

    def stop(self) -> Path:
        """End the recording cleanly and answer the video's path. Raises RecorderError when there
        is none: never started, or ffmpeg failed and left no file."""
        with self._lock:
            if self._stopped is not None:
                return self._stopped
            if self._proc is None:
                raise RecorderError("no video was made: the recorder was never started")
            died_early = self._proc.poll()
            if died_early is None:
                # On a busy machine ffmpeg encodes behind the screen; "q" would drop the frames it
                # has grabbed but not written: the last moments, which a failed test most needs.
                progress, wanted = self._progress, time.monotonic() - self._started_at - 1 / self.fps
                assert progress is not None  # start made it with _proc
                progress.wait(lambda: progress.seconds >= wanted, CATCH_UP_TIMEOUT, self._alive)
            self._end()
            if died_early is not None and died_early != 0:
                raise self._failed(f"ffmpeg stopped recording on its own (exit code {died_early})")
            if not self._has_video():
                raise self._failed("ffmpeg left no video")
            self._close_stderr()
            self._stopped = self.out_path
            return self.out_path

    def _end(self) -> None:
        """q, then SIGINT, then SIGKILL: each gives ffmpeg the chance to finish the file."""
        proc = self._proc
        assert proc is not None
        assert proc.stdin is not None  # started with stdin=PIPE
        if proc.poll() is None:
            try:
                proc.stdin.write(b"q")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
        for sig, timeout in ((None, QUIT_TIMEOUT), (signal.SIGINT, INTERRUPT_TIMEOUT), (signal.SIGKILL, 5.0)):
            if proc.poll() is not None:
                break
            if sig is not None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    break
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                continue
        try:
            proc.stdin.close()
        except OSError:
            pass

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _has_video(self) -> bool:
        try:
            return self.out_path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def _failed(self, why: str) -> RecorderError:
        detail = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            detail = self._stderr.read()[-2000:].decode(errors="replace").strip()
        self._close_stderr()
        return RecorderError(f"recording {self.display} to {self.out_path.name} failed: {why}"
                             + (f": {detail}" if detail else ""))

    def _close_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> Recorder:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._proc is not None and self._stopped is None:
            try:
                self.stop()
            except RecorderError:
                if exc[0] is None:
                    raise
