"""Whether mcp_django's tables exist on a database: which of its migrations are not applied.

A project that forgot ``manage.py migrate`` fails at its first MCP request on a missing table.
The health view, the endpoint and ``check --deploy`` ask here, and name the migrations to apply;
``check --deploy`` also asks about the optional apps mcp_django ships (:func:`shipped_apps`).
"""

from __future__ import annotations

import re

from django.apps import AppConfig, apps
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, router
from django.db.migrations.executor import MigrationExecutor

from .models import Session

APP_LABEL = "mcp_django"

#: What every message about unapplied migrations tells the user to do.
MIGRATE_HINT = "Run `python manage.py migrate` to create mcp_django's tables."

# What SQLite, PostgreSQL, MySQL/MariaDB and Oracle say about a table that is not there.
_MISSING_TABLE = re.compile(
    r"no such table|does not exist|doesn't exist|undefined table|table or view does not exist",
    re.IGNORECASE,
)

# (app label, alias, database name) this process has seen fully migrated: migrations are not
# rolled back under a running server, so those are never read again.
_migrated: set[tuple[str, str, str]] = set()


def sessions_database() -> str:
    """Return the alias of the database that holds mcp_django's tables (as routed for writes)."""
    return router.db_for_write(Session)


def shipped_apps() -> list[AppConfig]:
    """Return the installed apps mcp_django ships that have models, hence migrations:
    ``mcp_django`` itself and each optional sub-app in ``INSTALLED_APPS``
    (``mcp_django.auth.service_clients``)."""
    return [
        config
        for config in apps.get_app_configs()
        if (config.name == "mcp_django" or config.name.startswith("mcp_django."))
        and config.models_module is not None
    ]


def app_database(config: AppConfig) -> str:
    """Return the alias of the database that holds the tables of the app ``config`` (as routed
    for writes): where its migrations must be applied."""
    model = next(iter(config.get_models()), None)
    return router.db_for_write(model) if model is not None else DEFAULT_DB_ALIAS


def unapplied_migrations(using: str | None = None, app_label: str = APP_LABEL) -> list[str]:
    """Return the labels (``"mcp_django.0001_initial"``) of the app ``app_label``'s migrations
    (default: mcp_django's) not applied on the database ``using`` (default: the one that holds
    sessions), in the order ``migrate`` would apply them; raise ``DatabaseError`` when the
    database cannot be read."""
    alias = using or sessions_database()
    connection = connections[alias]
    key = (app_label, alias, str(connection.settings_dict.get("NAME")))
    if key in _migrated:
        return []
    # The same plan `runserver` warns from; it reads django_migrations (absent: nothing applied).
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes(app_label))
    pending = [
        f"{migration.app_label}.{migration.name}"
        for migration, backwards in plan
        if migration.app_label == app_label and not backwards
    ]
    if not pending:
        _migrated.add(key)
    return pending


def names_missing_table(exc: DatabaseError) -> bool:
    """Whether ``exc`` says that one of mcp_django's tables does not exist."""
    text = str(exc)
    return f"{APP_LABEL}_" in text.lower() and _MISSING_TABLE.search(text) is not None


def missing_tables_message(pending: list[str], using: str, app: str = "mcp_django") -> str:
    """The sentence every surface uses for the app ``app``'s (its name in ``INSTALLED_APPS``)
    unapplied migrations on the database ``using``."""
    return (
        f"The migrations of {app} are not applied on the database {using!r}: "
        f"{', '.join(pending)}. {MIGRATE_HINT}"
    )
