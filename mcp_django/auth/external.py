"""mcp_django as a pure OAuth resource server for tokens an external identity provider issued.

``AUTHENTICATION = "jwt"``: every request carries ``Authorization: Bearer <JWT>``, an RFC 9068
access token signed by one of ``TRUSTED_ISSUERS``. A token is accepted only when its signature
checks with a key of that issuer's JWKS (:mod:`mcp_django.auth.jwks`), with an algorithm the
issuer's entry allows (never ``none``, never HMAC); its ``iss`` is the issuer; its ``aud``
names this MCP server's canonical resource URL (RFC 8707), or the entry's ``audience``; its
``exp``, ``nbf`` and ``iat`` hold within ``JWT_LEEWAY``; and it acts for an active user
(:mod:`mcp_django.auth.subjects`). Each refusal is a 401 with ``error="invalid_token"``; a
token that lacks a required scope gets the 403 step-up challenge, as with ``"oauth"``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import jwt
from asgiref.sync import sync_to_async
from django.http import HttpRequest

from ..conf import mcp_settings
from .jwks import TrustedIssuer, key_store, trusted_issuers
from .oauth import OAuthAuthentication, canonical, resource_url
from .subjects import user_for_claims

logger = logging.getLogger(__name__)

#: Longest token read (characters): a JWT access token is a few kilobytes at most, and a larger
#: one is refused before it is decoded.
MAX_TOKEN_LENGTH = 16 * 1024
#: The ``typ`` header values accepted: RFC 9068's, and the plain JWT most providers still send.
#: Any other type (an ID-JAG assertion, a logout token) is not an access token.
ACCEPTED_TYPES = frozenset({"at+jwt", "application/at+jwt", "jwt"})


class InvalidToken(Exception):
    """The token is refused; the message says why, and goes into the challenge."""


def token_scopes(claims: Mapping[str, Any], prefix: str = "") -> frozenset[str]:
    """The scopes a token grants: ``scope`` (space separated, RFC 9068) or ``scp`` (a list, or
    a space-separated string, as Okta and Entra ID send), each without ``prefix``."""
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        scopes = value.split()
    elif isinstance(value, list):
        scopes = [item for item in value if isinstance(item, str)]
    else:
        scopes = []
    if prefix:
        scopes = [s[len(prefix) :] if s.startswith(prefix) else s for s in scopes]
    return frozenset(s for s in scopes if s)


def _same_audience(value: str, expected: str) -> bool:
    if "://" in value and "://" in expected:
        return canonical(value) == canonical(expected)
    return value == expected


def verify(
    token: str, resource: str, issuers: list[TrustedIssuer]
) -> tuple[dict[str, Any], TrustedIssuer]:
    """The claims of ``token`` and the issuer that signed it, once every check holds; raise
    :class:`InvalidToken` otherwise. Synchronous: it may fetch the issuer's keys."""
    if len(token) > MAX_TOKEN_LENGTH:
        raise InvalidToken("The access token is too long.")
    try:
        header = jwt.get_unverified_header(token)
        unverified = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise InvalidToken("The access token is not a JWT.") from None
    typ = header.get("typ")
    if typ is not None and (not isinstance(typ, str) or typ.lower() not in ACCEPTED_TYPES):
        raise InvalidToken("The token is not an access token.")
    issuer = next((i for i in issuers if i.issuer == unverified.get("iss")), None)
    if issuer is None:
        raise InvalidToken("The access token was not issued by a trusted issuer.")
    algorithm = header.get("alg")
    if algorithm not in issuer.algorithms:
        raise InvalidToken(f"The access token's algorithm {algorithm!r} is not accepted.")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise InvalidToken("The access token's key id is not a string.")
    keys = key_store.signing_keys(issuer, kid)
    if not keys:
        raise InvalidToken("The access token is signed with a key the issuer does not publish.")
    claims: dict[str, Any] | None = None
    for jwk in keys:
        try:
            key = jwt.PyJWK(jwk, algorithm)
        except jwt.PyJWTError:
            continue  # a key of another type (an EC key for an RS256 token)
        try:
            claims = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                issuer=issuer.issuer,
                leeway=mcp_settings.jwt_leeway,
                # The audience is compared below, as canonical URIs.
                options={"require": ["exp", "iss", "aud"], "verify_aud": False},
            )
            break
        except jwt.InvalidSignatureError:
            continue
        except jwt.ExpiredSignatureError:
            raise InvalidToken("The access token has expired.") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("The access token is not valid yet.") from None
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"The access token is invalid: {exc}.") from None
    if claims is None:
        raise InvalidToken("The access token's signature does not verify.")
    audience = claims.get("aud")
    audiences = [audience] if isinstance(audience, str) else audience
    expected = issuer.audience or resource
    if not isinstance(audiences, list) or not any(
        isinstance(a, str) and _same_audience(a, expected) for a in audiences
    ):
        raise InvalidToken("The access token was not issued for this server.")
    return claims, issuer


class JWTAuthentication(OAuthAuthentication):
    """RFC 9068 JWT access tokens from the ``TRUSTED_ISSUERS``, bound to this server by their
    audience."""

    @classmethod
    def issuers(cls, resource: str, mount: str = "") -> list[str]:
        """The trusted issuers, named in the protected-resource metadata."""
        return [issuer.issuer for issuer in trusted_issuers(mcp_settings.trusted_issuers)]

    async def authenticate(self, request: HttpRequest) -> Any:
        resource = resource_url(request, getattr(request, "mcp_endpoint_path", None))
        token = self.bearer_token(request, resource)
        issuers = trusted_issuers(mcp_settings.trusted_issuers)
        try:
            # Off the thread of the ORM: a key fetch may take seconds.
            claims, issuer = await sync_to_async(verify, thread_sensitive=False)(
                token, resource, issuers
            )
        except InvalidToken as exc:
            raise self._fail(resource, str(exc), request=request) from None
        user = await sync_to_async(user_for_claims)(claims, issuer)
        if user is None or not user.is_active:
            raise self._fail(
                resource, "The access token does not act for an active user.", request=request
            )
        request.auth_claims = claims  # type: ignore[attr-defined]
        request.auth_issuer = issuer  # type: ignore[attr-defined]
        self.require_scopes(request, resource, token_scopes(claims, issuer.scope_prefix))
        return user
