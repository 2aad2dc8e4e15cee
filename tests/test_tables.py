"""A project that forgot ``manage.py migrate``: the health view, the endpoint and ``check
--deploy`` say which migrations are missing (mcp_django's; for ``check --deploy`` also its
service clients app's) and what to run, on a real SQLite file where ``migrate`` never ran (the
``unmigrated_database`` fixture)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.db import OperationalError, ProgrammingError, connections
from django.db.migrations.executor import MigrationExecutor
from django.test import modify_settings, override_settings

import mcp_django
from mcp_django.auth.service_clients import SERVICE_CLIENTS_APP
from mcp_django.checks import check_migrations
from mcp_django.protocol.errors import INTERNAL_ERROR
from mcp_django.tables import MIGRATE_HINT, names_missing_table, unapplied_migrations
from mcp_django.testing import MCPTestClient
from tests.conftest import SessionsOn, database_alias

# Read from the package, so that a new migration needs no edit here.
ALL_MIGRATIONS = sorted(
    path.stem for path in (Path(mcp_django.__file__).parent / "migrations").glob("0*.py")
)
HEALTHY = {"status": "ok", "checks": {"database": "ok", "migrations": "ok", "channel_layer": "ok"}}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
# The labels of the apps mcp_django ships that this project installs.
SHIPPED_LABELS = ("mcp_django", "mcp_service_clients")


class ShippedAppsOn:
    """A database router that puts the models of mcp_django and its service clients app on one
    alias (the other apps stay where they are)."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return self.alias if model._meta.app_label in SHIPPED_LABELS else None

    db_for_write = db_for_read


def labels(names: list[str]) -> list[str]:
    return [f"mcp_django.{name}" for name in names]


def migrate_sessions_to(alias: str, migration: str) -> None:
    """Apply mcp_django's migrations on ``alias`` up to ``migration`` (and what they depend on)."""
    try:
        MigrationExecutor(connections[alias]).migrate([("mcp_django", migration)])
    finally:
        # This thread's connection would outlive the fixture's file, for the next test's alias.
        connections[alias].close()


def migrate_service_clients(alias: str) -> None:
    """Apply the service clients app's migrations on ``alias`` (with DOT's and auth's)."""
    executor = MigrationExecutor(connections[alias])
    try:
        executor.migrate(
            [
                (label, name)
                for label, name in executor.loader.graph.leaf_nodes()
                if label == "mcp_service_clients"
            ]
        )
    finally:
        connections[alias].close()


def test_unapplied_migrations_lists_every_migration_where_migrate_never_ran(unmigrated_database):
    assert unapplied_migrations(unmigrated_database) == labels(ALL_MIGRATIONS)


def test_unapplied_migrations_lists_only_those_left(unmigrated_database):
    migrate_sessions_to(unmigrated_database, ALL_MIGRATIONS[2])
    assert unapplied_migrations(unmigrated_database) == labels(ALL_MIGRATIONS[3:])


def test_a_missing_table_of_mcp_django_is_told_from_other_database_errors():
    assert names_missing_table(OperationalError("no such table: mcp_django_session"))
    assert names_missing_table(
        ProgrammingError('relation "mcp_django_session" does not exist\nLINE 1: SELECT ...')
    )
    assert names_missing_table(
        ProgrammingError("(1146, \"Table 'app.mcp_django_event' doesn't exist\")")
    )
    assert not names_missing_table(OperationalError("no such table: library_book"))
    assert not names_missing_table(OperationalError("database is locked"))


async def test_health_is_503_and_names_every_migration_when_migrate_never_ran(unmigrated_database):
    with override_settings(DATABASE_ROUTERS=[SessionsOn(unmigrated_database)]):
        response = await MCPTestClient().send("GET", path="/mcp/health/")
    assert response.status == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "ok", "migrations": "unapplied", "channel_layer": "ok"},
        "unapplied_migrations": labels(ALL_MIGRATIONS),
        "hint": MIGRATE_HINT,
    }
    assert "manage.py migrate" in MIGRATE_HINT


async def test_health_turns_200_once_the_migrations_are_applied(unmigrated_database):
    await sync_to_async(migrate_sessions_to)(unmigrated_database, ALL_MIGRATIONS[2])
    with override_settings(DATABASE_ROUTERS=[SessionsOn(unmigrated_database)]):
        response = await MCPTestClient().send("GET", path="/mcp/health/")
        assert response.status == 503
        assert response.json()["unapplied_migrations"] == labels(ALL_MIGRATIONS[3:])
        await sync_to_async(migrate_sessions_to)(unmigrated_database, ALL_MIGRATIONS[-1])
        response = await MCPTestClient().send("GET", path="/mcp/health/")
    assert response.status == 200 and response.json() == HEALTHY


async def test_initialize_without_migrate_is_a_json_rpc_error_that_says_to_run_migrate(
    unmigrated_database,
):
    with override_settings(DATABASE_ROUTERS=[SessionsOn(unmigrated_database)]):
        response = await MCPTestClient().post(INITIALIZE)
    assert response.status == 503
    assert response.headers["content-type"] == "application/json"
    error = json.loads(response.body)["error"]
    assert error["code"] == INTERNAL_ERROR
    assert "manage.py migrate" in error["message"] and "mcp_django.0001_initial" in error["message"]


def test_w183_check_deploy_warns_about_unapplied_migrations(unmigrated_database):
    with override_settings(DATABASE_ROUTERS=[ShippedAppsOn(unmigrated_database)]):
        messages = check_migrations()

    assert [m.id for m in messages] == ["mcp_django.W183", "mcp_django.W183"]
    assert "mcp_django.0001_initial" in messages[0].msg and "manage.py migrate" in messages[0].hint


def test_w183_names_the_service_clients_app_and_its_unapplied_migrations(unmigrated_database):
    migrate_sessions_to(unmigrated_database, ALL_MIGRATIONS[-1])

    with override_settings(DATABASE_ROUTERS=[ShippedAppsOn(unmigrated_database)]):
        messages = check_migrations()

    assert [m.id for m in messages] == ["mcp_django.W183"]
    assert SERVICE_CLIENTS_APP in messages[0].msg
    assert "mcp_service_clients.0001_initial" in messages[0].msg
    assert "manage.py migrate" in messages[0].hint


def test_w183_says_nothing_of_the_service_clients_app_when_it_is_not_installed(
    unmigrated_database,
):
    with (
        modify_settings(INSTALLED_APPS={"remove": [SERVICE_CLIENTS_APP]}),
        override_settings(DATABASE_ROUTERS=[ShippedAppsOn(unmigrated_database)]),
    ):
        messages = check_migrations()

    assert [m.id for m in messages] == ["mcp_django.W183"]
    assert "mcp_django.0001_initial" in messages[0].msg
    assert "service_clients" not in messages[0].msg


def test_w183_is_silent_once_migrated(unmigrated_database):
    migrate_sessions_to(unmigrated_database, ALL_MIGRATIONS[-1])
    migrate_service_clients(unmigrated_database)

    with override_settings(DATABASE_ROUTERS=[ShippedAppsOn(unmigrated_database)]):
        assert check_migrations() == []


def test_w183_does_not_fail_without_a_database(django_db_blocker):
    # What Django configures when DATABASES is empty: a backend that refuses every query.
    dummy = {"ENGINE": "django.db.backends.dummy"}
    with (
        django_db_blocker.unblock(),
        database_alias("nowhere", dummy) as alias,
        override_settings(DATABASE_ROUTERS=[ShippedAppsOn(alias)]),
    ):
        assert check_migrations() == []


def test_w183_does_not_fail_when_the_database_cannot_be_reached(tmp_path, django_db_blocker):
    config = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "gone" / "db.sqlite3")}
    with (
        django_db_blocker.unblock(),
        database_alias("unreachable", config) as alias,
        override_settings(DATABASE_ROUTERS=[ShippedAppsOn(alias)]),
    ):
        assert check_migrations() == []
