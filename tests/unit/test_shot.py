"""The screenshot's coordinate mapping and the lossy encoder, without X."""

from __future__ import annotations

import io

from PIL import Image

from desktop.actions import Region
from desktop.frame import Frame, Pointer, encode_lossy, with_pointer
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


def _frame(width: int, height: int, bgr: tuple[int, int, int]) -> Frame:
    return Frame(bytes([*bgr, 255]) * (width * height), width, height)


def _pixel(frame: Frame, x: int, y: int) -> tuple[int, int, int]:
    i = (y * frame.width + x) * 4
    return tuple(frame.bgra[i:i + 3])


def test_the_pointer_is_drawn_at_its_hot_spot_over_what_is_under_it():
    """desktop.frame.with_pointer: XFixes' premultiplied ARGB composited over the frame."""
    opaque_red, half_black, clear = 0xFFFF0000, 0x80000000, 0x00000000
    pointer = Pointer(x=3, y=2, xhot=1, yhot=1, width=2, height=2, argb=(opaque_red, half_black, clear, opaque_red))
    frame = _frame(6, 4, (200, 100, 50))  # B, G, R
    drawn = with_pointer(frame, pointer)
    assert _pixel(drawn, 2, 1) == (0, 0, 255)  # the image's (0,0) at hot spot's offset: opaque red
    assert _pixel(drawn, 3, 1) == (100, 50, 25)  # half black over the frame: half as bright
    assert _pixel(drawn, 2, 2) == (200, 100, 50)  # transparent: the frame shows
    assert _pixel(drawn, 3, 2) == (0, 0, 255)
    assert _pixel(drawn, 0, 0) == (200, 100, 50) and frame.bgra == _frame(6, 4, (200, 100, 50)).bgra  # untouched


def test_a_pointer_at_the_edge_is_clipped_and_one_off_screen_changes_nothing():
    frame = _frame(4, 4, (0, 0, 0))
    white = 0xFFFFFFFF
    corner = with_pointer(frame, Pointer(x=0, y=0, xhot=1, yhot=1, width=2, height=2, argb=(white,) * 4))
    assert _pixel(corner, 0, 0) == (255, 255, 255) and _pixel(corner, 1, 1) == (0, 0, 0)
    assert with_pointer(frame, Pointer(x=9, y=9, xhot=0, yhot=0, width=2, height=2, argb=(white,) * 4)) is frame
    assert with_pointer(frame, Pointer(x=1, y=1, xhot=0, yhot=0, width=2, height=2, argb=(white,))) is frame
