"""The dialog policy over REST, against the page layer's local site (tests/fakes/site.py): manual
leaves a dialog open, accept and dismiss answer it at once and record how; beforeunload follows the
same policy; pixel input is not refused while a dialog is open (it is how a dialog is answered by
sight); the policy is the session's, so a Chromium kill and heal and a reset keep it. What the page
got is read from the site's own record of its events, never from the page layer's account."""

from __future__ import annotations

import os
import signal
import time

import pytest

from desktop.actions import Click
from tests.answers import error, ok, until

pytestmark = pytest.mark.x11

P = "/api/v1/sessions/itest/page"


@pytest.fixture(autouse=True)
def manual_and_quiet(api, desk):
    """Each test starts and ends with the default policy and no open dialog on the shared session."""
    def tidy():
        ok(api.put(f"{P}/dialog-policy", json={"mode": "manual"}))
        if ok(api.get(P))["dialog"] is not None:
            ok(api.post(f"{P}/dialog", json={"accept": False}))
    tidy()
    yield
    tidy()


def goto(api, site, path: str, base: str = P) -> dict:
    site.clear()
    return ok(api.post(f"{base}/navigate", json={"url": site.url(path), "wait_until": "load"}))


def answered(site, kind: str):
    # alert gives undefined: no value
    return site.wait_for(lambda e: e["type"] == "answered" and e["kind"] == kind).get("value")


def last_dialog_seq(api, base: str = P) -> int:
    entries = ok(api.get(f"{base}/dialogs"))
    return entries[-1]["seq"] if entries else 0


def recorded(api, since: int, base: str = P) -> list[tuple]:
    return [(e["type"], e["handled"], e["by"]) for e in ok(api.get(f"{base}/dialogs", params={"since": since}))]


# ------------------------------------------------------------------------------------ the policies


def test_accept_answers_each_dialog_at_once_and_records_how(api, site):
    assert ok(api.get(f"{P}/dialog-policy")) == {"session_id": "itest", "mode": "manual"}
    assert ok(api.put(f"{P}/dialog-policy", json={"mode": "accept"})) == {"session_id": "itest", "mode": "accept"}
    assert ok(api.get(f"{P}/dialog-policy"))["mode"] == "accept"
    since = last_dialog_seq(api)
    goto(api, site, "/dialogs")
    ok(api.post(f"{P}/click", json={"selector": "#confirm"}))
    assert answered(site, "confirm") is True
    ok(api.post(f"{P}/click", json={"selector": "#prompt"}))
    assert answered(site, "prompt") == "anon", "a prompt is accepted with its default, as OK would"
    ok(api.post(f"{P}/click", json={"selector": "#alert"}))
    answered(site, "alert")
    state = ok(api.get(P))
    assert state["dialog"] is None and state["dialog_policy"] == "accept"
    entries = ok(api.get(f"{P}/dialogs", params={"since": since}))
    assert [(e["type"], e["message"], e["handled"], e["by"]) for e in entries] == [
        ("confirm", "site confirm: proceed?", "accepted", "policy"),
        ("prompt", "site prompt: your name?", "accepted", "policy"),
        ("alert", "site alert: hello", "accepted", "policy")]
    assert all(e["url"] == site.url("/dialogs") and e["failure"] is None for e in entries)
    # the page goes on as if a person had pressed OK: input reaches it again
    ok(api.post(f"{P}/fill", json={"selector": "#name", "value": "after"}))
    assert site.wait_for(lambda e: e["type"] == "input" and e["value"] == "after")


def test_dismiss_answers_cancel_at_once(api, site):
    ok(api.put(f"{P}/dialog-policy", json={"mode": "dismiss"}))
    since = last_dialog_seq(api)
    goto(api, site, "/dialogs")
    ok(api.post(f"{P}/click", json={"selector": "#confirm"}))
    assert answered(site, "confirm") is False
    ok(api.post(f"{P}/click", json={"selector": "#prompt"}))
    assert answered(site, "prompt") is None
    assert ok(api.get(P))["dialog"] is None
    assert recorded(api, since) == [("confirm", "dismissed", "policy"), ("prompt", "dismissed", "policy")]


def test_manual_leaves_the_dialog_open_until_it_is_answered(api, site):
    since = last_dialog_seq(api)
    goto(api, site, "/dialogs")
    ok(api.post(f"{P}/click", json={"selector": "#confirm"}))
    dialog = until(lambda: ok(api.get(P))["dialog"], "the confirm")
    assert dialog == {"type": "confirm", "message": "site confirm: proceed?", "default_prompt": ""}
    time.sleep(0.5)  # what an answer would have sent meanwhile
    assert not [e for e in site.events if e["type"] == "answered"], "nobody answered it"
    assert ok(api.get(P))["dialog"]["type"] == "confirm", "still open"
    assert recorded(api, since) == [("confirm", None, None)]
    ok(api.post(f"{P}/dialog", json={"accept": True}))
    assert answered(site, "confirm") is True
    assert recorded(api, since) == [("confirm", "accepted", "request")]
    error(api.get(f"{P}/dialogs", params={"since": -1}), 422, "invalid_request")


def test_a_bad_mode_is_422_and_changes_nothing(api, manager):
    ok(api.put(f"{P}/dialog-policy", json={"mode": "dismiss"}))
    for body in ({"mode": "sometimes"}, {"mode": None}, {}, {"mode": "accept", "extra": 1}, {"mode": "ACCEPT"}):
        error(api.put(f"{P}/dialog-policy", json=body), 422, "invalid_request")
    assert ok(api.get(f"{P}/dialog-policy"))["mode"] == "dismiss"
    before = set(manager.sessions)
    message = error(api.post("/api/v1/sessions", json={"id": "baddialogs", "dialogs": "yes"}), 422, "invalid_request")
    assert "dialogs" in message
    assert set(manager.sessions) == before, "no session was started"
    error(api.get("/api/v1/sessions/nosuch/page/dialog-policy"), 404, "session_not_found")
    error(api.put("/api/v1/sessions/nosuch/page/dialog-policy", json={"mode": "accept"}), 404, "session_not_found")


# ------------------------------------------------------------------------------------ beforeunload


def touched_leave_page(api, site):
    """The page that asks before it is left, after a real click (Chromium asks only then)."""
    goto(api, site, "/leave")
    ok(api.post(f"{P}/click", json={"selector": "#touch"}))
    site.wait_for(lambda e: e["type"] == "click" and e["target"] == "touch")


def test_beforeunload_follows_the_policy(api, site):
    since = last_dialog_seq(api)
    # accept: the navigation goes through, and the page was left
    ok(api.put(f"{P}/dialog-policy", json={"mode": "accept"}))
    touched_leave_page(api, site)
    assert goto(api, site, "/form")["url"] == site.url("/form")
    site.wait_for(lambda e: e["type"] == "left" and e["page"] == "/leave")
    # dismiss: the page stays, and the answer says why
    ok(api.put(f"{P}/dialog-policy", json={"mode": "dismiss"}))
    touched_leave_page(api, site)
    message = error(api.post(f"{P}/navigate", json={"url": site.url("/form")}), 422, "invalid_action")
    assert "beforeunload" in message and "dismiss" in message
    assert ok(api.get(P))["url"] == site.url("/leave") and ok(api.get(P))["dialog"] is None
    # manual: dialog_open at once, not a wait for the navigation's timeout; it stays open ...
    ok(api.put(f"{P}/dialog-policy", json={"mode": "manual"}))
    message = error(api.post(f"{P}/navigate", json={"url": site.url("/form"), "timeout_ms": 120_000}), 409,
                    "dialog_open")
    assert "beforeunload" in message
    assert ok(api.get(P))["dialog"]["type"] == "beforeunload"
    assert not [e for e in site.events if e["type"] == "left"], "the dismissed and the open one kept the page"
    # ... and accepting it lets the navigation go on
    ok(api.post(f"{P}/dialog", json={"accept": True}))
    site.wait_for(lambda e: e["type"] == "left" and e["page"] == "/leave")
    until(lambda: ok(api.get(P))["url"] == site.url("/form"), "the navigation to finish")
    assert recorded(api, since) == [("beforeunload", "accepted", "policy"), ("beforeunload", "dismissed", "policy"),
                                    ("beforeunload", "accepted", "request")]


# ------------------------------------------------------------------------------------ pixel input


def test_pixel_input_is_not_refused_while_a_dialog_is_open(api, site, desk):
    """Chromium's dialog is tab-modal and drawn over the page: a click on its buttons, Enter or
    Escape answer it, a click elsewhere on the page is swallowed. glassdesk cannot tell those apart
    (no DevTools call gives the dialog's box), so pixel actions run as a person's would; only
    opening a page, which waits on the page, is refused."""
    since = last_dialog_seq(api)
    goto(api, site, "/dialogs")
    ok(api.post(f"{P}/click", json={"selector": "#confirm"}))
    until(lambda: ok(api.get(P))["dialog"], "the confirm")
    site.clear()
    base = "/api/v1/sessions/itest/desktop"
    ok(api.post(f"{base}/click", json={"x": 900, "y": 800}))  # the page area, away from the dialog
    time.sleep(0.5)  # what the click would have sent
    assert not [e for e in site.events if e["type"] == "click"], "the dialog swallowed it"
    assert ok(api.get(P))["dialog"]["type"] == "confirm"
    message = error(api.post(f"{base}/open", json={"url": site.url("/form")}), 409, "dialog_open")
    assert "confirm" in message
    ok(api.post(f"{base}/key", json={"keys": ["Escape"]}))
    assert answered(site, "confirm") is False
    until(lambda: ok(api.get(P))["dialog"] is None, "the state to lose the dialog")
    assert until(lambda: (lambda r: r if r[-1][1] else None)(recorded(api, since)), "the record") == [
        ("confirm", "dismissed", "screen")]


def test_a_dialog_answered_by_a_click_on_its_ok_is_recorded_as_answered_on_the_screen(api, site, desk):
    from vision.perception.grounding import find_text
    from vision.perception.ocr import frame_array, shared_engine

    since = last_dialog_seq(api)
    goto(api, site, "/dialogs")
    ok(api.post(f"{P}/click", json={"selector": "#confirm"}))
    until(lambda: ok(api.get(P))["dialog"], "the confirm")
    ok_button = find_text(shared_engine().read(frame_array(desk.capture())), "OK")
    desk.perform(Click(x=ok_button.point[0], y=ok_button.point[1]))
    assert answered(site, "confirm") is True
    assert until(lambda: (lambda r: r if r[-1][1] else None)(recorded(api, since)), "the record") == [
        ("confirm", "accepted", "screen")]


# ------------------------------------------------------------------------------------ the session's


def test_the_policy_is_the_sessions_through_a_chromium_heal_and_a_reset(api, site, manager):
    base = "/api/v1/sessions/dialogs/page"
    created = ok(api.post("/api/v1/sessions", json={"id": "dialogs", "dialogs": "accept"}), 201)
    try:
        assert created["id"] == "dialogs"
        assert ok(api.get(f"{base}/dialog-policy")) == {"session_id": "dialogs", "mode": "accept"}
        session = manager.sessions["dialogs"]
        chromium = session.stack.children["chromium"]
        restarts, pid = chromium.restarts, chromium.popen.pid
        os.kill(pid, signal.SIGKILL)
        # The heal first, then its outcome: right after the kill the page layer may not know yet.
        until(lambda: session.stack.children["chromium"].restarts == restarts + 1, "the heal", timeout=60)

        def healed():
            answer = api.get(base)
            return answer.status_code == 200 and session.status == "ready" and answer.json()["url"] is not None

        until(healed, "the healed browser to answer", timeout=60)
        assert ok(api.get(f"{base}/dialog-policy"))["mode"] == "accept"
        goto(api, site, "/dialogs", base)
        ok(api.post(f"{base}/click", json={"selector": "#confirm"}))
        assert answered(site, "confirm") is True, "the healed browser answers as the policy says"

        ok(api.put(f"{base}/dialog-policy", json={"mode": "dismiss"}))
        ok(api.post("/api/v1/sessions/dialogs/reset"))
        assert ok(api.get(f"{base}/dialog-policy"))["mode"] == "dismiss", "a reset keeps the session's setting"
        assert ok(api.get(f"{base}/dialogs")) == [], "and empties its record"
        goto(api, site, "/dialogs", base)
        ok(api.post(f"{base}/click", json={"selector": "#confirm"}))
        assert answered(site, "confirm") is False
        assert recorded(api, 0, base) == [("confirm", "dismissed", "policy")]
    finally:
        api.delete("/api/v1/sessions/dialogs")
