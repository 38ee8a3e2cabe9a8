#!/usr/bin/env bash
# Builds glassdesk's image (docker/Dockerfile, BuildKit) into the daemon at $DOCKER_HOST, tagged
# ${1:-glassdesk:test}, from the code of the repository this script is in, or of the checkout ${2}
# (then with that checkout's docker/Dockerfile when it has the pip_ca mounts, else this one's).
# The base image must be there already (docker/test/base-image.sh).
#
# pip inside the build must verify PyPI's certificate. When the host's pip is configured with a CA
# bundle ($PIP_CERT, or `cert` in pip's config: as where a proxy re-signs TLS) it is handed to the
# build as the secret `pip_ca`, which the Dockerfile mounts only for its pip steps (in no layer).
#   GLASSDESK_PIP_CA=FILE  use this bundle instead; GLASSDESK_PIP_CA=none  pass none
#   build-image.sh --print-pip-ca  print the bundle a build would get (nothing if none), and exit
set -euo pipefail

TAG=${1:-glassdesk:test}
[ "$TAG" = --print-pip-ca ] || : "${DOCKER_HOST:?DOCKER_HOST must name the daemon (docker/test/dockerd.sh start prints it)}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
repo=$(cd "${2:-$here}" && pwd)
dockerfile="$repo/docker/Dockerfile"
grep -q 'id=pip_ca' "$dockerfile" 2>/dev/null || dockerfile="$here/docker/Dockerfile"

pip_ca() {
  if [ -n "${GLASSDESK_PIP_CA:-}" ]; then
    [ "$GLASSDESK_PIP_CA" = none ] || echo "$GLASSDESK_PIP_CA"; return
  fi
  if [ -n "${PIP_CERT:-}" ]; then echo "$PIP_CERT"; return; fi
  local py
  for py in "$repo/.venv/bin/python" python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" -m pip config list 2>/dev/null | sed -n "s/^[^=]*\.cert='\(.*\)'\$/\1/p" | head -1 && return
  done
}

# --network host: the test daemons run without a bridge (docker/test/dockerd.sh), and a RUN step
# without a network of its own could not reach the package mirrors.
args=(-f "$dockerfile" -t "$TAG" --progress=plain --network host)
ca=$(pip_ca || true)
if [ "$TAG" = --print-pip-ca ]; then echo "$ca"; exit 0; fi
if [ -n "$ca" ]; then
  [ -s "$ca" ] || { echo "build-image.sh: pip's CA bundle $ca is missing or empty" >&2; exit 1; }
  args+=(--secret "id=pip_ca,src=$ca")
  echo "image: building $TAG from $repo with pip's CA bundle $ca as the build secret pip_ca"
else
  echo "image: building $TAG from $repo"
fi

log=$(mktemp /tmp/glassdesk-build.XXXXXX.log)
start=$SECONDS
if ! DOCKER_BUILDKIT=1 /usr/bin/docker build "${args[@]}" "$repo" >"$log" 2>&1; then
  echo "image: build failed; the end of its log ($log):" >&2
  tail -40 "$log" >&2
  exit 1
fi
echo "image: $TAG built in $((SECONDS - start)) s ($(/usr/bin/docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.2f GB", $1/1e9}')), log $log"
