"""The registry of remote sessions: ``SessionManager``'s job (ids, limits, idle expiry, the
supervisor) when each session is a container, a pod or a process that a backend runs.

A session's server that dies is reported (the session's status and ``events``, and a "died" to the
listeners, which the event bus carries), then replaced under the same id: a new server from the
same spec, the run that was driving it told ``session_unavailable`` by its next round trip and
retried once on the new desktop, as after a local heal. If the replacement cannot start, the
session stays listed as ``failed`` until it is deleted: never silently lost.

The warm pool (``keep_warm(n)``, `glassdesk up --warm N`; desktop.session.pool.WarmPool, the same
pool the local registry keeps) holds ``n`` session servers started ahead, nobody's. A server knows
nothing of the control plane's name for its session: it serves its one session under a fixed name
(desktop.remote.desktop.REMOTE_SESSION) and answers whoever holds its token. So a pooled server
starts from a SessionSpec of its own, ``warm.<hex>`` (outside the id grammar: no session can take
it; a valid Kubernetes label value, which ``_warm-`` is not), and a create that claims it becomes a
``RemoteDesktop`` under the public id on that server's handle and endpoint. What a cold start sets
at start is set at claim, before the session is handed out: the network policy (PUT
/network-policy to the server's own proxy, and, where the backend enforces egress itself, the
backend's fence: ``apply_network_policy``, the Kubernetes NetworkPolicy patched), then the
service's dialog policy, as for a cold start. The spec is recorded under the public id, so a
server that dies later is replaced by a fresh one started under that id.

What keeps the pool's name: the container's, pod's or process's name (its ``handle``) and its
LABEL_SESSION label, which Docker cannot change on a running container. The orphan clean-up goes
by the owner label, not the session's, so it holds; ``handle`` (shown as the session's
``display``, e.g. ``docker:glassdesk-warm-3f2a...``) is what names a session's server, and only a
replacement or a cold start bears the session's own id. A claim that cannot apply the policy
stops the pooled server and starts the session cold (said in its events). A claimed session is
otherwise a fresh one: its server served nothing before, and a deleted session's server is
stopped, never put back.
"""

from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import dataclass, replace

from desktop.errors import GlassdeskError, SessionNotFound, SessionUnavailable
from desktop.network.policy import NetworkPolicy
from desktop.network.servers import ServerRegistry
from desktop.remote.backends.base import BackendState, Endpoint, SessionBackend, SessionSpec
from desktop.remote.desktop import RemoteClient, RemoteDesktop
from desktop.session.manager import SessionRegistry, utcnow
from desktop.session.pool import WarmPool

log = logging.getLogger("glassdesk.backends")

READY_TIMEOUT_S = 120.0
# A pooled server's session id: outside the id grammar (a dot), a valid label value.
WARM_ID_PREFIX = "warm."


@dataclass
class PooledServer:
    """A session server started ahead: its spec (its own id and token), handle, endpoint, and the
    client the claiming session will use (made here: an HTTP client's TLS set-up costs ~100 ms,
    which a claim should not pay)."""

    spec: SessionSpec
    handle: str = ""
    endpoint: Endpoint | None = None
    client: RemoteClient | None = None


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
        # The control plane's own ports: handed to each session server, whose browser must not reach them,
        # and registered for every other glassdesk server of this host (desktop.network.servers).
        self.protected_ports: set[int] = set()
        self.servers = ServerRegistry()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.pool: WarmPool[PooledServer] = WarmPool(
            self._lock, make=self._make_warm, start=self._start_warm, discard=self._discard_warm,
            dead=self._dead_warm, abort=self._discard_warm, in_use=lambda: len(self.sessions),
            limit=lambda: self.max_sessions, what=f"{backend.name} session server")
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


    # ------------------------------------------------------------------ the warm pool

    def _make_warm(self) -> PooledServer:
        return PooledServer(SessionSpec(f"{WARM_ID_PREFIX}{secrets.token_hex(6)}", secrets.token_urlsafe(32),
                                        self.memory_mb, self.cpus))

    def _start_warm(self, pooled: PooledServer) -> None:
        """Start and wait for a pooled server (the handle noted at once, so a shutdown can end it);
        on failure the pool discards it."""
        pooled.handle = self.backend.start(pooled.spec)
        pooled.endpoint = self.backend.wait_ready(pooled.handle, self.ready_timeout_s)
        pooled.client = RemoteClient(pooled.endpoint, pooled.spec.session_id)

    def _discard_warm(self, pooled: PooledServer) -> None:
        if pooled.client is not None:
            pooled.client.close()
        if pooled.handle:
            self.backend.stop(pooled.handle)

    def _dead_warm(self, pooled: PooledServer) -> list[str]:
        try:
            state = self.backend.state(pooled.handle)
        except Exception as exc:  # the backend cannot say (its API away): no verdict, not a death
            log.debug("warm pool: the state of %s is unknown: %s", pooled.handle, exc)
            return []
        return [f"{pooled.handle} is {state.value}"] if state in (BackendState.dead, BackendState.gone) else []

    # ------------------------------------------------------------------ sessions

    def create(self, session_id: str | None = None, *, pinned: bool = False,
               network: NetworkPolicy | None = None) -> RemoteDesktop:
        lists = (network or NetworkPolicy()).lists()
        allow, deny = tuple(lists["allow"]), tuple(lists["deny"])
        with self._lock:
            session_id, pooled = self._claim_warm(session_id, self.ready_timeout_s)
            if pooled is not None:  # its server's token and size; the session's id and policy
                spec = replace(pooled.spec, session_id=session_id, allow=allow, deny=deny)
            else:
                spec = SessionSpec(session_id, secrets.token_urlsafe(32), self.memory_mb, self.cpus, allow, deny)
            session = self.sessions[session_id] = RemoteDesktop(session_id, handle="", backend=self.backend.name)
            self.specs[session_id] = spec
            if pinned:
                self.pinned.add(session_id)
        try:
            if pooled is not None:
                self._take_over(session, pooled, spec)
            else:
                self._bring_up(session, spec)
        except BaseException:
            with self._lock:
                self.sessions.pop(session_id, None)
                self.specs.pop(session_id, None)
                self.pinned.discard(session_id)
                self.pool.notify()  # its place under the limit is free again
            session.close()
            raise
        with session.lifecycle:
            if session.status == "stopped":  # deleted while it started
                self.backend.stop(session.handle)
                raise SessionUnavailable(f"session {session_id} was deleted while it started")
            session.touch()
            session.status = "ready"
        log.info("session %s ready on the %s backend (%s%s)", session_id, self.backend.name, session.handle,
                 ", claimed from the warm pool" if pooled is not None and not session.events else "")
        self._notify("created", session_id)
        return session

    def _take_over(self, session: RemoteDesktop, pooled: PooledServer, spec: SessionSpec) -> None:
        """Make a pooled server ``session``'s: connected under its id, its network policy applied
        (the backend's fence first, then the server's proxy) before anyone can act. A policy that
        cannot be applied stops the pooled server and starts the session cold."""
        session.handle = pooled.handle
        client = pooled.client
        assert client is not None  # the pool hands out only servers _start_warm connected
        client.session_id = spec.session_id  # its name in messages: the session's from now on
        try:
            if spec.allow or spec.deny:
                self.backend.apply_network_policy(pooled.handle, spec)
                client.request("PUT", "/network-policy", json={"allow": list(spec.allow), "deny": list(spec.deny)})
        except (GlassdeskError, OSError) as exc:
            client.close()
            self.backend.stop(pooled.handle)
            session.handle = ""
            message = exc.message if isinstance(exc, GlassdeskError) else str(exc)
            session.events.append(f"{utcnow():%H:%M:%S} the pooled {self.backend.name} server {pooled.handle} could "
                                  f"not take the network policy ({message}); started one cold")
            log.warning("session %s: %s", session.id, session.events[-1])
            self._bring_up(session, spec)
            return
        except BaseException:
            client.close()
            self.backend.stop(pooled.handle)
            raise
        session.client = client

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
            self.pool.notify()  # a place under the limit for the pool
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
        self.pool.close(self.ready_timeout_s)
        for session_id in list(self.sessions):
            try:
                self.delete(session_id)
            except SessionNotFound:
                pass
        self.backend.close()
        self.servers.withdraw()

    # ------------------------------------------------------------------ supervision

    def _supervise(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.pool.check()
            except Exception:
                log.exception("supervising the warm pool")
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
