"""What a report file holds: the run viewer's document embedded in its page (vision.evidence.runview.offline_html)."""

from __future__ import annotations

import json
import re
from pathlib import Path

_DOCUMENT = re.compile(r'<script type="application/json" id="run-data">(.*?)</script>', re.S)


def embedded_document(page: str | Path) -> dict:
    """The document a report embeds (a run's, or a suite's for `glassdesk qa --report`); its JSON
    escapes '<', so the first closing tag after it is its own."""
    text = page.read_text(encoding="utf-8") if isinstance(page, Path) else page
    match = _DOCUMENT.search(text)
    assert match, "no embedded document: not a run viewer's report"
    return json.loads(match.group(1))


def suite_images(doc: dict) -> list[tuple[str, dict]]:
    """Every image of every run of a suite document, with its run's id: steps', heals' and comparisons'."""
    out = []
    for view in doc["runs"]:
        for step in view["steps"]:
            images = list(step["images"])
            images += [i for heal in step["heals"] for i in heal.get("images") or []]
            images += [i for c in step["comparisons"] for shot in c["shots"] for i in shot["images"]]
            out += [(view["id"], image) for image in images]
    return out
