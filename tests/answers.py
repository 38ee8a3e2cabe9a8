"""Checks on the API's answers the REST tests share: a success's body, an error's code, and
polling for what must come true (the machine is noisy: no timed asserts)."""

from __future__ import annotations

import time

# The MCP tools written by hand, each in its door (desktop.ops lists why); with the catalogue's
# (vision.app.ops: the desktop's, the page layer's and the QA verbs), the whole tool list. A new
# operation of the catalogue changes no test here.
HAND_WRITTEN_TOOLS = frozenset({
    "desktop_screenshot", "desktop_zoom", "desktop_drag",
    "vision_act", "vision_click_anywhere", "vision_extract_visible_text", "vision_fill_form_by_label",
    "page_downloads", "page_screenshot", "page_tabs", "page_dialogs", "export_test",
})


def mcp_tool_names(*, evaluate: bool = False) -> frozenset[str]:
    """Every tool the MCP server must list in its default profile (all); page_evaluate only when the
    server allows evaluate."""
    from vision.app.ops import catalogue

    return HAND_WRITTEN_TOOLS | {op.tool.name for op in catalogue()
                                 if op.tool and (evaluate or op.tool.name != "page_evaluate")}


def ok(response, status: int = 200):
    assert response.status_code == status, response.text
    return response.json()


def error(response, status: int, code: str) -> str:
    """The message of an error answer, after checking its status and code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["code"] == code, body
    return body["error"]["message"]


def until(probe, what: str, timeout: float = 15.0):
    """Poll ``probe`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.05)


def tree_nodes(nodes):
    """Every node of a desktop tree's ``nodes`` (TreeNode), depth first."""
    for node in nodes:
        yield node
        yield from tree_nodes(node.children)
