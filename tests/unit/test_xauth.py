"""Authority files as X clients read them (desktop.x11.xauth; no X): python-xlib finds the cookie of
the display asked for, an entry without a number serves any display, and the server's file keeps
one entry per live display."""

from __future__ import annotations

import os
import socket
import stat

from Xlib import xauth

from desktop.x11.xauth import FAMILY_WILD, ServerAuthority, entries_for, write_new


def best(path, number: int) -> bytes:
    return xauth.Xauthority(str(path)).get_best_auth(xauth.FamilyLocal, socket.gethostname().encode(), number)[1]


def test_a_sessions_file_serves_its_cookie_for_any_display(tmp_path):
    path = tmp_path / "xauthority"
    write_new(path, entries_for("", b"c" * 16))
    assert best(path, 3) == best(path, 42) == b"c" * 16
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    families = {e[0] for e in xauth.Xauthority(str(path)).entries}
    assert families == {xauth.FamilyLocal, FAMILY_WILD}  # libXau's clients match the wild entry


def test_the_servers_file_has_each_displays_own_cookie(tmp_path, monkeypatch):
    monkeypatch.setenv("XAUTHORITY", "unchanged")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    authority = ServerAuthority()
    authority.add(":3", b"a" * 16)
    authority.add(":4", b"b" * 16)
    path = authority.path
    assert os.environ["XAUTHORITY"] == str(path)  # what in-process connections read
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert (best(path, 3), best(path, 4)) == (b"a" * 16, b"b" * 16)
    authority.remove(":4", b"x" * 16)  # a stale stop: :4 is another display's now
    authority.remove(":3", b"a" * 16)
    try:
        best(path, 3)
        raise AssertionError("a stopped display's cookie stayed")
    except Exception as exc:
        assert "XNoAuthError" in type(exc).__name__ or "NoAuth" in repr(exc)
    assert best(path, 4) == b"b" * 16
