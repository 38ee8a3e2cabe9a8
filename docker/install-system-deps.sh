#!/usr/bin/env bash
# The one list of system packages glassdesk needs. Used by `make setup` on a Debian host and by
# docker/Dockerfile, so the tested path and the container path install the same things.
# Idempotent: installs only what is missing. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  # the display and the desktop
  xvfb xauth x11-utils x11-xserver-utils dbus-x11
  xfce4-session xfwm4 xfdesktop4 xfce4-panel xfce4-settings xfconf
  # the browser the agent drives
  chromium
  # input and window control
  xdotool wmctrl
  # the desktop tree (desktop/x11/atspi.py): each session's accessibility bus, read by the system's
  # Python through Debian's pyatspi
  at-spi2-core python3-pyatspi
  # the guest Python of OSWorld's guest contract (below): pyautogui imports tkinter (through MouseInfo);
  # and the desktop's default applications (/usr/share/applications/mimeinfo.cache), which its
  # /setup/open_file (xdg-open, exo-open) needs to open a file with its app
  python3-tk desktop-file-utils
  # native programs a session can launch, and the desktop tree's tests use as they ship
  mousepad galculator
  # the live view: x11vnc + the noVNC web client (served, and relayed to x11vnc, by glassdesk itself)
  x11vnc novnc
  # fonts so pages and non-Latin text render legibly
  fonts-dejavu-core fonts-noto-cjk fonts-noto-color-emoji
  # the optional video of a QA run (desktop/x11/recorder.py: x11grab to WebM/MP4); ffprobe for its tests
  ffmpeg
  # process tools the tests and the supervisor rely on
  procps psmisc
  # a network namespace per session when glassdesk runs as root (desktop/network/netns.py: ip netns;
  # nsenter and setpriv come with util-linux, which every Debian has)
  iproute2
  # Python venv support for the project itself
  python3-venv
  # the Node.js that Playwright's driver ships links against it (absent from a slim base image)
  libatomic1
)

# The browser fences every session shares (desktop/browser/chromium.py, MANAGED_POLICY): Chromium on
# Linux reads enterprise policies only from this machine-wide directory (its --policy switch is
# ignored by Debian's build), so what differs per session stays in each profile's preferences.
# Keep in step with desktop/browser/chromium.py's MANAGED_POLICY_FILE.
POLICY_SOURCE="$(dirname "${BASH_SOURCE[0]}")/chromium-policy.json"
POLICY_FILE=/etc/chromium/policies/managed/glassdesk.json

# The unprivileged accounts the desktops run as when glassdesk itself runs as root (desktop/x11/user.py):
# one per session, from a pool glassdesk-desktop-1..N, so one session's programs can neither read
# another's files nor its processes' memory. Each a system user with its own group, no login shell,
# no home of its own (each session gives it one), no sudo. N: at least the sessions a host runs at
# once plus its warm pool (`glassdesk up --max-sessions` is 10 by default); run again with a larger
# GLASSDESK_DESKTOP_USERS to grow it. Keep the names in step with desktop/x11/user.py's POOL_PREFIX.
DESKTOP_USER=glassdesk-desktop
DESKTOP_USERS="${GLASSDESK_DESKTOP_USERS:-32}"
case "$DESKTOP_USERS" in ''|*[!0-9]*) echo "GLASSDESK_DESKTOP_USERS must be a number, not '$DESKTOP_USERS'" >&2; exit 2;; esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
else
  echo "system packages: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$(id -u)" -eq 0 ]; then
  created=0
  for n in $(seq 1 "$DESKTOP_USERS"); do
    name="$DESKTOP_USER-$n"
    getent passwd "$name" >/dev/null && continue
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
      --comment "glassdesk desktop session $n" "$name"
    created=$((created + 1))
  done
  echo "desktop users: $DESKTOP_USER-1..$DESKTOP_USERS present ($created created)"
  # The single account of earlier setups, shared by every session, is no longer used once the pool
  # exists; it is left in place (files a running server may still own) and can be removed by hand:
  # userdel glassdesk-desktop
else
  # Not needed when glassdesk runs as this user: its desktop then runs as this user too.
  echo "desktop users: $DESKTOP_USER-1..$DESKTOP_USERS not created (needs root); only needed to run glassdesk" \
       "as root: sudo bash docker/install-system-deps.sh"
fi

if [ -f "$POLICY_FILE" ] && cmp -s "$POLICY_SOURCE" "$POLICY_FILE"; then
  echo "chromium policy: $POLICY_FILE present"
elif [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null; then
  $SUDO install -D -m 0644 "$POLICY_SOURCE" "$POLICY_FILE"
  echo "chromium policy: installed $POLICY_FILE"
else
  echo "chromium policy: $POLICY_FILE not installed (needs root); sessions run without it, and say so at start"
fi


# The guest Python of OSWorld's guest contract (docker/install-guest-python.sh). The image makes it
# in a later step, where pip has its CA (GLASSDESK_GUEST_PYTHON=later: docker/Dockerfile).
if [ "${GLASSDESK_GUEST_PYTHON:-}" = later ]; then
  echo "guest python: made later"
else
  bash "$(dirname "${BASH_SOURCE[0]}")/install-guest-python.sh"
fi
