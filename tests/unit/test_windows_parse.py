"""`wmctrl -lGpx` output -> Window records, on real output captured from a session. No X."""

from __future__ import annotations

import pytest

from desktop.x11.screen import class_text, title_text
from desktop.x11.windows import URL_SCHEMES, WINDOW_ID, parse_wmctrl

# Captured from a glassdesk session (host name "vm"). Chromium's WM_CLASS instance holds its
# profile directory, with a space in it.
SAMPLE = """\
0x00a00003 -1 25564  0    1051 1920 29   xfce4-panel.Xfce4-panel  vm xfce4-panel
0x00800028 -1 25574  0    0    1920 1080 xfdesktop.Xfdesktop   vm Desktop
0x00e00002  0 25593  0    0    1920 1051 chromium (/tmp/glassdesk-m44mn5of/x/chromium-profile).Chromium  vm \
about:blank - Chromium
0x01200003  0 0      712  480  496  120  xmessage.Xmessage     vm xmessage
0x01400007  0 31337  -5   -20  800  600  mousepad.Mousepad     buildhost Untitled 1 - Mousepad  (edited)
"""


def test_parse_every_window():
    windows = parse_wmctrl(SAMPLE)
    assert [w.id for w in windows] == ["0x00a00003", "0x00800028", "0x00e00002", "0x01200003", "0x01400007"]


def test_geometry_pid_and_class():
    panel, desktop, chromium, xmessage, mousepad = parse_wmctrl(SAMPLE)
    assert (panel.x, panel.y, panel.width, panel.height) == (0, 1051, 1920, 29)
    assert panel.pid == 25564 and panel.wm_class == "xfce4-panel.Xfce4-panel" and panel.title == "xfce4-panel"
    assert (desktop.wm_class, desktop.title) == ("xfdesktop.Xfdesktop", "Desktop")
    assert (chromium.x, chromium.y, chromium.width, chromium.height) == (0, 0, 1920, 1051)
    assert (mousepad.x, mousepad.y) == (-5, -20)


def test_a_class_with_a_space_keeps_the_title_clean():
    chromium = parse_wmctrl(SAMPLE)[2]
    assert chromium.wm_class == "chromium (/tmp/glassdesk-m44mn5of/x/chromium-profile).Chromium"
    assert chromium.wm_class.endswith(".Chromium")
    assert chromium.title == "about:blank - Chromium"  # not "vm about:blank - Chromium"


def test_pid_zero_means_unknown_and_titles_keep_their_spaces():
    xmessage, mousepad = parse_wmctrl(SAMPLE)[3:]
    assert xmessage.pid is None
    assert mousepad.title == "Untitled 1 - Mousepad  (edited)"


def test_empty_title_and_short_or_blank_lines():
    out = "\n\nnot a window line\n0x00000001  0 10 0 0 10 10 app.App  vm \n0x00000002  0 10 0 0 10 10\n"
    windows = parse_wmctrl(out)
    assert len(windows) == 1
    assert windows[0].wm_class == "app.App" and windows[0].title == ""


def test_a_windows_properties_read_over_x_are_written_as_wmctrl_writes_them():
    assert class_text(b"chromium (/tmp/x/profile)\0Chromium\0") == "chromium (/tmp/x/profile).Chromium"
    assert class_text(b"xmessage\0Xmessage\0") == "xmessage.Xmessage" and class_text(None) == "N/A"
    assert title_text("Untitled 1 – Mousepad".encode(), b"ignored") == "Untitled 1 – Mousepad"
    assert title_text(None, "caf\u00e9".encode("latin-1")) == "caf\u00e9"  # X's STRING type is Latin-1
    assert title_text(None, None) == title_text(b"", None) == "N/A"


def test_nothing_in_nothing_out():
    assert parse_wmctrl("") == []


@pytest.mark.parametrize("value,ok", [("0x00e00002", True), ("0x1", True), ("14680066", True), ("0xZZ", False),
                                      ("1; rm -rf /", False), ("", False), ("0x123456789", False)])
def test_window_id_shape(value, ok):
    assert bool(WINDOW_ID.match(value)) is ok


def test_url_schemes_are_explicit():
    assert "http://" in URL_SCHEMES and "https://" in URL_SCHEMES
    assert not any(s.startswith(("javascript", "vbscript")) for s in URL_SCHEMES)
