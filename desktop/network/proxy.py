"""The forward proxy every request of a session's browser goes through, and the one place the
network policy (``desktop.network.policy``) is enforced.

Why a proxy below the page, rather than Playwright routes or the DevTools Fetch domain: those see
what the renderer asks for, tab by tab. Service workers, WebSockets (Fetch never sees their
frames, and routes see only the handshake of some), the browser's own requests and anything a
new target does before it is attached slip past them. Every one of those goes through Chromium's
network stack, and with ``--proxy-server`` (``desktop.network.policy.chromium_args``) the network
stack goes through here: plain HTTP as absolute-form requests, HTTPS and WebSockets as CONNECT
tunnels. It also decides on the address actually connected to, after resolving the name itself:
a name that resolves to this machine cannot reach glassdesk's own ports.

One listening port per session, on 127.0.0.1, all served by one event-loop thread of the server
process. The session is known by the port its browser was told to use. (One shared port would
need proxy credentials; Chromium takes none on its command line and asks for them in a dialog
unless every page is intercepted, which is what this avoids.) When the session has a network
namespace of its own (``desktop.network.netns``, the server being root) the port is opened inside
it, where the session's programs are, and only there: nothing else can reach it (the same port
number is held, not listened on, in the server's namespace). Otherwise a local process that
connects to a session's port gets that session's policy and no more: the control plane stays
closed to it.

Plain HTTP is one request per connection: the request goes out with ``Connection: close`` and the
answer comes back with it, so the browser never sends a second request down a connection whose
destination was checked for the first. (That costs plain-HTTP sites a connection per request;
HTTPS, nearly all of the web, is a tunnel that stays open with keep-alive or HTTP/2 inside.)

Measured on loopback (2 cores): a plain-HTTP request takes about 1 ms through the proxy against
0.3 ms direct; a 50 MB response streams at about 1.1 GB/s.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from desktop.background import BackgroundLoop, Lazy
from desktop.network.netns import SessionNamespace
from desktop.network.policy import (
    BlockLog,
    IPAddress,
    NetworkPolicy,
    PatternError,
    Refusal,
    control_plane,
    is_this_machine,
    normalize_host,
    parse_ip,
    split_host_port,
)

log = logging.getLogger("glassdesk.proxy")

HEAD_LIMIT = 64 * 1024          # request and response heads larger than this are refused
FIRST_REQUEST_S = 300           # the browser keeps idle connections to its proxy open a while
RESOLVE_S = 10
DENIED_NAMES_S = 30             # how long the addresses of the deny list's names are kept
# How long a deny-list name's lookup may hold up the request that needs it (an IP literal, an
# address of this machine): a name whose resolver does not answer counts as having no address.
DENIED_NAME_RESOLVE_S = 3
CONNECT_S = 15
MAX_CONNECTIONS = 512           # per session; Chromium itself uses at most 32 per proxy, plus WebSockets
# Hop-by-hop headers: they concern the connection to the proxy, not the request.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
                        "te", "trailer"})


def is_local_address(address: IPAddress) -> bool:
    """Is ``address`` one of this machine's? Loopback and the unspecified address always are, in
    every spelling (``desktop.network.policy.is_this_machine``); any other is if a socket can be
    bound to it, which the kernel allows only for its own addresses."""
    if is_this_machine(address):
        return True
    family = socket.AF_INET6 if isinstance(address, ipaddress.IPv6Address) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((str(address), 0))
        return True
    except OSError:
        return False


# One event loop thread serves every session's proxy in this process.
proxy_loop = Lazy(lambda: BackgroundLoop(
    "glassdesk-proxy", lambda seconds: TimeoutError(f"the proxy did not answer within {seconds:.0f}s")))


class _Refused(Exception):
    def __init__(self, refusal: Refusal):
        self.refusal = refusal


class _BadGateway(Exception):
    pass


@dataclass(eq=False)
class _Connection:
    """A live connection through the proxy and where it goes, so a new policy can end it."""

    host: str
    port: int
    address: IPAddress
    task: asyncio.Task | None = field(default=None, repr=False)


class PolicyProxy:
    """One session's proxy. ``start()`` from any thread; ``policy`` may be replaced at any time."""

    def __init__(self, policy: NetworkPolicy | None = None,
                 control_ports: Callable[[], Collection[int]] = frozenset,
                 is_local: Callable[[IPAddress], bool] = is_local_address,
                 namespace: SessionNamespace | None = None):
        self.policy = policy or NetworkPolicy()
        self.blocked = BlockLog()
        self.port = 0
        self._control_ports = control_ports
        self._is_local = is_local
        # Where it listens: in the session's network namespace (None: the server's own).
        self.namespace = namespace
        self._held: socket.socket | None = None  # the port number held in the server's namespace
        # The deny list's names -> (when looked up, their addresses): desktop.network.policy.by_address
        self._named: dict[str, tuple[float, frozenset[IPAddress]]] = {}
        self._server: asyncio.base_events.Server | None = None
        self._live: set[_Connection] = set()
        self._tasks: set[asyncio.Task] = set()

    # ---------------------------------------------------------------------------- lifecycle

    def start(self) -> PolicyProxy:
        if self._server is None:
            if self.namespace is None:
                serve = asyncio.start_server(self._accept, "127.0.0.1", 0, limit=HEAD_LIMIT)
            else:
                serve = asyncio.start_server(self._accept, sock=self._listen_inside(self.namespace), limit=HEAD_LIMIT)
            self._server = proxy_loop().run(serve, 10)
            self.port = self._server.sockets[0].getsockname()[1]
        return self

    def _listen_inside(self, namespace: SessionNamespace) -> socket.socket:
        """A socket listening on 127.0.0.1 in the session's ``namespace``, on a port number this
        server holds (bound, never listening) in its own: so the number stands for this proxy
        alone, and no service of the machine's can sit on a port that the control-plane check
        refuses as this proxy's."""
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            held.bind(("127.0.0.1", 0))
            port = held.getsockname()[1]

            def listen() -> socket.socket:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    sock.bind(("127.0.0.1", port))
                    sock.listen(128)
                except BaseException:
                    sock.close()
                    raise
                return sock

            sock = namespace.inside(listen)
        except BaseException:
            held.close()
            raise
        self._held = held
        return sock

    def close(self) -> None:
        server, self._server = self._server, None
        if self._held is not None:
            self._held.close()
            self._held = None
        if server is not None:
            stop_serving(server, self._tasks, f"the proxy on port {self.port}")

    def set_policy(self, policy: NetworkPolicy) -> None:
        """Use ``policy`` from now on, and end the live connections (tunnels, WebSockets, requests
        in flight) it would refuse: a kept-alive HTTPS connection must not outlive a deny."""
        self.policy = policy
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._end_refused(), proxy_loop().loop)

    async def _end_refused(self) -> None:
        if not self._live:
            return
        named = await self._deny_addresses()  # a newly denied name's addresses count at once
        for conn in list(self._live):
            if self._refusal(conn.host, conn.port, conn.address, named) is not None and conn.task is not None:
                conn.task.cancel()

    # ---------------------------------------------------------------------------- decisions

    def control_ports(self) -> set[int]:
        return set(self._control_ports()) | {self.port}

    def refusal_by_name(self, host: str, port: int) -> Refusal | None:
        """What the proxy would decide for a request to ``host``:``port``, the same check (a name
        is looked up as the proxy would); None when it would connect, or could not resolve the
        name (the browser then shows the failure). For a check before navigating; the proxy
        decides again on every request. From any thread but the proxy's."""
        host = normalize_host(host)
        try:
            _allowed, refusal = proxy_loop().run(self._decide(host, port), RESOLVE_S + 5)
        except (_BadGateway, TimeoutError):
            return None
        return refusal

    def _refusal(self, host: str, port: int, address: IPAddress,
                 named: dict[str, frozenset[IPAddress]] | None = None) -> Refusal | None:
        return (control_plane(address, port, self.control_ports(), self._is_local)
                or self.policy.by_name(host, port) or self.policy.by_address(address, port, self._is_local, named))

    async def _decide(self, host: str, port: int) -> tuple[list[IPAddress], Refusal | None]:
        """The addresses a request to ``host`` (normalised) may connect to, best first, and the
        first refusal met; raises _BadGateway when the name resolves to nothing."""
        literal = parse_ip(host)
        if literal is None:
            refusal = self.policy.by_name(host, port)  # before any DNS: a refused name is not even looked up
            if refusal:
                return [], refusal
            addresses = await self._resolve(host, port)
        else:
            addresses = [literal]
        # An IP literal, or a name of this machine, is checked against the addresses of the deny
        # list's names too: http://<its address>/ is the denied host. (Only then: a name the lists
        # let through costs no lookup of the deny list's names.)
        named = (await self._deny_addresses() if literal is not None or any(map(self._is_local, addresses))
                 else None)
        allowed, refusal = [], None
        for address in addresses:
            found = self._refusal(host, port, address, named)
            if found is None:
                allowed.append(address)
            else:
                refusal = refusal or found
        return allowed, refusal

    async def _addresses(self, method: str, host: str, port: int, url: str | None) -> list[IPAddress]:
        """The addresses this request may connect to, best first; raises _Refused (recorded) or
        _BadGateway."""
        allowed, refusal = await self._decide(host, port)
        if allowed:
            return allowed
        if refusal is None:
            raise _BadGateway(f"{host} resolves to no address")
        self.blocked.record(host=host, port=port, refusal=refusal, method=method, url=url)
        log.info("blocked %s %s:%s: %s", method, host, port, refusal.detail)
        raise _Refused(refusal)

    async def _deny_addresses(self) -> dict[str, frozenset[IPAddress]]:
        """The addresses of the deny list's names (``NetworkPolicy.deny_names``), each looked up
        at most every DENIED_NAMES_S; a name that does not resolve has none."""
        loop = asyncio.get_running_loop()
        names = self.policy.deny_names()
        stale = [n for n in names if n not in self._named or loop.time() - self._named[n][0] > DENIED_NAMES_S]

        async def lookup(name: str) -> None:
            try:
                found = frozenset(await self._resolve(name, 80, DENIED_NAME_RESOLVE_S))
            except _BadGateway:
                found = frozenset()
            self._named[name] = (loop.time(), found)

        await asyncio.gather(*map(lookup, stale))
        for name in set(self._named) - set(names):  # a name no longer denied
            del self._named[name]
        return {n: self._named[n][1] for n in names if n in self._named}

    async def _resolve(self, host: str, port: int, timeout: float = RESOLVE_S) -> list[IPAddress]:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout)
        except (TimeoutError, OSError) as exc:
            raise _BadGateway(f"could not resolve {host}: {exc}") from None
        hosts = [info[4][0] for info in infos]  # all strings: IPv4 and IPv6 addresses (an int is another family's)
        addresses = [parse_ip(host.split("%")[0]) for host in hosts if isinstance(host, str)]
        return list(dict.fromkeys(a for a in addresses if a is not None))

    # ------------------------------------------------------------------------- one connection

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_counted(self._tasks, MAX_CONNECTIONS, writer, lambda: self._serve_quietly(reader, writer))

    async def _serve_quietly(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except (TimeoutError, asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError, OSError):
            pass
        except Exception:
            log.exception("proxy connection failed")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), FIRST_REQUEST_S)
        except asyncio.LimitOverrunError:
            return await _finish(reader, writer, _answer(431, "the request head is too large"))
        request = _Request.parse(head)
        if request is None:
            return await _finish(reader, writer, _answer(400, "not an HTTP proxy request"))
        try:
            host = normalize_host(request.host)
        except PatternError as exc:
            return await _finish(reader, writer, _answer(400, str(exc)))
        try:
            addresses = await self._addresses(request.method, host, request.port, request.url)
            upstream_reader, upstream_writer, address = await self._connect(addresses, request.port)
        except _Refused as exc:
            return await _finish(reader, writer, _blocked(host, request.port, exc.refusal))
        except _BadGateway as exc:
            # DEBUG: an unreachable host is the page's own failure (its network record has it), and
            # Chromium's background requests (update.googleapis.com) fail on every offline start.
            log.debug("%s %s:%s failed: %s", request.method, host, request.port, exc)
            if request.method != "CONNECT":
                # No answer at all: the page's request fails as it would without a proxy (a 502 would
                # be a response: a fetch would resolve, a navigation would "succeed").
                return
            return await _finish(reader, writer, _answer(502, str(exc)))
        conn = _Connection(host, request.port, address, asyncio.current_task())
        self._live.add(conn)
        try:
            if request.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                upstream_writer.write(request.forwarded_head())
                await upstream_writer.drain()
            await relay(reader, writer, upstream_reader, upstream_writer,
                         method=None if request.method == "CONNECT" else request.method)
        finally:
            self._live.discard(conn)
            upstream_writer.close()

    async def _connect(self, addresses: list[IPAddress], port: int):
        """Connect to the first address that answers: the vetted address itself, never the name
        again (a second lookup could answer differently)."""
        last: Exception | None = None
        for address in addresses:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(str(address), port, limit=HEAD_LIMIT), CONNECT_S)
                return reader, writer, address
            except (TimeoutError, OSError) as exc:
                last = exc
        raise _BadGateway(f"could not connect to port {port} of {', '.join(map(str, addresses))}: {last}")


@dataclass
class _Request:
    method: str
    host: str
    port: int
    target: str                 # origin-form path for plain HTTP
    version: str
    headers: list[tuple[str, str]]
    url: str | None = None      # the whole URL, plain HTTP only

    @classmethod
    def parse(cls, head: bytes) -> _Request | None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return None
        method, target, version = parts
        headers = []
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                return None
            headers.append((name, value.strip()))
        try:
            if method == "CONNECT":
                host, port = split_host_port(target)
                if port is None:
                    return None
                return cls(method, host, port, target, version, headers)
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                return None  # an origin-form request: someone took the proxy for a web server
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            return cls(method, url.hostname, url.port or 80, path, version, headers, url=target)
        except (ValueError, PatternError):
            return None

    def forwarded_head(self) -> bytes:
        """The request as the server should see it: origin-form, no proxy headers, one request."""
        upgrade = any(name.lower() == "upgrade" for name, _ in self.headers)
        headers = [(n, v) for n, v in self.headers if n.lower() not in HOP_BY_HOP]
        headers.append(("Connection", "Upgrade" if upgrade else "close"))
        lines = [f"{self.method} {self.target} {self.version}", *(f"{n}: {v}" for n, v in headers), "", ""]
        return "\r\n".join(lines).encode("latin-1")


def _response_head(head: bytes) -> tuple[bytes, int, dict[str, str]]:
    """The server's response head told to close the connection after it (unless it switches
    protocols: a WebSocket over plain HTTP keeps its Upgrade), its status and its headers."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    code = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if line:
            headers[name.strip().lower()] = value.strip()
    if code < 200:  # 101 Switching Protocols, and interim answers that another head follows
        return head, code, headers
    kept = [line for line in lines[1:] if line and line.partition(":")[0].strip().lower() not in HOP_BY_HOP]
    return "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode("latin-1"), code, headers


async def serve_counted(connections: set[asyncio.Task], limit: int, writer: asyncio.StreamWriter,
                        serve: Callable[[], Awaitable[None]]) -> None:
    """Serve one accepted connection with ``serve()``, counted in ``connections`` (what
    ``stop_serving`` ends) while it lasts, its writer closed after; one over ``limit`` is closed at once."""
    task = asyncio.current_task()
    assert task is not None  # start_server runs each connection's callback as a task of its own
    if len(connections) >= limit:
        writer.close()
        return
    connections.add(task)
    try:
        await serve()
    finally:
        connections.discard(task)
        writer.close()


def stop_serving(server: asyncio.base_events.Server, connections: set[asyncio.Task], what: str) -> None:
    """Stop listening and end the live connections, on the proxies' loop, from any thread."""
    async def stop():
        server.close()
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)

    try:
        proxy_loop().run(stop(), 5)
    except TimeoutError:
        log.warning("%s did not stop in time", what)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int | None = None) -> None:
    """Copy until the end (or ``limit`` bytes)."""
    while limit is None or limit > 0:
        data = await reader.read(65536 if limit is None else min(65536, limit))
        if not data:
            return
        writer.write(data)
        await writer.drain()
        if limit is not None:
            limit -= len(data)


async def _copy_response(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str) -> None:
    """Copy one response, and stop where it ends: a server that keeps the connection open
    despite ``Connection: close`` must not keep the browser's connection waiting."""
    while True:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:  # not HTTP, or cut short: pass on what came
            writer.write(exc.partial)
            return
        head, code, headers = _response_head(raw)
        writer.write(head)
        await writer.drain()
        if code == 101:
            return await _copy(reader, writer)
        if code >= 200:
            break
    if method == "HEAD" or code in (204, 304):
        return
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await reader.readuntil(b"\r\n")
            writer.write(line)
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                    writer.write(trailer)
                writer.write(trailer)
                return await writer.drain()
            writer.write(await reader.readexactly(size + 2))
            await writer.drain()
    length = headers.get("content-length")
    await _copy(reader, writer, int(length) if length and length.isdigit() else None)


async def relay(client_reader, client_writer, upstream_reader, upstream_writer, *, method: str | None) -> None:
    """Copy both ways until either side is done; ``method``: a plain HTTP request's, whose one
    response ends the exchange (None: a tunnel)."""
    to_client = (_copy_response(upstream_reader, client_writer, method) if method is not None
                 else _copy(upstream_reader, client_writer))
    tasks = [asyncio.ensure_future(_copy(client_reader, upstream_writer)), asyncio.ensure_future(to_client)]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if tasks[1].done():  # the answer is complete: let it reach the browser before closing
            with contextlib.suppress(Exception):
                await client_writer.drain()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _finish(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: bytes) -> None:
    """Answer and end the connection without a reset: a request body not read yet (a blocked
    form POST) would make the kernel reset the connection on close, and the browser would see a
    reset instead of the answer. So: answer, then read what is left until the browser hangs up."""
    writer.write(answer)
    await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):
        writer.write_eof()
    with contextlib.suppress(asyncio.TimeoutError):
        async with asyncio.timeout(2):
            for _ in range(256):  # at most 16 MiB
                if not await reader.read(65536):
                    break


def _answer(status: int, message: str, extra: str = "") -> bytes:
    reasons = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large", 502: "Bad Gateway"}
    body = (message + "\n").encode()
    return (f"HTTP/1.1 {status} {reasons[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n{extra}Connection: close\r\n\r\n"
            ).encode() + body


def _blocked(host: str, port: int, refusal: Refusal) -> bytes:
    """What the browser gets for a blocked request: a 403 that says why. A page's fetch sees the
    403 (an image or script fails to load); a navigation shows the sentence; a CONNECT (HTTPS, a
    WebSocket) fails as a tunnel the proxy refused."""
    shown = f"[{host}]" if ":" in host else host
    return _answer(403, f"blocked by glassdesk's network policy: {shown}:{port} {refusal.detail}",
                   f"X-Glassdesk-Blocked: {refusal.reason}\r\n")
