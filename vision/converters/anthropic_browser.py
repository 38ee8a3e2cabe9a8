"""Anthropic's browser toolset (``browser_toolset_20260801``): the pure half of serving it.

The toolset speaks of a browser, not a screen: points in *viewport* pixels ("the same frame as a
full-viewport screenshot"), elements by ``ref_N`` references from ``read_page`` / ``find``, tabs by
id. glassdesk's page layer already has each of these (the front tab's viewport on the display, the
accessibility snapshot's refs ``e12`` / ``f1e12``, tab ids ``t1``); this module maps one onto the
other, with no browser and no desktop (tests/unit/test_browser_toolset.py). The driver that runs
the members is ``vision.vendors.browser_toolset``.

Screenshots are the viewport scaled into the image budget the API will not downsize again
(``coords.anthropic_size``), so the model's viewport pixels are pixels of that image: a point is
divided by the scale, then moved by the viewport's origin on the display.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Region, Zoom
from vision import coords
from vision.actions import Screenshot
from vision.converters import anthropic as computer_tool

TOOLSET_TYPE = "browser_toolset_20260801"
TOOLSET_NAME = "browser"  # the tool_use's toolset_name, echoed on its tool_result

# Every member, in the API's order (anthropic.types.beta.BetaBrowserMemberName).
MEMBERS = (
    "navigate", "list_tabs", "new_tab", "switch_tab", "close_tab", "read_page", "get_page_text", "read_console",
    "read_network", "find", "form_input", "file_upload", "scroll_to", "screenshot", "zoom", "left_click",
    "right_click", "middle_click", "double_click", "triple_click", "hover", "left_click_drag", "left_mouse_down",
    "left_mouse_up", "mouse_move", "scroll", "type", "key", "hold_key", "wait", "javascript_exec",
)
# Off unless the request's toolset configs enable them (the SDK's enabled_by_default).
OPT_IN = ("file_upload", "read_console", "read_network", "javascript_exec")

# What a vision run offers Claude beside the defaults: the console and network readers (reading
# only). javascript_exec and file_upload stay off in a run: one runs the model's script in the
# page, the other needs files a run does not stage; both are the executor's, for callers who ask.
LOOP_CONFIGS = {"read_console": {"enabled": True}, "read_network": {"enabled": True}}

PAGE_TEXT_LIMIT = 50_000   # read_page's and get_page_text's cap, as the toolset documents it
FIND_LIMIT = 20            # find's matches, as documented
READ_PAGE_DEPTH = 15       # read_page's default depth


class TargetError(ValueError):
    """A target the model got wrong: answered as an is_error tool_result, nothing run."""


# --- refs ----------------------------------------------------------------------------------------

_PAGE_REF = re.compile(r"^(f\d+)?e\d+$")
_TOOLSET_REF = re.compile(r"^ref_((?:f\d+)?e?\d+)$")
_SNAPSHOT_REF = re.compile(r"\[ref=((?:f\d+)?e\d+)\]")


def to_toolset_ref(page_ref: str) -> str:
    """The page layer's snapshot ref as the toolset spells it: ``e12`` -> ``ref_12``, a frame's
    ``f1e12`` -> ``ref_f1e12`` (pure; the inverse of ``to_page_ref``)."""
    return f"ref_{page_ref[1:]}" if page_ref.startswith("e") else f"ref_{page_ref}"


def to_page_ref(ref: str) -> str:
    """A toolset ref back to the page layer's (pure); TargetError for anything read_page never gave."""
    match = _TOOLSET_REF.match(ref or "")
    body = match.group(1) if match else ""
    page_ref = body if body.startswith("f") else f"e{body.removeprefix('e')}" if body else ""
    if not _PAGE_REF.match(page_ref):
        raise TargetError(f"ref {ref!r} is not a reference read_page or find gave (they look like ref_12)")
    return page_ref


def snapshot_with_refs(snapshot: str) -> str:
    """The accessibility snapshot with each ``[ref=e12]`` written ``[ref_12]``, as the toolset reads."""
    return _SNAPSHOT_REF.sub(lambda m: f"[{to_toolset_ref(m.group(1))}]", snapshot)


# Roles a person acts on: read_page's filter "interactive" keeps the lines of these.
INTERACTIVE_ROLES = frozenset({
    "button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox", "option", "menuitem",
    "menuitemcheckbox", "menuitemradio", "slider", "spinbutton", "switch", "tab", "treeitem",
})
_LINE_ROLE = re.compile(r"^\s*- (?:/)?([a-z]+)")


def _indent(line: str) -> int:
    return (len(line) - len(line.lstrip(" "))) // 2


def read_page_text(snapshot: str, *, depth: int | None = None, filter: str | None = None,
                   ref: str | None = None, limit: int = PAGE_TEXT_LIMIT) -> str:
    """read_page's answer from the page layer's snapshot (pure): the subtree at ``ref`` (a toolset
    ref), at most ``depth`` levels below its root, only the interactive elements' lines for
    ``filter="interactive"``, refs spelled as the toolset reads them, cut at ``limit`` with a note."""
    lines = snapshot.splitlines()
    if ref is not None:
        page_ref = to_page_ref(ref)
        start = next((i for i, line in enumerate(lines) if f"[ref={page_ref}]" in line), None)
        if start is None:
            raise TargetError(f"no element {ref} on the page now; read_page again for current references")
        root = _indent(lines[start])
        end = next((j for j in range(start + 1, len(lines)) if _indent(lines[j]) <= root
                    and lines[j].lstrip().startswith("- ")), len(lines))
        lines = lines[start:end]
    base = min((_indent(line) for line in lines if line.strip()), default=0)
    depth = READ_PAGE_DEPTH if depth is None else depth
    lines = [line for line in lines if _indent(line) - base < depth]
    if filter == "interactive":
        kept = []
        for line in lines:
            role = _LINE_ROLE.match(line)
            if role and role.group(1) in INTERACTIVE_ROLES and "[ref=" in line:
                kept.append("- " + line.strip().removeprefix("- "))
        lines = kept
    text = snapshot_with_refs("\n".join(lines))
    return cut(text, limit, "narrow it with ref or a smaller depth")


def cut(text: str, limit: int, advice: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut at {limit} characters; {advice}]"


_WORD = re.compile(r"[\w']+", re.UNICODE)


def find_matches(snapshot: str, query: str, limit: int = FIND_LIMIT) -> list[str]:
    """find's answer (pure): the snapshot's element lines that share the most words with the
    description, best first, at most ``limit``, each with its ref as the toolset reads it. A
    word search, not a model: it finds "search bar" through a searchbox named "Search"."""
    words = {w.lower() for w in _WORD.findall(query) if len(w) > 1}
    scored = []
    for index, line in enumerate(snapshot.splitlines()):
        if "[ref=" not in line:
            continue
        # whole words, or the start of one ("search" finds a searchbox), never the middle of one
        own = {w.lower() for w in _WORD.findall(line.split("[ref=")[0])}
        hits = sum(1 for w in words if w in own or (len(w) >= 4 and any(o.startswith(w) for o in own)))
        if hits:
            scored.append((-hits, index, line.strip().removeprefix("- ")))
    scored.sort()
    return [snapshot_with_refs(line) for _, _, line in scored[:limit]]


# --- viewport pixels -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Viewport:
    """The front tab's viewport: its origin on the display and its size in CSS px (DPR 1), and the
    size of the screenshots the model is sent of it."""

    x: int
    y: int
    width: int
    height: int

    @classmethod
    def of(cls, reading: Mapping[str, Any]) -> Viewport:
        return cls(int(reading["x"]), int(reading["y"]), max(1, int(reading["width"])),
                   max(1, int(reading["height"])))

    @property
    def shot_size(self) -> tuple[int, int]:
        return coords.anthropic_size(self.width, self.height)

    @property
    def scale(self) -> float:
        """Screenshot pixels per viewport CSS pixel (at most 1)."""
        return self.shot_size[0] / self.width

    def to_display(self, x: Any, y: Any) -> tuple[int, int]:
        """A point in screenshot pixels -> display pixels; TargetError off the screenshot."""
        width, height = self.shot_size
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y)):
            raise TargetError(f"a coordinate is two numbers, got x={x!r}, y={y!r}")
        if not (0 <= x < width and 0 <= y < height):
            raise TargetError(f"({x}, {y}) is outside the viewport's screenshot, {width}x{height}")
        sx, sy = self.width / width, self.height / height
        return self.x + min(self.width - 1, int(x * sx + sx / 2)), self.y + min(self.height - 1, int(y * sy + sy / 2))

    def region_to_display(self, region: Any) -> tuple[int, int, int, int]:
        """zoom's ``[x0, y0, x1, y1]`` in screenshot pixels -> the display region it covers."""
        if (not isinstance(region, list | tuple) or len(region) != 4
                or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in region)):
            raise TargetError(f"region must be [x0, y0, x1, y1], got {region!r}")
        x0, y0, x1, y1 = region
        width, height = self.shot_size
        if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
            raise TargetError(f"region {list(region)} must have x0 < x1 <= {width} and y0 < y1 <= {height} "
                              "(the viewport's screenshot)")
        sx, sy = self.width / width, self.height / height
        return (self.x + round(x0 * sx), self.y + round(y0 * sy), self.x + round(x1 * sx), self.y + round(y1 * sy))


def target_of(input: Mapping[str, Any], key: str = "target") -> dict[str, Any]:
    """A member's target as given: ``{"type": "coordinate", x, y}`` or ``{"type": "ref", ref}``."""
    target = input.get(key)
    if not isinstance(target, Mapping) or target.get("type") not in ("coordinate", "ref"):
        raise TargetError(f"{key} must be {{\"type\": \"coordinate\", \"x\", \"y\"}} or {{\"type\": \"ref\", "
                          f"\"ref\"}}, got {target!r}")
    return dict(target)


# --- what a computer-tool converter reads --------------------------------------------------------

# Browser members that are the computer toolset's actions at a display point: their input becomes
# the computer tool's (vision.converters.anthropic.to_actions), so keys, modifiers, durations and
# scroll amounts are read by the one converter every Anthropic contract shares.
POINTER_ACTIONS = {"left_click": "left_click", "right_click": "right_click", "middle_click": "middle_click",
                   "double_click": "double_click", "triple_click": "triple_click", "hover": "mouse_move",
                   "mouse_move": "mouse_move", "left_mouse_down": "left_mouse_down",
                   "left_mouse_up": "left_mouse_up", "scroll": "scroll"}
KEY_ACTIONS = ("type", "key", "hold_key", "wait")
CLICKS = {"left_click": ("left", 1), "right_click": ("right", 1), "middle_click": ("middle", 1),
          "double_click": ("left", 2), "triple_click": ("left", 3)}


def computer_input(name: str, input: Mapping[str, Any], point: tuple[int, int] | None,
                   start: tuple[int, int] | None = None) -> tuple[str, dict[str, Any]]:
    """A browser member as the computer tool's action and input, at display points (pure)."""
    args: dict[str, Any] = {}
    if name in KEY_ACTIONS:
        args = {k: input[k] for k in ("text", "repeat", "duration") if k in input}
        return name, args
    if name == "left_click_drag":
        return "left_click_drag", {"start_coordinate": list(start or ()), "coordinate": list(point or ())}
    action = POINTER_ACTIONS[name]
    if point is not None:
        args["coordinate"] = list(point)
    if input.get("modifiers"):
        args["text"] = input["modifiers"]
    if name == "scroll":
        args["scroll_direction"] = input.get("scroll_direction")
        if input.get("scroll_amount") is not None:
            args["scroll_amount"] = input["scroll_amount"]
    return action, args


# The computer tool's converter reads the display points computed here, in display pixels.
DISPLAY = coords.pixels(SCREEN_WIDTH, SCREEN_HEIGHT)


def to_display_actions(name: str, input: Mapping[str, Any], view: Viewport) -> list:
    """A member acting at viewport points, or at none (keys, typing, waiting), as the display
    Actions it means (pure): what the executor performs, and what the conformance matrix measures.
    TargetError for a ref here (the executor locates those on the page) or a point off the viewport;
    the computer tool's converter's ValueError for a bad key name or duration."""
    if name == "screenshot":
        return [Screenshot()]
    if name == "zoom":
        x0, y0, x1, y1 = view.region_to_display(input.get("region"))
        width, height = view.shot_size
        scale = min(4.0, width / (x1 - x0), height / (y1 - y0))  # the region filling the screenshot
        return [Zoom(region=Region(x0=x0, y0=y0, x1=x1, y1=y1), scale=scale)]
    point = start = None
    if name == "left_click_drag":
        begin, end = target_of(input, "from"), target_of(input)
        if "ref" in (begin["type"], end["type"]):
            raise TargetError("left_click_drag takes two coordinate targets")
        start, point = view.to_display(begin.get("x"), begin.get("y")), view.to_display(end.get("x"), end.get("y"))
    elif name in POINTER_ACTIONS:
        target = target_of(input)
        if target["type"] != "coordinate":
            raise TargetError(f"{name}: a ref target is located on the page, not at a viewport point")
        point = view.to_display(target.get("x"), target.get("y"))
    action, args = computer_input(name, input, point, start)
    return computer_tool.to_actions(action, args, DISPLAY)


def navigate_url(url: str) -> str:
    """navigate's URL as the browser opens it: the protocol may be omitted (https://)."""
    url = url.strip()
    if url in ("back", "forward", "reload") or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", url):
        return url
    return f"https://{url}"


# --- the browser's state ------------------------------------------------------------------------


def download_change(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A finished (or failed) download from the page layer's record as the toolset's state change:
    its ``download_id`` the record's sequence number, stable across reports."""
    if entry.get("failure"):
        return {"type": "download_failed", "download_id": f"download_{entry['seq']}", "url": entry.get("url") or "",
                "error": str(entry["failure"])}
    change = {"type": "download_completed", "download_id": f"download_{entry['seq']}", "url": entry.get("url") or ""}
    if entry.get("size") is not None:
        change["size_bytes"] = int(entry["size"])
    return change


def refused_navigation(entry: Mapping[str, Any]) -> bool:
    """A network entry that is a page navigation the session's policy refused."""
    return entry.get("resource_type") == "document" and bool(entry.get("blocked"))


def dismissed_dialog(entry: Mapping[str, Any]) -> bool:
    return entry.get("handled") == "dismissed"


def console_lines(entries: list[Mapping[str, Any]]) -> str:
    return "\n".join(f"[{e.get('level', 'log')}] {e.get('text', '')}"
                     + (f" ({e['url']}:{e.get('line', 0)})" if e.get("url") else "") for e in entries)


def network_lines(entries: list[Mapping[str, Any]]) -> str:
    lines = []
    for e in entries:
        status = e.get("status")
        what = ("blocked by the network policy" if e.get("blocked") else e.get("failure")
                or (str(status) if status is not None else "pending"))
        extra = f" {e['duration_ms']} ms" if e.get("duration_ms") is not None else ""
        lines.append(f"{e.get('method', 'GET')} {e.get('url', '')} {what} {e.get('resource_type', '')}{extra}".rstrip())
    return "\n".join(lines)
