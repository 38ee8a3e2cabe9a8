"""Each test starts clean, on the real desktop: page clear-state empties every kind of browser
storage on two origins and leaves one blank tab, and a `glassdesk qa` suite whose tests would leak
into each other (a localStorage counter, a first-visit cookie, a cookie login the server checks)
passes in any order, and fails with keep_state. What the browser kept is read from the site's own
record of what its pages saw (tests/fakes/qa_site.py), never from the page layer's account."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

import pytest

from tests.answers import ok
from tests.fakes.qa_site import QaSite
from vision.cli import main

pytestmark = pytest.mark.x11

P = "/api/v1/sessions/itest/page"


@pytest.fixture(scope="module")
def two_sites():
    sites = QaSite(), QaSite()  # two ports: two origins
    yield sites
    for site in sites:
        site.close()


def origin(site: QaSite) -> str:
    return site.url("").rstrip("/")


def storage_seen(api, site: QaSite, query: str = "") -> dict:
    """What /storage found in the browser (after writing everything, with ``?write=1``)."""
    site.clear()
    ok(api.post(f"{P}/navigate", json={"url": site.url("/storage" + query), "wait_until": "load"}))
    seen = site.wait_for(lambda e: e.get("type") in ("storage", "storage_error"), timeout=20)
    assert seen["type"] == "storage", seen
    return {k: v for k, v in seen.items() if k not in ("type", "page", "origin")}


KEPT = {"cookie": "k=v", "local": "v", "session": "v", "idb": ["qa-db"], "caches": ["qa-cache"], "workers": 1,
        "geolocation": "granted"}
NOTHING = {"cookie": "", "local": None, "session": None, "idb": [], "caches": [], "workers": 0,
           "geolocation": "denied"}  # the clean profile blocks geolocation unless granted


def test_clear_state_empties_every_kind_of_storage_on_two_origins_and_leaves_one_blank_tab(vision_api, desk,
                                                                                           two_sites):
    api = vision_api
    ok(api.post(f"{P}/clear-state"))
    fetched = {}
    for site in two_sites:
        desk.stack.browser.call(lambda pages, site=site: pages.context.grant_permissions(
            ["geolocation"], origin=origin(site)), 10)
        storage_seen(api, site, "?write=1")
        # The same tab again: all of it kept (so the test below can fail), the script from the HTTP cache.
        assert storage_seen(api, site) == KEPT
        fetched[site] = site.cached_fetches
    for site in two_sites:
        ok(api.post(f"{P}/tabs", json={"url": site.url("/")}), 201)
    assert len(ok(api.get(f"{P}/tabs"))) == 3

    cleared = ok(api.post(f"{P}/clear-state", json={}))

    assert {origin(site) for site in two_sites} <= set(cleared["origins"])
    assert cleared["closed_tabs"] == 3 and cleared["duration_ms"] < 5000
    tabs = ok(api.get(f"{P}/tabs"))
    assert [(t["url"], t["active"]) for t in tabs] == [("about:blank", True)] and tabs[0] == cleared["tab"]
    for site in two_sites:
        assert storage_seen(api, site) == NOTHING
        assert site.cached_fetches == fetched[site] + 1  # the HTTP cache was emptied: fetched again


def flow(name: str, start: str, selector: str, expected: str, steps: str = "") -> str:
    return (f"  - name: {name}\n    verify_user_flow: {{start_url: '{start}', steps: [{steps}"
            f"{{action: assert, selector: '{selector}', "
            f"assertion: {{type: text_contains, expected: '{expected}'}}}}]}}\n")


def leaky_tests(site: QaSite) -> list[str]:
    """Tests each of which passes on a clean browser, and at least one of which fails on a browser
    any other has used, whatever the order."""
    sign_in = ("{action: fill, selector: '#who', value: alice}, {action: click, selector: '#enter'}, ")
    return [
        flow("counter starts at one", site.url("/counter"), "#count", "count: 1"),
        flow("counter starts at one again", site.url("/counter"), "#count", "count: 1"),
        flow("first visit", site.url("/visit"), "#visit", "first visit"),
        flow("first visit again", site.url("/visit"), "#visit", "first visit"),
        flow("sign in", site.url("/signin"), "#account", "signed in as alice", sign_in),
        flow("signed out by default", site.url("/account"), "#account", "signed out"),
    ]


def run(api, tmp_path, text: str) -> tuple[int, dict[str, bool]]:
    path, junit = tmp_path / "suite.yaml", tmp_path / "junit.xml"
    path.write_text(text)
    code = main(["qa", str(path), "--url", str(api.base_url), "--junit", str(junit)])
    cases = ET.fromstring(junit.read_text()).find("testsuite").findall("testcase")
    return code, {c.get("name"): c.find("failure") is None and c.find("error") is None for c in cases}


def test_a_leaky_suite_passes_in_any_order_and_leaks_with_keep_state(vision_api, two_sites, tmp_path):
    site = two_sites[0]
    tests = leaky_tests(site)
    orders = [tests, tests[::-1]] + [random.Random(seed).sample(tests, len(tests)) for seed in (1, 2)]
    for order in orders:
        code, passed = run(vision_api, tmp_path, "name: isolated\nsession: itest\ntests:\n" + "".join(order))
        assert code == 0 and all(passed.values()) and len(passed) == 6, passed

    ok(vision_api.post(f"{P}/clear-state"))  # so what leaks below is this run's own
    code, passed = run(vision_api, tmp_path, "name: leaky\nsession: itest\nkeep_state: true\ntests:\n" + "".join(tests))
    assert code == 1
    assert {name for name, good in passed.items() if not good} == {
        "counter starts at one again", "first visit again", "signed out by default"}


def test_before_each_signs_in_after_the_fresh_start_and_after_each_failing_is_reported(vision_api, two_sites,
                                                                                      tmp_path):
    site = two_sites[1]
    text = f"""name: hooks
session: itest
before_each:
  - {{action: navigate, url: '{site.url("/signin")}'}}
  - {{action: fill, selector: '#who', value: bob}}
  - {{action: click, selector: '#enter'}}
after_each:
  - {{action: assert, selector: '#account', assertion: {{type: text_contains, expected: 'signed in as bob'}}}}
tests:
{flow("bob is signed in", site.url("/account"), "#account", "signed in as bob")}\
{flow("the counter is new", site.url("/counter"), "#count", "count: 1")}\
{flow("and new again", site.url("/counter"), "#count", "count: 1")}"""
    code, passed = run(vision_api, tmp_path, text)
    assert code == 1
    # The tests passed: bob's login (before_each) survived into each, the counter did not leak;
    # after_each's check fails where the test left the account page, and says so as a case.
    assert passed == {"bob is signed in": True, "the counter is new": True, "the counter is new · after_each": False,
                      "and new again": True, "and new again · after_each": False}
