"""Identity Assertion JWT Authorization Grants (ID-JAG): the assertion an enterprise identity
provider mints for this site's own authorization server, verified and spent once.

The client signs its user in at the identity provider, trades that sign-in for an ID-JAG (RFC
8693 token exchange at the provider, where the provider's policy decides), and presents it to
this site's token endpoint with the RFC 7523 ``jwt-bearer`` grant
(draft-ietf-oauth-identity-assertion-authz-grant section 4.4; the MCP extension
"Enterprise-Managed Authorization", sections 5 and 7). :func:`verify_assertion` does every check
of the assertion itself; :func:`spend` records its ``jti`` so it buys one token only.

The providers are ``MCP_DJANGO["ID_JAG_ISSUERS"]``, entries shaped like ``TRUSTED_ISSUERS``',
verified with the same key cache (:data:`~mcp_django.auth.jwks.key_store`). Nothing here knows
django-oauth-toolkit: :mod:`mcp_django.auth.oauth_server` wires it into DOT's token endpoint.
Needs PyJWT (the ``jwt`` extra).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from django.apps import apps as django_apps
from django.db import IntegrityError, router, transaction
from django.utils import timezone as django_timezone

from ..conf import mcp_settings
from .jwks import TrustedIssuer, trusted_issuers
from .oauth import canonical
from .signed import Kind, verify_signed

#: What RFC 8414 metadata lists in ``authorization_grant_profiles_supported`` (the MCP extension,
#: section 6): the jwt-bearer grant here takes ID-JAGs.
ID_JAG_PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag"
#: The JWT ``typ`` an ID-JAG carries (draft section 3; RFC 8725 section 3.11), with the media
#: type's full form (RFC 7515 section 4.1.9 lets the ``application/`` prefix be left out).
ID_JAG_TYPES = frozenset({"oauth-id-jag+jwt", "application/oauth-id-jag+jwt"})
#: Longest assertion read (characters); a larger one is refused before it is decoded.
MAX_ASSERTION_LENGTH = 16 * 1024


class AssertionRefused(Exception):
    """The assertion is refused (``invalid_grant``); the message says why, in words that name
    no claim value, so it can go to the client and into the log."""


@dataclass(frozen=True)
class Assertion:
    """A verified ID-JAG: its claims, the provider that signed it, and until when it could be
    presented (``exp`` plus the leeway), which is how long its ``jti`` is kept."""

    claims: Mapping[str, Any]
    issuer: TrustedIssuer
    usable_until: datetime

    @property
    def scopes(self) -> list[str] | None:
        """The asserted scopes (RFC 6749 section 3.3 syntax); None when the claim is absent."""
        value = self.claims.get("scope")
        return value.split() if isinstance(value, str) else None

    @property
    def replay_key(self) -> str:
        """SHA-256 of the issuer and the ``jti``: a ``jti`` is unique per issuer only."""
        material = f"{self.issuer.issuer}\0{self.claims['jti']}".encode()
        return hashlib.sha256(material).hexdigest()


def id_jag_issuers() -> list[TrustedIssuer]:
    """The usable entries of ``ID_JAG_ISSUERS`` (system checks E080 to E083 report the rest)."""
    return trusted_issuers(mcp_settings.id_jag_issuers)


def _same_url(value: Any, expected: str) -> bool:
    # An issuer and a resource are URLs: the same once a trailing slash and letter case in the
    # scheme and host are set aside (RFC 8414 issuers are compared as strings, but "https://as/"
    # against "https://as" is a configuration slip, not an attack).
    return isinstance(value, str) and canonical(value) == canonical(expected)


#: An ID-JAG: only its own type (an ID token or an access token from the same provider is not a
#: grant for this server), and the claims the draft makes required (section 3).
ID_JAG = Kind(
    noun="assertion",
    max_length=MAX_ASSERTION_LENGTH,
    accepts_type=lambda typ: isinstance(typ, str) and typ.lower() in ID_JAG_TYPES,
    wrong_type="The assertion is not an ID-JAG (typ oauth-id-jag+jwt).",
    require=("iss", "sub", "aud", "exp", "iat", "jti", "client_id"),
)


def verify_assertion(assertion: str, *, client_id: str, audience: str, resource: str) -> Assertion:
    """The verified ID-JAG ``assertion`` that the authenticated client ``client_id`` presents to
    the authorization server whose issuer is ``audience``, for the MCP endpoint ``resource``;
    raise :class:`AssertionRefused` otherwise. Synchronous: it may fetch the provider's keys.

    ``audience`` applies to entries without an ``audience`` of their own."""
    claims, issuer = verify_signed(assertion, id_jag_issuers(), ID_JAG, AssertionRefused)
    expected = issuer.audience or audience
    aud = claims["aud"]
    # A string or a list (RFC 7519): any other JSON value (5, an object) names no server.
    audiences = [aud] if isinstance(aud, str) else aud
    if not isinstance(audiences, list) or not any(_same_url(a, expected) for a in audiences):
        raise AssertionRefused("The assertion was issued for another authorization server.")
    # The profile makes aud and resource a bound pair (MCP extension section 7.6); a provider
    # that leaves resource out leaves it to the one resource this server issues tokens for.
    asserted = claims.get("resource", resource)
    resources = [asserted] if isinstance(asserted, str) else asserted
    if not isinstance(resources, list) or not resources:
        raise AssertionRefused("The assertion's resource claim is malformed.")
    if not all(_same_url(r, resource) for r in resources):
        raise AssertionRefused("The assertion was issued for another resource.")
    if claims["client_id"] != client_id:
        raise AssertionRefused("The assertion was issued to another client.")
    if not isinstance(claims["jti"], str) or not claims["jti"]:
        raise AssertionRefused("The assertion's jti is not a string.")
    if not isinstance(claims["sub"], str) or not claims["sub"]:
        raise AssertionRefused("The assertion's sub is not a string.")
    if "scope" in claims and not isinstance(claims["scope"], str):
        raise AssertionRefused("The assertion's scope is not a string.")
    try:
        # PyJWT checked exp with int(), which also takes "99999999999" and 1e300; the jti is
        # kept until this time, which a datetime must hold.
        usable_until = datetime.fromtimestamp(int(claims["exp"]), tz=timezone.utc) + timedelta(
            seconds=mcp_settings.jwt_leeway
        )
    except (OverflowError, OSError, ValueError):
        raise AssertionRefused("The assertion's exp is out of range.") from None
    return Assertion(claims=claims, issuer=issuer, usable_until=usable_until)


def _used_assertions() -> Any:
    # Looked up, not imported: auth/ sits below the models layer (docs/architecture.md).
    return django_apps.get_model("mcp_django", "UsedAssertion")._default_manager


def is_spent(assertion: Assertion) -> bool:
    """Whether ``assertion`` has already bought a token."""
    return bool(_used_assertions().filter(pk=assertion.replay_key).exists())


def spend(assertion: Assertion) -> None:
    """Record ``assertion``'s ``jti`` until it expires; raise :class:`AssertionRefused` when it
    is already recorded (two processes presenting it at once: the primary key lets one win).

    Call it inside the transaction that saves the token, so a failed save records nothing."""
    manager = _used_assertions()
    # Rows outlive their assertion by nothing: clearing them here keeps the table to the
    # assertions of the last few minutes, with no command to schedule.
    manager.filter(expires_at__lt=django_timezone.now()).delete()
    try:
        with transaction.atomic(using=router.db_for_write(manager.model)):
            manager.create(key=assertion.replay_key, expires_at=assertion.usable_until)
    except IntegrityError:
        raise AssertionRefused("The assertion has already been used.") from None
