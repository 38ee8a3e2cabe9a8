"""`glassdesk act --server` (alias --url), GLASSDESK_URL, then GLASSDESK_PORT: which server it asks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vision.cli import build_parser
from vision.settings import default_server

GLASSDESK = str(Path(sys.executable).parent / "glassdesk")


@pytest.mark.parametrize("environ, expected", [
    ({}, "http://127.0.0.1:8080"),
    ({"GLASSDESK_PORT": "8090"}, "http://127.0.0.1:8090"),
    ({"GLASSDESK_URL": "http://box:9000", "GLASSDESK_PORT": "8090"}, "http://box:9000"),
    ({"GLASSDESK_URL": "", "GLASSDESK_PORT": "8090"}, "http://127.0.0.1:8090"),
])
def test_default_server(environ, expected):
    assert default_server(environ) == expected


def test_server_flag_and_its_alias():
    parser = build_parser()
    assert parser.parse_args(["act", "x", "--server", "http://a:1"]).server == "http://a:1"
    assert parser.parse_args(["act", "x", "--url", "http://b:2"]).server == "http://b:2"
    assert parser.parse_args(["act", "x"]).server is None  # then the environment decides


@pytest.mark.parametrize("flags, environ, named", [
    ([], {"GLASSDESK_PORT": "9"}, "http://127.0.0.1:9"),
    ([], {"GLASSDESK_URL": "http://127.0.0.1:9/", "GLASSDESK_PORT": "1"}, "http://127.0.0.1:9/"),
    (["--server", "http://127.0.0.1:9"], {"GLASSDESK_PORT": "1"}, "http://127.0.0.1:9"),
])
def test_act_asks_the_server_it_was_told(flags, environ, named):
    """Port 9 (discard) is closed here: the error names the server that was tried."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLASSDESK_")} | environ | {"COLUMNS": "200"}
    done = subprocess.run([GLASSDESK, "act", "read the screen", *flags], capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 2 and f"no glassdesk server at {named}" in done.stdout + done.stderr, done


@pytest.mark.parametrize("flags, problems", [
    (["--warm", "-1"], ["--warm -1: the number of sessions kept started ahead is 0 or more"]),
    (["--warm", "3", "--max-sessions", "3"], ["--warm 3: warm sessions count toward --max-sessions (3), which also "
                                              "holds the default session: at most 2"]),
    (["--warm", "-2", "--max-sessions", "0"], ["--warm -2: the number of sessions kept started ahead is 0 or more",
                                               "--max-sessions 0: at least 1 (the default session)"]),
    (["--warm", "2", "--max-sessions", "2", "--backend", "docker"], ["--warm 2: warm sessions count toward "
                                                                     "--max-sessions (2)"]),
    (["--warm", "1", "--single-session"], ["--warm: a session server (--single-session) has its one session"]),
])
def test_up_refuses_a_bad_warm_pool_before_starting_anything(flags, problems, capsys, monkeypatch):
    """Every problem at once, exit 2, and nothing started: the check comes before the reaper, the
    session root and the default desktop."""
    from vision.cli import command as cli

    monkeypatch.setattr(cli, "_up_remote", lambda *a: pytest.fail("a remote control plane was started"))
    monkeypatch.setenv("COLUMNS", "400")
    assert cli.main(["up", *flags]) == 2
    said = " ".join(capsys.readouterr().err.split())
    for problem in problems:
        assert problem in said


@pytest.mark.parametrize("backend", ["process", "docker", "kubernetes"])
def test_every_backend_keeps_a_warm_pool(backend, monkeypatch):
    """--warm is no longer refused off the local backend: the remote control plane is started."""
    from vision.cli import command as cli

    started = []
    monkeypatch.setattr(cli, "_up_remote", lambda args, settings: started.append(settings.warm) or 0)
    assert cli.main(["up", "--backend", backend, "--warm", "2", "--max-sessions", "3"]) == 0
    assert started == [2]


def test_warm_pool_size_by_flag_or_environment(monkeypatch):
    assert build_parser().parse_args(["up"]).warm == 0
    assert build_parser().parse_args(["up", "--warm", "2"]).warm == 2
    monkeypatch.setenv("GLASSDESK_WARM", "3")
    assert build_parser().parse_args(["up"]).warm == 3
    assert build_parser().parse_args(["act", "x"]).server is None  # other commands never read it
    monkeypatch.setenv("GLASSDESK_WARM", "many")
    assert build_parser().parse_args(["act", "x"]).instruction == "x"
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["up"])
    assert exited.value.code == 2
