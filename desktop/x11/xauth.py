"""X authorization: every display needs a cookie (MIT-MAGIC-COOKIE-1) to connect to.

Without it any local account could connect to any session's display: screenshots of it, its window
titles, keystrokes into its page (issue 23). Each desktop start makes a fresh random cookie and two
authority files:

- the session's own, ``<workdir>/xauthority``: its one cookie, for any display number (an entry
  with an empty number), the desktop user's and 0600. Xvfb is started with ``-auth`` on it, and every
  program of the session finds it through ``XAUTHORITY`` (desktop.session.stack.DesktopStack.env).
  The server, root or the same user, reads it too (x11vnc, xdotool, wmctrl run with that env).
- the server's, one per process in a 0700 directory of its own: every live display's cookie under
  its number. ``XAUTHORITY`` of this process points at it, because what connects in-process (the
  screenshots through libX11/mss, the DAMAGE watch and XTEST typing through python-xlib) reads the
  authority file named by the process's environment at each connection, not one passed to it.

Xvfb loads the cookies of its file whatever their display number, so the session's file is written
before Xvfb picks its number (``-displayfd``); the server's entry is added once the number is known.
The entry format is libXau's (all shorts big-endian): family, address, display number, auth name,
auth data. Local connections are looked up as FamilyLocal with this host's name (python-xlib knows
no other way); FamilyWild entries match any address for libXau's clients.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import socket
import struct
import tempfile
import threading
from pathlib import Path

COOKIE_NAME = b"MIT-MAGIC-COOKIE-1"
FAMILY_LOCAL = 256
FAMILY_WILD = 65535
SERVER_DIR_PREFIX = "glassdesk-xauth-"


def new_cookie() -> bytes:
    return secrets.token_bytes(16)


def entry(family: int, address: bytes, number: str, cookie: bytes) -> bytes:
    """One authority entry (pure)."""
    fields = (address, number.encode(), COOKIE_NAME, cookie)
    return struct.pack(">H", family) + b"".join(struct.pack(">H", len(f)) + f for f in fields)


def entries_for(number: str, cookie: bytes, hostname: str | None = None) -> bytes:
    """The entries for a display (``number`` "" matches any display) on this host (pure but for
    the host's name)."""
    host = (hostname if hostname is not None else socket.gethostname()).encode()
    return entry(FAMILY_LOCAL, host, number, cookie) + entry(FAMILY_WILD, b"", number, cookie)


def write_new(path: Path, data: bytes, owner: tuple[int, int] | None = None) -> None:
    """Replace ``path`` with a 0600 file holding ``data``: written beside it under a fresh name (no
    link followed, never readable by others for a moment), handed to ``owner``, renamed over it."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if owner is not None:
                os.fchown(fh.fileno(), *owner)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


class ServerAuthority:
    """This process's authority file: the cookie of every display it started, by number."""

    def __init__(self):
        self._lock = threading.Lock()
        self._cookies: dict[str, bytes] = {}
        self._dir: Path | None = None

    @property
    def path(self) -> Path:
        with self._lock:
            return self._ensure()

    def _ensure(self) -> Path:
        if self._dir is None:
            remove_leftovers()
            self._dir = Path(tempfile.mkdtemp(prefix=f"{SERVER_DIR_PREFIX}{os.getpid()}-"))
            atexit.register(shutil.rmtree, self._dir, True)
            path = self._dir / "xauthority"
            write_new(path, b"")
            # Read at each connection by libX11 (mss) and python-xlib; set once, before the first.
            os.environ["XAUTHORITY"] = str(path)
        return self._dir / "xauthority"

    def add(self, display: str, cookie: bytes) -> None:
        self._change(display, cookie)

    def remove(self, display: str, cookie: bytes) -> None:
        """Forget a stopped display's cookie: only if it is still this one (the number may have been
        taken by another session's new display since this one died)."""
        self._change(display, None, cookie)

    def _change(self, display: str, cookie: bytes | None, old: bytes | None = None) -> None:
        number = display.lstrip(":").split(".")[0]
        with self._lock:
            path = self._ensure()
            if cookie is None:
                if self._cookies.get(number) != old:
                    return
                del self._cookies[number]
            else:
                self._cookies[number] = cookie
            write_new(path, b"".join(entries_for(n, c) for n, c in self._cookies.items()))


def remove_leftovers(temp_dir: str | None = None) -> None:
    """The authority directories of this user's servers that died without cleaning up (kill -9)."""
    base = Path(temp_dir or tempfile.gettempdir())
    for path in base.glob(f"{SERVER_DIR_PREFIX}*-*"):
        pid = path.name[len(SERVER_DIR_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or path.stat().st_uid != os.getuid() or int(pid) == os.getpid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


server_authority = ServerAuthority()
