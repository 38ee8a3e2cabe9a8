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

import json
import logging
import os
import shlex
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop.x11.recorder import Recorder
from desktop.x11.user import unreachable_dir
from desktop.x11.windows import WindowError

log = logging.getLogger("glassdesk.osworld")

GUEST_PYTHON = Path("/opt/glassdesk/guest-python")  # keep in step with docker/install-guest-python.sh
COMMAND_TIMEOUT_S = 120  # osworld-server's for /execute
PYTHON_TIMEOUT_S = 30  # and for /run_python
MAX_OPEN_WAIT_S = 60.0  # /setup/open_file waits for the window at most this long (osworld-server: 1800)

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
        self._recorder: Recorder | None = None
        self._lock = threading.Lock()

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
        """As the API's ``open`` (the same URL fences, the page loaded and the screen settled), then
        the keyboard to the page, where Chrome started with a URL puts it: a task's autofocused
        field takes what its solution types."""
        self.desktops.open(self.session_id, url)
        browser = self.session.stack.browser
        if browser is not None:
            browser.focus_page()

    def read_file(self, path: str) -> Ran:
        return self.run(["cat", "--", expand_home(path, self.home)])

    def write_file(self, path: str, data: bytes) -> Ran:
        target = expand_home(path, self.home)
        return self.run(["sh", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', "sh", target], data=data)

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
        with self._lock:
            if self._recorder is not None and self._recorder.recording:
                raise RecordingState("Recording is already in progress.")
            self.recordings.mkdir(parents=True, exist_ok=True)
            recorder = Recorder(self.session.display, self.recordings / f"{self.session_id}.mp4", fmt="mp4")
            recorder.start()
            self._recorder = recorder

    def end_recording(self) -> Path:
        with self._lock:
            recorder, self._recorder = self._recorder, None
        if recorder is None or not recorder.recording:
            raise RecordingState("No recording in progress to stop.")
        return recorder.stop()

    def close(self) -> None:
        with self._lock:
            recorder, self._recorder = self._recorder, None
        if recorder is not None and recorder.recording:
            try:
                recorder.stop()
            except Exception:  # the session is going: its film with it
                log.exception("the guest's recording of session %s could not be stopped", self.session_id)


class RecordingState(Exception):
    """A recording asked to start twice, or to end when none runs (osworld-server answers 400)."""
