"""The fences of what an agent may start or open, as pure checks (desktop.x11.windows)."""

import pytest

from desktop.x11.windows import WindowError, check_program, check_url


@pytest.mark.parametrize("command", ["/bin/sh", "../../bin/sh", "./x", "bin/ls", ".", "..", "-e"])
def test_a_program_is_a_name_not_a_path(command):
    with pytest.raises(WindowError, match="not a path"):
        check_program(command)


def test_shells_are_refused_unless_allowed():
    with pytest.raises(WindowError, match="refused unless explicitly allowed"):
        check_program("bash")
    check_program("bash", frozenset({"bash"}))
    check_program("mousepad")


def test_an_allowlist_admits_only_its_programs():
    with pytest.raises(WindowError, match="not in the allowed programs"):
        check_program("mousepad", frozenset({"xfce4-terminal"}))
    check_program("xfce4-terminal", frozenset({"xfce4-terminal"}))


def test_local_urls_need_the_opt_in():
    for url in ("file:///etc/passwd", "chrome://settings"):
        with pytest.raises(WindowError, match="refused"):
            check_url(url)
        check_url(url, allow_local=True)
    check_url("https://example.test/")
    with pytest.raises(WindowError, match="must start with"):
        check_url("javascript:alert(1)")
