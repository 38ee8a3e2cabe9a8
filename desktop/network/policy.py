"""The browser's network policy: host patterns, allow and deny lists, and the log of what was
blocked. Pure: no sockets, no processes; the proxy that enforces it is ``desktop.network.proxy``.

A pattern is ``host``, ``host:port``, ``*.domain`` or ``*.domain:port``; an IP literal is a host
(IPv6 in brackets when a port follows: ``[::1]:8080``; bare ``::1`` is also understood).
- Hosts compare case-insensitively, after IDNA (``bücher.de`` is ``xn--bcher-kva.de``), without a
  trailing dot (``example.com.`` is ``example.com``); IPv6 literals compare as addresses, and an
  IPv4-mapped IPv6 address (``::ffff:127.0.0.1``) is the IPv4 address it maps.
- ``*.example.com`` matches every name below ``example.com`` (``a.example.com``,
  ``a.b.example.com``) and NOT ``example.com`` itself: write both to mean both. A wildcard is a
  whole leading label; ``*`` anywhere else, or on an IP literal, is refused.
- Without a port a pattern matches every port.

Deciding a request (``desktop.network.proxy`` does it):
1. A name is judged by the lists first: a deny pattern matching it -> ``denied``; with a
   non-empty allow list, no allow pattern matching it -> ``not_allowed``. An empty allow list
   allows everything not denied. A refused name is not even looked up in DNS; allow patterns
   match the name only.
2. Each address the name resolves to (or the IP literal) is refused if it is one of glassdesk's
   own ports on this machine, whatever the lists say (``control_plane``), or if an IP deny
   pattern matches it (``denied``: ``localhost`` cannot sneak past a deny of ``127.0.0.1``).
3. The proxy connects to the first address not refused, never to the name again.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import idna

from desktop.models import BlockedRequest, Reason

log = logging.getLogger("glassdesk.netpolicy")

PATTERN_HELP = "write host, host:port, *.domain or *.domain:port (IPv6 in brackets before a port: [::1]:8080)"
MAX_PATTERNS = 256
BLOCKED_KEPT = 500  # entries of the blocked-request log kept per session

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")


class PatternError(ValueError):
    """A host pattern (or a host) that cannot be understood; the message says why."""


# ------------------------------------------------------------------------------------ hosts


def parse_ip(host: str) -> IPAddress | None:
    """The address an IP literal stands for (an IPv4-mapped IPv6 address as its IPv4), else None."""
    try:
        address = ipaddress.ip_address(host.strip("[]") if host.startswith("[") else host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return None
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
    return address


def normalize_host(host: str) -> str:
    """The one spelling of a host: lower case ASCII (IDNA), no trailing dot, an IP literal in its
    canonical form (IPv6 without brackets). Raises PatternError for what is not a host name."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    address = parse_ip(text)
    if address is not None:
        return str(address)
    if ":" in text:
        raise PatternError(f"{host!r} is not an IP address")
    if text.endswith("."):  # the root's dot: example.com. is example.com
        text = text[:-1]
    if not text:
        raise PatternError("the host is empty")
    if not text.isascii():
        try:
            text = idna.encode(text, uts46=True, transitional=False).decode()
        except idna.IDNAError as exc:
            raise PatternError(f"{host!r} is not a valid international domain name ({exc})") from None
    text = text.lower()
    if len(text) > 253:
        raise PatternError(f"{host!r} is longer than a host name can be (253 characters)")
    labels = text.split(".")
    for label in labels:
        if not _LABEL.match(label):
            raise PatternError(f"{host!r} is not a host name (labels are 1-63 of a-z 0-9 - _)")
    if labels[-1].isdigit():  # what a URL parser reads as an IPv4 address, and this is not one
        raise PatternError(f"{host!r} is not a valid IP address")
    return text


def split_host_port(text: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port`` or a bare IPv6 literal -> (host, port)."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise PatternError(f"{text!r}: an IPv6 literal opened with '[' must close with ']'")
        host, rest = text[1:end], text[end + 1:]
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise PatternError(f"{text!r}: only ':port' may follow ']'")
        return host, _port(rest[1:], text)
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, _port(port, text)
    return text, None  # no colon, or a bare IPv6 literal (several colons, so no port)


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise PatternError(f"{whole!r}: the port must be a number from 1 to 65535")
    return int(text)


# --------------------------------------------------------------------------------- patterns


@dataclass(frozen=True)
class HostPattern:
    host: str                  # normalised; for a wildcard, the domain below which it matches
    port: int | None = None
    wildcard: bool = False
    ip: IPAddress | None = None

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        if not isinstance(text, str):
            raise PatternError(f"{text!r} is not a string; {PATTERN_HELP}")
        raw = text.strip()
        if not raw:
            raise PatternError(f"the pattern is empty; {PATTERN_HELP}")
        if "://" in raw or any(c in raw for c in "/?#@ \t"):
            raise PatternError(f"{text!r} is not a host pattern (a URL or a path?); {PATTERN_HELP}")
        wildcard = raw.startswith("*.")
        rest = raw[2:] if wildcard else raw
        if "*" in rest:
            raise PatternError(f"{text!r}: '*' may only be the whole first label, as in *.example.com")
        host, port = split_host_port(rest)
        try:
            host = normalize_host(host)
        except PatternError as exc:
            raise PatternError(f"{text!r}: {exc}; {PATTERN_HELP}") from None
        ip = parse_ip(host)
        if wildcard and ip is not None:
            raise PatternError(f"{text!r}: a wildcard names a domain, not an IP address")
        return cls(host, port, wildcard, ip)

    def __str__(self) -> str:
        host = f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host
        return f"{'*.' if self.wildcard else ''}{host}{f':{self.port}' if self.port else ''}"

    def matches(self, host: str, port: int) -> bool:
        """Does this pattern match a request to ``host`` (normalised) on ``port``?"""
        if self.port is not None and self.port != port:
            return False
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host

    def matches_address(self, address: IPAddress, port: int) -> bool:
        """Does this IP pattern match a connection to ``address`` on ``port``?"""
        return self.ip is not None and self.ip == address and (self.port is None or self.port == port)

    @property
    def names_this_machine(self) -> bool:
        """A loopback or unspecified address, or ``localhost``: a listener of this machine, which
        other addresses reach too (0.0.0.0 and [::] connect to this machine, any 127.x to its
        loopback, and an interface's own address to whatever listens on all of them)."""
        if self.wildcard:
            return False
        return self.host == "localhost" or (self.ip is not None and (self.ip.is_loopback or self.ip.is_unspecified))


@dataclass(frozen=True)
class Refusal:
    """Why a request is blocked: a reason code and a sentence."""

    reason: Reason
    detail: str


@dataclass(frozen=True)
class NetworkPolicy:
    allow: tuple[HostPattern, ...] = ()
    deny: tuple[HostPattern, ...] = ()

    @classmethod
    def parse(cls, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None) -> NetworkPolicy:
        """Both lists parsed, or a PatternError naming the list, the place and the pattern."""
        return cls(_parse_list("allow", allow or ()), _parse_list("deny", deny or ()))

    def lists(self) -> dict[str, list[str]]:
        return {"allow": [str(p) for p in self.allow], "deny": [str(p) for p in self.deny]}

    def by_name(self, host: str, port: int) -> Refusal | None:
        """What the name alone decides (``host`` normalised); no DNS. None: not refused so far."""
        for pattern in self.deny:
            if pattern.matches(host, port):
                return Refusal("denied", f"matches the deny pattern {pattern}")
        if self.allow and not any(p.matches(host, port) for p in self.allow):
            return Refusal("not_allowed", "matches no pattern of the allow list")
        return None

    def by_address(self, address: IPAddress, port: int,
                   is_local: Callable[[IPAddress], bool] | None = None) -> Refusal | None:
        """What an address the name resolved to decides: the IP patterns of the deny list. A deny
        of one of this machine's listeners (``127.0.0.1:8240``, ``localhost:8240``) holds for every
        address that reaches this machine (loopback, unspecified, and what ``is_local`` says is one
        of its interfaces'): denying 127.0.0.1:8240 must not let http://0.0.0.0:8240 through."""
        local = address.is_loopback or address.is_unspecified or bool(is_local and is_local(address))
        for pattern in self.deny:
            if pattern.matches_address(address, port):
                return Refusal("denied", f"resolves to {address}, which matches the deny pattern {pattern}")
            if local and (pattern.port is None or pattern.port == port) and (
                    pattern.names_this_machine or (pattern.ip is not None and is_local and is_local(pattern.ip))):
                return Refusal("denied", f"{address} is this machine, which the deny pattern {pattern} names")
        return None


def _parse_list(name: str, patterns: Iterable[str]) -> tuple[HostPattern, ...]:
    if isinstance(patterns, str):
        raise PatternError(f"{name}: give a list of patterns, not one string")
    patterns = list(patterns)
    if len(patterns) > MAX_PATTERNS:
        raise PatternError(f"{name}: at most {MAX_PATTERNS} patterns")
    parsed = []
    for index, text in enumerate(patterns):
        try:
            parsed.append(HostPattern.parse(text))
        except PatternError as exc:
            raise PatternError(f"{name}[{index}]: {exc}") from None
    return tuple(dict.fromkeys(parsed))  # duplicates dropped, order kept


def control_plane(address: IPAddress, port: int, control_ports: Iterable[int], is_local: Callable[[IPAddress], bool]
                  ) -> Refusal | None:
    """Is this one of glassdesk's own ports on this machine? ``is_local``: is the address one of
    this machine's (loopback, unspecified, an interface's)."""
    if port in control_ports and is_local(address):
        return Refusal("control_plane", f"port {port} on this machine is glassdesk's own (its API or a session's "
                                        "live view); the browser never reaches it")
    return None


# ----------------------------------------------------------------------- Chromium's switches


def chromium_args(proxy_port: int) -> list[str]:
    """The switches that send every request of the browser through the session's proxy.

    - ``--proxy-server``: HTTP, HTTPS (CONNECT), WebSockets (CONNECT), workers and service
      workers, the browser's own background requests.
    - ``--proxy-bypass-list=<-loopback>``: removes Chromium's implicit bypass, which otherwise
      sends localhost, 127.0.0.0/8, [::1] and link-local addresses straight out, past the proxy.
    - ``--host-resolver-rules``: the browser itself resolves no name (the proxy does): no DNS
      prefetch, no lookup a page could use to leak data through DNS.
    - QUIC (HTTP/3, UDP) is off. WebRTC's UDP is closed by :data:`WEBRTC_PREFERENCES`, not by a
      switch: Chromium 156 ignores ``--force-webrtc-ip-handling-policy`` (the page's STUN
      requests still left over UDP with it; tests/integration/test_network_policy.py).
    """
    return [
        f"--proxy-server=http://127.0.0.1:{proxy_port}",
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--disable-quic",
    ]


# The profile preference that keeps WebRTC off UDP: it may only use connections through the
# proxy (TCP, via CONNECT, so the policy applies), gathers no host or server-reflexive candidates,
# and sends no STUN/TURN datagram. desktop.browser.chromium writes it into every profile.
WEBRTC_PREFERENCES = {"ip_handling_policy": "disable_non_proxied_udp"}


# ---------------------------------------------------------------------- what was blocked


class BlockLog:
    """The last blocked requests of a session (a ring buffer) and who wants to hear of new ones.
    Thread-safe: the proxy records on its loop, the API reads from its threads."""

    def __init__(self, keep: int = BLOCKED_KEPT):
        self._entries: deque[BlockedRequest] = deque(maxlen=keep)
        self._seq = 0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[BlockedRequest], None]] = []

    def record(self, *, host: str, port: int, refusal: Refusal, method: str | None = None,
               url: str | None = None) -> BlockedRequest:
        with self._lock:
            self._seq += 1
            entry = BlockedRequest(seq=self._seq, ts=time.time(), method=method, host=host, port=port, url=url,
                                   reason=refusal.reason, detail=refusal.detail)
            self._entries.append(entry)
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(entry)
            except Exception:  # a listener's trouble must not break the proxy
                log.exception("blocked-request listener failed")
        return entry

    def clear(self) -> None:
        """Forget the entries (a reset: a fresh session has seen nothing); sequence numbers go on,
        so a reader asking for those after the last one it saw misses nothing new."""
        with self._lock:
            self._entries.clear()

    def since(self, seq: int = 0) -> list[BlockedRequest]:
        """The entries still kept whose seq is above ``seq``, oldest first."""
        with self._lock:
            return [e for e in self._entries if e.seq > seq]

    def subscribe(self, listener: Callable[[BlockedRequest], None]) -> Callable[[], None]:
        """Call ``listener(entry)`` for each request blocked from now on (on the proxy's thread:
        keep it quick). Returns the function that unsubscribes it."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe
