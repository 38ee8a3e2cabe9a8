"""Frame PNG encoding: what the trace stores and models see must be the exact pixels captured."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from desktop.actions import Region
from desktop.frame import Frame, encode_png


def _frame(seed: int = 1) -> tuple[Frame, np.ndarray]:
    rgb = np.random.default_rng(seed).integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    bgra = np.dstack([rgb[:, :, 2], rgb[:, :, 1], rgb[:, :, 0], np.full((1080, 1920), 255, np.uint8)])
    return Frame(bytearray(bgra.tobytes()), 1920, 1080), rgb


def test_png_decodes_to_exactly_the_captured_pixels():
    frame, rgb = _frame()
    decoded = Image.open(io.BytesIO(frame.png))
    assert decoded.mode == "RGB" and decoded.size == (1920, 1080)
    assert np.array_equal(np.asarray(decoded), rgb)
    assert frame.png is frame.png  # encoded once, shared by the trace and the providers


def test_scaled_and_cropped_pngs_round_trip():
    frame, rgb = _frame(2)
    crop = Image.open(io.BytesIO(frame.crop_png(Region(x0=10, y0=20, x1=110, y1=70))))
    assert np.array_equal(np.asarray(crop), rgb[20:70, 10:110])
    assert Image.open(io.BytesIO(frame.scaled_png(1429, 804))).size == (1429, 804)
    image = Image.fromarray(rgb[:5, :7])
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(encode_png(image)))), rgb[:5, :7])
