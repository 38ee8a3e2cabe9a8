"""A session's accessibility bus, read through one reader process of its own (desktop.x11.atspi_walker).

The reader runs inside the session's fence (its cgroup, network namespace and desktop account,
``DesktopStack.run_prefix``), under the system's Python, which has Debian's pyatspi; the server
never joins the session's bus itself. It is started ahead (``warm``, once the session's desktop is
up) or by the first question, and asked again for the session's life; a reader that dies, or does
not answer within the question's bound, is ended and the next question that may start one starts
another (its refs start afresh). A pointer action's read (``start=False``) never starts it and never
waits behind another question: it is on the click path.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import threading
import time
from pathlib import Path

from desktop.models import NativeElement

log = logging.getLogger("glassdesk.atspi")

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, which python3-pyatspi is built for
WALKER = Path(__file__).with_name("atspi_walker.py")
START_TIMEOUT_S = 10.0
ANSWER_LIMIT = 32 * 1024 * 1024  # a longer line is not read (the request bounds the tree far below it)


class AccessibilityUnavailable(RuntimeError):
    """The session's accessibility bus could not be read: why, in a sentence."""


class AccessibilityReader:
    """Questions to the session's reader process, one at a time."""

    def __init__(self, env: dict[str, str], prefix: list[str], python: str = SYSTEM_PYTHON):
        self.env, self.prefix, self.python = env, prefix, python
        self._process: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._lock = threading.Lock()

    def ask(self, request: dict, timeout_s: float, *, start: bool = True) -> dict:
        """The reader's answer to ``request``; AccessibilityUnavailable when it has none in time.
        ``start=False`` (a pointer action's read, on the click path): never waits for the reader to
        start or for another question to be answered; unavailable then."""
        deadline = time.monotonic() + timeout_s
        if not self._lock.acquire(timeout=timeout_s if start else 0):
            raise AccessibilityUnavailable("the accessibility reader is answering another question")
        try:
            if not start and not self.running:
                raise AccessibilityUnavailable("the accessibility reader is not started")
            process = self._started(max(deadline, time.monotonic() + START_TIMEOUT_S))
            assert process.stdin is not None  # started with stdin=PIPE
            try:
                process.stdin.write((json.dumps(request) + "\n").encode())
                process.stdin.flush()
            except OSError as exc:
                self._end()
                raise AccessibilityUnavailable(f"the accessibility reader stopped: {exc}") from None
            answer = self._line(process, deadline)
            if "error" in answer and len(answer) == 1:
                raise AccessibilityUnavailable(answer["error"])
            return answer
        finally:
            self._lock.release()

    def node_at(self, x: int, y: int, pid: int, timeout_s: float, *, start: bool = True,
                page_of: int | None = None) -> NativeElement | None:
        """The deepest showing control at display pixel (x, y) among process ``pid``'s windows (the
        walker's ``at``), or None when nothing there answers, or (``page_of``: the browser's pid) the
        pixel is on its page; AccessibilityUnavailable as ``ask``."""
        answer = self.ask({"op": "at", "x": x, "y": y, "pid": pid, "page_of": page_of}, timeout_s, start=start)
        node = answer.get("node")
        return NativeElement.model_validate({**node, "ms": answer.get("ms", 0)}) if node else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def warm(self) -> None:
        """Start the reader ahead of the first question (a pointer action does not wait for its start)."""
        try:
            self.ask({"op": "ping"}, START_TIMEOUT_S)
        except AccessibilityUnavailable as exc:  # no bus (yet): the first tree read starts it
            log.debug("the accessibility reader did not start ahead: %s", exc)

    def close(self) -> None:
        with self._lock:
            self._end()

    def _started(self, deadline: float) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._end()
        # The walker's source goes in the command line: the desktop's account need not be able
        # to read the server's files, and -I keeps the session's environment from steering Python.
        argv = [*self.prefix, self.python, "-I", "-c", WALKER.read_text()]
        try:
            process = self._process = subprocess.Popen(
                argv, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True, cwd=self.env.get("HOME"))
        except OSError as exc:
            raise AccessibilityUnavailable(f"the accessibility reader could not start: {exc}") from None
        first = self._line(process, deadline)
        if not first.get("ready"):
            self._end()
            raise AccessibilityUnavailable(first.get("error") or "the accessibility reader did not start")
        return process

    def _line(self, process: subprocess.Popen[bytes], deadline: float) -> dict:
        """The next line the reader (``process``, the one running) writes, parsed; the reader is ended
        when there is none in time."""
        assert process.stdout is not None  # started with stdout=PIPE
        fd = process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._end()
                raise AccessibilityUnavailable("the accessibility bus did not answer in time (an application "
                                               "that does not answer its accessibility calls holds it up)")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                code = process.poll()
                self._end()
                raise AccessibilityUnavailable(f"the accessibility reader exited (code {code})")
            self._buffer += chunk
            if len(self._buffer) > ANSWER_LIMIT:
                self._end()
                raise AccessibilityUnavailable("the accessibility reader's answer was too long")
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            self._end()
            raise AccessibilityUnavailable("the accessibility reader answered something unreadable") from None

    def _end(self) -> None:
        process, self._process, self._buffer = self._process, None, b""
        if process is None:
            return
        try:
            process.kill()
        except OSError:
            pass
        for stream in (process.stdin, process.stdout):
            if stream is None:  # never: both are pipes (_started)
                continue
            try:
                stream.close()
            except OSError:
                pass
        try:
            process.wait(2)
        except subprocess.TimeoutExpired:
            log.warning("the accessibility reader %s did not end", process.pid)
