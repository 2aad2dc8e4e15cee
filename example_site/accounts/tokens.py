"""Revoking what acts for a user, shared by the admin and the connected-applications page."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_refresh_token_model,
    revoke_access_token,
)
from oauth2_provider.settings import oauth2_settings

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
Grant = get_grant_model()


def live_tokens(user: Any) -> QuerySet[Any]:
    """The tokens acting for ``user``: an unexpired access token, or one whose refresh token
    still works. The connected-applications page lists these, and consent is remembered while
    one of them covers the scopes asked for: revoking on that page forgets the approval too."""
    return (
        AccessToken.objects.filter(user=user)
        .filter(
            Q(expires__gt=timezone.now())
            | Q(refresh_token__isnull=False, refresh_token__revoked__isnull=True)
        )
        .exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
    )


def approved_before(user: Any, application: Any, scopes: list[str]) -> bool:
    """Whether ``user`` already let ``application`` act with (at least) ``scopes``."""
    return any(
        token.allow_scopes(scopes) for token in live_tokens(user).filter(application=application)
    )


def revoke_tokens_of(applications: QuerySet[Any] | list[Any], user: Any | None) -> int:
    """Revoke the access and refresh tokens of ``applications`` (``user``'s only, unless None)
    and drop their pending authorization codes. Returns the number of tokens revoked."""
    owner = {} if user is None else {"user": user}
    revoked = 0
    # Registration access tokens (RFC 7592) belong to the client, not to a user: keep them.
    access_tokens = AccessToken.objects.filter(application__in=applications, **owner).exclude(
        scope=oauth2_settings.DCR_REGISTRATION_SCOPE
    )
    for access_token in access_tokens:
        revoke_access_token(access_token)
        revoked += 1
    # Refresh tokens whose access token is already gone (revoked earlier, or expired and pruned).
    for refresh_token in RefreshToken.objects.filter(
        application__in=applications, revoked__isnull=True, **owner
    ):
        refresh_token.revoke()
        revoked += 1
    Grant.objects.filter(application__in=applications, **owner).delete()
    return revoked
