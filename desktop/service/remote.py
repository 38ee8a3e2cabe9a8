"""The desktop service over remote sessions (a container, a pod, a process each).

``RemoteDesktopService`` is ``DesktopService`` with its sessions elsewhere. What belongs to the
control plane stays as it is, inherited: the registry and its limits, the guards (a person's
take-over, a run driving the session), the live-view tokens, and every operation that only needs the
``Desktop`` port (screenshot, zoom, cursor, perform, reset: ``RemoteDesktop`` does them in one round
trip each). What needs the desktop's own processes is forwarded to its session server, which checks
and maps it exactly as a local server does: open, focus and launch through their REST routes (the
settled screen comes back with the answer), the rest through the call route (desktop.remote.calls).

``RemotePages`` is ``PageService``'s stand-in: every page operation forwarded as one call, after the
control plane's own guards for those that act.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from desktop.errors import GlassdeskError
from desktop.models import DesktopTree, Marks
from desktop.ops import of_service
from desktop.port import Performed
from desktop.remote import calls
from desktop.remote.desktop import RemoteDesktop
from desktop.service.desktop import DesktopService, _fenced, _network_policy
from desktop.service.page import PageService
from desktop.x11.windows import check_url


def _renamed(value: Any, session_id: str) -> Any:
    """The session server calls its session ``default``; answers name the control plane's id."""
    if isinstance(value, BaseModel) and "session_id" in type(value).model_fields:
        return value.model_copy(update={"session_id": session_id})
    return value


def as_remote(session: object) -> RemoteDesktop:
    """A session DesktopService looked up, as what it is here: DesktopService's lookups are typed by
    its local sessions, and this service's registry (BackendSessions) holds RemoteDesktops only."""
    if not isinstance(session, RemoteDesktop):
        raise TypeError(f"a {type(session).__name__} where a RemoteDesktop was expected: RemoteDesktopService "
                        "runs over a BackendSessions registry")
    return session


def forward(looked_up: object, cls: type, service: str, method: str, *args, **kwargs) -> Any:
    """``cls.method`` run by the session's server; ``looked_up``: the session as DesktopService's
    lookups hand it over."""
    session = as_remote(looked_up)
    client = session.require_ready()
    session.touch()
    wire = client.call(service, method, calls.encode_args(cls, method, args, kwargs))
    return _renamed(calls.decode_result(cls, method, wire), session.id)


class RemoteDesktopService(DesktopService):
    def __init__(self, manager, **kwargs):
        super().__init__(manager, **kwargs)
        self.pages = RemotePages(self)

    def _desktop(self, session_id: str | None, method: str, *args, **kwargs) -> Any:
        return forward(self.existing(session_id), DesktopService, "desktop", method, *args, **kwargs)

    def wait_ready(self, session_id: str | None, timeout_s: float) -> bool:
        import time

        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            session = self.peek(session_id or self.default)
            if session is None:
                return False
            if session.status == "ready":
                try:
                    return bool(self._desktop(session.id, "wait_ready", max(0.0, deadline - time.monotonic())))
                except GlassdeskError:
                    pass  # it went down meanwhile: keep waiting while there is time
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def network_policy(self, session_id: str):
        return self._desktop(session_id, "network_policy")

    def set_network_policy(self, session_id: str, allow, deny):
        _network_policy(allow, deny)  # a bad pattern is refused here, as locally, before anything is sent
        return self._desktop(session_id, "set_network_policy", list(allow or []), list(deny or []))

    def blocked_requests(self, session_id: str, after: int = 0):
        return self._desktop(session_id, "blocked_requests", after)

    def windows(self, session_id: str | None = None):
        return forward(self.session(session_id), DesktopService, "desktop", "windows")

    # The query as DesktopService's own signature takes it (the call's encoding binds it there).
    def desktop_tree(self, session_id: str | None = None, *args: Any, **query: Any) -> DesktopTree:
        return forward(self.session(session_id), DesktopService, "desktop", "desktop_tree", *args, **query)

    def marks(self, session_id: str | None = None, *args: Any, **query: Any) -> Marks:
        return forward(self.session(session_id), DesktopService, "desktop", "marks", *args, **query)

    def native_find(self, session_id: str | None, target):
        return forward(self.session(session_id), DesktopService, "desktop", "native_find", target)

    def native_click(self, session_id: str | None, target, button: str = "left", clicks: int = 1) -> Performed:
        return self._act(session_id, "/desktop/native/click", {"target": target.model_dump(exclude_none=True),
                                                               "button": button, "clicks": clicks})[0]

    def native_type(self, session_id: str | None, target, text: str, clear: bool = False) -> Performed:
        return self._act(session_id, "/desktop/native/type", {"target": target.model_dump(exclude_none=True),
                                                              "text": text, "clear": clear})[0]

    def check_url(self, url: str, session=None) -> None:
        # The fence here; the session's network policy is the session server's, checked where it acts.
        _fenced(check_url, url, allow_local=self.allow_local_urls)

    def _act(self, session_id: str | None, path: str, body: dict) -> tuple[Performed, dict]:
        session = as_remote(self._for_agent(session_id))
        client = session.require_ready()
        session.touch()
        answer = client.request("POST", path, json=body, params={"screenshot": "true"}).json()
        return session.performed(answer), answer

    def open(self, session_id: str | None, url: str) -> Performed:
        self.check_url(url)
        return self._act(session_id, "/desktop/open", {"url": url})[0]

    def focus(self, session_id: str | None, window_id: str) -> Performed:
        return self._act(session_id, "/desktop/focus", {"window_id": window_id})[0]

    def launch(self, session_id: str | None, command: str, args: list[str]) -> tuple[Performed, int]:
        performed, answer = self._act(session_id, "/desktop/launch", {"command": command, "args": args})
        return performed, answer["result"]["pid"]

    async def open_rfb(self, grant):
        """The session server's own live view, relayed: a token of its own for the grant's mode
        (view-only stays view-only: its relay logs in to its x11vnc with the view password), then
        the client's side of its RFB handshake. The control plane's grant is checked before and
        watched after, as for a local session."""
        import asyncio

        from desktop.remote.desktop import remote_rfb_login

        session = self.existing(grant.session_id)
        view = await asyncio.to_thread(forward, session, DesktopService, "desktop", "live_view",
                                       control=grant.control)
        return await remote_rfb_login(session.require_ready().endpoint, view.websocket, view.token)


def _page_call(method: str, acts: bool):
    def call(self: RemotePages, session_id: str | None, *args, **kwargs):
        if acts:  # refused while a person or a run holds the session, before anything is sent
            self.desktops.check_agent(session_id)
        return forward(self.desktops.session(session_id), PageService, "pages", method, *args, **kwargs)

    call.__name__ = method
    call.__doc__ = f"PageService.{method}, run by the session's server."
    return call


class RemotePages:
    """PageService's operations, each forwarded to the session server (the catalogue's, desktop.ops)."""

    def __init__(self, desktops: RemoteDesktopService):
        self.desktops = desktops
        self._downloads = Path(tempfile.mkdtemp(prefix="glassdesk-downloads-"))

    def summary(self, session_id: str | None):
        """As PageService.summary: never raises (it rides along with other answers)."""
        try:
            return forward(self.desktops.session(session_id), PageService, "pages", "summary")
        except GlassdeskError:
            return None

    def download_path(self, session_id: str | None, name: str) -> Path:
        """The file, fetched from the session server into this server's own directory."""
        session = as_remote(self.desktops.session(session_id))
        client = session.require_ready()
        response = client.request("GET", f"/page/downloads/{name}")  # the session server checks the name
        folder = self._downloads / session.id
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / Path(name).name
        path.write_bytes(response.content)
        return path


for _method, _op in of_service("pages").items():  # the catalogue's page operations (desktop.ops)
    if _method != "summary":
        setattr(RemotePages, _method, _page_call(_method, _op.acts))
