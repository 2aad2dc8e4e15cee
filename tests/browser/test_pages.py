"""The pages a person sees, in Chromium, while the official MCP client waits on the other side.

Each test plays both halves of a real session: the agent (the SDK's ``Client``, with OAuth or a
session cookie) and its user, in a headless browser, who signs in on the site's own login page
when sent there and answers the page the client was sent to. The client then sees the outcome.
Each test saves a screenshot of the page it answered: the pictures of the docs
(``make screenshots`` writes them to docs/_static/screenshots/).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientMetadata

from example_site.integrations.services import simulated_reviews
from tests.e2e.conftest import ExampleServer
from tests.e2e.elicitation_helpers import (
    BOOKSHELF_PASSWORD,
    BOOKSHELF_USER,
    Recorder,
    call_while_browsing,
    mcp_client,
)
from tests.e2e.oauth_helpers import BrowserHandlers, MemoryTokenStorage, query_of

from .conftest import By, click_and_wait, find, page_text, sign_in, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

PRIDE = "9780000100016"  # Pride and Prejudice, in the demo catalogue
# The client's loopback listener. Nothing listens: the browser only has to be sent there, and the
# client reads the code from the URL, as test_oauth.py's handlers do.
REDIRECT_URI = "http://127.0.0.1:33420/callback"
CLIENT_NAME = "Browser test client"


class InChromium:
    """What ``BrowserHandlers`` asks of a browser, done in Chromium by ``answer(url)`` (in a thread)."""

    def __init__(self, answer: Callable[[str], str]) -> None:
        self.answer = answer

    async def authorize(self, url: str) -> str:
        return await asyncio.to_thread(self.answer, url)


def in_browser(step: Callable[[Any], None]) -> Callable[[Any], Any]:
    """``call_while_browsing``'s ``browse``: the person's part, run in a thread."""
    return lambda request: asyncio.to_thread(step, request)


def heading(driver: Any) -> str:
    return str(find(driver, "h1, h2").text)


def assert_outcome(result: Any) -> None:
    assert not result.is_error, result.content


# -- OAuth: sign in, consent, and the client's first call --------------------------------------------------


async def test_the_user_signs_in_and_allows_the_client_then_the_client_calls_a_tool(
    oauth_site: ExampleServer, browser: Any, screenshot: Callable[[str], Any]
) -> None:
    def approve(url: str) -> str:
        browser.get(url)
        # Not signed in yet: the authorization endpoint sends the person to the login page first.
        assert urlsplit(browser.current_url).path == "/accounts/login/"
        sign_in(browser, "reader", "reader")  # the demo reader; the demo passwords are the names
        consent = find(browser, "form#consent")
        text = consent.text
        assert f"{CLIENT_NAME} wants to use Example Library as you" in text
        assert "You are signed in as reader" in text
        assert "127.0.0.1:33420" in text  # where the answer goes
        assert "Read the books and authors in the catalogue, and see your loans" in text
        screenshot("consent.png")
        consent.find_element(By.NAME, "allow").click()
        wait_until(
            browser,
            lambda driver: driver.current_url.startswith(REDIRECT_URI),
            "not sent back to the client",
        )
        return str(browser.current_url)

    handlers = BrowserHandlers(InChromium(approve))  # type: ignore[arg-type]  # the same authorize() as oauth_helpers.Browser
    storage = MemoryTokenStorage()
    auth = OAuthClientProvider(
        server_url=oauth_site.mcp_url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[REDIRECT_URI],
            client_name=CLIENT_NAME,
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=handlers.redirect_handler,
        callback_handler=handlers.callback_handler,
    )
    async with mcp_client(oauth_site, None, Recorder(), auth=auth, url_mode=False) as client:
        result = await client.call_tool("search_books", {"query": "wells"})
        loans = await client.call_tool("member_loans", {"member_username": "reader"})

    assert_outcome(result)
    assert {book["title"] for book in result.structured_content["books"]} >= {
        "The Time Machine",
        "The War of the Worlds",
    }
    assert_outcome(loans)  # the token acts for reader
    assert len(handlers.redirects) == 1 and query_of(handlers.redirects[0])["code"]
    # The challenge names every scope the endpoint uses, and the SDK asks for all of them.
    assert storage.tokens is not None and set(storage.tokens.scope.split()) == {
        "library:read",
        "library:write",
    }


# -- URL elicitation: a secret, a confirmation, a connection -------------------------------------------------


async def test_the_user_enters_a_secret_on_the_page_and_the_tool_uses_it(
    site: ExampleServer, browser: Any, screenshot: Callable[[str], Any]
) -> None:
    secret = "rv-browser-" + secrets.token_hex(16)

    def enter_key(request: Any) -> None:
        browser.get(request.url)
        sign_in(browser, "grace", "grace-pw")  # the page needs the user the client acts for
        assert heading(browser) == "Connect Book reviews"
        assert request.message in page_text(browser)
        find(browser, "input[name=secret]").send_keys(secret)
        screenshot("elicitation-secret.png")
        click_and_wait(browser, browser.find_element(By.NAME, "accept"))
        assert "Done." in page_text(browser)

    recorder = Recorder()
    async with mcp_client(site, site.login("grace"), recorder) as client:
        result, request = await call_while_browsing(
            client, recorder, "book_reviews", {"isbn": PRIDE}, in_browser(enter_key)
        )
        await recorder.wait_completed(request.elicitation_id)

    assert_outcome(result)
    # The reviews service answered the stored key (the simulated service derives its numbers from
    # it); the key itself reached the client in no message.
    expected = simulated_reviews(secret, PRIDE)
    assert result.structured_content["reviews"] == expected.count
    assert result.structured_content["average_rating"] == expected.average_rating
    assert secret not in recorder.everything_received()


async def test_the_user_declines_then_confirms_on_the_page_and_the_tool_acts_only_then(
    site: ExampleServer, browser: Any, screenshot: Callable[[str], Any]
) -> None:
    def press(button: str, outcome: str) -> Callable[[Any], None]:
        def step(request: Any) -> None:
            browser.get(request.url)
            if browser.find_elements(By.ID, "login-form"):
                sign_in(browser, "barbara", "barbara-pw")
            assert heading(browser) == "Confirm an action"
            assert request.message in page_text(
                browser
            ) and "2 returned loan(s) will be deleted" in page_text(browser)
            if button == "accept":
                screenshot("elicitation-confirm.png")
            click_and_wait(browser, find(browser, f"button[name={button}]"))
            assert outcome in page_text(browser)

        return step

    recorder = Recorder()
    async with mcp_client(site, site.login("barbara"), recorder) as client:
        declined, _ = await call_while_browsing(
            client, recorder, "clear_reading_history", {}, in_browser(press("decline", "Declined."))
        )
        confirmed, last = await call_while_browsing(
            client, recorder, "clear_reading_history", {}, in_browser(press("accept", "Done."))
        )
        await recorder.wait_completed(last.elicitation_id)

    assert declined.structured_content == {
        "outcome": "kept (declined)",
        "deleted": 0,
        "kept_open_loans": 1,
    }
    assert confirmed.structured_content == {
        "outcome": "cleared",
        "deleted": 2,
        "kept_open_loans": 1,
    }


async def test_the_user_connects_bookshelf_and_the_tool_reads_their_list(
    site: ExampleServer, browser: Any, screenshot: Callable[[str], Any]
) -> None:
    def connect(request: Any) -> None:
        browser.get(request.url)
        sign_in(browser, "ada", "ada-pw")  # on the example site: the page checks who opens it
        # Sent on to Bookshelf: its own login page, then its consent page.
        assert find(browser, "h1").text == "Bookshelf"
        sign_in(browser, BOOKSHELF_USER, BOOKSHELF_PASSWORD)
        consent = find(browser, "form#authorizationForm")
        assert "Example Library" in page_text(browser)
        click_and_wait(browser, consent.find_element(By.NAME, "allow"))
        # Back on the example site, which exchanged the code itself.
        assert urlsplit(browser.current_url).netloc == urlsplit(site.base_url).netloc
        assert heading(browser) == "Bookshelf: connected"
        screenshot("elicitation-connect.png")

    recorder = Recorder()
    async with mcp_client(site, site.login("ada"), recorder) as client:
        result, request = await call_while_browsing(
            client, recorder, "sync_reading_list", {}, in_browser(connect)
        )
        await recorder.wait_completed(request.elicitation_id)

    assert_outcome(result)
    assert (
        result.structured_content["account"] == BOOKSHELF_USER
    )  # Bookshelf's name for the user: its data
    assert [item["title"] for item in result.structured_content["items"]][:2] == [
        "Pride and Prejudice",
        "The Hound of the Baskervilles",
    ]


# -- the admin: the client's session and its tool calls ------------------------------------------------


def session_id_of(recorder: Recorder) -> str:
    found = re.search(
        rb"mcp-session-id: ([\x21-\x7e]+)", bytes(recorder.wire.received), re.IGNORECASE
    )
    assert found, "the server gave the client no session"
    return found.group(1).decode()


async def test_staff_see_the_clients_session_and_its_tool_calls_in_the_admin(
    site: ExampleServer, browser: Any, screenshot: Callable[[str], Any]
) -> None:
    def browse_admin(session_id: str) -> None:
        browser.get(f"{site.base_url}/admin/")
        sign_in(browser, "admin", "admin")
        click_and_wait(browser, find(browser, "a[href$='/admin/mcp_django/session/']"))

        # The list: the client's session, its user, its client, still active.
        # The list shows the start of each session's id (the admin's URLs escape it: not those).
        link = wait_until(
            browser, lambda driver: driver.find_element(By.PARTIAL_LINK_TEXT, session_id[:10])
        )
        row = link.find_element(By.XPATH, "./ancestor::tr")
        assert "ken" in row.text and "active" in row.text, row.text
        assert "2025-11-25" in row.text
        screenshot("admin-sessions.png")

        # Its page: who, which client, and its tool calls (the trail is written about a second
        # after the calls: reload until they are there).
        click_and_wait(browser, link)
        assert session_id in page_text(browser)

        def calls_shown(driver: Any) -> bool:
            if "remember_reading_goal" in page_text(driver) and "search_books" in page_text(driver):
                return True
            driver.refresh()
            return False

        wait_until(browser, calls_shown, "the session's page shows no tool calls")
        screenshot("admin-session-detail.png")

        # The audit trail, filtered to this session by the page's link.
        click_and_wait(browser, find(browser, "a[href*='/admin/mcp_django/toolcall/?session_id=']"))
        rows = [tr.text for tr in browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")]
        assert len(rows) == 2, rows
        assert all("ken" in row and " ok " in f" {row} " for row in rows), rows
        assert sorted(
            tool
            for tool in ("remember_reading_goal", "search_books")
            for row in rows
            if tool in row
        ) == ["remember_reading_goal", "search_books"]
        screenshot("admin-toolcalls.png")

    recorder = Recorder()
    async with mcp_client(site, site.login("ken"), recorder) as client:
        kept = await client.call_tool(
            "remember_reading_goal", {"books_per_month": 4, "note": "the classics"}
        )
        found = await client.call_tool("search_books", {"query": "austen"})
        # The session stays open while staff look at it.
        await asyncio.to_thread(browse_admin, session_id_of(recorder))
    assert_outcome(kept)
    assert_outcome(found)
