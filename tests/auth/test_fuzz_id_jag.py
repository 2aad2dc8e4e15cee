"""Property tests of ID-JAG assertions (mcp_django.auth.id_jag, and the jwt-bearer grant of
mcp_django.auth.oauth_server): whatever a client presents, :func:`verify_assertion` returns a
verified assertion only when a trusted key signed it with every claim right, and otherwise
refuses it with :class:`AssertionRefused`; the token endpoint answers 200 or one of the RFC 6749
errors the grant documents, and a refused exchange leaves no token and no spent ``jti``.

The provider's keys come from a fake fetch, as in test_fuzz_jwt.py.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from oauth2_provider.models import AccessToken, Application

from mcp_django.auth.id_jag import ID_JAG_TYPES, Assertion, AssertionRefused, verify_assertion
from mcp_django.auth.jwks import KeyStore
from mcp_django.auth.oauth import canonical
from mcp_django.auth.oauth_validator import JWT_BEARER
from mcp_django.models import UsedAssertion
from tests.auth import strategies as s
from tests.auth.test_id_jag import oauth2_provider
from tests.conftest import BASE_SETTINGS
from tests.fuzzing import examples

pytestmark = pytest.mark.django_db(transaction=True)

FUZZ = settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# Each example is a request to DOT's token endpoint, its client authenticated, its token saved.
ENDPOINT = settings(FUZZ, max_examples=examples(100))

CLIENT_ID = "managed-connector"
SECRET = "connector-secret"
LEEWAY = 60
#: What the grant refuses with (IDJAGGrant's docstring, and RFC 8707's invalid_target).
DOCUMENTED_ERRORS = {
    "invalid_request",
    "invalid_client",
    "unauthorized_client",
    "invalid_grant",
    "invalid_scope",
    "invalid_target",
}

BASE_CLAIMS = {
    "iss": s.IDP,
    "sub": "alice",
    "aud": s.AUTHORIZATION_SERVER,
    "resource": s.RESOURCE,
    "client_id": CLIENT_ID,
    "jti": s.Unique(),
    "iat": s.Now(0),
    "exp": s.Now(300),
    "scope": "notes:read",
}


@pytest.fixture(autouse=True)
def configured(published_store: KeyStore) -> Iterator[None]:
    mcp = {
        **BASE_SETTINGS,
        "AUTHENTICATION": "oauth",
        "RESOURCE_URL": s.RESOURCE,
        "JWT_LEEWAY": LEEWAY,
        "ID_JAG_ISSUERS": [{"issuer": s.IDP, "jwks_uri": s.JWKS_URI}],
    }
    with override_settings(
        MCP_DJANGO=mcp,
        OAUTH2_PROVIDER=oauth2_provider(OIDC_ISS_ENDPOINT=s.AUTHORIZATION_SERVER),
        ROOT_URLCONF="tests.urls_id_jag",
    ):
        yield


def verify(assertion: str) -> Assertion | AssertionRefused:
    try:
        return verify_assertion(
            assertion,
            client_id=CLIENT_ID,
            audience=s.AUTHORIZATION_SERVER,
            resource=s.RESOURCE,
        )
    except AssertionRefused as refused:
        return refused


def as_int(value: Any) -> int | None:
    """A NumericDate as PyJWT reads it (``int()``), or None when it is not one."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def same_url(value: Any, expected: str) -> bool:
    return isinstance(value, str) and canonical(value) == canonical(expected)


def names(value: Any, expected: str) -> bool:
    """Whether a claim (a string or a list of them) names ``expected``."""
    values = [value] if isinstance(value, str) else value
    return isinstance(values, list) and any(same_url(v, expected) for v in values)


def may_be_accepted(header: Any, claims: Any, kid: str) -> bool:
    """Whether an assertion of ``header`` and ``claims`` signed with ``kid`` passes every check
    the draft and docs/howto/managed-connectors.md list."""
    if kid not in s.PUBLISHED or not isinstance(header, dict) or not isinstance(claims, dict):
        return False
    now = s.fill(s.Now(0))
    exp, nbf, iat = (as_int(claims.get(name)) for name in ("exp", "nbf", "iat"))
    typ = header.get("typ")
    resource = claims.get("resource", s.RESOURCE)
    resources = [resource] if isinstance(resource, str) else resource
    return (
        header.get("alg") == s.ALGORITHM[kid]
        and isinstance(typ, str)
        and typ.lower() in ID_JAG_TYPES
        and header.get("kid") in (None, kid)
        and claims.get("iss") == s.IDP
        and names(claims.get("aud"), s.AUTHORIZATION_SERVER)
        and isinstance(resources, list)
        and bool(resources)
        and all(same_url(r, s.RESOURCE) for r in resources)
        and claims.get("client_id") == CLIENT_ID
        and isinstance(claims.get("jti"), str)
        and bool(claims["jti"])
        and isinstance(claims.get("sub"), str)
        and bool(claims["sub"])
        and ("scope" not in claims or isinstance(claims["scope"], str))
        and exp is not None
        and exp > now - LEEWAY - 5
        and iat is not None
        and iat <= now + LEEWAY + 5
        and ("nbf" not in claims or (nbf is not None and nbf <= now + LEEWAY + 5))
    )


def build(kid: str, changes: tuple[dict[str, Any], dict[str, Any], Any]) -> tuple[Any, Any, str]:
    header_changes, claim_changes, whole_claims = changes
    base = {"alg": s.ALGORITHM[kid], "typ": "oauth-id-jag+jwt", "kid": kid}
    header = s.apply(base, header_changes)
    claims = s.apply(BASE_CLAIMS, claim_changes) if whole_claims is None else whole_claims
    return header, claims, s.compact(header, claims, s.signing_key(kid), s.ALGORITHM[kid])


# -- verify_assertion -----------------------------------------------------------------------------


@FUZZ
@given(assertion=s.forged_tokens(typ="oauth-id-jag+jwt"))
@example(assertion="")
@example(assertion="a.b.c")
def test_an_assertion_no_trusted_key_signed_is_refused(assertion: str) -> None:
    assert isinstance(verify(assertion), AssertionRefused)


@FUZZ
@given(kid=st.sampled_from(["k1", "e1", "e1", "k2"]), changes=s.token_changes())
@example(kid="e1", changes=({}, {}, None))
@example(kid="e1", changes=({}, {"aud": 5}, None))
@example(kid="e1", changes=({}, {"aud": "https://["}, None))
@example(kid="e1", changes=({}, {"resource": "http://[::1"}, None))
@example(kid="e1", changes=({}, {"exp": 10**20}, None))
@example(kid="e1", changes=({}, {"exp": 1e300}, None))
@example(kid="e1", changes=({}, {"exp": 253402300800}, None))
@example(kid="e1", changes=({}, {"exp": "99999999999"}, None))
def test_a_signed_assertion_is_verified_only_when_every_claim_is_right(
    kid: str, changes: tuple[dict[str, Any], dict[str, Any], Any]
) -> None:
    header, claims, assertion = build(kid, changes)

    outcome = verify(assertion)

    if isinstance(outcome, AssertionRefused):
        assert changes != ({}, {}, None) or kid not in s.PUBLISHED, "a valid assertion was refused"
    else:
        assert may_be_accepted(header, claims, kid), (header, claims, kid)
        assert outcome.issuer.issuer == s.IDP
        assert outcome.usable_until > datetime.now(tz=timezone.utc)


# -- the token endpoint ---------------------------------------------------------------------------


@pytest.fixture
def connector() -> Application:
    User.objects.create_user("alice", password="pw")
    return Application.objects.create(
        name="managed connector",
        client_id=CLIENT_ID,
        client_secret=SECRET,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="https://client.example.com/callback",
    )


def exchange(assertion: str, fields: dict[str, str]) -> Any:
    credentials = base64.b64encode(f"{CLIENT_ID}:{SECRET}".encode()).decode()
    return Client().post(
        "/o/token/",
        {"grant_type": JWT_BEARER, "assertion": assertion, **fields},
        headers={"authorization": f"Basic {credentials}"},
    )


form_values = (
    st.sampled_from(["notes:read", "notes:write", "", " "]) | s.broken_urls | st.text(max_size=30)
)
form_fields = st.fixed_dictionaries(
    {},
    optional={
        "scope": form_values,
        "resource": st.sampled_from([s.RESOURCE, "https://api.other.example.com/"]) | form_values,
    },
)


@ENDPOINT
@given(
    kid=st.sampled_from(["e1", "e1", "k1", "k2"]),
    changes=s.token_changes(),
    forged=st.none() | s.forged_tokens(typ="oauth-id-jag+jwt"),
    fields=form_fields,
)
@example(kid="e1", changes=({}, {}, None), forged=None, fields={})
@example(kid="e1", changes=({}, {}, None), forged=None, fields={"resource": "https://["})
@example(kid="e1", changes=({}, {"exp": 10**20}, None), forged=None, fields={})
def test_the_token_endpoint_answers_a_documented_error_and_spends_nothing_on_refusal(
    connector: Application,
    kid: str,
    changes: tuple[dict[str, Any], dict[str, Any], Any],
    forged: str | None,
    fields: dict[str, str],
) -> None:
    header, claims, assertion = build(kid, changes)
    assertion = forged if forged is not None else assertion
    counts = AccessToken.objects.count(), UsedAssertion.objects.count()

    response = exchange(assertion, fields)

    if response.status_code == 200:
        assert forged is None and may_be_accepted(header, claims, kid), (header, claims, kid)
        one_more = (counts[0] + 1, counts[1] + 1)
        assert (AccessToken.objects.count(), UsedAssertion.objects.count()) == one_more
        replay = exchange(assertion, fields)
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        assert (AccessToken.objects.count(), UsedAssertion.objects.count()) == one_more
    else:
        assert response.status_code in (400, 401), response.status_code
        assert response.json()["error"] in DOCUMENTED_ERRORS, response.json()
        assert (AccessToken.objects.count(), UsedAssertion.objects.count()) == counts
        valid = forged is None and changes == ({}, {}, None) and kid in s.PUBLISHED
        assert not (valid and not fields), f"a valid assertion was refused: {response.json()}"
