"""The `glassdesk` command: `up` (server + default session), `act` (one instruction), `mcp` (stdio)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from rich.console import Console

console = Console(stderr=True)


def _up(args: argparse.Namespace) -> int:
    import uvicorn

    from desktop.sessions import SessionManager
    from desktop.stack import StackConfig, StackError
    from vision.app import Settings, create_app
    from vision.auth import check_bind

    settings = Settings(host=args.host, port=args.port, max_sessions=args.max_sessions, idle_ttl_s=args.ttl * 60)
    check_bind(settings.host, settings.token)
    manager = SessionManager(max_sessions=settings.max_sessions, idle_ttl_s=settings.idle_ttl_s,
                             stack_config=StackConfig(listen_host=settings.host, public_host=args.public_host))
    with console.status("starting the default desktop session…"):
        try:
            session = manager.create("default", pinned=True)
        except StackError as exc:
            manager.close()
            console.print(f"[red]could not start the desktop:[/red] {exc}")
            return 1
    host = args.public_host or ("127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host)
    console.print(f"[bold]glassdesk[/bold] session [cyan]default[/cyan] on display {session.stack.display}")
    console.print(f"  live view (watch):    {session.stack.novnc_url()}")
    console.print(f"  live view (control):  {session.stack.novnc_url(control=True)}")
    console.print(f"  API:                  http://{host}:{settings.port}/api/v1  (docs: /docs)")
    if settings.token:
        console.print("  auth:                 Authorization: Bearer $GLASSDESK_TOKEN")
    console.print("  Ctrl-C stops everything.")
    app = create_app(manager, settings)
    try:
        uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level)
    finally:
        manager.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glassdesk", description="A visible Linux desktop for computer-use agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start the API server and the default desktop session")
    up.add_argument("--host", default=os.environ.get("GLASSDESK_HOST", "127.0.0.1"))
    up.add_argument("--port", type=int, default=int(os.environ.get("GLASSDESK_PORT", "8080")))
    up.add_argument("--public-host", default=os.environ.get("GLASSDESK_PUBLIC_HOST"),
                    help="host name to put in the URLs printed and returned (default: the bind host)")
    up.add_argument("--max-sessions", type=int, default=10)
    up.add_argument("--ttl", type=float, default=30, help="minutes an idle session lives (default 30)")
    up.add_argument("--log-level", default="info")
    up.set_defaults(func=_up)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
