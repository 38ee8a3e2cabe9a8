"""A Python client for the glassdesk API, blocking and async, typed with the API's own models.

    from vision.client import GlassdeskClient

    with GlassdeskClient("http://127.0.0.1:8080") as gd:
        desk = gd.session("default")
        desk.open(url="https://example.com")
        desk.key(["ctrl+l"])
        for event in desk.act_stream("Sign in as demo"):
            print(event)

Adapters for agent SDKs, imported on first use so neither SDK is needed for the client itself:
``GlassdeskComputer`` / ``SyncGlassdeskComputer`` (openai-agents) and ``AnthropicToolRunner``.
The package is ``vision.client`` because glassdesk's importable packages are ``desktop`` and
``vision`` (the distribution is named glassdesk; there is no ``glassdesk`` package to extend).
"""

from vision.client.calls import Image
from vision.client.errors import ApiError, error_class
from vision.client.routes import PageClient, QaClient, SessionClient
from vision.client.transport import AsyncGlassdeskClient, GlassdeskClient

__all__ = ["AnthropicToolRunner", "ApiError", "AsyncGlassdeskClient", "GlassdeskClient", "GlassdeskComputer", "Image",
           "PageClient", "QaClient", "SessionClient", "SyncGlassdeskComputer", "error_class"]

_LAZY = {"GlassdeskComputer": "vision.client.openai_agents", "SyncGlassdeskComputer": "vision.client.openai_agents",
         "AnthropicToolRunner": "vision.client.anthropic_tools"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vision.client' has no attribute {name!r}")
