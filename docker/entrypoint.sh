#!/usr/bin/env bash
# Container entry point: the API server and the default desktop session, listening on all interfaces
# of the container, which is only safe with a token (`glassdesk up` refuses without one too).
# Extra arguments go to `glassdesk up`, e.g. `docker run ... glassdesk --max-sessions 4`.
set -euo pipefail

if [ -z "${GLASSDESK_TOKEN:-}" ]; then
  echo "glassdesk: refusing to start without GLASSDESK_TOKEN: the container listens on 0.0.0.0 and" \
       "anyone who reaches it could drive the desktop. Set it, e.g. -e GLASSDESK_TOKEN=\$(openssl rand -hex 24)," \
       "and send 'Authorization: Bearer <token>' from clients." >&2
  exit 64
fi

exec glassdesk up --host 0.0.0.0 "$@"
