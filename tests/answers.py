"""Checks on the API's answers the REST tests share: a success's body, an error's code, and
polling for what must come true (the machine is noisy: no timed asserts)."""

from __future__ import annotations

import time


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
