"""A site mounted under a path prefix (/app): the 401 challenge, the protected-resource metadata
(RFC 9728, path-suffixed), the authorization server metadata (RFC 8414, an issuer with a path)
and every endpoint it names agree and answer, under ASGI (root_path, through MCPRouter) and
under WSGI (SCRIPT_NAME, Django's own handler and mcp_django's well-known view).

Each URL is fetched as the proxy of docs/howto/deploy.md ("Under a path prefix") forwards it: a
public path under /app/ reaches the site as the path below the script name /app, and a
well-known path at the host's root reaches it whole, below the same script name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.test import Client, RequestFactory, override_settings
from django.urls import set_script_prefix

from mcp_django.auth.base import AuthenticationFailed
from mcp_django.auth.oauth import OAuthAuthentication
from mcp_django.testing import MCPTestClient, Response
from mcp_django.transport.authentication import build_request
from tests.conftest import BASE_SETTINGS

pytestmark = pytest.mark.django_db(transaction=True)

MOUNT = "/app"
ORIGIN = "https://mcp.example.com"
RESOURCE = f"{ORIGIN}/app/mcp"
ISSUER = f"{ORIGIN}/app"
PRM_URL = f"{ORIGIN}/.well-known/oauth-protected-resource/app/mcp"
AS_METADATA_URL = f"{ORIGIN}/.well-known/oauth-authorization-server/app"
OAUTH = {**BASE_SETTINGS, "AUTHENTICATION": "oauth", "RESOURCE_URL": RESOURCE}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
#: The RFC 8414 fields that name an endpoint a client calls.
ENDPOINT_FIELDS = ("authorization_endpoint", "token_endpoint", "revocation_endpoint")


@pytest.fixture(autouse=True)
def _own_authorization_server() -> Iterator[None]:
    """The test project serves DOT's endpoints and metadata too, with its issuer fixed."""
    with override_settings(
        ROOT_URLCONF="tests.urls_oauth_server",
        OAUTH2_PROVIDER={"OIDC_ISS_ENDPOINT": ISSUER},
        MCP_DJANGO=OAUTH,
    ):
        yield


def through_proxy(url: str) -> str:
    """The path below the script name /app at which the proxy hands ``url`` to the site."""
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == ORIGIN, url
    if parts.path.startswith("/.well-known/"):
        return parts.path
    assert parts.path.startswith(MOUNT + "/"), f"the proxy sends nothing else to the site: {url}"
    return parts.path[len(MOUNT) :]


#: How the site learns its prefix: from the server (ASGI root_path, WSGI SCRIPT_NAME), or from
#: Django's FORCE_SCRIPT_NAME with the server unaware of it (docs/howto/deploy.md).
PREFIX_SOURCES = ["server", "FORCE_SCRIPT_NAME"]


@pytest.fixture(params=PREFIX_SOURCES)
def prefix_source(request: pytest.FixtureRequest) -> Iterator[str]:
    with override_settings(FORCE_SCRIPT_NAME=MOUNT if request.param != "server" else None):
        yield str(request.param)


def asgi_client(source: str = "server") -> MCPTestClient:
    """A client of the site under /app: root_path as uvicorn's --root-path sets it, or none."""
    return MCPTestClient(root_path=MOUNT if source == "server" else "")


async def asgi_get(url: str, source: str = "server") -> Response:
    """GET ``url`` through the proxy, the site served under /app."""
    return await asgi_client(source).send(
        "GET", path=through_proxy(url), headers={"accept": "application/json"}
    )


def wsgi_environ(source: str) -> dict[str, str]:
    """What a WSGI server passes: SCRIPT_NAME /app, or nothing (FORCE_SCRIPT_NAME says it)."""
    return {"SCRIPT_NAME": MOUNT} if source == "server" else {}


def wsgi_get(url: str, source: str = "server") -> Any:
    """GET ``url`` through the proxy, served under SCRIPT_NAME /app (or FORCE_SCRIPT_NAME). The
    script prefix is set as Django's WSGIHandler sets it (the test client's handler does not)."""
    set_script_prefix(MOUNT)
    try:
        return Client().get(
            through_proxy(url), HTTP_ACCEPT="application/json", **wsgi_environ(source)
        )
    finally:
        set_script_prefix("/")


def wsgi_challenge(source: str) -> str:
    """The WWW-Authenticate of an unauthenticated WSGI request to the endpoint, as a plain view
    under WSGI runs the OAuth policy."""
    request = RequestFactory().post("/mcp/", **wsgi_environ(source))
    with pytest.raises(AuthenticationFailed) as failed:
        async_to_sync(OAuthAuthentication().authenticate)(request)
    return str(failed.value.headers["WWW-Authenticate"])


def resource_metadata(challenge: str) -> str:
    """The resource_metadata URL of a WWW-Authenticate challenge."""
    return challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]


def assert_answers(status: int, url: str) -> None:
    """An advertised endpoint exists: it may refuse a bare GET (405, a redirect to log in), but
    never with 404 or a server error."""
    assert status != 404 and status < 500, f"{url} answered {status}"


async def test_the_challenge_under_a_prefix_names_the_metadata_at_the_hosts_root() -> None:
    response = await MCPTestClient(root_path=MOUNT).post(PING)

    assert response.status == 401
    assert resource_metadata(response.headers["www-authenticate"]) == PRM_URL


@pytest.mark.parametrize(
    "url",
    [
        PRM_URL,
        f"{ORIGIN}/.well-known/oauth-protected-resource",
        # A proxy that maps the document into the prefix: /app/.well-known/...-resource/mcp.
        f"{ORIGIN}/.well-known/oauth-protected-resource/mcp",
    ],
    ids=["path-suffixed", "root", "below-the-prefix"],
)
async def test_the_metadata_names_the_prefixed_resource_and_issuer_under_asgi_and_wsgi(
    url: str,
) -> None:
    expected = {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["notes:write"],  # the test site's scoped_write tool
        "resource_name": "mcp-django-tests",
    }

    asgi = await asgi_get(url)
    wsgi = await sync_wsgi_get(url)

    assert asgi.status == 200 and wsgi.status_code == 200
    assert orjson.loads(asgi.body) == orjson.loads(wsgi.content) == expected
    assert asgi.headers["access-control-allow-origin"] == wsgi["Access-Control-Allow-Origin"] == "*"


async def test_a_suffix_naming_no_endpoint_is_not_found_under_asgi_and_wsgi() -> None:
    url = f"{ORIGIN}/.well-known/oauth-protected-resource/app/nothing"

    assert (await asgi_get(url)).status == 404
    assert (await sync_wsgi_get(url)).status_code == 404


async def test_the_discovery_chain_answers_at_every_step_under_asgi(prefix_source: str) -> None:
    response = await asgi_client(prefix_source).post(PING)
    challenge = response.headers["www-authenticate"]

    protected = await asgi_get(resource_metadata(challenge), prefix_source)
    [issuer] = orjson.loads(protected.body)["authorization_servers"]
    server = await asgi_get(rfc8414_url(issuer), prefix_source)
    metadata = orjson.loads(server.body)

    assert resource_metadata(challenge) == PRM_URL
    assert protected.status == 200 and server.status == 200
    assert metadata["issuer"] == issuer == ISSUER
    for field in ENDPOINT_FIELDS:
        assert metadata[field].startswith(ISSUER + "/")
        answer = await asgi_get(metadata[field], prefix_source)
        assert_answers(answer.status, metadata[field])


def test_the_discovery_chain_answers_at_every_step_under_wsgi(prefix_source: str) -> None:
    challenge = wsgi_challenge(prefix_source)

    protected = wsgi_get(resource_metadata(challenge), prefix_source)
    [issuer] = protected.json()["authorization_servers"]
    server = wsgi_get(rfc8414_url(issuer), prefix_source)
    metadata = server.json()

    assert resource_metadata(challenge) == PRM_URL
    assert protected.status_code == 200 and server.status_code == 200
    assert metadata["issuer"] == issuer == ISSUER
    for field in ENDPOINT_FIELDS:
        assert metadata[field].startswith(ISSUER + "/")
        assert_answers(wsgi_get(metadata[field], prefix_source).status_code, metadata[field])


def test_without_resource_url_a_wsgi_request_derives_the_prefixed_resource(
    prefix_source: str,
) -> None:
    with override_settings(MCP_DJANGO={**OAUTH, "RESOURCE_URL": None}):
        challenge = wsgi_challenge(prefix_source)
        set_script_prefix(MOUNT)
        try:
            response = Client().get(
                urlsplit(resource_metadata(challenge)).path, **wsgi_environ(prefix_source)
            )
        finally:
            set_script_prefix("/")

    assert resource_metadata(challenge) == (
        "http://testserver/.well-known/oauth-protected-resource/app/mcp"
    )
    assert response.json()["resource"] == "http://testserver/app/mcp"
    assert response.json()["authorization_servers"] == ["http://testserver/app"]


async def test_without_resource_url_the_challenge_and_metadata_derive_the_prefixed_resource() -> (
    None
):
    with override_settings(MCP_DJANGO={**OAUTH, "RESOURCE_URL": None}):
        challenge = (await MCPTestClient(root_path=MOUNT).post(PING)).headers["www-authenticate"]
        response = await MCPTestClient(root_path=MOUNT).send(
            "GET", path=urlsplit(resource_metadata(challenge)).path
        )

    assert resource_metadata(challenge) == (
        "http://testserver/.well-known/oauth-protected-resource/app/mcp"
    )
    document = orjson.loads(response.body)
    assert document["resource"] == "http://testserver/app/mcp"
    assert document["authorization_servers"] == ["http://testserver/app"]


def test_the_endpoints_path_keeps_the_prefix_when_the_asgi_path_lacks_it() -> None:
    # Daphne's --root-path leaves the prefix out of "path"; uvicorn's puts it in.
    base = {"type": "http", "method": "POST", "headers": [], "query_string": b""}
    daphne = build_request({**base, "path": "/mcp/", "root_path": MOUNT})
    uvicorn = build_request({**base, "path": "/app/mcp/", "root_path": MOUNT})

    assert isinstance(daphne, ASGIRequest)
    assert daphne.mcp_endpoint_path == uvicorn.mcp_endpoint_path == "/app/mcp"  # type: ignore[attr-defined]


# -- helpers that cross from async tests to sync code ----------------------------------------


def rfc8414_url(issuer: str) -> str:
    """RFC 8414 section 3: the well-known prefix between the issuer's host and its path."""
    parts = urlsplit(issuer)
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}"


async def sync_wsgi_get(url: str) -> Any:
    return await sync_to_async(wsgi_get)(url)
