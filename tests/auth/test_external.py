"""The site as a resource server for an external identity provider (AUTHENTICATION = "jwt").

The provider here is a real HTTP server on loopback publishing OpenID Connect (or RFC 8414)
metadata and a JWKS; tokens are signed with keys made by ``cryptography``. Each way a token can
be wrong gets its 401; scopes, the user hook, key refresh and the checks are tested alone.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from django.contrib.auth.models import User
from django.test import override_settings

from mcp_django.auth import external, signed
from mcp_django.auth.external import token_scopes
from mcp_django.auth.jwks import (
    KeyDiscoveryError,
    KeyStore,
    TrustedIssuer,
    discover_jwks_uri,
    fetch_json,
)
from mcp_django.checks import check_settings
from mcp_django.models import Session, ToolCall
from mcp_django.ops.audit import buffer as audit_buffer
from mcp_django.protocol.errors import QUOTA_EXCEEDED
from mcp_django.testing import JSONRPCErrorResponse, MCPTestClient
from tests.conftest import BASE_SETTINGS
from tests.loopback_json import LoopbackJSON

RESOURCE = "https://mcp.example.com/mcp"
PRM_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]


# -- the identity provider ---------------------------------------------------------------------


@functools.cache
def private_key(kid: str, kind: str) -> Any:
    """One private key per key id for the whole module: RSA keys take a while to make."""
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


class Provider:
    """An identity provider on loopback: metadata and JWKS over HTTP, and signing keys."""

    def __init__(self, *, oidc: bool = True) -> None:
        self.oidc = oidc
        self.keys: dict[str, Any] = {}
        self.published: list[str] = []
        self.metadata_issuer: str | None = None
        self.jwks_body: bytes | None = None
        self.served = LoopbackJSON(self.document)
        self.requests = self.served.requests
        self.issuer = f"{self.served.origin}/tenant"

    def document(self, path: str) -> bytes | None:
        metadata = {"issuer": self.metadata_issuer or self.issuer, "jwks_uri": self.jwks_uri}
        if path == "/tenant/.well-known/openid-configuration" and self.oidc:
            return orjson.dumps(metadata)
        if path == "/.well-known/oauth-authorization-server/tenant" and not self.oidc:
            return orjson.dumps(metadata)
        if path == "/tenant/keys":
            if self.jwks_body is not None:
                return self.jwks_body
            return orjson.dumps({"keys": [self.public_jwk(kid) for kid in self.published]})
        return None

    @property
    def jwks_uri(self) -> str:
        return self.issuer + "/keys"

    def add_key(self, kid: str, kind: str = "rsa", publish: bool = True) -> None:
        self.keys[kid] = private_key(kid, kind)
        if publish:
            self.published.append(kid)

    def public_jwk(self, kid: str) -> dict[str, Any]:
        key = self.keys[kid]
        algorithm = jwt.algorithms.RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else None
        if algorithm is None:
            data = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
        else:
            data = json.loads(algorithm.to_jwk(key.public_key()))
        return {**data, "kid": kid, "use": "sig"}

    def public_pem(self, kid: str) -> bytes:
        return (
            self.keys[kid]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": "alice",
            "aud": RESOURCE,
            "iat": now,
            "nbf": now,
            "exp": now + 300,
            "jti": uuid.uuid4().hex,
            "client_id": "client-1",
            "scope": "notes:read",
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(
        self,
        kid: str = "k1",
        *,
        algorithm: str = "RS256",
        typ: str | None = "at+jwt",
        signing_kid: str | None = None,
        **claims: Any,
    ) -> str:
        headers: dict[str, Any] = {"kid": kid}
        if typ is not None:
            headers["typ"] = typ
        return jwt.encode(
            self.claims(**claims),
            self.keys[signing_kid or kid],
            algorithm=algorithm,
            headers=headers,
        )

    def __enter__(self) -> Provider:
        self.served.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.served.stop()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    """A JWT put together by hand: what no library would sign."""
    head = _b64(orjson.dumps(header)) + "." + _b64(orjson.dumps(claims))
    return head + "." + _b64(signature)


@pytest.fixture
def provider() -> Iterator[Provider]:
    with Provider() as idp:
        idp.add_key("k1")
        yield idp


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> KeyStore:
    """A fresh key store per test, with its own clock, in place of the process's."""
    fresh = KeyStore(clock=Clock())
    monkeypatch.setattr(signed, "key_store", fresh)
    return fresh


class Clock:
    """Monotonic seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def jwt_settings(provider: Provider, **overrides: Any) -> dict[str, Any]:
    issuer: dict[str, Any] = {"issuer": provider.issuer}
    issuer.update(overrides.pop("issuer_entry", {}))
    return {
        **BASE_SETTINGS,
        "AUTHENTICATION": "jwt",
        "RESOURCE_URL": RESOURCE,
        "SCOPES_SUPPORTED": ["notes:read"],
        "TRUSTED_ISSUERS": [issuer],
        **overrides,
    }


@pytest.fixture
def settings_for(provider: Provider, store: KeyStore) -> Iterator[None]:
    with override_settings(MCP_DJANGO=jwt_settings(provider)):
        yield


@pytest.fixture
async def alice() -> Any:
    return await User.objects.acreate(username="alice")


async def session_user(raw: str) -> str:
    """The username of the session a client with the token ``raw`` opens."""
    client = MCPTestClient(headers=_bearer(raw))
    await client.initialize()
    session = await Session.objects.select_related("user").aget(pk=client.session_id)
    return str(session.user.username)


def _bearer(raw: str) -> dict[str, str]:
    return {"authorization": f"Bearer {raw}"}


def _challenge(response: Any) -> str:
    return str(response.headers.get("www-authenticate", ""))


async def refused(raw: str) -> str:
    """The challenge of a 401 answered to ``raw``."""
    response = await MCPTestClient(headers=_bearer(raw)).post(PING)
    assert response.status == 401, response.body
    challenge = _challenge(response)
    assert challenge.startswith('Bearer error="invalid_token"'), challenge
    assert f'resource_metadata="{PRM_URL}"' in challenge
    return challenge


# -- accepted tokens ------------------------------------------------------------------------------


@pytest.mark.usefixtures("settings_for")
async def test_a_valid_token_opens_a_session_for_its_subject(
    provider: Provider, alice: Any
) -> None:
    username = await session_user(provider.token())

    assert username == "alice"


@pytest.mark.usefixtures("settings_for")
@pytest.mark.parametrize("typ", ["at+jwt", "application/at+jwt", "JWT", None])
async def test_access_token_types_and_plain_jwts_are_accepted(
    provider: Provider, alice: Any, typ: str | None
) -> None:
    response = await MCPTestClient(headers=_bearer(provider.token(typ=typ))).post(PING)

    assert response.status == 200


@pytest.mark.usefixtures("settings_for")
@pytest.mark.parametrize(
    "audience",
    ["HTTPS://MCP.EXAMPLE.COM:443/mcp/", ["https://other.example.com/api", RESOURCE]],
)
async def test_the_audience_is_compared_as_a_canonical_uri_and_may_be_a_list(
    provider: Provider, alice: Any, audience: Any
) -> None:
    response = await MCPTestClient(headers=_bearer(provider.token(aud=audience))).post(PING)

    assert response.status == 200


@pytest.mark.usefixtures("settings_for")
async def test_an_expiry_within_the_leeway_is_accepted(provider: Provider, alice: Any) -> None:
    raw = provider.token(exp=int(time.time()) - 30)

    response = await MCPTestClient(headers=_bearer(raw)).post(PING)

    assert response.status == 200


@pytest.mark.usefixtures("settings_for")
async def test_an_ec_key_among_rsa_keys_verifies_its_es256_tokens(
    provider: Provider, alice: Any
) -> None:
    provider.add_key("ec1", kind="ec")

    response = await MCPTestClient(headers=_bearer(provider.token("ec1", algorithm="ES256"))).post(
        PING
    )

    assert response.status == 200


@pytest.mark.usefixtures("settings_for")
async def test_an_es256_token_without_key_id_verifies_past_a_key_on_another_curve(
    provider: Provider, alice: Any
) -> None:
    # Without a kid every key is tried; PyJWT refuses a P-384 key for ES256 only when it
    # verifies, with InvalidKeyError, which refused the token before the P-256 key was tried.
    other_curve = ec.generate_private_key(ec.SECP384R1()).public_key()
    provider.add_key("ec1", kind="ec", publish=False)
    keys = [
        jwt.algorithms.ECAlgorithm.to_jwk(other_curve, as_dict=True),
        provider.public_jwk("ec1"),
    ]
    provider.jwks_body = orjson.dumps({"keys": keys})
    raw = jwt.encode(provider.claims(), provider.keys["ec1"], algorithm="ES256")

    assert await session_user(raw) == "alice"


async def test_several_issuers_are_trusted_at_once(
    provider: Provider, store: KeyStore, alice: Any
) -> None:
    with Provider(oidc=False) as second:
        second.add_key("other")
        settings = jwt_settings(provider)
        settings["TRUSTED_ISSUERS"].append({"issuer": second.issuer})
        with override_settings(MCP_DJANGO=settings):
            first = await MCPTestClient(headers=_bearer(provider.token())).post(PING)
            other = await MCPTestClient(headers=_bearer(second.token("other"))).post(PING)

    assert (first.status, other.status) == (200, 200)
    # The second publishes RFC 8414 metadata only: found after the OpenID Connect miss.
    assert "/.well-known/oauth-authorization-server/tenant" in second.requests


# -- refused tokens: one 401 each ----------------------------------------------------------------


@pytest.mark.usefixtures("settings_for")
async def test_a_token_of_an_untrusted_issuer_is_refused(provider: Provider, alice: Any) -> None:
    raw = provider.token(iss="https://evil.example.com")

    assert "not issued by a trusted issuer" in await refused(raw)


@pytest.mark.usefixtures("settings_for")
@pytest.mark.parametrize(
    "audience",
    ["https://other.example.com/mcp", "https://mcp.example.com/mcp/other", "client-1", None],
)
async def test_a_token_for_another_resource_is_refused(
    provider: Provider, alice: Any, audience: str | None
) -> None:
    raw = provider.token(aud=audience)

    challenge = await refused(raw)

    assert "not issued for this server" in challenge or "aud" in challenge


@pytest.mark.usefixtures("settings_for")
async def test_a_token_whose_audience_is_no_uri_is_refused(provider: Provider, alice: Any) -> None:
    # urlsplit raises on "https://[": the comparison as canonical URIs let that ValueError out
    # of the policy, and the request failed with a 500 instead of a 401.
    assert "not issued for this server" in await refused(provider.token(aud="https://["))


@pytest.mark.usefixtures("settings_for")
async def test_an_expired_token_is_refused(provider: Provider, alice: Any) -> None:
    raw = provider.token(exp=int(time.time()) - 120)

    assert "expired" in await refused(raw)


@pytest.mark.usefixtures("settings_for")
@pytest.mark.parametrize("claim", ["nbf", "iat"])
async def test_a_token_not_yet_valid_is_refused(provider: Provider, alice: Any, claim: str) -> None:
    raw = provider.token(**{claim: int(time.time()) + 300})

    assert "not valid yet" in await refused(raw)


@pytest.mark.usefixtures("settings_for")
async def test_a_token_without_expiry_is_refused(provider: Provider, alice: Any) -> None:
    raw = jwt.encode(
        {k: v for k, v in provider.claims().items() if k != "exp"},
        provider.keys["k1"],
        algorithm="RS256",
        headers={"kid": "k1"},
    )

    assert "exp" in await refused(raw)


@pytest.mark.usefixtures("settings_for")
async def test_an_unknown_key_id_fetches_the_keys_again_then_is_refused(
    provider: Provider, store: KeyStore, alice: Any
) -> None:
    assert (await MCPTestClient(headers=_bearer(provider.token())).post(PING)).status == 200
    store.clock.now += store.refresh_floor  # type: ignore[attr-defined]
    provider.add_key("unpublished", publish=False)

    challenge = await refused(provider.token("unpublished"))

    assert "a key the issuer does not publish" in challenge
    assert store.fetches[provider.issuer] == 2


@pytest.mark.usefixtures("settings_for")
async def test_a_bad_signature_is_refused(provider: Provider, alice: Any) -> None:
    provider.add_key("forger", publish=False)
    raw = provider.token("k1", signing_kid="forger")  # names k1, signed with another key

    assert "signature does not verify" in await refused(raw)


@pytest.mark.usefixtures("settings_for")
async def test_a_token_whose_payload_was_changed_is_refused(provider: Provider, alice: Any) -> None:
    head, _, signature = provider.token().split(".")
    payload = _b64(orjson.dumps(provider.claims(sub="admin")))

    assert "signature does not verify" in await refused(f"{head}.{payload}.{signature}")


@pytest.mark.usefixtures("settings_for")
@pytest.mark.parametrize("kind", ["rsa", "ec"])
async def test_a_key_published_with_its_private_part_verifies_nothing(
    provider: Provider, alice: Any, kind: str
) -> None:
    # A JWKS holding an RSA private key made PyJWT call verify() on the private key
    # (AttributeError, a 500); an EC private key verified, though anyone could have signed.
    provider.add_key("leaked", kind)
    key = provider.keys["leaked"]
    algorithm = jwt.algorithms.RSAAlgorithm if kind == "rsa" else jwt.algorithms.ECAlgorithm
    private = {**algorithm.to_jwk(key, as_dict=True), "kid": "leaked", "use": "sig"}
    provider.jwks_body = orjson.dumps({"keys": [private]})

    raw = provider.token("leaked", algorithm="RS256" if kind == "rsa" else "ES256")

    assert "a key the issuer does not publish" in await refused(raw)


@pytest.mark.usefixtures("settings_for")
async def test_alg_none_is_refused(provider: Provider, alice: Any) -> None:
    raw = handmade({"alg": "none", "typ": "at+jwt", "kid": "k1"}, provider.claims())

    assert "algorithm 'none' is not accepted" in await refused(raw)


@pytest.mark.usefixtures("settings_for")
async def test_hs256_signed_with_the_public_key_as_secret_is_refused(
    provider: Provider, alice: Any
) -> None:
    header = {"alg": "HS256", "typ": "at+jwt", "kid": "k1"}
    unsigned = _b64(orjson.dumps(header)) + "." + _b64(orjson.dumps(provider.claims()))
    secret = provider.public_pem("k1")
    signature = hmac.new(secret, unsigned.encode(), hashlib.sha256).digest()

    assert "algorithm 'HS256' is not accepted" in await refused(unsigned + "." + _b64(signature))


@pytest.mark.usefixtures("settings_for")
async def test_an_algorithm_name_no_header_can_carry_is_refused_without_quoting_it(
    provider: Provider, alice: Any
) -> None:
    # Quoted into the challenge, "alg": "中" made the ASGI transport fail to encode the 401's
    # WWW-Authenticate header (latin-1), so the request crashed instead of being refused.
    raw = handmade({"alg": "\u4e2d", "typ": "at+jwt", "kid": "k1"}, provider.claims())

    challenge = await refused(raw)

    assert "algorithm is not accepted" in challenge
    assert "\u4e2d" not in challenge


async def test_an_algorithm_the_issuer_entry_does_not_allow_is_refused(
    provider: Provider, store: KeyStore, alice: Any
) -> None:
    settings = jwt_settings(provider, issuer_entry={"algorithms": ["ES256"]})
    with override_settings(MCP_DJANGO=settings):
        assert "algorithm 'RS256' is not accepted" in await refused(provider.token())


@pytest.mark.usefixtures("settings_for")
@pytest.mark.parametrize("typ", ["oauth-id-jag+jwt", "logout+jwt", "dpop+jwt"])
async def test_a_jwt_of_another_type_is_refused(provider: Provider, alice: Any, typ: str) -> None:
    assert "not an access token" in await refused(provider.token(typ=typ))


@pytest.mark.usefixtures("settings_for")
@pytest.mark.parametrize("raw", ["not-a-jwt", "a.b.c", "x" * 20_000])
async def test_garbage_and_oversized_tokens_are_refused_unread(alice: Any, raw: str) -> None:
    challenge = await refused(raw)

    assert "not a JWT" in challenge or "too long" in challenge


@pytest.mark.usefixtures("settings_for")
async def test_a_token_for_an_unknown_user_is_refused(provider: Provider) -> None:
    assert "does not act for an active user" in await refused(provider.token(sub="nobody"))


@pytest.mark.usefixtures("settings_for")
async def test_a_token_for_an_inactive_user_is_refused(provider: Provider) -> None:
    await User.objects.acreate(username="alice", is_active=False)

    assert "does not act for an active user" in await refused(provider.token())


async def test_a_metadata_document_naming_another_issuer_gives_no_keys(
    provider: Provider, store: KeyStore, alice: Any
) -> None:
    provider.metadata_issuer = "https://evil.example.com"
    with override_settings(MCP_DJANGO=jwt_settings(provider)):
        assert "a key the issuer does not publish" in await refused(provider.token())


# -- scopes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claims", "prefix", "expected"),
    [
        ({"scope": "notes:read notes:write"}, "", {"notes:read", "notes:write"}),
        ({"scp": ["notes:read", "notes:write"]}, "", {"notes:read", "notes:write"}),
        ({"scp": "notes:read notes:write"}, "", {"notes:read", "notes:write"}),
        ({"scp": ["api://mcp/notes:read", "openid"]}, "api://mcp/", {"notes:read", "openid"}),
        ({"scope": 42}, "", set()),
        ({}, "", set()),
    ],
)
def test_scopes_come_from_scope_or_scp_without_the_prefix(
    claims: dict[str, Any], prefix: str, expected: set[str]
) -> None:
    assert token_scopes(claims, prefix) == expected


@pytest.mark.usefixtures("settings_for")
async def test_a_tool_needing_a_scope_the_token_lacks_answers_403_step_up(
    provider: Provider, alice: Any
) -> None:
    client = MCPTestClient(headers=_bearer(provider.token(scope="notes:read")))
    await client.initialize()

    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "scoped_write", "arguments": {"text": "x"}},
        }
    )

    assert response.status == 403
    assert _challenge(response).startswith('Bearer error="insufficient_scope"')
    assert 'scope="notes:write"' in _challenge(response)


async def test_scopes_in_scp_with_the_issuers_prefix_allow_the_tool(
    provider: Provider, store: KeyStore, alice: Any
) -> None:
    settings = jwt_settings(provider, issuer_entry={"scope_prefix": "api://mcp/"})
    raw = provider.token(scope=None, scp=["api://mcp/notes:read", "api://mcp/notes:write"])
    with override_settings(MCP_DJANGO=settings):
        client = MCPTestClient(headers=_bearer(raw))
        await client.initialize()
        result = await client.call_tool("scoped_write", {"text": "x"})

    assert result["content"][0]["text"] == "wrote x"


async def test_required_scopes_apply_to_every_request(
    provider: Provider, store: KeyStore, alice: Any
) -> None:
    with override_settings(MCP_DJANGO=jwt_settings(provider, REQUIRED_SCOPES=["mcp"])):
        response = await MCPTestClient(headers=_bearer(provider.token())).post(PING)

    assert response.status == 403 and 'scope="mcp"' in _challenge(response)


# -- who the token acts for ----------------------------------------------------------------------


async def test_users_are_matched_by_the_configured_claim_and_field(
    provider: Provider, store: KeyStore
) -> None:
    await User.objects.acreate(username="bob", email="bob@example.com")
    entry = {"user_claim": "email", "user_field": "email"}
    raw = provider.token(sub="00u1abc", email="bob@example.com")
    with override_settings(MCP_DJANGO=jwt_settings(provider, issuer_entry=entry)):
        username = await session_user(raw)

    assert username == "bob"


async def test_users_are_created_only_when_the_issuer_entry_says_so(
    provider: Provider, store: KeyStore
) -> None:
    raw = provider.token(sub="carol")
    with override_settings(MCP_DJANGO=jwt_settings(provider)):
        before = await MCPTestClient(headers=_bearer(raw)).post(PING)
    with override_settings(MCP_DJANGO=jwt_settings(provider, issuer_entry={"create_users": True})):
        after = await MCPTestClient(headers=_bearer(raw)).post(PING)

    assert (before.status, after.status) == (401, 200)
    carol = await User.objects.aget(username="carol")
    assert not carol.has_usable_password()


@pytest.mark.parametrize("sub", ["car\x00ol", "c" * 151])
async def test_a_subject_no_user_can_have_is_refused_not_a_server_error(
    provider: Provider, store: KeyStore, sub: str
) -> None:
    # A NUL fails any PostgreSQL query and a name past the column fails the insert; SQLite
    # takes both, so the refusal must not depend on the database.
    entry = {"create_users": True}
    with override_settings(MCP_DJANGO=jwt_settings(provider, issuer_entry=entry)):
        response = await MCPTestClient(headers=_bearer(provider.token(sub=sub))).post(PING)

    assert response.status == 401
    assert not await User.objects.filter(username__startswith="c").aexists()


def hook_by_client(claims: dict[str, Any], issuer: TrustedIssuer) -> Any:
    """A project's hook: tokens of one client act for a service user."""
    if claims.get("client_id") == "nightly-agent" and issuer.extra.get("service_user"):
        return User.objects.filter(username=issuer.extra["service_user"]).first()
    return None


async def test_the_user_hook_is_replaceable_and_sees_the_issuer_entry(
    provider: Provider, store: KeyStore
) -> None:
    await User.objects.acreate(username="robot")
    settings = jwt_settings(
        provider,
        issuer_entry={"service_user": "robot"},
        JWT_USER_HOOK=f"{__name__}.hook_by_client",
    )
    with override_settings(MCP_DJANGO=settings):
        username = await session_user(provider.token(client_id="nightly-agent"))
        other = await MCPTestClient(headers=_bearer(provider.token())).post(PING)

    assert username == "robot"
    assert other.status == 401


# -- the keys --------------------------------------------------------------------------------------


def test_unknown_key_ids_refresh_the_keys_at_most_once_per_floor(provider: Provider) -> None:
    store = KeyStore(clock=Clock())
    issuer = TrustedIssuer(issuer=provider.issuer)
    assert store.signing_keys(issuer, "k1")

    for n in range(50):
        assert store.signing_keys(issuer, f"random-{n}") == []
    store.clock.now += store.refresh_floor  # type: ignore[attr-defined]
    assert store.signing_keys(issuer, "random-again") == []

    assert store.fetches[provider.issuer] == 2
    assert provider.requests.count("/tenant/keys") == 2


def test_a_rotated_key_is_found_once_the_floor_has_passed(provider: Provider) -> None:
    store = KeyStore(clock=Clock())
    issuer = TrustedIssuer(issuer=provider.issuer)
    store.signing_keys(issuer, "k1")
    provider.add_key("k2")

    too_soon = store.signing_keys(issuer, "k2")
    store.clock.now += store.refresh_floor  # type: ignore[attr-defined]
    later = store.signing_keys(issuer, "k2")

    assert too_soon == [] and [key["kid"] for key in later] == ["k2"]


def test_keys_are_fetched_again_after_their_ttl(provider: Provider) -> None:
    store = KeyStore(clock=Clock(), ttl=600)
    issuer = TrustedIssuer(issuer=provider.issuer)
    store.signing_keys(issuer, "k1")
    store.signing_keys(issuer, "k1")

    store.clock.now += 600  # type: ignore[attr-defined]
    store.signing_keys(issuer, "k1")

    assert store.fetches[provider.issuer] == 2


def test_keys_already_held_are_kept_when_the_provider_is_down(provider: Provider) -> None:
    store = KeyStore(clock=Clock(), ttl=600)
    issuer = TrustedIssuer(issuer=provider.issuer)
    store.signing_keys(issuer, "k1")
    provider.jwks_body = b"<html>maintenance</html>"

    store.clock.now += 600  # type: ignore[attr-defined]

    assert [key["kid"] for key in store.signing_keys(issuer, "k1")] == ["k1"]


def test_an_explicit_jwks_uri_skips_discovery(provider: Provider) -> None:
    store = KeyStore(clock=Clock())
    issuer = TrustedIssuer(issuer=provider.issuer, jwks_uri=provider.jwks_uri)

    store.signing_keys(issuer, "k1")

    assert provider.requests == ["/tenant/keys"]


def test_a_jwks_larger_than_the_cap_is_not_read(provider: Provider) -> None:
    provider.jwks_body = b'{"keys": [' + b" " * (300 * 1024) + b"]}"
    store = KeyStore(clock=Clock())

    keys = store.signing_keys(TrustedIssuer(issuer=provider.issuer), "k1")

    assert keys == []


def test_a_jwks_nested_past_the_parsers_depth_gives_no_keys(provider: Provider) -> None:
    # 50,000 nested arrays fit in the size cap, and json.loads raises RecursionError on them,
    # which is no ValueError: it escaped the key store and failed the request with a 500.
    provider.jwks_body = b'{"keys": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    store = KeyStore(clock=Clock())

    keys = store.signing_keys(TrustedIssuer(issuer=provider.issuer), "k1")

    assert keys == []
    assert store.fetches[provider.issuer] == 1


@pytest.mark.parametrize(
    "answer",
    [b"garbage\r\n", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}"],
)
def test_an_answer_that_is_not_http_is_a_key_discovery_error(answer: bytes) -> None:
    # BadStatusLine and IncompleteRead are neither OSError nor ValueError: they escaped
    # fetch_json, and the key store, and the request failed with a 500.
    with socket.create_server(("127.0.0.1", 0)) as server:

        def reply() -> None:
            connection, _ = server.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(answer)

        thread = threading.Thread(target=reply, daemon=True)
        thread.start()
        with pytest.raises(KeyDiscoveryError, match="could not be fetched"):
            fetch_json(f"http://127.0.0.1:{server.getsockname()[1]}/keys")
        thread.join(5)


def test_a_jwks_uri_no_parser_takes_gives_no_keys(
    provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # urlsplit raises ValueError on "http://[::1", and the https check ran it outside any
    # handler: the metadata's jwks_uri escaped the key store and failed the request with a 500.
    monkeypatch.setattr(Provider, "jwks_uri", "http://[::1")
    store = KeyStore(clock=Clock())

    keys = store.signing_keys(TrustedIssuer(issuer=provider.issuer), "k1")

    assert keys == []
    assert provider.requests == ["/tenant/.well-known/openid-configuration"]


def test_keys_are_fetched_over_https_only_except_on_loopback() -> None:
    from mcp_django.auth.jwks import KeyDiscoveryError

    with pytest.raises(KeyDiscoveryError, match="not an https URL"):
        discover_jwks_uri("http://idp.example.com")


async def test_the_async_twin_finds_the_same_keys(provider: Provider) -> None:
    store = KeyStore(clock=Clock())

    keys = await store.asigning_keys(TrustedIssuer(issuer=provider.issuer), "k1")

    assert [key["kid"] for key in keys] == ["k1"]


# -- the protected-resource metadata ---------------------------------------------------------------


async def test_the_metadata_names_the_trusted_issuers(provider: Provider, store: KeyStore) -> None:
    settings = jwt_settings(provider)
    settings["TRUSTED_ISSUERS"].append({"issuer": "https://login.example.org/v2.0"})
    with override_settings(MCP_DJANGO=settings):
        response = await MCPTestClient().send(
            "GET", path="/.well-known/oauth-protected-resource/mcp"
        )

    assert response.status == 200
    document = orjson.loads(response.body)
    assert document["resource"] == RESOURCE
    assert document["authorization_servers"] == [
        provider.issuer,
        "https://login.example.org/v2.0",
    ]


async def test_authorization_servers_overrides_the_trusted_issuers(
    provider: Provider, store: KeyStore
) -> None:
    settings = jwt_settings(provider, AUTHORIZATION_SERVERS=["https://gateway.example.com"])
    with override_settings(MCP_DJANGO=settings):
        response = await MCPTestClient().send(
            "GET", path="/.well-known/oauth-protected-resource/mcp"
        )

    assert orjson.loads(response.body)["authorization_servers"] == ["https://gateway.example.com"]


@pytest.mark.usefixtures("settings_for")
async def test_no_token_gets_the_plain_challenge() -> None:
    response = await MCPTestClient().post(PING)

    assert response.status == 401
    assert _challenge(response) == (
        f'Bearer scope="notes:read notes:write", resource_metadata="{PRM_URL}"'
    )


# -- system checks ---------------------------------------------------------------------------------

GOOD_ISSUER = {"issuer": "https://idp.example.com"}


def check_ids(**settings: Any) -> list[str]:
    base = {"AUTHENTICATION": "jwt", "RESOURCE_URL": RESOURCE, "TRUSTED_ISSUERS": [GOOD_ISSUER]}
    with override_settings(MCP_DJANGO={**base, **settings}):
        return [e.id for e in check_settings() if e.id.startswith("mcp_django.")]


def test_a_complete_jwt_configuration_passes_the_checks() -> None:
    ids = check_ids()

    assert not [i for i in ids if i[11:14] in ("E07", "W07")]


@pytest.mark.parametrize("issuers", [[], "https://idp.example.com"])
def test_no_trusted_issuer_is_e070(issuers: Any) -> None:
    assert "mcp_django.E070" in check_ids(TRUSTED_ISSUERS=issuers)


@pytest.mark.parametrize(
    "entry", [{"audience": RESOURCE}, "https://idp.example.com", {"issuer": ""}]
)
def test_an_issuer_entry_without_issuer_is_e071(entry: Any) -> None:
    assert "mcp_django.E071" in check_ids(TRUSTED_ISSUERS=[entry])


@pytest.mark.parametrize(
    "entry",
    [
        {"issuer": "http://idp.example.com"},
        {"issuer": "idp.example.com"},
        {"issuer": "https://idp.example.com", "jwks_uri": "http://idp.example.com/keys"},
    ],
)
def test_an_issuer_that_is_not_https_is_e072(entry: dict[str, Any]) -> None:
    assert "mcp_django.E072" in check_ids(TRUSTED_ISSUERS=[entry])


def test_a_loopback_http_issuer_is_allowed_only_in_debug() -> None:
    entry = {"issuer": "http://127.0.0.1:9000/tenant"}

    with override_settings(DEBUG=True):
        in_debug = check_ids(TRUSTED_ISSUERS=[entry])
    in_production = check_ids(TRUSTED_ISSUERS=[entry])

    assert "mcp_django.E072" not in in_debug and "mcp_django.E072" in in_production


@pytest.mark.parametrize(
    "audience", ["api://0f1e2d3c", "https://other.example.com/mcp", "https://mcp.example.com/"]
)
def test_an_audience_that_is_not_the_resource_url_is_e073(audience: str) -> None:
    entry = {**GOOD_ISSUER, "audience": audience}

    assert "mcp_django.E073" in check_ids(TRUSTED_ISSUERS=[entry])


def test_an_audience_equal_to_the_resource_url_passes() -> None:
    entry = {**GOOD_ISSUER, "audience": "HTTPS://mcp.example.com/mcp/"}

    assert "mcp_django.E073" not in check_ids(TRUSTED_ISSUERS=[entry])


def test_jwt_without_resource_url_is_e074_with_a_hint() -> None:
    with override_settings(MCP_DJANGO={"AUTHENTICATION": "jwt", "TRUSTED_ISSUERS": [GOOD_ISSUER]}):
        errors = [e for e in check_settings() if e.id == "mcp_django.E074"]

    assert errors and "RESOURCE_URL" in (errors[0].hint or "")


def test_issuers_without_pyjwt_are_e075(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jwt", None)  # what `import jwt` sees when it is missing

    assert "mcp_django.E075" in check_ids()


@pytest.mark.parametrize("algorithms", [["none"], ["HS256"], ["RS256", "HS512"], [], "RS256"])
def test_bad_algorithms_are_e076(algorithms: Any) -> None:
    entry = {**GOOD_ISSUER, "algorithms": algorithms}

    assert "mcp_django.E076" in check_ids(TRUSTED_ISSUERS=[entry])


@pytest.mark.parametrize("hook", ["tests.auth.test_external.no_such_hook", "not a path", 42])
def test_a_user_hook_that_does_not_import_is_e077(hook: Any) -> None:
    assert "mcp_django.E077" in check_ids(JWT_USER_HOOK=hook)


@pytest.mark.parametrize("leeway", [-1, 3600, "60", True])
def test_a_leeway_out_of_range_is_e078(leeway: Any) -> None:
    assert "mcp_django.E078" in check_ids(JWT_LEEWAY=leeway)


def test_two_issuers_matching_users_by_sub_is_w070() -> None:
    issuers = [GOOD_ISSUER, {"issuer": "https://login.example.org"}]
    by_email = [
        {**GOOD_ISSUER, "user_claim": "email", "user_field": "email"},
        {"issuer": "https://login.example.org", "user_claim": "email", "user_field": "email"},
    ]

    assert "mcp_django.W070" in check_ids(TRUSTED_ISSUERS=issuers)
    assert "mcp_django.W070" not in check_ids(TRUSTED_ISSUERS=by_email)


def test_the_jwt_alias_resolves_to_the_policy() -> None:
    with override_settings(MCP_DJANGO={"AUTHENTICATION": "jwt"}):
        from mcp_django.conf import mcp_settings

        assert mcp_settings.authentication_class is external.JWTAuthentication


# -- the client a token was issued to --------------------------------------------------------------


async def _call_add(raw: str, request_id: int = 1) -> dict[str, Any]:
    client = MCPTestClient(headers=_bearer(raw))
    await client.initialize()
    return await client.call_tool("add", {"a": 1, "b": request_id})


@pytest.mark.usefixtures("settings_for")
async def test_the_audit_trail_names_the_client_each_token_was_issued_to(
    provider: Provider, alice: Any
) -> None:
    # One user, one tool, three clients: the trail's row template is per caller, so each row must
    # still carry its own call's client (client_id, else azp, else none).
    audit_buffer.writer.discard()  # what earlier tests left buffered is not this test's
    await _call_add(provider.token(client_id="nightly-agent"), 1)
    await _call_add(provider.token(client_id=None, azp="ide-plugin"), 2)
    await _call_add(provider.token(client_id=None), 3)

    assert await audit_buffer.aflush() == 0
    rows = [
        (row.username, row.client_id)
        async for row in ToolCall.objects.filter(tool_name="add", username="alice").order_by(
            "started_at", "pk"
        )
    ]
    assert rows == [("alice", "nightly-agent"), ("alice", "ide-plugin"), ("alice", "")]


async def test_tool_calls_per_client_count_an_external_client_across_its_users(
    provider: Provider, store: KeyStore, alice: Any
) -> None:
    await User.objects.acreate(username="bob")
    quotas = {"TOOL_CALLS_PER_CLIENT": "2/minute"}
    with override_settings(MCP_DJANGO=jwt_settings(provider, QUOTAS=quotas)):
        assert not (await _call_add(provider.token(client_id="agent", sub="alice"))).get("isError")
        assert not (await _call_add(provider.token(client_id="agent", sub="bob"))).get("isError")
        # The same client's third call, whoever it acts for, is over its cap; another is not.
        with pytest.raises(JSONRPCErrorResponse) as refused:
            await _call_add(provider.token(client_id="agent", sub="alice"))
        assert refused.value.code == QUOTA_EXCEEDED
        assert "OAuth client" in refused.value.message
        assert not (await _call_add(provider.token(client_id="other", sub="bob"))).get("isError")
