"""The conformance matrix (vision.vendors.conformance -> docs/conformance.md): generated from measurements,
kept current, and holding every contract to one display pixel."""

from __future__ import annotations

from pathlib import Path

from vision.converters import anthropic as anthropic_tool
from vision.converters import openai as openai_tool
from vision.providers import chat
from vision.vendors import conformance

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def test_docs_conformance_md_is_what_the_generator_renders():
    assert DOC.read_text() == conformance.render(), (
        "docs/conformance.md is stale: run `python -m vision.vendors.conformance > docs/conformance.md`")


def test_every_action_written_comes_out_as_meant():
    assert conformance.problems() == []


def test_every_pointer_action_lands_within_one_display_pixel():
    for contract, cells in conformance.matrix().items():
        for row, cell in cells.items():
            if cell.supported and cell.error_px is not None:
                assert cell.error_px <= 1, (contract, row, cell)
    # Where the model sees at least one pixel per display pixel, nothing is lost at all.
    exact = ["OpenAI `computer` (GA)", "chat `uitars-1.5`", "chat `qwen25`", "chat `opencua`", "chat `gta1`",
             "chat `holo1.5`"]
    for contract in exact:
        assert {c.error_px for c in conformance.matrix()[contract].values() if c.error_px is not None} == {0}, contract


def test_every_contract_and_dialect_is_in_the_matrix_and_every_vendor_action_is_written():
    names = [c.name for c in conformance.contracts()]
    assert all(f"chat `{d}`" in names for d in chat.DIALECTS)
    assert all(f"Anthropic `{v}`" in names for v in anthropic_tool.TOOL_VERSIONS)
    by_name = {c.name: c for c in conformance.contracts()}
    toolset = by_name["Anthropic `computer_toolset_20260801`"]
    written = {writer((1, 1), (2, 2))[0] for writer in toolset.writers.values()}
    # Each click kind, drag, press and release, scroll, keys, typing, waits, looks and zoom: all 17.
    assert written == set(anthropic_tool.ACTIONS)
    ga = by_name["OpenAI `computer` (GA)"]
    assert {writer((1, 1), (2, 2))["type"] for writer in ga.writers.values()} == set(openai_tool.ACTION_TYPES)


def test_a_writer_whose_action_comes_out_wrong_is_reported_not_counted():
    broken = conformance.Contract("broken", "chat", conformance.coords.relative(), "", lambda text: [],
                                  {"click": lambda a, b: "nothing"})
    row = next(r for r in conformance.ROWS if r.name == "click")
    cell = conformance.measure(broken, row)
    assert not cell.supported and cell.why.startswith("at (0, 0): []")


def test_the_matrix_is_linked_from_the_readme():
    readme = (DOC.parents[1] / "README.md").read_text()
    assert "(docs/conformance.md)" in readme
