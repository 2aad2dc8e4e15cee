"""mcp_django.db: a connection that broke under a thread (the database restarted) is closed, so
the thread's next query reconnects instead of failing until the process restarts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError, connections

from mcp_django.db import close_broken_connections
from tests.conftest import database_alias

POSTGRES_URL = os.environ.get(
    "MCP_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture
def postgres(django_db_blocker: Any) -> Iterator[str]:
    """An alias on the PostgreSQL server of the multi-process tests (skipped without it, but
    failed under CI=true)."""
    import dj_database_url
    import psycopg

    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.Error as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL at {POSTGRES_URL} is unreachable: {exc}", pytrace=False)
        pytest.skip(f"PostgreSQL at {POSTGRES_URL} is unreachable: {exc}")
    with (
        django_db_blocker.unblock(),
        database_alias("restarted", dj_database_url.parse(POSTGRES_URL, conn_max_age=600)) as alias,
    ):
        yield alias


def backend_pid(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def terminate(pid: int) -> None:
    """What a PostgreSQL restart does to every connection: the server ends it."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, connect_timeout=5, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_connection_the_server_ended_is_closed_and_the_next_query_reconnects(postgres):
    first = backend_pid(postgres)
    terminate(first)
    with pytest.raises(OperationalError):
        backend_pid(postgres)
    with pytest.raises(OperationalError):  # what every later query got before
        backend_pid(postgres)

    close_broken_connections()
    assert connections[postgres].connection is None
    assert backend_pid(postgres) != first


def test_a_connection_that_failed_but_still_answers_is_kept(postgres):
    first = backend_pid(postgres)
    with pytest.raises(Exception), connections[postgres].cursor() as cursor:  # noqa: B017 (any query error)
        cursor.execute("SELECT * FROM no_such_table_here")
    assert connections[postgres].errors_occurred

    close_broken_connections()
    assert backend_pid(postgres) == first
    assert not connections[postgres].errors_occurred


def test_nothing_is_closed_when_nothing_failed(postgres):
    first = backend_pid(postgres)
    close_broken_connections()
    assert backend_pid(postgres) == first


async def test_a_sync_tool_that_met_a_restarted_database_leaves_a_new_connection_for_the_next(
    postgres,
):
    from mcp_django.registry.functions import acall

    def tool() -> int:
        return backend_pid(postgres)

    first = await acall(tool, {})
    terminate(first)
    with pytest.raises(OperationalError):
        await acall(tool, {})
    assert await acall(tool, {}) != first
