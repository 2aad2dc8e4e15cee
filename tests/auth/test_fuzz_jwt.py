"""Property tests of the "jwt" policy (mcp_django.auth.external over mcp_django.auth.signed):
whatever a client sends as its bearer token, the policy answers with the user of a token a
trusted key signed with every claim right, or with its documented refusal (401
``invalid_token``; 400 ``invalid_request`` for a blank token), never with another exception, and
never with a challenge the transport could not write.

The issuer's keys come from a fake fetch (the loopback fetches are fuzzed in
test_fuzz_jwks.py); examples share one key store, as requests do in a process.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.contrib.auth.models import User
from django.test import RequestFactory, override_settings
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcp_django.auth.base import AuthenticationFailed
from mcp_django.auth.external import ACCEPTED_TYPES, JWTAuthentication
from mcp_django.auth.jwks import KeyStore
from mcp_django.auth.oauth import canonical
from tests.auth import strategies as s
from tests.conftest import BASE_SETTINGS
from tests.fuzzing import examples

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

LEEWAY = 60


@pytest.fixture(autouse=True)
def configured(published_store: KeyStore) -> Iterator[None]:
    mcp = {
        **BASE_SETTINGS,
        "AUTHENTICATION": "jwt",
        "RESOURCE_URL": s.RESOURCE,
        "SCOPES_SUPPORTED": ["notes:read"],
        "JWT_LEEWAY": LEEWAY,
        "TRUSTED_ISSUERS": [{"issuer": s.IDP, "jwks_uri": s.JWKS_URI}],
    }
    with override_settings(MCP_DJANGO=mcp):
        yield


@pytest.fixture(autouse=True)
def alice() -> User:
    return User.objects.create_user("alice")


def authenticate(token: str) -> Any:
    """The user the policy returns for ``Authorization: Bearer <token>``, or its refusal."""
    request = RequestFactory().post("/mcp/", HTTP_AUTHORIZATION=f"Bearer {token}")
    try:
        return async_to_sync(JWTAuthentication().authenticate)(request)
    except AuthenticationFailed as refusal:
        return refusal


def assert_refused(outcome: Any, token: str) -> None:
    assert isinstance(outcome, AuthenticationFailed), outcome
    challenge = outcome.headers["WWW-Authenticate"]
    # The ASGI transport writes header values as latin-1 (transport/base.py), and a field value
    # holds no line break: the challenge must survive both.
    challenge.encode("latin-1")
    assert not set(challenge) & set("\r\n\0"), challenge
    if token.strip():
        assert outcome.status == 401, outcome.status
        assert challenge.startswith('Bearer error="invalid_token"'), challenge
    else:
        assert outcome.status == 400, outcome.status
        assert challenge.startswith('Bearer error="invalid_request"'), challenge


def as_int(value: Any) -> int | None:
    """A NumericDate as PyJWT reads it (``int()``), or None when it is not one."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def names_this_server(aud: Any) -> bool:
    audiences = [aud] if isinstance(aud, str) else aud
    return isinstance(audiences, list) and any(
        isinstance(a, str) and canonical(a) == canonical(s.RESOURCE) for a in audiences
    )


def may_be_accepted(header: Any, claims: Any, kid: str) -> bool:
    """Whether a token of ``header`` and ``claims`` signed with ``kid`` passes every documented
    check (as lenient as PyJWT is about the form of a NumericDate)."""
    if kid not in s.PUBLISHED or not isinstance(header, dict) or not isinstance(claims, dict):
        return False
    now = s.fill(s.Now(0))
    exp, nbf, iat = (as_int(claims.get(name)) for name in ("exp", "nbf", "iat"))
    typ = header.get("typ")
    return (
        header.get("alg") == s.ALGORITHM[kid]
        and (typ is None or (isinstance(typ, str) and typ.lower() in ACCEPTED_TYPES))
        and header.get("kid") in (None, kid)
        and claims.get("iss") == s.IDP
        and names_this_server(claims.get("aud"))
        and exp is not None
        and exp > now - LEEWAY - 5
        and ("nbf" not in claims or (nbf is not None and nbf <= now + LEEWAY + 5))
        and ("iat" not in claims or (iat is not None and iat <= now + LEEWAY + 5))
        and claims.get("sub") == "alice"
    )


BASE_CLAIMS = {
    "iss": s.IDP,
    "sub": "alice",
    "aud": s.RESOURCE,
    "iat": s.Now(0),
    "nbf": s.Now(0),
    "exp": s.Now(300),
    "scope": "notes:read",
}


@FUZZ
@given(token=s.forged_tokens())
@example(token="")
@example(token="   ")
@example(token="a.b.c")
@example(token=s.compact({"alg": "none", "typ": "at+jwt"}, {"iss": s.IDP, "aud": s.RESOURCE}))
@example(token=s.compact({"alg": "\u4e2d", "typ": "at+jwt"}, {"iss": s.IDP}) + "AAAA")
@example(token=s.compact({"alg": "RS256"}, {"iss": s.IDP, "x": 1}).replace(".", "..", 1))
def test_a_token_no_trusted_key_signed_is_refused_with_the_documented_challenge(
    token: str,
) -> None:
    assert_refused(authenticate(token), token)


@FUZZ
@given(
    kid=st.sampled_from(["k1", "k1", "e1", "k2"]),
    changes=s.token_changes(),
)
@example(kid="k1", changes=({}, {}, None))
@example(kid="k1", changes=({}, {"aud": "https://["}, None))
@example(kid="k1", changes=({}, {"exp": float("inf")}, None))
@example(kid="k1", changes=({"alg": "HS256"}, {}, None))
def test_a_signed_token_is_accepted_only_when_every_claim_is_right(
    kid: str, changes: tuple[dict[str, Any], dict[str, Any], Any]
) -> None:
    header_changes, claim_changes, whole_claims = changes
    header = s.apply({"alg": s.ALGORITHM[kid], "typ": "at+jwt", "kid": kid}, header_changes)
    claims = s.apply(BASE_CLAIMS, claim_changes) if whole_claims is None else whole_claims
    token = s.compact(header, claims, s.signing_key(kid), s.ALGORITHM[kid])

    outcome = authenticate(token)

    if isinstance(outcome, AuthenticationFailed):
        assert_refused(outcome, token)
        unchanged = not header_changes and not claim_changes and whole_claims is None
        assert not (unchanged and kid in s.PUBLISHED), "a valid token was refused"
    else:
        assert may_be_accepted(header, claims, kid), (header, claims, kid)
        assert outcome.username == "alice"


@FUZZ
@given(claim_changes=s.claim_overrides)
def test_an_hs256_token_keyed_with_the_issuers_public_key_is_refused(
    claim_changes: dict[str, Any],
) -> None:
    # The algorithm-confusion forgery: the public key, which anyone can read, as an HMAC secret.
    secret = (
        s.signing_key("k1")
        .public_key()
        .public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    )
    header = {"alg": "HS256", "typ": "at+jwt", "kid": "k1"}
    signing_input = s.compact(header, s.apply(BASE_CLAIMS, claim_changes)).rstrip(".")
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    token = signing_input + "." + s.b64url(mac)

    assert_refused(authenticate(token), token)
