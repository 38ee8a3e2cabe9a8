"""How the server is run: where it listens, its token, its limits and where traces go."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_PORT = 8080


def default_server(environ) -> str:
    """The server a client talks to when not told (`glassdesk act` without --server, a
    GlassdeskClient without base_url): GLASSDESK_URL, else the loopback server on GLASSDESK_PORT
    (as `glassdesk up` reads it), else on the port `glassdesk up` listens on by default."""
    if environ.get("GLASSDESK_URL"):
        return environ["GLASSDESK_URL"]
    return f"http://127.0.0.1:{environ.get('GLASSDESK_PORT') or DEFAULT_PORT}"


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = field(default_factory=lambda: os.environ.get("GLASSDESK_TOKEN") or None)
    max_sessions: int = 10
    idle_ttl_s: float = 1800
    warm: int = 0  # sessions kept started ahead, for creates to claim (desktop.session.manager.keep_warm)
    data_dir: str | None = None  # default: $GLASSDESK_DATA_DIR, else ./data
    launch_allow: frozenset[str] | None = None  # programs launch may start besides desktop.x11.windows.DEFAULT_PROGRAMS
    allow_local_urls: bool = False  # let the browser open file:// and chrome:// pages
    allow_evaluate: bool = False  # let page evaluate run JavaScript in the session's browser
    browser_accessibility: bool = False  # Chromium's own controls in the desktop tree (StackConfig says its cost)
    public_host: str | None = None  # the name clients use for this server (URLs handed out, Host allowed)
    single_session: bool = False  # a session server: one pinned session, its internal call route (desktop.http.calls)
    backend: str = "local"  # where sessions run (desktop.remote.backends): local, docker, kubernetes
    mcp_tools: str = "all"  # the tool profile /mcp lists when a client does not ask (?tools=): vision.mcp.profiles
    # The reverse proxies whose X-Forwarded-For / -Proto are believed ("10.0.0.5,10.1.0.0/16", "*"):
    # none unless set (vision.http.auth.uvicorn_proxy_options).
    forwarded_allow_ips: str | None = None
    # Origins besides the server's own whose pages may send state-changing requests and open
    # websockets ("https://tools.example.com"): vision.http.auth.origin_allowed.
    allowed_origins: tuple[str, ...] = ()
    # Each session's limits: its container or pod's, or on the local backend its cgroup's (desktop.x11.cgroup).
    session_memory_mb: int = 1536
    session_cpus: float = 1.0

    def stack_config(self):
        """How each session's desktop is made under these settings: the browser's own fences
        (desktop.browser.chromium.fence_preferences) allow what the API's do, and no more."""
        from desktop.session.stack import StackConfig  # the client imports this module: no desktop here
        from desktop.x11.cgroup import Limits

        return StackConfig(local_pages=self.allow_local_urls, page_code=self.allow_evaluate,
                           browser_accessibility=self.browser_accessibility,
                           limits=Limits(memory_mb=self.session_memory_mb, cpus=self.session_cpus))

    @property
    def public_url(self) -> str:
        """Where clients reach this server: the base of the live-view links it hands out."""
        host = self.public_host or ("127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"
