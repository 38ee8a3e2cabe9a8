"""The fences below the API, in the real Chromium: a model's keystrokes reach the browser without
passing the API's checks (ctrl+l and a typed URL, ctrl+shift+j), so the browser itself refuses
this machine's pages, DevTools and typed javascript: URLs, unless the server allows them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from desktop.actions import Key, Type, Wait
from desktop.browser.chromium import managed_policy_problem
from desktop.session.manager import SessionManager
from desktop.session.stack import StackConfig
from tests.conftest import session_files

pytestmark = pytest.mark.x11

PLAIN = "data:text/html,<title>plain</title><body style='background:white'>plain page</body>"


@pytest.fixture(scope="module")
def sessions():
    """Two desktops of their own: a DevTools-refused dialog must not stay over the shared one."""
    with session_files() as fenced_root, session_files() as open_root:
        fenced = SessionManager(root=fenced_root, max_sessions=1)
        opened = SessionManager(root=open_root, max_sessions=1,
                                stack_config=StackConfig(local_pages=True, page_code=True))
        try:
            yield {"fenced": fenced.create("fenced"), "open": opened.create("open")}
        finally:
            fenced.close()
            opened.close()


def eventually(read, done, timeout_s: float = 10):
    """``read()`` until ``done`` says so or the time is up; the last reading. Loaded CI machines take
    seconds for what a fixed wait of one gave an idle one."""
    deadline = time.monotonic() + timeout_s
    while not done(value := read()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return value


def typed(session, url: str, navigates: bool = True) -> str | None:
    """The URL typed into the address bar as a person (or a model) would; the tab's URL after
    (once it changed, when the URL navigates; a blocked page is a navigation too)."""
    before = session.page_url()
    session.perform(Key(keys=["ctrl+l"]))
    session.perform(Type(text=url + "\n"))
    session.perform(Wait(duration_ms=1000))
    if not navigates:
        return session.page_url()
    return eventually(session.page_url, lambda now: now != before or now.startswith("chrome-error://"))


def title(session) -> str:
    return session.stack.browser.call(lambda pages: pages.summary(), 10).title


def inner_width(session) -> int:
    async def width(pages):
        return await (await pages.need_front()).evaluate("innerWidth")
    return session.stack.browser.call(width, 10)


def test_typed_local_pages_are_blocked_by_default(sessions):
    fenced = sessions["fenced"]
    for url in ("file:///etc/passwd", "chrome://version", "view-source:file:///etc/passwd"):
        landed = typed(fenced, url)
        assert landed == "chrome-error://chromewebdata/", (url, landed)


def test_typed_javascript_and_devtools_do_not_run_code_in_the_page_by_default(sessions):
    fenced = sessions["fenced"]
    typed(fenced, PLAIN)
    assert title(fenced) == "plain"
    typed(fenced, "javascript:document.title='ran'", navigates=False)  # a string result would also replace the page
    assert title(fenced) == "plain" and fenced.page_url().startswith("data:")
    before = inner_width(fenced)
    fenced.perform(Key(keys=["ctrl+shift+j"]))
    fenced.perform(Wait(duration_ms=1500))
    assert inner_width(fenced) == before == 1920, "DevTools docked beside the page"
    titles = [w.title for w in fenced.windows.list()]
    assert not any("DevTools" in t for t in titles), titles  # nor opened in a window of its own
    fenced.perform(Key(keys=["Escape"]))  # Chromium says DevTools is not allowed: dismiss it


def test_a_server_that_allows_local_pages_and_evaluate_lets_them_through(sessions):
    opened = sessions["open"]
    hostname = Path("/etc/hostname")
    assert typed(opened, f"file://{hostname}") == f"file://{hostname}"
    typed(opened, PLAIN)
    typed(opened, "javascript:void(document.title='ran')", navigates=False)
    assert eventually(lambda: title(opened), lambda now: now == "ran") == "ran"
    opened.perform(Key(keys=["ctrl+shift+j"]))  # DevTools docks beside the page: the page narrows
    assert eventually(lambda: inner_width(opened), lambda now: now < 1920) < 1920


def test_the_shared_policies_are_in_force_in_every_session(sessions):
    """docker/chromium-policy.json, installed machine-wide by docker/install-system-deps.sh: no
    extension installs and no download asks where to go, whatever the server allows (read on
    chrome://policy in the session that may open chrome:// pages)."""
    assert managed_policy_problem() is None, managed_policy_problem()
    opened = sessions["open"]
    opened.stack.browser.open_url("chrome://policy")

    async def shown(pages):
        page = await pages.need_front()
        await page.get_by_text("ExtensionInstallBlocklist").first.wait_for(state="attached", timeout=5000)
        return (await page.get_by_text("ExtensionInstallBlocklist").count(),
                await page.get_by_text("PromptForDownload").count())
    assert all(opened.stack.browser.call(shown, 10))
