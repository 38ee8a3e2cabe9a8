"""A session's network namespace with its policy proxy inside (desktop.network.netns, PolicyProxy
with a namespace), for real but without X: a program run in the namespace reaches the policy's
hosts through the proxy and nothing else; the proxy is reachable only from inside. Needs root
(skipped otherwise: what then happens is tests/unit/test_netns.py's)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from desktop.network import netns
from desktop.network.policy import NetworkPolicy, proxy_environment
from desktop.network.proxy import PolicyProxy

pytestmark = pytest.mark.skipif(netns.support() is not None, reason=f"no network namespaces: {netns.support()}")


class Hits:
    """An HTTP server on 127.0.0.1 (the server's namespace) counting the requests it answers."""

    def __init__(self):
        self.count = 0
        hits = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                hits.count += 1
                self.send_response(200)
                self.send_header("Content-Length", "5")
                self.end_headers()
                self.wfile.write(b"hello")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def namespace():
    made = netns.SessionNamespace(netns.name_for(os.urandom(4).hex())).create()
    yield made
    made.delete()
    assert not made.path.exists()


@pytest.fixture
def hits():
    server = Hits()
    yield server
    server.close()


def curl(namespace: netns.SessionNamespace, url: str, *, proxy_port: int | None = None) -> tuple[int, str]:
    """curl run inside the namespace: (exit code, status code or error)."""
    env = {"PATH": os.environ["PATH"], **(proxy_environment(proxy_port) if proxy_port else {})}
    done = subprocess.run([*namespace.argv(), "curl", "-sS", "--max-time", "5", "-o", "/dev/null",
                           "-w", "%{http_code}", url], env=env, capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout.strip() + done.stderr.strip()


def test_inside_the_namespace_only_the_proxy_leads_out_and_it_applies_the_policy(namespace, hits):
    denied = Hits()
    proxy = PolicyProxy(NetworkPolicy.parse(deny=[f"127.0.0.1:{denied.port}"]), namespace=namespace).start()
    try:
        # the allowed host, through the proxy (its environment): served
        assert curl(namespace, f"http://127.0.0.1:{hits.port}/", proxy_port=proxy.port) == (0, "200")
        assert hits.count == 1
        # the denied host: refused by the proxy, never reached
        code, out = curl(namespace, f"http://127.0.0.1:{denied.port}/", proxy_port=proxy.port)
        assert out == "403" and denied.count == 0
        assert [(e.port, e.reason) for e in proxy.blocked.since()] == [(denied.port, "denied")]
        # ... nor in another spelling of its address
        assert curl(namespace, f"http://0x7f000001:{denied.port}/", proxy_port=proxy.port)[1] == "403"
        assert curl(namespace, f"http://0.0.0.0:{denied.port}/", proxy_port=proxy.port)[1] == "403"
        # without the proxy nothing is reachable: not the allowed host, not the outside
        for url in (f"http://127.0.0.1:{hits.port}/", f"http://127.0.0.1:{denied.port}/", "http://192.0.2.1/"):
            code, out = curl(namespace, url)
            assert code in (7, 28) and hits.count == 1 and denied.count == 0, (url, code, out)
    finally:
        proxy.close()
        denied.close()


def test_the_proxy_listens_only_inside_and_holds_its_port_number_outside(namespace):
    proxy = PolicyProxy(namespace=namespace).start()
    try:
        with socket.socket() as sock:  # from the server's namespace: nothing listens there
            assert sock.connect_ex(("127.0.0.1", proxy.port)) != 0
        with socket.socket() as sock:  # and the number is held: no other service can take it
            with pytest.raises(OSError):
                sock.bind(("127.0.0.1", proxy.port))
        # its listening socket is in the session's namespace
        inode = namespace.path.stat().st_ino
        assert netns.inside(namespace.path, lambda: os.stat("/proc/thread-self/ns/net").st_ino) == inode
        assert os.stat("/proc/thread-self/ns/net").st_ino != inode  # this thread never left its own
    finally:
        proxy.close()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", proxy.port))  # let go with the proxy


def test_the_reaper_removes_the_namespaces_of_a_server_that_is_gone(tmp_path):
    """A dead server's namespace (pid 2**22+1 never runs here) goes; this server's stays. (The
    session roots are looked for in an empty dir: other servers' files on this machine are theirs.)"""
    dead = netns.SessionNamespace(netns.namespace_name(2**22 + 1, 1, "deadbeef")).create()
    mine = netns.SessionNamespace(netns.name_for("alivebeef")).create()
    try:
        from desktop.session.ownership import reap_predecessors

        found = reap_predecessors(tmp_path)
        assert dead.name in found.namespaces and mine.name not in found.namespaces
        assert not dead.path.exists() and mine.path.exists()
    finally:
        dead.delete()
        mine.delete()


def test_a_killed_server_s_namespaces_are_removed_by_its_reaper(tmp_path):
    """kill -9 of a server that owns a session's namespace: its reaper (desktop.session.ownership) removes
    it. (TMPDIR: the stand-in server's session root, and the predecessors it looks for, are its own.)"""
    code = ("import time; from desktop.session.ownership import own_desktops; from desktop.network import netns; "
            "own_desktops(); print(netns.SessionNamespace(netns.name_for('feed')).create().name, flush=True); "
            "time.sleep(60)")
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        name = server.stdout.readline().strip()
        assert name.startswith("glassdesk-") and name in netns.ours()
    finally:
        server.kill()
        server.wait()
    deadline = time.monotonic() + 20
    while name in netns.ours():
        assert time.monotonic() < deadline, f"{name} outlived its server"
        time.sleep(0.05)


def test_a_relay_reaches_one_port_inside_from_the_servers_loopback_and_closes(namespace):
    """desktop.network.relay: a port inside the namespace (the browser's DevTools, for OSWorld's
    harness), reached from outside through the relay alone, both ways, until it closes."""
    from desktop.network.relay import NamespaceRelay

    def listen() -> socket.socket:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        return sock

    inside = namespace.inside(listen)
    port = inside.getsockname()[1]

    def echo_upper():
        conn, _ = inside.accept()
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data.upper())

    threading.Thread(target=echo_upper, daemon=True).start()
    with pytest.raises(OSError):  # the port is the namespace's alone
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    relay = NamespaceRelay(namespace, port).start()
    try:
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as client:
            client.sendall(b"devtools")
            assert client.recv(1024) == b"DEVTOOLS"
    finally:
        relay.close()
        inside.close()
    with pytest.raises(OSError):  # closed with it
        socket.create_connection(("127.0.0.1", relay.port), timeout=2).close()
