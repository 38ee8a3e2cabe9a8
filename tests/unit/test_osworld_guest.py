"""The pure parts of OSWorld's guest contract (desktop.osworld.guest): how a request's command,
a window's match and a Chrome launch are read."""

from __future__ import annotations

import pytest

from desktop.osworld.guest import (
    browser_urls,
    code_summary,
    command_argv,
    command_summary,
    expand_home,
    wmctrl_argv,
)

HOME = "/tmp/glassdesk-x/s1/home"


@pytest.mark.parametrize(("command", "shell", "argv"), [
    (["ls", "-la", "~/Desktop"], False, ["ls", "-la", f"{HOME}/Desktop"]),
    ("ls -la '~/My Files'", False, ["ls", "-la", f"{HOME}/My Files"]),
    ("echo $HOME > ~/x", True, ["/bin/sh", "-c", "echo $HOME > ~/x"]),  # the shell expands it
    (["echo", "a b"], True, ["/bin/sh", "-c", "echo a b"]),
    (["python3", "-c", "print('~/not a path')"], False, ["python3", "-c", "print('~/not a path')"]),
    (["cat", "~"], False, ["cat", HOME]),
    (["cat", "~root/x"], False, ["cat", "~root/x"]),  # another user's home is not this user's
])
def test_a_command_is_read_as_osworld_server_reads_it(command, shell, argv):
    assert command_argv(command, shell, HOME) == argv


def test_only_a_leading_tilde_is_the_home():
    assert expand_home("~/a/~/b", HOME) == f"{HOME}/a/~/b"
    assert expand_home("/etc/~x", HOME) == "/etc/~x"


@pytest.mark.parametrize(("action", "strict", "by_class", "flags"), [
    ("a", False, False, "-a"), ("a", True, False, "-Fa"), ("c", False, True, "-xc"), ("c", True, True, "-xFc"),
])
def test_windows_are_matched_with_osworld_servers_wmctrl_flags(action, strict, by_class, flags):
    assert wmctrl_argv(action, "Mousepad", strict=strict, by_class=by_class) == ["wmctrl", flags, "Mousepad"]


def test_a_launch_of_chrome_is_its_urls_and_any_other_program_is_none():
    assert browser_urls(["google-chrome", "--remote-debugging-port=1337", "https://a.test/", "--incognito"]) == \
        ["https://a.test/"]
    assert browser_urls(["/usr/bin/chromium"]) == []
    assert browser_urls(["mousepad", "https://a.test/"]) is None
    assert browser_urls([]) is None


@pytest.mark.parametrize(("code", "summary"), [
    # DesktopEnv's pyautogui action: its preamble left out, the action kept
    ("import pyautogui; import time; pyautogui.FAILSAFE = False; pyautogui.click(960, 540)",
     "pyautogui.click(960, 540)"),
    # what is typed is by its length only (it may be a password)
    ("pyautogui.typewrite('hunter2', interval=0.05)\npyautogui.press('enter')",
     "pyautogui.typewrite(<7 characters>, interval=0.05); pyautogui.press(<5 characters>)"),
    ("x = f'{a};b'  # a comment with a secret\nprint(x)", "x = <5 characters>; print(x)"),  # an f-string: its source
    ('s = """two\nlines"""; open(s)', "s = <9 characters>; open(s)"),
    ("pyautogui.click(", "<16 characters of code>"),  # not Python: said by its size alone
])
def test_code_is_summed_up_with_every_string_by_its_length(code, summary):
    assert code_summary(code) == summary


def test_a_long_summary_is_cut_and_a_command_is_its_program_and_argument_count():
    assert code_summary("; ".join(["pyautogui.press(1)"] * 40), limit=50).endswith("…")
    assert len(code_summary("; ".join(["pyautogui.press(1)"] * 40), limit=50)) == 50
    assert command_summary(["python3", "-c", "import pyautogui; pyautogui.scroll(-3)"]) == "pyautogui.scroll(-3)"
    assert command_summary(["/bin/sh", "-c", "echo password | sudo -S reboot"]) == "sh (2 arguments)"
    assert command_summary([]) == "(nothing)"
