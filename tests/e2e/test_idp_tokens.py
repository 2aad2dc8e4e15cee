"""The example site as a pure resource server for a real OpenID Connect provider, live.

npm's ``oidc-provider`` runs on loopback (tests/e2e/oidc_provider.py), issuing RFC 9068 JWT
access tokens for the resource indicator a client names (RFC 8707). The example site runs under
uvicorn with ``MCP_AUTH=jwt`` and ``MCP_JWT_ISSUER`` naming that provider, so it runs no
authorization server of its own: its protected-resource metadata sends clients to the provider.

The official SDK's OAuth client (``mcp.client.auth.OAuthClientProvider``) does the whole
authorization-code flow against the provider (discovery from our 401, dynamic registration,
PKCE, the resource indicator; a headless browser signs in as a demo user) and then calls tools
on our site as that user. Tokens the provider mints for another resource, or for a client with
no user, are refused; so is each hand-made token that breaks one rule, signed with the
provider's own key where a signature is needed (the site found that key in the provider's JWKS).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
import httpx2
import jwt
import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from mcp.types import TextContent

from tests.asgi_servers import free_port

from .conftest import ExampleServer, copy_database, run_server, server_env
from .oauth_helpers import MemoryTokenStorage
from .oidc_provider import IdentityProvider, running_provider

pytestmark = pytest.mark.e2e

REDIRECT_URI = "http://127.0.0.1:33419/callback"  # a native client's listener (never contacted)
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    with running_provider(tmp_path_factory.mktemp("idp") / "oidc-provider.log") as provider:
        yield provider


@pytest.fixture(scope="module")
def site(
    idp: IdentityProvider, demo_database: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleServer]:
    """The example site, a resource server for ``idp`` only, at a URL it knows in advance."""
    workdir = tmp_path_factory.mktemp("idp-site")
    port = free_port()
    env = {
        **server_env(copy_database(demo_database, workdir / "example.sqlite3"), auth="jwt"),
        "MCP_JWT_ISSUER": idp.issuer,
        "MCP_RESOURCE_URL": f"http://127.0.0.1:{port}/mcp",
    }
    with run_server(env, workdir / "uvicorn.log", port=port, server="uvicorn") as server:
        yield server


def now() -> int:
    return int(time.time())


def claims(site: ExampleServer, idp: IdentityProvider, **overrides: Any) -> dict[str, Any]:
    """What the provider puts in an access token for ``reader``, with ``overrides``."""
    values = {
        "iss": idp.issuer,
        "sub": "reader",
        "aud": site.mcp_url,
        "iat": now(),
        "exp": now() + 300,
        "jti": uuid.uuid4().hex,
        "client_id": "e2e",
        "scope": "library:read",
        **overrides,
    }
    return {k: v for k, v in values.items() if v is not None}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


async def post_ping(site: ExampleServer, token: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as http:
        return await http.post(
            site.mcp_url, json=PING, headers={**ACCEPT, "Authorization": f"Bearer {token}"}
        )


def assert_invalid_token(response: httpx.Response, site: ExampleServer, reason: str) -> None:
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"'), challenge
    assert reason in challenge, challenge
    metadata = "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata.format(urlsplit(site.base_url).port)}"' in challenge


# -- the SDK's whole flow ------------------------------------------------------------------------


class HeadlessBrowser:
    """The user's browser at the provider: follows its redirects and, on its interaction page,
    names the account to sign in as (provider.mjs finishes login and consent for it)."""

    def __init__(self, account: str) -> None:
        self.account = account
        self.http = httpx.AsyncClient(timeout=20, follow_redirects=False)
        self.authorization_urls: list[str] = []
        self.callback: str | None = None

    async def redirect_handler(self, url: str) -> None:
        self.authorization_urls.append(url)
        response = await self.http.get(url)
        for _ in range(10):
            assert response.is_redirect, f"{response.status_code}: {response.text[:2000]}"
            location = urljoin(str(response.url), response.headers["location"])
            if location.startswith(REDIRECT_URI):
                self.callback = location
                return
            if "/interaction/" in location:
                location += "?" + urlencode({"account": self.account})
            response = await self.http.get(location)
        raise AssertionError("the provider never sent the browser back to the client")

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self.callback is not None
        params = {k: v[-1] for k, v in parse_qs(urlsplit(self.callback).query).items()}
        assert "code" in params, f"no code in {self.callback}"
        return AuthorizationCodeResult(
            code=params["code"], state=params.get("state"), iss=params.get("iss")
        )


@asynccontextmanager
async def sdk_client(
    site: ExampleServer, account: str
) -> AsyncIterator[tuple[Client, HeadlessBrowser, MemoryTokenStorage]]:
    storage = MemoryTokenStorage()
    browser = HeadlessBrowser(account)
    provider = OAuthClientProvider(
        server_url=site.mcp_url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[REDIRECT_URI],
            client_name="E2E client of an external IdP",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
    )
    try:
        async with httpx2.AsyncClient(auth=provider, timeout=20) as http_client:
            transport = streamable_http_client(site.mcp_url, http_client=http_client)
            async with Client(transport, read_timeout_seconds=20) as client:
                yield client, browser, storage
    finally:
        await browser.http.aclose()


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def test_the_sdk_signs_in_at_the_provider_and_calls_tools_as_that_user(
    site: ExampleServer, idp: IdentityProvider
) -> None:
    async with sdk_client(site, "reader") as (client, browser, storage):
        found = await client.call_tool("search_books", {"query": "wells"})
        own_loans = await client.call_tool("member_loans", {"member_username": "reader"})
        others = await client.call_tool("member_loans", {"member_username": "librarian"})

    assert not found.is_error, text_of(found)
    assert found.structured_content is not None and found.structured_content["books"]
    # The token acts for reader: their own loans, and not the librarian's (reader is no staff).
    assert not own_loans.is_error, text_of(own_loans)
    assert others.is_error
    # One authorization at the provider, sent there by our metadata, for our resource.
    [authorization] = browser.authorization_urls
    assert authorization.startswith(idp.issuer + "/auth?")
    query = {k: v[-1] for k, v in parse_qs(urlsplit(authorization).query).items()}
    assert query["resource"] == site.mcp_url and query["code_challenge_method"] == "S256"
    # What the provider issued: an RFC 9068 JWT for this server, acting for reader.
    assert storage.tokens is not None
    token = storage.tokens.access_token
    assert jwt.get_unverified_header(token)["typ"] == "at+jwt"
    issued = jwt.decode(token, options={"verify_signature": False})
    assert issued["iss"] == idp.issuer and issued["sub"] == "reader"
    assert issued["aud"] == site.mcp_url
    assert set(issued["scope"].split()) == {"library:read", "library:write"}


async def test_the_metadata_names_the_provider_and_not_the_sites_own_server(
    site: ExampleServer, idp: IdentityProvider
) -> None:
    async with httpx.AsyncClient(timeout=20) as http:
        response = await http.get(f"{site.base_url}/.well-known/oauth-protected-resource/mcp")

    assert response.status_code == 200
    document = response.json()
    assert document["resource"] == site.mcp_url
    assert document["authorization_servers"] == [idp.issuer]


# -- tokens the provider minted, refused -----------------------------------------------------------


async def client_credentials_token(idp: IdentityProvider, resource: str) -> str:
    async with httpx.AsyncClient(timeout=20) as http:
        response = await http.post(
            f"{idp.issuer}/token",
            data={
                "grant_type": "client_credentials",
                "resource": resource,
                "scope": "library:read",
            },
            auth=("machine", "machine-secret"),
        )
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


async def test_a_token_the_provider_issued_for_another_resource_is_refused(
    site: ExampleServer, idp: IdentityProvider
) -> None:
    token = await client_credentials_token(idp, f"{site.base_url}/other-mcp")

    response = await post_ping(site, token)

    assert_invalid_token(response, site, "not issued for this server")


async def test_a_token_the_provider_issued_for_a_client_without_user_is_refused(
    site: ExampleServer, idp: IdentityProvider
) -> None:
    token = await client_credentials_token(idp, site.mcp_url)  # sub: the client, "machine"

    response = await post_ping(site, token)

    assert_invalid_token(response, site, "does not act for an active user")


# -- hand-made tokens: one broken rule each --------------------------------------------------------


async def test_a_hand_made_token_signed_with_the_providers_key_is_accepted(
    site: ExampleServer, idp: IdentityProvider
) -> None:
    response = await post_ping(site, idp.sign(claims(site, idp)))

    assert response.status_code == 200, response.text


def _hs256_with_the_public_key(site: ExampleServer, idp: IdentityProvider) -> str:
    header = {"alg": "HS256", "typ": "at+jwt", "kid": "idp-1"}
    unsigned = f"{_b64(orjson.dumps(header))}.{_b64(orjson.dumps(claims(site, idp)))}"
    signature = hmac.new(idp.public_pem, unsigned.encode(), hashlib.sha256).digest()
    return f"{unsigned}.{_b64(signature)}"


def _alg_none(site: ExampleServer, idp: IdentityProvider) -> str:
    header = {"alg": "none", "typ": "at+jwt", "kid": "idp-1"}
    return f"{_b64(orjson.dumps(header))}.{_b64(orjson.dumps(claims(site, idp)))}."


ROGUE_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)

BROKEN = {
    "wrong issuer": (
        lambda site, idp: idp.sign(claims(site, idp, iss="http://127.0.0.1:1/evil")),
        "not issued by a trusted issuer",
    ),
    "wrong audience": (
        lambda site, idp: idp.sign(claims(site, idp, aud="https://other.example.com/mcp")),
        "not issued for this server",
    ),
    "expired": (
        lambda site, idp: idp.sign(claims(site, idp, iat=now() - 900, exp=now() - 120)),
        "expired",
    ),
    "not yet valid": (
        lambda site, idp: idp.sign(claims(site, idp, nbf=now() + 600)),
        "not valid yet",
    ),
    "unknown key": (
        lambda site, idp: jwt.encode(
            claims(site, idp), ROGUE_KEY, "RS256", headers={"kid": "rotated-away"}
        ),
        "a key the issuer does not publish",
    ),
    "bad signature": (
        lambda site, idp: jwt.encode(
            claims(site, idp), ROGUE_KEY, "RS256", headers={"kid": "idp-1"}
        ),
        "signature does not verify",
    ),
    "alg none": (_alg_none, "algorithm 'none' is not accepted"),
    "HS256 keyed with the public key": (
        _hs256_with_the_public_key,
        "algorithm 'HS256' is not accepted",
    ),
    "an ID-JAG is no access token": (
        lambda site, idp: idp.sign(claims(site, idp), typ="oauth-id-jag+jwt"),
        "not an access token",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
async def test_each_broken_token_gets_its_401(
    site: ExampleServer, idp: IdentityProvider, case: str
) -> None:
    make, reason = BROKEN[case]

    response = await post_ping(site, make(site, idp))

    assert_invalid_token(response, site, reason)


async def test_a_token_without_the_write_scope_steps_up_on_a_write_tool(
    site: ExampleServer, idp: IdentityProvider
) -> None:
    token = idp.sign(claims(site, idp, scope="library:read"))
    headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "e2e-idp", "version": "0"},
        },
    }
    async with httpx.AsyncClient(timeout=20) as http:
        opened = await http.post(site.mcp_url, json=initialize, headers=headers)
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "borrow_book",
                "arguments": {"isbn": "9780000900011", "member_username": "reader"},
            },
        }
        response = await http.post(site.mcp_url, json=call, headers={**headers, **session})

    assert response.status_code == 403, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope"')
    assert "library:write" in challenge
