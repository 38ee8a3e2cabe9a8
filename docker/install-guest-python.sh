#!/usr/bin/env bash
# The guest Python of OSWorld's guest contract (desktop/osworld/guest.py, GUEST_PYTHON): the harness
# sends pyautogui code to `python3` on the guest, so a session's guest commands find this one first
# on their PATH. Debian's python3 (its pyatspi and Pillow with it: --system-site-packages) plus
# pyautogui from PyPI, which Debian does not package. Readable by the desktop users, written by root.
# Run by docker/install-system-deps.sh (make setup), and by docker/Dockerfile where pip has its CA.
# Idempotent.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
GUEST_PYTHON=/opt/glassdesk/guest-python
GUEST_PACKAGES=(pyautogui==0.9.54 python-xlib==0.33)
if [ -x "$GUEST_PYTHON/bin/python3" ] && "$GUEST_PYTHON/bin/python3" -m pip show -q pyautogui >/dev/null 2>&1; then
  echo "guest python: $GUEST_PYTHON present"
elif [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null; then
  $SUDO /usr/bin/python3 -m venv --system-site-packages "$GUEST_PYTHON"
  $SUDO "$GUEST_PYTHON/bin/python3" -m pip install -q --disable-pip-version-check "${GUEST_PACKAGES[@]}"
  echo "guest python: made $GUEST_PYTHON (${GUEST_PACKAGES[*]})"
else
  echo "guest python: $GUEST_PYTHON not made (needs root); OSWorld's pyautogui code cannot run on a session"
fi
