"""Visual baselines on disk (vision/qa/baselines.py): versions, integrity, bad names; no X needed."""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC
from pathlib import Path

import numpy as np
import pytest

from desktop.errors import InvalidRequest
from vision.errors import BaselineCorrupt, BaselineNotFound
from vision.qa.baselines import BaselineMeta, BaselineStore
from vision.qa.diff import decode_png, encode_png


def _png(value: int, width: int = 32, height: int = 20) -> bytes:
    return encode_png(np.full((height, width, 3), value, np.uint8))


def _create(store: BaselineStore, name: str = "home", shots: dict | None = None, **fields) -> BaselineMeta:
    options = dict(url="http://127.0.0.1:8000/", scope="page", mask=["#clock", [0, 0, 10, 10]],
                   mask_boxes=[[0, 0, 10, 10], [100, 5, 160, 25]])
    options.update(fields)
    return store.create(name, shots if shots is not None else {"page": _png(200)}, **options)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def store(tmp_path: Path) -> BaselineStore:
    return BaselineStore(tmp_path)


def test_a_baseline_is_stored_with_metadata_naming_every_png_and_its_sha256(store: BaselineStore, tmp_path: Path):
    page, header = _png(200, 64, 40), _png(10, 16, 8)
    meta = _create(store, "home", {"#header .logo": header, "page": page})
    assert (meta.id, meta.version, meta.width, meta.height, meta.scope) == ("home", 1, 64, 40, "page")
    assert meta.created_at.tzinfo is not None and meta.created_at.utcoffset() == UTC.utcoffset(None)
    assert [s.name for s in meta.screenshots] == ["page", "#header .logo"]  # "page" first
    assert meta.mask == ["#clock", [0, 0, 10, 10]] and meta.mask_boxes == [[0, 0, 10, 10], [100, 5, 160, 25]]
    assert meta.approved_from is None

    directory = tmp_path / "qa" / "baselines" / "home" / "v1"
    on_disk = json.loads((directory / "meta.json").read_text())
    assert {s["name"]: s["sha256"] for s in on_disk["screenshots"]} == {
        "page": hashlib.sha256(page).hexdigest(), "#header .logo": hashlib.sha256(header).hexdigest()}
    for shot in on_disk["screenshots"]:
        assert hashlib.sha256((directory / shot["file"]).read_bytes()).hexdigest() == shot["sha256"]
    assert store.image("home") == page and store.image("home", "#header .logo") == header
    assert np.array_equal(decode_png(store.image("home")), np.full((40, 64, 3), 200, np.uint8))
    assert store.get("home") == meta == BaselineStore(tmp_path).get("home", 1)  # read back from disk alike


def test_the_same_name_again_is_the_next_version_and_old_versions_stay(store: BaselineStore):
    _create(store, "home", {"page": _png(1)})
    _create(store, "other", {"page": _png(2)})
    second = _create(store, "home", {"page": _png(3)}, approved_from="run-123")
    assert (second.version, second.approved_from) == (2, "run-123")
    assert store.get("home").version == 2
    assert store.image("home") == _png(3) and store.image("home", version=1) == _png(1)
    assert [m.version for m in store.versions("home")] == [1, 2]
    assert [(m.id, m.version) for m in store.list()] == [("home", 2), ("other", 1)]


def test_a_missing_baseline_version_or_screenshot_is_baseline_not_found(store: BaselineStore):
    assert store.list() == []
    for call in (lambda: store.get("nope"), lambda: store.versions("nope"), lambda: store.image("nope")):
        with pytest.raises(BaselineNotFound, match="no baseline 'nope'"):
            call()
    _create(store, "home")
    with pytest.raises(BaselineNotFound, match="no version 7; its versions are 1"):
        store.get("home", 7)
    with pytest.raises(BaselineNotFound, match="no screenshot '#nav'.*'page'"):
        store.image("home", "#nav")
    assert (BaselineNotFound.code, BaselineNotFound.status) == ("baseline_not_found", 404)


@pytest.mark.parametrize("name", ["../evil", "..", "a..b", "a/b", "/etc", ".hidden", "-x", "", "a b", "x" * 101,
                                  "naïve", "a\x00b", None])
def test_bad_names_are_refused_and_create_nothing(store: BaselineStore, tmp_path: Path, name):
    with pytest.raises(InvalidRequest, match="baseline name"):
        _create(store, name)
    with pytest.raises(InvalidRequest, match="baseline name"):
        store.get(name)
    assert _files(tmp_path) == []


@pytest.mark.parametrize("shots, fields, says", [
    ({}, {}, "at least one screenshot"),
    ({"page": b"not a png"}, {}, "not a readable PNG"),
    ({"page": "text"}, {}, "must be PNG bytes"),
    ({"": _png(1)}, {}, "non-empty string"),
    ({"page": _png(1)}, {"scope": "window"}, "scope"),
    ({"page": _png(1)}, {"mask_boxes": [["a", 1, 2, 3]]}, "mask_boxes"),
])
def test_bad_content_is_refused_and_creates_nothing(store: BaselineStore, tmp_path: Path, shots, fields, says):
    with pytest.raises(InvalidRequest, match=says):
        _create(store, "home", shots, **fields)
    assert _files(tmp_path) == []


def test_bad_versions_are_refused(store: BaselineStore):
    _create(store, "home")
    for version in (0, -1, "1", True, 1.5):
        with pytest.raises(InvalidRequest, match="version"):
            store.get("home", version)


def test_a_half_written_version_is_never_listed_and_is_replaced_by_the_next(store: BaselineStore, tmp_path: Path):
    _create(store, "home", {"page": _png(1)})
    # A crash while writing version 2: its PNG is there, its metadata (written last) is not.
    cut = tmp_path / "qa" / "baselines" / "home" / "v2"
    cut.mkdir()
    (cut / "page.png").write_bytes(b"half")
    (cut / "stray.png").write_bytes(b"junk")
    assert store.get("home").version == 1 and [m.version for m in store.versions("home")] == [1]
    # An unfinished first version of a new name is not a baseline at all.
    (tmp_path / "qa" / "baselines" / "new" / "v1").mkdir(parents=True)
    assert [m.id for m in store.list()] == ["home"]
    with pytest.raises(BaselineNotFound):
        store.get("new")

    again = _create(store, "home", {"page": _png(9)})
    assert again.version == 2 and store.image("home") == _png(9)
    assert sorted(p.name for p in cut.iterdir()) == ["meta.json", "page.png"]  # the leftovers are gone


def test_an_edited_screenshot_is_detected_on_read(store: BaselineStore, tmp_path: Path):
    _create(store, "home", {"page": _png(1)})
    path = tmp_path / "qa" / "baselines" / "home" / "v1" / "page.png"
    data = bytearray(path.read_bytes())
    data[-20] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(BaselineCorrupt, match="does not match the SHA-256"):
        store.image("home")
    path.unlink()
    with pytest.raises(BaselineCorrupt, match="cannot be read"):
        store.image("home")


def test_concurrent_creates_of_one_name_get_distinct_versions(store: BaselineStore):
    errors: list[BaseException] = []

    def create(value: int) -> None:
        try:
            _create(store, "busy", {"page": _png(value)})
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(value,)) for value in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    versions = store.versions("busy")
    assert [m.version for m in versions] == list(range(1, 9))
    # Each version holds its own screenshot, whole. By its pixels, not its bytes: the deflate stream
    # of one image was once seen to differ under a loaded CI's eight concurrent encodes (a valid
    # PNG, not byte-equal to a later encode of the same pixels).
    stored = [decode_png(store.image("busy", version=m.version)) for m in versions]
    assert sorted(int(image[0, 0, 0]) for image in stored) == list(range(8))
    assert all(image.shape == (20, 32, 3) and (image == image[0, 0, 0]).all() for image in stored)
