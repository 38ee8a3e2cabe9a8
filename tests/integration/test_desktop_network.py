"""Every program of a session behind its network policy, on the real desktop (issue 23, item 4):
a ``curl`` launched on the desktop obeys the session's deny list through the proxy its
environment names, and reaches nothing without it (not the API's port, not another session's
proxy); every spelling of a denied host is refused, from the page's JavaScript and through
``open``; the session's network namespace is gone after DELETE.

Where the server cannot make network namespaces (not root) only Chromium is behind the policy:
the tests that need one are skipped, and say why (desktop.network.netns.support)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from desktop.network import netns
from desktop.network.policy import parse_ip
from desktop.network.proxy import is_local_address
from tests.programs import launched_curl

pytestmark = pytest.mark.x11
needs_namespaces = pytest.mark.skipif(netns.support() is not None or shutil.which("curl") is None,
                                      reason=f"no network namespaces ({netns.support()}) or no curl")

SID = "itest"

# The page fetches each target (no-cors: the answer is opaque either way, what counts is whether
# the target saw a request) and then reports that it is done.
PAGE = """<!doctype html><title>spellings</title><script>
const targets = new URLSearchParams(location.search).get('targets').split(',');
const within = (p) => Promise.race([p, new Promise(r => setTimeout(() => r('timeout'), 8000))]);
(async () => {
  const out = {};
  for (const t of targets)
    out[t] = await within(fetch('http://' + t + '/spelled', {mode: 'no-cors'}).then(() => 'answered', e => 'error'));
  await fetch('/report', {method: 'POST', body: JSON.stringify(out)});
})();
</script>"""


class Hits:
    """An HTTP server counting the requests it gets, answering each 200; ``host`` "0.0.0.0": on
    every address of this machine, so each spelling of one would reach it if let through. It also
    serves the page above and takes its report."""

    def __init__(self, host: str = "127.0.0.1"):
        self.count = 0
        self.reports: list[dict] = []
        self.cond = threading.Condition()
        hits = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body: bytes, kind: str = "text/plain"):
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if urlsplit(self.path).path == "/page":
                    return self._send(PAGE.encode(), "text/html")
                with hits.cond:
                    hits.count += 1
                self._send(b"hello")

            def do_POST(self):
                report = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with hits.cond:
                    hits.reports.append(report)
                    hits.cond.notify_all()
                self._send(b"")

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, *targets: str) -> str:
        return f"http://127.0.0.1:{self.port}/page?targets={','.join(targets)}"

    def report(self, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.reports:
                assert time.monotonic() < deadline, "the page did not report"
                self.cond.wait(deadline - time.monotonic())
            return self.reports.pop()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def allowed():
    server = Hits()
    yield server
    server.close()


@pytest.fixture
def denied():
    server = Hits("0.0.0.0")
    yield server
    server.close()


def ok(response):
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


def set_policy(client, sid: str, **lists) -> None:
    ok(client.put(f"/api/v1/sessions/{sid}/network-policy", json=lists))


def namespace_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


@needs_namespaces
def test_a_launched_curl_obeys_the_session_s_deny_list_through_its_proxy(netapi, desk, allowed, denied):
    client, _port = netapi
    set_policy(client, SID, deny=[f"127.0.0.1:{denied.port}"])
    after = max([e["seq"] for e in ok(client.get(f"/api/v1/sessions/{SID}/network-policy/blocked"))] or [0])
    home = desk.stack.home
    # its environment names the proxy: the allowed host is served, through it
    assert launched_curl(client, SID, home, f"http://127.0.0.1:{allowed.port}/") == "200"
    assert allowed.count == 1
    # the denied host: the proxy's refusal, recorded; the host saw nothing
    assert launched_curl(client, SID, home, f"http://127.0.0.1:{denied.port}/") == "403"
    assert launched_curl(client, SID, home, f"http://0.0.0.0:{denied.port}/") == "403"
    assert denied.count == 0
    blocked = ok(client.get(f"/api/v1/sessions/{SID}/network-policy/blocked", params={"after": after}))
    assert [(e["port"], e["reason"]) for e in blocked] == [(denied.port, "denied")] * 2
    # without the proxy there is no way out at all, not even to the allowed host
    for url in (f"http://127.0.0.1:{allowed.port}/", f"http://127.0.0.1:{denied.port}/"):
        answer = launched_curl(client, SID, home, url, "--noproxy", "*")
        assert answer.startswith("error: ") and "connect" in answer.lower(), answer
    assert allowed.count == 1 and denied.count == 0


@needs_namespaces
def test_a_launched_program_cannot_reach_the_api_port(netapi, desk):
    client, api_port = netapi
    set_policy(client, SID)
    home = desk.stack.home
    for address in ("127.0.0.1", "0.0.0.0", "[::1]"):
        answer = launched_curl(client, SID, home, f"http://{address}:{api_port}/healthz", "--noproxy", "*")
        assert answer.startswith("error: "), (address, answer)
    # and through its proxy the control plane is refused, as for the browser
    assert launched_curl(client, SID, home, f"http://127.0.0.1:{api_port}/healthz") == "403"


def test_every_spelling_of_a_denied_host_is_refused_from_the_page_and_through_open(netapi, allowed, denied):
    """A deny of 127.0.0.1:P holds for 0.0.0.0, 127.x, the numeric forms and IPv4-mapped IPv6; a
    deny of this machine's host name holds for its addresses (IP literals of a denied host)."""
    client, _port = netapi
    port = denied.port
    spellings = [f"0.0.0.0:{port}", f"127.0.0.2:{port}", f"127.1:{port}", f"2130706433:{port}",
                 f"0x7f000001:{port}", f"0177.0.0.1:{port}", f"[::ffff:127.0.0.1]:{port}"]
    cases = [(f"127.0.0.1:{port}", spellings)]
    hostname = socket.gethostname()  # where it resolves to this machine (/etc/hosts), as here and in Docker
    if _resolves_to_this_machine(hostname):
        cases.append((f"{hostname}:{port}", [f"127.0.0.1:{port}", f"0.0.0.0:{port}"]))
    for deny, targets in cases:
        set_policy(client, SID, deny=[deny])
        ok(client.post(f"/api/v1/sessions/{SID}/desktop/open",
                       json={"url": allowed.page(*targets, f"127.0.0.1:{allowed.port}")}))
        report = allowed.report()
        assert report[f"127.0.0.1:{allowed.port}"] == "answered", report  # the page's fetches did run
        assert denied.count == 0, (deny, report)
        for target in targets:
            answer = client.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": f"http://{target}/"})
            assert answer.status_code == 422, (deny, target, answer.text)
            assert "network policy blocks" in answer.json()["error"]["message"], (deny, target, answer.text)
    # the same spellings, not denied, do reach the host: the refusals above were the policy's
    set_policy(client, SID)
    ok(client.post(f"/api/v1/sessions/{SID}/desktop/open", json={"url": allowed.page(*spellings)}))
    allowed.report()
    assert denied.count == len(spellings)


def _resolves_to_this_machine(name: str) -> bool:
    try:
        infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return any(is_local_address(parse_ip(info[4][0])) for info in infos)


@needs_namespaces
def test_each_session_has_its_own_namespace_another_s_proxy_is_out_of_reach_and_delete_removes_it(
        netapi, desk, manager):
    client, _port = netapi
    def this_servers() -> set[str]:  # other xdist workers' servers make namespaces at the same time
        return {name for name in netns.ours() if netns.owner_of(name) == netns._this_server()}

    before = this_servers()
    ok(client.post("/api/v1/sessions", json={"id": "nsown"}))
    try:
        made = this_servers() - before
        assert len(made) == 1, made
        name = made.pop()
        other = manager.get("nsown").stack
        inode = (netns.NETNS_DIR / name).stat().st_ino
        # every desktop part but Xvfb is in it; x11vnc stays with the server; the first session is elsewhere
        assert {part: namespace_inode(child.popen.pid) == inode for part, child in other.children.items()} == {
            "xvfb": False, "dbus": True, "xfce": True, "chromium": True, "x11vnc": False}
        assert namespace_inode(desk.stack.children["chromium"].popen.pid) != inode
        # from the first session: the second one's proxy, directly or as a proxy, is not there
        home = desk.stack.home
        for options in (["--noproxy", "*"], ["--proxy", f"http://127.0.0.1:{other.proxy.port}"]):
            answer = launched_curl(client, SID, home, f"http://127.0.0.1:{other.proxy.port}/", *options)
            assert answer.startswith("error: ") or answer == "403", (options, answer)
        # a reset keeps it (and the proxy): the new Chromium starts in it
        proxy_port = other.proxy.port
        ok(client.post("/api/v1/sessions/nsown/reset"))
        assert other.proxy.port == proxy_port and namespace_inode(other.children["chromium"].popen.pid) == inode
    finally:
        assert client.delete("/api/v1/sessions/nsown").status_code == 204
    assert name not in netns.ours() and not (netns.NETNS_DIR / name).exists()
