"""noVNC ports from GLASSDESK_NOVNC_PORTS, so a container can publish them."""

from __future__ import annotations

import socket

import pytest

from desktop.stack import StackError, novnc_port, parse_port_range, release_novnc_port


def test_parse_port_range():
    assert parse_port_range("6080-6089") == range(6080, 6090)
    assert parse_port_range("7000") == range(7000, 7001)
    for bad in ("x-y", "6090-6080", "0-10", "6080-70000"):
        with pytest.raises(StackError, match="6080-6089"):
            parse_port_range(bad)


def test_ports_come_from_the_range_skip_busy_ones_and_run_out_clearly(monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        base = probe.getsockname()[1]
    busy = socket.socket()
    try:
        busy.bind(("127.0.0.1", base))
        monkeypatch.setenv("GLASSDESK_NOVNC_PORTS", f"{base}-{base + 2}")
        got = [novnc_port("127.0.0.1"), novnc_port("127.0.0.1")]
        assert got == [base + 1, base + 2]  # base is in use elsewhere; none handed out twice
        with pytest.raises(StackError, match="no free noVNC port"):
            novnc_port("127.0.0.1")
        release_novnc_port(base + 1)
        assert novnc_port("127.0.0.1") == base + 1
    finally:
        busy.close()
        for port in range(base, base + 3):
            release_novnc_port(port)


def test_without_the_variable_any_free_port(monkeypatch):
    monkeypatch.delenv("GLASSDESK_NOVNC_PORTS", raising=False)
    assert 1024 < novnc_port("127.0.0.1") <= 65535
