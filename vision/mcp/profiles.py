"""MCP tool profiles: which of the catalogue's groups a server lists (``glassdesk mcp --tools``,
``/mcp?tools=``, ``glassdesk up --mcp-tools``). Pure.

Every tool belongs to one group (desktop.ops.declare.Group), named where the tool is declared: an
``Operation``'s ``Tool(group=...)``, or the ``group=`` of a hand-written tool's decorator. A profile
is a set of groups, ``core`` always among them:

- ``core``     what an agent needs to drive the visible desktop: look (desktop_screenshot,
               desktop_zoom), act (click, double-click, drag, scroll, type, key), open a URL, hand
               a whole task to the vision loop (vision_act), read the browser's state (page_state)
               and give the person watching a link (live_view_url)
- ``desktop``  core and the other desktop tools: the remaining input actions, windows, programs,
               sessions, and the vision packs
- ``page``     core and the page layer's tools (page_*)
- ``qa``       core, the QA verbs and the evaluations (eval_start, eval_status, eval_list)
- ``all``      every group (the default: what `glassdesk mcp` listed before profiles existed)

Names combine with commas (``page,qa``). Playwright MCP's ``--caps`` works the same way.
"""

from __future__ import annotations

from desktop.errors import InvalidRequest
from desktop.ops.declare import GROUPS, Group

PROFILES: dict[str, frozenset[Group]] = {
    "core": frozenset({"core"}),
    "desktop": frozenset({"core", "desktop"}),
    "page": frozenset({"core", "page"}),
    "qa": frozenset({"core", "qa"}),
    "all": frozenset(GROUPS),
}
# `all` keeps every client configured before profiles existed working as it did; a client short of
# context asks for `core` (about a fifth of the size: tests/unit/test_mcp_profiles.py).
DEFAULT_PROFILE = "all"


def parse_profile(spec: str | None) -> frozenset[Group]:
    """The groups ``spec`` names (``core``, ``page,qa``...); None or empty: the default profile.
    Every unknown name is reported at once, as invalid_request."""
    names = [name.strip().lower() for name in (spec or DEFAULT_PROFILE).split(",") if name.strip()]
    if not names:
        names = [DEFAULT_PROFILE]
    unknown = [name for name in names if name not in PROFILES]
    if unknown:
        raise InvalidRequest(f"tools: unknown profile{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(repr(n) for n in unknown)}; the profiles are {', '.join(PROFILES)} "
                             "(several may be joined with commas, e.g. page,qa)")
    groups: frozenset[Group] = frozenset()
    for name in names:
        groups |= PROFILES[name]
    return groups


def profile_name(groups: frozenset[Group]) -> str:
    """The shortest spelling of ``groups``, e.g. ``page,qa`` (for the server's instructions)."""
    for name, members in PROFILES.items():
        if members == groups:
            return name
    return ",".join(g for g in GROUPS if g in groups and g != "core")


# The keywords whose values are schemas (or maps or lists of them): only these are walked, so a
# default or an enum value that happens to hold a "title" key is left as it is.
_SUBSCHEMA = ("items", "additionalProperties", "not", "contains", "if", "then", "else")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")


def compact_schema(schema: dict) -> dict:
    """``schema`` said in fewer characters, meaning the same to a validator, for every tool's listing:

    - no titles pydantic derives from names ("Test Id" for test_id, "page_clickArguments"): they
      repeat the name (a property *named* title stays: only the keyword goes);
    - ``anyOf: [{type: T, ...}, {type: null}]`` (pydantic's optional field) as ``type: [T, null]``
      with the same constraints, which JSON Schema applies to T's values only;
    - no ``default: null``: a default is an annotation, and an argument not required may be left out.
    """
    out = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SUBSCHEMA and isinstance(value, dict):
            value = compact_schema(value)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            value = [compact_schema(v) if isinstance(v, dict) else v for v in value]
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            value = {name: compact_schema(v) if isinstance(v, dict) else v for name, v in value.items()}
        out[key] = value
    if "default" in out and out["default"] is None:
        del out["default"]
    options = out.get("anyOf")
    if (isinstance(options, list) and len(options) == 2 and options[1] == {"type": "null"}
            and isinstance(options[0], dict) and isinstance(options[0].get("type"), str)
            and not set(options[0]) & set(out)):
        del out["anyOf"]
        out = {**options[0], "type": [options[0]["type"], "null"], **out}
    return out
