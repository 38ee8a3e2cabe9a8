"""The input rules the server enforces beyond what its models' JSON Schema says, written into the
OpenAPI (``document``, called by vision.http.openapi).

pydantic's schema carries types, bounds, lengths, enums and ``Field(pattern=...)``; a model or field
validator (x and y together, exactly one way of naming an element, a known key name, a typeable
character...), a check a service makes on a field (a URL's scheme, a program's name) and a path
parameter's grammar (session ids) were enforced but said nowhere a client could read them. Each is
written here once, as a sentence and, where JSON Schema can say it, as schema keywords
(``dependentRequired``, ``pattern``): a component schema gets ``x-rules`` (the sentences, also
appended to its description, which Swagger UI shows) and the keywords; a path parameter its
``pattern``. ``tests/unit/test_input_rules.py`` walks every request model the routes take and fails
on a validator with no rule here, so a rule added later is documented or the suite says so.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.functional_validators import AfterValidator, BeforeValidator, PlainValidator, WrapValidator

RULES_KEY = "x-rules"


@dataclass(frozen=True)
class Rule:
    text: str | None  # None: the validator only normalises (a list given as a string), it refuses nothing new
    schema: dict[str, Any] = field(default_factory=dict)  # JSON Schema keywords saying it, merged into the model's


BOTH_OR_NEITHER = Rule("x and y: give both, or neither (then the action happens where the pointer is)",
                       {"dependentRequired": {"x": ["y"], "y": ["x"]}})
KEY_NAMES = Rule("modifiers: each a known key name (X keysym names and the usual aliases: ctrl, alt, shift, super, "
                 "enter, esc...)")
EXACTLY_ONE_TARGET = Rule(
    "name the element exactly one way: one of selector, ref, label, text, role, placeholder, test_id, alt, title; "
    "ref looks like e12 or f1e12 (from the accessibility snapshot); role is an ARIA role (Playwright's get_by_role "
    "list); name only with role; has_text, nth, within not with a ref target; exact only with label, text, role, "
    "placeholder, alt, title")

# The validators of request models, by the validator function's module and qualified name.
VALIDATORS: dict[str, Rule] = {
    "desktop.actions._OptionalPoint._both_or_neither": BOTH_OR_NEITHER,
    "desktop.actions._known_keys": KEY_NAMES,
    "desktop.actions.HoldKey._known": Rule("keys: one chord of known key names joined by +, e.g. shift or ctrl+alt"),
    "desktop.actions._split_chords": Rule(None),  # "ctrl+a Delete" is taken as ["ctrl+a", "Delete"]
    "desktop.actions._known_chords": Rule("keys: chords of known key names joined by + (ctrl+a, shift+Tab, Return), "
                                          "as a list or one string separated by spaces"),
    "desktop.actions.typeable": Rule("text: no NUL, no control character but newline, tab and carriage "
                                           "return, no lone surrogate (they have no key to press)"),
    "desktop.actions.Region._from_list": Rule("also [x0, y0, x1, y1], a list of exactly four integers"),
    "desktop.actions.Region._ordered": Rule("x0 < x1 and y0 < y1"),
    "desktop.models.Target._exactly_one": EXACTLY_ONE_TARGET,
    "desktop.models.NativeTarget._named": Rule(
        "a native control named by its ref alone (n17, from the desktop tree), or by a role and/or a name (app, "
        "exact, within and nth narrowing them); exact only with a name"),
    "vision.models.ActRequest._reset_starts_a_run": Rule("reset and expect: only with a new instruction (not when "
                                                         "continuing a paused run)"),
    "vision.models.qa.Expectation._fits_the_assertion": Rule(
        "an expectation's target as its assertion takes it: one for the element's assertions (exists, visible and "
        "hidden also by screen text or an image), none for url, url_matches, title, evaluate, "
        "screen_text_contains and visual_matches"),
    "vision.models.AnthropicComputerRequest._toolset_names_the_action": Rule(
        "tool_version computer_toolset_20260801: name is the action (e.g. left_click), not computer"),
    "vision.models.OpenAIComputerRequest._one_of": Rule("exactly one of action (computer_use_preview) or actions "
                                                        "(GA computer)"),
    "vision.models.qa.AnalyzeConsoleRequest._patterns": Rule("ignore_patterns: each a valid regular expression "
                                                             "(Python's re)"),
    "vision.models.qa.Assertion._complete": Rule(
        "each type takes its own fields: expected for has_class, has_value, url, url_matches, title, evaluate, "
        "screen_text_contains; expected, expected_list or expected_regex (one of them) for has_text and "
        "contains_text, expected or expected_regex for has_value and has_attribute (expected_regex a valid regular "
        "expression, only for these four); expected_list only for has_text, contains_text and has_values (needed "
        "there); count only (and needed) for count; attribute only (and needed) for "
        "has_attribute; no expected for element states and count; url_matches's expected a valid regular "
        "expression; baseline_id needed for visual_matches, which cannot be negated; the visual limits only for "
        "visual_matches"),
    "vision.models.qa.Recorded._png": Rule("recorded.image: base64 of a PNG no larger than the display"),
    "vision.models.qa.VisualLimits._one_ratio": Rule("threshold is the former name of max_diff_pixel_ratio: give "
                                                     "one, or both equal"),
    "vision.models.qa.check_name": Rule("baseline names: 1-100 letters, digits, '.', '_' or '-', starting with a "
                                        "letter or digit, no '..'"),
    "vision.models.qa._check_mask": Rule("mask: each entry a non-empty CSS selector or a box [x0, y0, x1, y1] with "
                                         "0 <= x0 < x1 and 0 <= y0 < y1"),
    "vision.models.qa.CaptureBaselineRequest._one_scope": Rule("selectors: each once, and not 'page'; full_page and "
                                                               "display: not both"),
    "vision.models.qa.FlowStep._fits_the_action": Rule(
        "each action takes its own fields: navigate needs url (or value); fill and type value, select option, drag "
        "to, upload files, assert assertion, act instruction, evaluate expression, wait_for_request request, press "
        "keys (known key names); to and position only with drag, files only with upload, state only with wait "
        "(and a target), expect only with act, expression only with evaluate, request only with wait_for_request; "
        "the target as the action takes it: none for navigate-like steps, evaluate and wait_for_request, one for "
        "click, dblclick, hover and fill (also by screen text), one found in the page for check, uncheck, clear, "
        "drag, scroll_into_view, upload, select and blur, at most one found in the page for press and type"),
    "vision.models.qa.RequestCheck._pattern": Rule("request.url_matches: a valid regular expression (Python's re)"),
    "vision.models.qa.SuccessCondition._exactly_one": Rule("exactly one of selector, text, screen_text, url_matches; "
                                                           "url_matches a valid regular expression"),
    "vision.models.qa.VerifyElementRequest._one_target": Rule("name the element exactly one way: one of selector, "
                                                              "ref, text"),
}

SESSION_ID = r"^[a-z0-9][a-z0-9_-]{0,31}$"  # desktop.session.manager.SESSION_ID (a test holds them equal)
URL_SCHEMES = Rule("url: http://, https://, about:, data:, file:// or chrome:// (file:// and chrome:// only when the "
                   "server runs with --allow-local-urls); the session's network policy decides the host")

# Checks a service makes on a request model's fields, by the model's name (no validator to find).
CHECKED_BY_SERVICES: dict[str, list[Rule]] = {
    "OpenRequest": [URL_SCHEMES],
    "NavigateRequest": [URL_SCHEMES],
    "NewTabRequest": [URL_SCHEMES],
    "CreateSession": [Rule("id: 1-32 of a-z, 0-9, '_' and '-', starting with a letter or digit",
                           {"properties": {"id": {"anyOf": [{"type": "string", "pattern": SESSION_ID},
                                                            {"type": "null"}]}}})],
    "NetworkPolicyBody": [Rule("allow, deny: at most 256 patterns each, every one host, host:port, *.domain or "
                               "*.domain:port (IPv6 in brackets before a port: [::1]:8080); a wildcard names a "
                               "domain, not an IP address; ports 1-65535")],
    "LaunchRequest": [Rule("command: a program name looked up on PATH, never a path; one of the desktop programs "
                           "launch starts by default or of the server's --launch-allow; shells, interpreters and "
                           "programs that run other programs only when listed there")],
}

# Query parameters, by name: what is checked beyond their schema (said in their description), and
# the keywords that say it where JSON Schema can (merged into the parameter's schema).
QUERY_RULES: dict[str, Rule] = {
    "quality": Rule("only with format jpeg or webp: png is lossless, and a quality with it is refused"),
    "region": Rule("x0,y0,x1,y1: four integers, 0 <= x0 < x1 <= 1920 and 0 <= y0 < y1 <= 1080",
                   {"anyOf": [{"type": "string", "pattern": r"^[0-9]+,[0-9]+,[0-9]+,[0-9]+$"}, {"type": "null"}]}),
}

# Path parameters, by name: the grammar their ids have (a value outside it names nothing: 404).
PATH_PATTERNS: dict[str, str] = {
    "session_id": SESSION_ID,
    "trace_id": r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$",
    "test_run_id": r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$",
    "baseline_id": r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
}


# --------------------------------------------------------------------------- finding validators


def _validator_funcs(annotation: Any) -> Iterator[Any]:
    """The validator functions an annotation carries (Annotated metadata, at any depth)."""
    if typing.get_origin(annotation) is typing.Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)):
                yield meta.func
    for arg in typing.get_args(annotation):
        yield from _validator_funcs(arg)


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def validator_key(func: Any) -> str:
    func = getattr(func, "__func__", func)  # a classmethod's function
    return f"{func.__module__}.{func.__qualname__}"


def validators(model: type[BaseModel]) -> list[str]:
    """Every validator ``model`` runs on its own fields (not those of the models it holds), by key."""
    decorators = model.__pydantic_decorators__
    found = [validator_key(d.func) for d in decorators.model_validators.values()]
    found += [validator_key(d.func) for d in decorators.field_validators.values()]
    for info in model.model_fields.values():
        for meta in info.metadata:
            if isinstance(meta, (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)):
                found.append(validator_key(meta.func))
        found += [validator_key(f) for f in _validator_funcs(info.annotation)]
    return list(dict.fromkeys(found))


def reachable(roots: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """``roots`` and every model their fields hold, at any depth, each once."""
    seen: dict[type[BaseModel], None] = {}
    pending = list(roots)
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen[model] = None
        for info in model.model_fields.values():
            pending += _models_in(info.annotation)
    return list(seen)


def request_models(routes) -> list[type[BaseModel]]:
    """The models the routes take as bodies, and every model those hold."""
    from fastapi.routing import iter_route_contexts

    roots: list[type[BaseModel]] = []
    for route in iter_route_contexts(routes):
        dependant = getattr(route, "dependant", None)
        for param in getattr(dependant, "body_params", None) or []:
            roots += _models_in(param.field_info.annotation)
    return reachable(roots)


def undocumented(model: type[BaseModel]) -> list[str]:
    """The validators of ``model`` with no rule here (tests/unit/test_input_rules.py wants none)."""
    return [key for key in validators(model) if key not in VALIDATORS]


def rules_of(model: type[BaseModel]) -> list[Rule]:
    """The rules of ``model``: its validators' and its services', each once."""
    rules = [VALIDATORS[key] for key in validators(model) if key in VALIDATORS]
    rules += CHECKED_BY_SERVICES.get(model.__name__, [])
    return list({r.text: r for r in rules if r.text is not None}.values())


# ---------------------------------------------------------------------------------- the schema


def _merge(target: dict, extra: dict) -> None:
    """``extra``'s keywords into ``target``, object by object (a property's schema is added to, not replaced)."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def document(schema: dict, routes) -> dict:
    """``schema`` (the app's OpenAPI) with every input rule written in (in place, returned)."""
    components = schema.get("components", {}).get("schemas", {})
    for model in request_models(routes):
        rules = rules_of(model)
        if not rules:
            continue
        for name in (model.__name__, f"{model.__name__}-Input"):
            component = components.get(name)
            if component is None:
                continue
            component[RULES_KEY] = [r.text for r in rules]
            for rule in rules:
                _merge(component, rule.schema)
            said = "Rules: " + "; ".join(f"{r.text}" for r in rules) + "."
            component["description"] = f"{component['description']}\n\n{said}" if component.get("description") \
                else said
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for param in operation.get("parameters", []):
                pattern = PATH_PATTERNS.get(param["name"]) if param.get("in") == "path" else None
                if pattern is not None:
                    param["schema"]["pattern"] = pattern
                query_rule = QUERY_RULES.get(param["name"]) if param.get("in") == "query" else None
                if query_rule is not None:
                    _merge(param["schema"], query_rule.schema)
                    param[RULES_KEY] = [query_rule.text]
                    param["description"] = f"{param.get('description') or ''} ({query_rule.text})".strip()
    return schema
