#!/usr/bin/env bash
# A private Docker daemon for glassdesk's image tests: its own socket, data root and exec root, no
# bridge and no iptables rules, so it clashes with nothing else on the machine (docs/docker.md).
#
#   docker/test/dockerd.sh start DIR   start one under DIR (DIR/docker.sock), wait until it answers,
#                                      print `export DOCKER_HOST=unix://DIR/docker.sock`
#   docker/test/dockerd.sh stop DIR    stop it by its PID, unmount what it left mounted
#   docker/test/dockerd.sh host DIR    print its DOCKER_HOST
#
# GLASSDESK_DOCKER_DATA overrides the data root (default DIR/data): keep it between runs to keep the
# base image and the build cache. Debian's docker.io client is used (/usr/bin/docker): another
# client earlier on PATH may lack buildx, and BuildKit builds then fail.
set -euo pipefail

cmd=${1:?usage: dockerd.sh start|stop|host DIR}
dir=${2:?usage: dockerd.sh start|stop|host DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sock="$dir/docker.sock"
pidfile="$dir/dockerd.pid"
data=${GLASSDESK_DOCKER_DATA:-$dir/data}

running() { [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

case "$cmd" in
  host)
    echo "unix://$sock" ;;
  start)
    if running; then
      echo "dockerd already running (pid $(cat "$pidfile"))" >&2
    else
      # A unix socket path longer than 107 bytes cannot be bound: say so rather than fail obscurely.
      if [ "${#sock}" -gt 100 ]; then echo "dockerd.sh: $dir is too long a path for a socket" >&2; exit 2; fi
      mkdir -p "$data" "$dir/exec"
      # Where a system containerd runs (docker.io's service on a machine with systemd), dockerd
      # uses it instead of starting its own: its own containerd namespaces keep the two apart.
      ns="glassdesk-$(printf '%s' "$dir" | cksum | cut -d' ' -f1)"
      # setsid: its own process session, so Ctrl-C in the caller's terminal reaches only the caller,
      # whose trap stops the daemon in order.
      setsid /usr/sbin/dockerd --bridge=none --iptables=false --ip6tables=false \
        -H "unix://$sock" --data-root "$data" --exec-root "$dir/exec" --pidfile "$pidfile" \
        --containerd-namespace "$ns" --containerd-plugins-namespace "$ns-plugins" \
        >"$dir/dockerd.log" 2>&1 </dev/null &
      started=$!
      for _ in $(seq 1 300); do
        if DOCKER_HOST="unix://$sock" /usr/bin/docker info >/dev/null 2>&1; then break; fi
        if ! kill -0 "$started" 2>/dev/null; then
          echo "dockerd exited at start; its log ($dir/dockerd.log) ends with:" >&2
          tail -20 "$dir/dockerd.log" >&2; exit 1
        fi
        sleep 0.2
      done
      DOCKER_HOST="unix://$sock" /usr/bin/docker info >/dev/null 2>&1 \
        || { echo "dockerd did not answer within 60 s; see $dir/dockerd.log" >&2; exit 1; }
      echo "dockerd started (pid $(cat "$pidfile")), log $dir/dockerd.log" >&2
    fi
    echo "export DOCKER_HOST=unix://$sock" ;;
  stop)
    if running; then
      pid=$(cat "$pidfile")
      kill -TERM "$pid"
      # dockerd stops its containers (10 s grace each, in parallel) and its containerd first.
      for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      if kill -0 "$pid" 2>/dev/null; then echo "dockerd $pid still running after 60 s: killing it" >&2; kill -KILL "$pid"; fi
    fi
    # What a killed daemon can leave mounted under its exec root (netns files) and data root.
    for root in "$dir/exec" "$data"; do
      [ -d "$root" ] || continue
      awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
      done
    done
    rm -f "$pidfile" "$sock"
    echo "dockerd stopped" >&2 ;;
  *)
    echo "usage: dockerd.sh start|stop|host DIR" >&2; exit 2 ;;
esac
