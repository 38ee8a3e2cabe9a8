"""The browser's --disable-features switch: Chromium honours only the last one given, so ours must
carry every feature Playwright's own switch disables (read from the installed driver)."""

import re
from pathlib import Path

import playwright

from desktop.browser.chromium import (
    MEMORY_DISABLED_FEATURES,
    MEMORY_ENABLED_FEATURES,
    PLAYWRIGHT_DISABLED_FEATURES,
    PLAYWRIGHT_ENABLED_FEATURES,
    disable_features_switch,
    enable_features_switch,
)


def _driver_features(name: str) -> list[str]:
    """The feature names of Playwright's ``disabledFeatures`` or ``enabledFeatures`` list."""
    lib = Path(playwright.__file__).parent / "driver" / "package" / "lib"
    for path in sorted(lib.rglob("*.js")):
        text = path.read_text(errors="replace")
        found = re.search(name + r" = (?:\(\) => )?\[(.*?)\]", text, re.S)
        if found:
            body = re.sub(r"//[^\n]*", "", found.group(1))
            return re.findall(r'"([A-Za-z0-9]+)"', body)
    raise AssertionError(f"Playwright's chromiumSwitches ({name}) not found in the installed driver")


def _driver_disabled_features() -> list[str]:
    return _driver_features("disabledFeatures")


def test_the_switch_keeps_every_feature_playwright_disables():
    driver = _driver_disabled_features()
    assert driver, "the driver's list was read"
    assert set(driver) <= set(PLAYWRIGHT_DISABLED_FEATURES), set(driver) - set(PLAYWRIGHT_DISABLED_FEATURES)


def test_the_switch_is_one_list_of_both_without_repeats():
    switch = disable_features_switch()
    assert switch.startswith("--disable-features=")
    names = switch.removeprefix("--disable-features=").split(",")
    assert len(names) == len(set(names))
    assert set(names) == set(PLAYWRIGHT_DISABLED_FEATURES) | set(MEMORY_DISABLED_FEATURES)


def test_the_enable_switch_keeps_every_feature_playwright_enables():
    driver = _driver_features("enabledFeatures")
    assert driver, "the driver's list was read"
    assert set(driver) <= set(PLAYWRIGHT_ENABLED_FEATURES), set(driver) - set(PLAYWRIGHT_ENABLED_FEATURES)
    names = enable_features_switch({}).removeprefix("--enable-features=").split(",")
    assert set(names) == set(PLAYWRIGHT_ENABLED_FEATURES) | set(MEMORY_ENABLED_FEATURES)


def test_the_legacy_screenshot_switch_of_playwright_is_honoured():
    names = enable_features_switch({"PLAYWRIGHT_LEGACY_SCREENSHOT": "1"}).split("=", 1)[1].split(",")
    assert "CDPScreenshotNewSurface" not in names and "NetworkServiceInProcess2" in names
