"""OSWorld's guest contract served for one session: osworld-server's routes, with its request and
answer shapes (the harness parses them), on a loopback port of the session's own.

The harness addresses a guest as ``host:port`` with the routes at the root, so each session gets a
server of its own (``GuestServers``), opened on request (``POST /api/v1/sessions/{id}/osworld``),
closed with the session. Its port joins the server's control plane: no session's browser or
program may reach it through its proxy (desktop.network.servers), like the API's.

It has no authentication of its own, as osworld-server has none: it listens on 127.0.0.1 only.
What it runs runs in the session's isolation (desktop.osworld.guest), and an acting request is
refused while a person has taken the desktop over or a vision run drives it.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Form, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from desktop.errors import GlassdeskError, SessionNotFound
from desktop.models import OSWorldCall, OSWorldGuest
from desktop.network.relay import NamespaceRelay
from desktop.osworld.guest import (
    GUEST_PYTHON,
    MAX_OPEN_WAIT_S,
    PYTHON_TIMEOUT_S,
    Guest,
    RecordingState,
    browser_urls,
    code_summary,
    command_argv,
    command_summary,
    expand_home,
    wmctrl_argv,
)
from desktop.x11.windows import WindowError

log = logging.getLogger("glassdesk.osworld")

STARTED_TIMEOUT_S = 10.0


def _error(status: int, message: str, **more: Any) -> JSONResponse:
    return JSONResponse({"status": "error", "message": message, **more}, status_code=status)


def _acting(guest: Guest, request: Request, summary: str) -> JSONResponse | None:
    """The answer to an acting request the session refuses now (a person in control, a run), or
    None: then the request is noted as the action it is (the episode's record, the session's film)."""
    request.state.summary = summary
    try:
        guest.desktops.check_agent(guest.session_id)
    except GlassdeskError as exc:
        return _error(exc.status, str(exc))
    guest.acting(request.url.path, summary)
    return None


def _ran(request: Request, returncode: int) -> None:
    request.state.returncode = returncode


def _command(body: dict) -> tuple[Any, bool]:
    shell = bool(body.get("shell", False))
    return body.get("command", "" if shell else []), shell


def guest_app(guest: Guest) -> FastAPI:
    """The contract's routes for one session."""
    app = FastAPI(title=f"OSWorld guest of session {guest.session_id}", docs_url=None, redoc_url=None,
                  openapi_url=None)

    @app.exception_handler(SessionNotFound)
    def _gone(_request, exc: SessionNotFound):
        return _error(404, str(exc))

    @app.exception_handler(GlassdeskError)
    def _refused(_request, exc: GlassdeskError):
        return _error(exc.status, str(exc))

    @app.middleware("http")
    async def record(request: Request, call_next):
        """Every call in the episode's record, answered or not (GET .../osworld/calls)."""
        at, started = datetime.now(UTC), time.monotonic()
        response = await call_next(request)
        guest.record(OSWorldCall(at=at, route=request.url.path, summary=getattr(request.state, "summary", ""),
                                 status=response.status_code, returncode=getattr(request.state, "returncode", None),
                                 ms=round((time.monotonic() - started) * 1000)))
        return response

    for routes in (_looking, _files, _commands, _running, _setting_up, _transferring, _opening, _filming):
        routes(app, guest)
    return app


def _looking(app: FastAPI, guest: Guest) -> None:
    desktops, sid = guest.desktops, guest.session_id

    @app.get("/screenshot")
    def screenshot():
        # With the pointer in, as osworld-server's (and the screenshots OSWorld's agents learnt on).
        return Response(desktops.screenshot(sid, pointer=True).png, media_type="image/png")

    @app.get("/accessibility")
    def accessibility():
        return {"AT": desktops.desktop_tree(sid, format="xml").content}

    @app.get("/terminal")
    def terminal():
        # osworld-server reads a focused GNOME Terminal's text; this desktop has none to read.
        return {"output": None, "status": "success"}

    @app.get("/platform")
    def platform():
        return PlainTextResponse("Linux")

    @app.get("/cursor_position")
    def cursor_position():
        x, y = desktops.cursor(sid)
        return [x, y]

    @app.post("/screen_size")
    def screen_size():
        return {"width": SCREEN_WIDTH, "height": SCREEN_HEIGHT}

    @app.post("/window_size")
    def window_size(app_class_name: str = Form(...)):
        wanted = app_class_name.lower()
        for window in reversed(guest.windows()):
            if wanted in window.wm_class.lower():
                return {"width": window.width, "height": window.height}
        return _error(404, f"no window of class {app_class_name!r}")

    @app.post("/desktop_path")
    def desktop_path():
        return {"desktop_path": f"{guest.home}/Desktop"}

    @app.post("/wallpaper")
    def wallpaper():
        return _error(404, "Wallpaper file not found: this desktop's background is a colour, not a file")


def _files(app: FastAPI, guest: Guest) -> None:
    @app.post("/list_directory")
    async def list_directory(request: Request):
        body = await request.json()
        if "path" not in body:
            return JSONResponse({"error": "Missing 'path' parameter"}, status_code=400)
        tree = await run_in_threadpool(guest.list_directory, str(body["path"]))
        if tree is None:
            return JSONResponse({"error": "The provided path is not a directory"}, status_code=400)
        return {"directory_tree": tree}

    @app.post("/file")
    def file(request: Request, file_path: str | None = Form(None)):
        request.state.summary = file_path or ""
        if not file_path:
            return JSONResponse({"error": "file_path is required"}, status_code=400)
        ran = guest.read_file(file_path)
        if ran.returncode != 0:
            why = ran.text("stderr").strip()
            if "No such file" in why:
                return JSONResponse({"error": "File not found"}, status_code=404)
            return JSONResponse({"error": f"Failed to serve file: {why}"}, status_code=500)
        return Response(ran.stdout, media_type="application/octet-stream",
                        headers={"Content-Disposition": f'attachment; filename="{Path(file_path).name}"'})


async def _run_command(guest: Guest, request: Request, body: dict) -> dict | JSONResponse:
    """A request's command run in the session (120 s at most, as there): osworld-server's answer
    fields, or the answer that refuses it."""
    command, shell = _command(body)
    try:
        argv = command_argv(command, shell, guest.home)
    except ValueError as exc:  # a string shlex cannot split
        return _error(400, str(exc))
    if (refused := _acting(guest, request, command_summary(argv))) is not None:
        return refused
    try:
        ran = await run_in_threadpool(guest.run, argv)
    except (subprocess.TimeoutExpired, OSError) as exc:
        return _error(500, str(exc))
    _ran(request, ran.returncode)
    return {"output": ran.text("stdout"), "error": ran.text("stderr"), "returncode": ran.returncode}


def _commands(app: FastAPI, guest: Guest) -> None:
    @app.post("/execute")
    @app.post("/setup/execute")
    async def execute(request: Request):
        ran = await _run_command(guest, request, await request.json())
        return ran if isinstance(ran, JSONResponse) else {"status": "success", **ran}

    @app.post("/execute_with_verification")
    @app.post("/setup/execute_with_verification")
    async def execute_with_verification(request: Request):
        body = await request.json()
        ran = await _run_command(guest, request, body)
        verification = body.get("verification") or {}
        if isinstance(ran, JSONResponse) or not verification:
            return ran if isinstance(ran, JSONResponse) else {"status": "success", **ran}
        wait_s = min(float(body.get("max_wait_time", 10)), MAX_OPEN_WAIT_S)
        waited = await run_in_threadpool(_verified, guest, verification, wait_s,
                                         max(0.1, float(body.get("check_interval", 1))))
        if waited is None:
            return JSONResponse({"status": "verification_failed", **ran, "verification": "failed",
                                 "wait_time": wait_s}, status_code=500)
        return {"status": "success", **ran, "verification": "passed", "wait_time": waited}


def _running(app: FastAPI, guest: Guest) -> None:  # scripts
    @app.post("/run_python")
    async def run_python(request: Request):
        code = (await request.json()).get("code")
        if not code:
            return _error(400, "Code not supplied!")
        if (refused := _acting(guest, request, code_summary(str(code)))) is not None:
            return refused
        try:
            # Read from stdin, not a file: nothing of the code is left on the desktop.
            ran = await run_in_threadpool(guest.run, ["python3", "-"], data=code.encode(), timeout=PYTHON_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return _error(500, "Execution timeout: Code took too long to execute", error="TimeoutExpired",
                          need_more=False, output=None)
        _ran(request, ran.returncode)
        out, err = ran.text("stdout"), ran.text("stderr")
        if ran.returncode != 0 and not err:
            err = f"Process exited with code {ran.returncode}"
        return {"status": "success" if ran.returncode == 0 else "error",
                "message": "\n".join(part for part in (out, err) if part), "need_more": False,
                "output": out, "error": err, "return_code": ran.returncode}

    @app.post("/run_bash_script")
    async def run_bash_script(request: Request):
        body = await request.json()
        script, timeout = body.get("script"), body.get("timeout", 100)
        working_dir = body.get("working_dir")
        if not script:
            return JSONResponse({"status": "error", "output": "Script not supplied!", "error": "", "returncode": -1},
                                status_code=400)
        if (refused := _acting(guest, request, command_summary(["bash", "-c", str(script)]))) is not None:
            return refused
        cwd = expand_home(str(working_dir), guest.home) if working_dir else None
        try:
            ran = await run_in_threadpool(guest.run, ["/bin/bash", "-c", script], cwd=cwd, timeout=float(timeout),
                                   merge_stderr=True)
        except subprocess.TimeoutExpired:
            return JSONResponse({"status": "error", "output": f"Script execution timed out after {timeout} seconds",
                                 "error": "", "returncode": -1}, status_code=500)
        _ran(request, ran.returncode)
        return {"status": "success" if ran.returncode == 0 else "error", "output": ran.text("stdout"), "error": "",
                "returncode": ran.returncode}


def _setting_up(app: FastAPI, guest: Guest) -> None:  # a task's programs
    @app.post("/setup/launch")
    async def launch(request: Request):
        command, shell = _command(await request.json())
        try:
            argv = command_argv(command, shell, guest.home)
        except ValueError as exc:
            return _error(400, str(exc))
        urls = browser_urls(argv)
        if (refused := _acting(guest, request, " ".join([Path(argv[0]).name, *urls]) if urls is not None
                               else command_summary(argv))) is not None:
            return refused
        if urls is not None:  # the session's own Chromium, not a second browser
            for url in urls:
                await run_in_threadpool(guest.open_url, url)
            return PlainTextResponse(f"{' '.join(argv)} launched successfully (in the session's Chromium)")
        try:
            await run_in_threadpool(guest.launch, argv)
        except WindowError as exc:
            return _error(500, str(exc))
        return PlainTextResponse(f"{command if shell else ' '.join(argv)} launched successfully")


def _transferring(app: FastAPI, guest: Guest) -> None:  # a task's files, in and out
    @app.post("/setup/upload")
    async def upload(file_path: str | None = Form(None), file_data: UploadFile | None = None):
        if not file_path or file_data is None:
            return JSONResponse({"error": "file_path and file_data are required"}, status_code=400)
        data = await file_data.read()
        ran = await run_in_threadpool(guest.write_file, file_path, data)
        if ran.returncode != 0:
            return JSONResponse({"error": f"Failed to upload file: {ran.text('stderr').strip()}"}, status_code=500)
        return PlainTextResponse(f"File Uploaded: {len(data)} bytes")

    @app.post("/setup/download_file")
    async def download_file(request: Request):
        body = await request.json()
        url, path = body.get("url"), body.get("path")
        if not url or not path:
            return PlainTextResponse("Path or URL not supplied!", status_code=400)
        ran = await run_in_threadpool(guest.download, str(url), str(path))
        if ran.returncode != 0:
            return PlainTextResponse(f"Failed to download {url}: {ran.text('stderr').strip()}", status_code=500)
        return PlainTextResponse(f"File downloaded successfully: {ran.text('stdout').strip()} bytes")


def _opening(app: FastAPI, guest: Guest) -> None:  # files and windows of a task's config
    @app.post("/setup/open_file")
    async def open_file(request: Request):
        body = await request.json()
        path = body.get("path")
        if not path:
            return PlainTextResponse("Path not supplied!", status_code=400)
        if (refused := _acting(guest, request, str(path))) is not None:
            return refused
        wait_s = min(float(body.get("timeout_seconds", MAX_OPEN_WAIT_S)), MAX_OPEN_WAIT_S)
        target = expand_home(str(path), guest.home)
        name = Path(target).name
        titles = [body["window_name"]] if body.get("window_name") else [name, Path(name).stem]
        try:
            await run_in_threadpool(guest.launch, ["xdg-open", target])
        except WindowError as exc:
            return PlainTextResponse(f"Failed to open {path}. Error: {exc}", status_code=500)
        found = await run_in_threadpool(_wait_for_window, guest, titles, wait_s)
        if not found:
            return PlainTextResponse(f"Failed to find window for {titles} within {wait_s:g} seconds.",
                                     status_code=500)
        return PlainTextResponse("File opened and window activated successfully")

    @app.post("/setup/activate_window")
    @app.post("/setup/close_window")
    async def window(request: Request):
        body = await request.json()
        if not body.get("window_name"):
            return PlainTextResponse("window_name required", status_code=400)
        if (refused := _acting(guest, request, str(body["window_name"]))) is not None:
            return refused
        closing = request.url.path.endswith("close_window")
        ran = await run_in_threadpool(guest.run, wmctrl_argv("c" if closing else "a", str(body["window_name"]),
                                                             strict=bool(body.get("strict")),
                                                             by_class=bool(body.get("by_class"))), timeout=10)
        _ran(request, ran.returncode)
        if ran.returncode != 0:  # wmctrl matched no window: said, where osworld-server answers success anyway
            return PlainTextResponse(f"Window {body['window_name']} not found", status_code=404)
        return PlainTextResponse("Window closed successfully." if closing else "Window activated successfully")

    @app.post("/setup/change_wallpaper")
    def change_wallpaper():
        return PlainTextResponse("Failed to change wallpaper. Error: not supported on glassdesk's desktop",
                                 status_code=501)


def _filming(app: FastAPI, guest: Guest) -> None:
    @app.post("/start_recording")
    async def start_recording():
        try:
            await run_in_threadpool(guest.start_recording)
        except RecordingState as exc:
            return _error(400, str(exc))
        return {"status": "success", "message": "Started recording successfully."}

    @app.post("/end_recording")
    async def end_recording():
        try:
            path = await run_in_threadpool(guest.end_recording)
        except RecordingState as exc:
            return _error(400, str(exc))
        return FileResponse(path, media_type="video/mp4", filename="recording.mp4")


def _verified(guest: Guest, verification: dict, wait_s: float, interval_s: float) -> float | None:
    """Seconds until the verification held (osworld-server's: a window whose title contains
    ``window_exists``, any case; ``command_success``, a shell command that exits 0, run in the
    session like any command), or None when it did not within ``wait_s``."""
    started = time.monotonic()
    while True:
        held = True
        if "window_exists" in verification:
            wanted = str(verification["window_exists"]).lower()
            held = any(wanted in window.title.lower() for window in guest.windows())
        if held and "command_success" in verification:
            try:
                held = guest.run(["/bin/sh", "-c", str(verification["command_success"])], timeout=5).returncode == 0
            except subprocess.TimeoutExpired:
                held = False
        if held:
            return round(time.monotonic() - started, 3)
        if time.monotonic() - started >= wait_s:
            return None
        time.sleep(interval_s)


def _wait_for_window(guest: Guest, titles: list[str], wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        for window in guest.windows():
            if any(title and title in window.title for title in titles):
                guest.session.windows.focus(window.id)
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


# ------------------------------------------------------------------------------------- the servers


@dataclass
class _Served:
    guest: Guest
    server: Any  # uvicorn.Server, imported on first use
    port: int
    thread: threading.Thread
    devtools: NamespaceRelay | None = None  # the browser's DevTools, for the harness's Chrome getters


class GuestServers:
    """The sessions' guest servers of one glassdesk server: at most one per session."""

    def __init__(self, desktops, recordings: Path, host: str = "127.0.0.1"):
        self.desktops = desktops
        self.recordings = recordings
        self.host = host
        self._served: dict[str, _Served] = {}
        self._lock = threading.Lock()
        desktops.on_change(self._changed)

    def open(self, session_id: str) -> OSWorldGuest:
        """The session's guest server, started if it is not yet (idempotent)."""
        import uvicorn

        from desktop.session.stack import free_port

        session = self.desktops.session(session_id)
        session.require_ready()
        with self._lock:
            served = self._served.get(session.id)
            if served is None:
                # A directory per contract opened: a reverted guest (a new session of the same name)
                # starts a record of its own.
                guest = Guest(self.desktops, session.id,
                              self.recordings / session.id / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f"))
                devtools = self._devtools(session)  # first: what fails here leaves no server behind
                port = free_port(self.host)
                # Protected before it listens: no session's proxy may pass a connection to it.
                self.desktops.manager.protect(port)
                server = uvicorn.Server(uvicorn.Config(guest_app(guest), host=self.host, port=port, log_config=None,
                                                       log_level="warning", lifespan="off", proxy_headers=False))
                thread = threading.Thread(target=server.run, name=f"glassdesk-osworld-{session.id}", daemon=True)
                thread.start()
                deadline = time.monotonic() + STARTED_TIMEOUT_S
                while not server.started and thread.is_alive() and time.monotonic() < deadline:
                    time.sleep(0.02)
                if not server.started:
                    server.should_exit = True
                    self.desktops.manager.unprotect(port)
                    self._close_devtools(devtools)
                    raise RuntimeError(f"the OSWorld guest server of session {session.id} did not start")
                served = self._served[session.id] = _Served(guest, server, port, thread, devtools)
                guest.link_chrome_profile()
                log.info("session %s: OSWorld's guest contract on %s:%d", session.id, self.host, port)
        return self._info(session, served)

    def _devtools(self, session) -> NamespaceRelay | None:
        """The browser's DevTools relayed out of the session's namespace, where it has them."""
        stack = session.stack
        if stack.devtools_port is None:
            return None
        # Control plane, protected before it listens: no session's proxy ever passes to it.
        relay = NamespaceRelay(stack.namespace, stack.devtools_port)
        return relay.start(before_listening=self.desktops.manager.protect)

    def _close_devtools(self, relay: NamespaceRelay | None) -> None:
        if relay is not None:
            relay.close()
            self.desktops.manager.unprotect(relay.port)

    def _info(self, session, served: _Served) -> OSWorldGuest:
        problems = [] if (GUEST_PYTHON / "bin" / "python3").exists() else [
            f"no guest Python at {GUEST_PYTHON}: pyautogui code cannot run (run `make setup` as root, or "
            "docker/install-system-deps.sh, which makes it)"]
        if served.devtools is None:
            problems.append(
                "the browser's DevTools are not served, so OSWorld's Chrome getters (tabs, page info) cannot "
                "connect: they run code in pages, which this server refuses unless started with --allow-evaluate"
                if not session.stack.config.page_code else
                "the browser's DevTools are not served: they stay inside a session's own network namespace, "
                "which this server cannot make (it needs root: docs/isolation.md)")
        return OSWorldGuest(session_id=session.id, host=self.host, port=served.port,
                            url=f"http://{self.host}:{served.port}",
                            devtools_port=served.devtools.port if served.devtools else 0, problems=problems)

    def calls(self, session_id: str) -> list[OSWorldCall] | None:
        """The calls the session's guest answered (the last ``CALLS_KEPT``), oldest first; None
        when it has no guest open."""
        with self._lock:
            served = self._served.get(session_id)
        return served.guest.calls_so_far() if served is not None else None

    def close(self, session_id: str) -> bool:
        """Stop the session's guest server; False when it had none."""
        with self._lock:
            served = self._served.pop(session_id, None)
        if served is None:
            return False
        served.server.should_exit = True
        served.guest.close()
        served.thread.join(5)
        self.desktops.manager.unprotect(served.port)
        self._close_devtools(served.devtools)
        log.info("session %s: OSWorld's guest contract closed", session_id)
        return True

    def close_all(self) -> None:
        for session_id in list(self._served):
            self.close(session_id)

    def _changed(self, what: str, session_id: str) -> None:
        if what == "deleted":
            self.close(session_id)
