"""The service clients app's configuration."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ServiceClientsConfig(AppConfig):
    """Service clients: DOT applications acting as a service user (``client_credentials``).
    The receivers that revoke tokens when a mark changes are connected in ``models``."""

    name = "mcp_django.auth.service_clients"
    label = "mcp_service_clients"
    verbose_name = _("MCP service clients")
    default_auto_field = "django.db.models.BigAutoField"
