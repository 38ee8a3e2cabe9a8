"""OSWorld's own harness (desktop-env 1.0.2 from PyPI), importable without its heaviest packages.

``make setup`` installs desktop-env without its dependencies (they include torch, through easyocr,
and librosa) and then the ones its controllers, its environment, its Chrome and OS getters and the
metrics the tests score with import (pyproject.toml's ``test`` extra, the "OSWorld's harness" lines).
Its ``metrics`` and ``getters`` packages import every metric module when imported at all, so the
modules of metrics nobody here calls (OCR of documents, images, audio, video, PDFs, spreadsheets'
formulas) still name these packages. They are stood in for by modules that load, and raise
ImportError the moment anything of them is used: no test can pass through one by accident.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

# What only the document, image, audio, video, PDF and formula metrics use.
ABSENT = frozenset({"easyocr", "librosa", "acoustid", "fastdtw", "skimage", "fitz", "borb", "imagehash",
                    "formulas", "scipy"})


class Absent:
    """Anything taken from an absent package: unusable."""

    def __init__(self, name: str):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise ImportError(f"{self._name}: this package is not installed for the OSWorld harness's tests "
                          "(tests/osworld_harness.py)")

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return Absent(f"{self._name}.{name}")


class _AbsentModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return Absent(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in ABSENT:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _AbsentModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


def install() -> None:
    """Stand in for the absent packages (once). Last on the import path: a package that is really
    installed is found first, and used."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
