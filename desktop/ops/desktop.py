"""The desktop service's operations (desktop.service.desktop.DesktopService) that the catalogue
serves. The input actions, the screenshot, sessions, windows' opening and the live view are still
written in their doors (see desktop.ops)."""

from __future__ import annotations

from desktop.models import BlockedQuery, BlockedRequest, LiveView, NetworkPolicyBody, NetworkPolicyInfo, Window
from desktop.ops.declare import Operation, Rest

SESSIONS = ("sessions",)

OPERATIONS: tuple[Operation, ...] = (
    Operation("desktop", "network_policy", None, NetworkPolicyInfo, acts=False,
              rest=Rest("GET", "/network-policy", summary="the browser's network policy", tags=SESSIONS,
                        name="get_network_policy", also=(("/page/network-policy", ("page",)),))),
    Operation(
        "desktop", "set_network_policy", NetworkPolicyBody, NetworkPolicyInfo, acts=False,
        rest=Rest("PUT", "/network-policy", summary="replace the browser's network policy", tags=SESSIONS,
                  description="Both lists are replaced; it applies at once, also to connections already open. "
                              "Whatever the lists say, the browser never reaches glassdesk's own API or any "
                              "session's live view.",
                  name="put_network_policy", also=(("/page/network-policy", ("page",)),))),
    Operation("desktop", "blocked_requests", BlockedQuery, list[BlockedRequest], acts=False,
              rest=Rest("GET", "/network-policy/blocked", summary="the requests the network policy blocked",
                        tags=SESSIONS)),
    Operation("desktop", "windows", None, list[Window], acts=False,
              rest=Rest("GET", "/desktop/windows", tags=("desktop",))),
    # A session server's own, for its control plane (no door serves them).
    Operation("desktop", "wait_ready", None, bool, acts=False),
    Operation("desktop", "live_view", None, LiveView, acts=False),
)
