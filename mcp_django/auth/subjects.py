"""Who a token from an external issuer acts for: its claims mapped to a Django user.

``MCP_DJANGO["JWT_USER_HOOK"]`` names the function that does it, ``(claims, issuer) -> user or
None``, where ``issuer`` is the :class:`~mcp_django.auth.jwks.TrustedIssuer` that signed the
token. The default, :func:`default_user_hook`, matches one claim to one user field. Whatever
the hook returns, an inactive user, or none, is refused by the caller. An RFC 7523 grant on the
site's own authorization server maps an assertion's subject through :func:`user_for_claims` too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist

from ..conf import mcp_settings
from .jwks import TrustedIssuer

logger = logging.getLogger(__name__)


def default_user_hook(claims: Mapping[str, Any], issuer: TrustedIssuer) -> Any:
    """The user whose ``issuer.user_field`` equals the token's ``issuer.user_claim``; created
    (without a usable password) when the issuer's entry says ``create_users`` and there is none.
    None when the claim is missing, or matches several users."""
    value = claims.get(issuer.user_claim)
    if not isinstance(value, str) or not value:
        return None
    user_model = get_user_model()
    try:
        field = user_model._meta.get_field(issuer.user_field)
    except FieldDoesNotExist:
        logger.error("TRUSTED_ISSUERS: the user model has no field %r", issuer.user_field)
        return None
    if not storable(value, field, user_model._meta.get_field(user_model.USERNAME_FIELD)):
        # PostgreSQL refuses a NUL in a query, and a value longer than the column fails the
        # insert: a refusal (401), not a server error, whatever an issuer signs.
        logger.warning(
            "A token of %s names a %s no user can have; refused.", issuer.issuer, issuer.user_claim
        )
        return None
    matches = list(user_model._default_manager.filter(**{issuer.user_field: value})[:2])
    if len(matches) == 1:
        return matches[0]
    if matches:
        # Two users with one e-mail address: acting for either would be a guess.
        logger.warning(
            "A token of %s matches several users by %s; refused.",
            issuer.issuer,
            issuer.user_field,
        )
        return None
    if not issuer.create_users:
        return None
    fields = {issuer.user_field: value, user_model.USERNAME_FIELD: value}
    user = user_model(**fields)
    user.set_unusable_password()  # signs in only through the issuer
    user.save()
    return user


def storable(value: str, *fields: Any) -> bool:
    """Whether ``value`` fits each of ``fields``: no NUL, and no longer than its ``max_length``."""
    if "\x00" in value:
        return False
    return all(getattr(f, "max_length", None) is None or len(value) <= f.max_length for f in fields)


def user_for_claims(claims: Mapping[str, Any], issuer: TrustedIssuer) -> Any:
    """The user the verified ``claims`` of ``issuer`` act for, through ``JWT_USER_HOOK``; None
    when the hook finds none."""
    # Imported once, by the settings (IMPORT_STRINGS), not on every verified token.
    return mcp_settings.jwt_user_hook(claims, issuer)
