"""The network policy's patterns and decisions (desktop.network.policy): pure, no sockets."""

from __future__ import annotations

import ipaddress

import pytest

from desktop.network.policy import (
    BlockLog,
    HostPattern,
    NetworkPolicy,
    PatternError,
    Refusal,
    chromium_args,
    control_plane,
    is_this_machine,
    normalize_host,
    parse_ip,
    proxy_environment,
)


@pytest.mark.parametrize("text, canonical", [
    ("example.com", "example.com"),
    ("Example.COM", "example.com"),
    ("example.com.", "example.com"),
    ("example.com:8080", "example.com:8080"),
    ("*.example.com", "*.example.com"),
    ("*.Example.com.:443", "*.example.com:443"),
    ("bücher.de", "xn--bcher-kva.de"),
    ("*.BÜCHER.de", "*.xn--bcher-kva.de"),
    ("127.0.0.1", "127.0.0.1"),
    ("127.0.0.1:9000", "127.0.0.1:9000"),
    ("::1", "[::1]"),
    ("[::1]", "[::1]"),
    ("[0:0:0::1]:8080", "[::1]:8080"),
    ("[::ffff:127.0.0.1]:80", "127.0.0.1:80"),
    ("  localhost  ", "localhost"),
    ("under_score.example", "under_score.example"),
])
def test_patterns_have_one_spelling(text, canonical):
    assert str(HostPattern.parse(text)) == canonical


@pytest.mark.parametrize("text, says", [
    ("", "empty"),
    ("   ", "empty"),
    ("http://example.com", "not a host pattern"),
    ("example.com/path", "not a host pattern"),
    ("user@example.com", "not a host pattern"),
    ("exa mple.com", "not a host pattern"),
    ("*", "'*' may only be"),
    ("*.", "empty"),
    ("a.*.example.com", "'*' may only be"),
    ("*example.com", "'*' may only be"),
    ("*.127.0.0.1", "names a domain, not an IP address"),
    ("*.[::1]", "names a domain, not an IP address"),
    ("example.com:0", "port"),
    ("example.com:65536", "port"),
    ("example.com:http", "port"),
    ("example.com:", "port"),
    ("[::1", "close"),
    ("[::1]x", "only ':port'"),
    ("1.2.3.4.5", "not a valid IP address"),
    ("1.2.3.256", "not a valid IP address"),
    ("0x1.0x100.0.0", "not a valid IP address"),
    ("4294967296", "not a valid IP address"),
    ("09.1.1.1", "not a valid IP address"),
    ("999.1.1.1", "not a valid IP address"),
    ("ex..ample.com", "not a host name"),
    ("example.com..", "not a host name"),
    ("-", "not a host name"),
    ("a" * 64 + ".com", "not a host name"),
    ("gg::zz", "not an IP address"),
])
def test_bad_patterns_say_why(text, says):
    with pytest.raises(PatternError) as info:
        HostPattern.parse(text)
    assert says in str(info.value)


def test_a_wildcard_matches_every_subdomain_but_not_the_apex():
    pattern = HostPattern.parse("*.example.com")
    assert pattern.matches("a.example.com", 80)
    assert pattern.matches("a.b.example.com", 443)
    assert not pattern.matches("example.com", 80)
    assert not pattern.matches("badexample.com", 80)
    assert not pattern.matches("example.com.evil", 80)


def test_a_port_narrows_a_pattern_and_no_port_means_every_port():
    assert HostPattern.parse("example.com:8080").matches("example.com", 8080)
    assert not HostPattern.parse("example.com:8080").matches("example.com", 80)
    assert HostPattern.parse("example.com").matches("example.com", 1)
    assert HostPattern.parse("*.example.com:443").matches("x.example.com", 443)
    assert not HostPattern.parse("*.example.com:443").matches("x.example.com", 80)


def test_request_hosts_are_normalised_like_patterns():
    assert normalize_host("WWW.Example.COM.") == "www.example.com"
    assert normalize_host("[::FFFF:7f00:1]") == "127.0.0.1"
    assert normalize_host("[0::1]") == "::1"
    assert normalize_host("bücher.de") == "xn--bcher-kva.de"
    with pytest.raises(PatternError):
        normalize_host("a b")


def test_empty_lists_allow_everything():
    policy = NetworkPolicy.parse([], [])
    assert policy.by_name("example.com", 443) is None
    assert policy.by_name("127.0.0.1", 9) is None


def test_deny_wins_over_allow():
    policy = NetworkPolicy.parse(["*.example.com"], ["ads.example.com"])
    refusal = policy.by_name("ads.example.com", 443)
    assert refusal == Refusal("denied", "matches the deny pattern ads.example.com")
    assert policy.by_name("www.example.com", 443) is None


def test_an_allow_list_refuses_everything_else():
    policy = NetworkPolicy.parse(["example.com", "127.0.0.1:8000"])
    assert policy.by_name("example.com", 443) is None
    assert policy.by_name("127.0.0.1", 8000) is None
    assert policy.by_name("127.0.0.1", 8001).reason == "not_allowed"
    assert policy.by_name("www.example.com", 443).reason == "not_allowed"
    # allow patterns match names, not what a name resolves to: localhost is not 127.0.0.1 here
    assert policy.by_name("localhost", 8000).reason == "not_allowed"


def test_ip_deny_patterns_also_match_what_a_name_resolves_to():
    policy = NetworkPolicy.parse([], ["127.0.0.1:9000", "example.com"])
    assert policy.by_name("localhost", 9000) is None  # the name alone says nothing...
    refusal = policy.by_address(ipaddress.ip_address("127.0.0.1"), 9000)  # ...its address does
    assert refusal.reason == "denied" and "127.0.0.1:9000" in refusal.detail
    assert policy.by_address(ipaddress.ip_address("127.0.0.1"), 9001) is None
    assert policy.by_address(ipaddress.ip_address("93.184.216.34"), 80) is None  # name patterns: names only


def test_bad_lists_name_the_list_the_place_and_the_pattern():
    with pytest.raises(PatternError) as info:
        NetworkPolicy.parse(["example.com", "http://evil.test/"], [])
    assert str(info.value).startswith("allow[1]: 'http://evil.test/'")
    with pytest.raises(PatternError) as info:
        NetworkPolicy.parse([], ["ok.test", "*"])
    assert str(info.value).startswith("deny[1]: '*'")
    with pytest.raises(PatternError, match="not one string"):
        NetworkPolicy.parse("example.com", [])
    with pytest.raises(PatternError, match="at most"):
        NetworkPolicy.parse([f"h{i}.test" for i in range(300)], [])


def test_lists_come_back_canonical_without_duplicates():
    policy = NetworkPolicy.parse(["Example.com", "example.com.", "[::1]:80"], ["*.Ads.test"])
    assert policy.lists() == {"allow": ["example.com", "[::1]:80"], "deny": ["*.ads.test"]}


def test_the_control_plane_is_its_ports_on_this_machine():
    local = {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"), ipaddress.ip_address("10.1.2.3")}
    is_local = local.__contains__
    refusal = control_plane(ipaddress.ip_address("10.1.2.3"), 8080, {8080}, is_local)
    assert refusal is not None and refusal.reason == "control_plane"
    assert control_plane(ipaddress.ip_address("127.0.0.1"), 8081, {8080}, is_local) is None
    assert control_plane(ipaddress.ip_address("10.9.9.9"), 8080, {8080}, is_local) is None  # another machine


def test_chromium_is_sent_through_the_proxy_loopback_included():
    args = chromium_args(4321)
    assert "--proxy-server=http://127.0.0.1:4321" in args
    assert "--proxy-bypass-list=<-loopback>" in args  # without it Chromium sends loopback direct
    assert "--disable-quic" in args
    assert any(a.startswith("--host-resolver-rules=MAP * ~NOTFOUND") and "EXCLUDE 127.0.0.1" in a for a in args)


def test_every_profile_keeps_webrtc_off_udp():
    from desktop.browser.chromium import PREFERENCES

    assert PREFERENCES["webrtc"]["ip_handling_policy"] == "disable_non_proxied_udp"


def test_the_blocked_log_is_a_bounded_ring_with_growing_seq():
    log = BlockLog(keep=3)
    heard = []
    unsubscribe = log.subscribe(heard.append)
    log.subscribe(lambda _entry: 1 / 0)  # a failing listener changes nothing for the others
    refusal = Refusal("denied", "matches the deny pattern x.test")
    for port in range(1, 6):
        log.record(host="x.test", port=port, refusal=refusal, method="GET", url=f"http://x.test:{port}/")
    assert [e.seq for e in log.since()] == [3, 4, 5]
    assert [e.port for e in log.since(4)] == [5]
    assert [e.seq for e in heard] == [1, 2, 3, 4, 5]
    assert heard[0].reason == "denied" and heard[0].url == "http://x.test:1/"
    unsubscribe()
    log.record(host="x.test", port=6, refusal=refusal)
    assert len(heard) == 5 and log.since(5)[0].seq == 6
    log.clear()  # a reset: nothing kept, and numbering goes on
    assert log.since() == []
    assert log.record(host="x.test", port=7, refusal=refusal).seq == 7


@pytest.mark.parametrize("pattern", ["127.0.0.1:8240", "localhost:8240", "[::1]:8240", "0.0.0.0:8240"])
@pytest.mark.parametrize("address", ["127.0.0.1", "0.0.0.0", "127.0.0.2", "::1", "::", "10.1.2.3"])
def test_a_deny_of_a_listener_of_this_machine_holds_for_every_address_that_reaches_it(pattern, address):
    """Denying 127.0.0.1:8240 meant that listener: 0.0.0.0, [::], any 127.x and ::1 reach it too
    (connecting to the unspecified address is connecting to this machine), and so does an
    interface's own address when the listener is on all of them (10.1.2.3 is one, here)."""
    policy = NetworkPolicy.parse(deny=[pattern])
    this_machine = {ipaddress.ip_address("10.1.2.3")}
    refusal = policy.by_address(ipaddress.ip_address(address), 8240, lambda a: a in this_machine)
    assert refusal is not None and refusal.reason == "denied"
    assert policy.by_address(ipaddress.ip_address(address), 8241, lambda a: a in this_machine) is None  # other ports


def test_an_address_of_another_machine_is_not_taken_for_this_one():
    policy = NetworkPolicy.parse(deny=["127.0.0.1:8240"])
    assert policy.by_address(ipaddress.ip_address("10.9.9.9"), 8240, lambda a: False) is None
    assert policy.by_address(ipaddress.ip_address("10.9.9.9"), 8240) is None
    # a pattern naming another host is not about this machine, whatever address is asked for
    assert NetworkPolicy.parse(deny=["10.9.9.9:8240"]).by_address(ipaddress.ip_address("0.0.0.0"), 8240) is None


def test_a_deny_of_this_machine_s_own_interface_address_holds_for_loopback_too():
    """In a container, denying its own IP (a listener on all addresses) must not leave 127.0.0.1 open."""
    policy = NetworkPolicy.parse(deny=["10.1.2.3:8240"])
    this_machine = {ipaddress.ip_address("10.1.2.3")}
    for address in ("127.0.0.1", "0.0.0.0", "::1"):
        assert policy.by_address(ipaddress.ip_address(address), 8240, lambda a: a in this_machine) is not None
    assert policy.by_address(ipaddress.ip_address("127.0.0.1"), 8240, lambda a: False) is None  # another machine's


# Spellings of an address: what Chromium's URL parser (the WHATWG IPv4 parser) and glibc's resolver
# (inet_aton) read as the address, the policy reads as the same address.
@pytest.mark.parametrize("spelling, address", [
    ("127.0.0.1", "127.0.0.1"),
    ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("0X7F000001", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("0x7f.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("127.0.1", "127.0.0.1"),
    ("127.0.0.1.", "127.0.0.1"),
    ("0", "0.0.0.0"),
    ("0x", "0.0.0.0"),
    ("1.2.3", "1.2.0.3"),
    ("[::ffff:127.0.0.1]", "127.0.0.1"),
    ("[::ffff:7f00:1]", "127.0.0.1"),
    ("[0:0:0:0:0:0:0:1]", "::1"),
    ("１２７.０.０.１", "127.0.0.1"),  # full-width digits: IDNA makes them ASCII, then an IPv4 address
])
def test_every_spelling_of_an_address_is_that_address(spelling, address):
    assert normalize_host(spelling) == address
    assert str(HostPattern.parse(f"{spelling}:8240")).startswith(address.join("[]") if ":" in address else address)


@pytest.mark.parametrize("name", ["0x1g", "1e5", "example.123a", "a0x1"])
def test_names_that_only_look_numeric_stay_names(name):
    assert normalize_host(name) == name and parse_ip(name) is None


@pytest.mark.parametrize("address", ["0.0.0.0", "0.1.2.3", "127.0.0.1", "127.255.255.254", "::", "::1",
                                     "::ffff:127.0.0.1", "::ffff:0.0.0.0", "::127.0.0.1"])
def test_every_spelling_of_this_machine_is_this_machine(address):
    assert is_this_machine(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["10.0.0.1", "192.0.2.2", "128.0.0.1", "fd00::2", "::ffff:10.0.0.1",
                                     "64:ff9b::7f00:1", "2002:7f00:1::"])
def test_other_addresses_are_not_this_machine(address):
    assert not is_this_machine(ipaddress.ip_address(address))


@pytest.mark.parametrize("spelling", ["0.0.0.0", "0", "127.0.0.2", "127.1", "2130706433", "0x7f000001",
                                      "0177.0.0.1", "[::]", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:0:0]"])
def test_a_denied_listener_is_denied_in_every_spelling_and_so_is_the_control_plane(spelling):
    """The issue's bypass: 127.0.0.1:8240 denied, http://0.0.0.0:8240/ reached it. Each spelling
    is parsed as a request's host is (normalize_host, parse_ip), then decided."""
    address = parse_ip(normalize_host(spelling))
    assert address is not None
    for pattern in ("127.0.0.1:8240", "localhost:8240", "2130706433:8240", "[::ffff:127.0.0.1]:8240"):
        refusal = NetworkPolicy.parse(deny=[pattern]).by_address(address, 8240)
        assert refusal is not None and refusal.reason == "denied", (pattern, spelling)
    refusal = control_plane(address, 8240, {8240})
    assert refusal is not None and refusal.reason == "control_plane"
    assert control_plane(address, 8241, {8240}) is None


def test_an_ip_literal_of_a_denied_name_is_denied():
    """A deny of a name holds for the addresses it resolves to (looked up by the proxy, given as
    ``named``); only its port when it has one, and only the names of the deny list."""
    policy = NetworkPolicy.parse(deny=["evil.test", "shop.test:443", "*.ads.test", "localhost:9"])
    assert policy.deny_names() == ["evil.test", "shop.test"]
    named = {"evil.test": {ipaddress.ip_address("192.0.2.7")}, "shop.test": {ipaddress.ip_address("192.0.2.8")}}
    refusal = policy.by_address(ipaddress.ip_address("192.0.2.7"), 80, named=named)
    assert refusal is not None and refusal.reason == "denied" and "evil.test" in refusal.detail
    assert policy.by_address(ipaddress.ip_address("192.0.2.8"), 443, named=named) is not None
    assert policy.by_address(ipaddress.ip_address("192.0.2.8"), 80, named=named) is None  # another port
    assert policy.by_address(ipaddress.ip_address("192.0.2.9"), 80, named=named) is None  # another host
    assert policy.by_address(ipaddress.ip_address("192.0.2.7"), 80) is None  # nothing looked up: by name only


def test_a_denied_name_of_this_machine_holds_for_every_address_of_this_machine():
    """A deny of ``myhost:8240`` where myhost resolves to 127.0.1.1 (Debian's /etc/hosts) is a deny of
    this machine's listener: 0.0.0.0 and 127.0.0.1 must not get past it."""
    policy = NetworkPolicy.parse(deny=["myhost:8240"])
    named = {"myhost": {ipaddress.ip_address("127.0.1.1")}}
    for address in ("127.0.0.1", "0.0.0.0", "::1"):
        assert policy.by_address(ipaddress.ip_address(address), 8240, named=named) is not None, address
    assert policy.by_address(ipaddress.ip_address("192.0.2.1"), 8240, named=named) is None


def test_proxy_aware_programs_are_sent_through_the_proxy_loopback_included():
    env = proxy_environment(4321)
    assert env["http_proxy"] == env["HTTPS_PROXY"] == "http://127.0.0.1:4321"
    assert env["https_proxy"] == env["HTTP_PROXY"] == "http://127.0.0.1:4321"
    assert env["no_proxy"] == env["NO_PROXY"] == ""
