"""docs/conformance-desktop.md (measured on the real desktop by the integration test, which needs X)
against vision/vendors/conformance.py (pure): it covers exactly the contracts and pointer actions there, and
docs/conformance.md's "on the real desktop" column is read from it."""

from __future__ import annotations

import re

from vision.vendors import conformance
from vision.vendors.conformance_desktop import DOC, NOT_INPUT, Cell, render


def tables(text: str) -> dict[str, dict[str, str]]:
    """contract -> action -> cell, from the per-family tables of the desktop doc."""
    out: dict[str, dict[str, str]] = {}
    for block in text.split("\n## ")[2:]:
        rows = [line for line in block.splitlines() if line.startswith("| ")]
        header = [h.strip() for h in rows[0].strip("|").split("|")][1:]
        for line in rows[2:]:
            action, *cells = [c.strip() for c in line.strip("|").split("|")]
            for contract, cell in zip(header, cells):
                out.setdefault(contract, {})[action] = cell
    return out


def test_the_desktop_doc_covers_exactly_the_contracts_and_pointer_actions_of_the_matrix():
    measured = tables(DOC.read_text())
    names = [c.name for c in conformance.contracts()]
    assert sorted(measured) == sorted(names), (
        "docs/conformance-desktop.md does not list the contracts of vision/vendors/conformance.py: run "
        "`python -m vision.vendors.conformance_desktop > docs/conformance-desktop.md` (needs X)")
    pure = conformance.matrix()
    pointer = [r.name for r in conformance.ROWS if r.pointer and r.name not in NOT_INPUT]
    for name in names:
        assert sorted(measured[name]) == sorted(pointer), name
        for row in pointer:
            cell = measured[name][row]
            if not pure[name][row].supported:
                assert cell == "—", (name, row, cell)
            else:
                assert re.fullmatch(r"[01] px", cell), (name, row, cell)
    assert set(conformance.desktop_worst()) == set(names)


def test_the_worst_of_each_contract_is_read_back_for_docs_conformance_md():
    measured = {"c `a`": {"click": Cell(True, 1, 9), "drag": Cell(False)}, "d": {"click": Cell(True, 0, 9),
                                                                                  "drag": Cell(True, 0, 9)}}
    assert conformance.desktop_worst(render(measured)) == {"c `a`": "1 px", "d": "0 px"}
    assert conformance.desktop_worst("") == {}
