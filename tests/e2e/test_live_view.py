"""The live view through the API: the viewer page in real Chromium (Playwright), the RFB relay, the
live-view tokens, the per-client limit on refused tokens, the Host/Origin policy with a token set,
and what listens where.

The server here has GLASSDESK_TOKEN set and its own Glassdesk (its own token secret) over the
shared desktop "itest". Refused attempts come from other loopback addresses (127.0.0.x): the limit
on refused tokens is per client, and the browser's own address must stay unthrottled.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from desktop.session.stack import free_port, tagged_pids
from tests.conftest import LiveServer
from tests.fakes.rfb import RFBClient
from vision.http.app import Settings, create_app

pytestmark = pytest.mark.x11

SID = "itest"
TOKEN = "live-view-test-token-8d1e"
BEARER = {"authorization": f"Bearer {TOKEN}"}
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

# Samples the viewer's canvas on a grid: distinct colours, and the share of the commonest one.
CANVAS_STATS = """() => {
  const canvas = document.querySelector('#screen canvas');
  if (!canvas || !canvas.width) return null;
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const counts = new Map();
  let samples = 0;
  for (let y = 0; y < canvas.height; y += 7) {
    for (let x = 0; x < canvas.width; x += 7) {
      const i = (y * canvas.width + x) * 4;
      const key = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
      counts.set(key, (counts.get(key) || 0) + 1);
      samples++;
    }
  }
  const top = Math.max(...counts.values());
  return {width: canvas.width, height: canvas.height, colours: counts.size, top_share: top / samples};
}"""
CANVAS_PIXEL = """([x, y]) => Array.from(document.querySelector('#screen canvas')
                   .getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3))"""


@pytest.fixture(scope="module")
def server(manager, desk, tmp_path_factory):
    port = free_port()
    settings = Settings(token=TOKEN, port=port, data_dir=str(tmp_path_factory.mktemp("live-data")))
    app = create_app(manager, settings)
    with LiveServer(app, port=port) as live:
        live.glassdesk = app.state.glassdesk
        yield live


@pytest.fixture(scope="module")
def http(server):
    with httpx2.Client(base_url=server.url, headers=BEARER, timeout=30) as client:
        yield client


def client_at(server, address: str) -> httpx2.Client:
    """An HTTP client whose requests come from another loopback address (another client)."""
    return httpx2.Client(base_url=server.url, timeout=30, transport=httpx2.HTTPTransport(local_address=address))


def link(http, control: bool = False) -> dict:
    """A live-view link as the API hands it out: view from the session, control from a take-over."""
    if control:
        response = http.post(f"/api/v1/sessions/{SID}/takeover", json={"on": True})
    else:
        response = http.get(f"/api/v1/sessions/{SID}/live")
    assert response.status_code == 200, response.text
    return response.json()


def hand_back(http) -> None:
    assert http.post(f"/api/v1/sessions/{SID}/takeover", json={"on": False}).status_code == 200


def cursor(http) -> tuple[int, int]:
    body = http.get(f"/api/v1/sessions/{SID}/desktop/cursor").json()
    return body["x"], body["y"]


def move(http, x: int, y: int) -> None:
    response = http.post(f"/api/v1/sessions/{SID}/desktop/move", json={"x": x, "y": y})
    assert response.status_code == 200, response.text


def refused_ws(server, token: str | None, source: str, session: str = SID, host: str = "127.0.0.1",
               **options) -> tuple[int, dict, dict]:
    """Open the relay's websocket (as ``host``) expecting a refusal: (status, error, headers)."""
    protocols = ["binary"] + ([f"glassdesk.token.{token}"] if token is not None else [])
    sock = socket.create_connection(("127.0.0.1", server.port), source_address=(source, 0), timeout=15)
    with pytest.raises(InvalidStatus) as refused:
        with connect(f"ws://{host}:{server.port}/api/v1/sessions/{session}/vnc", sock=sock, subprotocols=protocols,
                     open_timeout=15, **options):
            pass
    response = refused.value.response
    return response.status_code, json.loads(bytes(response.body))["error"], dict(response.headers)


@pytest.fixture
def view(browser):
    """A browser page for the viewer. It must run without script errors or CSP violations (refused
    requests a test provokes show up as failed loads, which are allowed)."""
    context = browser.new_context(viewport={"width": 1600, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
    page.on("console", lambda m: problems.append(f"console: {m.text}")
            if m.type == "error" and "Failed to load resource" not in m.text else None)
    yield page
    context.close()
    assert not problems, problems


def wait_for_desktop(page, timeout: float = 20) -> dict:
    """Until the viewer is live and its canvas holds a real picture; return the canvas stats."""
    deadline = time.monotonic() + timeout
    stats = None
    while time.monotonic() < deadline:
        if page.evaluate("document.body.dataset.state") == "live":
            stats = page.evaluate(CANVAS_STATS)
            if stats and stats["colours"] >= 30 and stats["top_share"] < 0.97:
                return stats
        time.sleep(0.25)
    state = page.evaluate("document.getElementById('state').textContent")
    raise AssertionError(f"the viewer never showed the desktop: stats={stats} state={state!r}")


# ------------------------------------------------------------------------------------ the picture


def test_the_handed_out_link_opens_the_desktop_in_the_viewer(server, http, view, page_server, desk):
    desk.run_settled(lambda: desk.open_url(page_server.url))
    info = http.get(f"/api/v1/sessions/{SID}").json()
    url = info["novnc_url"]
    parts = urlsplit(url)
    # The API's own origin, the viewer page, the token in the fragment only (never sent, never logged).
    assert f"{parts.scheme}://{parts.netloc}" == server.url and parts.path == f"/view/{SID}" and not parts.query
    assert parts.fragment.startswith("token=") and desk.stack.view_password not in url
    view.goto(url)
    stats = wait_for_desktop(view)
    assert (stats["width"], stats["height"]) == (1920, 1080)  # the whole framebuffer, scaled by CSS only
    assert view.locator("#badge-mode").inner_text() == "view only"
    ARTIFACTS.mkdir(exist_ok=True)
    view.screenshot(path=str(ARTIFACTS / "live-view.png"))


def test_the_canvas_matches_the_screenshot(server, http, view):
    view.goto(link(http)["novnc_url"])
    wait_for_desktop(view)
    import io

    from PIL import Image

    shot = Image.open(io.BytesIO(http.get(f"/api/v1/sessions/{SID}/desktop/screenshot").content)).convert("RGB")
    # The panel and the browser's tab strip are static: their pixels must agree (lossy encodings allowed).
    for x, y in ((5, 1075), (960, 1070), (1915, 1060), (200, 50), (1500, 12)):
        deadline = time.monotonic() + 10
        while True:
            seen, want = view.evaluate(CANVAS_PIXEL, [x, y]), shot.getpixel((x, y))
            if all(abs(a - b) <= 24 for a, b in zip(seen, want)):
                break
            assert time.monotonic() < deadline, f"canvas {seen} != screenshot {want} at {(x, y)}"
            time.sleep(0.25)


# ------------------------------------------------------------------------------------ input


def test_a_view_token_cannot_move_the_pointer_a_control_token_can(server, http):
    """x11vnc itself ignores input from the view-only login the relay makes for a view token, so
    even a client that sends pointer events on purpose moves nothing."""
    move(http, 10, 10)
    viewer = RFBClient(server, link(http)["token"])
    try:
        assert viewer.handshake() == (1920, 1080)
        viewer.pointer(900, 500)
        viewer.pointer(901, 501)
        viewer.sync()  # both pointer events have reached x11vnc and been dropped
        assert cursor(http) == (10, 10)
    finally:
        viewer.close()
    controller = RFBClient(server, link(http, control=True)["token"])
    try:
        controller.handshake()
        controller.pointer(901, 501)
        controller.sync()
        deadline = time.monotonic() + 10
        while cursor(http) != (901, 501):
            assert time.monotonic() < deadline, f"input from the control token never arrived: {cursor(http)}"
            time.sleep(0.05)
    finally:
        controller.close()
        hand_back(http)


def test_a_control_link_drives_the_desktop_from_the_viewer_page(server, http, view):
    move(http, 10, 10)
    try:
        view.goto(link(http, control=True)["novnc_url"])
        wait_for_desktop(view)
        assert view.locator("#badge-mode").inner_text() == "you have control"
        box = view.locator("#screen canvas").bounding_box()
        deadline = time.monotonic() + 10
        while cursor(http) == (10, 10):
            assert time.monotonic() < deadline, "input from the viewer page never reached the desktop"
            for dx in (0.5, 0.52):
                view.mouse.move(box["x"] + box["width"] * dx, box["y"] + box["height"] * 0.5)
                time.sleep(0.1)
        x, y = cursor(http)
        assert abs(x - 960) < 80 and abs(y - 540) < 80  # the middle of the canvas is the middle of the screen
    finally:
        hand_back(http)


def test_a_take_over_revokes_earlier_control_links_and_closes_their_connections(server, http):
    old = link(http, control=True)["token"]
    watcher = RFBClient(server, link(http)["token"])
    driver = RFBClient(server, old)
    try:
        watcher.handshake()
        driver.handshake()
        fresh = link(http, control=True)  # a take-over (again): a fresh control link, the old one revoked
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                driver.ws.recv(timeout=15)
        assert closed.value.rcvd.code == 4403 and "live_token_revoked" in closed.value.rcvd.reason
        status, error, _ = refused_ws(server, old, "127.0.0.21")
        assert (status, error["code"]) == (403, "live_token_revoked")
        # The fresh link works; watching was never interrupted.
        RFBClient(server, fresh["token"]).close()
        watcher.sync()
    finally:
        watcher.close()
        hand_back(http)
    # Handing back revokes the operator's control link too.
    status, error, _ = refused_ws(server, fresh["token"], "127.0.0.21")
    assert (status, error["code"]) == (403, "live_token_revoked")


# ------------------------------------------------------------------------------------ refusals


def test_expired_forged_and_other_sessions_tokens_are_refused_with_their_code(server, http, view):
    tokens = server.glassdesk.desktops.live_tokens
    session = server.glassdesk.desktops.existing(SID)
    generation, instance = session.live_generation, session.instance
    good = link(http)["token"]
    expired, _ = tokens.issue(SID, "view", generation, ttl_s=-1, instance=instance)
    other, _ = tokens.issue("other", "view", generation, instance=instance)
    forged = good.replace(".view.", ".control.")
    cases = [(expired, "live_token_expired"), (forged, "live_token_invalid"), (other, "live_token_wrong_session"),
             ("", "live_token_invalid")]
    with client_at(server, "127.0.0.22") as anyone:
        for token, code in cases:
            response = anyone.get(f"/api/v1/sessions/{SID}/viewer", headers={"x-live-token": token})
            assert (response.status_code, response.json()["error"]["code"]) == (403, code), response.text
            status, error, _ = refused_ws(server, token, "127.0.0.23")
            assert (status, error["code"]) == (403, code)
        status, error, _ = refused_ws(server, None, "127.0.0.23")
        assert (status, error["code"]) == (403, "live_token_invalid")
        assert anyone.get(f"/api/v1/sessions/{SID}/viewer", headers={"x-live-token": good}).json()["mode"] == "view"
    # The viewer page says why, and shows nothing of the desktop.
    view.goto(f"{server.url}/view/{SID}#token={expired}")
    view.wait_for_function("() => document.body.dataset.state === 'refused'", polling=100)
    assert view.evaluate("document.body.dataset.error") == "live_token_expired"
    assert "expired" in view.locator("#state").inner_text()
    assert view.locator("#screen canvas").count() == 0


def test_refused_tokens_are_limited_per_client_with_retry_after(server, http):
    good = link(http)["token"]
    limited, other = "127.0.0.31", "127.0.0.32"
    with client_at(server, limited) as attacker, client_at(server, other) as bystander:
        for _ in range(10):
            response = attacker.get(f"/api/v1/sessions/{SID}/viewer", headers={"x-live-token": "guess"})
            assert response.status_code == 403
        response = attacker.get(f"/api/v1/sessions/{SID}/viewer", headers={"x-live-token": "guess"})
        assert response.status_code == 429 and response.json()["error"]["code"] == "too_many_attempts"
        assert 1 <= int(response.headers["retry-after"]) <= 60
        # Held before any check, a good token included, on the websocket too.
        assert attacker.get(f"/api/v1/sessions/{SID}/viewer", headers={"x-live-token": good}).status_code == 429
        status, error, headers = refused_ws(server, good, limited)
        assert (status, error["code"]) == (429, "too_many_attempts") and 1 <= int(headers["retry-after"]) <= 60
        # Only that client: another one with the good token gets in.
        assert bystander.get(f"/api/v1/sessions/{SID}/viewer", headers={"x-live-token": good}).status_code == 200
        RFBClient(server, good, source=other).close()


# ------------------------------------------------------------------------------------ Host and Origin


def test_with_a_token_set_a_foreign_host_or_origin_is_refused(server, http):
    good = link(http)["token"]
    for method, path in (("GET", "/api/v1/sessions"), ("GET", f"/view/{SID}"), ("GET", "/"),
                         ("GET", f"/api/v1/sessions/{SID}/viewer"), ("POST", f"/api/v1/sessions/{SID}/vision/pause")):
        response = http.request(method, path, headers={"host": "evil.example", "x-live-token": good})
        assert (response.status_code, response.json()["error"]["code"]) == (421, "misdirected_request"), path
    response = http.post(f"/api/v1/sessions/{SID}/vision/pause", headers={"origin": "https://evil.example"})
    assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden_origin")
    status, error, _ = refused_ws(server, good, "127.0.0.41", origin="https://evil.example")
    assert (status, error["code"]) == (403, "forbidden_origin")
    status, error, _ = refused_ws(server, good, "127.0.0.41", host="evil.example")
    assert (status, error["code"]) == (421, "misdirected_request")
    # The same requests by a loopback name and the server's own origin work.
    RFBClient(server, good, origin=server.url).close()
    assert http.get("/api/v1/sessions", headers={"host": "localhost"}).status_code == 200


def test_a_public_host_is_answered_and_named_in_the_links(manager, desk, tmp_path_factory):
    port = free_port()
    settings = Settings(token=TOKEN, host="0.0.0.0", port=port, public_host="glassdesk.example",
                        data_dir=str(tmp_path_factory.mktemp("public-data")))
    # Listening on loopback here; the Host rule is what is tested (any name can be sent to 127.0.0.1).
    with LiveServer(create_app(manager, settings), port=port) as live, \
            httpx2.Client(base_url=live.url, headers=BEARER, timeout=30) as http:
        for host in (f"glassdesk.example:{port}", "glassdesk.example", f"127.0.0.1:{port}", f"localhost:{port}"):
            assert http.get(f"/api/v1/sessions/{SID}", headers={"host": host}).status_code == 200, host
        assert http.get("/api/v1/sessions", headers={"host": "other.example"}).status_code == 421
        url = http.get(f"/api/v1/sessions/{SID}").json()["novnc_url"]
        assert url.startswith(f"http://glassdesk.example:{port}/view/{SID}#token=")
        token = url.split("#token=")[1]
        response = http.get(f"/api/v1/sessions/{SID}/viewer",
                            headers={"host": "glassdesk.example", "x-live-token": token, "authorization": ""})
        assert response.status_code == 200 and response.json()["mode"] == "view"


# ------------------------------------------------------------------------------------ what listens


def listening(port: int) -> list[str]:
    """The local addresses of every TCP socket listening on ``port`` (IPv4 and IPv6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.rsplit(":", 1)
            if state == "0A" and int(port_hex, 16) == port:
                found.append(address)
    return found


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1 as /proc writes them


def test_x11vnc_listens_on_loopback_only_and_there_is_no_websockify(desk):
    addresses = listening(desk.stack.vnc_port)
    assert addresses and set(addresses) <= LOOPBACK, addresses
    for pid in tagged_pids(desk.stack.tag):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        assert b"websockify" not in cmdline, cmdline
    assert set(desk.stack.children) == {"xvfb", "dbus", "xfce", "chromium", "x11vnc"}


# ------------------------------------------------------------------------------------ the strip


def strip_text(view) -> str:
    return view.evaluate("document.getElementById('strip').hidden ? '' "
                         ": document.getElementById('strip-text').textContent")


def test_the_strip_is_in_the_viewer_and_never_in_what_the_model_sees(server, http, view, page, desk):
    """The person watching sees what the agent does; the model's own screenshot (and so its OCR
    and any visual comparison) shows only the desktop."""
    from vision.perception.ocr import frame_array, read_text, shared_engine

    view.goto(link(http)["novnc_url"])
    wait_for_desktop(view)
    script = [{"action": "wait", "duration_ms": 1500}] * 2 + [{"action": "done", "answer": "watched"}]

    def drive():
        # A call that stays paused for a few seconds (the OCR below is slow on a busy machine)
        # returns "paused"; the run goes on with the next call.
        body = {"instruction": "wait while a person watches", "model": "scripted", "script": script}
        for _ in range(20):
            result = http.post(f"/api/v1/sessions/{SID}/vision/act", json=body, timeout=120).json()
            if result.get("status") != "paused":
                return
            body = {}

    run = threading.Thread(target=drive)
    run.start()
    try:
        view.wait_for_function("() => document.getElementById('strip-text').textContent.startsWith('step 1/')",
                               polling=100)
        # Hold the run (paused between steps, still active): the strip stays up while we look.
        assert http.post(f"/api/v1/sessions/{SID}/vision/pause").status_code == 200
        view.wait_for_function("() => document.getElementById('strip-text').textContent.startsWith('paused')",
                               polling=100)
        assert strip_text(view).startswith("paused · ")
        assert server.glassdesk.active(SID) and view.locator("#strip").is_visible()
        text = read_text(shared_engine().read(frame_array(desk.capture()))).lower()
        assert "alpha bravo" in text  # the OCR reads this screen (the test page)...
        assert "paused" not in text and "operator" not in text and "step 1/" not in text  # ...and no strip
    finally:
        http.post(f"/api/v1/sessions/{SID}/vision/resume")
        run.join(60)
    view.wait_for_function("() => document.getElementById('strip-text').textContent === 'done · 3 steps'", polling=100)
    assert view.evaluate("document.getElementById('strip').dataset.tone") == "ok"
    ARTIFACTS.mkdir(exist_ok=True)
    view.screenshot(path=str(ARTIFACTS / "live-view-strip.png"))


def _loopback(address: str) -> bool:
    """Is a /proc/net/tcp{,6} local address (hex, host byte order per 32-bit word) a loopback one?"""
    if len(address) == 8:
        return address.endswith("7F")  # 127.x.x.x
    return address in ("00000000000000000000000001000000",) or (
        address.startswith("0000000000000000FFFF0000") and address.endswith("7F"))


def listening_sockets(pids) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket these processes listen on."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = fd.readlink().name if fd.is_symlink() else ""
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:  # gone meanwhile
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                address, port = fields[1].rsplit(":", 1)
                found.add((address, int(port, 16)))
    return found


def test_up_on_every_address_exposes_the_api_port_and_nothing_else(tmp_path):
    """`glassdesk up --host 0.0.0.0`: one port beyond loopback, the API's; the live view is in it."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import uuid

    from tests.marks import marked_pids, server_env

    repo = Path(__file__).resolve().parents[2]
    port, mark = free_port(), uuid.uuid4().hex
    env = server_env({**os.environ, "GLASSDESK_TOKEN": TOKEN, "PYTHONPATH": str(repo),
                      "GLASSDESK_DATA_DIR": str(tmp_path / "data")}, mark)
    log = tmp_path / "up.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "vision.cli", "up", "--host", "0.0.0.0", "--port", str(port),
                                 "--public-host", "localhost", "--log-level", "warning"],
                                env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            time.sleep(0.2)
        printed = log.read_text()
        watch = re.search(r"live view \(watch\):\s+(\S+)", printed).group(1)
        control = re.search(r"live view \(control\):\s+(\S+)", printed).group(1)
        assert watch.startswith(f"http://localhost:{port}/view/default#token=default.view.")
        assert control.startswith(f"http://localhost:{port}/view/default#token=default.control.")
        pids = marked_pids(mark) | {proc.pid}
        sockets = listening_sockets(pids)
        exposed = {(address, p) for address, p in sockets if not _loopback(address)}
        assert exposed == {("00000000", port)}, sockets  # 0.0.0.0:<API port>, and nothing else
        assert len(sockets) > 1  # the loopback ones (x11vnc, DevTools) were seen too
        # The printed link works by the public name, without the bearer token (it carries its own).
        token = watch.split("#token=")[1]
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as anyone:
            granted = anyone.get("/api/v1/sessions/default/viewer",
                                 headers={"host": f"localhost:{port}", "x-live-token": token})
            assert granted.status_code == 200 and granted.json()["mode"] == "view", granted.text
            assert anyone.get("/api/v1/sessions", headers={"host": f"localhost:{port}"}).status_code == 401

        class Server:
            pass
        server = Server()
        server.port = port
        client = RFBClient(server, token, session="default")
        assert client.handshake() == (1920, 1080)
        client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 30
    while marked_pids(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not marked_pids(mark)


def test_a_deleted_sessions_links_open_nothing_of_a_later_session_with_its_name(server, http):
    """A view link outlives nothing: after a delete, a session made again under the same name
    refuses the old link (as invalid: the old session's instance is signed into it) and honours
    its own."""
    again = "again"
    assert http.post("/api/v1/sessions", json={"id": again}).status_code == 201
    try:
        old = http.get(f"/api/v1/sessions/{again}/live").json()["token"]
        assert http.delete(f"/api/v1/sessions/{again}").status_code == 204
        assert http.post("/api/v1/sessions", json={"id": again}).status_code == 201
        new = http.get(f"/api/v1/sessions/{again}/live").json()["token"]
        with client_at(server, "127.0.0.24") as anyone:
            refused = anyone.get(f"/api/v1/sessions/{again}/viewer", headers={"x-live-token": old})
            assert (refused.status_code, refused.json()["error"]["code"]) == (403, "live_token_invalid")
            assert anyone.get(f"/api/v1/sessions/{again}/viewer",
                              headers={"x-live-token": new}).json()["mode"] == "view"
    finally:
        http.delete(f"/api/v1/sessions/{again}")
