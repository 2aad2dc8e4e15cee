"""The packaged OAuth validator (``mcp_django.auth.oauth_validator``), named by dotted path in a
project's ``OAUTH2_PROVIDER``: tokens for the MCP endpoint only, and why a client ID metadata
document was refused, in words safe to show anyone.

DOT raises ``CIMDError`` with the resolved address or the network error in its text and only
logs it; the packaged fetcher keeps a public reason for the page and ``error_description``.
The refusals below are DOT's own, raised by its real fetcher where no network is needed.
"""

from __future__ import annotations

import base64
import hashlib
import re
import socket
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from django.utils.module_loading import import_string
from oauth2_provider.cimd import CIMDError
from oauth2_provider.models import AccessToken, Application
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.common import Request
from oauthlib.oauth2.rfc6749 import errors

from mcp_django.auth.oauth_validator import (
    MCPOAuth2Validator,
    MetadataFetcher,
    _refusal_key,
    mcp_resource,
    public_reason,
)
from tests.conftest import make_user

DOCS = Path(__file__).resolve().parents[2] / "docs"
ENDPOINT = {"AUTHENTICATION": "oauth", "RESOURCE_URL": "https://MCP.example.com/mcp/"}


def token_request(**fields: Any) -> Request:
    request = Request("https://mcp.example.com/o/token/", http_method="POST")
    for name, value in fields.items():
        setattr(request, name, value)
    return request


def test_the_dotted_paths_the_docs_give_import_the_packaged_validator_and_fetcher() -> None:
    # example_site/ is not in the wheel: a path into it fails every project that follows the docs.
    text = (DOCS / "authorization.md").read_text()
    paths = set(re.findall(r'"(OAUTH2_VALIDATOR_CLASS|CIMD_METADATA_FETCHER)": "([\w.]+)"', text))
    assert {key for key, _ in paths} == {"OAUTH2_VALIDATOR_CLASS", "CIMD_METADATA_FETCHER"}
    for key, path in paths:
        assert path.startswith("mcp_django."), (key, path)
        loaded = import_string(path)
        assert issubclass(
            loaded, OAuth2Validator if key == "OAUTH2_VALIDATOR_CLASS" else MetadataFetcher
        )


@override_settings(MCP_DJANGO=ENDPOINT)
def test_a_token_for_another_resource_is_refused_with_invalid_target() -> None:
    validator = MCPOAuth2Validator()
    validator._validate_resource_uris(
        token_request(), ["https://mcp.example.com/mcp"]
    )  # the endpoint
    with pytest.raises(errors.CustomOAuth2Error) as refused:
        validator._validate_resource_uris(token_request(), ["https://api.example.com/"])
    assert refused.value.error == "invalid_target"
    assert "only for https://mcp.example.com/mcp" in refused.value.description


@override_settings(MCP_DJANGO=ENDPOINT)
def test_a_token_request_naming_no_resource_is_bound_to_the_endpoint() -> None:
    request = token_request(resource=None)
    MCPOAuth2Validator()._check_and_set_request_resource(request)
    assert request.resource == ["https://mcp.example.com/mcp"]


@override_settings(MCP_DJANGO=ENDPOINT)
def test_http_redirects_elsewhere_than_loopback_and_other_grants_are_refused() -> None:
    validator = MCPOAuth2Validator()
    assert not validator.validate_redirect_uri(
        "client", "http://evil.example/callback", token_request()
    )
    for grant in ("password", "client_credentials", "urn:ietf:params:oauth:grant-type:device_code"):
        assert not validator.validate_grant_type("client", grant, None, token_request())


@override_settings(MCP_DJANGO={"AUTHENTICATION": "oauth"})
def test_the_validator_without_resource_url_names_the_setting_to_set() -> None:
    with pytest.raises(ImproperlyConfigured, match="RESOURCE_URL"):
        mcp_resource()


def refusal(client_id: str) -> tuple[str, str]:
    """DOT's message and the reason the example keeps for ``client_id``."""
    cache.delete(_refusal_key(client_id))
    with pytest.raises(CIMDError) as caught:
        MetadataFetcher().fetch(client_id)
    return str(caught.value), cache.get(_refusal_key(client_id))


def test_a_private_address_is_named_as_such_without_the_address() -> None:
    message, reason = refusal("https://10.0.0.7/clients/app.json")
    assert "10.0.0.7" in message  # DOT's log line names it...
    assert reason == "its host resolves to a non-public address"  # ...the page does not


def test_a_host_that_does_not_resolve_says_so_without_the_resolver_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_such_host(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    message, reason = refusal("https://client.example.invalid/app.json")
    assert "Name or service not known" in message
    assert reason == "its host name could not be resolved"


def test_a_fetch_that_failed_hides_the_network_error() -> None:
    error = CIMDError(
        "could not fetch client_id document: ConnectTimeoutError(<urllib3 ...>, 'timed out')"
    )
    assert public_reason(error) == "it could not be fetched"


@pytest.mark.parametrize(
    "url",
    [
        "http://clients.example.com/app.json",
        "https://clients.example.com/app.json#frag",
        "https://clients.example.com",
    ],
)
def test_the_documents_own_faults_are_shown_as_dot_words_them(url: str) -> None:
    message, reason = refusal(url)
    assert reason == message
    assert reason.startswith("client_id URL must")


# -- the authorization-code flow at DOT's real endpoints ----------------------------------------

REDIRECT_URI = "https://client.example.com/callback"
VERIFIER = "v" * 64
PROVIDER = {"OAUTH2_VALIDATOR_CLASS": "mcp_django.auth.oauth_validator.MCPOAuth2Validator"}


@pytest.fixture
def own_authorization_server() -> Iterator[None]:
    with override_settings(
        ROOT_URLCONF="tests.urls_oauth_server", OAUTH2_PROVIDER=PROVIDER, MCP_DJANGO=ENDPOINT
    ):
        yield


def authorization_code(
    client: Client, application: Application, verifier: str, **fields: str
) -> str:
    """Sign in, ask /o/authorize/ for a code (the application skips the consent page), and return
    the code from the redirect."""
    client.force_login(make_user("alice"))
    digest = hashlib.sha256(verifier.encode()).digest()
    challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    response = client.get(
        "/o/authorize/",
        {
            "response_type": "code",
            "client_id": application.client_id,
            "redirect_uri": REDIRECT_URI,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            **fields,
        },
    )
    assert response.status_code == 302, response.content
    return parse_qs(urlsplit(response["Location"]).query)["code"][0]


def public_client() -> Application:
    return Application.objects.create(
        name="inspector",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
        skip_authorization=True,
    )


def exchange(client: Client, application: Application, **fields: str) -> Any:
    """POST a token request for the public client ``application`` to DOT's /o/token/."""
    return client.post("/o/token/", {"client_id": application.client_id, **fields})


def code_exchange(client: Client, application: Application, code: str, **fields: str) -> Any:
    return exchange(
        client,
        application,
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT_URI,
        code_verifier=VERIFIER,
        **fields,
    )


def assert_json_invalid_target(response: Any) -> None:
    """RFC 6749 section 5.2 with RFC 8707's code: status 400, a JSON body, said to be JSON."""
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "invalid_target"
    assert "only for https://mcp.example.com/mcp" in response.json()["error_description"]


@pytest.mark.django_db
@pytest.mark.usefixtures("own_authorization_server")
def test_a_code_exchanged_without_resource_gets_a_token_bound_to_the_endpoint() -> None:
    client, application = Client(), public_client()
    code = authorization_code(client, application, VERIFIER)

    response = code_exchange(client, application, code)

    assert response.status_code == HTTPStatus.OK, response.content
    assert AccessToken.objects.get().resource == ["https://mcp.example.com/mcp"]


@pytest.mark.django_db
@pytest.mark.usefixtures("own_authorization_server")
def test_a_code_exchanged_for_another_resource_is_refused_as_json_invalid_target() -> None:
    client, application = Client(), public_client()
    code = authorization_code(client, application, VERIFIER)

    response = code_exchange(client, application, code, resource="https://api.other.example.com/")

    assert_json_invalid_target(response)
    assert not AccessToken.objects.exists()


@pytest.mark.django_db
@pytest.mark.usefixtures("own_authorization_server")
def test_a_code_granted_for_another_resource_is_refused_as_json_invalid_target() -> None:
    client, application = Client(), public_client()
    code = authorization_code(
        client, application, VERIFIER, resource="https://api.other.example.com/"
    )

    response = code_exchange(client, application, code)

    assert_json_invalid_target(response)
    assert not AccessToken.objects.exists()


@pytest.mark.django_db
@pytest.mark.usefixtures("own_authorization_server")
def test_a_refresh_for_another_resource_is_refused_as_json_invalid_target() -> None:
    client, application = Client(), public_client()
    code = authorization_code(client, application, VERIFIER)
    tokens = code_exchange(client, application, code).json()

    response = exchange(
        client,
        application,
        grant_type="refresh_token",
        refresh_token=tokens["refresh_token"],
        resource="https://api.other.example.com/",
    )

    assert_json_invalid_target(response)
    assert AccessToken.objects.count() == 1  # the first one only
