"""The image as built: pip's CA bundle, handed to the build as the BuildKit secret `pip_ca`
(docker/test/build-image.sh), is in none of its layers, read from `docker save`."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The image's own CA bundle, which update-ca-certificates generates from Debian's package: equal to
# the host's when the host's pip uses Debian's bundle unchanged, and no leak then.
IMAGE_OWN_BUNDLE = "etc/ssl/certs/ca-certificates.crt"


class ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (the SDK streams `docker save`)."""

    def __init__(self, chunks):
        self._chunks = iter(chunks)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._left:
            self._left = next(self._chunks, b"")
            if not self._left:
                return 0
        n = min(len(buffer), len(self._left))
        buffer[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


def the_build_secret() -> bytes | None:
    """The CA bundle build-image.sh hands the build (None when the host's pip has none)."""
    path = subprocess.run(["bash", str(REPO / "docker/test/build-image.sh"), "--print-pip-ca"], capture_output=True,
                          text=True, check=True).stdout.strip()
    return Path(path).read_bytes() if path else None


def test_the_pip_ca_secret_is_in_no_layer(docker_client, glassdesk_image):
    secret = the_build_secret()
    saved = io.BufferedReader(ChunkReader(docker_client.images.get(glassdesk_image).save(named=True)), 1 << 20)
    layers, files, leaks = 0, 0, []
    with tarfile.open(fileobj=saved, mode="r|") as image:
        for member in image:
            if not member.name.endswith("layer.tar"):
                continue
            layers += 1
            with tarfile.open(fileobj=image.extractfile(member), mode="r|") as layer:
                for entry in layer:
                    name = entry.name.removeprefix("./")
                    files += 1
                    if name.startswith("run/secrets/") and not entry.isdir():
                        leaks.append((member.name, name))
                    elif (secret is not None and entry.isfile() and entry.size == len(secret)
                          and name != IMAGE_OWN_BUNDLE and layer.extractfile(entry).read() == secret):
                        leaks.append((member.name, name))
    assert layers >= 10 and files > 10_000  # the whole image was read
    assert not leaks
