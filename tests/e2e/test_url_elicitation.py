"""URL-mode elicitation, per-user secrets, third-party OAuth and per-user state, live.

The example site runs with ``MCP_AUTH=django`` on its own database, at a URL it knows in
advance (the pages' URLs are built from ``MCP_RESOURCE_URL``), with ``CONNECT_PROVIDERS``
pointing at Bookshelf, a second Django project (tests/e2e/provider) with its own OAuth server,
also on loopback. The official SDK client carries a user's session cookie and declares URL
elicitation through its elicitation callback; a ``Browser`` signed in as the same user, in its
own session, opens the pages the client is sent to and fills them in.

The tools are the example site's (example_site/integrations/mcp.py): ``book_reviews`` (a
secret), ``clear_reading_history`` (a confirmation), ``remember_reading_goal`` /
``reading_goal`` (``user_state``) and ``sync_reading_list`` (a Bookshelf connection). Each test
uses its own users, so that what one stores does not change what another sees.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from mcp import Client, MCPError, UrlElicitationRequiredError
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientMetadata
from mcp.types import TextContent

from example_site.integrations.services import simulated_reviews
from tests.asgi_servers import free_port

from .conftest import ExampleServer, manage, run_server
from .elicitation_helpers import (
    BOOKSHELF_PASSWORD,
    BOOKSHELF_USER,
    CLIENT_ID,
    WAIT,
    Browser,
    Provider,
    Recorder,
    call_while_browsing,
    mcp_client,
    run_site_with_bookshelf,
)
from .oauth_helpers import Browser as OAuthBrowser
from .oauth_helpers import BrowserHandlers, MemoryTokenStorage

pytestmark = pytest.mark.e2e

USERS = ["ada", "alan", "barbara", "edsger", "grace", "ken", "linus"]
SECRET = "rv-live-" + secrets.token_hex(16)  # the reviews-service key the user types on the page
PRIDE = "9780000100016"  # Pride and Prejudice, in the demo catalogue
HOUND = "9780000500021"  # The Hound of the Baskervilles, its one copy on loan to alice
UNKNOWN_ISBN = "9781111111111"

PROVIDER_TOKENS = """
import json
from oauth2_provider.models import AccessToken, RefreshToken
print(json.dumps({"access": [t.token for t in AccessToken.objects.all()], "refresh": [t.token for t in RefreshToken.objects.all()]}))
"""

ALLOW_REDIRECT = """
from oauth2_provider.models import Application
app = Application.objects.get(client_id={client_id!r})
app.redirect_uris += " " + {redirect_uri!r}
app.save(update_fields=["redirect_uris"])
"""

EXPIRE = """
from datetime import timedelta
from django.utils import timezone
from mcp_django.models import Elicitation
assert Elicitation.objects.filter(pk={pk!r}).update(expires_at=timezone.now() - timedelta(seconds=1)) == 1
"""


# -- fixtures -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers(
    asgi_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ExampleServer, Provider]]:
    with run_site_with_bookshelf(
        tmp_path_factory.mktemp("url-elicitation"), asgi_server, USERS
    ) as servers:
        yield servers


@pytest.fixture(scope="module")
def site(servers: tuple[ExampleServer, Provider]) -> ExampleServer:
    return servers[0]


@pytest.fixture(scope="module")
def provider(servers: tuple[ExampleServer, Provider]) -> Provider:
    return servers[1]


def browser_for(site: ExampleServer, username: str, provider: Provider | None = None) -> Browser:
    credentials = {site.base_url: (username, f"{username}-pw")}
    if provider is not None:
        credentials[provider.base_url] = (BOOKSHELF_USER, BOOKSHELF_PASSWORD)
    return Browser(credentials)


def stored_bytes(site: ExampleServer) -> bytes:
    """The example site's whole SQLite database as it is on disk (with its WAL)."""
    path = Path(site.env["SQLITE_PATH"])
    return b"".join(
        p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists()
    )


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def assert_clean_url(url: str, site: ExampleServer, username: str, suffix: str) -> None:
    """A page of this site, named by an opaque id only: no PII, no credential, no query."""
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == site.base_url
    assert parts.path.startswith("/mcp/elicitations/") and parts.path.endswith(suffix), url
    assert not parts.query and not parts.fragment and username not in url


# -- a secret for another service ------------------------------------------------------------------------


async def test_secret_page_then_the_tool_uses_the_key_and_a_new_session_reuses_it(
    site: ExampleServer,
) -> None:
    recorder = Recorder()
    cookies = site.login("grace")
    async with browser_for(site, "grace") as browser:
        await browser.sign_in(site.base_url)  # the user's own browser session, not the client's

        async def enter_key(request: Any) -> None:
            page = await browser.visit(request.url)
            assert "Book reviews" in page.text and request.message in page.text
            done = await browser.submit(page, "accept", secret=SECRET)
            assert done.status_code == 200 and "Done." in done.text

        async with mcp_client(site, cookies, recorder) as client:
            result, request = await call_while_browsing(
                client, recorder, "book_reviews", {"isbn": PRIDE}, enter_key
            )
            await recorder.wait_completed(request.elicitation_id)
            assert client.session.protocol_version == "2025-11-25"

    assert not result.is_error, text_of(result)
    expected = simulated_reviews(SECRET, PRIDE)
    assert result.structured_content == {
        "isbn": PRIDE,
        "title": "Pride and Prejudice",
        "reviews": expected.count,
        "average_rating": expected.average_rating,
        "source": "reviews service (simulated)",
    }
    assert (
        request.mode == "url"
        and request.elicitation_id
        and request.message == "Connect the reviews service: enter your API key."
    )
    assert_clean_url(request.url, site, "grace", "/secret/")
    assert recorder.completed_ids() == [request.elicitation_id]

    # A new session (hosted clients open one per call): the key is reused, nobody is asked.
    again = Recorder()
    async with mcp_client(site, site.login("grace"), again) as client:
        second = await client.call_tool("book_reviews", {"isbn": HOUND})
    assert not second.is_error, text_of(second)
    assert again.url_requests == []
    assert second.structured_content["reviews"] == simulated_reviews(SECRET, HOUND).count

    # The key was typed into the page only: in no MCP message, no log line, and not in clear at rest.
    for seen in (recorder, again):
        assert SECRET not in seen.everything_received()
    assert SECRET not in site.log()
    assert SECRET.encode() not in stored_bytes(site)


async def test_in_2026_07_28_the_page_is_an_input_request_and_the_retry_finds_it_done(
    site: ExampleServer,
) -> None:
    """No elicitationId, no completion notification, no -32042: the client is sent to the page by an
    input-required result, and its retry (another POST, no session) continues once the page is done."""
    recorder = Recorder()
    key = "rv-ada-" + secrets.token_hex(12)
    async with browser_for(site, "ada") as browser:
        await browser.sign_in(site.base_url)

        async def enter_key(request: Any) -> None:
            page = await browser.visit(request.url)
            assert request.message in page.text
            assert "Done." in (await browser.submit(page, "accept", secret=key)).text

        async with mcp_client(site, site.login("ada"), recorder, mode="2026-07-28") as client:
            result, request = await call_while_browsing(
                client, recorder, "book_reviews", {"isbn": PRIDE}, enter_key
            )
            assert client.protocol_version == "2026-07-28"
            # The key is kept for the user: the next call asks nothing.
            again = await client.call_tool("book_reviews", {"isbn": HOUND})
    assert not result.is_error, text_of(result)
    assert result.structured_content["reviews"] == simulated_reviews(key, PRIDE).count
    assert again.structured_content["reviews"] == simulated_reviews(key, HOUND).count
    assert request.mode == "url" and request.elicitation_id is None
    assert_clean_url(request.url, site, "ada", "/secret/")
    assert len(recorder.url_requests) == 1 and recorder.completed_ids() == []
    assert key not in recorder.everything_received() and key not in site.log()


async def test_over_stdio_the_page_opens_for_the_given_user(site: ExampleServer) -> None:
    """manage.py mcp_stdio --user linus: the page lives on the web server, the tool in the stdio
    process (no channel layer shared: the tool also reads the row), the key is kept for linus."""
    import sys

    from mcp.client.stdio import StdioServerParameters, stdio_client

    recorder = Recorder()
    key = "rv-linus-" + secrets.token_hex(12)
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_stdio", "--user", "linus", "--base-url", site.base_url],
        env=site.env,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    async with browser_for(site, "linus") as browser:
        await browser.sign_in(site.base_url)

        async def enter_key(request: Any) -> None:
            page = await browser.visit(request.url)
            assert "Done." in (await browser.submit(page, "accept", secret=key)).text

        async with Client(
            stdio_client(params),
            read_timeout_seconds=WAIT,
            mode="legacy",
            elicitation_callback=recorder.elicitation_callback,
        ) as client:
            result, request = await call_while_browsing(
                client, recorder, "book_reviews", {"isbn": PRIDE}, enter_key
            )
    assert not result.is_error, text_of(result)
    assert result.structured_content["reviews"] == simulated_reviews(key, PRIDE).count
    assert_clean_url(request.url, site, "linus", "/secret/")


async def test_client_without_url_mode_gets_32042_then_retries_after_the_page(
    site: ExampleServer,
) -> None:
    recorder = Recorder()
    key = "rv-alan-" + secrets.token_hex(12)
    async with mcp_client(site, site.login("alan"), recorder, url_mode=False) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("book_reviews", {"isbn": PRIDE})
        error = refused.value.error
        assert error.code == -32042
        (elicitation,) = error.data["elicitations"]
        assert set(elicitation) == {"mode", "elicitationId", "url", "message"}
        assert elicitation["mode"] == "url" and elicitation["elicitationId"]
        assert elicitation["message"] == "Connect the reviews service: enter your API key."
        assert_clean_url(elicitation["url"], site, "alan", "/secret/")
        parsed = UrlElicitationRequiredError.from_error(error).elicitations
        assert [e.elicitation_id for e in parsed] == [elicitation["elicitationId"]]

        # The user follows the link the client showed them, then the client retries.
        async with browser_for(site, "alan") as browser:
            page = await browser.visit(elicitation["url"])  # signs in on the way
            assert browser.logins == [site.base_url]
            await browser.submit(page, "accept", secret=key)
        await recorder.wait_completed(elicitation["elicitationId"])
        retried = await client.call_tool("book_reviews", {"isbn": PRIDE})
    assert retried.structured_content["reviews"] == simulated_reviews(key, PRIDE).count
    assert recorder.url_requests == []
    assert key not in recorder.everything_received() and key not in site.log()


async def test_a_page_opens_only_for_its_user_while_pending_and_unexpired(
    site: ExampleServer,
) -> None:
    recorder = Recorder()
    urls = []
    async with mcp_client(site, site.login("edsger"), recorder, url_mode=False) as client:
        for _ in range(2):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("book_reviews", {"isbn": PRIDE})
            urls.append(
                (
                    refused.value.error.data["elicitations"][0]["url"],
                    refused.value.error.data["elicitations"][0]["elicitationId"],
                )
            )
    (completed_url, _), (expired_url, expired_id) = urls

    async with (
        browser_for(site, "grace") as other,
        browser_for(site, "edsger") as owner,
        Browser({}) as anonymous,
    ):
        await other.sign_in(site.base_url)
        # Not signed in: sent to the login page, never shown the page (not pre-authenticated).
        response = await anonymous.get(completed_url)
        assert response.status_code == 302 and response.headers["location"].startswith(
            "/accounts/login/?next="
        )
        # Another user, signed in: the same 404 as an unknown id, for GET and POST alike.
        assert (await other.get(completed_url)).status_code == 404
        csrf = other.cookies(site.base_url)["csrftoken"]  # a valid token of their own session
        assert (
            await other.post(completed_url, {"secret": "stolen", "csrfmiddlewaretoken": csrf})
        ).status_code == 404
        assert (
            await other.get(completed_url.replace("/elicitations/", "/elicitations/x"))
        ).status_code == 404
        # The user it belongs to: the page, once.
        page = await owner.visit(completed_url)
        assert page.status_code == 200
        assert (await owner.submit(page, "accept", secret="rv-edsger-key")).status_code == 200
        assert (await owner.get(completed_url)).status_code == 404
        # Expired (as if ELICITATION_TTL had passed): 404 too.
        assert (await owner.get(expired_url)).status_code == 200
        manage(site.env, "shell", "-v0", "-c", EXPIRE.format(pk=expired_id))
        assert (await owner.get(expired_url)).status_code == 404


async def test_a_page_left_alone_expires_after_elicitation_ttl(
    site: ExampleServer, tmp_path: Path
) -> None:
    """A second process on the same database, with MCP_ELICITATION_TTL=2: the tool stops
    waiting after two seconds, and the page is gone."""
    port = free_port()
    env = {
        **site.env,
        "MCP_ELICITATION_TTL": "2",
        "MCP_RESOURCE_URL": f"http://127.0.0.1:{port}/mcp",
    }
    with run_server(env, tmp_path / "server-ttl.log", port=port, server=site.server) as short:
        recorder = Recorder()
        async with mcp_client(short, short.login("ken"), recorder) as client:
            started = time.monotonic()
            result = await client.call_tool("book_reviews", {"isbn": PRIDE})
            waited = time.monotonic() - started
        (request,) = recorder.url_requests
        async with browser_for(short, "ken") as browser:
            page = await browser.visit(request.url)
    assert result.is_error and "No secret for Book reviews was given (expired)" in text_of(
        result
    ), text_of(result)
    assert 2 <= waited < WAIT
    assert page.status_code == 404


# -- a destructive action, confirmed on a page --------------------------------------------------------------


async def loans_of(client: Any, username: str) -> list[dict[str, Any]]:
    result = await client.call_tool(
        "member_loans", {"member_username": username, "include_returned": True}
    )
    assert not result.is_error, text_of(result)
    return result.structured_content["loans"]


async def test_destructive_tool_acts_only_after_confirmation_on_the_page(
    site: ExampleServer,
) -> None:
    recorder = Recorder()
    async with (
        browser_for(site, "barbara") as browser,
        mcp_client(site, site.login("barbara"), recorder) as client,
    ):
        before = await loans_of(client, "barbara")
        assert sorted(loan["returned_on"] is None for loan in before) == [False, False, True]

        def press(button: str, outcome: str) -> Any:
            async def browse(request: Any) -> None:
                page = await browser.visit(request.url)
                assert (
                    "Delete your reading history?" in page.text
                    and "2 returned loan(s) will be deleted" in page.text
                )
                assert outcome in (await browser.submit(page, button)).text

            return browse

        declined, first = await call_while_browsing(
            client, recorder, "clear_reading_history", {}, press("decline", "Declined.")
        )
        assert declined.structured_content == {
            "outcome": "kept (declined)",
            "deleted": 0,
            "kept_open_loans": 1,
        }
        assert len(await loans_of(client, "barbara")) == 3
        assert_clean_url(first.url, site, "barbara", "/confirm/")

        # The client itself declines to open the URL: nothing happens either.
        recorder.answer = "decline"
        refused, _ = await call_while_browsing(
            client, recorder, "clear_reading_history", {}, lambda request: asyncio.sleep(0)
        )
        assert refused.structured_content["outcome"] == "kept (you chose decline)"
        assert len(await loans_of(client, "barbara")) == 3
        recorder.answer = "accept"

        confirmed, last = await call_while_browsing(
            client, recorder, "clear_reading_history", {}, press("accept", "Done.")
        )
        assert confirmed.structured_content == {
            "outcome": "cleared",
            "deleted": 2,
            "kept_open_loans": 1,
        }
        after = await loans_of(client, "barbara")
        await recorder.wait_completed(last.elicitation_id)
    assert [loan["returned_on"] for loan in after] == [None]
    # Completed or declined on the page, each told to the client; the client's own decline is not a page's.
    assert set(recorder.completed_ids()) >= {first.elicitation_id, last.elicitation_id}


# -- per-user state ---------------------------------------------------------------------------------------


async def test_user_state_outlives_the_session_and_belongs_to_its_user(site: ExampleServer) -> None:
    async with mcp_client(site, site.login("ken"), Recorder()) as client:
        unset = await client.call_tool("reading_goal", {})
        kept = await client.call_tool(
            "remember_reading_goal", {"books_per_month": 4, "note": "the classics"}
        )
    assert unset.structured_content == {"goal": None, "borrowed_this_month": 0, "on_track": None}
    assert kept.structured_content["books_per_month"] == 4

    async with mcp_client(site, site.login("ken"), Recorder()) as client:  # a new session
        recalled = await client.call_tool("reading_goal", {})
    async with mcp_client(site, site.login("grace"), Recorder()) as client:
        someone_else = await client.call_tool("reading_goal", {})
    assert recalled.structured_content["goal"] == kept.structured_content
    assert recalled.structured_content["on_track"] is False
    assert someone_else.structured_content["goal"] is None


# -- third-party OAuth: connect Bookshelf --------------------------------------------------------------------


async def test_denying_at_bookshelf_leaves_the_user_unconnected(
    site: ExampleServer, provider: Provider
) -> None:
    recorder = Recorder()
    async with (
        browser_for(site, "alan", provider) as browser,
        mcp_client(site, site.login("alan"), recorder) as client,
    ):
        await browser.sign_in(site.base_url)
        pages: dict[str, Any] = {}

        async def deny(request: Any) -> None:
            consent = await browser.visit(
                request.url, stop_at=f"{site.base_url}/mcp/connect/callback/"
            )
            back = await browser.submit(
                consent, "cancel=Cancel", form_id="authorizationForm"
            )  # not "allow"
            assert back.is_redirect and "error=access_denied" in back.headers["location"]
            pages["done"] = await browser.visit(back.headers["location"])

        result, request = await call_while_browsing(client, recorder, "sync_reading_list", {}, deny)
        await recorder.wait_completed(request.elicitation_id)
    assert "Bookshelf: not connected" in pages["done"].text
    assert result.is_error and "bookshelf was not connected (declined)" in text_of(result), text_of(
        result
    )


async def test_connect_bookshelf_then_the_tool_reads_the_list_with_the_token_on_the_server(
    site: ExampleServer, provider: Provider
) -> None:
    recorder = Recorder()
    mcp_cookies = site.login("ada")
    pages: dict[str, Any] = {}
    async with browser_for(site, "ada", provider) as browser:
        await browser.sign_in(site.base_url)

        async def connect(request: Any) -> None:
            # The connect page checks the browser user, then sends it to Bookshelf's authorize endpoint.
            to_provider = await browser.get(request.url)
            assert to_provider.status_code == 302
            pages["authorize_url"] = authorize_url = to_provider.headers["location"]
            # At Bookshelf: sign in there (as Bookshelf's user), and approve.
            consent = await browser.visit(authorize_url)
            assert "Example Library" in consent.text and "Read your reading list" in consent.text
            back = await browser.submit(consent, "allow=Authorize", form_id="authorizationForm")
            assert back.is_redirect and back.headers["location"].startswith(
                f"{site.base_url}/mcp/connect/callback/?"
            )
            # Back on the example site: it exchanges the code itself and keeps the tokens.
            pages["done"] = await browser.visit(back.headers["location"])

        async with mcp_client(site, mcp_cookies, recorder) as client:
            result, request = await call_while_browsing(
                client, recorder, "sync_reading_list", {}, connect
            )
            await recorder.wait_completed(request.elicitation_id)
        browser_site_cookies = browser.cookies(site.base_url)
        assert browser.logins == [site.base_url, provider.base_url]

    assert pages["done"].status_code == 200 and "Bookshelf: connected" in pages["done"].text
    assert_clean_url(request.url, site, "ada", "/connect/")
    query = {k: v[0] for k, v in parse_qs(urlsplit(pages["authorize_url"]).query).items()}
    assert pages["authorize_url"].startswith(f"{provider.base_url}/o/authorize/?")
    assert (
        query["client_id"] == CLIENT_ID
        and query["redirect_uri"] == f"{site.base_url}/mcp/connect/callback/"
    )
    assert (
        query["code_challenge_method"] == "S256"
        and query["code_challenge"]
        and query["state"]
        and query["scope"] == "reading-list"
    )

    assert not result.is_error, text_of(result)
    assert result.structured_content == {
        "account": BOOKSHELF_USER,  # Bookshelf's name for the user: the data came from Bookshelf
        "items": [
            {"isbn": PRIDE, "title": "Pride and Prejudice", "in_catalogue": True, "available": 2},
            {
                "isbn": HOUND,
                "title": "The Hound of the Baskervilles",
                "in_catalogue": True,
                "available": 0,
            },
            {
                "isbn": UNKNOWN_ISBN,
                "title": "A Book No Library Has",
                "in_catalogue": False,
                "available": None,
            },
        ],
    }

    # A new session: the connection is reused, without asking.
    again = Recorder()
    async with mcp_client(site, site.login("ada"), again) as client:
        second = await client.call_tool("sync_reading_list", {})
    assert second.structured_content == result.structured_content and again.url_requests == []

    # Bookshelf's tokens never reached the MCP client, nor the log, nor the disk in clear.
    tokens = json.loads(provider.django("shell", "-v0", "-c", PROVIDER_TOKENS))
    assert tokens["access"] and tokens["refresh"]
    for token in tokens["access"] + tokens["refresh"]:
        for seen in (recorder, again):
            assert token not in seen.everything_received()
        assert token not in site.log()
        assert token.encode() not in stored_bytes(site)

    # What Bookshelf saw: the browser (its own cookies, the authorize and consent requests),
    # the example site's server (the code exchange with PKCE, two API calls with its token),
    # and never an MCP credential: not the client's session cookie, not the browser's.
    log = [json.loads(line) for line in provider.access_log().splitlines()]
    text = provider.access_log()
    for credential in (*mcp_cookies.values(), *browser_site_cookies.values()):
        assert credential not in text
    assert "sessionid=" not in text.replace("bookshelf_sessionid=", "")
    exchanges = [e for e in log if e["path"] == "/o/token/"]
    for exchange in exchanges:
        form = {k: v[0] for k, v in parse_qs(exchange["body"]).items()}
        assert (
            form["grant_type"] == "authorization_code"
            and form["code_verifier"]
            and form["client_id"] == CLIENT_ID
        )
    api_calls = [e for e in log if e["path"] == "/api/reading-list/"]
    assert len(api_calls) >= 2 and {e["headers"].get("Authorization") for e in api_calls} <= {
        f"Bearer {t}" for t in tokens["access"]
    }
    assert exchanges and all("Cookie" not in e["headers"] for e in api_calls + exchanges)


async def test_with_oauth_the_page_is_bound_to_the_token_user_and_no_bearer_reaches_bookshelf(
    site: ExampleServer, provider: Provider, tmp_path: Path
) -> None:
    """The same connect flow with ``MCP_AUTH=oauth``: the MCP client holds a bearer token of the
    example site (the SDK's OAuth client, consent given in the browser). The page opens only for
    the token's user; neither that token nor its refresh token ever reaches Bookshelf."""
    port = free_port()
    oauth_url = f"http://127.0.0.1:{port}"
    provider.django(
        "shell",
        "-v0",
        "-c",
        ALLOW_REDIRECT.format(
            client_id=CLIENT_ID, redirect_uri=f"{oauth_url}/mcp/connect/callback/"
        ),
    )
    env = {**site.env, "MCP_AUTH": "oauth", "MCP_RESOURCE_URL": f"{oauth_url}/mcp"}
    recorder = Recorder()
    storage = MemoryTokenStorage()
    with run_server(env, tmp_path / "server-oauth.log", port=port, server=site.server) as server:
        async with OAuthBrowser(server.base_url, "ken", "ken-pw") as consent_browser:
            auth = OAuthClientProvider(
                server_url=server.mcp_url,
                client_metadata=OAuthClientMetadata(
                    redirect_uris=["http://127.0.0.1:33419/callback"],
                    client_name="E2E URL elicitation",
                    grant_types=["authorization_code", "refresh_token"],
                    response_types=["code"],
                    token_endpoint_auth_method="none",
                ),
                storage=storage,
                redirect_handler=(handlers := BrowserHandlers(consent_browser)).redirect_handler,
                callback_handler=handlers.callback_handler,
            )
            async with (
                browser_for(server, "grace") as other,
                browser_for(server, "ken", provider) as browser,
            ):
                await other.sign_in(server.base_url)

                async def connect(request: Any) -> None:
                    assert (await other.get(request.url)).status_code == 404  # not the token's user
                    consent = await browser.visit(request.url)  # signs in as ken, then at Bookshelf
                    back = await browser.submit(
                        consent, "allow=Authorize", form_id="authorizationForm"
                    )
                    done = await browser.visit(back.headers["location"])
                    assert "Bookshelf: connected" in done.text

                async with mcp_client(server, None, recorder, auth=auth) as client:
                    result, request = await call_while_browsing(
                        client, recorder, "sync_reading_list", {}, connect
                    )
                    await recorder.wait_completed(request.elicitation_id)
        server_log = server.log()

    assert not result.is_error, text_of(result)
    assert (
        result.structured_content["account"] == BOOKSHELF_USER
        and len(result.structured_content["items"]) == 3
    )
    assert storage.tokens is not None and handlers.redirects
    mcp_credentials = [storage.tokens.access_token, storage.tokens.refresh_token]
    log = provider.access_log()
    for credential in filter(None, mcp_credentials):
        assert credential not in log  # the client's token never goes to the third party
    tokens = json.loads(provider.django("shell", "-v0", "-c", PROVIDER_TOKENS))
    for token in tokens["access"] + tokens["refresh"]:
        assert token not in recorder.everything_received() and token not in server_log
