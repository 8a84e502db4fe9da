"""Headless Chromium through Selenium for the tests that read report.html as a reader's browser
shows it (Debian's chromium and chromium-driver, `pip install selenium`; scripts/setup.sh
installs them), or a skip saying what is missing."""

from __future__ import annotations

import os
import shutil

import pytest


def headless_chromium(width: int = 1400, height: int = 900):
    """A headless Chromium whose viewport (the page's visible area) is width x height."""
    webdriver = pytest.importorskip("selenium.webdriver",
                                    reason="selenium is not installed (pip install selenium)")
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not binary or not driver:
        pytest.skip("no chromium and chromedriver here (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    os.environ.setdefault("SE_AVOID_STATS", "true")
    browser = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    # The window's size includes its frame: size the page's viewport itself.
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": height, "deviceScaleFactor": 1,
                             "mobile": False})
    return browser
