"""Enterprise-managed authorization: django-oauth-toolkit's token endpoint exchanging ID-JAG
assertions (RFC 7523 ``jwt-bearer``) for access tokens (``mcp_django.auth.oauth_server``).

The identity provider is a real HTTP server on loopback (tests/id_jag_idp.py) whose keys the
authorization server fetches through its metadata. Each check of the assertion has its refused
case, and each refusal is shown to leave no token and no recorded ``jti`` behind.
"""

from __future__ import annotations

import base64
import importlib.util
import logging
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from cryptography.hazmat.primitives.asymmetric import ec
from django.apps import apps as django_apps
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, RefreshToken

from mcp_django.auth.id_jag import ID_JAG_PROFILE, Assertion, AssertionRefused, spend
from mcp_django.auth.jwks import TrustedIssuer
from mcp_django.auth.oauth_validator import JWT_BEARER
from mcp_django.checks import check_settings
from mcp_django.models import UsedAssertion
from mcp_django.testing import MCPTestClient
from tests.conftest import BASE_SETTINGS
from tests.id_jag_idp import IdentityProvider

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://mcp.example.com"
CLIENT_ID = "managed-connector"
SECRET = "connector-secret"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]


def oauth2_provider(**overrides: Any) -> dict[str, Any]:
    return {
        "OAUTH2_VALIDATOR_CLASS": "mcp_django.auth.oauth_validator.MCPOAuth2Validator",
        "OAUTH2_SERVER_CLASS": "mcp_django.auth.oauth_server.Server",
        "OIDC_ISS_ENDPOINT": ISSUER,
        "SCOPES": {"notes:read": "Read notes", "notes:write": "Write notes"},
        "DEFAULT_SCOPES": ["notes:read"],
        "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
        # DOT keeps the server its views built on the view class; another test's server (one
        # without the grant) would otherwise answer here.
        "ALWAYS_RELOAD_OAUTHLIB_CORE": True,
        **overrides,
    }


@pytest.fixture
def idp() -> Iterator[IdentityProvider]:
    with IdentityProvider(
        audience=ISSUER, resource=RESOURCE, client_id=CLIENT_ID, scope="notes:read"
    ) as provider:
        yield provider


@pytest.fixture(autouse=True)
def configured(idp: IdentityProvider) -> Iterator[None]:
    mcp = {
        **BASE_SETTINGS,
        "AUTHENTICATION": "oauth",
        "RESOURCE_URL": RESOURCE,
        "ID_JAG_ISSUERS": [{"issuer": idp.issuer}],
    }
    with override_settings(
        MCP_DJANGO=mcp, OAUTH2_PROVIDER=oauth2_provider(), ROOT_URLCONF="tests.urls_id_jag"
    ):
        yield


@pytest.fixture
def alice() -> Any:
    return User.objects.create_user("alice", password="pw")


@pytest.fixture
def connector() -> Application:
    return Application.objects.create(
        name="managed connector",
        client_id=CLIENT_ID,
        client_secret=SECRET,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="https://client.example.com/callback",
    )


def basic(client_id: str = CLIENT_ID, secret: str = SECRET) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def exchange(assertion: str | None, *, authorization: str | None = None, **fields: str) -> Any:
    data = {"grant_type": JWT_BEARER, **fields}
    if assertion is not None:
        data["assertion"] = assertion
    headers = {"authorization": authorization or basic()}
    return Client().post("/o/token/", data, headers=headers)


def assert_refused(response: Any, error: str) -> None:
    assert response.status_code in (400, 401), response.content
    assert response.json()["error"] == error, response.json()
    assert not AccessToken.objects.exists()
    assert not UsedAssertion.objects.exists()


# -- the exchange ------------------------------------------------------------------------------


@pytest.mark.usefixtures("alice", "connector")
def test_an_id_jag_buys_an_access_token_bound_to_the_endpoint_for_its_user(
    idp: IdentityProvider,
) -> None:
    response = exchange(idp.mint(scope="notes:read"))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["scope"] == "notes:read"
    assert "refresh_token" not in body
    token = AccessToken.objects.get()
    assert token.user.username == "alice"
    assert token.application.client_id == CLIENT_ID
    assert token.resource == [RESOURCE]
    assert not RefreshToken.objects.exists()
    assert UsedAssertion.objects.count() == 1
    assert "/jwks" in idp.requests  # the keys came through the provider's metadata


@pytest.mark.usefixtures("alice", "connector")
async def test_the_token_an_id_jag_bought_calls_tools_as_the_asserted_user(
    idp: IdentityProvider,
) -> None:
    response = await sync_to_async(exchange)(idp.mint(scope="notes:read"))
    client = MCPTestClient(headers={"authorization": f"Bearer {response.json()['access_token']}"})

    await client.initialize()
    result = await client.call_tool("add", {"a": 2, "b": 3})

    assert result["content"][0]["text"] == "5"


@pytest.mark.usefixtures("alice", "connector")
def test_the_asserted_scopes_are_narrowed_to_those_the_application_may_have(
    idp: IdentityProvider,
) -> None:
    response = exchange(idp.mint(scope="notes:read other-server:admin"))

    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "notes:read"


@pytest.mark.usefixtures("alice", "connector")
def test_a_scope_parameter_narrows_the_asserted_scopes(idp: IdentityProvider) -> None:
    response = exchange(idp.mint(scope="notes:read notes:write"), scope="notes:write")

    assert response.status_code == 200, response.content
    assert AccessToken.objects.get().scope == "notes:write"


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_without_scope_gets_the_default_scopes(idp: IdentityProvider) -> None:
    response = exchange(idp.mint(scope=None))

    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "notes:read"


# -- one refusal per check ---------------------------------------------------------------------


@pytest.mark.usefixtures("alice", "connector")
def test_an_id_token_or_other_jwt_type_is_refused(idp: IdentityProvider) -> None:
    assert_refused(exchange(idp.mint(typ="JWT")), "invalid_grant")


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_signed_with_a_key_the_provider_does_not_publish_is_refused(
    idp: IdentityProvider,
) -> None:
    forged = idp.mint(key=ec.generate_private_key(ec.SECP256R1()))

    response = exchange(forged)

    assert_refused(response, "invalid_grant")
    assert "signature" in response.json()["error_description"]


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_from_an_untrusted_issuer_is_refused(idp: IdentityProvider) -> None:
    assert_refused(exchange(idp.mint(iss="https://other-idp.example.com")), "invalid_grant")


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_for_another_authorization_server_is_refused(idp: IdentityProvider) -> None:
    response = exchange(idp.mint(aud="https://auth.other.example.com"))

    assert_refused(response, "invalid_grant")
    assert "another authorization server" in response.json()["error_description"]


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_for_another_resource_is_refused(idp: IdentityProvider) -> None:
    response = exchange(idp.mint(resource="https://mcp.other.example.com/mcp"))

    assert_refused(response, "invalid_grant")
    assert "another resource" in response.json()["error_description"]


@pytest.mark.usefixtures("alice", "connector")
@pytest.mark.parametrize("claim", ["aud", "resource"])
def test_an_assertion_whose_audience_or_resource_is_no_uri_is_refused(
    idp: IdentityProvider, claim: str
) -> None:
    # urlsplit raises on "http://[::1": the comparison as canonical URIs let that ValueError
    # out of the grant, and the token endpoint answered 500 instead of invalid_grant.
    assert_refused(exchange(idp.mint(**{claim: "http://[::1"})), "invalid_grant")


@pytest.mark.usefixtures("alice", "connector")
@pytest.mark.parametrize("aud", [5, {"https://mcp.example.com": 1}])
def test_an_assertion_whose_audience_is_neither_string_nor_list_is_refused(
    idp: IdentityProvider, aud: Any
) -> None:
    # "aud": 5 was iterated (TypeError, a 500); an object was iterated by its keys, one of
    # which could name this server.
    response = exchange(idp.mint(aud=aud))

    assert_refused(response, "invalid_grant")
    assert "another authorization server" in response.json()["error_description"]


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_issued_to_another_client_is_refused(idp: IdentityProvider) -> None:
    response = exchange(idp.mint(client_id="someone-else"))

    assert_refused(response, "invalid_grant")
    assert "another client" in response.json()["error_description"]


@pytest.mark.usefixtures("alice", "connector")
def test_an_expired_assertion_is_refused(idp: IdentityProvider) -> None:
    # Beyond the default 60 s leeway.
    response = exchange(idp.mint(iat=1_700_000_000, exp=1_700_000_300))

    assert_refused(response, "invalid_grant")
    assert "expired" in response.json()["error_description"]


@pytest.mark.usefixtures("alice", "connector")
@pytest.mark.parametrize("exp", [10**20, 1e300, 253_402_300_800])
def test_an_assertion_expiring_beyond_any_date_is_refused(idp: IdentityProvider, exp: Any) -> None:
    # PyJWT takes these as future times; turning them into the date the jti is kept until
    # raised OverflowError or ValueError (year 10000): a 500 at the token endpoint.
    response = exchange(idp.mint(exp=exp))

    assert_refused(response, "invalid_grant")
    assert "exp is out of range" in response.json()["error_description"]


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_with_a_numeric_string_exp_buys_a_token(idp: IdentityProvider) -> None:
    # PyJWT reads exp with int(), so a string of digits passes its check, as it does for access
    # tokens; datetime.fromtimestamp took the string itself (TypeError, a 500).
    response = exchange(idp.mint(exp=str(int(time.time()) + 300)))

    assert response.status_code == 200, response.content


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_issued_in_the_future_is_refused(idp: IdentityProvider) -> None:
    far = 4_000_000_000
    assert_refused(exchange(idp.mint(iat=far, exp=far + 300)), "invalid_grant")


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_without_jti_is_refused(idp: IdentityProvider) -> None:
    response = exchange(idp.mint(jti=None))

    assert_refused(response, "invalid_grant")
    assert "jti" in response.json()["error_description"]


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_presented_twice_buys_one_token(idp: IdentityProvider) -> None:
    assertion = idp.mint()
    first = exchange(assertion)

    second = exchange(assertion)

    assert first.status_code == 200
    assert second.status_code == 400
    assert second.json()["error"] == "invalid_grant"
    assert "already been used" in second.json()["error_description"]
    assert AccessToken.objects.count() == 1
    assert UsedAssertion.objects.count() == 1


@pytest.mark.usefixtures("connector")
def test_an_assertion_for_an_unknown_user_is_refused(idp: IdentityProvider) -> None:
    assert_refused(exchange(idp.mint(sub="nobody")), "invalid_grant")


@pytest.mark.usefixtures("connector")
def test_an_assertion_for_an_inactive_user_is_refused(idp: IdentityProvider) -> None:
    User.objects.create_user("alice", is_active=False)

    assert_refused(exchange(idp.mint()), "invalid_grant")


@pytest.mark.usefixtures("alice", "connector")
def test_a_scope_parameter_beyond_the_assertion_is_refused(idp: IdentityProvider) -> None:
    response = exchange(idp.mint(scope="notes:read"), scope="notes:read notes:write")

    assert_refused(response, "invalid_scope")


@pytest.mark.usefixtures("alice", "connector")
def test_an_assertion_with_no_scope_the_application_may_have_is_refused(
    idp: IdentityProvider,
) -> None:
    assert_refused(exchange(idp.mint(scope="other-server:admin")), "invalid_scope")


@pytest.mark.usefixtures("alice", "connector")
def test_a_client_with_a_wrong_secret_is_refused_as_invalid_client(idp: IdentityProvider) -> None:
    response = exchange(idp.mint(), authorization=basic(secret="wrong"))

    assert response.status_code == 401
    assert_refused(response, "invalid_client")


@pytest.mark.usefixtures("alice")
def test_a_public_client_is_refused_as_unauthorized_client(idp: IdentityProvider) -> None:
    Application.objects.create(
        name="public",
        client_id=CLIENT_ID,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )

    response = Client().post(
        "/o/token/", {"grant_type": JWT_BEARER, "assertion": idp.mint(), "client_id": CLIENT_ID}
    )

    assert_refused(response, "unauthorized_client")
    assert "Public clients" in response.json()["error_description"]


@pytest.mark.usefixtures("alice")
def test_a_public_client_authenticating_with_its_secret_is_refused_as_unauthorized_client(
    idp: IdentityProvider,
) -> None:
    # DOT authenticates a public client that sends a secret as it would a confidential one.
    Application.objects.create(
        name="public with a secret",
        client_id=CLIENT_ID,
        client_secret=SECRET,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )

    response = exchange(idp.mint())

    assert_refused(response, "unauthorized_client")
    assert "Public clients" in response.json()["error_description"]


@pytest.mark.usefixtures("alice", "connector")
def test_a_request_without_assertion_is_refused_as_invalid_request() -> None:
    assert_refused(exchange(None), "invalid_request")


@pytest.mark.usefixtures("alice", "connector")
def test_a_resource_parameter_naming_another_resource_is_refused_as_invalid_target(
    idp: IdentityProvider,
) -> None:
    response = exchange(idp.mint(), resource="https://api.other.example.com/")

    assert_refused(response, "invalid_target")


@pytest.mark.usefixtures("alice", "connector")
def test_a_resource_parameter_that_is_no_uri_is_refused_as_invalid_target(
    idp: IdentityProvider,
) -> None:
    # django-oauth-toolkit's own check of the parameter parses it with urlsplit, which raises
    # on "https://[": the token endpoint answered 500.
    assert_refused(exchange(idp.mint(), resource="https://["), "invalid_target")


@pytest.mark.usefixtures("alice", "connector")
def test_without_id_jag_issuers_the_grant_is_unauthorized(
    idp: IdentityProvider, settings: Any
) -> None:
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "ID_JAG_ISSUERS": []}

    assert_refused(exchange(idp.mint()), "unauthorized_client")


@pytest.mark.usefixtures("alice", "connector")
def test_a_refusal_is_logged_without_the_assertion(
    idp: IdentityProvider, caplog: pytest.LogCaptureFixture
) -> None:
    assertion = idp.mint(client_id="someone-else")

    with caplog.at_level(logging.DEBUG):
        exchange(assertion)

    refusals = [r for r in caplog.records if r.name == "mcp_django.auth.oauth_server"]
    assert refusals and "invalid_grant" in refusals[0].getMessage()
    signature = assertion.rsplit(".", 1)[1]
    assert not any(signature in record.getMessage() for record in caplog.records)


# -- spending a jti ----------------------------------------------------------------------------


def test_an_assertion_is_spent_once_even_when_two_exchanges_race() -> None:
    # Both exchanges passed is_spent before either saved: the primary key lets one win.
    issuer = TrustedIssuer(issuer="https://idp.example.com")
    assertion = Assertion(
        claims={"jti": "j-1"}, issuer=issuer, usable_until=timezone.now() + timedelta(minutes=5)
    )
    spend(assertion)

    with pytest.raises(AssertionRefused, match="already been used"):
        spend(assertion)
    assert UsedAssertion.objects.count() == 1


# -- metadata ----------------------------------------------------------------------------------


def test_the_metadata_advertises_the_grant_and_the_id_jag_profile_when_configured() -> None:
    document = Client().get("/.well-known/oauth-authorization-server").json()

    assert JWT_BEARER in document["grant_types_supported"]
    assert document["authorization_grant_profiles_supported"] == [ID_JAG_PROFILE]


def test_the_metadata_says_nothing_of_the_grant_without_providers(settings: Any) -> None:
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "ID_JAG_ISSUERS": []}

    document = Client().get("/.well-known/oauth-authorization-server").json()

    assert JWT_BEARER not in document["grant_types_supported"]
    assert "authorization_grant_profiles_supported" not in document


# -- system checks -----------------------------------------------------------------------------


def id_jag_check_ids() -> list[str]:
    # DEBUG: the test provider is served over http on loopback.
    with override_settings(DEBUG=True):
        found = check_settings()
    return [e.id for e in found if e.id[len("mcp_django.") + 1 :].startswith("08")]


def with_issuers(settings: Any, entries: Any, **mcp: Any) -> None:
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "ID_JAG_ISSUERS": entries, **mcp}


def test_a_complete_id_jag_configuration_passes_the_checks() -> None:
    assert id_jag_check_ids() == []


def test_an_entry_without_issuer_is_e080(settings: Any) -> None:
    with_issuers(settings, [{"jwks_uri": "https://idp.example.com/keys"}])

    assert id_jag_check_ids() == ["mcp_django.E080"]


def test_an_issuer_over_plain_http_is_e081(settings: Any) -> None:
    with_issuers(settings, [{"issuer": "http://idp.example.com"}])

    assert id_jag_check_ids() == ["mcp_django.E081"]


def test_dot_without_our_server_class_is_e082(settings: Any) -> None:
    settings.OAUTH2_PROVIDER = oauth2_provider(OAUTH2_SERVER_CLASS="oauthlib.oauth2.Server")

    errors = [e for e in check_settings() if e.id == "mcp_django.E082"]

    assert len(errors) == 1 and "OAUTH2_SERVER_CLASS" in errors[0].msg


def test_providers_without_resource_url_is_e086(settings: Any) -> None:
    settings.MCP_DJANGO = {k: v for k, v in settings.MCP_DJANGO.items() if k != "RESOURCE_URL"}

    assert "mcp_django.E086" in id_jag_check_ids()


def test_providers_without_django_oauth_toolkit_is_e083(monkeypatch: pytest.MonkeyPatch) -> None:
    real = django_apps.is_installed
    monkeypatch.setattr(
        django_apps, "is_installed", lambda name: name != "oauth2_provider" and real(name)
    )

    assert "mcp_django.E083" in id_jag_check_ids()


def test_an_entry_allowing_hmac_is_e085(settings: Any, idp: IdentityProvider) -> None:
    with_issuers(settings, [{"issuer": idp.issuer, "algorithms": ["HS256"]}])

    assert id_jag_check_ids() == ["mcp_django.E085"]


def test_providers_without_pyjwt_is_e084(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "jwt" else real(name, *a)
    )

    assert id_jag_check_ids() == ["mcp_django.E084"]


def test_no_fixed_issuer_is_w080(settings: Any) -> None:
    settings.OAUTH2_PROVIDER = oauth2_provider(OIDC_ISS_ENDPOINT=None)

    assert id_jag_check_ids() == ["mcp_django.W080"]


def test_dot_s_own_metadata_view_is_w081(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_oauth_server"

    assert id_jag_check_ids() == ["mcp_django.W081"]
