"""The live view's access rules: signed live-view tokens, and logging in to a session's x11vnc.

A person watches a session through the viewer the server serves (``vision.http.viewer``): a page, and a
websocket the server relays to the session's x11vnc on loopback. What lets them in is a
**live-view token**: an HMAC-SHA256, under a random secret made when the server starts, over

    session id . mode (view | control) . expiry (unix seconds) . generation

The generation is the session's control generation when the token was issued (``Session.
live_generation``); a take-over bumps it, which revokes every control token issued before
(``verify`` refuses them and the relay closes their open connections). View tokens are not revoked
by a take-over: watching never fought anyone for the pointer. The signature also covers the
session's instance (``Session.instance``, random at creation, never in the token), so no token of a
deleted session opens a later session made under the same name.

The VNC passwords never leave the server: the relay itself logs in to x11vnc (``rfb_login``) with
the view-only password for a view token and the control password for a control token, then offers
the browser an RFB handshake with no authentication. x11vnc itself enforces view-only for the
view-only password, whatever the client sends, so a view token can never give input, even to a
client that sends pointer and key events on purpose. (Filtering input messages out of the stream
instead would mean parsing every RFB client message, extensions included, to find their ends.)
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes

from desktop.errors import (
    LiveTokenExpired,
    LiveTokenInvalid,
    LiveTokenRevoked,
    LiveTokenWrongSession,
)

Mode = Literal["view", "control"]
MODES: tuple[Mode, ...] = ("view", "control")
# How long a link stays usable for a new connection. An open connection outlives its token's expiry
# (a watcher is not cut off mid-run); a control connection ends when a take-over revokes it.
VIEW_TTL_S = 3600
CONTROL_TTL_S = 600
# A browser's WebSocket cannot send headers: the token travels as a subprotocol offered next to the
# real one, so it stays out of URLs and therefore out of access logs and Referer headers.
TOKEN_PROTOCOL_PREFIX = "glassdesk.token."


@dataclass(frozen=True)
class Grant:
    """What a valid token allows: this mode on this session, for connections opened before ``expires``."""

    session_id: str
    mode: Mode
    expires: int
    generation: int
    instance: str = ""

    @property
    def control(self) -> bool:
        return self.mode == "control"


class LiveTokens:
    """Issues and checks live-view tokens. The secret lives only in this process: a restart of the
    server invalidates every link it handed out."""

    def __init__(self, secret: bytes | None = None, clock: Callable[[], float] = time.time):
        self._secret = secret or secrets.token_bytes(32)
        self._clock = clock

    def _sign(self, payload: str) -> str:
        mac = hmac.new(self._secret, payload.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    def issue(self, session_id: str, mode: Mode, generation: int, ttl_s: float | None = None,
              instance: str = "") -> tuple[str, int]:
        """A token and its expiry (unix seconds). ``instance`` is signed, not sent."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        ttl = ttl_s if ttl_s is not None else (CONTROL_TTL_S if mode == "control" else VIEW_TTL_S)
        expires = int(self._clock() + ttl)
        payload = f"{session_id}.{mode}.{expires}.{generation}"
        return f"{payload}.{self._sign(f'{payload}.{instance}')}", expires

    def verify(self, token: str | None, session_id: str, current_generation: int | None = None,
               instance: str = "") -> Grant:
        """The grant a token carries, or a typed refusal.

        The signature is checked first (in constant time), so a forged token learns nothing about
        what else might be wrong with it. ``current_generation``: the session's control generation
        now (a control token issued before the last take-over is revoked); ``instance``: the session's
        instance now (a token of an earlier session of the same name does not verify)."""
        parts = (token or "").split(".")
        if len(parts) != 5:
            raise LiveTokenInvalid("the live-view token is malformed; ask for a new live-view link")
        sid, mode, expires, generation, signature = parts
        if not hmac.compare_digest(self._sign(".".join([*parts[:4], instance])).encode(), signature.encode()):
            raise LiveTokenInvalid("the live-view token is not valid here (forged, mistyped, from another "
                                   "server or an earlier run of this one, or for an earlier session of this "
                                   "name); ask for a new live-view link")
        if sid != session_id:
            raise LiveTokenWrongSession(f"this live-view token is for session {sid!r}, not {session_id!r}")
        grant = Grant(sid, cast(Mode, mode), int(expires), int(generation), instance)  # signed by us: well formed
        if grant.expires <= self._clock():
            raise LiveTokenExpired("this live-view link expired at "
                                   f"{time.strftime('%H:%M:%S UTC', time.gmtime(grant.expires))}; "
                                   "ask for a new one")
        if grant.control and current_generation is not None and grant.generation != current_generation:
            raise LiveTokenRevoked("this control link was revoked by a take-over; ask for a new one")
        return grant


def token_from_protocols(offered: list[str]) -> tuple[str | None, str | None]:
    """(the token, the subprotocol to accept) from a websocket's offered subprotocols (pure).

    The accepted one is the first offered that is not the token: a browser fails the connection
    if the server picks none of those it offered, and the token is not to be echoed."""
    token = next((p[len(TOKEN_PROTOCOL_PREFIX):] for p in offered if p.startswith(TOKEN_PROTOCOL_PREFIX)), None)
    chosen = next((p for p in offered if not p.startswith(TOKEN_PROTOCOL_PREFIX)), None)
    return token, chosen


# ------------------------------------------------------------------------------------ RFB


class RFBError(RuntimeError):
    """x11vnc did not let the relay in."""


RFB_VERSION = b"RFB 003.008\n"
SECURITY_NONE, SECURITY_VNC = 1, 2
# The relay's side of the handshake with the browser: version, one security type (None), then the
# SecurityResult "OK" after the browser picked it (RFB 3.8 sends a result for None too).
CLIENT_SECURITY_TYPES = bytes([1, SECURITY_NONE])
SECURITY_OK = (0).to_bytes(4, "big")


def vnc_auth_response(password: str, challenge: bytes) -> bytes:
    """The VNC Authentication answer (pure): the 16-byte challenge DES-encrypted with the password
    (its first 8 bytes, zero-padded) as the key, each key byte's bits reversed (RFB 7.2.2)."""
    if len(challenge) != 16:
        raise ValueError("a VNC challenge is 16 bytes")
    key = password.encode("latin-1")[:8].ljust(8, b"\0")
    key = bytes(int(f"{b:08b}"[::-1], 2) for b in key)
    # Single DES is three-key TripleDES with the same key three times (EDE collapses to E).
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    return encryptor.update(challenge) + encryptor.finalize()


def pointer_at_rest(x: int, y: int) -> bytes:
    """An RFB PointerEvent with no button down at display pixel (x, y) (pure). Sent to x11vnc as a
    control connection begins, at where the X pointer really is: x11vnc skips a motion to the
    position it injected last, though the agent's xdotool moved the pointer since, so a person whose
    first press of a take-over is on that pixel pressed wherever the agent left the pointer."""
    return struct.pack(">BBHH", 5, 0, max(0, min(x, 0xFFFF)), max(0, min(y, 0xFFFF)))


async def _reason(reader: asyncio.StreamReader) -> str:
    length = int.from_bytes(await reader.readexactly(4), "big")
    return (await reader.readexactly(min(length, 4096))).decode("latin-1", "replace")


async def rfb_login(port: int, password: str,
                    timeout: float = 5.0) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to x11vnc on loopback and authenticate with ``password``. Returns the stream right
    after the SecurityResult, where the client's ClientInit comes next."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        async with asyncio.timeout(timeout):
            version = await reader.readexactly(12)
            if not version.startswith(b"RFB 003.") or version < RFB_VERSION:
                raise RFBError(f"the VNC server speaks {version!r}, not RFB 3.8")
            writer.write(RFB_VERSION)
            count = (await reader.readexactly(1))[0]
            if count == 0:
                raise RFBError(f"the VNC server refused the connection: {await _reason(reader)}")
            if SECURITY_VNC not in await reader.readexactly(count):
                raise RFBError("the VNC server does not offer password authentication")
            writer.write(bytes([SECURITY_VNC]))
            writer.write(vnc_auth_response(password, await reader.readexactly(16)))
            if int.from_bytes(await reader.readexactly(4), "big") != 0:
                raise RFBError(f"the VNC server refused the password: {await _reason(reader)}")
    except BaseException:
        writer.close()
        raise
    return reader, writer
