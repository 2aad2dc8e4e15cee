from django.apps import AppConfig
from django.core import checks
from django.utils.translation import gettext_lazy as _


class SimpleMcpDjangoConfig(AppConfig):
    """mcp_django without autodiscovery of ``mcp.py`` modules."""

    name = "mcp_django"
    verbose_name = _("MCP")
    default_auto_field = "django.db.models.BigAutoField"
    default_site = "mcp_django.sites.MCPSite"

    def ready(self) -> None:
        from . import checks as mcp_checks

        checks.register(mcp_checks.check_settings, "mcp_django")
        checks.register(mcp_checks.check_sites, "mcp_django")
        checks.register(mcp_checks.check_deployment, "mcp_django", deploy=True)

        from .conf import mcp_settings

        bridge = mcp_settings.LOG_BRIDGE_LOGGERS
        if bridge and isinstance(bridge, (list, tuple)):
            from .log_bridge import install

            install(list(bridge))


class McpDjangoConfig(SimpleMcpDjangoConfig):
    """mcp_django, importing each installed app's ``mcp.py`` (like admin.py)."""

    default = True

    def ready(self) -> None:
        super().ready()
        self.module.autodiscover()
