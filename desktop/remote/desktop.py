"""A desktop in another process, container or pod, driven over its session server's HTTP API.

``RemoteDesktop`` is the ``Desktop`` port (desktop.port) over a single-session glassdesk
(``glassdesk up --single-session``): one HTTP round trip per action (the action's route with
``?screenshot=true`` brings the settled screen back with the answer), one per capture. It is also
the control plane's record of that session: the state only the control plane knows (a run driving
it, a person's take-over, its live-view generation) lives here, as it lives on a local ``Session``.
An error answer comes back as the same typed error the session server raised (its code picks the
class), so a fault reads the same through every door whichever backend runs the session.
"""

from __future__ import annotations

import base64
import io
import logging
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

import httpx2
from PIL import Image

from desktop.actions import _Action
from desktop.errors import GlassdeskError, SessionUnavailable
from desktop.frame import Frame
from desktop.models import ElementAt, Marks, NativeElement, SessionInfo, Status
from desktop.port import Performed
from desktop.remote.backends.base import Endpoint
from desktop.session.manager import RESTART_RETRY_S, utcnow

if TYPE_CHECKING:  # websockets is imported when a live view opens
    from websockets.typing import Subprotocol

log = logging.getLogger("glassdesk.remote")

# The session server's own name for its one session.
REMOTE_SESSION = "default"
# An action waits on the session server for the one before it (5 s at most) and settles (3 s at
# most); a page call may wait for its element up to a minute. The read timeout covers the longest.
READ_TIMEOUT_S = 150.0


def error_class(code: str) -> type[GlassdeskError] | None:
    """The GlassdeskError subclass with this code, among those loaded (the vision layer's too)."""
    pending, found = list(GlassdeskError.__subclasses__()), None
    while pending:
        cls = pending.pop()
        if cls.__dict__.get("code") == code:
            found = cls
        pending += cls.__subclasses__()
    return found


def decode_error(status: int, body: Any, retry_after: str | None = None) -> GlassdeskError:
    """A session server's ``{"error": {"code", "message"}}`` -> the typed error it raised."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or "code" not in error:
        return SessionUnavailable(f"the session server answered {status} without an error body")
    cls = error_class(error["code"]) or GlassdeskError
    exc = cls.__new__(cls)
    GlassdeskError.__init__(exc, str(error.get("message", "")), retry_after=float(retry_after) if retry_after else None,
                            **(error.get("detail") or {}))
    if cls is GlassdeskError:  # a code this side does not know: keep it and its status as they were
        exc.code, exc.status = error["code"], status
    return exc


def frame_from_png(png: bytes) -> Frame:
    """A Frame from a PNG the session server encoded: decoded once (the loop compares pixels and
    providers scale them), its PNG kept so it is never encoded again."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    frame = Frame(image.tobytes("raw", "BGRX"), image.width, image.height)
    frame.__dict__["png"] = png  # Frame.png is a cached_property: this is its cache
    frame.__dict__["image"] = image
    return frame


class RemoteClient:
    """HTTP to one session server, its token on every request; answers or typed errors."""

    def __init__(self, endpoint: Endpoint, session_id: str):
        self.endpoint = endpoint
        self.session_id = session_id  # the control plane's name for the session, for messages
        transport = httpx2.HTTPTransport(uds=endpoint.uds) if endpoint.uds else None
        headers = {"authorization": f"Bearer {endpoint.token}", **({"host": endpoint.host} if endpoint.host else {})}
        self.http = httpx2.Client(base_url=endpoint.base_url.rstrip("/"), transport=transport, trust_env=False,
                                  timeout=httpx2.Timeout(10.0, read=READ_TIMEOUT_S), headers=headers)

    def request(self, method: str, path: str, **kwargs) -> httpx2.Response:
        try:
            response = self.http.request(method, f"/api/v1/sessions/{REMOTE_SESSION}{path}", **kwargs)
        except httpx2.TransportError as exc:  # refused, reset, timed out: the server or its container went
            raise SessionUnavailable(f"session {self.session_id}: its desktop server is not answering "
                                     f"({type(exc).__name__}); try again in a few seconds",
                                     retry_after=RESTART_RETRY_S) from exc
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = None
            raise decode_error(response.status_code, body, response.headers.get("retry-after"))
        return response

    def call(self, service: str, method: str, args: dict) -> Any:
        return self.request("POST", f"/call/{service}/{method}", json={"args": args}).json()["result"]

    def healthy(self, timeout_s: float = 3) -> bool:
        try:
            return self.http.get("/healthz", timeout=timeout_s).status_code == 200
        except httpx2.TransportError:
            return False

    def close(self) -> None:
        self.http.close()


@dataclass
class RemoteDesktop:
    """One remote session as the control plane holds it: a Desktop, and the session's record."""

    id: str
    handle: str  # the backend's name for its container/pod/process
    client: RemoteClient | None = None  # None while it starts
    backend: str = ""
    created_at: datetime = field(default_factory=utcnow)
    last_used_at: datetime = field(default_factory=utcnow)
    status: Status = "starting"
    busy: bool = False
    run_thread: int | None = None
    takeover_since: datetime | None = None
    live_generation: int = field(default_factory=lambda: secrets.randbelow(2**31))
    instance: str = field(default_factory=lambda: secrets.token_hex(16))
    restarts: int = 0
    events: list[str] = field(default_factory=list)
    # Replacements of its session server (a whole desktop lost), for the Desktop port's heals. The
    # session server's own heals (its Chromium restarted) are not seen from here.
    heal_log: list[str] = field(default_factory=list)
    display: str = ""  # no X display on this machine: QA's video recording says it is unavailable

    def __post_init__(self):
        self._url: str | None = None  # the tab in front, as the last action's answer gave it
        self.lifecycle = threading.Lock()  # a replacement and a delete do not interleave

    # ------------------------------------------------------------------ the record

    def touch(self) -> None:
        self.last_used_at = utcnow()

    def info(self, *, default: bool = False, novnc_url: str = "") -> SessionInfo:
        return SessionInfo(id=self.id, display=f"{self.backend}:{self.handle}", status=self.status,
                           novnc_url=novnc_url, created_at=self.created_at, last_used_at=self.last_used_at,
                           restarts=self.restarts, events=self.events[-20:], default=default,
                           takeover=self.takeover_since is not None, takeover_since=self.takeover_since)

    def require_ready(self) -> RemoteClient:
        if self.status != "ready" or self.client is None:
            raise SessionUnavailable(f"session {self.id} is {self.status}; try again in a few seconds",
                                     retry_after=RESTART_RETRY_S)
        return self.client

    def _client(self) -> RemoteClient:
        client = self.require_ready()
        self.touch()
        return client

    # ------------------------------------------------------------------ the Desktop port

    def capture(self) -> Frame:
        return frame_from_png(self._client().request("GET", "/desktop/screenshot").content)

    def perform(self, action: _Action, *, queue_s: float | None = None) -> Performed:
        """One round trip: the action, its settle and the settled screen; ``queue_s`` is the
        session server's own wait."""
        body = action.model_dump(mode="json", exclude_none=True)  # its ``action``, the route's name, included
        return self.performed(self._client().request("POST", f"/desktop/{body['action']}", json=body,
                                                     params={"screenshot": "true"}).json())

    def performed(self, answer: dict) -> Performed:
        """An action's answer (ActionResponse in desktop.http.desktop) -> Performed, its ``result`` (a
        launched pid, a native control) kept; notes the page's URL."""
        page = answer.get("page") or {}
        self._url = page.get("url")
        element = answer.get("element")  # what the session server read under the pixel, as a local one would
        return Performed(answer["executed"], answer["duration_ms"], answer["settle_ms"],
                         frame_from_png(base64.b64decode(answer["screenshot"])), answer["settled"],
                         answer.get("settled_by", "damage"),
                         ElementAt.model_validate(element) if isinstance(element, dict) else None,
                         changed=answer.get("changed"),
                         native=NativeElement.model_validate(native) if isinstance(native := answer.get("native"), dict)
                         else None, result=answer.get("result"))

    def marks(self, limit: int, image: bool) -> Marks:
        """Set-of-marks, read by the session server (desktop.session.tree.read_marks)."""
        params = {"limit": limit, "image": "true" if image else "false"}
        return Marks.model_validate(self._client().request("GET", "/desktop/marks", params=params).json())

    def cursor(self) -> tuple[int, int]:
        answer = self._client().request("GET", "/desktop/cursor").json()
        return answer["x"], answer["y"]

    def page_url(self) -> str | None:
        """The tab in front's URL: the last action's answer carried it; else one round trip."""
        if self._url is not None:
            url, self._url = self._url, None  # good for the step that acted, not for ever
            return url
        if self.status != "ready" or self.client is None:
            return None
        try:
            return self.client.request("GET", "/page").json().get("url")
        except GlassdeskError:
            return None

    def heals(self) -> list[str]:
        return list(self.heal_log)

    def reset(self, *, queue_s: float | None = None) -> None:
        self._client().request("POST", "/reset")
        self._url = None

    def close(self) -> None:
        self.status = "stopped"
        if self.client is not None:
            self.client.close()


# ------------------------------------------------------------------------------------ live view


class RemoteRFB:
    """A session server's live-view websocket as the (reader, writer) pair the viewer's relay
    uses for a local x11vnc: ``read``, ``write`` (in order, by one sender), ``drain``, ``close``."""

    def __init__(self, ws):
        import asyncio

        self.ws = ws
        self._buffer = bytearray()
        self._outgoing: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._sender = asyncio.ensure_future(self._send())

    async def _send(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            while (data := await self._outgoing.get()) is not None:
                await self.ws.send(data)
                self._outgoing.task_done()
        except ConnectionClosed:
            pass

    async def read(self, n: int) -> bytes:
        from websockets.exceptions import ConnectionClosed

        if not self._buffer:
            try:
                message = await self.ws.recv()
            except ConnectionClosed:
                return b""
            self._buffer.extend(message if isinstance(message, bytes) else message.encode())
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out

    async def readexactly(self, n: int) -> bytes:
        import asyncio

        out = b""
        while len(out) < n:
            chunk = await self.read(n - len(out))
            if not chunk:
                raise asyncio.IncompleteReadError(out, n)
            out += chunk
        return out

    def write(self, data: bytes) -> None:
        self._outgoing.put_nowait(bytes(data))

    async def drain(self) -> None:
        if self._sender.done():
            raise ConnectionResetError("the session server closed the live view")

    def close(self) -> None:
        import asyncio

        self._outgoing.put_nowait(None)
        asyncio.ensure_future(self.ws.close())


class _ConnectOptions(TypedDict):
    """What remote_rfb_login hands websockets' connect, over TCP or a Unix socket alike."""

    subprotocols: list[Subprotocol]
    compression: None
    proxy: None
    additional_headers: dict[str, str]
    open_timeout: float
    max_size: None


async def remote_rfb_login(endpoint: Endpoint, path: str, token: str,
                           timeout: float = 5.0) -> tuple[RemoteRFB, RemoteRFB]:
    """Open the session server's live view (its own RFB relay, token in the subprotocol) and do
    the client's side of its handshake (RFB 3.8, security None). Returns the stream where the
    ClientInit comes next, as desktop.session.liveview.rfb_login does for a local x11vnc."""
    import asyncio
    from urllib.parse import urlsplit

    from websockets.asyncio.client import connect, unix_connect
    from websockets.exceptions import InvalidHandshake, WebSocketException
    from websockets.typing import Subprotocol

    from desktop.session.liveview import RFB_VERSION, SECURITY_NONE, TOKEN_PROTOCOL_PREFIX, RFBError

    base = urlsplit(endpoint.base_url)
    name = endpoint.host or base.netloc  # the name the server answers to; the address to connect to
    uri = f"ws://{name}{path}"
    options = _ConnectOptions(subprotocols=[Subprotocol("binary"), Subprotocol(f"{TOKEN_PROTOCOL_PREFIX}{token}")],
                              compression=None, proxy=None,
                              additional_headers={"authorization": f"Bearer {endpoint.token}"},
                              open_timeout=timeout, max_size=None)
    try:
        if endpoint.uds:
            ws = await unix_connect(endpoint.uds, uri, **options)
        else:
            ws = await connect(uri, host=base.hostname, port=base.port or 80, **options)
    except (InvalidHandshake, WebSocketException, OSError, TimeoutError) as exc:
        raise RFBError(f"the session server's live view did not open: {exc}") from exc
    stream = RemoteRFB(ws)
    try:
        async with asyncio.timeout(timeout):
            if (await stream.readexactly(12)) != RFB_VERSION:
                raise RFBError("the session server's live view does not speak RFB 3.8")
            stream.write(RFB_VERSION)
            count = (await stream.readexactly(1))[0]
            if SECURITY_NONE not in await stream.readexactly(count):
                raise RFBError("the session server's live view offers no security type None")
            stream.write(bytes([SECURITY_NONE]))
            if int.from_bytes(await stream.readexactly(4), "big") != 0:
                raise RFBError("the session server's live view refused the relay")
    except BaseException:
        stream.close()
        raise
    return stream, stream
