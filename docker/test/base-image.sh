#!/usr/bin/env bash
# Ensures the Dockerfile's base image, debian:bookworm-slim, is in the daemon at $DOCKER_HOST:
# kept if present, else pulled, else (no registry reachable, as on machines without one) made here
# with debootstrap from the Debian mirror apt is configured with, read at run time, and trimmed the
# way the official slim image is (docs, man pages and locales excluded; apt's docker-clean hook,
# which the Dockerfile relies on to leave no .deb in a layer). Needs root and debootstrap.
#   GLASSDESK_BASE_FROM=debootstrap  skip the pull attempt
set -euo pipefail

IMAGE=debian:bookworm-slim
SUITE=bookworm
DOCKER=/usr/bin/docker
: "${DOCKER_HOST:?DOCKER_HOST must name the daemon (docker/test/dockerd.sh start prints it)}"

if $DOCKER image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image: $IMAGE present"; exit 0
fi
if [ "${GLASSDESK_BASE_FROM:-}" != debootstrap ] && timeout 120 $DOCKER pull -q "$IMAGE" >/dev/null 2>&1; then
  echo "base image: $IMAGE pulled"; exit 0
fi
echo "base image: no registry answered; making $IMAGE with debootstrap"

# The mirrors this machine's apt uses (never a host name written in the repository).
mirror_for() {
  apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk -v s="$1" '$2 == s {print $1; exit}'
}
MIRROR=$(mirror_for "$SUITE")
SECURITY=$(mirror_for "$SUITE-security")
[ -n "$MIRROR" ] || { echo "base-image.sh: apt has no $SUITE source to debootstrap from" >&2; exit 1; }

work=$(mktemp -d /var/tmp/glassdesk-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/etc/dpkg/dpkg.cfg.d"

# What the official slim image leaves out; written before debootstrap so no package unpacks them.
cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'CFG'
# as debian:*-slim: no documentation, manuals or translations in the image (copyrights kept)
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
CFG

debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
  || { tail -30 "$work/debootstrap.log" >&2; exit 1; }

# apt configured as in the official image.
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
echo 'Acquire::GzipIndexes "true";' >"$root/etc/apt/apt.conf.d/docker-gzip-indexes"
echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
printf '#!/bin/sh\n# no service starts while building an image\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"

rm -f "$root/etc/apt/sources.list"
{
  printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$MIRROR" "$SUITE" "$SUITE"
  if [ -n "$SECURITY" ]; then
    printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$SECURITY" "$SUITE"
  fi
} >"$root/etc/apt/sources.list.d/debian.sources"

# What debootstrap leaves that an image should not carry.
find "$root/usr/share/doc" -type f ! -name copyright -delete
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* \
       "$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
       "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log "$root"/var/log/apt/* \
       "$root"/tmp/* "$root"/var/tmp/* "$root"/debootstrap
: >"$root/etc/machine-id"
: >"$root/etc/hostname"
: >"$root/etc/resolv.conf"

tar --numeric-owner -C "$root" -c . | $DOCKER import --change 'CMD ["bash"]' - "$IMAGE" >/dev/null
echo "base image: $IMAGE made ($($DOCKER image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
