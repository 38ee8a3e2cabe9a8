"""Live-view tokens, the websocket subprotocol carrying them, and VNC authentication (pure parts)."""

from __future__ import annotations

import pytest

from desktop.errors import LiveTokenExpired, LiveTokenInvalid, LiveTokenRevoked, LiveTokenWrongSession
from desktop.session.liveview import CONTROL_TTL_S, VIEW_TTL_S, LiveTokens, token_from_protocols, vnc_auth_response


class Clock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def tokens(clock):
    return LiveTokens(b"k" * 32, clock=clock)


def test_a_token_grants_its_mode_on_its_session_until_it_expires(tokens, clock):
    token, expires = tokens.issue("s1", "view", 7)
    assert expires == int(clock.now) + VIEW_TTL_S
    grant = tokens.verify(token, "s1", current_generation=7)
    assert (grant.session_id, grant.mode, grant.expires, grant.generation, grant.control) == \
        ("s1", "view", expires, 7, False)
    control, control_expires = tokens.issue("s1", "control", 7)
    assert control_expires == int(clock.now) + CONTROL_TTL_S
    assert tokens.verify(control, "s1", current_generation=7).control
    clock.now = expires - 1
    tokens.verify(token, "s1", 7)
    clock.now = expires
    with pytest.raises(LiveTokenExpired, match="expired at"):
        tokens.verify(token, "s1", 7)


def test_another_sessions_token_is_refused_as_such(tokens):
    token, _ = tokens.issue("s1", "view", 1)
    with pytest.raises(LiveTokenWrongSession, match="for session 's1', not 's2'"):
        tokens.verify(token, "s2", 1)


@pytest.mark.parametrize("tamper", [
    lambda t: t.replace(".view.", ".control."),              # a view token turned into control
    lambda t: t.replace("s1.", "s2.", 1),                     # moved to another session
    lambda t: t.split(".")[0] + ".view.99999999999." + ".".join(t.split(".")[3:]),  # expiry pushed back
    lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"),  # signature changed
    lambda t: "",
    lambda t: "not-a-token",
    lambda t: t + ".extra",
])
def test_a_forged_token_is_invalid(tokens, tamper):
    token, _ = tokens.issue("s1", "view", 1)
    with pytest.raises(LiveTokenInvalid):
        tokens.verify(tamper(token), "s1", 1)
    with pytest.raises(LiveTokenInvalid):
        tokens.verify(None, "s1", 1)


def test_another_servers_token_is_invalid(tokens, clock):
    token, _ = LiveTokens(b"x" * 32, clock=clock).issue("s1", "control", 1)
    with pytest.raises(LiveTokenInvalid):
        tokens.verify(token, "s1", 1)
    assert LiveTokens()._secret != LiveTokens()._secret  # a secret per server


def test_a_take_over_revokes_control_tokens_not_view_tokens(tokens):
    control, _ = tokens.issue("s1", "control", 5)
    view, _ = tokens.issue("s1", "view", 5)
    tokens.verify(control, "s1", current_generation=5)
    with pytest.raises(LiveTokenRevoked, match="take-over"):
        tokens.verify(control, "s1", current_generation=6)
    assert tokens.verify(view, "s1", current_generation=6).mode == "view"


def test_a_token_of_an_earlier_session_of_the_same_name_is_invalid(tokens):
    """The instance is signed, not sent: deleting a session and making another under its name
    (a new instance) leaves every token of the first one invalid, view tokens included."""
    view, _ = tokens.issue("s1", "view", 5, instance="first")
    assert "first" not in view
    assert tokens.verify(view, "s1", 5, instance="first").instance == "first"
    with pytest.raises(LiveTokenInvalid, match="earlier session of this name"):
        tokens.verify(view, "s1", 5, instance="second")


def test_a_mode_that_does_not_exist_is_not_issued(tokens):
    with pytest.raises(ValueError):
        tokens.issue("s1", "admin", 1)


@pytest.mark.parametrize("offered,token,chosen", [
    (["binary", "glassdesk.token.s1.view.1.2.abc"], "s1.view.1.2.abc", "binary"),
    (["glassdesk.token.t", "glassdesk.strip"], "t", "glassdesk.strip"),
    (["binary"], None, "binary"),
    ([], None, None),
    (["glassdesk.token.t"], "t", None),
])
def test_the_token_travels_as_a_subprotocol_and_is_never_the_one_accepted(offered, token, chosen):
    assert token_from_protocols(offered) == (token, chosen)


def test_vnc_authentication_matches_x11vnc():
    # `x11vnc -storepasswd hunter22 FILE` writes DES(VNC's fixed key, "hunter22") with the same
    # bit-reversed-key DES as the VNC challenge answer: its first 8 bytes were 8575a4063bc0cf12.
    fixed_key = bytes([23, 82, 107, 6, 35, 78, 88, 7]).decode("latin-1")
    assert vnc_auth_response(fixed_key, b"hunter22" * 2)[:8].hex() == "8575a4063bc0cf12"
    # Only the first 8 characters of a password count, as in every VNC server.
    challenge = bytes(range(16))
    assert vnc_auth_response("abcdefgh", challenge) == vnc_auth_response("abcdefghXYZ", challenge)
    assert vnc_auth_response("abcdefgh", challenge) != vnc_auth_response("abcdefgi", challenge)
    with pytest.raises(ValueError):
        vnc_auth_response("pw", b"short")


def test_pointer_at_rest_is_an_rfb_pointer_event_with_no_button_down_clamped_to_the_protocols_range():
    import struct

    from desktop.session.liveview import pointer_at_rest

    assert pointer_at_rest(1260, 232) == struct.pack(">BBHH", 5, 0, 1260, 232)
    assert struct.unpack(">BBHH", pointer_at_rest(-3, 70_000)) == (5, 0, 0, 0xFFFF)
