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
   own ports on this machine, whatever the lists say (``control_plane``), or if the deny list
   names it (``denied``): an IP pattern matching it (``localhost`` cannot sneak past a deny of
   ``127.0.0.1``), a denied name resolving to it (``http://93.184.215.14/`` is a denied
   ``example.com``), or, for a deny of one of this machine's listeners, any address of this machine.
3. The proxy connects to the first address not refused, never to the name again.

Every spelling of an address is that address: ``0.0.0.0``, ``[::]``, the whole of ``127.0.0.0/8``,
``[::1]``, IPv4-mapped IPv6 (``[::ffff:127.0.0.1]``) and the numeric forms a URL parser and the C
library's resolver accept (``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``) all reach this
machine (:func:`parse_ip`, :func:`is_this_machine`).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
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
    """The address an IP literal stands for, else None. An IPv4-mapped IPv6 address is its IPv4
    address; the numeric spellings a URL parser and the C library read as IPv4 are IPv4 too
    (``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``: see :func:`parse_ipv4_numeric`)."""
    text = host.strip("[]") if host.startswith("[") else host
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return parse_ipv4_numeric(text) if ends_in_a_number(text) else None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return None
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
    return address


def _ipv4_number(part: str) -> int | None:
    """One part of a numeric IPv4 host, the WHATWG URL standard's way: ``0x``/``0X`` hex, a
    leading ``0`` octal, else decimal (``0x`` alone is 0). None: not a number."""
    radix = 10
    if part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) > 1 and part.startswith("0"):
        part, radix = part[1:], 8
    if not part:
        return 0
    digits = {10: "0123456789", 8: "01234567", 16: "0123456789abcdefABCDEF"}[radix]
    if len(part) > 32 or any(c not in digits for c in part):
        return None
    return int(part, radix)


def ends_in_a_number(host: str) -> bool:
    """Whether a URL parser takes ``host`` for an IPv4 address (the WHATWG "ends in a number"
    rule: its last label, a trailing dot aside, is decimal digits or a ``0x`` number). Chromium then
    connects to that address or refuses the URL; a name resolver (glibc's ``inet_aton``) reads the
    same spellings as the same addresses."""
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    return bool(last) and (last.isascii() and last.isdigit() or (last[:2] in ("0x", "0X")
                                                                  and _ipv4_number(last) is not None))


def parse_ipv4_numeric(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address of a numeric host in any spelling a URL parser accepts (the WHATWG IPv4
    parser): one to four parts, each decimal, octal (leading 0) or hex (0x), the last one filling
    the bytes left: ``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1`` and ``127.0.0.1.``
    are all 127.0.0.1. None when it is not one (a part too large, not a number, five parts)."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if not 1 <= len(parts) <= 4 or any(not part for part in parts):
        return None
    numbers: list[int] = []
    for part in parts:
        number = _ipv4_number(part)
        if number is None:
            return None
        numbers.append(number)
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for index, n in enumerate(leading):
        value += n << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


# Addresses that reach this machine whatever its interfaces: 0.0.0.0 (connecting to the
# unspecified address connects to this machine; Linux treats all of 0.0.0.0/8 as "this network"
# and reaches nothing else through it), 127.0.0.0/8, :: and ::1. IPv4-mapped IPv6 addresses
# (::ffff:127.0.0.1) are their IPv4 address (parse_ip); the deprecated IPv4-compatible ones
# (::127.0.0.1, in ::/96) are taken at their IPv4 address too, to be safe.
_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def is_this_machine(address: IPAddress) -> bool:
    """Does ``address`` reach this machine, whatever its interfaces (pure)? Loopback and the
    unspecified address, in every spelling: 0.0.0.0/8, 127.0.0.0/8, ::, ::1, and IPv4-mapped or
    IPv4-compatible IPv6 forms of those. (An interface's own address is this machine's too; only a
    socket can say which those are: desktop.network.proxy.is_local_address.)"""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address in _IPV4_COMPATIBLE:
            address = ipaddress.IPv4Address(int(address))
        else:
            return address.is_loopback or address.is_unspecified
    return address.is_loopback or address in _THIS_NETWORK


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
    if text and ends_in_a_number(text):  # what a URL parser reads as an IPv4 address, and this is not one
        raise PatternError(f"{host!r} is not a valid IP address")
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
    for label in text.split("."):
        if not _LABEL.match(label):
            raise PatternError(f"{host!r} is not a host name (labels are 1-63 of a-z 0-9 - _)")
    if ends_in_a_number(text):  # IDNA made it digits (full-width ones become ASCII): a URL parser's IPv4
        address = parse_ipv4_numeric(text)
        if address is None:
            raise PatternError(f"{host!r} is not a valid IP address")
        return str(address)
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
        if self.ip is not None:
            return is_this_machine(self.ip)
        return self.host == "localhost" or self.host.endswith(".localhost")  # RFC 6761: loopback, always

    @property
    def names_a_host(self) -> bool:
        """A host name that can be looked up (not an IP, a wildcard or ``localhost``): what
        :meth:`NetworkPolicy.by_address` is given the addresses of, to refuse its IP literals too."""
        return self.ip is None and not self.wildcard and not self.names_this_machine


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

    def deny_names(self) -> list[str]:
        """The host names of the deny list, whose addresses :meth:`by_address` refuses too."""
        return list(dict.fromkeys(p.host for p in self.deny if p.names_a_host))

    def by_address(self, address: IPAddress, port: int,
                   is_local: Callable[[IPAddress], bool] | None = None,
                   named: Mapping[str, Collection[IPAddress]] | None = None) -> Refusal | None:
        """What an address the name resolved to (or an IP literal) decides: the deny list.

        - An IP pattern refuses its address.
        - A name pattern refuses the addresses the name resolves to (``named``: name -> addresses,
          for the names of :meth:`deny_names`; looked up by the caller): an IP literal of a
          denied host is that host.
        - A deny of one of this machine's listeners (``127.0.0.1:8240``, ``localhost:8240``, a
          name resolving to this machine) holds for every address that reaches this machine
          (:func:`is_this_machine`, and what ``is_local`` says is one of its interfaces'):
          denying 127.0.0.1:8240 must not let http://0.0.0.0:8240 through."""

        def this_machine(a: IPAddress) -> bool:
            return is_this_machine(a) or bool(is_local and is_local(a))

        local = this_machine(address)
        for pattern in self.deny:
            if pattern.port is not None and pattern.port != port:
                continue
            if pattern.matches_address(address, port):
                return Refusal("denied", f"resolves to {address}, which matches the deny pattern {pattern}")
            addresses = named.get(pattern.host, ()) if named and pattern.names_a_host else ()
            if address in addresses:
                return Refusal("denied", f"{address} is an address of {pattern.host}, which the deny pattern "
                                         f"{pattern} names")
            if local and (pattern.names_this_machine or (pattern.ip is not None and this_machine(pattern.ip))
                          or any(this_machine(a) for a in addresses)):
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


def control_plane(address: IPAddress, port: int, control_ports: Iterable[int],
                  is_local: Callable[[IPAddress], bool] | None = None) -> Refusal | None:
    """Is this one of glassdesk's own ports on this machine? This machine: every spelling of
    loopback and unspecified (:func:`is_this_machine`), and what ``is_local`` says is one of its
    interfaces' addresses."""
    if port in control_ports and (is_this_machine(address) or bool(is_local and is_local(address))):
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


def proxy_environment(proxy_port: int) -> dict[str, str]:
    """The environment that sends proxy-aware programs (curl, wget, pip, git, Python's urllib,
    most HTTP libraries) through the session's proxy, both spellings. ``no_proxy`` is empty:
    loopback goes through the proxy too (in the session's network namespace nothing else
    listens on it; without one, the policy still decides what a loopback URL reaches)."""
    url = f"http://127.0.0.1:{proxy_port}"
    env = {}
    for name, value in (("http_proxy", url), ("https_proxy", url), ("no_proxy", "")):
        env[name] = env[name.upper()] = value
    return env


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
