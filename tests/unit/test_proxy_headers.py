"""X-Forwarded-For is believed only from the proxies `glassdesk up --forwarded-allow-ips` names.

uvicorn's default believes it from 127.0.0.1, so any local client could name a new address per
attempt and never meet the live view's limit on refused tokens (10 a minute per client), or use
another client's address to lock that one out. Served as `glassdesk up` serves (no X needed)."""

from __future__ import annotations

import threading
import time

import httpx2
import pytest
import uvicorn

from desktop.session.manager import SessionManager
from desktop.session.stack import free_port
from vision.http.app import Settings, create_app
from vision.http.auth import forwarded_problems, uvicorn_proxy_options


def serve(settings: Settings, root):
    """The app under ``settings``, on uvicorn with the options `glassdesk up` passes it."""
    (root / "sessions").mkdir(exist_ok=True)
    manager = SessionManager(root=root / "sessions", max_sessions=1)
    app = create_app(manager, settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=settings.port, log_level="warning",
                                           lifespan="off", **uvicorn_proxy_options(settings)))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    return server, manager


def refused_tokens(url: str, forwarded: list[str]) -> list[int]:
    """One refused live-view token per address named in X-Forwarded-For: the statuses."""
    with httpx2.Client(base_url=url, timeout=10) as client:
        return [client.get("/api/v1/sessions/nope/viewer",
                           headers={"x-live-token": "forged", "x-forwarded-for": address}).status_code
                for address in forwarded]


@pytest.mark.parametrize("allowed, believed", [(None, False), ("127.0.0.1", True), ("10.9.9.9", False)])
def test_forwarded_for_is_believed_only_from_a_named_proxy(tmp_path, allowed, believed):
    port = free_port()
    server, manager = serve(Settings(token=None, port=port, data_dir=str(tmp_path / "data"),
                                     forwarded_allow_ips=allowed), tmp_path)
    try:
        statuses = refused_tokens(f"http://127.0.0.1:{port}", [f"203.0.113.{i}" for i in range(12)])
    finally:
        server.should_exit = True
        manager.close()
    if believed:  # each attempt is another client behind the proxy: none reaches its limit
        assert set(statuses) == {404}, statuses
    else:  # one client, whatever it claims: its 11th refusal is 429
        assert statuses[:10] == [404] * 10 and statuses[10:] == [429, 429], statuses


def test_forwarded_allow_ips_is_checked_before_anything_starts(capsys, monkeypatch):
    from vision.cli import command as cli

    assert forwarded_problems("10.0.0.1, 10.1.0.0/16,::1") == [] and forwarded_problems("*") == []
    assert forwarded_problems("10.0.0.1,proxy.lan") == [
        "--forwarded-allow-ips: 'proxy.lan' is not an IP address or network (give addresses and networks joined by "
        "commas, or * alone)"]
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(cli, "_up_remote", lambda *a: pytest.fail("started"))
    assert cli.main(["up", "--forwarded-allow-ips", "10.0.0.1,proxy.lan",
                     "--allowed-origins", "tools.example.com"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "'proxy.lan' is not an IP address" in said and "'tools.example.com' is not an origin" in said
    started = []
    monkeypatch.setattr(cli, "_up_remote", lambda args, settings: started.append(settings) or 0)
    monkeypatch.setenv("GLASSDESK_FORWARDED_ALLOW_IPS", "10.0.0.1")
    assert cli.main(["up", "--backend", "process", "--allowed-origins", "https://a.example,http://b.example:81"]) == 0
    assert started[0].forwarded_allow_ips == "10.0.0.1"
    assert started[0].allowed_origins == ("https://a.example", "http://b.example:81")
    assert uvicorn_proxy_options(started[0]) == {"proxy_headers": True, "forwarded_allow_ips": "10.0.0.1"}
    assert uvicorn_proxy_options(Settings()) == {"proxy_headers": False}
