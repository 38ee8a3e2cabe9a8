"""Saved states on disk (desktop.session.states): kept whole, read back only as saved, and refused
when changed since: an edited storage file, a forged manifest, a state signed by another server."""

from __future__ import annotations

import json
import stat

import pytest

from desktop.errors import InvalidRequest, StateNotFound, StateTampered
from desktop.session.states import HOME, MANIFEST, MAX_STATE_BYTES, STORAGE, StateStore, home_path

LOGIN = {"cookies": [{"name": "sid", "value": "s3cret", "domain": ".shop.test", "path": "/"}],
         "origins": [{"origin": "http://127.0.0.1:8000", "localStorage": [{"name": "todos", "value": "[1]"}]}]}


def test_a_state_is_kept_privately_and_read_back_as_saved(tmp_path):
    store = StateStore(tmp_path / "states")
    info = store.save("alice", LOGIN, session_id="s-1")
    assert info["cookies"] == 1 and info["cookie_domains"] == ["shop.test"]
    assert info["origins"] == ["http://127.0.0.1:8000"] and info["from_session"] == "s-1"
    assert "s3cret" not in json.dumps(info)  # what is listed never carries a value
    assert store.load("alice") == LOGIN
    assert [s["name"] for s in store.list()] == ["alice"]
    folder = tmp_path / "states" / "alice"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE((folder / f).stat().st_mode) for f in (STORAGE, MANIFEST)} == {0o600}
    assert stat.S_IMODE((tmp_path / "states" / ".key").stat().st_mode) == 0o600
    store.save("alice", {"cookies": [], "origins": []}, session_id="s-2")  # replaced whole
    assert store.load("alice") == {"cookies": [], "origins": []}
    assert sorted(p.name for p in (tmp_path / "states").iterdir()) == [".key", "alice"]  # no staging left


def test_an_edited_storage_file_is_refused(tmp_path):
    store = StateStore(tmp_path)
    store.save("alice", LOGIN, session_id="s")
    path = tmp_path / "alice" / STORAGE
    path.write_text(path.read_text().replace("s3cret", "stolen"))
    with pytest.raises(StateTampered, match="SHA-256"):
        store.load("alice")
    assert store.list()[0]["name"] == "alice" and store.list()[0]["tampered"] is False  # the manifest still holds


def test_a_forged_manifest_and_a_foreign_servers_state_are_refused(tmp_path):
    store = StateStore(tmp_path / "mine")
    store.save("alice", LOGIN, session_id="s")
    manifest_path = tmp_path / "mine" / "alice" / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["from_session"] = "someone-else"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(StateTampered, match="signature"):
        store.load("alice")
    assert store.list() == [{"name": "alice", "tampered": True, "problem": store.list()[0]["problem"]}]
    # A state saved by another server (its own key), copied in whole: refused here.
    other = StateStore(tmp_path / "theirs")
    other.save("bob", LOGIN, session_id="s")
    (tmp_path / "theirs" / "bob").rename(tmp_path / "mine" / "bob")
    with pytest.raises(StateTampered):
        store.load("bob")


def test_names_are_checked_and_missing_states_say_so(tmp_path):
    store = StateStore(tmp_path)
    for bad in ("", "../etc", ".key", "a/b", "x" * 65):
        with pytest.raises(InvalidRequest):
            store.save(bad, LOGIN, session_id="s")
    with pytest.raises(StateNotFound):
        store.load("nobody")
    with pytest.raises(StateNotFound):
        store.delete("nobody")
    store.save("alice", LOGIN, session_id="s")
    store.delete("alice")
    assert store.list() == []


def test_home_files_are_kept_with_the_state_and_an_edited_one_is_refused(tmp_path):
    store = StateStore(tmp_path)
    files = {".config/app/token": b"t0ken", "notes.txt": b"hello\n"}
    info = store.save("alice", LOGIN, session_id="s", files=files)
    assert info["files"] == [".config/app/token", "notes.txt"] and "t0ken" not in json.dumps(info)
    assert store.load_files("alice") == files
    # kept by number under home/: no path of the desktop's is ever one of the server's
    assert sorted(p.name for p in (tmp_path / "alice" / HOME).iterdir()) == ["0", "1"]
    (tmp_path / "alice" / HOME / "0").write_bytes(b"stolen")
    with pytest.raises(StateTampered, match=r"\.config/app/token does not match"):
        store.load_files("alice")
    (tmp_path / "alice" / HOME / "0").unlink()
    with pytest.raises(StateTampered, match="lost its file"):
        store.load_files("alice")
    with pytest.raises(InvalidRequest, match="over"):
        store.save("big", LOGIN, session_id="s", files={"a": b"x" * (MAX_STATE_BYTES + 1)})


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../b", "", "~/", "a//b", "./a", "a\0b"])
def test_a_home_file_is_relative_to_the_home_and_never_out_of_it(path):
    with pytest.raises(ValueError, match="relative to it"):
        home_path(path)


def test_a_home_file_may_be_named_from_the_home():
    assert home_path("~/notes.txt") == "notes.txt" and home_path(".config/a b/c") == ".config/a b/c"
