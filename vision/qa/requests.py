"""A flow's request checks (wait_for_request) judged on what the page layer recorded (pure): which
recorded request a check names, what about it differs from the check, and how it is shown in the
evidence, its secrets masked.

The page layer's network record (desktop.browser.record) holds each request's method, URL and
response status; its headers and body are kept beside it (PageService.request_detail) for these
checks alone.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from desktop.actions import fill_placeholders
from vision.models.qa import RequestCheck
from vision.qa.expect import REGEX_TEXT_LIMIT

# Headers whose values are credentials: never shown, in a record or a failure, beyond their scheme.
SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "x-auth-token")
_MISSING = object()


def matches(check: RequestCheck, entry: dict) -> bool:
    """Whether a recorded request is the one ``check`` names: its URL and method."""
    if check.method is not None and entry.get("method", "").upper() != check.method.upper():
        return False
    return re.search(check.url_matches, (entry.get("url") or "")[:REGEX_TEXT_LIMIT]) is not None


def first_match(check: RequestCheck, entries: list[dict], taken: set[int]) -> dict | None:
    """The earliest recorded request ``check`` names that no earlier step took."""
    return next((e for e in entries if e["seq"] not in taken and matches(check, e)), None)


def problems(check: RequestCheck, entry: dict, detail: dict | None, secrets: dict[str, str]) -> list[str]:
    """What about the request differs from the check, every difference, in words that show no
    secret (an empty list: it holds). ``secrets`` fill the expected values' {{placeholders}}."""
    found: list[str] = []
    if check.status is not None and entry.get("status") != check.status:
        found.append(f"status {check.status} expected; "
                     + (f"answered {entry['status']}" if entry.get("status") is not None
                        else f"no answer ({entry.get('failure') or 'none yet'})"))
    if (check.headers or check.body) and detail is None:
        return found + ["its headers and body are no longer kept (over 500 requests since, or its browser restarted)"]
    sent = (detail or {}).get("headers", {})
    for name, expected in (check.headers or {}).items():
        name = name.lower()
        value = sent.get(name)
        if value is None:
            found.append(f"header {name}: not sent")
        elif value != fill_placeholders(expected, secrets):
            found.append(f"header {name}: sent {shown_header(name, value)!r}"
                         + ("" if name in SECRET_HEADERS or "{{" in expected else f", expected {expected!r}"))
    if check.body:
        values = body_values((detail or {}).get("body"), sent.get("content-type", ""))
        for path, expected in check.body.items():
            value = at_path(values, path)
            if value is _MISSING:
                found.append(f"body {path}: not in the body")
            elif value != expected:
                found.append(f"body {path}: {json.dumps(value)[:200]}, expected {json.dumps(expected)[:200]}")
    return found


def shown_header(name: str, value: str) -> str:
    """A header's value as evidence shows it: a credential as its scheme alone (``Bearer [REDACTED]``)."""
    if name.lower() not in SECRET_HEADERS:
        return value
    scheme = value.split(" ", 1)[0] if " " in value else ""
    return f"{scheme} [REDACTED]".strip()


def shown(entry: dict, detail: dict | None) -> dict:
    """The request as a step's record keeps it: method, URL, status and its headers as lines
    (``authorization: Bearer [REDACTED]``: a mapping's credential keys are dropped from records
    whole, vision.trace.records.redact, and the record would not say one was sent)."""
    headers = (detail or {}).get("headers", {})
    return {"method": entry.get("method"), "url": entry.get("url"), "status": entry.get("status"),
            "headers": [f"{name}: {shown_header(name, value)}" for name, value in headers.items()]}


def body_values(body: str | None, content_type: str) -> Any:
    """A request body as data: JSON, or a form's fields (application/x-www-form-urlencoded), else None."""
    if not body:
        return None
    if "x-www-form-urlencoded" in content_type:
        return dict(parse_qsl(body, keep_blank_values=True))
    try:
        return json.loads(body)
    except ValueError:
        return None


def at_path(data: Any, path: str) -> Any:
    """The value at a dotted path (``user.roles.0``) in JSON data, or _MISSING."""
    for part in path.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return _MISSING
    return data
