"""A captured screen and its encoders: PNG (the trace's and the models'), JPEG and WebP.

Pure of X: the loop, the providers, the trace and the QA comparison import this, never the capture
(desktop.x11.screen), so importing them loads no Xlib or mss.
"""

from __future__ import annotations

import io
import struct
import time
import zlib
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from isal import isal_zlib
from PIL import Image

from desktop.actions import Region


@dataclass(frozen=True, eq=False)
class Frame:
    """One captured screen: raw BGRA from the X server, encoded lazily and at most once."""

    bgra: bytes | bytearray  # as mss hands it over: a fresh buffer per grab, never written to
    width: int
    height: int
    taken_at: float = field(default_factory=time.time)

    @classmethod
    def of_image(cls, image: Image.Image, taken_at: float | None = None) -> Frame:
        """A frame of an RGB image (one drawn on, not captured)."""
        rgb = np.asarray(image.convert("RGB"))
        bgra = np.empty((image.height, image.width, 4), np.uint8)
        bgra[:, :, :3] = rgb[:, :, ::-1]
        bgra[:, :, 3] = 255
        return cls(bgra.tobytes(), image.width, image.height, time.time() if taken_at is None else taken_at)

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

    def same_pixels(self, other: Frame | None) -> bool:
        return other is not None and self.bgra == other.bgra

    def scaled_png(self, width: int, height: int) -> bytes:
        """The frame resized for a model that sees a smaller image."""
        if (width, height) == (self.width, self.height):
            return self.png
        return encode_png(self.image.resize((width, height), Image.Resampling.LANCZOS))

    def crop_png(self, region: Region, scale: float = 1.0) -> bytes:
        """A region at full resolution, optionally scaled (the zoom action)."""
        return encode_png(self.view(region, scale))

    def view(self, region: Region | None, scale: float = 1.0) -> Image.Image:
        """The whole frame or a region of it, resized by ``scale``, as an image to encode."""
        image = self.image if region is None else self.image.crop((region.x0, region.y0, region.x1, region.y1))
        if scale != 1.0:
            image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                                 Image.Resampling.LANCZOS)
        return image


@dataclass(frozen=True)
class Pointer:
    """The pointer as the X server draws it (XFixes): where its hot spot is, and its image."""

    x: int
    y: int
    xhot: int
    yhot: int
    width: int
    height: int
    argb: tuple[int, ...]  # premultiplied ARGB, one int per pixel, row by row


def with_pointer(frame: Frame, pointer: Pointer) -> Frame:
    """The frame with the pointer drawn in where it is, as a person sees the screen (pure). X
    captures leave the pointer out (it is an overlay of the server's); a model trained on
    screenshots that show it (OSWorld's) expects it. Clipped at the screen's edges."""
    if pointer.width <= 0 or pointer.height <= 0 or len(pointer.argb) != pointer.width * pointer.height:
        return frame
    left, top = pointer.x - pointer.xhot, pointer.y - pointer.yhot
    x0, y0 = max(0, left), max(0, top)
    x1, y1 = min(frame.width, left + pointer.width), min(frame.height, top + pointer.height)
    if x0 >= x1 or y0 >= y1:
        return frame
    argb = np.array(pointer.argb, dtype=np.uint32).reshape(pointer.height, pointer.width)
    argb = argb[y0 - top:y1 - top, x0 - left:x1 - left]
    alpha = ((argb >> 24) & 0xFF).astype(np.uint16)[..., None]
    # BGR order, as the frame keeps its pixels; the image is premultiplied: src + dst * (1 - alpha)
    source = np.stack([argb & 0xFF, (argb >> 8) & 0xFF, (argb >> 16) & 0xFF], axis=-1).astype(np.uint16)
    pixels = np.frombuffer(frame.bgra, np.uint8).reshape(frame.height, frame.width, 4).copy()
    under = pixels[y0:y1, x0:x1, :3].astype(np.uint16)
    pixels[y0:y1, x0:x1, :3] = np.minimum(255, source + (under * (255 - alpha) + 127) // 255).astype(np.uint8)
    return Frame(pixels.tobytes(), frame.width, frame.height, taken_at=frame.taken_at)


# The formats a screenshot may be asked in, with their media types. PNG is lossless (pixel-exact
# checks); JPEG and WebP are for callers that pay per byte (a model's context, a slow link).
IMAGE_FORMATS = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
DEFAULT_QUALITY = {"jpeg": 85, "webp": 80}  # Pillow's own defaults are 75 and 80


def encode_lossy(image: Image.Image, fmt: str, quality: int | None = None) -> bytes:
    """An image as JPEG or WebP at ``quality`` (1..100; None: the format's default)."""
    out = io.BytesIO()
    image.convert("RGB").save(out, fmt.upper(), quality=quality or DEFAULT_QUALITY[fmt])
    return out.getvalue()


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
