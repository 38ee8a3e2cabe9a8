"""The browser's own fences as profile preferences (pure): what each server setting blocks, and
that a changed setting replaces the lists a profile kept from before."""

from __future__ import annotations

import json

from desktop.browser.chromium import (
    LOCAL_PAGES,
    MANAGED_POLICY_SOURCE,
    PAGE_CODE,
    download_preferences,
    fence_preferences,
    managed_policy_problem,
    write_preferences,
)


def test_by_default_local_pages_devtools_and_typed_javascript_are_blocked():
    policy = fence_preferences(local_pages=False, page_code=False)["policy"]
    assert set(policy["url_blocklist"]) == {*LOCAL_PAGES, *PAGE_CODE}
    assert "file://*" in policy["url_blocklist"] and "devtools://*" in policy["url_blocklist"]
    assert "javascript:*" in policy["url_blocklist"]
    # a new tab still shows Chromium's new-tab page, the one chrome:// page let through
    assert all(url.startswith("chrome://new") for url in policy["url_allowlist"])


def test_each_server_setting_lifts_only_its_own_fence():
    local = fence_preferences(local_pages=True, page_code=False)["policy"]
    assert local == {"url_blocklist": list(PAGE_CODE), "url_allowlist": []}
    code = fence_preferences(local_pages=False, page_code=True)["policy"]
    assert set(code["url_blocklist"]) == set(LOCAL_PAGES)
    assert fence_preferences(local_pages=True, page_code=True)["policy"]["url_blocklist"] == []


def test_a_changed_setting_replaces_the_lists_a_healed_profile_kept(tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    write_preferences(profile, None, fence_preferences(local_pages=False, page_code=False))
    written = json.loads((profile / "Default" / "Preferences").read_text())
    assert "file://*" in written["policy"]["url_blocklist"]
    assert written["session"]["restore_on_startup"] == 5  # the clean-profile preferences are still there
    write_preferences(profile, None, fence_preferences(local_pages=True, page_code=True))
    written = json.loads((profile / "Default" / "Preferences").read_text())
    assert written["policy"] == {"url_blocklist": [], "url_allowlist": []}


def test_downloads_go_to_the_session_folder_without_asking(tmp_path):
    prefs = download_preferences(tmp_path / "downloads")
    assert prefs["download"] == {"default_directory": str(tmp_path / "downloads"), "prompt_for_download": False,
                                 "directory_upgrade": True}
    assert prefs["savefile"]["default_directory"] == str(tmp_path / "downloads")


def test_the_shared_policy_blocks_extensions_and_download_prompts():
    policy = json.loads(MANAGED_POLICY_SOURCE.read_text())
    assert policy["ExtensionInstallBlocklist"] == ["*"] and policy["ExtensionInstallSources"] == []
    assert policy["PromptForDownload"] is False
    # it would also close the DevTools pipe Playwright drives: DevTools is fenced by URL instead
    assert "DeveloperToolsAvailability" not in policy


def test_a_missing_or_stale_shared_policy_is_reported(tmp_path):
    installed = tmp_path / "glassdesk.json"
    assert "missing" in managed_policy_problem(installed)
    installed.write_text(json.dumps({**json.loads(MANAGED_POLICY_SOURCE.read_text()), "PromptForDownload": True}))
    assert "PromptForDownload" in managed_policy_problem(installed)
    installed.write_text(MANAGED_POLICY_SOURCE.read_text())
    assert managed_policy_problem(installed) is None
