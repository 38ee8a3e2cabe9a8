"""The page layer's pure parts: the record's rings, file names, where an element is on the
display, how a target is named, and the page summary line. No X, no browser."""

from __future__ import annotations

import hashlib
import threading

import pytest
from pydantic import ValidationError

from desktop.browser.downloads import NAME_LIMIT, numbered, safe_file_name, store_download
from desktop.browser.locate import display_point, point_in, viewport_origin
from desktop.browser.record import Ring
from desktop.models import DialogInfo, DragRequest, DropTarget, ElementPoint, PageSummary, Target
from vision.mcp.operations import summary_line


def test_ring_numbers_entries_and_answers_since():
    ring = Ring(3)
    first = ring.add({"text": "a"})
    assert first["seq"] == 1 and first["ts"] > 0
    for text in "bcd":
        ring.add({"text": text})
    assert [e["text"] for e in ring.since(0)] == ["b", "c", "d"], "bounded: the oldest goes"
    assert [e["seq"] for e in ring.since(2)] == [3, 4]
    assert ring.since(4) == [] and ring.last_seq == 4
    assert [e["text"] for e in ring.since(0, lambda e: e["text"] != "c")] == ["b", "d"]


def test_ring_update_and_copies():
    ring = Ring(10)
    entry = ring.add({"status": None})
    ring.update(entry["seq"], status=404)
    ring.update(999, status=500)  # gone or never there: nothing happens
    got = ring.since(0)
    assert got[0]["status"] == 404
    got[0]["status"] = "changed by a reader"
    assert ring.since(0)[0]["status"] == 404, "readers get copies"


def test_ring_clear_keeps_numbering_on():
    ring = Ring(10)
    ring.add({})
    ring.add({})
    ring.clear()
    assert ring.since(0) == []
    assert ring.add({})["seq"] == 3, "a client's since N stays meaningful across a reset"


def test_ring_is_thread_safe():
    ring = Ring(100_000)

    def add():
        for _ in range(2000):
            ring.add({})

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seqs = [e["seq"] for e in ring.since(0)]
    assert seqs == list(range(1, 8001))


@pytest.mark.parametrize("given, safe", [
    ("report.txt", "report.txt"),
    ("../../x.txt", "x.txt"),
    ("..\\evil\\two.txt", "two.txt"),
    ("..", "file"),
    ("", "file"),
    ("a/b/", "file"),
    (".hidden", "hidden"),
    ("  spaced .txt. ", "spaced .txt"),
    ("x\x00y;rm -rf", "x_y_rm -rf"),
    ("report.txt%00", "report.txt_00"),
    ("名前.txt", "_.txt"),
    ("a" * 300 + ".txt", "a" * NAME_LIMIT),
])
def test_safe_file_name(given, safe):
    assert safe_file_name(given) == safe
    assert safe_file_name(safe) == safe, "a safe name stays as it is (downloads are served only by such names)"


@pytest.mark.parametrize("name", ["report.txt", "noext", "a" * NAME_LIMIT, "b" * 100 + ".tar.gz",
                                  "x." + "e" * 117, "a b.c"])
def test_numbered_names_stay_safe_and_distinct(name):
    assert numbered(name, 1) == name
    names = {numbered(name, n) for n in range(1, 12)}
    assert len(names) == 11
    for candidate in names:
        assert safe_file_name(candidate) == candidate and len(candidate) <= NAME_LIMIT
    assert numbered("report.txt", 2) == "report-2.txt" and numbered("noext", 3) == "noext-3"


def test_store_download_claims_a_free_name_and_hashes(tmp_path):
    source = tmp_path / "guid"
    source.write_bytes(b"content" * 1000)
    target = tmp_path / "downloads"
    target.mkdir()
    first = store_download(source, target, "r.txt")
    second = store_download(source, target, "r.txt")
    assert (first["name"], second["name"]) == ("r.txt", "r-2.txt")
    assert first["size"] == 7000 and first["sha256"] == hashlib.sha256(b"content" * 1000).hexdigest()
    assert (target / "r-2.txt").read_bytes() == source.read_bytes()


def test_viewport_origin_from_the_window_numbers():
    maximised = {"screenX": 0, "screenY": 0, "outerWidth": 1920, "outerHeight": 1080, "innerWidth": 1920,
                 "innerHeight": 993}
    assert viewport_origin(maximised) == (0, 87)
    framed = {"screenX": 100, "screenY": 50, "outerWidth": 1010, "outerHeight": 800, "innerWidth": 1000,
              "innerHeight": 700}
    assert viewport_origin(framed) == (105, 50 + 100 - 5), "side borders, and the bottom border is one of them"


def test_display_point_is_the_box_centre_on_the_display():
    assert display_point({"x": 10, "y": 20, "width": 100, "height": 40}, (0, 87)) == (60, 127)
    assert display_point({"x": 10.5, "y": 20.25, "width": 99, "height": 41}, (5, 100)) == (5 + 60, 100 + 40)
    assert display_point({"x": 0, "y": 0, "width": 1, "height": 1}, (0, 0)) == (0, 0)


def test_a_position_is_a_pixel_inside_the_box_edges_one_pixel_in():
    box = {"x": 100, "y": 200, "width": 50, "height": 54}
    assert point_in(box, None) == point_in(box, "center") == (125, 227)
    assert point_in(box, "top") == (125, 201) and point_in(box, "bottom") == (125, 252)
    assert point_in(box, "left") == (101, 227) and point_in(box, "right") == (148, 227)
    assert point_in(box, ElementPoint(x=7, y=30.9)) == (107, 230)
    assert point_in(box, ElementPoint(y=0)) == (125, 200)  # x left out: the middle
    assert point_in(box, ElementPoint(x=49, y=53)) == (149, 253)  # the last pixel inside
    with pytest.raises(ValueError, match=r"position \(50, 10\) is outside the element's 50x54 box"):
        point_in(box, ElementPoint(x=50, y=10))
    with pytest.raises(ValueError, match="outside"):
        point_in(box, ElementPoint(x=3, y=54))
    tiny = {"x": 5, "y": 5, "width": 1, "height": 1}  # no pixel 1 px in: the edges are the pixel itself
    assert {point_in(tiny, edge) for edge in ("top", "bottom", "left", "right", "center")} == {(5, 5)}


def test_a_drag_says_where_on_each_element_and_refuses_a_bad_position():
    request = DragRequest.model_validate({"selector": "#a", "position": "top",
                                          "to": {"selector": "#b", "position": {"x": 3, "y": 0}}})
    assert request.position == "top" and request.to.position == ElementPoint(x=3, y=0)
    assert request.to.describe() == "selector '#b' at (3, 0)"
    assert DropTarget(selector="#b", position="bottom").describe() == "selector '#b' at its bottom edge"
    assert DropTarget(selector="#b", position=ElementPoint(y=4)).describe() == "selector '#b' at (middle, 4)"
    assert DropTarget(selector="#b", position="center").describe() == "selector '#b'"
    for bad in ({"position": "middle"}, {"position": {"x": -1, "y": 0}}, {"position": {"z": 1}}):
        with pytest.raises(ValidationError):
            DragRequest.model_validate({"selector": "#a", "to": {"selector": "#b", **bad}})


def test_a_target_is_named_exactly_one_way():
    assert Target(selector="#a").describe() == "selector '#a'"
    assert Target(ref="e12").describe() == "ref 'e12'" and Target(ref="f1e3").ref == "f1e3"
    assert Target(label="Email").describe() == "label 'Email'"
    for bad in ({}, {"selector": "#a", "text": "A"}, {"ref": "12"}, {"ref": "e12; drop"}, {"selector": ""},
                {"selector": "a" * 2001}, {"text": "t" * 501}):
        with pytest.raises(ValidationError):
            Target(**bad)
    with pytest.raises(ValidationError, match="exactly one of selector, ref, label, text, role, placeholder, "
                                              "test_id, alt, title \\(got selector, text\\)"):
        Target(selector="#a", text="A")


def test_summary_line():
    plain = PageSummary(url="http://x.test/", title="X", dialog=None, new_console_errors=0)
    assert summary_line(plain) == "page: http://x.test/ - 'X'"
    busy = PageSummary(url="http://x.test/", title="", dialog=DialogInfo(type="alert", message="hi"),
                       new_console_errors=2)
    text = summary_line(busy)
    assert "dialog open: alert 'hi'" in text and "2 new console error(s)" in text
    assert summary_line(PageSummary(url=None, title=None, dialog=None)).startswith("page: (no tab)")


def test_dialog_modes_are_checked_and_manual_is_the_default():
    from desktop.browser.dialogs import dialog_mode
    from desktop.browser.record import PageRecord

    assert PageRecord().dialog_policy == "manual"
    assert [dialog_mode(m) for m in ("manual", "accept", "dismiss")] == ["manual", "accept", "dismiss"]
    for bad in ("", "Accept", "auto", "accept ", "none"):
        with pytest.raises(ValueError, match="manual, accept, dismiss"):
            dialog_mode(bad)


def test_fill_refuses_an_untypeable_value_before_anything_runs():
    """A control character in the value (or in a secret it names) is a typed 422 naming the
    value, found before any session is looked up; it never reaches xdotool or becomes a 500."""
    from desktop.errors import InvalidAction
    from desktop.models import Target
    from desktop.service.page import PageService

    class NoDesktops:
        def get(self, *_):
            raise AssertionError("validation must come before any session is touched")

    pages = PageService(NoDesktops())
    with pytest.raises(InvalidAction, match=r"^value: the character U\+0015 at position 0"):
        pages.fill("s", Target(selector="#name"), "\x15abc")
    with pytest.raises(InvalidAction) as raised:
        pages.fill("s", Target(selector="#name"), "pw={{PW}}", secrets={"PW": "hunter\x002"})
    assert "hunter" not in str(raised.value)  # the secret is never echoed in the error
