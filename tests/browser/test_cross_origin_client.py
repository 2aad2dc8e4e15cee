"""A browser-based MCP client on another origin, as the MCP Inspector's web UI is, in Chromium.

client_page.html does what such a client does, with fetch() from its own origin: the 401 and its
``resource_metadata``, both metadata documents, dynamic registration, PKCE S256 and the
authorization endpoint with ``resource``; back on its redirect URI it checks ``state`` and ``iss``,
exchanges the code, then ``initialize`` and ``tools/list`` with the bearer token, and one
``tools/call`` of 2026-07-28 with its ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` headers. The person's
part (sign in, allow) is done here, on the site's own pages. Every step needs the site's CORS
answers (``MCP_ALLOWED_ORIGINS``); a page on an origin not in the list stops at its first fetch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from selenium.common.exceptions import TimeoutException

from tests.e2e.conftest import ExampleServer

from .conftest import By, find, page_text, serve_client_page, sign_in, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def until(browser: Any, condition: Callable[[Any], object], failure: str) -> Any:
    """``wait_until``, failing with what the page and its console show by then."""
    try:
        return wait_until(browser, condition)
    except TimeoutException:
        pytest.fail(
            f"{failure}; the page shows:\n{page_text(browser)}\nits console:\n{console(browser)}"
        )


def open_client(browser: Any, origin: str, site: ExampleServer) -> None:
    browser.get(f"{origin}/?{urlencode({'mcp': site.mcp_url})}")


def outcome(browser: Any) -> str:
    """What the page ends with: its tools once listed, or its error (WAIT seconds at most)."""
    return str(
        until(
            browser,
            lambda driver: driver.find_elements(
                By.CSS_SELECTOR, "#tools[data-done], #error:not(:empty)"
            ),
            "no outcome",
        )[0].text
    )


def console(browser: Any) -> str:
    try:
        return "\n".join(entry["message"] for entry in browser.get_log("browser"))
    except Exception as error:  # only a help when a test fails
        return f"(no console log: {error})"


def test_a_page_on_an_allowed_origin_signs_in_with_oauth_and_lists_the_tools(
    oauth_site: ExampleServer, client_origin: str, browser: Any
) -> None:
    open_client(browser, client_origin, oauth_site)

    # The page discovered and registered, and sent the window to the authorization endpoint,
    # which sends a person who is not signed in to the site's login page first.
    def on_login_or_failed(driver: Any) -> object:
        return urlsplit(driver.current_url).path == "/accounts/login/" or driver.find_elements(
            By.CSS_SELECTOR, "#error:not(:empty)"
        )

    until(browser, on_login_or_failed, "not sent to sign in")
    assert urlsplit(browser.current_url).path == "/accounts/login/", (
        f"{page_text(browser)}\n{console(browser)}"
    )
    assert urlsplit(browser.current_url).netloc == urlsplit(oauth_site.base_url).netloc
    sign_in(browser, "reader", "reader")
    consent = find(browser, "form#consent")
    assert "Cross-origin page wants to use Example Library as you" in consent.text
    consent.find_element(By.NAME, "allow").click()
    until(
        browser,
        lambda driver: driver.current_url.startswith(f"{client_origin}/callback?"),
        "not sent back to the page",
    )

    shown = outcome(browser)
    assert not browser.find_element(By.ID, "error").text, (
        f"{page_text(browser)}\n{console(browser)}"
    )
    tools = shown.split("\n")
    assert "search_books" in tools and "member_loans" in tools, shown
    assert "session: yes" in page_text(browser)  # it read Mcp-Session-Id: an exposed header
    # A 2026-07-28 call's Mcp-Method, Mcp-Name and Mcp-Param-Region passed the preflight.
    assert "2026-07-28 call: books in eu" in page_text(browser)


def test_a_page_on_an_origin_not_allowed_fails_at_its_first_fetch(
    oauth_site: ExampleServer, client_origin: str, browser: Any
) -> None:
    with serve_client_page() as stranger:
        assert stranger != client_origin
        open_client(browser, stranger, oauth_site)
        shown = outcome(browser)

    # The preflight of the first POST /mcp is refused: fetch() rejects, the page never gets further.
    assert shown.startswith(
        "Error: POST /mcp without a token: fetch failed: TypeError: Failed to fetch"
    ), f"{shown}\n{console(browser)}"
    assert urlsplit(browser.current_url).netloc == urlsplit(stranger).netloc
    assert not browser.find_elements(By.CSS_SELECTOR, "#tools li")
