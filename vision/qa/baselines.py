"""Visual baselines: named, versioned reference screenshots kept under the data directory.

Layout: ``<data_dir>/qa/baselines/<id>/v<version>/`` holds the version's PNGs and ``meta.json``,
which names every PNG with its SHA-256. The metadata is written last, each file atomically
(vision.trace.files.atomic_write), so a version whose writing was cut short has no metadata and is never
listed, and the next version written takes its number (the leftover files are removed first).
Reading a screenshot checks its SHA-256 against the metadata: an edited file is an error, never
silently compared against.

A new version of an existing name is how a baseline is updated (the approve step of the review
loop): earlier versions stay, readable by number.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import re
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, ValidationError

from vision.errors import BaselineConflict, BaselineCorrupt, BaselineNotFound, InvalidRequest
from vision.trace.files import atomic_write, fsync_dir

__all__ = ["BaselineMeta", "BaselineShot", "BaselineStore", "valid_baseline_id"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_VERSION_DIR = re.compile(r"v([1-9][0-9]{0,8})")
_META = "meta.json"
# An unfinished version younger than this may still be being written, by another server on the data dir.
UNFINISHED_AGE_S = 60.0
PAGE_SHOT = "page"


class BaselineShot(BaseModel):
    name: str  # "page", or the component selector it shows
    file: str  # the PNG's file name in the version's directory
    sha256: str


class BaselineMeta(BaseModel):
    id: str
    version: int
    created_at: datetime  # UTC
    url: str | None
    width: int  # of the "page" screenshot (else the first one)
    height: int
    scope: Literal["page", "full_page", "display"]
    mask: list  # selectors and [x0, y0, x1, y1] boxes, as given
    mask_boxes: list[list[int]]  # the boxes actually masked (selectors resolved), display or image px
    screenshots: list[BaselineShot]  # "page" first, then one per component selector
    approved_from: str | None = None  # the test_run_id a version was promoted from


def valid_baseline_id(name: str) -> str:
    """The name, or InvalidRequest saying what a name may be (it becomes a directory name)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise InvalidRequest(f"baseline name {name!r} is not allowed: use 1 to 100 letters, digits, '.', '_' "
                             f"or '-', starting with a letter or digit, without '..'")
    return name


def _valid_version(version: int | None) -> int | None:
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise InvalidRequest(f"a baseline version is a whole number from 1, not {version!r}")
    return version


def _png_size(name: str, data: bytes) -> tuple[int, int]:
    if not isinstance(data, (bytes, bytearray)):
        raise InvalidRequest(f"screenshot {name!r} must be PNG bytes, not {type(data).__name__}")
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "PNG":
                raise InvalidRequest(f"screenshot {name!r} is {image.format}, not PNG")
            return image.size
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise InvalidRequest(f"screenshot {name!r} is not a readable PNG ({exc})") from exc


def _file_name(position: int, shot: str) -> str:
    # Shot names are selectors (any characters): files are named by position, the name is in the metadata.
    return f"{PAGE_SHOT}.png" if shot == PAGE_SHOT else f"shot-{position}.png"


class BaselineStore:
    """Thread-safe (one lock); files under ``<data_dir>/qa/baselines/<id>/``."""

    def __init__(self, data_dir: str | Path):
        self.root = Path(data_dir) / "qa" / "baselines"
        self._lock = threading.RLock()

    # ------------------------------------------------------------------------------ writing

    def create(self, name: str, shots: dict[str, bytes], *, url: str | None, scope: str, mask: list,
               mask_boxes: list, approved_from: str | None = None) -> BaselineMeta:
        """Store the screenshots as the next version of ``name`` (version 1 on its first use).

        Everything is checked before anything is written: a bad name, no screenshots, bytes that
        are not PNG or a bad field is an InvalidRequest and creates nothing."""
        baseline_id = valid_baseline_id(name)
        if not isinstance(shots, dict) or not shots:
            raise InvalidRequest("a baseline needs at least one screenshot")
        for shot in shots:
            if not isinstance(shot, str) or not shot:
                raise InvalidRequest(f"a screenshot's name must be a non-empty string, not {shot!r}")
        order = sorted(shots, key=lambda shot: shot != PAGE_SHOT)  # "page" first, the rest as given
        sizes = {shot: _png_size(shot, shots[shot]) for shot in order}
        width, height = sizes[order[0]]
        files = [(shot, _file_name(position, shot), bytes(shots[shot])) for position, shot in enumerate(order)]
        with self._lock:
            version = max(self._version_numbers(baseline_id), default=0) + 1
            try:
                meta = BaselineMeta(
                    id=baseline_id, version=version, created_at=datetime.now(UTC), url=url,
                    width=width, height=height, scope=scope, mask=mask, mask_boxes=mask_boxes,
                    screenshots=[BaselineShot(name=shot, file=file, sha256=hashlib.sha256(data).hexdigest())
                                 for shot, file, data in files],
                    approved_from=approved_from)
            except ValidationError as exc:
                raise InvalidRequest(f"baseline {baseline_id!r}: " + "; ".join(
                    f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())) from exc
            directory = self.root / baseline_id / f"v{version}"
            if directory.exists():  # a version whose writing was cut short: never listed, replaced
                shutil.rmtree(directory)
            # Screenshots of pages: the server's user only, as runs and traces are.
            self.root.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the data dir: never re-moded
            for level in (self.root.parent, self.root, directory.parent, directory):
                level.mkdir(mode=0o700, exist_ok=True)
                level.chmod(0o700)
            fsync_dir(directory.parent)
            for _, file, data in files:
                atomic_write(directory / file, data)
            atomic_write(directory / _META, meta.model_dump_json(indent=2).encode())  # last: the version now exists
            return meta

    def promote(self, name: str, shots: dict[str, bytes], *, over_version: int, from_run: str) -> BaselineMeta:
        """A comparison's images as the next version of ``name``, which must still be at
        ``over_version`` (the version compared) and must not hold ``from_run``'s images already:
        checked and written under one lock, so two approvals at once make one version."""
        with self._lock:
            versions = self.versions(name)
            latest = versions[-1]
            done = next((v for v in versions if v.approved_from == from_run), None)
            if done is not None:
                raise BaselineConflict(f"run {from_run} was approved already: it is version {done.version} of "
                                       f"baseline {name!r}")
            if latest.version != over_version:
                raise BaselineConflict(f"run {from_run} compared version {over_version} of baseline {name!r}, which "
                                       f"is at version {latest.version} now; compare again and approve that run")
            return self.create(name, shots, url=latest.url, scope=latest.scope, mask=latest.mask,
                               mask_boxes=latest.mask_boxes, approved_from=from_run)

    # ------------------------------------------------------------------------------ reading

    def get(self, baseline_id: str, version: int | None = None) -> BaselineMeta:
        """One version's metadata, the latest by default."""
        valid_baseline_id(baseline_id)
        _valid_version(version)
        with self._lock:
            numbers = self._version_numbers(baseline_id)
            if not numbers:
                raise BaselineNotFound(f"no baseline {baseline_id!r}; list the baselines to see which exist")
            if version is None:
                version = numbers[-1]
            meta = self._read_meta(baseline_id, version) if version in numbers else None
            if meta is None:
                raise BaselineNotFound(f"baseline {baseline_id!r} has no version {version}; its versions are "
                                       f"{', '.join(str(n) for n in numbers)}")
            return meta

    def image(self, baseline_id: str, shot: str = PAGE_SHOT, version: int | None = None) -> bytes:
        """A screenshot's PNG bytes, checked against the SHA-256 in the metadata."""
        with self._lock:
            meta = self.get(baseline_id, version)
            entry = next((s for s in meta.screenshots if s.name == shot), None)
            if entry is None:
                raise BaselineNotFound(f"baseline {baseline_id!r} version {meta.version} has no screenshot {shot!r}; "
                                       f"it has {', '.join(repr(s.name) for s in meta.screenshots)}")
            path = self.root / baseline_id / f"v{meta.version}" / entry.file
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise BaselineCorrupt(f"baseline {baseline_id!r} version {meta.version}: {entry.file} cannot be read "
                                      f"({exc.strerror})") from exc
            if hashlib.sha256(data).hexdigest() != entry.sha256:
                raise BaselineCorrupt(f"baseline {baseline_id!r} version {meta.version}: {entry.file} does not match "
                                      f"the SHA-256 recorded when it was stored")
            return data

    def list(self) -> builtins.list[BaselineMeta]:
        """The latest version of each baseline, by id."""
        with self._lock:
            if not self.root.is_dir():
                return []
            latest = []
            for directory in sorted(self.root.iterdir()):
                if directory.is_dir() and _NAME.fullmatch(directory.name) and ".." not in directory.name:
                    numbers = self._version_numbers(directory.name)
                    meta = self._read_meta(directory.name, numbers[-1]) if numbers else None
                    if meta is not None:  # read back a moment ago: gone only if removed meanwhile
                        latest.append(meta)
            return latest

    def versions(self, baseline_id: str) -> builtins.list[BaselineMeta]:
        """Every version of one baseline, oldest first."""
        valid_baseline_id(baseline_id)
        with self._lock:
            numbers = self._version_numbers(baseline_id)
            if not numbers:
                raise BaselineNotFound(f"no baseline {baseline_id!r}; list the baselines to see which exist")
            return [meta for n in numbers if (meta := self._read_meta(baseline_id, n)) is not None]

    def remove_unfinished(self, min_age_s: float = UNFINISHED_AGE_S) -> builtins.list[Path]:
        """Remove the versions whose writing was cut short (no metadata that reads back), and a
        baseline's directory left with nothing in it; called when a server starts. Such a version
        is never listed and its number is taken again, but its PNGs stayed on disk after a kill -9.
        One younger than ``min_age_s`` is left alone: another server on this data directory may be
        writing it now (a version is written in well under a second). Returns what was removed."""
        removed: builtins.list[Path] = []
        with self._lock:
            if not self.root.is_dir():
                return removed
            now = time.time()
            for baseline in sorted(self.root.iterdir()):
                if not (baseline.is_dir() and not baseline.is_symlink() and _NAME.fullmatch(baseline.name)):
                    continue
                before = len(removed)
                for version in sorted(baseline.iterdir()):
                    match = _VERSION_DIR.fullmatch(version.name)
                    if (match and version.is_dir() and not version.is_symlink()
                            and self._read_meta(baseline.name, int(match.group(1))) is None
                            and now - version.stat().st_mtime >= min_age_s):
                        shutil.rmtree(version, ignore_errors=True)
                        removed.append(version)
                if len(removed) > before and not any(baseline.iterdir()):
                    baseline.rmdir()
        return removed

    # ------------------------------------------------------------------------------ on disk

    def _read_meta(self, baseline_id: str, version: int) -> BaselineMeta | None:
        """A version's metadata, or None when it is missing or unreadable (never finished)."""
        try:
            meta = BaselineMeta.model_validate_json((self.root / baseline_id / f"v{version}" / _META).read_bytes())
        except (OSError, ValidationError):
            return None
        return meta if (meta.id, meta.version) == (baseline_id, version) else None

    def _version_numbers(self, baseline_id: str) -> builtins.list[int]:
        """The complete versions of a baseline (those whose metadata reads back), ascending."""
        directory = self.root / baseline_id
        if not directory.is_dir():
            return []
        numbers = sorted(int(m.group(1)) for entry in directory.iterdir()
                         if entry.is_dir() and (m := _VERSION_DIR.fullmatch(entry.name)))
        return [n for n in numbers if self._read_meta(baseline_id, n) is not None]
