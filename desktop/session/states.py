"""Saved states: what a later session needs to start where an earlier one was, logged in: the
browser's cookies and each origin's local storage and IndexedDB (Playwright's storage state), and
named files of the desktop user's home (an app's settings, a token file a desktop program keeps),
kept under the data dir's ``states/NAME/`` (the files under ``home/``).

A state is a login: its file holds secrets. It is never logged, never in a trace or an export,
and its directory is the server's alone (0700). A state is refused on restore when it was changed
after it was saved: the manifest carries the storage file's and each home file's SHA-256 and an HMAC over itself, keyed
by ``states/.key`` (made on first use, 0600), so an edited file, a replaced one or a forged
manifest is caught before anything reaches a browser.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from desktop.errors import InvalidRequest, StateNotFound, StateTampered

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
STORAGE = "storage.json"
MANIFEST = "manifest.json"
KEY = ".key"
MAX_STATE_BYTES = 20 * 1024 * 1024  # a storage state larger than this is not a login: refused
HOME = "home"  # the home files' directory in a state's
MAX_HOME_FILES = 100  # and at most this many, MAX_STATE_BYTES in all


def home_path(path: str) -> str:
    """A file of the desktop user's home as a state names it (pure): relative to the home (``~/``
    allowed), never out of it. ValueError says why not."""
    text = str(path)
    relative = text[2:] if text.startswith("~/") else text
    parts = relative.split("/")
    if not relative or len(text) > 500 or "\0" in text or relative.startswith("/") or \
            any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{text[:80]!r}: a file of the home, relative to it (e.g. .config/app/settings.json or "
                         "~/notes.txt), without '..'")
    return relative


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise InvalidRequest("a state's name: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or "
                             f"digit (got {str(name)[:80]!r})")
    return name


def summary(storage: dict[str, Any]) -> dict[str, Any]:
    """What a state holds, without its values (pure): cookie count and domains, origins."""
    cookies = storage.get("cookies") or []
    return {"cookies": len(cookies),
            "cookie_domains": sorted({str(c.get("domain", "")).lstrip(".") for c in cookies if c.get("domain")}),
            "origins": sorted(str(o.get("origin")) for o in storage.get("origins") or [] if o.get("origin"))}


def _canonical(manifest: dict[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in manifest.items() if k != "mac"}, sort_keys=True,
                      separators=(",", ":")).encode()


class StateStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self._lock = threading.Lock()

    def _key(self) -> bytes:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.root / KEY
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return path.read_bytes()
        key = secrets.token_bytes(32)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
        return key

    def _mac(self, manifest: dict[str, Any]) -> str:
        return hmac.new(self._key(), _canonical(manifest), hashlib.sha256).hexdigest()

    def save(self, name: str, storage: dict[str, Any], *, session_id: str,
             files: dict[str, bytes] | None = None) -> dict[str, Any]:
        """Keep ``storage`` and the home ``files`` (home_path -> bytes) as state ``name``
        (replacing one of that name, whole or not at all)."""
        check_name(name)
        files = files or {}
        body = json.dumps(storage, sort_keys=True).encode()
        size = len(body) + sum(len(data) for data in files.values())
        if size > MAX_STATE_BYTES:
            raise InvalidRequest(f"the state is {size:,} bytes, over {MAX_STATE_BYTES:,}: not saved")
        manifest = {"name": name, "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "from_session": session_id, "sha256": hashlib.sha256(body).hexdigest(), **summary(storage),
                    "files": [{"path": path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
                              for path, data in sorted(files.items())]}
        manifest["mac"] = self._mac(manifest)
        with self._lock:
            staging = self.root / f".{name}.{secrets.token_hex(4)}"
            staging.mkdir(mode=0o700)
            try:
                (staging / STORAGE).write_bytes(body)
                (staging / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
                for path in (staging / STORAGE, staging / MANIFEST):
                    path.chmod(0o600)
                for number, data in enumerate(contents for _, contents in sorted(files.items())):
                    # Kept by number, not by name: the manifest maps them; no path of the
                    # desktop's ever becomes a path of the server's.
                    (staging / HOME).mkdir(mode=0o700, exist_ok=True)
                    kept = staging / HOME / str(number)
                    kept.write_bytes(data)
                    kept.chmod(0o600)
                target = self.root / name
                old = self.root / f".{name}.old.{secrets.token_hex(4)}"
                if target.exists():
                    target.rename(old)
                staging.rename(target)
                shutil.rmtree(old, ignore_errors=True)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        return self._info(manifest)

    def _manifest(self, name: str) -> dict[str, Any]:
        path = self.root / check_name(name) / MANIFEST
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise StateNotFound(f"no saved state {name!r}; list the saved states to see which exist") from None
        except (OSError, ValueError) as exc:
            raise StateTampered(f"saved state {name!r} cannot be read back ({exc}): refused") from None
        if not isinstance(manifest, dict) or not hmac.compare_digest(str(manifest.get("mac", "")),
                                                                    self._mac(manifest)):
            raise StateTampered(f"saved state {name!r} was changed after it was saved (its manifest's signature "
                                "does not match): refused, nothing restored")
        return manifest

    def load(self, name: str) -> dict[str, Any]:
        """The storage state saved as ``name``, checked against its signed manifest."""
        manifest = self._manifest(name)
        try:
            body = (self.root / name / STORAGE).read_bytes()
        except OSError as exc:
            raise StateTampered(f"saved state {name!r} lost its storage file ({exc.strerror}): refused") from None
        if not hmac.compare_digest(hashlib.sha256(body).hexdigest(), str(manifest["sha256"])):
            raise StateTampered(f"saved state {name!r} was changed after it was saved (its storage file's SHA-256 "
                                "does not match): refused, nothing restored")
        return json.loads(body)

    def load_files(self, name: str) -> dict[str, bytes]:
        """The home files saved with state ``name`` (home_path -> bytes), each checked against the
        signed manifest."""
        manifest = self._manifest(name)
        files = {}
        for number, entry in enumerate(manifest.get("files") or []):
            try:
                data = (self.root / name / HOME / str(number)).read_bytes()
            except OSError as exc:
                raise StateTampered(f"saved state {name!r} lost its file {entry['path']} ({exc.strerror}): "
                                    "refused") from None
            if not hmac.compare_digest(hashlib.sha256(data).hexdigest(), str(entry["sha256"])):
                raise StateTampered(f"saved state {name!r} was changed after it was saved (its file "
                                    f"{entry['path']} does not match its SHA-256): refused, nothing restored")
            files[home_path(entry["path"])] = data
        return files

    def list(self) -> list[dict[str, Any]]:
        if not self.root.is_dir():
            return []
        found = []
        for path in sorted(self.root.iterdir()):
            if path.is_dir() and NAME.match(path.name):
                try:
                    found.append(self._info(self._manifest(path.name)))
                except StateTampered as exc:
                    found.append({"name": path.name, "tampered": True, "problem": exc.message})
        return found

    def delete(self, name: str) -> None:
        with self._lock:
            target = self.root / check_name(name)
            if not target.is_dir():
                raise StateNotFound(f"no saved state {name!r}")
            shutil.rmtree(target)

    @staticmethod
    def _info(manifest: dict[str, Any]) -> dict[str, Any]:
        return {k: manifest[k] for k in ("name", "created_at", "from_session", "sha256", "cookies", "cookie_domains",
                                         "origins") if k in manifest} | {
            "files": [entry["path"] for entry in manifest.get("files") or []], "tampered": False}
