"""The `glassdesk` command: `up` (server + default session), `act` (one instruction), `mcp` (stdio), `qa`
(a suite of QA verbs for CI: vision.cli.qa)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

# soft_wrap: printed URLs must stay whole when stderr is a pipe (make run | tee, docker logs).
console = Console(stderr=True, soft_wrap=True)


def _up(args: argparse.Namespace) -> int:
    import uvicorn

    from vision.app.memory import limit_arenas

    limit_arenas()  # first, before the server's threads take arenas of their own (vision.app.memory)

    from desktop.errors import SessionUnavailable
    from desktop.session.manager import SessionManager
    from desktop.session.ownership import own_desktops
    from vision.app.service import Glassdesk
    from vision.http.app import Settings, create_app
    from vision.http.auth import check_bind, forwarded_problems, origin_problems, uvicorn_proxy_options

    settings = Settings(host=args.host, port=args.port, max_sessions=args.max_sessions, idle_ttl_s=args.ttl * 60,
                        launch_allow=_programs(args.launch_allow), allow_local_urls=args.allow_local_urls,
                        public_host=args.public_host, allow_evaluate=args.allow_evaluate,
                        browser_accessibility=args.browser_accessibility,
                        single_session=args.single_session, backend=args.backend, warm=args.warm,
                        mcp_tools=args.mcp_tools, forwarded_allow_ips=args.forwarded_allow_ips or None,
                        allowed_origins=tuple(o.strip() for o in (args.allowed_origins or "").split(",") if o.strip()),
                        session_memory_mb=args.session_memory, session_cpus=args.session_cpus)
    problems = (warm_problems(settings) + forwarded_problems(settings.forwarded_allow_ips)
                + origin_problems(list(settings.allowed_origins)))
    if problems:
        for problem in problems:
            console.print(f"[red]{problem}[/red]")
        return 2
    check_bind(settings.host, settings.token)
    if settings.backend != "local":
        return _up_remote(args, settings)
    # The desktops die with this process, even a kill -9 (a reaper), and what a dead predecessor
    # left is ended now (desktop.session.ownership.own_desktops).
    ownership = own_desktops()
    logging.getLogger("glassdesk.cli").info("session files in %s", ownership.root)
    if ownership.reaped.pids or ownership.reaped.roots:
        console.print(f"[yellow]ended {len(ownership.reaped.pids)} process(es) and removed "
                      f"{len(ownership.reaped.roots)} session folder(s) left by a glassdesk that was killed[/yellow]")
    manager = SessionManager(root=ownership.root, max_sessions=settings.max_sessions, idle_ttl_s=settings.idle_ttl_s,
                             stack_config=settings.stack_config())
    for problem in manager.isolation["degraded"]:  # also logged, and in /healthz (docs/isolation.md)
        console.print(f"[yellow]session isolation degraded: {problem}[/yellow]")
    try:
        glassdesk = Glassdesk.from_settings(manager, settings)
        if glassdesk.interrupted:
            console.print(f"[yellow]{len(glassdesk.interrupted)} run(s) and recording(s) left unfinished by a "
                          "server that stopped are now marked interrupted[/yellow]")
        app = create_app(manager, settings, glassdesk)  # also points the live-view links at this server
        # A session server's control plane names the ports its browser must not reach (its own).
        manager.protect(*(int(p) for p in os.environ.get("GLASSDESK_PROTECTED_PORTS", "").split(",") if p))
        with console.status("starting the default desktop session…"):
            try:
                session = glassdesk.desktops.create("default", pinned=True)
            except SessionUnavailable as exc:
                console.print(f"[red]{exc.message}[/red]")
                return 1
            except KeyboardInterrupt:
                return 130
        glassdesk.desktops.single_session = settings.single_session
        manager.keep_warm(settings.warm)  # after the default session: its start has the cores first
        base = settings.public_url
        watch, control = (glassdesk.desktops.live_view("default", control=c) for c in (False, True))
        console.print(f"[bold]glassdesk[/bold] session [cyan]default[/cyan] on display {session.display}")
        console.print(f"  live view (watch):    {watch.novnc_url}")
        console.print(f"  live view (control):  {control.novnc_url}")
        console.print(f"  [dim]the watch link opens new connections until {watch.expires_at:%H:%M} UTC, the control "
                      f"link until {control.expires_at:%H:%M} UTC; the console and GET /api/v1/sessions/default hand "
                      "out fresh ones[/dim]")
        console.print(f"  operator console:     {base}/")
        console.print(f"  API:                  {base}/api/v1  (docs: /docs)")
        console.print(f"  MCP (streamable HTTP): {base}/mcp")
        if settings.warm:
            console.print(f"  warm pool:            {settings.warm} session(s) started ahead, one at a time "
                          "(they count toward --max-sessions)")
        if settings.token:
            console.print("  auth:                 Authorization: Bearer $GLASSDESK_TOKEN")
        if settings.host in ("0.0.0.0", "::") and not settings.public_host:
            console.print("  [yellow]note:[/yellow] only loopback names are answered; give the name other machines use "
                          "with --public-host (requests with any other Host are refused)")
        console.print("  Ctrl-C stops everything.")
        uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level,
                    **uvicorn_proxy_options(settings))
    finally:
        manager.close()
        ownership.close()
    return 0


def warm_problems(settings) -> list[str]:
    """Every problem of ``--warm`` under these settings, at once (pure): its size against the
    limit, and where no pool is kept. Every backend keeps one (desktop.session.pool)."""
    from desktop.session.manager import check_warm

    problems = check_warm(settings.warm, settings.max_sessions)
    if settings.warm > 0 and settings.single_session:
        problems.append("--warm: a session server (--single-session) has its one session and no other to keep warm")
    return problems


def _up_remote(args: argparse.Namespace, settings) -> int:
    """`glassdesk up --backend docker|kubernetes`: the control plane alone (API, MCP, console, loop,
    traces, QA); each session, the default one included, a container or pod of its own."""
    import uvicorn

    from desktop.errors import GlassdeskError
    from desktop.remote.backends import create_backend
    from desktop.remote.backends.manager import BackendSessions
    from vision.app.service import Glassdesk
    from vision.http.app import create_app
    from vision.http.auth import uvicorn_proxy_options

    fences = [*(["--launch-allow", args.launch_allow] if args.launch_allow else []),
              *(["--allow-local-urls"] if args.allow_local_urls else []),
              *(["--allow-evaluate"] if args.allow_evaluate else []),
              *(["--browser-accessibility"] if args.browser_accessibility else [])]
    protected = {settings.port}
    try:
        backend = create_backend(settings.backend, extra_args=tuple(fences), protected_ports=protected)
    except GlassdeskError as exc:
        console.print(f"[red]{exc.message}[/red]")
        return 2
    manager = BackendSessions(backend, max_sessions=settings.max_sessions, idle_ttl_s=settings.idle_ttl_s,
                              memory_mb=args.session_memory, cpus=args.session_cpus)
    if manager.orphans_removed:
        console.print(f"[yellow]removed {len(manager.orphans_removed)} session(s) "
                      "a stopped control plane left[/yellow]")
    try:
        glassdesk = Glassdesk.from_settings(manager, settings)
        app = create_app(manager, settings, glassdesk)
        with console.status(f"starting the default session on the {settings.backend} backend…"):
            try:
                info = glassdesk.desktops.create("default", pinned=True)
            except GlassdeskError as exc:
                console.print(f"[red]{exc.message}[/red]")
                return 1
        manager.keep_warm(settings.warm)  # after the default session: its start has the cores first
        base = settings.public_url
        console.print(f"[bold]glassdesk[/bold] control plane; session [cyan]default[/cyan] in {info.display}")
        console.print(f"  operator console:     {base}/")
        console.print(f"  API:                  {base}/api/v1  (docs: /docs)")
        console.print(f"  MCP (streamable HTTP): {base}/mcp")
        if settings.warm:
            console.print(f"  warm pool:            {settings.warm} {settings.backend} session server(s) started "
                          "ahead, one at a time (they count toward --max-sessions)")
        uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level,
                    **uvicorn_proxy_options(settings))
    finally:
        manager.close()
    return 0


def _act(args: argparse.Namespace) -> int:
    """Run an instruction on a running server's session, printing a line per step."""
    import json

    import httpx2

    from vision.settings import default_server

    token = os.environ.get("GLASSDESK_TOKEN")
    headers = {"accept": "text/event-stream", **({"authorization": f"Bearer {token}"} if token else {})}
    body = {"instruction": args.instruction, "max_steps": args.max_steps}
    if args.model:
        body["model"] = args.model
    server = args.server or default_server(os.environ)
    url = f"{server.rstrip('/')}/api/v1/sessions/{args.session}/vision/act"
    result = None
    try:
        with httpx2.Client(timeout=httpx2.Timeout(30, read=None)) as client, \
                client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                error = json.loads(response.read() or b"{}").get("error", {})
                console.print(f"[red]{escape(str(error.get('code', response.status_code)))}:[/red] "
                              f"{escape(str(error.get('message', '')))}")
                return 2
            event = None
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    if event == "step":
                        _print_step(data, args.max_steps)
                    elif event == "result":
                        result = data
                    elif event == "error":
                        error = data["error"]
                        console.print(f"[red]{escape(error['code'])}:[/red] {escape(error['message'])}")
                        return 2
    except httpx2.ConnectError:
        console.print(f"[red]no glassdesk server at {server}[/red]; start one with `glassdesk up` "
                      "(or pass --server, or set GLASSDESK_URL or GLASSDESK_PORT)")
        return 2
    except httpx2.TransportError:  # the connection broke mid-run: the server went away
        result = None
    if result is None:
        console.print("[red]the server closed the stream before the result[/red]; if it stopped, the run's "
                      "trace is marked interrupted when it starts again")
        return 2
    colour = "green" if result["status"] == "done" else \
        "yellow" if result["status"] in ("running", "done_after_heal") else "red"
    console.print(f"[bold {colour}]{result['status']}[/bold {colour}] after {len(result['steps'])} steps, "
                  f"{result['usage']['input_tokens'] + result['usage']['output_tokens']} tokens")
    if result.get("answer"):
        console.print(f"answer: {escape(result['answer'])}")
    if result.get("error"):
        console.print(escape(f"error: {result['error']['code']}: {result['error']['message']}"))
    console.print(escape(f"report: {server.rstrip('/')}{result['report_url']}"))
    if result.get("report_path"):
        console.print(escape(f"        {result['report_path']}"))
    return 0 if result["status"] == "done" else 1


def _export(args: argparse.Namespace) -> int:
    """``glassdesk export RUN_ID``: the run as a test, on stdout or in --output. A trace id or a QA
    run's id, read from --data-dir (no server) or asked of the server. Exit 2 when the run is not
    there or cannot be exported as asked."""
    from desktop.errors import GlassdeskError

    try:
        text = _export_local(args) if args.data_dir else _export_remote(args)
    except GlassdeskError as exc:
        console.print(f"[red]{exc.code}:[/red] {escape(exc.message)}")
        return 2
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        console.print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _export_local(args: argparse.Namespace) -> str:
    from vision.errors import QaRunNotFoundError, TraceNotFoundError
    from vision.evidence.export import check_format, export_qa_run, export_trace
    from vision.evidence.qa_runs import QaRunStore
    from vision.trace.records import InvalidTraceId, TraceNotFound
    from vision.trace.store import TraceStore

    check_format(args.format)
    store = TraceStore(args.data_dir)
    try:
        return export_trace(store.load(args.run_id), args.format)
    except (TraceNotFound, InvalidTraceId):
        pass
    runs = QaRunStore(args.data_dir)
    try:
        found = runs.run_dir(args.run_id).is_dir()
    except ValueError:  # not even the shape of a run id
        found = False
    if not found:
        raise TraceNotFoundError(f"no trace and no QA run {args.run_id!r} in {args.data_dir}")
    try:
        return export_qa_run(runs.records_with_templates(args.run_id), args.format)
    except LookupError as exc:
        raise QaRunNotFoundError(str(exc)) from None


def _export_remote(args: argparse.Namespace) -> str:
    import httpx2

    from desktop.errors import GlassdeskError
    from vision.settings import default_server

    token = os.environ.get("GLASSDESK_TOKEN")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    server = (args.server or default_server(os.environ)).rstrip("/")
    try:
        with httpx2.Client(timeout=30, headers=headers) as client:
            answer = client.get(f"{server}/api/v1/traces/{args.run_id}/export", params={"format": args.format})
            if answer.status_code == 404:  # not a trace: a QA run?
                answer = client.get(f"{server}/api/v1/qa/runs/{args.run_id}/export", params={"format": args.format})
    except httpx2.TransportError as exc:
        error = GlassdeskError(f"no glassdesk server at {server} ({exc}); start one with `glassdesk up`, pass "
                               "--server, or read a data directory with --data-dir")
        error.code = "no_server"
        raise error from None
    if answer.status_code != 200:
        body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
        error = GlassdeskError(body.get("error", {}).get("message") or answer.text[:300])
        error.code = body.get("error", {}).get("code") or str(answer.status_code)
        raise error
    return answer.text


def _print_step(step: dict, max_steps: int) -> None:
    from vision.evidence.report import describe_action

    actions = escape(", ".join(describe_action(a) for a in step["actions"]) or "no action")
    error = f"  [red]{escape(step['error']['code'])}[/red]" if step.get("error") else ""
    console.print(f"step {step['index']}/{max_steps}  {actions}  "
                  f"[dim]model {step['model_ms']} ms · exec {step['exec_ms']} ms · "
                  f"settle {step['settle_ms']} ms[/dim]{error}")
    if step.get("text"):
        console.print(f"  [dim]{escape(step['text'][:200])}[/dim]")


def _mcp(args: argparse.Namespace) -> int:
    from vision.cli.mcp import run_stdio, stderr_logging

    stderr_logging(getattr(logging, args.log_level.upper(), logging.INFO))  # stdout is the protocol
    return run_stdio(args.session, max_sessions=args.max_sessions, public_host=args.public_host,
                     data_dir=args.data_dir, launch_allow=_programs(args.launch_allow),
                     allow_local_urls=args.allow_local_urls, allow_evaluate=args.allow_evaluate,
                     browser_accessibility=args.browser_accessibility, tools=args.tools)


def _tool_profile(spec: str) -> str:
    """An MCP tool profile, checked when the command line is read (a bad one is a usage error, exit 2)."""
    from desktop.errors import InvalidRequest
    from vision.mcp.profiles import parse_profile

    try:
        parse_profile(spec)
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return spec


TOOLS_HELP = ("the MCP tools listed: core (screenshot, click, type, key, scroll, drag, zoom, open URL, vision_act, "
              "page_state, live_view_url: about 4k tokens), desktop, page or qa (each core plus its group), all "
              "(the default); join several with commas, e.g. page,qa")


def _programs(spec: str | None) -> frozenset[str] | None:
    return frozenset(p.strip() for p in spec.split(",") if p.strip()) if spec else None


def _add_fences(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--launch-allow", metavar="PROG,PROG",
                        help="programs desktop launch may start besides its default list (docs/desktop-api.md)")
    parser.add_argument("--allow-local-urls", action="store_true",
                        help="let the browser open file:// and chrome:// pages (refused by default)")
    parser.add_argument("--allow-evaluate", action="store_true",
                        help="let page evaluate run JavaScript in the session's browser (refused by default)")
    parser.add_argument("--browser-accessibility", action="store_true",
                        help="put Chromium's own controls (toolbar, address bar, tabs, dialogs) in the desktop tree; "
                             "slows heavy pages (docs/desktop-tree.md)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glassdesk", description="A visible Linux desktop for computer-use agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start the API server and the default desktop session")
    up.add_argument("--host", default=os.environ.get("GLASSDESK_HOST", "127.0.0.1"))
    up.add_argument("--port", type=int, default=int(os.environ.get("GLASSDESK_PORT", "8080")))
    up.add_argument("--public-host", default=os.environ.get("GLASSDESK_PUBLIC_HOST"),
                    help="the host name clients use for this server: put in the URLs printed and returned, and "
                         "accepted in Host (default: the bind host; 127.0.0.1 when bound to 0.0.0.0)")
    up.add_argument("--max-sessions", type=int, default=10)
    up.add_argument("--ttl", type=float, default=30, help="minutes an idle session lives (default 30)")
    # A string default: argparse converts it with ``type``, so a bad GLASSDESK_WARM is a usage error
    # of `up` (exit 2), not a crash of every command.
    up.add_argument("--warm", type=int, default=os.environ.get("GLASSDESK_WARM", "0"), metavar="N",
                    help="keep N sessions started ahead: a create claims one in milliseconds instead of starting "
                         "one in seconds, and the pool refills behind it, one start at a time. They count toward "
                         "--max-sessions (each costs an idle session's memory); on every backend (default 0)")
    up.add_argument("--forwarded-allow-ips", default=os.environ.get("GLASSDESK_FORWARDED_ALLOW_IPS"),
                    metavar="IP,NET",
                    help="the reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed (addresses "
                         "or networks joined by commas, or *); unset, the default, believes none: a client is the "
                         "address it connects from")
    up.add_argument("--allowed-origins", default=os.environ.get("GLASSDESK_ALLOWED_ORIGINS"),
                    metavar="ORIGIN,ORIGIN",
                    help="web origins besides the server's own whose pages may call the API and open the live view "
                         "(e.g. https://tools.example.com); default: none")
    up.add_argument("--log-level", default="info")
    up.add_argument("--backend", choices=("local", "docker", "kubernetes", "process"),
                    default=os.environ.get("GLASSDESK_BACKEND", "local"),
                    help="where sessions run: local (processes of this server; the default), docker (a container "
                         "each), kubernetes (a pod each), process (a local session server each, for development)")
    up.add_argument("--single-session", action="store_true",
                    help="run as a session server: the one session `default`, for a control plane to drive")
    up.add_argument("--session-memory", type=int, default=1536, metavar="MB",
                    help="memory limit of each session (default 1536): its container or pod's, or on the local "
                         "backend its cgroup's (as root: docs/isolation.md)")
    up.add_argument("--session-cpus", type=float, default=1.0,
                    help="CPU limit of each session: its container or pod's, or its cgroup's (default 1)")
    up.add_argument("--mcp-tools", type=_tool_profile, default=os.environ.get("GLASSDESK_MCP_TOOLS", "all"),
                    metavar="PROFILE",
                    help=TOOLS_HELP.replace("the MCP tools listed", "the tools /mcp lists to a client that does not "
                                            "ask with ?tools="))
    _add_fences(up)
    up.set_defaults(func=_up)

    mcp = sub.add_parser("mcp", help="serve the MCP tools over stdio (for Claude Desktop, Claude Code, Cursor...)")
    mcp.add_argument("--session", default="default", help="the session the tools use by default; started at once")
    mcp.add_argument("--max-sessions", type=int, default=4)
    mcp.add_argument("--public-host", default=os.environ.get("GLASSDESK_PUBLIC_HOST"),
                     help="host name to put in live-view URLs (default 127.0.0.1; the viewer listens on loopback)")
    mcp.add_argument("--data-dir", default=None,
                     help="where traces go (default $GLASSDESK_DATA_DIR, else ~/.local/share/glassdesk)")
    mcp.add_argument("--log-level", default="info", help="logging on stderr")
    mcp.add_argument("--tools", type=_tool_profile, default=os.environ.get("GLASSDESK_MCP_TOOLS", "all"),
                     metavar="PROFILE", help=TOOLS_HELP)
    _add_fences(mcp)
    mcp.set_defaults(func=_mcp)

    act = sub.add_parser("act", help="run an instruction on the visible desktop of a running server")
    act.add_argument("instruction")
    act.add_argument("--model", help="provider/model (default: config, else by API key, else ocr)")
    act.add_argument("--max-steps", type=int, default=10)
    act.add_argument("--session", default="default")
    # --server names the glassdesk server (--url, its old name, stays as an alias): not a page URL.
    act.add_argument("--server", "--url", dest="server", default=None, metavar="URL",
                     help="the glassdesk server (default: $GLASSDESK_URL, else http://127.0.0.1:$GLASSDESK_PORT, "
                          "else http://127.0.0.1:8080)")
    act.set_defaults(func=_act)

    export = sub.add_parser("export", help="write a vision run (trace id) or a QA run (test run id) as a test: "
                                           "a glassdesk qa suite or a Playwright spec")
    export.add_argument("run_id", help="a trace id (GET /api/v1/traces) or a verify_user_flow run's test_run_id")
    export.add_argument("--format", "-f", default="yaml", choices=("yaml", "playwright-ts", "playwright-py"))
    export.add_argument("--output", "-o", default=None, metavar="FILE", help="write here (default: stdout)")
    export.add_argument("--data-dir", default=None,
                        help="read the run from this data directory, with no server (default: ask the server)")
    export.add_argument("--server", "--url", dest="server", default=None, metavar="URL",
                        help="the glassdesk server (default: $GLASSDESK_URL, else http://127.0.0.1:$GLASSDESK_PORT, "
                             "else http://127.0.0.1:8080)")
    export.set_defaults(func=_export)

    from vision.cli.eval import add_parser as add_eval
    from vision.cli.qa import add_parser as add_qa

    add_qa(sub)
    add_eval(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per request would bury the output
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
