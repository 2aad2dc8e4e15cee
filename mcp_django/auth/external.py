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

from asgiref.sync import sync_to_async
from django.http import HttpRequest

from ..conf import mcp_settings
from .jwks import TrustedIssuer, trusted_issuers
from .oauth import OAuthAuthentication, canonical, resource_url
from .signed import Kind, verify_signed
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


#: An RFC 9068 access token, or the plain JWT most providers still send.
ACCESS_TOKEN = Kind(
    noun="access token",
    max_length=MAX_TOKEN_LENGTH,
    accepts_type=lambda typ: (
        typ is None or (isinstance(typ, str) and typ.lower() in ACCEPTED_TYPES)
    ),
    wrong_type="The token is not an access token.",
    require=("exp", "iss", "aud"),
)


def verify(
    token: str, resource: str, issuers: list[TrustedIssuer]
) -> tuple[dict[str, Any], TrustedIssuer]:
    """The claims of ``token`` and the issuer that signed it, once every check holds; raise
    :class:`InvalidToken` otherwise. Synchronous: it may fetch the issuer's keys."""
    claims, issuer = verify_signed(token, issuers, ACCESS_TOKEN, InvalidToken)
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
