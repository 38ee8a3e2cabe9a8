"""The input rules the server enforces are in its OpenAPI (vision.http.input_rules), enforced and
documented alike (no X: the real app over an empty session manager, so nothing valid can run).

Three ways: every validator of every request model the routes take has a rule written (a validator
added later without one fails here); the regular expressions documented are the ones the code
matches; and for each case below, the documented schema (read with a JSON Schema validator) and
the live server both refuse the same body, and both accept its corrected form."""

from __future__ import annotations

import json
import re

import httpx2
import jsonschema
import pytest

from desktop.session.manager import SESSION_ID, SessionManager
from desktop.session.stack import free_port
from desktop.x11.windows import LOCAL_SCHEMES, URL_SCHEMES
from tests.conftest import LiveServer
from vision.http import input_rules
from vision.http.app import Settings, create_app
from vision.http.input_rules import RULES_KEY, request_models, rules_of, undocumented


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("rules")
    (root / "sessions").mkdir()
    port = free_port()
    manager = SessionManager(root=root / "sessions", max_sessions=1)
    app = create_app(manager, Settings(token=None, port=port, data_dir=str(root / "data")))
    with LiveServer(app, port=port) as live, httpx2.Client(base_url=live.url, timeout=30) as client:
        live.app, live.client, live.spec = app, client, app.openapi()
        yield live
    manager.close()


def test_every_validator_of_a_request_model_has_its_rule_written(server):
    models = request_models(server.app.router.routes)
    assert len(models) > 40
    missing = {m.__name__: undocumented(m) for m in models if undocumented(m)}
    assert not missing, f"validators with no rule in vision.http.input_rules.VALIDATORS: {missing}"


def test_every_rule_is_in_the_schema_a_client_reads(server):
    components = server.spec["components"]["schemas"]
    counted = 0
    for model in request_models(server.app.router.routes):
        rules = [r.text for r in rules_of(model)]
        if not rules:
            continue
        component = components.get(model.__name__) or components[f"{model.__name__}-Input"]
        assert component[RULES_KEY] == rules, model.__name__
        assert all(rule in component["description"] for rule in rules)  # Swagger UI shows descriptions
        counted += len(rules)
    assert counted >= 35
    screenshot = server.spec["paths"]["/api/v1/sessions/{session_id}/desktop/screenshot"]["get"]["parameters"]
    quality = next(p for p in screenshot if p["name"] == "quality")
    assert "only with format jpeg or webp" in quality["description"]


def test_the_documented_grammars_are_the_ones_the_code_matches(server):
    from vision.evidence.qa_runs import _RUN_ID
    from vision.models.qa import NAME_PATTERN
    from vision.trace.files import _TRACE_ID

    def same(documented: str, enforced: re.Pattern, samples: list[str]) -> None:
        for sample in samples:
            assert bool(re.search(documented, sample)) == bool(enforced.fullmatch(sample)), (documented, sample)

    samples = ["default", "s-1a2b", "a_b", "A", "-x", "x" * 32, "x" * 33, "", "a b", "a..b", "v1.2", "..",
               "T" * 128, "T" * 129, "20261127T191500000000Z-ab12cd34"]
    same(input_rules.SESSION_ID, SESSION_ID, samples)
    same(input_rules.PATH_PATTERNS["trace_id"], _TRACE_ID, samples)
    same(input_rules.PATH_PATTERNS["test_run_id"], _RUN_ID, samples)
    baseline = re.compile(f"(?!.*\\.\\.){NAME_PATTERN}")
    same(input_rules.PATH_PATTERNS["baseline_id"], baseline, samples)
    for path, operations in server.spec["paths"].items():
        for operation in operations.values():
            for param in operation.get("parameters", []):
                if param["in"] == "path" and param["name"] in input_rules.PATH_PATTERNS:
                    assert param["schema"]["pattern"] == input_rules.PATH_PATTERNS[param["name"]], path
    # The URL rule names the schemes desktop.x11.windows.check_url takes, and the local ones it holds back.
    text = input_rules.URL_SCHEMES.text
    assert all(s.rstrip("/") in text for s in URL_SCHEMES) and all(s in text for s in LOCAL_SCHEMES)


def _schema_of(spec: dict, path: str) -> dict:
    operation = spec["paths"][path.replace("/sessions/nope", "/sessions/{session_id}")]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    return {**body, "components": spec["components"]}


def _documented_ok(spec: dict, path: str, body: dict) -> bool:
    return jsonschema.validators.Draft202012Validator(_schema_of(spec, path)).is_valid(body)


S = "/api/v1/sessions/nope"
CASES = [  # (path, refused body, accepted body, what the refusal says)
    (f"{S}/desktop/click", {"x": 5}, {"x": 5, "y": 5}, "give both x and y"),
    (f"{S}/desktop/scroll", {"y": 5, "direction": "up"}, {"direction": "up"}, "give both x and y"),
    (f"{S}/desktop/mouse_down", {"x": 1}, {}, "give both x and y"),
    ("/api/v1/sessions", {"id": "Bad Id"}, None, "id: use 1-32 lower-case letters"),
]


@pytest.mark.parametrize("path, refused, accepted, says", CASES)
def test_what_the_schema_refuses_the_server_refuses(server, path, refused, accepted, says):
    assert not _documented_ok(server.spec, path, refused)
    reply = server.client.post(path, json=refused)
    assert reply.status_code == 422 and says in reply.json()["error"]["message"], reply.text
    if accepted is not None:  # past validation: the session is what is missing
        assert _documented_ok(server.spec, path, accepted)
        assert server.client.post(path, json=accepted).json()["error"]["code"] == "session_not_found"


def _stated_rules(spec: dict, path: str) -> list[str]:
    """Every rule stated for the body of ``path``: its model's and those of the models it holds."""
    components = spec["components"]["schemas"]
    body = _schema_of(spec, path)
    body.pop("components")
    pending, seen, stated = [json.dumps(body)], set(), []
    while pending:
        for name in re.findall(r'"#/components/schemas/([^"]+)"', pending.pop()):
            if name not in seen:
                seen.add(name)
                stated += components[name].get(RULES_KEY, [])
                pending.append(json.dumps(components[name]))
    return stated


RULE_CASES = [  # (path, refused body, words of the rule the schema states, words of the refusal)
    (f"{S}/desktop/type", {"text": "a\x01b"}, "no control character", "U+0001"),
    (f"{S}/desktop/key", {"keys": "ctrl+nosuchkey"}, "known key names", "nosuchkey"),
    (f"{S}/desktop/hold_key", {"keys": "nosuchkey"}, "known key names", "nosuchkey"),
    (f"{S}/desktop/click", {"x": 1, "y": 1, "modifiers": ["nosuchkey"]}, "known key name", "nosuchkey"),
    (f"{S}/page/click", {"selector": "a", "text": "b"}, "exactly one way", "name the element one way"),
    (f"{S}/page/click", {"ref": "x12"}, "ref looks like e12", "refs look like e12"),
    (f"{S}/page/click", {"role": "buton"}, "ARIA role", "is not an ARIA role"),
    (f"{S}/page/fill", {"label": "Name", "name": "x", "value": "v"}, "name only with role", "give role too"),
    ("/api/v1/sessions", {"network": {"allow": ["http://example.com/path"]}}, "host, host:port", "not a host pattern"),
]


@pytest.mark.parametrize("path, body, rule, says", RULE_CASES)
def test_a_rule_the_schema_states_in_words_is_the_one_the_server_enforces(server, path, body, rule, says):
    stated = _stated_rules(server.spec, path)
    assert any(rule in text for text in stated), stated
    reply = server.client.post(path, json=body)
    assert reply.status_code == 422 and says in reply.json()["error"]["message"], reply.text
