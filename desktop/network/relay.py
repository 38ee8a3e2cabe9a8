"""A port of a session's network namespace, relayed to a port on the server's loopback.

Why: what listens inside a session's namespace (desktop.network.netns) is out of everyone's reach
but the session's own programs; that is the point of the namespace. One thing must be reached from
outside on request: the browser's DevTools, for OSWorld's harness (desktop.osworld), whose Chrome
getters connect over CDP. The relay listens on 127.0.0.1 of the server's namespace (a port of the
control plane: sessions' proxies refuse it) and makes each connection's other end inside the
session's namespace (a socket stays in the namespace it was made in), then copies bytes both ways.
It knows nothing of the protocol: DevTools builds the WebSocket address it answers from the Host
header it is asked with, so a client that asked the relay is sent back to the relay.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

from desktop.network.netns import SessionNamespace
from desktop.network.proxy import proxy_loop, relay, serve_counted, stop_serving

log = logging.getLogger("glassdesk.relay")

CONNECT_S = 5.0
MAX_CONNECTIONS = 32


class NamespaceRelay:
    """``127.0.0.1:<port>`` of the server relayed to ``127.0.0.1:<target>`` inside ``namespace``.
    ``start()`` and ``close()`` from any thread."""

    def __init__(self, namespace: SessionNamespace, target: int):
        self.namespace = namespace
        self.target = target
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    def start(self, before_listening: Callable[[int], None] = lambda port: None) -> NamespaceRelay:
        """Listen; ``before_listening(port)`` is called with the port bound but not yet listening
        (to fence it off from the sessions first: nothing can connect before)."""
        if self._server is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("127.0.0.1", 0))
                before_listening(sock.getsockname()[1])
                self._server = proxy_loop().run(asyncio.start_server(self._accept, sock=sock), 10)
            except BaseException:
                sock.close()
                raise
            self.port = self._server.sockets[0].getsockname()[1]
        return self

    def _connect_inside(self) -> socket.socket:
        def connect() -> socket.socket:
            return socket.create_connection(("127.0.0.1", self.target), timeout=CONNECT_S)

        sock = self.namespace.inside(connect)
        sock.setblocking(False)
        return sock

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_counted(self._tasks, MAX_CONNECTIONS, writer, lambda: self._relay(reader, writer))

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            sock = await asyncio.get_running_loop().run_in_executor(None, self._connect_inside)
            upstream_reader, upstream_writer = await asyncio.open_connection(sock=sock)
            try:
                await relay(reader, writer, upstream_reader, upstream_writer, method=None)
            finally:
                upstream_writer.close()
        except (OSError, asyncio.CancelledError) as exc:
            log.info("relay to port %d of %s ended: %s", self.target, self.namespace.name, exc)

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            stop_serving(server, self._tasks, f"the relay on port {self.port}")
