"""A real browser for the pages a person sees: Debian's Chromium, headless, driven by Selenium.

``browser`` starts /usr/bin/chromium through /usr/bin/chromedriver (Debian's ``chromium`` and
``chromium-driver`` packages) with a fresh profile and a fixed 1280x900 viewport, so that the
screenshots are stable. Both paths are given to Selenium and Selenium Manager is kept offline:
nothing downloads a browser or a driver. Without them (or without the ``selenium`` package) the
tests are skipped, except under ``CI=true``, where they fail.

``screenshot(name)`` saves what the browser shows into pytest's temporary directory, or into
``MCP_SCREENSHOTS_DIR`` when it is set (``make screenshots``: docs/_static/screenshots).

The servers, started once for the session: the example site with Bookshelf as its "connect"
provider (``run_site_with_bookshelf``: ``MCP_AUTH=django``), and a second process on the same
database with ``MCP_AUTH=oauth``, whose authorization endpoint shows the consent page and which
lets a page on another origin call it (``client_origin``: client_page.html on 127.0.0.1). Daphne
only: the pages are the same under every ASGI server, which the e2e tests cover.

Selenium is synchronous and the MCP client is not: tests run the browser's part in a thread
(``asyncio.to_thread``), so the client keeps reading its stream meanwhile.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.asgi_servers import free_port
from tests.e2e.conftest import ExampleServer, run_server
from tests.e2e.elicitation_helpers import WAIT, Provider, run_site_with_bookshelf

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # browser_tools skips the tests (fails them under CI)
    webdriver = None

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1280, 900
POLL = 0.05  # seconds between two looks at the page while waiting (Selenium's default is 0.5)
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    # Without these Chromium looks up Google's services at start, and hangs on a closed network.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--window-size={WIDTH},{HEIGHT}",
    "--force-device-scale-factor=1",
    "--hide-scrollbars",
    "--lang=en-US",
]

#: The users the example site gets besides its demo data (password ``<name>-pw``): one per test.
USERS = ["grace", "barbara", "ada", "ken", "mary"]


def missing_tools() -> list[str]:
    """What the browser tests need and this machine lacks."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if webdriver is None:
        missing.append("the selenium package")
    return missing


@pytest.fixture(scope="session", autouse=True)
def browser_tools() -> None:
    """Skip (fail under CI) before any server starts when the browser cannot run."""
    missing = missing_tools()
    if missing:
        message = f"the browser tests need {', '.join(missing)}: apt-get install chromium chromium-driver; pip install -r requirements.txt"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must provide them", pytrace=False)
        pytest.skip(message)


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Headless Chromium with a fresh profile, its viewport WIDTH x HEIGHT."""
    monkeypatch.setenv(
        "SE_OFFLINE", "true"
    )  # the paths are given: Selenium Manager must not fetch anything
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(WAIT)
        # The window size includes the (invisible) browser frame: pin the page's own viewport.
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("MCP_SCREENSHOTS_DIR")
    if not chosen:
        return tmp_path_factory.mktemp("screenshots")
    path = Path(chosen).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def screenshot(browser: Any, screenshot_dir: Path) -> Callable[[str], Path]:
    """``screenshot("consent.png")``: save the browser's viewport under that name."""

    def save(name: str) -> Path:
        path = screenshot_dir / name
        assert browser.save_screenshot(str(path)), f"no screenshot saved at {path}"
        return path

    return save


@pytest.fixture(scope="session")
def servers(
    browser_tools: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ExampleServer, Provider]]:
    with run_site_with_bookshelf(tmp_path_factory.mktemp("browser"), "daphne", USERS) as servers:
        yield servers


@pytest.fixture(scope="session")
def site(servers: tuple[ExampleServer, Provider]) -> ExampleServer:
    return servers[0]


@contextmanager
def serve_client_page() -> Iterator[str]:
    """Serve client_page.html (a browser-based MCP client) at every path of a new origin on
    127.0.0.1, until the block ends: the origin, ``http://127.0.0.1:<port>``."""
    page = (Path(__file__).parent / "client_page.html").read_bytes()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: pytest shows the test's own output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="session")
def client_origin(browser_tools: None) -> Iterator[str]:
    """The origin of a browser-based client the OAuth site allows (``MCP_ALLOWED_ORIGINS``)."""
    with serve_client_page() as origin:
        yield origin


@pytest.fixture(scope="session")
def oauth_site(site: ExampleServer, client_origin: str) -> Iterator[ExampleServer]:
    """The same site and database with ``MCP_AUTH=oauth``, at a URL it knows in advance, and
    ``client_origin`` allowed to call it from a page (CORS)."""
    port = free_port()
    env = {
        **site.env,
        "MCP_AUTH": "oauth",
        "MCP_RESOURCE_URL": f"http://127.0.0.1:{port}/mcp",
        "MCP_ALLOWED_ORIGINS": client_origin,
    }
    with run_server(env, site.log_path.with_name("daphne-oauth.log"), port=port) as server:
        yield server


# -- what a person does in the browser ----------------------------------------------------------------


def find(driver: Any, css: str) -> Any:
    """The element matching ``css`` once the page shows it (WAIT seconds at most)."""
    return WebDriverWait(driver, WAIT, poll_frequency=POLL).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
    )


def page_text(driver: Any) -> str:
    return str(driver.find_element(By.TAG_NAME, "body").text)


def wait_until(driver: Any, condition: Callable[[Any], object], message: str = "") -> Any:
    """``condition(driver)`` once it is true (polled, WAIT seconds at most)."""
    return WebDriverWait(driver, WAIT, poll_frequency=POLL).until(condition, message)


def gone(element: Any) -> Callable[[Any], bool]:
    """A condition: ``element`` has left the page (``expected_conditions.staleness_of``, sturdier).

    Asked while the next page replaces the old one, Chromium may answer for a node it is just
    detaching with an inspector error, not the stale-element error Selenium waits for.
    """

    def left(_driver: Any) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in str(error.msg):
                return True
            raise
        return False

    return left


def click_and_wait(driver: Any, element: Any) -> None:
    """Click ``element`` and wait for the page it leads to (the element goes stale)."""
    element.click()
    wait_until(driver, gone(element), "the page did not change")


def sign_in(driver: Any, username: str, password: str) -> None:
    """Fill in the login form the page shows (the site's, the admin's or Bookshelf's) and submit it."""
    form = find(driver, "#login-form")
    login_page = driver.current_url
    form.find_element(By.NAME, "username").send_keys(username)
    form.find_element(By.NAME, "password").send_keys(password)
    click_and_wait(driver, form.find_element(By.CSS_SELECTOR, "[type=submit]"))
    # Signed in, the site redirects (to ?next=); refused, it shows the login page again.
    assert driver.current_url != login_page, (
        f"signing in as {username} failed:\n{page_text(driver)}"
    )
