"""Windows on the display: list, focus, launch a program, bring a window to the front."""

from __future__ import annotations

import builtins  # the class's own ``list`` (its windows) hides the type in its later annotations
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from desktop.models import Window
from desktop.x11.user import DesktopUser, may_traverse

WINDOW_ID = re.compile(r"^(0x[0-9a-fA-F]{1,8}|[0-9]{1,10})$")


def window_number(window_id: str) -> int:
    """An X window id as WINDOW_ID spells it, as a number (pure): hex after 0x, else decimal, leading
    zeros and all (int(text, 0) refuses "047")."""
    return int(window_id, 16) if window_id.lower().startswith("0x") else int(window_id, 10)
URL_SCHEMES = ("http://", "https://", "file://", "about:", "data:", "chrome://")
# Pages of this machine rather than of the web: a model-driven browser must not render
# file:///etc/passwd into the next screenshot, nor reach Chromium's own settings.
LOCAL_SCHEMES = ("file://", "chrome://")
# What `launch` may start without the server's --launch-allow: desktop programs that show or edit
# something and take no argument that runs another program. Hygiene, not the boundary: the desktop
# user can do whatever these can, and a launched program is as untrusted as the page (docs/desktop-api.md).
# Left out on purpose: terminals (xterm, xfce4-terminal: a shell), file managers and launchers (thunar,
# xfce4-appfinder: open anything), a second Chromium (--renderer-cmd-prefix runs any command), and
# everything that runs what it is given (RUNNERS).
DEFAULT_PROGRAMS = frozenset({
    "xmessage", "xclock", "xeyes", "xcalc", "xlogo",               # x11-apps / x11-utils
    "mousepad", "gedit", "leafpad", "featherpad",                  # text editors
    "ristretto", "eog", "evince", "atril", "gpicview",             # image and document viewers
    "galculator", "gnome-calculator", "xfce4-screenshooter",       # tools
})
# Programs that run the command they are given (shells, wrappers, interpreters, debuggers, editors
# with a shell escape, remote shells): refused unless listed in --launch-allow, with a message saying
# why. Not on the default list whatever this says; named here for the message.
RUNNERS = frozenset({
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "busybox", "env", "sudo", "su", "doas",
    "nohup", "setsid", "xargs", "timeout", "nice", "ionice", "chrt", "taskset", "stdbuf", "time", "watch",
    "flock", "runuser", "setpriv", "unshare", "nsenter", "chroot", "systemd-run", "script", "expect",
    "awk", "gawk", "mawk", "nawk", "find", "sed", "make", "python", "python3", "perl", "ruby", "node", "nodejs",
    "lua", "php", "tclsh", "wish", "gdb", "lldb", "strace", "ltrace", "vi", "vim", "nvim", "emacs", "nano",
    "less", "more", "man", "ssh", "scp", "sftp", "telnet", "nc", "ncat", "socat", "xterm", "xfce4-terminal",
    "x-terminal-emulator", "chromium", "thunar", "xfce4-appfinder", "exo-open", "xdg-open", "dbus-launch",
})


def check_url(url: str, *, allow_local: bool = False) -> None:
    """Raise WindowError for a URL the browser may not open (pure)."""
    if not url.startswith(URL_SCHEMES):
        accepted = [scheme for scheme in URL_SCHEMES if allow_local or scheme not in LOCAL_SCHEMES]
        raise WindowError(f"url {url!r} must start with one of {', '.join(accepted)}"
                          + ("" if allow_local else " (file:// and chrome:// too on a server with --allow-local-urls)"))
    if url.lower().startswith(LOCAL_SCHEMES) and not allow_local:
        raise WindowError(f"url {url!r}: file:// and chrome:// pages are refused (they show this machine, not the "
                          "web); the server's --allow-local-urls lets them through")


def check_program(command: str, allow: frozenset[str] | None = None) -> None:
    """Raise WindowError for a program launch may not start (pure): a name looked up on PATH, never
    a path, and one of :data:`DEFAULT_PROGRAMS` or of ``allow`` (the server's --launch-allow)."""
    if "/" in command or command in (".", "..") or command.startswith("-"):
        raise WindowError(f"command {command!r}: give a program name to look up on PATH, not a path")
    allowed = DEFAULT_PROGRAMS | (allow or frozenset())
    if command in allowed:
        return
    if command in RUNNERS:
        raise WindowError(f"command {command!r} runs other programs or code and is refused unless explicitly allowed "
                          "(the server's --launch-allow)")
    raise WindowError(f"command {command!r} is not among the programs launch may start "
                      f"({', '.join(sorted(allowed))}); the server's --launch-allow adds programs")


class WindowError(ValueError):
    """Bad input: an unknown window, program or URL. Nothing was changed."""


# After the class wmctrl prints "%-20s " and " %*s %s": two or more spaces, the host, one space,
# the title. The class itself may hold a space: Chromium's is "chromium (<profile dir>).Chromium".
_CLASS_HOST_TITLE = re.compile(r"^(?P<cls>.*?\S)\s{2,}(?P<host>\S+)(?: (?P<title>.*))?$")


def parse_wmctrl(out: str) -> list[Window]:
    """Parse ``wmctrl -lGpx``: id desktop pid x y w h class host title..."""
    windows = []
    for line in out.splitlines():
        parts = line.split(None, 7)
        if len(parts) < 8:
            continue
        wid, _desk, pid, x, y, w, h, rest = parts
        match = _CLASS_HOST_TITLE.match(rest)
        if match:
            wm_class, title = match["cls"], match["title"] or ""
        else:  # a single space somewhere: fall back to whitespace fields
            fields = rest.split(None, 2)
            wm_class, title = fields[0], fields[2] if len(fields) > 2 else ""
        windows.append(Window(id=wid, pid=int(pid) or None, x=int(x), y=int(y), width=int(w),
                              height=int(h), wm_class=wm_class, title=title))
    return windows


@dataclass
class Windows:
    env: dict[str, str]
    # How launched programs are started: an argv prefix that puts them in the session's cgroup and
    # runs them as the desktop's user (desktop.session.stack.DesktopStack.run_prefix), while wmctrl
    # and xdotool run as the server's.
    launch_prefix: list[str] = field(default_factory=list)
    # Whom that prefix runs the program as (None: this process's user), to refuse a program it may
    # not execute up front: past the prefix, setpriv's failure would be silent.
    launch_user: DesktopUser | None = None

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=10)

    def list(self) -> list[Window]:
        return parse_wmctrl(self._run(["wmctrl", "-lGpx"]).stdout)

    def focus(self, window_id: str) -> builtins.list[builtins.list[str]]:
        if not WINDOW_ID.match(window_id):
            raise WindowError(f"window_id {window_id!r} is not an X window id (hex like 0x01a00003 or decimal)")
        wanted = window_number(window_id)
        if not any(int(w.id, 16) == wanted for w in self.list()):
            raise WindowError(f"no window {window_id} on this desktop; list the windows to see which exist")
        argv = ["wmctrl", "-i", "-a", hex(wanted)]
        done = self._run(argv)
        if done.returncode != 0:
            raise RuntimeError(f"wmctrl could not focus {window_id}: {done.stderr.strip()}")
        return [argv]

    def launch(self, command: str, args: builtins.list[str], env: dict[str, str] | None = None
               ) -> tuple[builtins.list[builtins.list[str]], int]:
        """Start a program on the desktop, detached; it ends with the session (it is tagged).
        ``env``: the session's environment as a caller changed it (OSWorld's guest: its Python on PATH)."""
        env = self.env if env is None else env
        path = shutil.which(command, path=env.get("PATH"))
        if path is None:
            raise WindowError(f"program {command!r} not found on PATH")
        argv = [command, *args]
        if self.launch_user is not None:
            info = os.stat(path)
            if not may_traverse(info.st_mode, info.st_uid, info.st_gid, self.launch_user):  # the x bits, as for a dir
                raise WindowError(f"program {command!r} ({path}) cannot be started by the desktop's user: "
                                  "Permission denied")
        try:
            popen = subprocess.Popen([*self.launch_prefix, *argv], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                     cwd=env.get("HOME"))
        except PermissionError as exc:  # found on PATH, but not executable by the desktop's user
            raise WindowError(f"program {command!r} ({path}) cannot be started by the desktop's user: {exc.strerror}") \
                from None
        return [argv], popen.pid

    def raise_class(self, wm_class: str) -> None:
        """Bring the newest visible window of ``wm_class`` to the front (the operator and the model
        see what was just opened in it)."""
        window = self._run(["xdotool", "search", "--onlyvisible", "--class", wm_class]).stdout.split()
        if window:
            self._run(["wmctrl", "-i", "-a", window[-1]])
