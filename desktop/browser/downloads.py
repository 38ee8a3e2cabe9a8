"""Downloads: Chromium saves each under a GUID name in the desktop's ``downloads/``
(desktop.browser.chromium); the page layer copies it into the server's own ``downloaded/`` under
a safe name of its own, hashes it, deletes Chromium's copy and records it in the session's
PageRecord. Also the file names of uploads."""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from desktop.browser.errors import Refused

if TYPE_CHECKING:
    from desktop.browser.record import PageRecord

SAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")
NAME_LIMIT = 120               # characters of a download's or upload's file name


def safe_file_name(name: str) -> str:
    """A download's or upload's name reduced to one harmless path component (pure)."""
    name = SAFE_NAME.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    return name[:NAME_LIMIT].strip(" .") or "file"


def numbered(name: str, n: int) -> str:
    """``name`` for n = 1, else ``stem-n.ext`` (pure); still a name safe_file_name leaves as it is."""
    if n == 1:
        return name
    stem, dot, ext = name.rpartition(".")
    if dot and stem and len(ext) + 12 < NAME_LIMIT:
        base, suffix = stem, f"-{n}.{ext}"
    else:
        base, suffix = name, f"-{n}"
    return base[: NAME_LIMIT - len(suffix)].rstrip(" .") + suffix


def _open_download(source: Path):
    """Chromium's file, opened following no link: its directory is the desktop user's, who could
    have put a link to a file of the server's in its place."""
    import os
    import stat

    from desktop.x11.user import open_without_links

    fd = open_without_links(source.parent, source.name)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused("the downloaded file is not a regular file")
    return os.fdopen(fd, "rb")


def store_download(source, directory, name: str) -> dict:
    """Copy a finished download into ``directory`` under ``name`` (already safe), or ``name-2``...
    when taken, and hash it. The name is claimed with an exclusive create, so two downloads of the
    same name never share a file."""
    import hashlib

    for n in itertools.count(1):
        candidate = numbered(name, n)
        try:
            out = open(directory / candidate, "xb")
        except FileExistsError:
            continue
        break
    digest, size = hashlib.sha256(), 0
    with out, _open_download(Path(source)) as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    return {"name": candidate, "size": size, "sha256": digest.hexdigest()}


class Downloads:
    """The downloads of one browser process's pages, kept in ``directory`` and recorded."""

    def __init__(self, record: PageRecord, directory):
        self.record = record
        self.directory = directory

    async def on_download(self, download) -> None:
        name = safe_file_name(download.suggested_filename)
        try:
            source = await download.path()
            stored = await asyncio.to_thread(store_download, source, self.directory, name)
        except Exception as exc:
            self.record.downloads.add({"name": name, "size": 0, "sha256": None, "url": download.url,
                                       "failure": (str(exc).splitlines() or [type(exc).__name__])[0]})
            return
        try:
            await download.delete()  # Playwright's own copy, under .incoming
        except Exception:
            pass
        self.record.downloads.add({**stored, "url": download.url, "failure": None})
