"""Revoke a service client's tokens when an admin changes whom or what it may act for."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save, pre_save
from oauth2_provider.models import get_access_token_model

from .models import ServiceClient

#: The fields whose change revokes the client's tokens: they decide what a token may do.
TERMS = ("user_id", "enabled", "scope")


def revoke_tokens(service_client: ServiceClient) -> int:
    """Delete the access tokens of the client's application (DOT revokes by deleting); return
    how many. ``client_credentials`` issues no refresh token, so these are all it holds."""
    tokens = get_access_token_model()._default_manager.filter(
        application_id=service_client.application_id
    )
    deleted, _ = tokens.delete()
    return int(deleted)


def remember_terms(sender: Any, instance: ServiceClient, **kwargs: Any) -> None:
    previous = sender._default_manager.filter(pk=instance.pk).values(*TERMS).first()
    instance._previous_terms = previous  # type: ignore[attr-defined]


def revoke_on_change(sender: Any, instance: ServiceClient, created: bool, **kwargs: Any) -> None:
    previous = getattr(instance, "_previous_terms", None)
    if created or previous is None:
        return
    # A token keeps the user and scopes it was issued with: changed terms need new tokens.
    if any(previous[name] != getattr(instance, name) for name in TERMS):
        revoke_tokens(instance)


def revoke_on_delete(sender: Any, instance: ServiceClient, **kwargs: Any) -> None:
    revoke_tokens(instance)


def connect() -> None:
    """Connect the receivers (``ServiceClientsConfig.ready``)."""
    uid = "mcp_django.service_clients."
    pre_save.connect(remember_terms, sender=ServiceClient, dispatch_uid=uid + "remember")
    post_save.connect(revoke_on_change, sender=ServiceClient, dispatch_uid=uid + "change")
    post_delete.connect(revoke_on_delete, sender=ServiceClient, dispatch_uid=uid + "delete")
