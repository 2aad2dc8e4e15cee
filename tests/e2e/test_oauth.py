"""The example site as OAuth 2.1 authorization server and MCP resource server, live.

A third server process on the e2e database runs with ``MCP_AUTH=oauth`` and knows its own
canonical URI (``MCP_RESOURCE_URL``). The official SDK's OAuth client
(``mcp.client.auth.OAuthClientProvider``) drives it end to end: the 401 challenge, metadata
discovery, registration by a client ID metadata document (served over https on loopback by
``DocumentHost``) or by dynamic registration, authorization code with PKCE (a ``Browser``
signs in and answers the consent form), the token exchange with ``resource``, refresh and
step-up. Raw HTTP covers what the SDK would never send: the hostile requests.

Tests share the server and its database with test_example_site.py: what they borrow they return.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.types import TextContent

from tests.asgi_servers import free_port
from tests.e2e.test_example_tasks import WAIT, poll, rpc
from tests.polling import until

from .conftest import ExampleServer, manage, run_oauth_server, run_server
from .oauth_helpers import (
    Browser,
    BrowserHandlers,
    DocumentHost,
    MemoryTokenStorage,
    form_fields,
    query_of,
)

pytestmark = pytest.mark.e2e

REDIRECT_URI = (
    "http://127.0.0.1:33418/callback"  # a native client's loopback listener (never contacted)
)
ACCEPT_BOTH = {"Accept": "application/json, text/event-stream"}
DCR_RATE_LIMIT = 20
INSPECTOR = "http://localhost:6274"  # the MCP Inspector's web UI, a browser-based client
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "e2e-oauth", "version": "0"},
    },
}


def isbn(first12: str) -> str:
    total = sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(first12))
    return first12 + str((10 - total % 10) % 10)


POEMS = isbn("978000090001")  # Emily Dickinson, 2 copies, not on loan in the demo data
# What the consent page says each scope allows (example_site/settings.py OAUTH2_PROVIDER["SCOPES"]).
READ_SENTENCE = "Read the books and authors in the catalogue, and see your loans"
WRITE_SENTENCE = "Borrow, return and renew books, add and change books in the catalogue"


# -- fixtures -----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def oauth_server(
    example_server: ExampleServer, document_host: DocumentHost
) -> Iterator[ExampleServer]:
    """The example site with OAuth on, on the e2e database, at a URL it knows in advance."""
    settings = {
        "OAUTH_DCR_RATE_LIMIT": f"{DCR_RATE_LIMIT}/3600",
        # The MCP Inspector's web UI may call /mcp and the OAuth endpoints from its own origin.
        "MCP_ALLOWED_ORIGINS": INSPECTOR,
    }
    with run_oauth_server(example_server, document_host, "oauth", settings) as server:
        yield server


@pytest.fixture
async def http(oauth_server: ExampleServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=oauth_server.base_url, timeout=20, follow_redirects=False
    ) as client:
        yield client


def client_metadata(
    scope: str | None = None, name: str = "E2E registered client"
) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        redirect_uris=[REDIRECT_URI],
        client_name=name,
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",  # a public client: PKCE, no secret
        scope=scope,
    )


@asynccontextmanager
async def sdk_client(
    server: ExampleServer,
    username: str,
    *,
    client_metadata_url: str | None = None,
    scope: str | None = None,
    mode: str = "auto",
    storage: MemoryTokenStorage | None = None,
) -> AsyncIterator[tuple[Client, OAuthClientProvider, BrowserHandlers, MemoryTokenStorage]]:
    """The official SDK client with OAuth, its user played by a ``Browser`` signed in as ``username``;
    ``storage``: what it already holds (a client registration and tokens), as after a restart."""
    storage = storage if storage is not None else MemoryTokenStorage()
    async with Browser(server.base_url, username) as browser:
        handlers = BrowserHandlers(browser)
        provider = OAuthClientProvider(
            server_url=server.mcp_url,
            client_metadata=client_metadata(scope),
            storage=storage,
            redirect_handler=handlers.redirect_handler,
            callback_handler=handlers.callback_handler,
            client_metadata_url=client_metadata_url,
        )
        async with httpx2.AsyncClient(auth=provider, timeout=20) as http_client:
            transport = streamable_http_client(server.mcp_url, http_client=http_client)
            async with Client(transport, read_timeout_seconds=20, mode=mode) as client:
                yield client, provider, handlers, storage


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


AUTH_PARAM = re.compile(r'([\w-]+)=(?:"((?:[^"\\]|\\.)*)"|([^\s,"]+))')


def challenge_params(header: str) -> dict[str, str]:
    """The auth-params of a ``Bearer`` challenge (RFC 9110 section 11.2, quoted strings unescaped)."""
    scheme, _, rest = header.partition(" ")
    assert scheme == "Bearer", header
    return {
        key: re.sub(r"\\(.)", r"\1", quoted) if quoted or not bare else bare
        for key, quoted, bare in AUTH_PARAM.findall(rest)
    }


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(64)
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    )
    return verifier, challenge


async def register(http: httpx.AsyncClient, **metadata: Any) -> httpx.Response:
    body = {
        "client_name": "E2E raw client",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
        **metadata,
    }
    return await http.post("/o/register/", json=body)


@pytest.fixture(scope="session")
def raw_client_id(oauth_server: ExampleServer) -> str:
    """One dynamically registered public client for the raw-HTTP tests."""
    response = httpx.post(
        f"{oauth_server.base_url}/o/register/",
        json={
            "client_name": "E2E raw client",
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
        },
        timeout=20,
    )
    assert response.status_code == 201, response.text
    return response.json()["client_id"]


def authorization_url(
    server: ExampleServer, client_id: str, challenge: str, **overrides: str
) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "xyz",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "library:read",
        "resource": server.mcp_url,
        **overrides,
    }
    return f"{server.base_url}/o/authorize/?{urlencode(params)}"


async def obtain_tokens(
    server: ExampleServer,
    http: httpx.AsyncClient,
    client_id: str,
    username: str = "reader",
    scope: str = "library:read",
    consent_pages: list[str] | None = None,
) -> dict[str, Any]:
    """Authorization code + PKCE by hand, as ``username``: the token response (and the consent
    pages the person saw, added to ``consent_pages``)."""
    verifier, challenge = pkce()
    async with Browser(server.base_url, username) as browser:
        location = await browser.authorize(
            authorization_url(server, client_id, challenge, scope=scope)
        )
    if consent_pages is not None:
        consent_pages += browser.consent_pages
    params = query_of(location)
    assert "code" in params, location
    response = await http.post(
        "/o/token/",
        data={
            "grant_type": "authorization_code",
            "code": params["code"],
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": server.mcp_url,
        },
    )
    assert response.status_code == 200, response.text
    return response.json()


def forget_approvals(server: ExampleServer, username: str, client_id: str) -> None:
    """Delete ``username``'s tokens for the client ``client_id``: the approvals they remember."""
    script = (
        "from oauth2_provider.models import AccessToken, RefreshToken\n"
        f"mine = dict(user__username={username!r}, application__client_id={client_id!r})\n"
        "RefreshToken.objects.filter(**mine).delete()\n"
        "AccessToken.objects.filter(**mine).delete()\n"
    )
    manage(server.env, "shell", "-v0", "-c", script)


async def mcp_post(
    http: httpx.AsyncClient, token: str | None, message: dict[str, Any], **headers: str
) -> httpx.Response:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return await http.post("/mcp", json=message, headers={**ACCEPT_BOTH, **headers})


def set_token(server: ExampleServer, token: str, **expressions: str) -> None:
    """Change the stored row of an access token (found by its checksum, as the server does):
    each field is set to a Python expression evaluated in the server's ``manage.py shell``."""
    updates = ", ".join(f"{name}={source}" for name, source in expressions.items())
    script = (
        "import hashlib\n"
        "from datetime import timedelta\n"
        "from django.utils import timezone\n"
        "from oauth2_provider.models import AccessToken\n"
        f"n = AccessToken.objects.filter(token_checksum=hashlib.sha256({token!r}.encode()).hexdigest())"
        f".update({updates})\n"
        "assert n == 1, n\n"
    )
    manage(server.env, "shell", "-v0", "-c", script)


# -- discovery -----------------------------------------------------------------------------------


async def test_unauthenticated_request_gets_a_challenge_naming_the_metadata(
    oauth_server: ExampleServer, http: httpx.AsyncClient
) -> None:
    response = await mcp_post(http, None, INITIALIZE)
    assert response.status_code == 401
    params = challenge_params(response.headers["www-authenticate"])
    # RFC 6750 section 3: no error code when the request carried no credentials.
    assert "error" not in params
    assert (
        params["resource_metadata"]
        == f"{oauth_server.base_url}/.well-known/oauth-protected-resource/mcp"
    )
    # Every scope the resource uses, so that a client can ask for them up front.
    assert params["scope"] == "library:read library:write"


async def test_protected_resource_and_authorization_server_metadata(
    oauth_server: ExampleServer, http: httpx.AsyncClient
) -> None:
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        prm = (await http.get(path)).json()
        assert prm["resource"] == oauth_server.mcp_url
        assert prm["authorization_servers"] == [oauth_server.base_url]
        assert prm["scopes_supported"] == ["library:read", "library:write"]
        assert prm["bearer_methods_supported"] == ["header"]

    response = await http.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    asm = response.json()
    base = oauth_server.base_url
    assert asm["issuer"] == base  # RFC 8414 section 3.3: equals the issuer the URL was built from
    assert asm["authorization_endpoint"] == f"{base}/o/authorize/"
    assert asm["token_endpoint"] == f"{base}/o/token/"
    assert asm["registration_endpoint"] == f"{base}/o/register/"
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["response_types_supported"] == ["code"]
    # client_credentials: for service clients only (tests/e2e/test_service_clients.py).
    assert asm["grant_types_supported"] == [
        "authorization_code",
        "refresh_token",
        "client_credentials",
    ]
    assert "none" in asm["token_endpoint_auth_methods_supported"]
    assert asm["client_id_metadata_document_supported"] is True
    assert asm["authorization_response_iss_parameter_supported"] is True
    assert set(asm["scopes_supported"]) == {"library:read", "library:write"}
    # DOT's own protected-resource view is not mounted; no OIDC either.
    assert (await http.get("/.well-known/openid-configuration")).status_code == 404


# -- a browser-based client on another origin (CORS) ---------------------------------------------------


async def browser_preflight(
    http: httpx.AsyncClient, path: str, method: str, headers: str, origin: str = INSPECTOR
) -> httpx.Response:
    """What a browser sends before a cross-origin fetch() with non-simple headers."""
    return await http.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": headers,
        },
    )


def header_set(response: httpx.Response, name: str) -> set[str]:
    return {
        item.strip().lower() for item in response.headers.get(name, "").split(",") if item.strip()
    }


async def test_browser_client_on_an_allowed_origin_gets_cors_through_the_whole_flow(
    oauth_server: ExampleServer, http: httpx.AsyncClient
) -> None:
    origin = {"Origin": INSPECTOR}
    # The MCP endpoint: preflight, then the 401 challenge, readable by the page.
    preflight = await browser_preflight(
        http,
        "/mcp",
        "POST",
        "authorization, content-type, mcp-protocol-version, mcp-session-id, last-event-id",
    )
    assert preflight.status_code in (200, 204), preflight.text
    assert preflight.headers["access-control-allow-origin"] == INSPECTOR
    assert {"post", "get", "delete"} <= header_set(preflight, "access-control-allow-methods")
    assert {
        "authorization",
        "content-type",
        "mcp-protocol-version",
        "mcp-session-id",
        "last-event-id",
    } <= header_set(preflight, "access-control-allow-headers")
    challenge = await mcp_post(http, None, INITIALIZE, **origin)
    assert challenge.status_code == 401
    assert challenge.headers["access-control-allow-origin"] == INSPECTOR
    assert {"mcp-session-id", "www-authenticate"} <= header_set(
        challenge, "access-control-expose-headers"
    )

    # Discovery: both metadata documents, preflight and fetch.
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
    ):
        preflight = await browser_preflight(http, path, "GET", "mcp-protocol-version")
        assert preflight.status_code in (200, 204), path
        assert preflight.headers["access-control-allow-origin"] in ("*", INSPECTOR), path
        assert "mcp-protocol-version" in header_set(preflight, "access-control-allow-headers"), path
        response = await http.get(path, headers={**origin, "MCP-Protocol-Version": "2025-11-25"})
        assert response.status_code == 200, path
        assert response.headers["access-control-allow-origin"] in ("*", INSPECTOR), path

    # Dynamic registration with the Inspector's callback.
    callback = f"{INSPECTOR}/oauth/callback"
    preflight = await browser_preflight(http, "/o/register/", "POST", "content-type")
    assert preflight.headers["access-control-allow-origin"] == INSPECTOR
    registered = await http.post(
        "/o/register/",
        json={
            "client_name": "Browser client",
            "redirect_uris": [callback],
            "token_endpoint_auth_method": "none",
        },
        headers=origin,
    )
    assert registered.status_code == 201, registered.text
    assert registered.headers["access-control-allow-origin"] == INSPECTOR
    client_id = registered.json()["client_id"]

    # The code comes back through a navigation (no CORS); the token exchange is a fetch().
    verifier, code_challenge = pkce()
    async with Browser(oauth_server.base_url, "reader") as browser:
        location = await browser.authorize(
            authorization_url(oauth_server, client_id, code_challenge, redirect_uri=callback)
        )
    code = query_of(location)["code"]
    preflight = await browser_preflight(http, "/o/token/", "POST", "content-type")
    assert preflight.headers["access-control-allow-origin"] == INSPECTOR
    token = await http.post(
        "/o/token/",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": callback,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": oauth_server.mcp_url,
        },
        headers=origin,
    )
    assert token.status_code == 200, token.text
    assert token.headers["access-control-allow-origin"] == INSPECTOR

    # With the token, the MCP endpoint answers the page and lets it read the session id.
    answer = await mcp_post(http, token.json()["access_token"], INITIALIZE, **origin)
    assert answer.status_code == 200, answer.text
    assert answer.headers["access-control-allow-origin"] == INSPECTOR
    assert "mcp-session-id" in answer.headers


async def test_browser_client_on_another_origin_gets_no_cors(http: httpx.AsyncClient) -> None:
    stranger = "http://evil.example"
    assert (
        await browser_preflight(http, "/mcp", "POST", "content-type", origin=stranger)
    ).status_code == 403
    for path in ("/o/token/", "/o/register/"):
        preflight = await browser_preflight(http, path, "POST", "content-type", origin=stranger)
        assert "access-control-allow-origin" not in preflight.headers, path
    token = await http.post(
        "/o/token/",
        data={"grant_type": "authorization_code", "code": "x"},
        headers={"Origin": stranger},
    )
    assert "access-control-allow-origin" not in token.headers


# -- the official SDK client, end to end ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_sdk_client_registers_dynamically_and_calls_tools(
    oauth_server: ExampleServer, mode: str
) -> None:
    async with sdk_client(oauth_server, "reader", mode=mode) as (
        client,
        provider,
        handlers,
        storage,
    ):
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        tools = await client.list_tools()
        result = await client.call_tool("search_books", {"query": "wells"})
        loans = await client.call_tool("member_loans", {"member_username": "reader"})
        stats = await client.read_resource("library://catalogue/stats")

    assert not result.is_error, text_of(result)
    assert result.structured_content is not None and result.structured_content["books"]
    # The token acts for reader: the tool sees ctx.user.
    assert not loans.is_error, text_of(loans)
    assert stats.contents
    names = {tool.name for tool in tools.tools}
    assert {"search_books", "borrow_book"} <= names

    # Registered by RFC 7591, since no metadata-document URL was given.
    assert storage.client_info is not None
    assert not storage.client_info.client_id.startswith("https://")
    assert storage.tokens is not None and storage.tokens.refresh_token
    # The challenge named every scope the resource uses: the SDK asked for them all up front.
    assert set(storage.tokens.scope.split()) == {"library:read", "library:write"}

    # One authorization: S256, the resource, the scope from the challenge; the user signed in
    # on the way and was shown who asks, where the answer goes, and what it allows.
    assert len(handlers.authorization_urls) == 1
    asked = query_of(handlers.authorization_urls[0])
    assert asked["code_challenge_method"] == "S256"
    assert asked["resource"] == oauth_server.mcp_url
    assert asked["scope"].split() == ["library:read", "library:write"]
    assert handlers.browser.logins == 1
    answer = query_of(handlers.redirects[0])
    assert answer["iss"] == oauth_server.base_url  # RFC 9207
    page = handlers.browser.consent_pages[0]
    assert "E2E registered client" in page
    assert "127.0.0.1:33418" in page  # the redirect host
    assert READ_SENTENCE in page
    assert WRITE_SENTENCE in page


async def test_sdk_client_identified_by_a_metadata_document(
    oauth_server: ExampleServer, document_host: DocumentHost
) -> None:
    url = document_host.base_url + "/clients/e2e-cimd.json"
    document_host.publish(
        "/clients/e2e-cimd.json",
        {
            "client_id": url,
            "client_name": "E2E metadata-document client",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    async with sdk_client(oauth_server, "reader", client_metadata_url=url) as (
        client,
        provider,
        handlers,
        storage,
    ):
        result = await client.call_tool("book_availability", {"isbn": POEMS})

    assert not result.is_error, text_of(result)
    assert storage.client_info is not None and storage.client_info.client_id == url
    assert "/clients/e2e-cimd.json" in document_host.fetched
    page = handlers.browser.consent_pages[0]
    assert "E2E metadata-document client" in page
    assert f"127.0.0.1:{urlsplit(document_host.base_url).port}" in page  # where the document lives
    assert "127.0.0.1:33418" in page


async def test_refresh_rotates_and_a_replayed_refresh_token_revokes_the_family(
    oauth_server: ExampleServer, http: httpx.AsyncClient
) -> None:
    async with sdk_client(oauth_server, "reader") as (client, provider, handlers, storage):
        await client.call_tool("search_books", {"query": "verne"})
        assert storage.tokens is not None
        first = storage.tokens
        provider.context.token_expiry_time = time.time() - 1  # as if an hour had passed
        after_refresh = await client.call_tool("search_books", {"query": "twain"})
        second = storage.tokens
    assert not after_refresh.is_error, text_of(after_refresh)
    assert len(handlers.authorization_urls) == 1  # refreshed, not authorized again
    assert second.access_token != first.access_token
    assert second.refresh_token and second.refresh_token != first.refresh_token  # rotated

    # The old access token went with its refresh token; the new one works.
    assert (await mcp_post(http, first.access_token, INITIALIZE)).status_code == 401
    assert (await mcp_post(http, second.access_token, INITIALIZE)).status_code == 200

    # Replaying the rotated refresh token is refused, and revokes what was issued from it.
    assert storage.client_info is not None
    replay = await http.post(
        "/o/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": first.refresh_token,
            "client_id": storage.client_info.client_id,
        },
    )
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    assert (await mcp_post(http, second.access_token, INITIALIZE)).status_code == 401


WRITE_TOOLS = {"borrow_book", "return_book", "renew_loan"}


def read_only_storage(tokens: dict[str, Any], client_id: str) -> MemoryTokenStorage:
    """What an SDK client holds after a read-only authorization: its registration and tokens."""
    storage = MemoryTokenStorage()
    storage.client_info = OAuthClientInformationFull(
        client_id=client_id,
        redirect_uris=[REDIRECT_URI],
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    storage.tokens = OAuthToken.model_validate(tokens)
    return storage


async def list_borrow_list_return(client: Any) -> tuple[set[str], set[str]]:
    """List the tools, borrow a book (a write tool), list again and return the book: the tool
    names before and after the borrowing."""
    before = {tool.name for tool in (await client.list_tools()).tools}
    borrowed = await client.call_tool("borrow_book", {"isbn": POEMS, "member_username": "reader"})
    assert not borrowed.is_error, text_of(borrowed)
    assert borrowed.structured_content is not None
    after = {tool.name for tool in (await client.list_tools()).tools}
    returned = await client.call_tool(
        "return_book", {"loan_id": borrowed.structured_content["loan_id"]}
    )
    assert not returned.is_error, text_of(returned)
    return before, after


# The SDK starts from a library:read token (as a client that asked for less than the challenge
# named, or whose grant predates the write tools): it must see the write tools, get the 403 on
# use, step up by itself, and list everything at once afterwards (no cached pre-step-up list).
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_read_only_token_lists_the_write_tools_and_the_sdk_steps_up_on_use(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str, mode: str
) -> None:
    # Each run starts from a user who never approved more than library:read for this client:
    # an approval remembered from an earlier test would skip the consent page checked below.
    forget_approvals(oauth_server, "reader", raw_client_id)
    tokens = await obtain_tokens(oauth_server, http, raw_client_id)
    assert tokens["scope"] == "library:read"
    # Raw: the read-only token's call of a write tool gets 403 with the step-up challenge.
    init = await mcp_post(http, tokens["access_token"], INITIALIZE)
    assert init.status_code == 200
    session = {
        "Mcp-Session-Id": init.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "borrow_book",
            "arguments": {"isbn": POEMS, "member_username": "reader"},
        },
    }
    refused = await mcp_post(http, tokens["access_token"], call, **session)
    assert refused.status_code == 403
    params = challenge_params(refused.headers["www-authenticate"])
    assert params["error"] == "insufficient_scope"
    assert "library:write" in params["scope"].split()
    assert (
        params["resource_metadata"]
        == f"{oauth_server.base_url}/.well-known/oauth-protected-resource/mcp"
    )

    storage = read_only_storage(tokens, raw_client_id)
    async with sdk_client(oauth_server, "reader", mode=mode, storage=storage) as (
        client,
        provider,
        handlers,
        storage,
    ):
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        # The SDK answers the 403 by authorizing again for the union of the scopes, then retries.
        before, after = await list_borrow_list_return(client)
    assert WRITE_TOOLS <= before
    assert after == before
    assert len(handlers.authorization_urls) == 1  # the step-up, and only it
    assert query_of(handlers.authorization_urls[0])["scope"].split() == [
        "library:read",
        "library:write",
    ]
    assert WRITE_SENTENCE in handlers.browser.consent_pages[0]
    assert storage.tokens is not None and set(storage.tokens.scope.split()) == {
        "library:read",
        "library:write",
    }


@pytest.fixture(scope="module")
def hiding_oauth_server(oauth_server: ExampleServer) -> Iterator[ExampleServer]:
    """The example site with OAuth, hiding what the token's scopes do not allow (UNSCOPED_ENTRIES)."""
    port = free_port()
    env = {
        **oauth_server.env,
        "MCP_RESOURCE_URL": f"http://127.0.0.1:{port}/mcp",
        "MCP_UNSCOPED_ENTRIES": "hide",
    }
    log_path = oauth_server.log_path.with_name(f"{oauth_server.server}-oauth-hide.log")
    with run_server(env, log_path, port=port, server=oauth_server.server) as server:
        yield server


# Hidden entries make the list depend on the token: the 2026-07-28 SDK keeps private answers per
# client (its cache partition is the principal, not the token), so the lists carry ttlMs 0 and
# the list after the step-up is the new one at once, not the one kept from before.
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_when_hidden_the_list_after_a_step_up_is_complete_at_once(
    hiding_oauth_server: ExampleServer, raw_client_id: str, mode: str
) -> None:
    async with httpx.AsyncClient(base_url=hiding_oauth_server.base_url, timeout=20) as http:
        tokens = await obtain_tokens(hiding_oauth_server, http, raw_client_id)
    storage = read_only_storage(tokens, raw_client_id)
    async with sdk_client(hiding_oauth_server, "reader", mode=mode, storage=storage) as (
        client,
        provider,
        handlers,
        storage,
    ):
        before, after = await list_borrow_list_return(client)
    assert not WRITE_TOOLS & before
    assert WRITE_TOOLS <= after
    assert len(handlers.authorization_urls) == 1


# -- tokens the server must refuse ------------------------------------------------------------------


async def test_revoked_token_is_refused(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str
) -> None:
    tokens = await obtain_tokens(oauth_server, http, raw_client_id)
    assert (await mcp_post(http, tokens["access_token"], INITIALIZE)).status_code == 200
    revoked = await http.post(
        "/o/revoke_token/", data={"token": tokens["access_token"], "client_id": raw_client_id}
    )
    assert revoked.status_code == 200
    response = await mcp_post(http, tokens["access_token"], INITIALIZE)
    assert response.status_code == 401
    assert challenge_params(response.headers["www-authenticate"])["error"] == "invalid_token"
    # RFC 7009 section 2.1: its refresh token went with it.
    refresh = await http.post(
        "/o/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": raw_client_id,
        },
    )
    assert refresh.status_code == 400


@pytest.mark.parametrize(
    "resource",
    [["http://127.0.0.1:1/mcp"], ["https://mcp.example.com/mcp"], []],
    ids=["other-port", "other-host", "none"],
)
async def test_token_for_another_resource_is_refused(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str, resource: list[str]
) -> None:
    tokens = await obtain_tokens(oauth_server, http, raw_client_id)
    # This server never issues such a token (see the resource tests below): forge the row.
    # An empty list is DOT's "unrestricted" token, which MCP forbids accepting.
    set_token(oauth_server, tokens["access_token"], resource=repr(resource))
    response = await mcp_post(http, tokens["access_token"], INITIALIZE)
    assert response.status_code == 401
    assert challenge_params(response.headers["www-authenticate"])["error"] == "invalid_token"


async def test_registration_access_token_is_not_an_access_token_for_mcp(
    http: httpx.AsyncClient,
) -> None:
    # RFC 7592's token manages the client's registration; it acts for nobody and has no audience.
    registered = await register(http)
    assert registered.status_code == 201
    token = registered.json()["registration_access_token"]
    response = await mcp_post(http, token, INITIALIZE)
    assert response.status_code == 401
    assert challenge_params(response.headers["www-authenticate"])["error"] == "invalid_token"


async def test_token_in_the_query_string_is_refused(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str
) -> None:
    tokens = await obtain_tokens(oauth_server, http, raw_client_id)
    response = await http.post(
        f"/mcp?access_token={tokens['access_token']}", json=INITIALIZE, headers=ACCEPT_BOTH
    )
    assert response.status_code in (400, 401), response.text
    assert "mcp-session-id" not in response.headers
    assert response.headers["www-authenticate"].startswith("Bearer ")


async def test_bearer_garbage_is_refused(http: httpx.AsyncClient) -> None:
    response = await mcp_post(http, "not-a-token-" + secrets.token_urlsafe(20), INITIALIZE)
    assert response.status_code == 401
    assert challenge_params(response.headers["www-authenticate"])["error"] == "invalid_token"


async def test_expired_token_is_refused(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str
) -> None:
    tokens = await obtain_tokens(oauth_server, http, raw_client_id)
    assert (await mcp_post(http, tokens["access_token"], INITIALIZE)).status_code == 200
    set_token(oauth_server, tokens["access_token"], expires="timezone.now() - timedelta(minutes=1)")
    response = await mcp_post(http, tokens["access_token"], INITIALIZE)
    assert response.status_code == 401
    assert challenge_params(response.headers["www-authenticate"])["error"] == "invalid_token"


async def test_another_users_session_id_is_not_found(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str
) -> None:
    reader = await obtain_tokens(oauth_server, http, raw_client_id, "reader")
    librarian = await obtain_tokens(oauth_server, http, raw_client_id, "librarian")
    init = await mcp_post(http, reader["access_token"], INITIALIZE)
    assert init.status_code == 200
    session = {
        "Mcp-Session-Id": init.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert (await mcp_post(http, reader["access_token"], ping, **session)).status_code == 200
    # A valid token of someone else does not open reader's session: it does not exist for them.
    assert (await mcp_post(http, librarian["access_token"], ping, **session)).status_code == 404


async def test_a_durable_task_waiting_for_input_fails_when_its_token_is_revoked(
    oauth_server: ExampleServer, http: httpx.AsyncClient
) -> None:
    # A client of its own: no other test's live token of the same client keeps the task going.
    client_id = (await register(http, client_name="E2E tasks client")).json()["client_id"]
    token = (await obtain_tokens(oauth_server, http, client_id))["access_token"]
    async with httpx.AsyncClient(
        timeout=10, headers={"Authorization": f"Bearer {token}"}
    ) as as_reader:
        created = await rpc(
            as_reader, oauth_server.mcp_url, "tools/call", name="export_catalogue", arguments={}
        )
        task_id = created["taskId"]
        await poll(
            as_reader, oauth_server.mcp_url, task_id, {"input_required"}, []
        )  # parked, waiting for its answer

    revoked = await http.post("/o/revoke_token/", data={"token": token, "client_id": client_id})
    assert revoked.status_code == 200

    def row() -> tuple[str, str | None] | None:
        with sqlite3.connect(oauth_server.env["SQLITE_PATH"]) as db:
            status, error = db.execute(
                "SELECT status, error FROM mcp_django_task WHERE id = ?", (task_id,)
            ).fetchone()
        return (status, error) if status not in ("working", "input_required") else None

    status, error = await until(
        row, WAIT, interval=0.2, failure=f"task {task_id} still runs after its token was revoked"
    )
    assert status == "failed"
    assert error is not None and '"authorization revoked"' in error


# -- authorization requests the server must refuse ------------------------------------------------------


async def test_resource_pointing_elsewhere_is_refused(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str
) -> None:
    elsewhere = "https://mcp.example.com/mcp"
    verifier, challenge = pkce()
    async with Browser(oauth_server.base_url, "reader") as browser:
        # At the authorization endpoint: back to the client before the user is even asked.
        location = await browser.authorize(
            authorization_url(oauth_server, raw_client_id, challenge, resource=elsewhere)
        )
        assert not browser.consent_pages
        answer = query_of(location)
        assert location.startswith(REDIRECT_URI)
        assert answer["error"] == "invalid_target"
        assert answer["state"] == "xyz"
        assert answer["iss"] == oauth_server.base_url
        assert "code" not in answer

        # At the token endpoint, after an authorization for this server.
        location = await browser.authorize(
            authorization_url(oauth_server, raw_client_id, challenge)
        )
    code = query_of(location)["code"]
    response = await http.post(
        "/o/token/",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": raw_client_id,
            "code_verifier": verifier,
            "resource": elsewhere,
        },
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"


async def test_token_request_without_resource_is_bound_to_this_server(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str
) -> None:
    # No resource anywhere: the server binds the token to its one resource (RFC 8707 default)
    # rather than issue a token any resource server would take.
    verifier, challenge = pkce()
    url = authorization_url(oauth_server, raw_client_id, challenge)
    url = url.replace("&" + urlencode({"resource": oauth_server.mcp_url}), "")
    assert "resource=" not in url
    async with Browser(oauth_server.base_url, "reader") as browser:
        code = query_of(await browser.authorize(url))["code"]
    response = await http.post(
        "/o/token/",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": raw_client_id,
            "code_verifier": verifier,
        },
    )
    assert response.status_code == 200, response.text
    assert (await mcp_post(http, response.json()["access_token"], INITIALIZE)).status_code == 200


async def test_pkce_plain_is_refused(oauth_server: ExampleServer, raw_client_id: str) -> None:
    verifier = secrets.token_urlsafe(64)
    async with Browser(oauth_server.base_url, "reader") as browser:
        for method in ({"code_challenge_method": "plain"}, {}):  # a missing method means plain
            url = authorization_url(oauth_server, raw_client_id, verifier, **method)
            if not method:
                url = url.replace("&code_challenge_method=S256", "")
            location = await browser.authorize(url)
            answer = query_of(location)
            assert location.startswith(REDIRECT_URI)
            assert answer["error"] == "invalid_request"
            assert "code" not in answer
        assert not browser.consent_pages


async def test_redirect_uri_not_matching_the_registration_is_refused(
    oauth_server: ExampleServer, raw_client_id: str
) -> None:
    verifier, challenge = pkce()
    async with Browser(oauth_server.base_url, "reader") as browser:
        for other in (
            "https://attacker.example/callback",
            "http://127.0.0.1:33418/callback/other",
            "http://evil.example:33418/callback",
        ):
            page = await browser.open(
                authorization_url(oauth_server, raw_client_id, challenge, redirect_uri=other)
            )
            # Never redirected to an unregistered URI: an error page on this site instead.
            assert not page.is_redirect, page.headers.get("location")
            assert page.status_code == 400
            assert "invalid_request" in page.text or "redirect" in page.text.lower()
        assert not browser.consent_pages


async def test_http_redirect_to_a_host_other_than_loopback_is_refused(
    oauth_server: ExampleServer, http: httpx.AsyncClient
) -> None:
    # Refused at registration now (test_registration_refuses_http_redirects_off_loopback); an
    # application made another way (the admin, a shell) is still refused at authorize.
    registered = await register(http, redirect_uris=["http://app.example/callback"])
    assert registered.status_code == 400 and registered.json()["error"] == "invalid_redirect_uri"
    client_id = "e2e-http-redirect-" + secrets.token_hex(4)
    manage(
        oauth_server.env,
        "shell",
        "-c",
        (
            "from oauth2_provider.models import Application; "
            f"Application.objects.create(client_id={client_id!r}, name='made in the admin', client_type='public', "
            "authorization_grant_type='authorization-code', redirect_uris='http://app.example/callback')"
        ),
    )
    verifier, challenge = pkce()
    async with Browser(oauth_server.base_url, "reader") as browser:
        page = await browser.open(
            authorization_url(
                oauth_server, client_id, challenge, redirect_uri="http://app.example/callback"
            )
        )
    assert not page.is_redirect
    assert page.status_code == 400


async def test_metadata_document_whose_client_id_differs_from_its_url_is_refused(
    oauth_server: ExampleServer, document_host: DocumentHost
) -> None:
    url = document_host.publish(
        "/clients/impostor.json",
        {
            "client_id": document_host.base_url + "/clients/e2e-cimd.json",  # somebody else's
            "client_name": "Impostor",
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
        },
    )
    verifier, challenge = pkce()
    async with Browser(oauth_server.base_url, "reader") as browser:
        page = await browser.open(authorization_url(oauth_server, url, challenge))
        assert "/clients/impostor.json" in document_host.fetched
        # An unknown client: an error page, never a redirect (the redirect URI is unverified).
        assert not page.is_redirect, page.headers.get("location")
        assert page.status_code in (400, 401)
        assert "Impostor" not in page.text
        assert not browser.consent_pages


async def test_metadata_document_on_a_private_address_is_refused_saying_why(
    oauth_server: ExampleServer,
) -> None:
    client_id = "https://10.0.0.7/clients/e2e.json"  # refused before any connection is tried
    verifier, challenge = pkce()
    async with Browser(oauth_server.base_url, "reader") as browser:
        # Twice: the second request falls in DOT's backoff (no fetch) and still says why.
        for _ in range(2):
            page = await browser.open(authorization_url(oauth_server, client_id, challenge))
            assert not page.is_redirect, page.headers.get("location")
            assert page.status_code in (400, 401)
            assert "invalid_request" in page.text
            assert (
                "metadata document was refused: its host resolves to a non-public address."
                in page.text
            )
            assert (
                "address (10.0.0.7)" not in page.text
            )  # DOT's log line names the address; the page does not
            assert "Traceback" not in page.text
        assert not browser.consent_pages


async def test_empty_scope_is_read_as_no_scope(
    oauth_server: ExampleServer, raw_client_id: str
) -> None:
    verifier, challenge = pkce()
    async with Browser(oauth_server.base_url, "reader") as browser:
        # Forced: an earlier test may have approved this client already (remembered consent).
        location = await browser.authorize(
            authorization_url(
                oauth_server, raw_client_id, challenge, scope="", approval_prompt="force"
            )
        )
        assert "code" in query_of(location), location
        assert READ_SENTENCE in browser.consent_pages[0]


async def test_denied_consent_returns_access_denied(
    oauth_server: ExampleServer, raw_client_id: str
) -> None:
    verifier, challenge = pkce()
    async with Browser(oauth_server.base_url, "reader") as browser:
        location = await browser.authorize(
            authorization_url(oauth_server, raw_client_id, challenge, approval_prompt="force"),
            allow=False,
        )
    answer = query_of(location)
    assert answer["error"] == "access_denied"
    assert answer["iss"] == oauth_server.base_url
    assert "code" not in answer


# -- registration ---------------------------------------------------------------------------------------


async def test_registration_is_limited_to_the_authorization_code_grant(
    http: httpx.AsyncClient,
) -> None:
    for grant_types in (["client_credentials"], ["password"], ["implicit"]):
        response = await register(http, grant_types=grant_types)
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "invalid_client_metadata"


async def test_registration_refuses_http_redirects_off_loopback(
    oauth_server: ExampleServer,
) -> None:
    # From its own loopback address: the registration budget of 127.0.0.1 stays for the others.
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.3")
    async with httpx.AsyncClient(
        base_url=oauth_server.base_url, transport=transport, timeout=20
    ) as http:
        for uris in (
            ["http://evil.example/cb"],
            ["https://ok.example/cb", "http://10.0.0.1/cb"],
            ["javascript:alert(1)"],
        ):
            response = await register(http, redirect_uris=uris)
            assert response.status_code == 400, response.text
            assert response.json()["error"] == "invalid_redirect_uri"
        for uris in (
            ["http://127.0.0.1:9999/cb"],
            ["http://localhost/cb", "https://app.example/cb"],
            ["http://[::1]:1234/cb"],
        ):
            assert (await register(http, redirect_uris=uris)).status_code == 201


async def test_registration_is_rate_limited_per_address(oauth_server: ExampleServer) -> None:
    # From another loopback address, so the budget of 127.0.0.1 (the other tests) is untouched.
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(
        base_url=oauth_server.base_url, transport=transport, timeout=20
    ) as other:
        statuses = [(await register(other)).status_code for _ in range(DCR_RATE_LIMIT + 1)]
        limited = await register(other)
    assert statuses[:DCR_RATE_LIMIT] == [201] * DCR_RATE_LIMIT
    assert statuses[DCR_RATE_LIMIT] == 429
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) > 0


# -- the admin: who sees and revokes what --------------------------------------------------------------


async def admin_page(browser: Browser, path: str) -> httpx.Response:
    page = await browser.open(path)
    assert page.status_code == 200, page.text[:2000]
    return page


async def test_staff_see_and_revoke_only_their_own_tokens_in_the_admin(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str
) -> None:
    mine = await obtain_tokens(oauth_server, http, raw_client_id, "librarian")
    theirs = await obtain_tokens(oauth_server, http, raw_client_id, "reader")

    async with Browser(oauth_server.base_url, "librarian") as librarian:
        # Staff without any permission on DOT's models: they see their own tokens, and only those.
        tokens = await admin_page(librarian, "/admin/oauth2_provider/accesstoken/")
        ids = re.findall(r'name="_selected_action" value="(\d+)"', tokens.text)
        assert ids
        assert ">librarian<" in tokens.text
        assert ">reader<" not in tokens.text
        detail = await admin_page(librarian, f"/admin/oauth2_provider/accesstoken/{ids[0]}/change/")
        assert "library:read" in detail.text
        applications = await admin_page(librarian, "/admin/oauth2_provider/application/")
        assert "E2E raw client" in applications.text

        # Revoke them all with the admin action, as a user would from the changelist.
        done = await librarian.http.post(
            "/admin/oauth2_provider/accesstoken/",
            data={
                "csrfmiddlewaretoken": librarian.http.cookies["csrftoken"],
                "action": "revoke_tokens",
                "index": "0",
                "_selected_action": ids,
            },
        )
        assert done.status_code == 302, done.text[:2000]
        assert not re.findall(
            r'name="_selected_action"',
            (await admin_page(librarian, "/admin/oauth2_provider/accesstoken/")).text,
        )

    assert (await mcp_post(http, mine["access_token"], INITIALIZE)).status_code == 401
    assert (await mcp_post(http, theirs["access_token"], INITIALIZE)).status_code == 200

    async with Browser(oauth_server.base_url, "admin") as admin:
        everything = await admin_page(admin, "/admin/oauth2_provider/accesstoken/")
        assert ">reader<" in everything.text


async def revoke_on_connected_page(browser: Browser, page: httpx.Response, name: str) -> None:
    """Press the Revoke button of application ``name`` on the connected-applications ``page``."""
    row = next(row for row in page.text.split("<tr>") if name in row)
    fields = form_fields(row.replace("<form", '<form id="revoke"', 1), "revoke")
    done = await browser.http.post("/accounts/applications/", data=fields)
    assert done.status_code == 302
    after = await browser.open("/accounts/applications/")
    assert "can no longer act for you" in after.text


async def test_any_user_sees_and_revokes_connected_applications(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str
) -> None:
    tokens = await obtain_tokens(oauth_server, http, raw_client_id, "reader")
    async with Browser(oauth_server.base_url, "reader") as reader:  # not staff: no admin
        page = await reader.open("/accounts/applications/")
        assert page.status_code == 200
        assert "E2E raw client" in page.text
        assert "127.0.0.1:33418" in page.text
        assert READ_SENTENCE in page.text
        await revoke_on_connected_page(reader, page, "E2E raw client")
    assert (await mcp_post(http, tokens["access_token"], INITIALIZE)).status_code == 401


async def test_consent_is_asked_once_per_client_and_scopes_until_revoked(
    oauth_server: ExampleServer, document_host: DocumentHost, http: httpx.AsyncClient
) -> None:
    # A metadata document: every SDK session below is the same client.
    name = "E2E remembering client"
    url = document_host.publish(
        "/clients/e2e-remembered.json",
        {
            "client_id": document_host.base_url + "/clients/e2e-remembered.json",
            "client_name": name,
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
        },
    )

    issued: list[str] = []

    async def session(*, write: bool = False) -> BrowserHandlers:
        async with sdk_client(oauth_server, "reader", client_metadata_url=url) as (
            client,
            provider,
            handlers,
            storage,
        ):
            result = await client.call_tool("book_availability", {"isbn": POEMS})
            assert not result.is_error, text_of(result)
            if write:
                borrowed = await client.call_tool(
                    "borrow_book", {"isbn": POEMS, "member_username": "reader"}
                )
                assert not borrowed.is_error, text_of(borrowed)
                assert borrowed.structured_content is not None
                returned = await client.call_tool(
                    "return_book", {"loan_id": borrowed.structured_content["loan_id"]}
                )
                assert not returned.is_error, text_of(returned)
            assert storage.tokens is not None
            issued.append(storage.tokens.access_token)
        return handlers

    # By hand for library:read alone (the SDK asks for every scope the challenge names).
    async def read_only() -> list[str]:
        pages: list[str] = []
        tokens = await obtain_tokens(
            oauth_server, http, url, scope="library:read", consent_pages=pages
        )
        issued.append(tokens["access_token"])
        return pages

    assert len(await read_only()) == 1
    # Same client, same scopes: authorized without a form.
    assert await read_only() == []
    # Still remembered once the access token expired, while its refresh token works (DOT alone
    # would ask again): the client is still listed on the connected-applications page.
    for token in issued:
        set_token(oauth_server, token, expires="timezone.now() - timedelta(seconds=1)")
    assert await read_only() == []
    # A wider scope set (the SDK's library:read and library:write) asks again, for the new scope.
    wider = await session(write=True)
    assert len(wider.authorization_urls) == 1
    assert len(wider.browser.consent_pages) == 1
    assert WRITE_SENTENCE in wider.browser.consent_pages[0]
    # And is remembered in turn.
    assert not (await session(write=True)).browser.consent_pages

    async with Browser(oauth_server.base_url, "reader") as reader:
        page = await reader.open("/accounts/applications/")
        assert name in page.text
        await revoke_on_connected_page(reader, page, name)
    # Revoked: the approval is forgotten with the tokens.
    after = await session()
    assert len(after.browser.consent_pages) == 1


# -- housekeeping --------------------------------------------------------------------------------------


async def test_prune_dcr_clients_deletes_only_unused_registrations(
    oauth_server: ExampleServer, http: httpx.AsyncClient, raw_client_id: str
) -> None:
    unused = (await register(http, client_name="E2E never used")).json()["client_id"]
    await obtain_tokens(oauth_server, http, raw_client_id)  # a live token keeps the client
    output = manage(oauth_server.env, "prune_dcr_clients", "--days", "0")
    assert output.startswith("Deleted "), output
    exists = manage(
        oauth_server.env,
        "shell",
        "-v0",
        "-c",
        "from oauth2_provider.models import Application\n"
        f"print(*(Application.objects.filter(client_id=c).exists() for c in ({unused!r}, {raw_client_id!r})))",
    )
    assert exists.split() == ["False", "True"]


# -- last: the server's own view of the run -------------------------------------------------------


def test_oauth_server_logged_no_errors(oauth_server: ExampleServer) -> None:
    log = oauth_server.log()
    assert "Traceback" not in log, log
    assert not [line for line in log.splitlines() if " ERROR " in line or " CRITICAL " in line], log
