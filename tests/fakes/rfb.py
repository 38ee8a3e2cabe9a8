"""Bare RFB clients over the relay's websocket (/api/v1/sessions/{id}/vnc), as noVNC is one.

RFBClient checks the relay's side of the protocol step by step (the live-view tests); RfbControl is
the person at the live view of a run (a takeover's clicks and keys), connected and past the
handshake as soon as it is made.
"""

from __future__ import annotations

import struct
import time

from websockets.sync.client import connect

SID = "itest"  # the shared test desktop (tests/conftest.py's desk)


class RFBClient:
    """A minimal RFB client over the relay's websocket: what a client that ignores view-only sends."""

    def __init__(self, server, token: str, source: str = "127.0.0.1", session: str = SID, **options):
        url = f"ws://127.0.0.1:{server.port}/api/v1/sessions/{session}/vnc"
        self.ws = connect(url, subprotocols=["binary", f"glassdesk.token.{token}"], source_address=(source, 0),
                          open_timeout=15, max_size=None, **options).__enter__()
        self.pending = bytearray()

    def read(self, n: int) -> bytes:
        while len(self.pending) < n:
            self.pending += self.ws.recv(timeout=15)
        out = bytes(self.pending[:n])
        del self.pending[:n]
        return out

    def handshake(self) -> tuple[int, int]:
        """The relay's greeting (RFB 3.8, security None), ClientInit, ServerInit: the screen size."""
        assert self.read(12) == b"RFB 003.008\n"
        self.ws.send(b"RFB 003.008\n")
        count = self.read(1)[0]
        assert self.read(count) == b"\x01"  # only None: the relay did the VNC authentication
        self.ws.send(b"\x01")
        assert self.read(4) == b"\0\0\0\0"
        self.ws.send(b"\x01")  # ClientInit: shared
        width, height = struct.unpack(">HH", self.read(4))
        self.bpp = self.read(16)[0]
        self.read(struct.unpack(">I", self.read(4))[0])  # the desktop's name
        return width, height

    def pointer(self, x: int, y: int) -> None:
        self.ws.send(struct.pack(">BBHH", 5, 0, x, y))

    def sync(self) -> None:
        """Ask for a 1x1 update and read it: x11vnc handles a client's messages in order, so every
        message sent before has been handled (or ignored) once this answer arrives."""
        self.ws.send(struct.pack(">BBHHHH", 3, 0, 0, 0, 1, 1))
        while True:
            kind = self.read(1)[0]
            if kind == 0:  # FramebufferUpdate
                self.read(1)
                for _ in range(struct.unpack(">H", self.read(2))[0]):
                    _, _, w, h, encoding = struct.unpack(">HHHHi", self.read(12))
                    assert encoding == 0, encoding  # Raw: nothing else was asked for
                    self.read(w * h * self.bpp // 8)
                return
            if kind == 2:  # Bell
                continue
            raise AssertionError(f"unexpected server message {kind}")

    def close(self) -> None:
        self.ws.__exit__(None, None, None)


class RfbControl(RFBClient):
    """The person at the live view of the shared desktop: past the handshake once made (checked
    less strictly than RFBClient.handshake, as it always was), then clicks and keys as a hand makes them."""

    def __init__(self, base_url: str, token: str):
        url = base_url.replace("http://", "ws://") + f"/api/v1/sessions/{SID}/vnc"
        self.ws = connect(url, subprotocols=["binary", f"glassdesk.token.{token}"], open_timeout=15,
                          max_size=None).__enter__()
        self.pending = bytearray()
        assert self.read(12) == b"RFB 003.008\n"
        self.ws.send(b"RFB 003.008\n")
        self.read(self.read(1)[0])
        self.ws.send(b"\x01")
        assert self.read(4) == b"\0\0\0\0"
        self.ws.send(b"\x01")  # ClientInit: shared
        self.read(4)
        self.bpp = self.read(16)[0]
        self.read(struct.unpack(">I", self.read(4))[0])

    def click(self, x: int, y: int, *, arrive: bool = True) -> None:
        # As a hand does: the pointer arrives from a neighbouring pixel, and is there before the
        # button goes down. ``arrive=False``: the press is the first event, on the pixel itself.
        if arrive:
            for mx, my in ((x + 1 if x < 1919 else x - 1, y), (x, y)):
                self.ws.send(struct.pack(">BBHH", 5, 0, mx, my))
            self.sync()
        for mask in (1, 0):
            self.ws.send(struct.pack(">BBHH", 5, mask, x, y))
            time.sleep(0.05)

    def key(self, *keysyms: int) -> None:
        for down in (1, 0):
            for sym in keysyms if down else reversed(keysyms):
                self.ws.send(struct.pack(">BBxxI", 4, down, sym))
                time.sleep(0.02)

    def sync(self) -> None:
        """A 1x1 update asked and read: x11vnc has handled everything sent before. (It does not
        check the rectangles' encoding as RFBClient.sync does: the person's tests never did.)"""
        self.ws.send(struct.pack(">BBHHHH", 3, 0, 0, 0, 1, 1))
        while True:
            kind = self.read(1)[0]
            if kind == 0:
                self.read(1)
                for _ in range(struct.unpack(">H", self.read(2))[0]):
                    _, _, w, h, encoding = struct.unpack(">HHHHi", self.read(12))
                    self.read(w * h * self.bpp // 8)
                return
            assert kind == 2, kind  # a bell; nothing else was asked for
