"""A tab whose renderer dies is healed as a dead Chromium is (issue 33, item 4): the page layer sees
Playwright's ``crash``, opens the tab again at its last URL, closes the dead one, says so in the
console and in the session's heals; page operations meanwhile answer 503 (worth a retry), not 422;
a run in progress gets a ``desktop_healed`` step and, finished, says ``done_after_heal``.

The renderer is killed for real, by DevTools' ``Page.crash`` (what an out-of-memory kill by the
session's cgroup does to it, without the minutes of allocating)."""

from __future__ import annotations

import asyncio
import time

import pytest

from desktop.actions import Key
from desktop.errors import PageUnavailable, SessionNotFound
from tests.fakes import testpage
from vision.actions import Done
from vision.models import ActRequest
from vision.providers.function import Context, FunctionProvider, calls

pytestmark = pytest.mark.x11

SID = "tabcrash"


@pytest.fixture(scope="module")
def crashy(manager, desk):
    session = manager.create(SID)
    yield session
    try:
        manager.delete(SID)
    except SessionNotFound:
        pass


@pytest.fixture(scope="module")
def site():
    served = testpage.TestPage()
    yield served
    served.close()


def crash_front_tab(session) -> None:
    """Kill the renderer of the tab in front, as an out-of-memory kill would."""

    async def crash(pages) -> None:
        page = await pages.front()
        cdp = await pages.context.new_cdp_session(page)
        try:
            await asyncio.wait_for(cdp.send("Page.crash"), 2)  # never answers: the renderer is gone
        except Exception:
            pass

    session.stack.browser.call(crash, 10)


def wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"not within {seconds:.0f}s: {what}"
        time.sleep(0.05)
    return found


def test_a_crashed_tab_is_opened_again_at_its_url_and_the_session_says_so(crashy, site, services):
    crashy.run_settled(lambda: crashy.open_url(site.url))
    site.wait_for(lambda e: e.get("type") == "loaded", timeout=30)
    site.clear()
    heals = len(crashy.heals())
    crash_front_tab(crashy)
    wait_for(lambda: len(crashy.heals()) > heals, 30, "the crashed tab to be healed")
    assert crashy.heals()[heals:] == ["tab"]
    site.wait_for(lambda e: e.get("type") == "loaded", timeout=30)  # the page loaded again, for real
    state = services.desktops.pages.state(SID)
    assert state.url == site.url and len(state.tabs) == 1, state  # the dead tab is closed
    console = services.desktops.pages.console(SID)
    assert any("crashed and was opened again at " + site.url in e["text"] for e in console), console
    assert crashy.status == "ready"


def test_an_operation_on_a_crashed_tab_is_unavailable_for_now_not_a_bad_request(crashy, site, services,
                                                                                   monkeypatch):
    crashy.run_settled(lambda: crashy.open_url(site.url))
    # Hold the reopening back, so the operation meets the dead tab (it takes a fraction of a second).
    from desktop.browser import pages as pages_module

    release = asyncio.Event()
    real_reopen = pages_module.Pages._reopen

    async def held(self, crashed, url):
        await release.wait()
        await real_reopen(self, crashed, url)

    monkeypatch.setattr(pages_module.Pages, "_reopen", held)
    heals = len(crashy.heals())
    crash_front_tab(crashy)
    with pytest.raises(PageUnavailable) as unavailable:
        services.desktops.pages.navigate(SID, "reload", None, "load", 5000)
    assert unavailable.value.status == 503 and unavailable.value.retry_after, unavailable.value
    assert "crashed" in unavailable.value.message
    crashy.stack.browser.call(lambda pages: _set(release), 5)
    wait_for(lambda: len(crashy.heals()) > heals, 30, "the crashed tab to be healed")
    assert services.desktops.pages.state(SID).url == site.url


async def _set(event: asyncio.Event) -> None:
    event.set()


def test_a_run_in_progress_gets_a_healed_step_and_ends_done_after_heal(crashy, site, services):
    crashy.run_settled(lambda: crashy.open_url(site.url))
    heals = len(crashy.heals())

    def model(ctx: Context):
        if ctx.turn == 2:  # the tab dies while the model thinks about its second step
            crash_front_tab(crashy)
            wait_for(lambda: len(crashy.heals()) > heals, 30, "the crashed tab to be healed")
        return calls(Key(keys=["shift"]), Done(answer="went on")) if ctx.turn >= 3 else calls(Key(keys=["shift"]))

    result = services.act(SID, ActRequest(instruction="press shift while the tab crashes", max_steps=6),
                          provider=FunctionProvider(model))
    assert result.status == "done_after_heal", result.model_dump_json()
    healed = [s for s in result.steps if s.error and s.error["code"] == "desktop_healed"]
    assert len(healed) == 1 and healed[0].error["message"].startswith("healed: tab; lost: the page " + site.url)
    assert services.store.verify(result.trace_id).ok
