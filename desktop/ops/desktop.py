"""The desktop service's operations (desktop.service.desktop.DesktopService) that the catalogue
serves. The input actions, the screenshot, sessions, windows' opening and the live view are still
written in their doors (see desktop.ops)."""

from __future__ import annotations

from desktop.models import (
    BlockedQuery,
    BlockedRequest,
    DesktopTree,
    LiveView,
    NetworkPolicyBody,
    NetworkPolicyInfo,
    OSWorldCall,
    OSWorldGuest,
    TreeQuery,
    Window,
)
from desktop.ops.declare import Hints, Operation, Rest, Tool
from desktop.tree import as_text

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
    Operation(
        "desktop", "desktop_tree", TreeQuery, DesktopTree, acts=False,
        rest=Rest("GET", "/desktop/tree", summary="the visible desktop as one tree", tags=("desktop",),
                  description="Every window on the display, bottom to top, with the nodes its application gives "
                              "over the accessibility bus (role, name, states, text, value, actions, box in "
                              "display pixels, a ref per node) and, under the browser's window in front, the "
                              "page's accessibility snapshot with the page layer's refs. docs/desktop-tree.md."),
        tool=Tool("desktop_tree", "Tree of the VISIBLE desktop",
                  "Looks at the VISIBLE desktop as one tree: each window (title, program, focused, on top) with its "
                  "native controls (role, name, states, text, box in screen pixels, ref like n17) and the "
                  "browser's page (refs like e12). Use it to find a control's exact position on a native "
                  "window (a text editor, a calculator, a dialog) before clicking its box's centre; "
                  "interactive_only keeps only what can be acted on.",
                  Hints(read_only=True), lambda query, tree: tree.content or as_text(tree), summary=False,
                  group="desktop")),
    Operation(
        "desktop", "osworld_guest", None, OSWorldGuest, acts=False,
        rest=Rest("POST", "/osworld", summary="serve OSWorld's guest contract for the session", tags=SESSIONS,
                  description="Starts (or answers again) a server on a loopback port of the session's own that "
                              "speaks osworld-server's routes (/screenshot, /execute with pyautogui code, "
                              "/accessibility, /file, /setup/...), so OSWorld's harness drives this session; "
                              "what it runs runs in the session's isolation. It stops with the session. "
                              "docs/osworld.md.")),
    Operation(
        "desktop", "osworld_calls", None, list[OSWorldCall], acts=False,
        rest=Rest("GET", "/osworld/calls", summary="the calls the session's OSWorld guest answered", tags=SESSIONS,
                  description="The episode's record, oldest first: each request's route, what it ran (pyautogui code "
                              "with string literals by their length, another program by its name), status, exit "
                              "code and time. 404 while no guest is open. docs/osworld.md.")),
    Operation(
        "desktop", "close_osworld_guest", None, bool, acts=False,
        rest=Rest("DELETE", "/osworld", summary="stop the session's OSWorld guest server", tags=SESSIONS,
                  description="True when one ran. It also stops with the session.")),
    # A session server's own, for its control plane (no door serves them).
    Operation("desktop", "wait_ready", None, bool, acts=False),
    Operation("desktop", "live_view", None, LiveView, acts=False),
)
