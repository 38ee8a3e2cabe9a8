"""docker/compose.yaml validates with Compose v2 (what users run; Debian's v1 rejects its top-level
`name:`), as the `docker compose` plugin that `make docker-test` installs into its DOCKER_CONFIG."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker" / "compose.yaml"


def compose(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GLASSDESK_")}
    return subprocess.run(["/usr/bin/docker", "compose", "-f", str(COMPOSE_FILE), *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def compose_v2():
    version = subprocess.run(["/usr/bin/docker", "compose", "version", "--short"], capture_output=True, text=True,
                             timeout=60)
    if version.returncode != 0 or not version.stdout.strip().lstrip("v").startswith("2."):
        pytest.fail("Compose v2 is not a plugin of /usr/bin/docker here (DOCKER_CONFIG="
                    f"{os.environ.get('DOCKER_CONFIG')}): run through `make docker-test`, which installs it "
                    f"({version.stdout.strip()} {version.stderr.strip()})", pytrace=False)
    return version.stdout.strip()


def test_compose_file_is_valid_for_compose_v2(compose_v2):
    done = compose("config", "--format", "json", env={"GLASSDESK_TOKEN": "t0ken"})
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert config["name"] == "glassdesk"
    service = config["services"]["glassdesk"]
    assert service["init"] is True
    assert "seccomp=unconfined" in service["security_opt"]
    assert service["environment"]["GLASSDESK_TOKEN"] == "t0ken"
    assert service["build"]["context"] == str(REPO)
    # The API is published on the host's loopback unless GLASSDESK_BIND says otherwise.
    assert [(p["host_ip"], p["published"], p["target"]) for p in service["ports"]] == [("127.0.0.1", "8080", 8080)]


def test_compose_refuses_to_run_without_a_token(compose_v2):
    done = compose("config")
    assert done.returncode != 0
    assert "set a token" in done.stderr
