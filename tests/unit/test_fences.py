"""The fences of what an agent may start or open, as pure checks (desktop.x11.windows)."""

import pytest

from desktop.x11.windows import DEFAULT_PROGRAMS, RUNNERS, WindowError, check_program, check_url


@pytest.mark.parametrize("command", ["/bin/sh", "../../bin/sh", "./x", "bin/ls", ".", "..", "-e"])
def test_a_program_is_a_name_not_a_path(command):
    with pytest.raises(WindowError, match="not a path"):
        check_program(command)


# The issue 23 list: each ran a shell or code past the old fence of shell names.
RUNNERS_SEEN = ["sh", "bash", "env", "xargs", "nohup", "setsid", "sudo", "timeout", "nice", "awk", "find",
                "python3", "perl", "node", "gdb", "vim", "ssh", "systemd-run"]


@pytest.mark.parametrize("command", RUNNERS_SEEN)
def test_programs_that_run_others_are_refused_by_default_with_the_reason(command):
    with pytest.raises(WindowError, match="runs other programs or code and is refused unless explicitly allowed"):
        check_program(command)
    check_program(command, frozenset({command}))  # --launch-allow lets it through


def test_the_default_admits_desktop_programs_and_nothing_else():
    check_program("mousepad")
    check_program("xmessage")
    with pytest.raises(WindowError, match="not among the programs launch may start .*--launch-allow adds"):
        check_program("some-unknown-tool")
    assert not DEFAULT_PROGRAMS & RUNNERS


def test_launch_allow_extends_the_default_list():
    allow = frozenset({"xfce4-terminal"})
    check_program("xfce4-terminal", allow)
    check_program("mousepad", allow)  # the default list stays
    with pytest.raises(WindowError, match="refused unless explicitly allowed"):
        check_program("bash", allow)


def test_local_urls_need_the_opt_in():
    for url in ("file:///etc/passwd", "chrome://settings"):
        with pytest.raises(WindowError, match="refused"):
            check_url(url)
        check_url(url, allow_local=True)
    check_url("https://example.test/")
    with pytest.raises(WindowError, match="must start with") as refused:
        check_url("javascript:alert(1)")
    # Only what this server accepts is listed as accepted.
    assert "one of http://, https://, about:, data: (file:// and chrome:// too on a server with " \
           "--allow-local-urls)" in str(refused.value)
    with pytest.raises(WindowError, match=r"one of http://, https://, file://, about:, data:, chrome://$"):
        check_url("javascript:alert(1)", allow_local=True)
