"""What each request of OSWorld's guest contract does on one session: always inside the session's
isolation (its account, cgroup, network namespace and proxy, X cookie: ``DesktopStack.run_prefix``
and ``env``), never as the server. A command, pyautogui code, a file read or written, a directory
listed: each runs as the session's desktop user, so it reaches what a program launched on the
desktop reaches and nothing more (docs/isolation.md).

pyautogui is the harness's action space: its code runs with the guest Python
(``GUEST_PYTHON``, a venv made by docker/install-guest-python.sh with pyautogui, over Debian's
python3 and its pyatspi), first on the session's PATH, as ``python3`` is on OSWorld's guest.

The pure parts (a command's normal form, the wmctrl flags, a listing's JSON) are functions tested
without X; ``Guest`` holds the side effects.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import os
import re
import shlex
import subprocess
import threading
import tokenize
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from desktop.errors import RecorderError
from desktop.models import OSWorldCall
from desktop.x11.receipt import VideoReceipt, describe
from desktop.x11.user import unreachable_dir, write_file_argv
from desktop.x11.windows import WindowError

log = logging.getLogger("glassdesk.osworld")

GUEST_PYTHON = Path("/opt/glassdesk/guest-python")  # keep in step with docker/install-guest-python.sh
COMMAND_TIMEOUT_S = 120  # osworld-server's for /execute
PYTHON_TIMEOUT_S = 30  # and for /run_python
MAX_OPEN_WAIT_S = 60.0  # /setup/open_file waits for the window at most this long (osworld-server: 1800)
CALLS_KEPT = 5000  # the episode's record: this many last calls answered by GET .../osworld/calls
CALLS_FILE = "calls.jsonl"  # and all of them on disk, beside the films

# Programs a task names that are this desktop's browser: a task's `launch` of Chrome opens its URLs
# in the session's Chromium (already running, under glassdesk's control) instead of a second browser.
BROWSER_NAMES = frozenset({"google-chrome", "google-chrome-stable", "chrome", "chromium", "chromium-browser"})

# Lists a directory tree as osworld-server's /list_directory answers it. Run by the guest Python as
# the desktop user; self-contained (-I: nothing of the caller's environment shapes it).
LIST_DIRECTORY = r"""
import json, os, sys
def walk(directory):
    tree = {"type": "directory", "name": os.path.basename(directory), "children": []}
    try:
        for entry in os.listdir(directory):
            path = os.path.join(directory, entry)
            tree["children"].append(walk(path) if os.path.isdir(path) else {"type": "file", "name": entry})
    except OSError as exc:
        return {"error": str(exc)}
    return tree
start = sys.argv[1]
print(json.dumps(walk(start) if os.path.isdir(start) else None))
"""

# Downloads a URL to a file from inside the session (its network namespace and proxy: the
# session's network policy decides, as for its browser).
DOWNLOAD = r"""
import os, shutil, sys, urllib.request
url, path = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
with urllib.request.urlopen(url, timeout=300) as answer, open(path, "wb") as out:
    shutil.copyfileobj(answer, out)
print(os.path.getsize(path))
"""


# ------------------------------------------------------------------------------------- pure


def command_argv(command: str | Sequence[str], shell: bool, home: str) -> list[str]:
    """A request's command as the argv to run (pure), as osworld-server reads it: a string without
    ``shell`` is split like a shell would; with ``shell`` it is one ``/bin/sh -c``; a leading ``~/``
    of an argument is the desktop user's home."""
    if shell:
        text = command if isinstance(command, str) else " ".join(command)
        return ["/bin/sh", "-c", text]
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    return [expand_home(a, home) for a in argv]


def expand_home(path: str, home: str) -> str:
    """``~`` and ``~/...`` against the session's home (pure); any other path as it is."""
    if path == "~":
        return home
    if path.startswith("~/"):
        return f"{home}/{path[2:]}"
    return path


def wmctrl_argv(action: str, window_name: str, *, strict: bool, by_class: bool) -> list[str]:
    """osworld-server's wmctrl call for activating (``a``) or closing (``c``) a window (pure):
    ``-x`` matches the class, ``-F`` the whole title, case-sensitively."""
    return ["wmctrl", f"-{'x' if by_class else ''}{'F' if strict else ''}{action}", window_name]


def browser_urls(argv: Sequence[str]) -> list[str] | None:
    """The URLs a launch of Chrome opens, when ``argv`` starts Chrome (its switches left out:
    glassdesk's Chromium keeps its own); None for any other program (pure)."""
    if not argv or Path(argv[0]).name not in BROWSER_NAMES:
        return None
    return [a for a in argv[1:] if not a.startswith("-")]


# Statements of the harness's own preamble (PythonController's "import pyautogui; import time;
# pyautogui.FAILSAFE = False; ..."), left out of a call's summary: the same on every call.
_PREAMBLE = re.compile(r"(import [\w., ]+|from [\w.]+ import [\w., ]+|pyautogui\.FAILSAFE\s*=\s*\w+)")
SUMMARY_LIMIT = 240


def code_summary(code: str, limit: int = SUMMARY_LIMIT) -> str:
    """Python code as a line of the episode's record and a chapter of its film (pure): each string
    literal by its length (``<12 characters>``: typed text may be a secret, as a session's film
    captions typing), comments and the harness's imports left out, statements joined by ``; ``."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return f"<{len(code)} characters of code>"
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    text = code
    for token in reversed(tokens):
        if token.type in (tokenize.STRING, tokenize.COMMENT):
            begin = starts[token.start[0] - 1] + token.start[1]
            end = starts[token.end[0] - 1] + token.end[1]
            literal = "" if token.type == tokenize.COMMENT else f"<{len(_literal_value(token.string))} characters>"
            text = text[:begin] + literal + text[end:]
    statements = [part.strip() for part in re.split(r"[;\n]", text)]
    kept = "; ".join(part for part in statements if part and not _PREAMBLE.fullmatch(part))
    return kept if len(kept) <= limit else kept[:limit - 1] + "…"


def _literal_value(source: str) -> str:
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError):  # an f-string: its source, less the quotes
        return source.strip("'\"").lstrip("fFrRbBuU").strip("'\"")
    return value if isinstance(value, str) else str(value)


def command_summary(argv: Sequence[str]) -> str:
    """A command as a line of the episode's record (pure): ``python3 -c CODE`` (how the harness
    sends pyautogui actions) as its code's summary; any other program by its name and how many
    arguments it had (a task's commands carry passwords: ``echo <password> | sudo -S ...``)."""
    if len(argv) >= 3 and Path(argv[0]).name.startswith("python") and argv[1] == "-c":
        return code_summary(argv[2])
    if not argv:
        return "(nothing)"
    return f"{Path(argv[0]).name} ({len(argv) - 1} arguments)"


# ------------------------------------------------------------------------------------- effects


@dataclass
class Ran:
    """A finished command: its exit code and what it wrote."""

    returncode: int
    stdout: bytes
    stderr: bytes

    def text(self, which: str) -> str:
        return getattr(self, which).decode("utf-8", errors="replace")


class Guest:
    """One session's side of the contract, over the desktop service (desktop.service.desktop)."""

    def __init__(self, desktops, session_id: str, recordings: Path):
        self.desktops = desktops
        self.session_id = session_id
        self.recordings = recordings  # where /start_recording's film is written, the server's
        self.calls: deque[OSWorldCall] = deque(maxlen=CALLS_KEPT)  # the episode's record
        self._film: VideoReceipt | None = None
        self._chapters = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the episode's record

    def acting(self, route: str, summary: str) -> None:
        """An acting request starts: the session's input watchers hear of it, as of any action
        (a session recording, the guest's own film: a chapter each)."""
        self.session.note_input({"action": f"osworld {route}", "summary": summary})

    def calls_so_far(self) -> list[OSWorldCall]:
        with self._lock:  # a copy: a call may be appended from another thread meanwhile
            return list(self.calls)

    def record(self, call: OSWorldCall) -> None:
        """The call kept: in memory for GET .../osworld/calls, and a line of ``calls.jsonl`` beside
        the films (written whole in one append: a reader never meets half a line but the last)."""
        with self._lock:
            self.calls.append(call)
            try:
                self.recordings.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.recordings / CALLS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    os.write(fd, (call.model_dump_json() + "\n").encode())
                finally:
                    os.close(fd)
            except OSError as exc:  # a full disk costs the record on disk, never the call
                log.warning("session %s: an OSWorld call could not be written down: %s", self.session_id, exc)

    @property
    def session(self):
        """The session as it is now (a deleted one raises SessionNotFound)."""
        return self.desktops.existing(self.session_id)

    @property
    def home(self) -> str:
        return str(self.session.stack.home)

    def env(self) -> dict[str, str]:
        """The session's environment, with the guest Python first on a PATH of the directories the
        desktop user may enter: one it may not (the server's own, under /root) turns a missing
        program into "Permission denied", which pyautogui does not expect (it runs `dconf` if it can)."""
        stack = self.session.stack
        env = stack.env()
        entries = [d for d in env.get("PATH", os.defpath).split(":") if d and Path(d).is_dir()
                   and (stack.user is None or unreachable_dir(Path(d), stack.user) is None)]
        env["PATH"] = ":".join([str(GUEST_PYTHON / "bin"), *entries])
        return env

    def run(self, argv: Sequence[str], *, data: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S,
            cwd: str | None = None, merge_stderr: bool = False) -> Ran:
        """Run ``argv`` in the session as its desktop user; raises subprocess.TimeoutExpired."""
        stack = self.session.stack
        # env -C: the working directory is entered as the desktop user, so a directory it may not
        # enter is refused here, not opened by the server for it.
        inner = ["env", "-C", cwd, *argv] if cwd else list(argv)
        done = subprocess.run([*stack.run_prefix(), *inner], input=data, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                              env=self.env(), cwd=self.home, timeout=timeout)
        return Ran(done.returncode, done.stdout or b"", done.stderr or b"")

    def python(self, code: str, *args: str, timeout: float = PYTHON_TIMEOUT_S) -> Ran:
        return self.run(["python3", "-I", "-c", code, *args], timeout=timeout)

    def launch(self, argv: Sequence[str]) -> int:
        """Start a program on the desktop, detached, as ``launch`` does (desktop.x11.windows), with
        the guest's PATH; it ends with the session. Returns its pid; WindowError when the session's
        PATH has no such program, or the desktop user may not run it."""
        if not argv:
            raise WindowError("no program to launch")
        _, pid = self.session.windows.launch(argv[0], list(argv[1:]), env=self.env())
        return pid

    def open_url(self, url: str) -> None:
        """As the API's ``open``: the same URL fences, the page loaded with the keyboard (a task's
        autofocused field takes what its solution types), the screen settled."""
        self.desktops.open(self.session_id, url)

    def read_file(self, path: str) -> Ran:
        return self.run(["cat", "--", expand_home(path, self.home)])

    def write_file(self, path: str, data: bytes) -> Ran:
        target = expand_home(path, self.home)
        return self.run(write_file_argv(target), data=data)

    def list_directory(self, path: str) -> Any:
        ran = self.python(LIST_DIRECTORY, expand_home(path, self.home))
        if ran.returncode != 0:
            raise RuntimeError(ran.text("stderr").strip() or f"exit code {ran.returncode}")
        return json.loads(ran.stdout)

    def download(self, url: str, path: str) -> Ran:
        return self.python(DOWNLOAD, url, expand_home(path, self.home), timeout=330)

    def windows(self):
        return self.session.list_windows()

    def link_chrome_profile(self) -> None:
        """``~/.config/google-chrome`` made a link to the session's Chromium profile, as the desktop
        user, unless something is there: OSWorld's Chrome getters read Chrome's files (Bookmarks,
        Preferences, History) at that path, and Chrome in a task is this Chromium."""
        profile = self.session.stack.profile
        ran = self.run(["sh", "-c", 'mkdir -p "$HOME/.config" && { [ -e "$HOME/.config/google-chrome" ] || '
                                    'ln -s -- "$1" "$HOME/.config/google-chrome"; }', "sh", str(profile)], timeout=10)
        if ran.returncode != 0:
            log.warning("session %s: ~/.config/google-chrome could not be linked to its browser's profile: %s",
                        self.session_id, ran.text("stderr").strip())

    # ------------------------------------------------------------------ the film

    def start_recording(self) -> None:
        """The display filmed until ``end_recording``, with a chapter for each action done on the
        desktop meanwhile: this contract's acting requests and any other (the API's, a run's)."""
        with self._lock:
            if self._film is not None:
                raise RecordingState("Recording is already in progress.")
            session = self.session
            directory = self.recordings / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
            directory.mkdir(parents=True, exist_ok=True)
            film = VideoReceipt(session.display, directory, fmt="mp4", title=f"OSWorld episode on session {session.id}")
            try:
                film.start()
            except RecorderError:
                film.abandon()
                directory.rmdir()
                raise
            self._film, self._chapters = film, 0
            session.input_watchers.append(self._watch)

    def _watch(self, action: dict, at: float) -> None:
        with self._lock:
            film = self._film
            self._chapters += 1
            number = self._chapters
        if film is not None:
            film.mark_input(f"{number}. {describe(action)}", action, at=at)

    def end_recording(self) -> Path:
        """The film, with its chapters (an MP4's own, as players show them)."""
        film = self._stop_watching()
        if film is None:
            raise RecordingState("No recording in progress to stop.")
        return film.finish().video

    def _stop_watching(self) -> VideoReceipt | None:
        with self._lock:
            film, self._film = self._film, None
        if film is not None:
            session = self.desktops.peek(self.session_id)
            if session is not None and self._watch in session.input_watchers:
                session.input_watchers.remove(self._watch)
        return film

    def close(self) -> None:
        """The contract closes (with its session): a film still running is finished and kept where
        it was being made, though nobody asked for it yet."""
        film = self._stop_watching()
        if film is not None:
            try:
                log.info("session %s: its OSWorld film was never ended; kept as %s", self.session_id,
                         film.finish().video)
            except Exception:
                log.exception("the guest's recording of session %s could not be finished", self.session_id)


class RecordingState(Exception):
    """A recording asked to start twice, or to end when none runs (osworld-server answers 400)."""
