"""Connected applications in the admin: everyone sees, and may revoke, what acts for them.

django-oauth-toolkit's own ModelAdmins show every user's tokens to anyone holding the view
permission. Here a staff user who is not a superuser sees only their own tokens and grants,
and the applications they have authorized, and needs no model permission for it: these are
their own credentials, like their password. Superusers see everything.

Revoking goes through DOT's revoke paths: an access token's refresh token is revoked with it
(otherwise the refresh token mints a new one), and a revoked refresh token stays as a
tombstone so that ``REFRESH_TOKEN_REUSE_PROTECTION`` can spot a replay.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from oauth2_provider import admin as dot_admin
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from mcp_django.auth.service_clients.admin import ServiceClientInline

from .tokens import revoke_tokens_of

Application = get_application_model()
AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
Grant = get_grant_model()
IDToken = get_id_token_model()

for model in (Application, AccessToken, RefreshToken, Grant, IDToken):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


def sees_everything(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_superuser)


class OwnRowsMixin:
    """Rows that belong to a user (a ``user`` foreign key): a user's own, for any staff user."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)  # type: ignore[misc]
        return queryset if sees_everything(request) else queryset.filter(user=request.user)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if sees_everything(request):
            return True
        return bool(
            request.user.is_active
            and request.user.is_staff
            and (obj is None or obj.user_id == request.user.pk)
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Credentials are issued by the OAuth flows; nobody edits them by hand.
        return False

    def get_list_filter(self, request: HttpRequest) -> Any:
        filters = list(super().get_list_filter(request))  # type: ignore[misc]
        return filters if sees_everything(request) else [f for f in filters if f != "user"]


class ServiceClientTokenFilter(admin.SimpleListFilter):
    title = _("issued to")
    parameter_name = "issued_to"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("service", _("A service client")), ("user", _("A client a user authorized"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        marked = Q(application__mcp_service_client__isnull=False)
        if self.value() == "service":
            return queryset.filter(marked)
        if self.value() == "user":
            return queryset.exclude(marked)
        return queryset


@admin.register(AccessToken)
class AccessTokenAdmin(OwnRowsMixin, dot_admin.AccessTokenAdmin):
    # A service client's tokens (client_credentials) sit here beside its service user's others.
    list_display = (
        "application",
        "user",
        "service_client",
        "scope",
        "audience",
        "created",
        "expires",
        "is_active",
    )
    list_filter = ("application", ServiceClientTokenFilter)
    # Tokens are stored hashed (COMPLIANT_BCP_RFC9700_TOKEN_STORAGE): there is nothing to mask.
    exclude = ("token", "token_checksum", "id_token")
    readonly_fields = (
        "user",
        "application",
        "scope",
        "resource",
        "expires",
        "created",
        "updated",
        "source_refresh_token",
    )
    actions = ("revoke_tokens",)
    date_hierarchy = "created"

    @admin.display(description=_("audience"))
    def audience(self, obj: Any) -> str:
        return " ".join(obj.resource or []) or "—"

    @admin.display(description=_("active"), boolean=True)
    def is_active(self, obj: Any) -> bool:
        return not obj.is_expired()

    @admin.display(description=_("service client"), boolean=True)
    def service_client(self, obj: Any) -> bool:
        return hasattr(obj.application, "mcp_service_client") if obj.application else False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).select_related("application__mcp_service_client")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields


@admin.register(RefreshToken)
class RefreshTokenAdmin(OwnRowsMixin, dot_admin.RefreshTokenAdmin):
    list_display = ("application", "user", "created", "revoked")
    list_filter = ("application", ("revoked", admin.EmptyFieldListFilter))
    exclude = ("token", "token_checksum")
    readonly_fields = (
        "user",
        "application",
        "access_token",
        "resource",
        "token_family",
        "created",
        "updated",
        "revoked",
    )
    actions = ("revoke_tokens",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields


@admin.register(Grant)
class GrantAdmin(OwnRowsMixin, dot_admin.GrantAdmin):
    """Authorization codes: they live a minute, so this is mostly empty; a user may delete theirs."""

    list_display = ("application", "user", "scope", "created", "expires")
    exclude = ("code", "code_challenge", "nonce", "claims")
    readonly_fields = (
        "user",
        "application",
        "redirect_uri",
        "scope",
        "code_challenge_method",
        "resource",
        "expires",
        "created",
        "updated",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)


@admin.register(IDToken)
class IDTokenAdmin(OwnRowsMixin, dot_admin.IDTokenAdmin):
    """OpenID Connect is off on this site; kept so that a superuser sees any row that exists."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return sees_everything(request)


class AuthorizedByFilter(admin.SimpleListFilter):
    title = _("access")
    parameter_name = "access"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("active", _("Has an active token")), ("none", _("No active token"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        active = AccessToken.objects.filter(expires__gt=timezone.now())
        if not sees_everything(request):
            active = active.filter(user=request.user)
        ids = active.values("application_id")
        if self.value() == "active":
            return queryset.filter(pk__in=ids)
        if self.value() == "none":
            return queryset.exclude(pk__in=ids)
        return queryset


@admin.register(Application)
class ApplicationAdmin(dot_admin.ApplicationAdmin):
    """Superusers manage every client; other staff see the clients they authorized (read-only:
    a dynamically registered client is shared by everyone who uses it) and disconnect them."""

    list_display = ("name", "registration_source", "redirect_hosts", "client_type", "created")
    list_filter = ("registration_source", AuthorizedByFilter, "client_type")
    search_fields = ("name", "client_id")
    actions = ("revoke_access",)
    # Superusers mark a confidential client-credentials application as a service client here.
    inlines = [ServiceClientInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if sees_everything(request):
            return queryset
        user = request.user
        return queryset.filter(
            Q(user=user)
            | Q(pk__in=AccessToken.objects.filter(user=user).values("application_id"))
            | Q(
                pk__in=RefreshToken.objects.filter(user=user, revoked__isnull=True).values(
                    "application_id"
                )
            )
            | Q(pk__in=Grant.objects.filter(user=user).values("application_id"))
        ).distinct()

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if sees_everything(request):
            return True
        if not (request.user.is_active and request.user.is_staff):
            return False
        return obj is None or self.get_queryset(request).filter(pk=obj.pk).exists()

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return sees_everything(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return sees_everything(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return sees_everything(request)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if sees_everything(request):
            return super().get_fields(request, obj)
        return (
            "name",
            "client_id",
            "registration_source",
            "redirect_uris",
            "client_type",
            "authorization_grant_type",
            "created",
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if sees_everything(request):
            return super().get_readonly_fields(request, obj)
        return self.get_fields(request, obj)

    @admin.display(description=_("redirects to"))
    def redirect_hosts(self, obj: Any) -> str:
        hosts = dict.fromkeys(urlsplit(uri).netloc for uri in obj.redirect_uris.split())
        return ", ".join(hosts) or "—"

    @admin.action(
        description=_("Revoke access of the selected applications (every user's, for superusers)")
    )
    def revoke_access(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        revoked = revoke_tokens_of(
            list(queryset), None if sees_everything(request) else request.user
        )
        self.message_user(
            request, ngettext("Revoked %d token.", "Revoked %d tokens.", revoked) % revoked
        )
