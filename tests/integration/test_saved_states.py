"""Saved states on real desktops: TodoMVC (the real app from npm) keeps its todos in local storage;
a session saved with them starts another that has them, a session without the state has none,
and a state edited on disk is refused without making a session (desktop.session.states)."""

from __future__ import annotations

import pytest

from tests.fakes.todomvc import TodoMvcServer, require

pytestmark = pytest.mark.x11

API = "/api/v1"


def page(api, session: str, what: str, **body):
    answer = api.post(f"{API}/sessions/{session}/page/{what}", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_saved_state_carries_a_real_apps_data_and_a_tampered_one_makes_no_session(vision_api, services):
    require()
    with TodoMvcServer() as app:
        first = vision_api.post(f"{API}/sessions", json={}).json()["id"]
        page(vision_api, first, "navigate", url=app.origin + "/")
        page(vision_api, first, "fill", placeholder="What needs to be done?", value="buy some cheese")
        page(vision_api, first, "press", placeholder="What needs to be done?", keys=["Return"])
        page(vision_api, first, "wait", selector="#todo-list li", state="visible")
        saved = vision_api.post(f"{API}/sessions/{first}/states", json={"name": "cheese"})
        assert saved.status_code == 201, saved.text
        assert app.origin in saved.json()["origins"] and saved.json()["tampered"] is False
        assert "buy some cheese" not in saved.text  # the answer names what is kept, never its values
        vision_api.delete(f"{API}/sessions/{first}")

        restored = vision_api.post(f"{API}/sessions", json={"state": "cheese"})
        assert restored.status_code == 201, restored.text
        second = restored.json()["id"]
        page(vision_api, second, "navigate", url=app.origin + "/")
        found = page(vision_api, second, "locate", selector="#todo-list li label")
        assert found["visible"] and found["text"] == "buy some cheese"
        vision_api.delete(f"{API}/sessions/{second}")

        clean = vision_api.post(f"{API}/sessions", json={}).json()["id"]
        page(vision_api, clean, "navigate", url=app.origin + "/")
        assert page(vision_api, clean, "locate", selector="#todo-list li", timeout_ms=500)["exists"] is False
        vision_api.delete(f"{API}/sessions/{clean}")

        storage = services.store.root / "states" / "cheese" / "storage.json"
        storage.write_text(storage.read_text().replace("cheese", "crackers"))
        before = len(vision_api.get(f"{API}/sessions").json())
        refused = vision_api.post(f"{API}/sessions", json={"state": "cheese"})
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "state_tampered"
        assert len(vision_api.get(f"{API}/sessions").json()) == before
        assert vision_api.post(f"{API}/sessions", json={"state": "nobody"}).json()["error"]["code"] == \
            "state_not_found"
        assert vision_api.delete(f"{API}/states/cheese").status_code == 204
        assert vision_api.get(f"{API}/states").json() == []


def test_a_state_carries_named_files_of_the_home_to_a_new_desktop(vision_api, services):
    """What a desktop program keeps in the home (its settings, a token file) travels with the state:
    read as the desktop user, restored into the new desktop's home as its user; a bad path or an
    unreadable file refuses the save, each named; an edited file refuses the restore."""
    first = vision_api.post(f"{API}/sessions", json={}).json()["id"]
    session = services.desktops.existing(first)
    session.write_home_files({".config/app/token": b"t0ken\n", "notes.txt": b"hello\n"})
    refused = vision_api.post(f"{API}/sessions/{first}/states",
                              json={"name": "files", "files": ["../escape", "/etc/passwd", "absent.txt"]})
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    for problem in ("'../escape'", "'/etc/passwd'", "~/absent.txt: cat: absent.txt: No such file"):
        assert problem in message, message  # every problem at once
    assert vision_api.get(f"{API}/states").json() == [] or "files" not in {
        s["name"] for s in vision_api.get(f"{API}/states").json()}  # nothing kept by a refused save
    saved = vision_api.post(f"{API}/sessions/{first}/states",
                            json={"name": "files", "files": ["~/.config/app/token", "notes.txt"]})
    assert saved.status_code == 201 and saved.json()["files"] == [".config/app/token", "notes.txt"], saved.text
    assert "t0ken" not in saved.text
    vision_api.delete(f"{API}/sessions/{first}")

    second = vision_api.post(f"{API}/sessions", json={"state": "files"}).json()["id"]
    restored = services.desktops.existing(second)
    assert restored.read_home_files([".config/app/token", "notes.txt"]) == (
        {".config/app/token": b"t0ken\n", "notes.txt": b"hello\n"}, [])
    owner = (restored.stack.home / "notes.txt").stat().st_uid
    assert restored.stack.user is None or owner == restored.stack.user.uid  # the desktop user's, not root's
    vision_api.delete(f"{API}/sessions/{second}")

    kept = services.store.root / "states" / "files" / "home" / "0"
    kept.write_bytes(b"stolen\n")
    before = len(vision_api.get(f"{API}/sessions").json())
    tampered = vision_api.post(f"{API}/sessions", json={"state": "files"})
    assert tampered.status_code == 409 and tampered.json()["error"]["code"] == "state_tampered"
    assert len(vision_api.get(f"{API}/sessions").json()) == before
    assert vision_api.delete(f"{API}/states/files").status_code == 204
