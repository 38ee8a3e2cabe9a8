"""The registry of remote sessions: ``SessionManager``'s job (ids, limits, idle expiry, the
supervisor) when each session is a container, a pod or a process that a backend runs.

A session's server that dies is reported (the session's status and ``events``, and a "died" to the
listeners, which the event bus carries), then replaced under the same id: a new server from the
same spec, the run that was driving it told ``session_unavailable`` by its next round trip and
retried once on the new desktop, as after a local heal. If the replacement cannot start, the
session stays listed as ``failed`` until it is deleted: never silently lost.
"""

from __future__ import annotations

import logging
import secrets
import threading

from desktop.errors import GlassdeskError, SessionNotFound, SessionUnavailable
from desktop.network.policy import NetworkPolicy
from desktop.remote.backends.base import BackendState, SessionBackend, SessionSpec
from desktop.remote.desktop import RemoteClient, RemoteDesktop
from desktop.session.manager import SessionRegistry, utcnow

log = logging.getLogger("glassdesk.backends")

READY_TIMEOUT_S = 120.0


class BackendSessions(SessionRegistry):
    def __init__(self, backend: SessionBackend, *, max_sessions: int = 10, idle_ttl_s: float = 1800,
                 memory_mb: int = 1024, cpus: float = 1.0, supervise_every_s: float = 1.0,
                 ready_timeout_s: float = READY_TIMEOUT_S):
        self.backend = backend
        self.max_sessions = max_sessions
        self.idle_ttl_s = idle_ttl_s
        self.memory_mb, self.cpus = memory_mb, cpus
        self.ready_timeout_s = ready_timeout_s
        self.sessions: dict[str, RemoteDesktop] = {}
        self.specs: dict[str, SessionSpec] = {}
        self.pinned: set[str] = set()
        self.listeners: list = []
        # The control plane's own ports: handed to each session server, whose browser must not reach them.
        self.protected_ports: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # What a control plane of this backend and instance left running when it died is ours to end.
        self.orphans_removed = self._remove_orphans()
        self._supervisor = threading.Thread(target=self._supervise, args=(supervise_every_s,),
                                            name="glassdesk-backend-supervisor", daemon=True)
        self._supervisor.start()

    def _remove_orphans(self) -> list[str]:
        handles = self.backend.owned()
        for handle in handles:
            log.info("removing %s, left by a control plane that stopped", handle)
            self.backend.stop(handle)
        return handles


    def create(self, session_id: str | None = None, *, pinned: bool = False,
               network: NetworkPolicy | None = None) -> RemoteDesktop:
        lists = (network or NetworkPolicy()).lists()
        with self._lock:
            session_id = self._claim(session_id)
            spec = SessionSpec(session_id, secrets.token_urlsafe(32), self.memory_mb, self.cpus,
                               tuple(lists["allow"]), tuple(lists["deny"]))
            session = self.sessions[session_id] = RemoteDesktop(session_id, handle="", backend=self.backend.name)
            self.specs[session_id] = spec
            if pinned:
                self.pinned.add(session_id)
        try:
            self._bring_up(session, spec)
        except BaseException:
            with self._lock:
                self.sessions.pop(session_id, None)
                self.specs.pop(session_id, None)
                self.pinned.discard(session_id)
            session.close()
            raise
        with session.lifecycle:
            if session.status == "stopped":  # deleted while it started
                self.backend.stop(session.handle)
                raise SessionUnavailable(f"session {session_id} was deleted while it started")
            session.touch()
            session.status = "ready"
        log.info("session %s ready on the %s backend (%s)", session_id, self.backend.name, session.handle)
        self._notify("created", session_id)
        return session

    def _bring_up(self, session: RemoteDesktop, spec: SessionSpec) -> None:
        """Start a server for ``spec`` and connect ``session`` to it; on failure nothing of it runs."""
        handle = self.backend.start(spec)
        session.handle = handle
        try:
            endpoint = self.backend.wait_ready(handle, self.ready_timeout_s)
            client = RemoteClient(endpoint, spec.session_id)
            if spec.allow or spec.deny:  # the policy the session was created with, before anyone acts
                client.request("PUT", "/network-policy", json={"allow": list(spec.allow), "deny": list(spec.deny)})
        except BaseException:
            self.backend.stop(handle)
            raise
        if session.client is not None:
            session.client.close()
        session.client = client

    def delete(self, session_id: str) -> None:
        with self._lock:
            session = self.get(session_id)
            del self.sessions[session_id]
            self.specs.pop(session_id, None)
            self.pinned.discard(session_id)
        with session.lifecycle:  # a replacement under way finishes first, then is stopped with it
            session.close()
            if session.handle:
                self.backend.stop(session.handle)
        log.info("session %s deleted", session_id)
        self._notify("deleted", session_id)

    def abort_starting(self) -> None:
        """Nothing to kill here: a backend's start is bounded by its own timeout."""

    def close(self) -> None:
        self._stop.set()
        for session_id in list(self.sessions):
            try:
                self.delete(session_id)
            except SessionNotFound:
                pass
        self.backend.close()

    # ------------------------------------------------------------------ supervision

    def _supervise(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            for session in list(self.sessions.values()):
                try:
                    self.check(session)
                    self._expire(session)
                except Exception:
                    log.exception("supervising session %s", session.id)

    def check(self, session: RemoteDesktop) -> bool:
        """If the session's server died: report it, then replace it. Whether it had died."""
        if session.status != "ready" or not session.handle:
            return False
        state = self.backend.state(session.handle)
        if state not in (BackendState.dead, BackendState.gone):
            return False
        with session.lifecycle:
            if session.status != "ready" or session.id not in self.sessions:  # deleted meanwhile
                return False
            session.status = "restarting"
            session.events.append(f"{utcnow():%H:%M:%S} its {self.backend.name} server {session.handle} "
                                  f"is {state.value}; replacing it")
            log.warning("session %s: %s is %s; replacing it", session.id, session.handle, state.value)
            self._notify("died", session.id)
            old = session.handle
            self.backend.stop(old)  # what is left of it (a stopped container) goes now
            try:
                self._bring_up(session, self.specs[session.id])
            except (GlassdeskError, OSError) as exc:
                session.status = "failed"
                session.handle = ""
                session.events.append(f"{utcnow():%H:%M:%S} replacement failed: {exc}; delete the session")
                log.error("session %s could not be replaced: %s", session.id, exc)
                return True
            session.restarts += 1
            session.heal_log.append("desktop")  # a run through it learns its desktop was replaced
            session.live_generation += 1  # live views of the dead server end
            session.takeover_since = None
            session.events.append(f"{utcnow():%H:%M:%S} replaced by {session.handle}")
            session.status = "ready"
        self._notify("restarted", session.id)
        return True

    def _expire(self, session: RemoteDesktop) -> None:
        if session.id in self.pinned or session.busy or session.status != "ready":
            return
        idle = (utcnow() - session.last_used_at).total_seconds()
        if idle > self.idle_ttl_s:
            log.info("session %s idle for %.0fs; expiring", session.id, idle)
            try:
                self.delete(session.id)
            except SessionNotFound:
                pass
