"""The integration tier's shared fixtures: the API on a port of its own, with curl launchable on the
desktop (tests/programs.py runs it there)."""

from __future__ import annotations

import httpx2
import pytest

from desktop.session.stack import free_port
from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def netapi(manager, desk):
    """The API on its own port (told as Settings.port, as `glassdesk up` does), curl launchable; the
    shared session (``desk``) gets the default network policy back after the module."""
    from vision.http.app import Settings, create_app

    port = free_port()
    with LiveServer(create_app(manager, Settings(token=None, port=port, launch_allow=frozenset({"curl"}))),
                    port=port) as server:
        with httpx2.Client(base_url=server.url, timeout=120) as client:
            yield client, port
            client.put(f"/api/v1/sessions/{desk.id}/network-policy", json={})
