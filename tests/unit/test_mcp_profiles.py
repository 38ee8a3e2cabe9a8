"""MCP tool profiles (vision.mcp.profiles), without X: what each profile lists, what it costs a
model's context, tools the settings turn off, and ``?tools=`` on /mcp.

Size is measured on what ``tools/list`` sends: each tool as compact JSON (name, title, description,
input schema, annotations). Tokens are estimated as characters / 4 (the usual rule of thumb for
English and JSON; a model's own tokenizer differs by some tenths, which the margins below allow).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import httpx2
import pytest
from jsonschema.validators import validator_for
from mcp import Client
from mcp.types import TextContent

from desktop.errors import InvalidRequest
from desktop.session.manager import SessionManager
from desktop.session.stack import free_port
from tests.answers import mcp_tool_names
from tests.fakes.app_server import AppServer
from vision.app.service import Glassdesk
from vision.cli import build_parser
from vision.config import VisionConfig
from vision.http.app import Settings, create_app
from vision.mcp import build_server
from vision.mcp.profiles import PROFILES, compact_schema, parse_profile

# Measured on HEAD 235371a, before profiles (one list, every description opening with the
# ~110-character preamble "Acts on the VISIBLE XFCE desktop (1920x1080) that the operator watches live
# in noVNC; Chromium is already open.", page_evaluate listed with evaluate off, pydantic's titles in
# every schema): 58 tools, 140,399 characters, about 35,100 tokens.
BEFORE_CHARS = 140_399
BEFORE_TOOLS = 58
CORE_MAX_TOKENS = 5_000

CORE = {"desktop_screenshot", "desktop_zoom", "desktop_click", "desktop_double_click", "desktop_drag",
        "desktop_scroll", "desktop_type", "desktop_key", "desktop_open_url", "vision_act", "page_state",
        "live_view_url"}


@pytest.fixture
def make(tmp_path):
    made = []

    def build(**kwargs) -> Glassdesk:
        root = tmp_path / f"sessions{len(made)}"
        root.mkdir()
        manager = SessionManager(root=root, max_sessions=2)
        glassdesk = Glassdesk.build(manager, data_dir=tmp_path / "data", config=VisionConfig(), **kwargs)
        made.append((glassdesk, manager))
        return glassdesk

    yield build
    for glassdesk, manager in made:
        glassdesk.close()
        manager.close()


def listing(server):
    async def main():
        async with Client(server) as client:
            return (await client.list_tools()).tools
    return anyio.run(main)


def size(tools) -> int:
    return sum(len(json.dumps(t.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":")))
               for t in tools)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def docs_problems(sizes: dict[str, tuple[int, int, int]]) -> list[str]:
    """Where docs/mcp.md's profile table or the README's figures differ from ``sizes``: the tool
    counts exactly, the characters and tokens within 5 % (a reworded description moves them a little)."""
    root = Path(__file__).resolve().parents[2]
    problems = []
    table = (root / "docs" / "mcp.md").read_text()
    for name, (count, chars, tokens) in sizes.items():
        row = re.search(rf"^\| `{name}`(?: \(default\))? \| .* \| (\d+) \| ([\d,]+) \| ([\d,]+) \|$", table, re.M)
        if row is None:
            problems.append(f"docs/mcp.md: no row for profile {name}")
            continue
        said = (int(row[1]), int(row[2].replace(",", "")), int(row[3].replace(",", "")))
        if said[0] != count or abs(said[1] - chars) > chars * 0.05 or abs(said[2] - tokens) > tokens * 0.05:
            problems.append(f"docs/mcp.md says {name}: {said}; measured {(count, chars, tokens)}")
    readme = " ".join((root / "README.md").read_text().split())
    listed = re.search(r"Every tool is listed by default \((\d+), about ([\d.]+)k tokens", readme)
    core = re.search(r"the `core` profile \((\d+) tools, about ([\d.]+)k tokens", readme)
    for what, found, (count, _, tokens) in (("all", listed, sizes["all"]), ("core", core, sizes["core"])):
        if found is None or int(found[1]) != count or abs(float(found[2]) * 1000 - tokens) > tokens * 0.05:
            problems.append(f"README.md's {what} figures ({found and found.group(0)}) are not {count} tools, "
                            f"about {tokens / 1000:.1f}k tokens")
    return problems


def test_each_profile_is_measured_core_fits_and_all_is_smaller_than_before(make):
    glassdesk = make()
    sizes = {}
    for name in PROFILES:
        tools = listing(build_server(glassdesk, name))
        sizes[name] = (len(tools), size(tools), size(tools) // 4)
    print("\nprofile: tools, characters, ~tokens (chars/4)")
    for name, (count, chars, tokens) in sizes.items():
        print(f"  {name:8} {count:3} {chars:8,} {tokens:7,}")
    assert sizes["core"][2] <= CORE_MAX_TOKENS, sizes["core"]
    assert docs_problems(sizes) == []
    # The preambles and titles dropped: 15 % at least per tool (per tool: the catalogue grows by
    # whole operations since, each paying its own description; a fixed total failed on the next one).
    assert sizes["all"][1] / sizes["all"][0] < BEFORE_CHARS / BEFORE_TOOLS * 0.85, sizes["all"]
    assert sizes["core"][1] < sizes["desktop"][1] < sizes["all"][1]
    assert sizes["core"][1] < sizes["page"][1] < sizes["all"][1]
    assert sizes["core"][1] < sizes["qa"][1] < sizes["all"][1]


def test_what_each_profile_lists(make):
    glassdesk = make()
    names = {name: {t.name for t in listing(build_server(glassdesk, name))} for name in PROFILES}
    assert names["core"] == CORE
    assert names["all"] == mcp_tool_names()
    assert names["page"] - CORE == {n for n in names["all"] if n.startswith("page_")} - CORE
    assert names["qa"] - CORE == {"verify_page_loads", "verify_element_exists", "verify_user_flow",
                                  "capture_visual_baseline", "compare_visual_regression", "analyze_console_errors",
                                  "export_test", "eval_start", "eval_status", "eval_list"}
    assert names["desktop"] - CORE >= {"desktop_launch", "session_create", "vision_click_anywhere", "desktop_move"}
    # The groups partition the catalogue: every tool is in exactly one profile besides all and core's.
    groups = [names[p] - CORE for p in ("desktop", "page", "qa")]
    assert set().union(*groups) | CORE == names["all"] and sum(map(len, groups)) + len(CORE) == len(names["all"])
    # Several joined: the union.
    assert {t.name for t in listing(build_server(glassdesk, "page,qa"))} == names["page"] | names["qa"]
    assert {t.name for t in listing(build_server(glassdesk))} == names["all"]  # the default


def test_every_description_says_it_acts_on_the_visible_desktop_once_and_briefly(make):
    tools = listing(build_server(make(), "all"))
    for tool in tools:
        assert tool.description.startswith(("Acts on the VISIBLE desktop", "Looks at the VISIBLE desktop",
                                            "Manages the VISIBLE desktop")), (tool.name, tool.description)
        assert tool.description.count("VISIBLE") == 1, tool.name
        assert "watches live in noVNC" not in tool.description, tool.name  # the instructions say it, once
        validator_for(tool.input_schema).check_schema(tool.input_schema)
        # No title keyword left (a property named title maps to an object, not a string).
        assert '"title":"' not in json.dumps(tool.input_schema, separators=(",", ":")), tool.name


def test_a_tool_the_settings_turn_off_is_not_listed_but_refuses_as_before(make):
    off, on = make(), make(allow_evaluate=True)
    assert "page_evaluate" not in {t.name for t in listing(build_server(off))}
    assert "page_evaluate" in {t.name for t in listing(build_server(on))}
    assert "page_evaluate" in {t.name for t in listing(build_server(on, "page"))}
    assert "page_evaluate" not in {t.name for t in listing(build_server(on, "core"))}

    async def call(client):
        return await client.call_tool("page_evaluate", {"expression": "1"})

    async def main():
        async with Client(build_server(off)) as client:
            return await call(client)
    result = anyio.run(main)
    assert result.is_error and text_of(result).startswith("evaluate_disabled: ") and "--allow-evaluate" in \
        text_of(result)
    assert off.desktops.manager.sessions == {}


def test_a_tool_outside_the_profile_is_refused_and_nothing_runs(make):
    glassdesk = make()

    async def main():
        async with Client(build_server(glassdesk, "core")) as client:
            return await client.call_tool("desktop_launch", {"command": "mousepad"})
    result = anyio.run(main)
    assert result.is_error
    assert text_of(result).startswith("invalid_request: desktop_launch is not in this connection's tool profile "
                                      "(core); nothing was done"), text_of(result)
    assert "'desktop' profile" in text_of(result)
    assert glassdesk.desktops.manager.sessions == {}


def test_profile_names_are_checked_all_at_once():
    assert parse_profile(None) == parse_profile("all") == parse_profile("") == PROFILES["all"]
    assert parse_profile(" Page , qa ") == {"core", "page", "qa"}
    with pytest.raises(InvalidRequest) as caught:
        parse_profile("core,bogus,pages")
    assert caught.value.code == "invalid_request"
    assert "'bogus', 'pages'" in caught.value.message and "core, desktop, page, qa, all" in caught.value.message


def test_the_command_line_refuses_a_bad_profile(capsys):
    for argv in (["mcp", "--tools", "bogus"], ["up", "--mcp-tools", "core,nope"]):
        with pytest.raises(SystemExit) as caught:
            build_parser().parse_args(argv)
        assert caught.value.code == 2
        assert "unknown profile" in capsys.readouterr().err
    assert build_parser().parse_args(["mcp", "--tools", "core"]).tools == "core"
    assert build_parser().parse_args(["mcp"]).tools == "all"
    assert build_parser().parse_args(["up"]).mcp_tools == "all"


def test_compact_schema_says_the_same_in_fewer_characters():
    schema = {"title": "fArguments", "type": "object", "properties": {
        "title": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}], "default": None, "title": "Title"},
        "within": {"anyOf": [{"$ref": "#/$defs/T"}, {"type": "null"}], "default": None},
        "n": {"type": "integer", "default": 3, "title": "N", "enum": [1, 3]},
        "data": {"type": "object", "default": {"title": "kept"}}},
        "$defs": {"T": {"title": "T", "type": "object", "properties": {"x": {"type": "integer", "title": "X"}}}}}
    compact = compact_schema(schema)
    assert compact == {"type": "object", "properties": {
        "title": {"type": ["string", "null"], "maxLength": 5},
        "within": {"anyOf": [{"$ref": "#/$defs/T"}, {"type": "null"}]},
        "n": {"type": "integer", "default": 3, "enum": [1, 3]},
        "data": {"type": "object", "default": {"title": "kept"}}},
        "$defs": {"T": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
    validator = validator_for(compact)
    validator.check_schema(compact)
    for value, valid in (({"title": None}, True), ({"title": "abc"}, True), ({"title": "abcdef"}, False),
                         ({"title": 3}, False), ({}, True)):
        assert validator(compact).is_valid(value) is valid is validator(schema).is_valid(value), value


def test_the_http_door_lists_the_profile_asked_for_and_refuses_an_unknown_one(tmp_path):
    (tmp_path / "sessions").mkdir()
    manager = SessionManager(root=tmp_path / "sessions", max_sessions=1)
    port = free_port()
    app = create_app(manager, Settings(token=None, port=port, data_dir=str(tmp_path / "data"), mcp_tools="qa"))
    with AppServer(app) as server:
        async def names(query: str) -> set[str]:
            async with Client(f"{server.url}/mcp{query}") as client:
                return {t.name for t in (await client.list_tools()).tools}

        assert anyio.run(names, "?tools=core") == CORE
        assert anyio.run(names, "") == CORE | {op for op in mcp_tool_names() if op.startswith(("verify_", "capture_",
                                                                                               "compare_", "analyze_",
                                                                                               "export_", "eval_"))}
        assert anyio.run(names, "?tools=all") == mcp_tool_names()
        answer = httpx2.post(f"{server.url}/mcp?tools=core,bogus", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                             headers={"accept": "application/json, text/event-stream"})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "invalid_request" and "'bogus'" in answer.json()["error"]["message"]
    assert manager.sessions == {}


def test_the_evaluation_tools_are_the_servers_and_say_rates_and_refusals(make):
    """eval_start, eval_status and eval_list are the catalogue's server operations: no ``session``
    argument, no session started; a kept result reads as each model's rate, a bad request lists
    every problem and starts nothing."""
    from vision.eval.results import result_path
    from vision.models.eval import EvalResult, Rate

    glassdesk = make()
    root = glassdesk.evals.root
    result = EvalResult(eval_id="eval-kept", name="kept", started_at="2026-11-30T00:00:00Z", models=["oracle"],
                        tasks=["click-test"], episodes_per_task=4, parallel=1,
                        rates=[Rate(model="oracle", episodes=4, successes=3, rate=0.75, ci95=(0.3, 0.95),
                                    false_claims=1, environment_errors=0, retried=0, mean_steps=2.0,
                                    median_wall_s=1.0, tokens=0)])
    path = result_path(root, "eval-kept")
    path.parent.mkdir(parents=True)
    path.write_text(result.model_dump_json())
    schemas = {t.name: t.input_schema for t in listing(build_server(glassdesk, "qa")) if t.name.startswith("eval_")}
    assert sorted(schemas) == ["eval_list", "eval_start", "eval_status"]
    assert all("session" not in schema.get("properties", {}) for schema in schemas.values())

    async def main():
        async with Client(build_server(glassdesk, "qa")) as client:
            return [await client.call_tool(name, arguments) for name, arguments in (
                ("eval_list", {}), ("eval_status", {"eval_id": "eval-kept"}), ("eval_status", {"eval_id": "nope"}),
                ("eval_start", {"tasks": [{"id": "t"}], "models": ["oracle", "oracle"]}))]
    listed, status, missing, refused = anyio.run(main)
    assert listed.structured_content["evals"][0]["eval_id"] == "eval-kept" and "eval-kept: done kept" in text_of(listed)
    assert "oracle: 3/4 = 75% (95% CI 30%-95%); 1 false claim(s) of done" in text_of(status), text_of(status)
    assert missing.is_error and "no evaluation 'nope'" in text_of(missing)
    assert refused.is_error and "oracle solves MiniWoB++'s tasks only" in text_of(refused), text_of(refused)
    assert "models: each once" in text_of(refused), text_of(refused)  # every problem at once
    assert glassdesk.desktops.manager.sessions == {} and [p.name for p in root.iterdir()] == ["eval-kept"]
