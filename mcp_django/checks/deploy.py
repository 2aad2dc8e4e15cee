"""The checks of ``check --deploy`` only: what a WSGI-only project's plain view serves, browser
origins, the reverse proxy Daphne needs in front, and the migrations of mcp_django and its
installed optional apps."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from ..tables import (
    MIGRATE_HINT,
    app_database,
    missing_tables_message,
    shipped_apps,
    unapplied_migrations,
)
from .server import check_server_deploy
from .values import user_settings


def check_deployment(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_server_deploy() + check_origins()


def check_origins() -> list[CheckMessage]:
    user = user_settings()
    origins = user.get("ALLOWED_ORIGINS", []) if isinstance(user, dict) else []
    # A malformed value is E006's to report; this check must not crash on it.
    if isinstance(origins, (list, tuple)) and "*" in origins:
        return [
            Warning(
                "MCP_DJANGO['ALLOWED_ORIGINS'] contains '*': any web page can call the MCP "
                "endpoint from a browser.",
                hint="List the origins of your own web clients instead.",
                id="mcp_django.W004",
            )
        ]
    return []


#: Settings a project sets when a reverse proxy is in front of it (mcp_django.W184).
PROXY_SETTINGS = ("SECURE_PROXY_SSL_HEADER", "USE_X_FORWARDED_HOST", "USE_X_FORWARDED_PORT")


def check_proxy(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``check --deploy``: Daphne facing clients by itself. Daphne (Twisted) spools a whole request
    body to a temporary file before the application sees it, and has no header, body or
    keep-alive timeout, so MAX_BODY_SIZE cannot protect it: a proxy must. The signal: "daphne"
    installed and none of the settings a proxy in front calls for (TLS ends at the proxy, so
    Django needs SECURE_PROXY_SSL_HEADER to know a request was HTTPS; a proxy that sets the
    public host needs USE_X_FORWARDED_HOST). Without "daphne", the ASGI server in use is
    unknown, and uvicorn or granian read the body as the application asks for it."""
    if "daphne" not in settings.INSTALLED_APPS or any(
        getattr(settings, name, None) for name in PROXY_SETTINGS
    ):
        return []
    return [
        Warning(
            '"daphne" is in INSTALLED_APPS and no setting says a reverse proxy is in front '
            "(SECURE_PROXY_SSL_HEADER, USE_X_FORWARDED_HOST and USE_X_FORWARDED_PORT are unset). "
            "Daphne by itself writes any request body to a temporary file before "
            "MCP_DJANGO['MAX_BODY_SIZE'] is checked, and never times out slow headers, bodies or "
            "idle keep-alive connections.",
            hint='Put nginx or Caddy in front with the limits in the deploy how-to ("In front of '
            'the server"), and set SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", '
            '"https") when TLS ends there. If Daphne is only your development server '
            '(runserver), add "mcp_django.W184" to SILENCED_SYSTEM_CHECKS in production '
            "settings.",
            id="mcp_django.W184",
        )
    ]


def check_migrations(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``check --deploy``: migrations not applied, one warning per app mcp_django ships that is
    installed (its own, and optional ones such as ``mcp_django.auth.service_clients``), each on
    the database that holds that app's tables. Django warns of unapplied migrations only when
    runserver starts; a server started otherwise fails at its first request on a missing
    table."""
    messages: list[CheckMessage] = []
    for config in shipped_apps():
        using = app_database(config)
        try:
            pending = unapplied_migrations(using, config.label)
        except (DatabaseError, ImproperlyConfigured):
            continue  # no database here (a build step, CI without one): nothing to tell
        if pending:
            message = missing_tables_message(pending, using, config.name)
            messages.append(Warning(message, hint=MIGRATE_HINT, id="mcp_django.W183"))
    return messages
