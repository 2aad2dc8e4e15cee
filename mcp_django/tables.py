"""Whether mcp_django's tables exist on a database: which of its migrations are not applied.

A project that forgot ``manage.py migrate`` fails at its first MCP request on a missing table.
The health view, the endpoint and ``check --deploy`` ask here, and name the migrations to apply.
"""

from __future__ import annotations

import re

from django.db import DatabaseError, connections, router
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

# (alias, database name) pairs this process has seen fully migrated: migrations are not rolled
# back under a running server, so those are never read again.
_migrated: set[tuple[str, str]] = set()


def sessions_database() -> str:
    """Return the alias of the database that holds mcp_django's tables (as routed for writes)."""
    return router.db_for_write(Session)


def unapplied_migrations(using: str | None = None) -> list[str]:
    """Return the labels (``"mcp_django.0001_initial"``) of mcp_django's migrations not applied
    on the database ``using`` (default: the one that holds sessions), in the order ``migrate``
    would apply them; raise ``DatabaseError`` when the database cannot be read."""
    alias = using or sessions_database()
    connection = connections[alias]
    key = (alias, str(connection.settings_dict.get("NAME")))
    if key in _migrated:
        return []
    # The same plan `runserver` warns from; it reads django_migrations (absent: nothing applied).
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes(APP_LABEL))
    pending = [
        f"{migration.app_label}.{migration.name}"
        for migration, backwards in plan
        if migration.app_label == APP_LABEL and not backwards
    ]
    if not pending:
        _migrated.add(key)
    return pending


def names_missing_table(exc: DatabaseError) -> bool:
    """Whether ``exc`` says that one of mcp_django's tables does not exist."""
    text = str(exc)
    return f"{APP_LABEL}_" in text.lower() and _MISSING_TABLE.search(text) is not None


def missing_tables_message(pending: list[str], using: str) -> str:
    """The sentence every surface uses for unapplied migrations on the database ``using``."""
    return (
        f"mcp_django's migrations {', '.join(pending)} are not applied on the database "
        f"{using!r}. {MIGRATE_HINT}"
    )
