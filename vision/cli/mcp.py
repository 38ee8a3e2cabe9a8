"""``glassdesk mcp``: the MCP server over stdin/stdout, with this process's own sessions.

stdout carries the protocol, so everything else (logging, rich) goes to stderr. Whatever ends the
process - stdin closing, a signal, a kill - ends every session it started: a clean exit closes
them, and a reaper process (desktop.session.ownership) ends what a killed one left.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path

import anyio

from desktop.session.ownership import own_desktops
from vision.app.service import Glassdesk
from vision.settings import Settings

log = logging.getLogger("glassdesk.mcp")


def default_stdio_data_dir() -> Path:
    """MCP clients start servers in an arbitrary working directory (often /), so traces go to
    $GLASSDESK_DATA_DIR, else the user's data directory, not ./data."""
    if os.environ.get("GLASSDESK_DATA_DIR"):
        return Path(os.environ["GLASSDESK_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "glassdesk"


def run_stdio(session: str = "default", *, max_sessions: int = 4, public_host: str | None = None,
              data_dir: str | None = None, launch_allow: frozenset[str] | None = None,
              allow_local_urls: bool = False, allow_evaluate: bool = False, browser_accessibility: bool = False,
              tools: str | None = None) -> int:
    """``glassdesk mcp``: serve over stdin/stdout with this process's own sessions.

    ``tools`` is the tool profile listed (core, desktop, page, qa, all; vision.mcp.profiles).

    stdout carries the protocol, so everything else (logging, rich) goes to stderr, and the SDK
    points fd 1 at stderr while it serves. The session is started in the background right away, so
    the client's handshake is answered at once and the first tool call waits for the desktop only
    as long as it still needs. When stdin closes, or on SIGTERM/SIGINT/SIGHUP, every session this
    process started is closed before it exits; a reaper process makes sure of it even if this
    process is killed outright, and the next server to start ends what is left if the reaper was
    killed too (``desktop.session.ownership.own_desktops``).
    """
    from desktop.session.manager import SessionManager
    from desktop.session.stack import free_port
    from vision.mcp.server import build_server

    ownership = own_desktops("glassdesk-mcp-")  # what a dead predecessor left is ended here
    root = ownership.root
    log.info("glassdesk mcp: session files in %s", root)
    # The live viewer listens on loopback only: nothing else is served, and no token guards it
    # beyond each link's own live-view token.
    settings = Settings(host="127.0.0.1", port=free_port(), token=None, max_sessions=max_sessions,
                        idle_ttl_s=24 * 3600, data_dir=str(data_dir or default_stdio_data_dir()),
                        launch_allow=launch_allow, allow_local_urls=allow_local_urls, allow_evaluate=allow_evaluate,
                        browser_accessibility=browser_accessibility, public_host=public_host)
    manager = SessionManager(root=root, max_sessions=settings.max_sessions, idle_ttl_s=settings.idle_ttl_s,
                             stack_config=settings.stack_config())
    glassdesk = Glassdesk.from_settings(manager, settings, default_session=session)
    server = build_server(glassdesk, tools)  # the tool profile (vision.mcp.profiles)
    viewer = _serve_viewer(glassdesk, settings)

    closing = threading.Lock()

    def close_all() -> None:
        if not closing.acquire(blocking=False):
            return  # already closing
        log.info("closing %d session(s)", len(manager.sessions))
        viewer.should_exit = True
        manager.abort_starting()
        try:
            glassdesk.close()
        finally:
            ownership.close()

    def on_signal(signum, _frame) -> None:
        for other in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(other, signal.SIG_IGN)  # a second signal must not cut the cleanup short
        # The stdin reader thread cannot be interrupted, so a signal does not unwind the server:
        # close what this process started, then leave at once.
        log.info("signal %s: stopping", signal.Signals(signum).name)
        close_all()
        os._exit(0)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    def warm_up() -> None:
        try:
            info = glassdesk.desktops.info(glassdesk.desktops.session(session).id)  # starts it
            log.info("session %r ready on %s; live view: %s", info.id, info.display, info.novnc_url)
        except Exception as exc:  # reported again to the first tool call that needs the session
            if not closing.locked():
                log.error("could not start session %r: %s", session, exc)

    threading.Thread(target=warm_up, name="glassdesk-mcp-warmup", daemon=True).start()
    try:
        anyio.run(server.run_stdio_async)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # finish the cleanup whatever arrives now
        close_all()
    return 0


def _serve_viewer(glassdesk: Glassdesk, settings: Settings):
    """The live viewer (vision.http.viewer) on 127.0.0.1, in a thread: `glassdesk mcp` has no API to
    serve it from, and the person the agent hands a link to needs it. Returns the uvicorn server."""
    import uvicorn

    from vision.http.app import create_viewer_app

    app = create_viewer_app(glassdesk, settings)
    # log_config=None: uvicorn keeps to the logging set up here (stderr); stdout is the protocol.
    # proxy_headers off: no proxy stands before a loopback viewer, and uvicorn's default would
    # believe any local client's X-Forwarded-For (vision.http.auth.uvicorn_proxy_options).
    server = uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None,
                                           log_level="warning", lifespan="off", proxy_headers=False))
    threading.Thread(target=server.run, name="glassdesk-viewer", daemon=True).start()
    log.info("live viewer on %s", settings.public_url)
    return server


def stderr_logging(level: int = logging.INFO) -> None:
    """Route every log record to stderr (stdout is the MCP protocol under stdio)."""
    logging.basicConfig(level=level, stream=sys.stderr, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
