"""The screenshot's coordinate mapping and the lossy encoder, without X."""

from __future__ import annotations

import io

from PIL import Image

from desktop.actions import Region
from desktop.frame import Frame, encode_lossy
from desktop.service.desktop import Shot


def test_whole_screen_maps_from_origin():
    shot = Shot("s", b"", 960, 540, None, 0.5)
    assert shot.origin == (0, 0) and shot.bounds == (0, 0, 1920, 1080) and shot.media_type == "image/png"
    assert "display x = image x / 0.5" in shot.note


def test_region_maps_from_its_corner():
    shot = Shot("s", b"", 640, 400, Region(x0=100, y0=50, x1=420, y1=250), 2.0, format="webp")
    assert shot.origin == (100, 50) and shot.bounds == (100, 50, 420, 250) and shot.media_type == "image/webp"
    try:
        _ = shot.png
    except ValueError as exc:
        assert "webp" in str(exc)
    else:
        raise AssertionError("a webp shot handed out as png")


def test_view_and_lossy_encoding():
    bgra = bytes([0, 0, 255, 0]) * (40 * 20)  # pure red, BGRX
    frame = Frame(bgra, 40, 20)
    view = frame.view(Region(x0=10, y0=0, x1=30, y1=20), 0.5)
    assert view.size == (10, 10)
    for fmt, pil in (("jpeg", "JPEG"), ("webp", "WEBP")):
        image = Image.open(io.BytesIO(encode_lossy(view, fmt, 90)))
        assert image.format == pil and image.size == (10, 10)
        r, g, b = image.convert("RGB").getpixel((5, 5))
        assert r > 240 and g < 15 and b < 15
