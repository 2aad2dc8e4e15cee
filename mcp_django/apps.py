from types import ModuleType
from typing import cast

from django.apps import AppConfig
from django.apps import apps as all_apps
from django.contrib.auth import get_user_model
from django.core import checks
from django.core.signals import request_started
from django.db.models.signals import m2m_changed
from django.utils.translation import gettext_lazy as _

from .conf import mcp_settings
from .signals import session_changed, sweeping


class SimpleMcpDjangoConfig(AppConfig):
    """mcp_django without autodiscovery of ``mcp.py`` modules."""

    name = "mcp_django"
    verbose_name = _("MCP")
    default_auto_field = "django.db.models.BigAutoField"
    default_site = "mcp_django.registry.sites.MCPSite"

    def ready(self) -> None:
        # App loading: Django imports this module before the app registry is ready, and these
        # modules import models (directly or through the stores).
        from . import checks as mcp_checks, routing, site_urls  # noqa: I001 (one import, one line)
        from .extensions.tasks import runner as taskrun
        from .ops import audit, tracing
        from .registry import sites
        from .server import log_bridge
        from .transport import process

        checks.register(mcp_checks.check_settings, "mcp_django")
        checks.register(mcp_checks.check_sites, "mcp_django")
        checks.register(mcp_checks.check_skills, "mcp_django")
        checks.register(mcp_checks.check_urls, "mcp_django", checks.Tags.urls)
        checks.register(mcp_checks.check_deployment, "mcp_django", deploy=True)
        # Reads the database: only under --deploy, where a missing database is silent.
        checks.register(mcp_checks.check_migrations, "mcp_django", deploy=True)
        checks.register(mcp_checks.check_proxy, "mcp_django", deploy=True)

        request_started.connect(
            routing.serve_endpoint_without_slash, dispatch_uid="mcp_django.endpoint_without_slash"
        )

        sites.MCPSite.urlpatterns_builder = staticmethod(site_urls.site_urlpatterns)

        # Storage says a session changed; the bus tells the other processes.
        session_changed.connect(
            process.on_session_changed, dispatch_uid="mcp_django.session_changed"
        )

        self.connect_permission_signals()

        # Before the audit trail, so its observer runs inside the span and sees the trace id.
        # Imports nothing of OpenTelemetry until a request arrives with TRACING on.
        tracing.install()

        # Every tools/call, on every transport, goes to the audit trail while AUDIT_TOOL_CALLS is
        # on.
        audit.install()

        # The bus's sweep after dead processes also fails their durable tasks, polled or not.
        sweeping.connect(
            taskrun.on_sweep, dispatch_uid="mcp_django.extensions.tasks.runner.on_sweep"
        )
        # A revoked token fails the parked tasks it alone allowed (running ones stop at a
        # heartbeat).
        taskrun.connect_revocations()

        bridge = mcp_settings.log_bridge_loggers
        if bridge:
            log_bridge.install(bridge)

    def connect_permission_signals(self) -> None:
        """Permission and group changes alter what users may see: tell their sessions."""
        if not all_apps.is_installed("django.contrib.auth"):
            return
        # App loading: notifications imports models (see ready()).
        from .server.notifications import permissions_changed

        user_model = get_user_model()
        group_model = all_apps.get_model("auth", "Group")
        for through in (
            getattr(user_model, "user_permissions", None),
            getattr(user_model, "groups", None),
            group_model.permissions,
        ):
            if through is not None:
                m2m_changed.connect(
                    permissions_changed,
                    sender=through.through,
                    dispatch_uid=f"mcp_django:{through.through._meta.label}",
                )


class McpDjangoConfig(SimpleMcpDjangoConfig):
    """mcp_django, importing each installed app's ``mcp.py`` (like admin.py)."""

    default = True

    def ready(self) -> None:
        super().ready()
        # The app's package, which Django imported when it made this config (None only for a
        # config built by hand).
        cast(ModuleType, self.module).autodiscover()
