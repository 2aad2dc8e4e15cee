"""Service clients in the admin: a list with filters, and an inline for the application's page.

The inline is not attached to any ``ApplicationAdmin`` here: DOT registers its own, and a
project often replaces it. Add ``ServiceClientInline`` to the ``inlines`` of the one you use
(the example site's ``accounts/admin.py`` does).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy as _
from oauth2_provider.models import get_access_token_model

from .models import ServiceClient


def live_tokens(service_client: ServiceClient) -> Any:
    """The unexpired access tokens the client holds."""
    return get_access_token_model()._default_manager.filter(
        application_id=service_client.application_id, expires__gt=timezone.now()
    )


class ServiceUserActiveFilter(admin.SimpleListFilter):
    title = _("service user")
    parameter_name = "user_active"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("1", _("Active")), ("0", _("Inactive: gets no token"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("0", "1"):
            return queryset.filter(user__is_active=self.value() == "1")
        return queryset


@admin.register(ServiceClient)
class ServiceClientAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Service clients: which application acts as which user, with which scopes."""

    list_display = ["application", "user", "enabled", "allowed_scopes", "tokens", "updated"]
    list_filter = ["enabled", ServiceUserActiveFilter, "application__client_type"]
    list_select_related = ["application", "user"]
    search_fields = ["application__name", "application__client_id", "user__username", "note"]
    # Not autocomplete: that needs the user model's admin registered with search_fields.
    raw_id_fields = ["application", "user"]
    fields = ["application", "user", "enabled", "scope", "note", "tokens", "created", "updated"]
    readonly_fields = ["tokens", "created", "updated"]

    @admin.display(description=_("allowed scopes"))
    def allowed_scopes(self, obj: ServiceClient) -> str:
        return obj.scope or "—"

    @admin.display(description=_("live tokens"))
    def tokens(self, obj: ServiceClient) -> str:
        if obj.pk is None:
            return "—"
        count = live_tokens(obj).count()
        model = get_access_token_model()._meta
        url = reverse(f"admin:{model.app_label}_{model.model_name}_changelist")
        # The access token list, where they sit beside the service user's other tokens.
        query = urlencode({"application__id__exact": obj.application_id})
        return format_html('<a href="{}?{}">{}</a>', url, query, count)


class ServiceClientInline(admin.StackedInline):  # type: ignore[type-arg]
    """The mark on the application's own page: whom it acts as, enabled, allowed scopes."""

    model = ServiceClient
    fk_name = "application"
    can_delete = True
    extra = 0
    max_num = 1
    raw_id_fields = ["user"]
    fields = ["user", "enabled", "scope", "note"]
    verbose_name = _("service client (client credentials)")
    verbose_name_plural = _("service client (client credentials)")
