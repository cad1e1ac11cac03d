"""A real headless Chromium for the console's tests, driven by Selenium through chromedriver.

tests/e2e/console.rs starts the servers and passes, in the environment: WASMRPC_URL (keyless,
the examples registered), WASMRPC_KEYED_URL with WASMRPC_TENANT_KEY and WASMRPC_ADMIN_KEY,
WASMRPC_UPLOAD_WASM, the browser's paths (WASMRPC_CHROMIUM, WASMRPC_CHROMEDRIVER,
WASMRPC_BROWSER_LD_PATH) and WASMRPC_SCREENSHOTS.
"""

import os
import pathlib

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

# Console messages the browser logs by itself for answers a test provoked on purpose (a 400
# from a bad input, the 401 that brings up the key prompt…); anything else SEVERE fails a test.
PROVOKED = ("the server responded with a status of",)


def env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these through `cargo test --test e2e console`")
    return value


@pytest.fixture
def url():
    return env("WASMRPC_URL")


@pytest.fixture
def keyed_url():
    return env("WASMRPC_KEYED_URL")


def new_browser(width=1280, height=900):
    options = webdriver.ChromeOptions()
    options.binary_location = env("WASMRPC_CHROMIUM")
    for flag in (
        "--headless=new",
        "--no-sandbox",  # the tests may run as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(
        executable_path=env("WASMRPC_CHROMEDRIVER"),
        env={**os.environ, "LD_LIBRARY_PATH": env("WASMRPC_BROWSER_LD_PATH")},
    )
    return webdriver.Chrome(options=options, service=service)


class Page:
    """One browser tab on the console, with the waits the tests need."""

    def __init__(self, driver, base):
        self.driver = driver
        self.base = base
        self.allowed_errors = list(PROVOKED)

    def open(self, fragment=""):
        self.driver.get(f"{self.base}/ui{fragment}")

    def wait(self, condition, timeout=10, what="the page"):
        # The activity page redraws every 2 s: an element found a moment ago may be replaced.
        return WebDriverWait(self.driver, timeout, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda d: condition(d), message=f"timed out waiting for {what}"
        )

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def visible(self, css, timeout=10):
        return self.wait(
            lambda d: next((e for e in d.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()), False),
            timeout,
            css,
        )

    def text(self, css):
        return self.find(css).text

    def set_value(self, css, value):
        field = self.find(css)
        field.clear()
        field.send_keys(value)
        return field

    def screenshot(self, name):
        folder = pathlib.Path(env("WASMRPC_SCREENSHOTS"))
        folder.mkdir(parents=True, exist_ok=True)
        # The whole page, not only what the window shows: the window grows to the page's
        # height for the shot.
        size = self.driver.get_window_size()
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(size["width"], max(size["height"], min(height + 140, 4000)))
        self.driver.save_screenshot(str(folder / f"{name}.png"))
        self.driver.set_window_size(size["width"], size["height"])

    def console_errors(self):
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE" and not any(a in entry["message"] for a in self.allowed_errors)
        ]


def open_page(base, width=1280, height=900):
    """A tab on `base`'s console; at its end, the tab's console must hold no unexpected error."""
    driver = new_browser(width, height)
    page = Page(driver, base)
    yield page
    errors = page.console_errors()
    driver.quit()
    assert errors == [], f"the browser's console reported errors: {errors}"


@pytest.fixture
def page(url):
    yield from open_page(url)


@pytest.fixture
def keyed_page(keyed_url):
    yield from open_page(keyed_url)


@pytest.fixture
def phone_page(url):
    yield from open_page(url, 390, 844)
