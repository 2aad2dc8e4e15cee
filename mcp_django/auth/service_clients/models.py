"""A DOT application marked as a service client, and the service user it acts as."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver
from django.utils.translation import gettext_lazy as _
from oauth2_provider.models import get_access_token_model
from oauth2_provider.scopes import get_scopes_backend
from oauth2_provider.settings import oauth2_settings

from .rules import Fault, client_credentials_faults

#: What the mark's form says of each rule its application breaks.
APPLICATION_FAULTS = {
    Fault.PUBLIC_CLIENT: _(
        "A service client must be a confidential application: a public one has no secret."
    ),
    Fault.OTHER_GRANT_TYPE: _(
        "Set the application's authorization grant type to client credentials."
    ),
}


class ServiceClientQuerySet(models.QuerySet["ServiceClient"]):
    def usable(self) -> ServiceClientQuerySet:
        """Service clients that may obtain a token now: enabled, for an active service user."""
        return self.filter(enabled=True, user__is_active=True)


class ServiceClient(models.Model):
    """A confidential application that may use the ``client_credentials`` grant; its tokens act
    as ``user``, whose permissions and row rules decide what the client can do.

    DOT's ``Application.user`` is not reused for this: it records who registered or owns an
    application, and turning every owner into an identity the application may assume would
    silently arm applications that exist today. A service client is a deliberate mark an
    admin sets, can switch off (``enabled``) without deleting the application, and can
    narrow (``scope``)."""

    application = models.OneToOneField(
        oauth2_settings.APPLICATION_MODEL,
        verbose_name=_("application"),
        on_delete=models.CASCADE,
        related_name="mcp_service_client",
        help_text=_(
            "A confidential application whose authorization grant type is client credentials."
        ),
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("service user"),
        on_delete=models.CASCADE,
        related_name="mcp_service_clients",
        help_text=_(
            "The user the client's tokens act as: its permissions decide what the client may do."
        ),
    )
    enabled = models.BooleanField(
        _("enabled"),
        default=True,
        help_text=_("Off: the client gets no token, and the tokens it holds are revoked."),
    )
    scope = models.CharField(
        _("allowed scopes"),
        max_length=1000,
        blank=True,
        help_text=_(
            "Space-separated scopes the client may ask for; blank: every scope the "
            "authorization server offers the application."
        ),
    )
    note = models.TextField(
        _("note"), blank=True, help_text=_("What runs with it, and who owns it.")
    )
    created = models.DateTimeField(_("created"), auto_now_add=True)
    updated = models.DateTimeField(_("updated"), auto_now=True)

    objects = ServiceClientQuerySet.as_manager()

    class Meta:
        verbose_name = _("service client")
        verbose_name_plural = _("service clients")
        ordering = ["application__name"]

    def __str__(self) -> str:
        return f"{self.application} → {self.user}"

    @property
    def scopes(self) -> list[str]:
        """The allowed scopes as a list; empty when any scope the application has is allowed."""
        return self.scope.split()

    def clean(self) -> None:
        errors: dict[str, list[Any]] = {}
        application = getattr(self, "application", None)
        faults = client_credentials_faults(application) if application is not None else []
        if faults:
            errors["application"] = [APPLICATION_FAULTS[fault] for fault in faults]
        known = set(get_scopes_backend().get_all_scopes())
        unknown = [s for s in self.scopes if s not in known]
        if unknown:
            errors["scope"] = [_("Unknown scopes: %(scopes)s.") % {"scopes": " ".join(unknown)}]
        if errors:
            raise ValidationError(errors)


# -- revoking: a token keeps the user and scopes it was issued with ---------------------------

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


@receiver(pre_save, sender=ServiceClient, dispatch_uid="mcp_service_clients.remember")
def remember_terms(sender: Any, instance: ServiceClient, **kwargs: Any) -> None:
    previous = sender._default_manager.filter(pk=instance.pk).values(*TERMS).first()
    instance._previous_terms = previous  # type: ignore[attr-defined]


@receiver(post_save, sender=ServiceClient, dispatch_uid="mcp_service_clients.change")
def revoke_on_change(sender: Any, instance: ServiceClient, created: bool, **kwargs: Any) -> None:
    previous = getattr(instance, "_previous_terms", None)
    if created or previous is None:
        return
    # Changed terms need new tokens: the admin's change holds from the next request on.
    if any(previous[name] != getattr(instance, name) for name in TERMS):
        revoke_tokens(instance)


@receiver(post_delete, sender=ServiceClient, dispatch_uid="mcp_service_clients.delete")
def revoke_on_delete(sender: Any, instance: ServiceClient, **kwargs: Any) -> None:
    revoke_tokens(instance)
