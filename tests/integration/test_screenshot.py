"""GET .../desktop/screenshot with region, scale, format and quality: the image is what the
display shows there, and its headers say how to map its pixels back to display pixels."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.x11

BASE = "/api/v1/sessions/itest/desktop"


def decoded(data: bytes, fmt: str) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    assert image.format == fmt
    return image.convert("RGB")


def display_at(headers, ix: float, iy: float) -> tuple[float, float]:
    """Image pixel -> display pixel, by the answer's headers alone."""
    scale = float(headers["x-glassdesk-scale"])
    ox, oy = map(int, headers["x-glassdesk-origin"].split(","))
    return ox + ix / scale, oy + iy / scale


def test_region_png_is_the_display_there_pixel_exact(api, page, desk):
    for _attempt in range(3):  # a repaint between the two captures would differ: retry
        response = api.get(f"{BASE}/screenshot", params={"region": "100,200,420,400"})
        truth = desk.capture().image.crop((100, 200, 420, 400))
        assert response.status_code == 200 and response.headers["content-type"] == "image/png"
        if decoded(response.content, "PNG").tobytes() == truth.tobytes():
            break
    else:
        raise AssertionError("the region never matched the display")
    h = response.headers
    assert (h["x-glassdesk-scale"], h["x-glassdesk-origin"], h["x-glassdesk-region"]) == ("1", "100,200",
                                                                                       "100,200,420,400")
    assert display_at(h, 0, 0) == (100, 200) and display_at(h, 319, 199) == (419, 399)


@pytest.mark.parametrize("fmt, pil", [("jpeg", "JPEG"), ("webp", "WEBP")])
def test_scaled_region_in_a_lossy_format_maps_back(api, page, desk, fmt, pil):
    response = api.get(f"{BASE}/screenshot", params={"region": "960,540,1920,1080", "scale": 0.5,
                                                      "format": fmt, "quality": 90})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == f"image/{fmt}"
    image = decoded(response.content, pil)
    assert image.size == (480, 270)
    h = response.headers
    assert (h["x-glassdesk-scale"], h["x-glassdesk-origin"]) == ("0.5", "960,540")
    assert display_at(h, 240, 135) == (1440, 810)
    assert "display x = 960 + image x / 0.5" in h["x-glassdesk-coordinates"]
    # Same picture as the display's region halved (lossy: close, not equal).
    truth = desk.capture().image.crop((960, 540, 1920, 1080)).resize((480, 270), Image.Resampling.LANCZOS)
    diff = np.abs(np.asarray(image, np.int16) - np.asarray(truth, np.int16)).mean()
    assert diff < 4, diff


def test_lower_quality_is_smaller(api, page):
    sizes = [len(api.get(f"{BASE}/screenshot", params={"format": "jpeg", "quality": q}).content) for q in (10, 95)]
    assert sizes[0] < sizes[1]


@pytest.mark.parametrize("params, field", [({"format": "gif"}, "format"), ({"quality": 50}, "quality"),
                                          ({"format": "jpeg", "quality": 0}, "quality"),
                                          ({"region": "0,0,10"}, "region"), ({"scale": 0}, "scale")])
def test_bad_parameters_are_refused(api, params, field):
    response = api.get(f"{BASE}/screenshot", params=params)
    assert response.status_code == 422, response.text
    err = response.json()["error"]
    assert err["code"] == "invalid_action" and field in err["message"], err
