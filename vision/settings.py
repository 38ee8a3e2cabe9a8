"""How the server is run: where it listens, its token, its limits and where traces go."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = field(default_factory=lambda: os.environ.get("GLASSDESK_TOKEN") or None)
    max_sessions: int = 10
    idle_ttl_s: float = 1800
    data_dir: str | None = None  # default: $GLASSDESK_DATA_DIR, else ./data
    launch_allow: frozenset[str] | None = None  # the only programs launch may start (None: any but shells)
    allow_local_urls: bool = False  # let the browser open file:// and chrome:// pages
