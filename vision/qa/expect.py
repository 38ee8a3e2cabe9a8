"""A flow's element assertions judged on what the page showed (pure): whether an assertion holds on
an inspection of the step's target (desktop.service.page.PageService.inspect), what was seen, in
words, and the closest text when a text was not there.

Meanings are Playwright's ``expect``: a text is compared whitespace-normalised (has_text: the whole
of it, contains_text: a part), ``expected_list`` is the texts of all the matches in order, and the
state assertions look at the first match (a step's ``nth`` picks another).
"""

from __future__ import annotations

import difflib
import re

from vision.models.qa import Assertion

# What each assertion needs Playwright to decide about the first match.
STATES = {"visible": ("visible",), "hidden": ("visible",), "enabled": ("enabled",), "disabled": ("enabled",),
          "editable": ("editable",), "checked": ("checked",)}
SHOWN = 5  # texts quoted in a failure, at most
# Page-controlled text a caller's regular expression is applied to is cut to this many characters
# (a console line, a URL, an element's text): a cheap bound on what a pathological pattern can cost.
REGEX_TEXT_LIMIT = 10_000
CLOSE_ENOUGH = 0.5  # a closest text is offered from this similarity up (as the OCR finder does)


def normalise(text: str | None) -> str:
    """Whitespace runs as one space, none at the ends (Playwright's normalisation of a text)."""
    return " ".join((text or "").split())


def _quote(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _texts(elements: list[dict]) -> list[str]:
    return [normalise(e["text"]) for e in elements]


def _in_order(wanted: list[str], texts: list[str], contains: bool) -> bool:
    """contains: each wanted text in a match, in order (Playwright's to_contain_text with a list);
    else exactly the matches' texts."""
    if not contains:
        return texts == wanted
    position = 0
    for want in wanted:
        while position < len(texts) and want not in texts[position]:
            position += 1
        if position == len(texts):
            return False
        position += 1
    return True


def judge(a: Assertion, seen: dict) -> tuple[bool, str]:
    """Whether ``a`` (ignoring its ``not``) holds on ``seen``, and what was seen, in words; an
    assertion about the first of several matches says so (`nth` picks another)."""
    held, saw = _judge(a, seen)
    if seen["count"] > 1 and a.kind not in ("count", "exists") and a.expected_list is None:
        saw += f" (the first of {seen['count']} matches)"
    return held, saw


def _judge(a: Assertion, seen: dict) -> tuple[bool, str]:  # noqa: C901
    kind, count, elements, states = a.kind, seen["count"], seen["elements"], seen.get("states", {})
    matches = f"{count} match{'es' if count != 1 else ''}"
    if kind == "count":
        return count == a.count, matches
    if kind == "exists":
        return count > 0, matches
    if kind == "hidden":
        if not count:
            return True, "no match"
        return not states.get("visible"), "visible" if states.get("visible") else "a hidden element"
    if not count:
        return False, "no element matches"
    first = elements[0]
    if kind == "visible":
        return bool(states.get("visible")), "visible" if states.get("visible") else "hidden (not visible)"
    if kind in ("enabled", "disabled"):
        enabled = states.get("enabled")
        return (enabled is True) == (kind == "enabled"), "enabled" if enabled else "disabled"
    if kind == "editable":
        editable = states.get("editable")
        return editable is True, ("editable" if editable else "read-only or disabled" if editable is False
                                  else f"not editable (a <{first['tag']}>)")
    if kind == "checked":
        checked = states.get("checked")
        return checked is True, ("checked" if checked else "unchecked" if checked is False
                                 else f"no checked state (a <{first['tag']}>)")
    if kind == "focused":
        return bool(first["focused"]), "focused" if first["focused"] else "not focused"
    if kind == "has_class":
        classes = first["classes"]
        return a.expected in classes, f"classes {' '.join(classes)!r}" if classes else "no class"
    if kind in ("has_text", "contains_text"):
        contains = kind == "contains_text"
        texts = _texts(elements)
        if a.expected_list is not None:
            wanted = [normalise(t) for t in a.expected_list]
            shown = ", ".join(_quote(t, 80) for t in texts[:SHOWN * 4]) + (", …" if len(texts) > SHOWN * 4 else "")
            return _in_order(wanted, texts, contains), f"{matches}: [{shown}]"
        if a.expected_regex is not None:
            return _searched(a.expected_regex, texts[0]), f"text {_quote(texts[0])}"
        want = normalise(a.expected)
        return (want in texts[0]) if contains else texts[0] == want, f"text {_quote(texts[0])}"
    if kind == "has_value":
        value = first["value"]
        if value is None:
            return False, f"no value (a <{first['tag']}>, not a form field)"
        if a.expected_regex is not None:
            return _searched(a.expected_regex, value), f"value {_quote(value)}"
        return value == a.expected, f"value {_quote(value)}"
    if kind == "has_values":
        values = first.get("values")
        if values is None:
            return False, f"no selected values (a <{first['tag']}>, not a select)"
        return values == a.expected_list, f"values {values!r}"
    if kind == "has_attribute":
        value = first["attribute"]
        if value is None:
            return False, f"no attribute {a.attribute}"
        if a.expected_regex is not None:
            return _searched(a.expected_regex, value), f"{a.attribute}={_quote(value)}"
        return a.expected is None or value == a.expected, f"{a.attribute}={_quote(value)}"
    raise ValueError(f"not an element assertion: {a.type}")


def _searched(pattern: str, text: str) -> bool:
    """Playwright's toHaveText(/re/) and toHaveAttribute(name, /re/): the expression found anywhere
    in the text (bounded: a page's text may be long)."""
    return re.search(pattern, text[:REGEX_TEXT_LIMIT]) is not None


def wanted(a: Assertion) -> str:
    """What the assertion asks for, in words, e.g. ``not has_class 'completed'``."""
    words = {"count": f"count {a.count}", "has_attribute": f"attribute {a.attribute}"
             + (f"={a.expected!r}" if a.expected is not None else ""),
             "has_class": f"class {a.expected!r}", "has_value": f"value {a.expected!r}",
             "has_values": f"values {a.expected_list!r}",
             "has_text": "text " + (repr(a.expected) if a.expected_list is None else repr(a.expected_list)),
             "contains_text": "text containing " + (repr(a.expected) if a.expected_list is None
                                                    else repr(a.expected_list))}.get(a.kind, a.kind)
    if a.expected_regex is not None:
        words = {"has_text": "text", "contains_text": "text", "has_value": "value",
                 "has_attribute": f"attribute {a.attribute}"}[a.kind] + f" matching /{a.expected_regex}/"
    return f"not {words}" if a.negate else words


def closest(want: str, candidates: list[str]) -> str | None:
    """The candidate most like ``want`` (difflib's ratio, case-folded), if it is close enough."""
    want = normalise(want).casefold()
    best, score = None, 0.0
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(want)
    for candidate in dict.fromkeys(normalise(c) for c in candidates if c and c.strip()):
        matcher.set_seq1(candidate.casefold()[:500])
        ratio = matcher.ratio()
        if ratio > score:
            best, score = candidate, ratio
    return best if score >= CLOSE_ENOUGH else None


# A native control's role that can be checked (AT-SPI's): one of these has a checked state even
# when it is not checked now, which the node's states alone do not say on older toolkits.
CHECKABLE_ROLES = frozenset({"check box", "radio button", "toggle button", "check menu item", "radio menu item",
                             "switch"})


def native_seen(found) -> dict:
    """What a native target matched (desktop.models.NativeFound) as ``judge`` reads an inspection of
    the page (pure): each control's text (a text node's content, else its name), value (an editable
    control's text, else its numeric value), focus, and the first one's states."""
    elements = [{"text": m.text if m.text is not None else m.name, "value": _native_value(m),
                 "focused": "focused" in m.states, "tag": m.role, "classes": []} for m in found.matches]
    states: dict = {}
    if found.matches:
        first = found.matches[0]
        checked = "checked" in first.states or "pressed" in first.states
        states = {"visible": first.box is not None and "visible" in first.states,
                  "enabled": "enabled" in first.states, "editable": "editable" in first.states,
                  "checked": True if checked else (False if first.role in CHECKABLE_ROLES
                                                   or "checkable" in first.states else None)}
    return {"count": found.count, "elements": elements, "states": states}


def _native_value(match) -> str | None:
    if "editable" in match.states:
        return match.text or ""
    return None if match.value is None else f"{match.value:g}"
