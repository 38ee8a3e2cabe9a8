"""The protocol tier's shared fixtures: the real SDKs against a local fake (tests/fakes/server.py)."""

from __future__ import annotations

import pytest

from tests.fakes.server import FakeServer

# What the model SDKs read from the environment: a test sees only the keys and endpoints it sets
# itself, never those of whoever runs the suite.
PROVIDER_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
                "OPENAI_API_KEY", "OPENAI_BASE_URL",
                "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI")


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch):
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake():
    """A fresh fake API per test (test_chat_provider shares one per module, cleared per test)."""
    with FakeServer() as server:
        yield server
