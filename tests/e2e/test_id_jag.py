"""Managed connectors end to end: the example site's own authorization server, started with
``MCP_ID_JAG_ISSUER``, exchanges an ID-JAG minted by a test identity provider on loopback at its
real token endpoint over HTTP, and the official SDK client calls tools with the token it
bought; a refused exchange gets its RFC 7523 error and buys nothing.

The provider (tests/id_jag_idp.py) publishes OpenID Connect metadata and a JWKS; the site
fetches the keys from it as it would from Okta or Entra ID.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from tests.id_jag_idp import IdentityProvider

from .conftest import ExampleServer, manage, run_oauth_server
from .oauth_helpers import DocumentHost

pytestmark = pytest.mark.e2e

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ID = "managed-connector"
SECRET = "managed-connector-secret"

# The connector an admin registers for the client the identity provider knows: confidential,
# its client_id the one the provider stamps into every assertion.
REGISTER = f"""
from oauth2_provider.models import Application
Application.objects.filter(client_id={CLIENT_ID!r}).delete()
Application.objects.create(
    name="Managed connector", client_id={CLIENT_ID!r}, client_secret={SECRET!r},
    client_type="confidential", authorization_grant_type="authorization-code",
    redirect_uris="https://client.example.com/callback",
)
"""
COUNT_TOKENS = """
from oauth2_provider.models import AccessToken
print(AccessToken.objects.filter(application__client_id={client_id!r}).count())
"""


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    # The site's URL is known once it runs: audience and resource are set then.
    with IdentityProvider(audience="", resource="", client_id=CLIENT_ID, scope="library:read") as p:
        yield p


@pytest.fixture(scope="module")
def id_jag_server(
    example_server: ExampleServer, document_host: DocumentHost, idp: IdentityProvider
) -> Iterator[ExampleServer]:
    with run_oauth_server(
        example_server, document_host, "id-jag", {"MCP_ID_JAG_ISSUER": idp.issuer}
    ) as server:
        manage(server.env, "shell", "-c", REGISTER)
        idp.audience = server.base_url  # the site's issuer: OAUTH_ISSUER's default
        idp.resource = server.mcp_url
        yield server


def exchange(server: ExampleServer, assertion: str, secret: str = SECRET) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/o/token/",
        data={"grant_type": JWT_BEARER, "assertion": assertion},
        auth=(CLIENT_ID, secret),
        timeout=10,
    )


def tokens_of_connector(server: ExampleServer) -> int:
    return int(manage(server.env, "shell", "-v0", "-c", COUNT_TOKENS.format(client_id=CLIENT_ID)))


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def test_the_metadata_advertises_the_jwt_bearer_grant_and_the_id_jag_profile(
    id_jag_server: ExampleServer,
) -> None:
    document = httpx.get(f"{id_jag_server.base_url}/.well-known/oauth-authorization-server").json()

    assert JWT_BEARER in document["grant_types_supported"]
    assert document["authorization_grant_profiles_supported"] == [
        "urn:ietf:params:oauth:grant-profile:id-jag"
    ]


async def test_an_exchanged_id_jag_calls_tools_as_the_asserted_user(
    id_jag_server: ExampleServer, idp: IdentityProvider
) -> None:
    assertion = idp.mint(sub="U019488227", email="reader@example.com")

    response = exchange(id_jag_server, assertion)

    assert response.status_code == 200, response.text
    token = response.json()
    assert token["scope"] == "library:read"
    assert "refresh_token" not in token
    headers = {"Authorization": f"Bearer {token['access_token']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=20) as http:
        transport = streamable_http_client(id_jag_server.mcp_url, http_client=http)
        async with Client(transport, read_timeout_seconds=20) as client:
            own = await client.call_tool("member_loans", {"member_username": "reader"})
            other = await client.call_tool("member_loans", {"member_username": "alice"})
    # The token acts for reader, with reader's own rights: their loans, not alice's.
    assert not own.is_error, text_of(own)
    assert other.is_error and "signed in as 'reader'" in text_of(other)
    assert "/jwks" in idp.requests


def test_a_replayed_or_foreign_assertion_is_refused_and_buys_nothing(
    id_jag_server: ExampleServer, idp: IdentityProvider
) -> None:
    spent = idp.mint(email="reader@example.com")
    assert exchange(id_jag_server, spent).status_code == 200
    before = tokens_of_connector(id_jag_server)

    replayed = exchange(id_jag_server, spent)
    foreign = exchange(
        id_jag_server, idp.mint(email="reader@example.com", aud="https://as.other.example")
    )
    wrong_secret = exchange(id_jag_server, idp.mint(email="reader@example.com"), secret="nope")

    assert (replayed.status_code, replayed.json()["error"]) == (400, "invalid_grant")
    assert (foreign.status_code, foreign.json()["error"]) == (400, "invalid_grant")
    assert (wrong_secret.status_code, wrong_secret.json()["error"]) == (401, "invalid_client")
    assert tokens_of_connector(id_jag_server) == before
    # Refusals are logged, never with the assertion itself.
    log = id_jag_server.log()
    assert "ID-JAG exchange refused" in log
    assert spent.rsplit(".", 1)[1] not in log
