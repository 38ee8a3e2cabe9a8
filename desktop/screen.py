"""Capture the display (mss over XShm), encode it, and wait for it to settle after an action."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from functools import cached_property

import struct
import zlib

import mss
import numpy as np
from isal import isal_zlib
from PIL import Image

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Region


@dataclass(frozen=True, eq=False)
class Frame:
    """One captured screen: raw BGRA from the X server, encoded lazily and at most once."""

    bgra: bytes | bytearray  # as mss hands it over: a fresh buffer per grab, never written to
    width: int
    height: int
    taken_at: float = field(default_factory=time.time)

    @cached_property
    def image(self) -> Image.Image:
        return Image.frombuffer("RGB", (self.width, self.height), self.bgra, "raw", "BGRX", 0, 1)

    @cached_property
    def png(self) -> bytes:
        # Straight from BGRA to PNG scanlines, no intermediate image. Channel by channel: numpy
        # copies one plane four times faster than through a reversed-stride view of all three.
        bgra = np.frombuffer(self.bgra, np.uint8).reshape(self.height, self.width, 4)
        rows = np.empty((self.height, 1 + self.width * 3), np.uint8)
        rows[:, 0] = 0  # filter type "none" on every scanline
        rgb = rows[:, 1:].reshape(self.height, self.width, 3)
        for channel in range(3):
            rgb[:, :, channel] = bgra[:, :, 2 - channel]
        return png_from_scanlines(rows, self.width, self.height)

    def same_pixels(self, other: "Frame | None") -> bool:
        return other is not None and self.bgra == other.bgra

    def scaled_png(self, width: int, height: int) -> bytes:
        """The frame resized for a model that sees a smaller image."""
        if (width, height) == (self.width, self.height):
            return self.png
        return encode_png(self.image.resize((width, height), Image.Resampling.LANCZOS))

    def crop_png(self, region: Region, scale: float = 1.0) -> bytes:
        """A region at full resolution, optionally scaled (the zoom action)."""
        crop = self.image.crop((region.x0, region.y0, region.x1, region.y1))
        if scale != 1.0:
            size = (max(1, round(region.width * scale)), max(1, round(region.height * scale)))
            crop = crop.resize(size, Image.Resampling.LANCZOS)
        return encode_png(crop)


def png_from_scanlines(scanlines, width: int, height: int) -> bytes:
    """An RGB PNG from filtered scanlines. Deflate is most of a PNG's cost: ISA-L's level 1 is
    several times faster than zlib's for the same ratio (see docs/benchmarks.md)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">2I5B", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", isal_zlib.compress(scanlines, 1))
            + chunk(b"IEND", b""))


def encode_png(image: Image.Image) -> bytes:
    rgb = np.asarray(image.convert("RGB"))
    height, width = rgb.shape[:2]
    rows = np.zeros((height, 1 + width * 3), np.uint8)
    rows[:, 1:] = rgb.reshape(height, width * 3)
    return png_from_scanlines(rows, width, height)


class ScreenshotError(RuntimeError):
    pass


class Screen:
    """Grabs frames of one X display. mss handles are per thread, so one is kept per thread."""

    def __init__(self, display: str):
        self.display = display
        self._local = threading.local()

    def _mss(self):
        handle = getattr(self._local, "mss", None)
        if handle is None:
            handle = mss.MSS(display=self.display)
            self._local.mss = handle
        return handle

    def capture(self) -> Frame:
        try:
            shot = self._mss().grab({"left": 0, "top": 0, "width": SCREEN_WIDTH, "height": SCREEN_HEIGHT})
        except Exception as exc:  # the X server went away or refused: drop the handle, report
            self._local.mss = None
            raise ScreenshotError(f"could not capture display {self.display}: {exc}") from exc
        # mss hands over a fresh buffer per grab: keep it rather than copy 8 MB.
        return Frame(shot.raw, shot.width, shot.height)

    def settle(self, *, quiet_ms: int = 45, first_change_ms: int = 150, timeout_ms: int = 3000,
               interval_ms: int = 10, before: Frame | None = None) -> tuple[Frame, int]:
        """Wait until the screen stops changing; return the settled frame and the ms waited.

        See SettlePolicy for the rule. ``before`` is the frame from before the action, so a change
        is recognised even when it landed before the first poll.
        """
        policy = SettlePolicy(quiet_ms=quiet_ms, first_change_ms=first_change_ms, timeout_ms=timeout_ms)
        start = time.monotonic()
        previous = before
        while True:
            frame = self.capture()
            now_ms = (time.monotonic() - start) * 1000
            if policy.observe(now_ms, changed=not frame.same_pixels(previous)):
                return frame, round(now_ms)
            previous = frame
            time.sleep(interval_ms / 1000)

    def close(self) -> None:
        handle = getattr(self._local, "mss", None)
        if handle is not None:
            handle.close()
            self._local.mss = None


@dataclass
class SettlePolicy:
    """When is the screen settled? A pure state machine fed with (time, changed?) observations.

    - After any change, the screen must stay unchanged for ``quiet_ms``.
    - If nothing has changed yet, wait up to ``first_change_ms`` for the action's effect to show
      (an app repaints a few ms to a few tens of ms after input), then call it settled.
    - Never wait past ``timeout_ms``: an animation or a blinking caret must not hang the loop.
    """

    quiet_ms: int = 45  # ~3 Chromium frames without a change
    first_change_ms: int = 150
    timeout_ms: int = 3000
    _last_change_ms: float | None = None

    def observe(self, now_ms: float, changed: bool) -> bool:
        if changed:
            self._last_change_ms = now_ms
        if now_ms >= self.timeout_ms:
            return True
        if self._last_change_ms is None:
            return now_ms >= self.first_change_ms
        return now_ms - self._last_change_ms >= self.quiet_ms
