"""A service client of the example site, live: a machine client gets a token with the
``client_credentials`` grant over HTTP from django-oauth-toolkit's token endpoint, then the
official SDK client calls tools with it, as the service user an admin bound it to.

The server is another process of the example site with OAuth on, on the e2e database; what
this module creates there (a service user, its application and mark, a book) it deletes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .conftest import ExampleServer, manage, run_oauth_server, tool_names
from .oauth_helpers import DocumentHost

pytestmark = pytest.mark.e2e

BOT = "e2e-catalogue-bot"
SECRET = "e2e-service-client-secret"
ISBN = "9780000990035"  # no demo book has it

# The service user may add books (and read the catalogue), not change them; the mark allows
# both of the site's scopes. The script prints the application's client_id.
SETUP = f"""
from django.contrib.auth.models import Permission, User
from oauth2_provider.models import Application
from mcp_django.auth.service_clients.models import ServiceClient
bot = User.objects.create_user({BOT!r}, password=None)
bot.user_permissions.set(Permission.objects.filter(
    content_type__app_label="library", codename__in=["view_book", "add_book"]))
app = Application.objects.create(
    name="E2E nightly catalogue import", client_type="confidential",
    authorization_grant_type="client-credentials", client_secret={SECRET!r})
ServiceClient.objects.create(application=app, user=bot, scope="library:read library:write")
print(app.client_id)
"""
TEARDOWN = f"""
from django.contrib.auth.models import User
from oauth2_provider.models import Application
from example_site.library.models import Book
Book.objects.filter(isbn={ISBN!r}).delete()
Application.objects.filter(name="E2E nightly catalogue import").delete()
User.objects.filter(username={BOT!r}).delete()
"""


@pytest.fixture(scope="module")
def service_server(
    example_server: ExampleServer, document_host: DocumentHost
) -> Iterator[ExampleServer]:
    with run_oauth_server(example_server, document_host, "service-clients", {}) as server:
        yield server


@pytest.fixture(scope="module")
def client_id(service_server: ExampleServer) -> Iterator[str]:
    """The service client's id, marked for the service user; all of it removed afterwards."""
    client_id = manage(service_server.env, "shell", "-v0", "-c", SETUP).strip()
    try:
        yield client_id
    finally:
        manage(service_server.env, "shell", "-v0", "-c", TEARDOWN)


def token_request(server: ExampleServer, client_id: str, **fields: str) -> httpx.Response:
    """The machine client's request: HTTP Basic client authentication, as the docs' curl does."""
    return httpx.post(
        f"{server.base_url}/o/token/",
        data={"grant_type": "client_credentials", "resource": server.mcp_url, **fields},
        auth=(client_id, SECRET),
        timeout=20,
    )


@asynccontextmanager
async def sdk_client(server: ExampleServer, token: str) -> AsyncIterator[Client]:
    """The official SDK client, sending the token in an Authorization header on every request."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=20) as http:
        transport = streamable_http_client(server.mcp_url, http_client=http)
        async with Client(transport, read_timeout_seconds=20) as client:
            yield client


def test_the_authorization_server_advertises_the_client_credentials_grant(
    service_server: ExampleServer,
) -> None:
    metadata = httpx.get(f"{service_server.base_url}/.well-known/oauth-authorization-server")

    assert "client_credentials" in metadata.json()["grant_types_supported"]


async def test_a_service_client_calls_what_its_service_user_may_and_no_more(
    service_server: ExampleServer, client_id: str
) -> None:
    response = token_request(service_server, client_id, scope="library:read library:write")
    assert response.status_code == 200, response.text
    token = response.json()["access_token"]
    assert "refresh_token" not in response.json()

    async with sdk_client(service_server, token) as client:
        tools = await tool_names(client)
        created = await client.call_tool(
            "library_book_create",
            {
                "title": "Nightly import",
                "author": 1,
                "isbn": ISBN,
                "published": 2026,
                "genre": "poetry",
            },
        )
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("library_book_update", {"pk": 1, "summary": "Changed."})

    # add_book, not change_book: the service user's permissions, not the token's scopes, decide.
    assert "library_book_create" in tools and "library_book_update" not in tools
    assert not created.is_error, created
    shown = manage(
        service_server.env,
        "shell",
        "-v0",
        "-c",
        "import json\nfrom example_site.library.models import Book\n"
        f"titles = Book.objects.filter(isbn={ISBN!r}).values_list('title', flat=True)\n"
        "print(json.dumps(list(titles)))",
    )
    assert json.loads(shown) == ["Nightly import"]


def test_the_token_endpoint_refuses_what_the_mark_does_not_allow(
    service_server: ExampleServer, client_id: str
) -> None:
    wrong_secret = httpx.post(
        f"{service_server.base_url}/o/token/",
        data={"grant_type": "client_credentials"},
        auth=(client_id, "guess"),
        timeout=20,
    )
    other_resource = token_request(service_server, client_id, resource="https://api.example.com/")
    other_scope = token_request(service_server, client_id, scope="library:admin")

    assert (wrong_secret.status_code, wrong_secret.json()["error"]) == (401, "invalid_client")
    assert other_resource.json()["error"] == "invalid_target"
    assert other_scope.json()["error"] == "invalid_scope"


def test_the_admin_shows_service_client_tokens_beside_the_users_others(
    service_server: ExampleServer, client_id: str
) -> None:
    assert token_request(service_server, client_id).status_code == 200
    cookies = service_server.login("admin")

    page = httpx.get(
        f"{service_server.base_url}/admin/oauth2_provider/accesstoken/",
        params={"issued_to": "service"},
        cookies=cookies,
        timeout=20,
    )

    assert page.status_code == 200
    assert BOT in page.text and "E2E nightly catalogue import" in page.text


def test_the_admin_shows_the_mark_on_the_applications_page(
    service_server: ExampleServer, client_id: str
) -> None:
    pk = manage(
        service_server.env,
        "shell",
        "-v0",
        "-c",
        "from oauth2_provider.models import Application\n"
        f"print(Application.objects.get(client_id={client_id!r}).pk)",
    ).strip()
    cookies = service_server.login("admin")

    page = httpx.get(
        f"{service_server.base_url}/admin/oauth2_provider/application/{pk}/change/",
        cookies=cookies,
        timeout=20,
    )

    assert page.status_code == 200
    assert "Service client (client credentials)" in page.text
    assert 'name="mcp_service_client-0-scope"' in page.text
    assert 'value="library:read library:write"' in page.text
