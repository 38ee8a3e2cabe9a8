"""The browser's network policy on the real desktop, through HTTP: a hostile page in the session's
Chromium tries every kind of request (navigation, fetch, image, frame, form POST, WebSocket,
dedicated and service worker, beacon, WebRTC) against a denied host and against glassdesk's own
ports; the denied host never sees a connection, the API never sees a request from the browser,
and each refusal is recorded with its reason."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx2
import pytest

from desktop.session.stack import free_port
from tests.conftest import LiveServer

pytestmark = pytest.mark.x11

SID = "itest"
# Every kind of request the page tries, and the path it asks for (the WebSocket is a CONNECT,
# which carries no path).
PROBES = ("fetch", "fetch-post", "img", "iframe", "form", "worker", "sw", "beacon")

ATTACK = """<!doctype html><html><head><title>attack</title></head><body><h1>attack</h1><script>
const params = new URLSearchParams(location.search);
const targets = params.get('targets').split(',');
const stun = params.get('stun');
const report = (o) => fetch('/report', {method: 'POST', body: JSON.stringify(o)});
const within = (p, ms = 8000) => Promise.race([p, new Promise(r => setTimeout(() => r('timeout'), ms))]);
const fetched = (p) => p.then(r => 'status ' + r.status, e => 'error ' + e.name);
function loaded(el) {
  return new Promise(r => { el.onload = () => r('load'); el.onerror = () => r('error'); });
}
async function serviceWorker(url) {
  const reg = await navigator.serviceWorker.register('/sw.js');
  const sw = reg.installing || reg.waiting || reg.active;
  if (sw.state !== 'activated')
    await new Promise(r => sw.addEventListener('statechange', () => sw.state === 'activated' && r()));
  return new Promise(r => {
    navigator.serviceWorker.addEventListener('message', e => r(e.data), {once: true});
    sw.postMessage(url);
  });
}
async function probe(target) {
  const base = 'http://' + target + '/gd-attack/';
  const out = {};
  out.fetch = await within(fetched(fetch(base + 'fetch')));
  out['fetch-post'] = await within(fetched(fetch(base + 'fetch-post', {method: 'POST', body: 'x'})));
  const img = new Image(); const imgDone = loaded(img); img.src = base + 'img';
  out.img = await within(imgDone);
  const frame = document.createElement('iframe'); const frameDone = loaded(frame);
  frame.src = base + 'iframe'; document.body.append(frame);
  out.iframe = await within(frameDone);
  const sink = document.createElement('iframe'); sink.name = 'sink-' + target; document.body.append(sink);
  const form = document.createElement('form');
  form.method = 'post'; form.action = base + 'form'; form.target = sink.name;
  form.innerHTML = '<input name="secret" value="s3cret">'; document.body.append(form);
  const formDone = loaded(sink); form.submit();
  out.form = await within(formDone);
  out.ws = await within(new Promise(r => {
    const ws = new WebSocket('ws://' + target + '/gd-attack/ws');
    ws.onopen = () => r('open'); ws.onerror = () => r('error');
  }));
  const code = 'fetch(' + JSON.stringify(base + 'worker') +
    ').then(r => postMessage("status " + r.status), e => postMessage("error " + e.name))';
  const worker = new Worker(URL.createObjectURL(new Blob([code], {type: 'text/javascript'})));
  out.worker = await within(new Promise(r => { worker.onmessage = e => r(e.data); }));
  out.sw = await within(serviceWorker(base + 'sw'));
  out.beacon = navigator.sendBeacon(base + 'beacon', 'x') ? 'queued' : 'refused';
  return out;
}
async function webrtc() {
  const pc = new RTCPeerConnection({iceServers: [{urls: 'stun:127.0.0.1:' + stun}]});
  const candidates = [];
  pc.onicecandidate = e => { if (e.candidate) candidates.push(e.candidate.candidate); };
  pc.createDataChannel('x');
  await pc.setLocalDescription(await pc.createOffer());
  await within(new Promise(r => {
    pc.onicegatheringstatechange = () => pc.iceGatheringState === 'complete' && r();
  }), 10000);
  pc.close();
  return candidates;
}
(async () => {
  await report({kind: 'loaded'});
  for (const target of targets) {
    await report({kind: 'probe', target, out: await probe(target)});
  }
  if (stun) await report({kind: 'webrtc', candidates: await webrtc()});
  await report({kind: 'done'});
})();
</script></body></html>"""

SERVICE_WORKER = """self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', e => e.waitUntil(self.clients.claim()));
self.addEventListener('message', e => {
  fetch(e.data).then(r => e.source.postMessage('status ' + r.status), err => e.source.postMessage('error ' + err.name));
});"""


class Site:
    """The page under test, and what it reported."""

    def __init__(self):
        self.reports: list[dict] = []
        self.cond = threading.Condition()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = urlsplit(self.path).path
                body, kind = (SERVICE_WORKER, "text/javascript") if path == "/sw.js" else (ATTACK, "text/html")
                data = body.encode()
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                report = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with site.cond:
                    site.reports.append(report)
                    site.cond.notify_all()
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, *targets: str, stun: int | None = None) -> str:
        return (f"http://127.0.0.1:{self.port}/attack?targets={','.join(targets)}"
                + (f"&stun={stun}" if stun else ""))

    def wait(self, kind: str, timeout: float = 120) -> list[dict]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not any(r["kind"] == kind for r in self.reports):
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"the page did not report {kind!r}: {self.reports}"
                self.cond.wait(remaining)
            return list(self.reports)

    def clear(self):
        with self.cond:
            self.reports.clear()


class Counting:
    """A host that counts every connection (TCP) and every datagram (UDP, same port number) it gets."""

    def __init__(self):
        self.tcp_hits = 0
        self.udp_hits = 0
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp_port = self.udp.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        threading.Thread(target=self._receive, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.tcp.accept()
            except OSError:
                return
            self.tcp_hits += 1
            conn.close()

    def _receive(self):
        while True:
            try:
                self.udp.recv(65536)
            except OSError:
                return
            self.udp_hits += 1

    def close(self):
        self.tcp.close()
        self.udp.close()


class Recorder:
    """The API app, recording every request that reaches it."""

    def __init__(self, app):
        self.app = app
        self.requests: list[tuple[str, str]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            agent = dict(scope["headers"]).get(b"user-agent", b"").decode(errors="replace")
            self.requests.append((scope["path"], agent))
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def site():
    server = Site()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture(scope="module")
def counting():
    server = Counting()
    yield server
    server.close()


@pytest.fixture(scope="module")
def guarded(manager, desk):
    """The API on its own port, told as Settings.port (how `glassdesk up` tells it), recording."""
    from vision.http.app import Settings, create_app

    port = free_port()
    recorder = Recorder(create_app(manager, Settings(token=None, port=port)))
    with LiveServer(recorder, port=port) as server:
        with httpx2.Client(base_url=server.url, timeout=120) as client:
            yield client, recorder, port


@pytest.fixture
def api_client(guarded):
    """The guarded API; the shared session's policy is back to the default afterwards."""
    client = guarded[0]
    yield client
    client.put(f"/api/v1/sessions/{SID}/network-policy", json={}).raise_for_status()


def ok(response):
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


def blocked_after(client, sid: str, after: int) -> list[dict]:
    return ok(client.get(f"/api/v1/sessions/{sid}/network-policy/blocked", params={"after": after}))


def last_seq(client, sid: str) -> int:
    entries = blocked_after(client, sid, 0)
    return entries[-1]["seq"] if entries else 0


def wait_blocked(client, sid: str, after: int, target: str, expect_paths, timeout: float = 60) -> list[dict]:
    """The blocked entries for ``target`` once every probe's request and the WebSocket's CONNECT
    are among them: each request was decided, so no late request can still arrive."""
    host, port = target.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while True:
        entries = [e for e in blocked_after(client, sid, after) if e["host"] == host and e["port"] == int(port)]
        paths = {urlsplit(e["url"]).path.rsplit("/", 1)[-1] for e in entries if e["url"]}
        if set(expect_paths) <= paths and any(e["method"] == "CONNECT" for e in entries):
            return entries
        assert time.monotonic() < deadline, f"not every request to {target} was blocked: {paths} {entries}"
        time.sleep(0.2)


def test_a_denied_host_never_sees_the_page_s_requests(api_client, site, counting):
    denied = f"127.0.0.1:{counting.port}"
    policy = ok(api_client.put(f"/api/v1/sessions/{SID}/network-policy",
                               json={"deny": [denied, "*.Evil.TEST"]}))
    assert policy == {"session_id": SID, "allow": [], "deny": [denied, "*.evil.test"]}
    assert ok(api_client.get(f"/api/v1/sessions/{SID}/network-policy")) == policy
    after = last_seq(api_client, SID)
    site.clear()
    # localhost is another name for the denied address: the deny holds for it too
    targets = [denied, f"localhost:{counting.port}"]
    ok(api_client.post(f"/api/v1/sessions/{SID}/desktop/open",
                       json={"url": site.url(*targets, stun=counting.udp_port)}))
    reports = site.wait("done")
    for target in targets:
        entries = wait_blocked(api_client, SID, after, target, PROBES)
        assert {e["reason"] for e in entries} == {"denied"}
        assert {e["method"] for e in entries} >= {"GET", "POST", "CONNECT"}
        form = next(e for e in entries if e["url"] and e["url"].endswith("/form"))
        assert form["method"] == "POST" and "deny pattern 127.0.0.1:" in form["detail"]
    assert counting.tcp_hits == 0
    # what the page saw: every request failed
    for report in (r for r in reports if r["kind"] == "probe"):
        out = report["out"]
        assert not out["fetch"].startswith("status 2") and out["img"] == "error" and out["ws"] == "error", out
        assert not out["worker"].startswith("status 2") and not out["sw"].startswith("status 2"), out
    # WebRTC: no UDP leaves the browser, so the STUN server hears nothing
    assert counting.udp_hits == 0
    webrtc = next(r for r in reports if r["kind"] == "webrtc")
    assert not any(" srflx " in c or " host " in c for c in webrtc["candidates"]), webrtc


def test_the_control_plane_is_closed_even_to_an_allow_all_of_loopback(api_client, guarded, site, desk, manager):
    _client, recorder, api_port = guarded
    ok(api_client.put(f"/api/v1/sessions/{SID}/network-policy", json={"allow": ["127.0.0.1", "localhost"]}))
    stack = desk.stack
    targets = [f"127.0.0.1:{api_port}", f"localhost:{api_port}", f"127.0.0.1:{stack.vnc_port}"]
    # (the live view is relayed by the API itself, on api_port)
    after = last_seq(api_client, SID)
    site.clear()
    recorder.requests.clear()
    ok(api_client.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": site.url(*targets)}))
    site.wait("done")
    for target in targets:
        entries = wait_blocked(api_client, SID, after, target, PROBES)
        assert {e["reason"] for e in entries} == {"control_plane"}, entries
    # the API saw the test's own requests and nothing from the browser
    assert not [r for r in recorder.requests if "gd-attack" in r[0] or "Chrome" in r[1]], recorder.requests
    assert recorder.requests, "the recorder saw nothing at all"
    # opening the API in the browser is refused up front, with the reason
    answer = api_client.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": f"http://127.0.0.1:{api_port}/"})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_action"
    assert "network policy" in answer.json()["error"]["message"]
    assert api_port in manager.control_ports()


def test_an_allowlisted_session_loads_only_its_host(guarded, site, counting, manager):
    client = guarded[0]
    allowed = f"127.0.0.1:{site.port}"
    info = ok(client.post("/api/v1/sessions", json={"id": "allowqa", "network": {"allow": [allowed]}}))
    try:
        assert info["id"] == "allowqa"
        assert ok(client.get("/api/v1/sessions/allowqa/network-policy")) == {
            "session_id": "allowqa", "allow": [allowed], "deny": []}
        site.clear()
        target = f"127.0.0.1:{counting.port}"
        ok(client.post("/api/v1/sessions/allowqa/desktop/open", json={"url": site.url(target)}))
        reports = site.wait("done")  # the allowed host loaded: its page ran and reported
        assert any(r["kind"] == "loaded" for r in reports)
        entries = wait_blocked(client, "allowqa", 0, target, PROBES)
        assert {e["reason"] for e in entries} == {"not_allowed"}
        assert counting.tcp_hits == 0
        refused = client.post("/api/v1/sessions/allowqa/desktop/open", json={"url": f"http://{target}/"})
        assert refused.status_code == 422 and "network policy" in refused.json()["error"]["message"]
        # the other sessions' policies are their own
        assert ok(client.get(f"/api/v1/sessions/{SID}/network-policy"))["allow"] == []
    finally:
        client.delete("/api/v1/sessions/allowqa")


def test_bad_patterns_are_refused_and_change_nothing(api_client):
    before = ok(api_client.put(f"/api/v1/sessions/{SID}/network-policy", json={"deny": ["ads.test"]}))
    answer = api_client.put(f"/api/v1/sessions/{SID}/network-policy",
                            json={"allow": ["example.com", "https://example.com/path"]})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and "allow[1]" in error["message"]
    assert "'https://example.com/path'" in error["message"]
    assert ok(api_client.get(f"/api/v1/sessions/{SID}/network-policy")) == before
    answer = api_client.put(f"/api/v1/sessions/{SID}/network-policy", json={"allow": "example.com"})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_request"
    answer = api_client.put(f"/api/v1/sessions/{SID}/network-policy", json={"allow": [], "block": []})
    assert answer.status_code == 422
    # a bad policy in a new session's request: refused before anything starts
    answer = api_client.post("/api/v1/sessions", json={"id": "badnet", "network": {"deny": ["*.*.test"]}})
    assert answer.status_code == 422 and "'*.*.test'" in answer.json()["error"]["message"]
    assert api_client.get("/api/v1/sessions/badnet").status_code == 404
    assert api_client.get("/api/v1/sessions/nope/network-policy").status_code == 404


def test_local_pages_load_under_the_default_policy(api_client, page_server):
    """The default policy: everything but the control plane (the test pages are on loopback)."""
    assert ok(api_client.get(f"/api/v1/sessions/{SID}/network-policy")) == {"session_id": SID, "allow": [],
                                                                             "deny": []}
    page_server.clear()
    ok(api_client.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": page_server.url}))
    page_server.wait_for(lambda e: e.get("type") == "loaded")


def test_mcp_session_create_takes_a_network_policy(services):
    import anyio
    from mcp import Client

    from vision.mcp import build_server

    async def main():
        async with Client(build_server(services)) as client:
            created = await client.call_tool("session_create", {"session": "mcpnet",
                                                                "network": {"deny": ["*.Ads.test", "[::1]:8080"]}})
            try:
                policy = services.desktops.network_policy("mcpnet")
            finally:
                await client.call_tool("session_close", {"session": "mcpnet"})
            bad = await client.call_tool("session_create", {"session": "mcpbad", "network": {"allow": ["a b"]}})
            return created, policy, bad

    created, policy, bad = anyio.run(main)
    assert not created.is_error, created.content
    assert policy.deny == ["*.ads.test", "[::1]:8080"] and policy.allow == []
    assert bad.is_error and bad.content[0].text.startswith("invalid_request: ") and "'a b'" in bad.content[0].text
    assert services.desktops.peek("mcpbad") is None
