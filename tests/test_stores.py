"""The stores' plain-SQL writes (insert_rows, update_row) and the session rows they make: the
same rows and values the ORM's create() and update() would."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connections, transaction
from django.db.models.signals import post_save
from django.utils import timezone
from hypothesis import given, settings
from hypothesis.strategies import datetimes, timezones

from mcp_django.models import Event, Session
from mcp_django.stores import (
    InitializedMarks,
    SessionStore,
    initialized_marks,
    insert_rows,
    rows,
    update_row,
)
from tests.fuzzing import examples

pytestmark = pytest.mark.django_db(transaction=True)


def make_session(**overrides: object) -> Session:
    fields = {
        "site_name": "mcp",
        "user_id": None,
        "protocol_version": "2025-11-25",
        "client_info": {"name": "c", "version": "1"},
        "capabilities": {"roots": {}},
    }
    return SessionStore().create(**{**fields, **overrides})  # type: ignore[arg-type]


def test_a_created_session_is_the_row_the_orm_reads_back() -> None:
    user = get_user_model().objects.create_user("reader")
    session = make_session(
        user_id=user.pk, client_info={"name": "client ü", "version": "2", "extra": [1, {"a": None}]}
    )
    stored = Session.objects.get(pk=session.pk)
    assert stored.user_id == user.pk
    assert stored.client_name == "client ü" and stored.client_version == "2"
    assert stored.client_info == {"name": "client ü", "version": "2", "extra": [1, {"a": None}]}
    assert stored.client_capabilities == {"roots": {}}
    assert stored.created_at == session.created_at and stored.expires_at == session.expires_at
    assert stored.initialized is False and stored.log_level == "" and stored.terminated_at is None
    # The instance is a saved one: save() updates the row instead of inserting a second.
    assert not session._state.adding and session._state.db == "default"
    session.log_level = "debug"
    session.save()
    assert Session.objects.get(pk=session.pk).log_level == "debug"
    assert Session.objects.count() == 1


def test_a_created_session_sends_no_model_signals() -> None:
    # session_created is the signal to hook (documented): the row is a plain INSERT.
    saved: list[object] = []

    def receiver(sender: object, **kwargs: object) -> None:
        saved.append(kwargs["instance"])

    post_save.connect(receiver, sender=Session)
    try:
        make_session()
    finally:
        post_save.disconnect(receiver, sender=Session)
    assert saved == []


def test_a_session_of_a_user_that_is_not_there_is_refused() -> None:
    with pytest.raises(IntegrityError):
        make_session(user_id=987654)
    assert not Session.objects.exists()


def test_update_row_sets_the_fields_given_and_counts_the_row() -> None:
    session = make_session()
    later = timezone.now() + timedelta(hours=1)
    assert (
        update_row(
            Session,
            session.pk,
            {"initialized": True, "expires_at": later, "client_info": {"x": [1]}},
        )
        == 1
    )
    stored = Session.objects.get(pk=session.pk)
    assert (
        stored.initialized is True
        and stored.expires_at == later
        and stored.client_info == {"x": [1]}
    )
    assert (
        stored.log_level == "" and stored.protocol_version == "2025-11-25"
    )  # the others are left alone
    assert update_row(Session, "no-such-session", {"initialized": True}) == 0


def test_update_row_takes_a_foreign_key_by_attname() -> None:
    user = get_user_model().objects.create_user("owner")
    session = make_session()
    update_row(Session, session.pk, {"user_id": user.pk})
    assert Session.objects.get(pk=session.pk).user_id == user.pk


def test_a_lone_row_inside_a_transaction_stays_in_it() -> None:
    session = make_session()
    row = {
        "session_id": session.pk,
        "stream": "s",
        "seq": 1,
        "payload": "x",
        "closes_stream": False,
        "created_at": timezone.now(),
    }
    with pytest.raises(RuntimeError), transaction.atomic():
        insert_rows(Event, [row])
        raise RuntimeError("rolled back")
    assert not Event.objects.exists()
    # Outside one, the INSERT commits by itself; a duplicate fails alone and leaves it there.
    insert_rows(Event, [row])
    with pytest.raises(IntegrityError):
        insert_rows(Event, [row])
    assert Event.objects.count() == 1


async def test_initialized_marks_are_written_together_off_the_request_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asgiref.sync import sync_to_async

    sessions = [await sync_to_async(make_session)() for _ in range(3)]
    store = SessionStore()
    for session in sessions:
        await store.amark_initialized(session.pk)
    await store.amark_initialized("no-such-session")  # ended meanwhile: nothing to mark, no error
    # Nothing is written on the request's path...
    assert [s async for s in Session.objects.filter(initialized=True)] == []
    await initialized_marks.flush()
    # ...and then all of them at once, with one UPDATE.
    assert {s.pk async for s in Session.objects.filter(initialized=True)} == {
        s.pk for s in sessions
    }
    captured: list[str] = []
    original = InitializedMarks._update

    def counting(session_ids: list[str]) -> None:
        captured.append(",".join(session_ids))
        original(session_ids)

    monkeypatch.setattr(InitializedMarks, "_update", staticmethod(counting))
    await store.amark_initialized(sessions[0].pk)
    await store.amark_initialized(sessions[1].pk)
    await initialized_marks.flush()
    assert captured == [",".join(sorted([sessions[0].pk, sessions[1].pk]))]


# --- JSON already serialised (stores.RawJSON): the audit trail's arguments --------------------------

RAW = '{"a":[1,{"b":null}],"é":"ü","n":1.5}'


def test_raw_json_is_written_as_the_json_it_holds_not_as_a_string() -> None:
    from mcp_django.models import ToolCall
    from mcp_django.stores import RawJSON

    row = {
        "started_at": timezone.now(),
        "tool_name": "t",
        "outcome": "ok",
        "arguments": RawJSON(RAW),
    }
    insert_rows(ToolCall, [row, {**row, "tool_name": "u", "arguments": {"plain": "dict"}}])
    stored = dict(ToolCall.objects.values_list("tool_name", "arguments"))
    assert stored == {"t": {"a": [1, {"b": None}], "é": "ü", "n": 1.5}, "u": {"plain": "dict"}}
    # JSON lookups see an object, not a string holding one.
    assert list(
        ToolCall.objects.filter(arguments__a__0=1, arguments__n=1.5).values_list(
            "tool_name", flat=True
        )
    ) == ["t"]


def test_raw_json_reaches_postgresql_as_jsonb() -> None:
    """On PostgreSQL the text goes as jsonb (psycopg's Jsonb, told not to serialise it again)."""
    import os
    from urllib.parse import urlsplit

    from django.db.utils import ConnectionHandler

    from mcp_django.models import ToolCall
    from mcp_django.stores.rows import RawJSON, _json_param
    from tests.multiprocess.servers import POSTGRES_URL, services_problem

    problem = services_problem()
    if problem is not None and "PostgreSQL" in problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem)
    url = urlsplit(POSTGRES_URL)
    handler = ConnectionHandler(
        {
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": url.path.lstrip("/"),
                "USER": url.username or "",
                "PASSWORD": url.password or "",
                "HOST": url.hostname or "",
                "PORT": url.port or 5432,
            }
        }
    )
    connection = handler["default"]
    try:
        param = _json_param(ToolCall._meta.get_field("arguments"), RawJSON(RAW), connection)
        with connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE raw_json (j jsonb)")
            cursor.execute("INSERT INTO raw_json (j) VALUES (%s)", [param])
            cursor.execute("SELECT jsonb_typeof(j), j = %s::jsonb, j->>'é' FROM raw_json", [RAW])
            assert cursor.fetchall() == [("object", True, "ü")]
    finally:
        connection.close()


def test_insert_rows_writes_many_rows_in_statements_of_bulk_batch_size_with_defaults_and_extra_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db import connection

    from mcp_django.models import ToolCall
    from mcp_django.stores import rows as rows_module

    monkeypatch.setattr(
        rows_module, "_json_rows", lambda plan, rows: None
    )  # bound, as on PostgreSQL
    statements: list[str] = []
    rows = [
        {
            "started_at": timezone.now(),
            "tool_name": f"t{n}",
            "outcome": "ok",
            "arguments": None,
            "_not_a_column": n,
        }
        for n in range(130)
    ]
    size = connection.ops.bulk_batch_size(
        [f for f in ToolCall._meta.concrete_fields if not f.primary_key], rows
    )
    with connection.execute_wrapper(
        lambda execute, sql, params, many, context: (
            statements.append(sql) or execute(sql, params, many, context)
        )
    ):
        insert_rows(ToolCall, rows)
    inserts = [sql for sql in statements if sql.startswith("INSERT")]
    if _takes_a_batch_in_one_statement(connection):
        assert len(inserts) == 1
    else:
        assert len(inserts) == -(
            -len(rows) // size
        )  # one per bulk_batch_size rows, not one per row
    assert sorted(ToolCall.objects.values_list("tool_name", flat=True)) == sorted(
        f"t{n}" for n in range(130)
    )
    assert set(ToolCall.objects.values_list("site_name", "transport", "error")) == {
        ("mcp", "", "")
    }  # the defaults


def _takes_a_batch_in_one_statement(connection: Any) -> bool:
    """PostgreSQL always; SQLite where Python can read its parameter limit (3.11+)."""
    return connection.vendor != "sqlite" or hasattr(connection.connection, "getlimit")


def test_insert_rows_on_sqlite_writes_as_many_rows_per_statement_as_the_connection_takes_parameters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Django assumes SQLite's old limit of 999 parameters: 52 audit rows a statement, four
    # statements a batch, and the event loop waited for the GIL between them (the p99 at
    # concurrency 1, bench/). Modern SQLite takes 32,766; a build that lowers it is obeyed.
    import sqlite3

    from django.db import connection

    from mcp_django.models import ToolCall
    from mcp_django.stores import rows as rows_module

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's parameter limit")
    monkeypatch.setattr(
        rows_module, "_json_rows", lambda plan, rows: None
    )  # rows JSON cannot carry are bound
    connection.ensure_connection()
    raw = connection.connection
    if not hasattr(raw, "getlimit"):
        pytest.skip("Python reads SQLite's limits from 3.11 on")
    columns = len([f for f in ToolCall._meta.concrete_fields if not f.primary_key])
    rows = [
        {"started_at": timezone.now(), "tool_name": f"t{n}", "outcome": "ok", "arguments": None}
        for n in range(250)
    ]
    statements: list[int] = []
    original = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    try:
        for limit in (original, 100 * columns):
            raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
            statements.clear()
            with connection.execute_wrapper(
                lambda execute, sql, params, many, context: (
                    statements.append(len(params or ())) or execute(sql, params, many, context)
                )
            ):
                insert_rows(ToolCall, rows)
            inserts = [count // columns for count in statements if count >= columns]
            assert inserts == ([250] if limit == original else [100, 100, 50])
    finally:
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, original)
    assert ToolCall.objects.count() == 500


@pytest.mark.parametrize("as_json", [True, False], ids=["one-json-parameter", "bound-values"])
@pytest.mark.parametrize("logged", [False, True], ids=["queries-not-logged", "queries-logged"])
def test_insert_rows_on_sqlite_writes_qmark_placeholders_unless_queries_are_logged(
    logged: bool, as_json: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Django's SQLite cursor rewrites each "%s" with a regular expression (6.5 us per audit row);
    # "?" passes through it. Logged queries need "%s": the log puts the parameters in with "%".
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mcp_django.models import ToolCall
    from mcp_django.stores import rows as rows_module

    if not as_json:
        monkeypatch.setattr(rows_module, "_json_rows", lambda plan, rows: None)

    if connection.vendor != "sqlite":
        pytest.skip("the qmark placeholders are SQLite's")
    statements: list[str] = []
    rows = [
        {
            "started_at": timezone.now(),
            "tool_name": f"t{n}",
            "outcome": "ok",
            "arguments": {"n": n, "s": "50%s"},
        }
        for n in range(60)
    ]
    with CaptureQueriesContext(connection) if logged else transaction.atomic() as captured:
        with connection.execute_wrapper(
            lambda execute, sql, params, many, context: (
                statements.append(sql) or execute(sql, params, many, context)
            )
        ):
            insert_rows(ToolCall, rows)
            insert_rows(ToolCall, rows[:1])
    inserts = [sql for sql in statements if sql.startswith("INSERT")]
    size = connection.ops.bulk_batch_size(
        [f for f in ToolCall._meta.concrete_fields if not f.primary_key], rows
    )
    # The 60 in one statement (or in statements of bulk_batch_size), then the one.
    assert (
        len(inserts)
        == (1 if as_json or _takes_a_batch_in_one_statement(connection) else -(-len(rows) // size))
        + 1
    )
    assert all(("json_each" in sql) is as_json for sql in inserts[:-1])
    assert all(("?" in sql) is not logged and ("%s" in sql) is logged for sql in inserts)
    if logged:
        assert any(
            "50%s" in query["sql"] for query in captured.captured_queries
        )  # the log has the values
    assert ToolCall.objects.count() == 61
    assert ToolCall.objects.get(tool_name="t59", arguments__n=59).arguments == {
        "n": 59,
        "s": "50%s",
    }


def _stored_toolcalls() -> list[tuple[Any, ...]]:
    """Every ToolCall column as SQLite holds it (its type and value), in id order, without the id."""
    from django.db import connection

    from mcp_django.models import ToolCall

    columns = [f.column for f in ToolCall._meta.concrete_fields if not f.primary_key]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT {} FROM mcp_django_toolcall ORDER BY id".format(
                ", ".join(f"typeof({c}), {c}" for c in columns)
            )
        )
        return cursor.fetchall()


def _sqlite_only() -> None:
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("the JSON array of rows is SQLite's")


def test_insert_rows_on_sqlite_sends_the_rows_as_one_json_parameter_and_stores_what_the_driver_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from mcp_django.models import ToolCall
    from mcp_django.stores import RawJSON
    from mcp_django.stores import rows as rows_module

    _sqlite_only()
    user = get_user_model().objects.create(username="writer")
    tricky = [
        '{"a": 1}',
        "null",
        "123",
        "[1, 2]",
        "é ü 😀",
        "'; DROP TABLE x; --",
        "50%s",
        "",
        "\\u0000",
        "tab\tnew\nline",
    ]
    rows = [
        {
            "started_at": timezone.now(),
            "tool_name": text,
            "outcome": ToolCall.Outcome.OK,
            "username": text,
            "error": text[::-1],
            "arguments": RawJSON(RAW)
            if n % 3 == 0
            else ({"n": n, "s": text} if n % 3 == 1 else None),
            "error_code": [None, -32602, 0, 2**62][n % 4],
            "duration_ms": [0.1, 1e300, 0.0, -2.5, 3][n % 5],
            "user_id": user.pk if n % 2 else None,
        }
        for n, text in enumerate(
            tricky * 7
        )  # 70: more than a statement of bound values held before (52)
    ]
    calls: list[tuple[str, int]] = []
    with connection.execute_wrapper(
        lambda execute, sql, params, many, context: (
            calls.append((sql, len(params or ()))) or execute(sql, params, many, context)
        )
    ):
        insert_rows(ToolCall, [dict(row) for row in rows])
    inserts = [(sql, count) for sql, count in calls if sql.startswith("INSERT")]
    through_json = _stored_toolcalls()
    # One statement: the JSON of the rows, and one value for each column every row shares.
    shared = [
        n
        for n in range(0, len(through_json[0]), 2)
        if len({row[n : n + 2] for row in through_json}) == 1
    ]
    assert shared and [("json_each" in sql, count) for sql, count in inserts] == [
        (True, 1 + len(shared))
    ]
    assert [row[2 * 9 + 1] for row in through_json] == [
        row["tool_name"] for row in rows
    ]  # in order

    ToolCall.objects.all().delete()
    monkeypatch.setattr(
        rows_module, "_json_rows", lambda plan, rows: None
    )  # the driver binds every value
    insert_rows(ToolCall, [dict(row) for row in rows])
    assert _stored_toolcalls() == through_json
    # And the ORM reads them back as it wrote them.
    assert [c.arguments for c in ToolCall.objects.order_by("id")][:3] == [
        orjson.loads(RAW),
        {"n": 1, "s": "null"},
        None,
    ]


@pytest.mark.parametrize(
    "values",
    [
        {"duration_ms": [1, 1.0, 1]},  # equal in Python, an integer and a real in the column
        {"error_code": [1, True, 1]},
        {
            "tool_name": ["same", "same", "same"],
            "duration_ms": [2.5, 2.5, 2.5],
        },  # every column shared
    ],
    ids=["int-and-float", "int-and-bool", "identical-rows"],
)
def test_insert_rows_on_sqlite_binds_a_shared_column_once_and_stores_what_the_driver_would(
    values: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection

    from mcp_django.models import ToolCall
    from mcp_django.stores import rows as rows_module

    _sqlite_only()
    moment = timezone.now()
    rows = [
        {"started_at": moment, "tool_name": "t", "outcome": "ok", "arguments": None}
        for _ in range(3)
    ]
    for name, column in values.items():
        for row, value in zip(rows, column, strict=True):
            row[name] = value
    calls: list[str] = []
    with connection.execute_wrapper(
        lambda execute, sql, params, many, context: (
            calls.append(sql) or execute(sql, params, many, context)
        )
    ):
        insert_rows(ToolCall, [dict(row) for row in rows])
    assert [("json_each" in sql) for sql in calls if sql.startswith("INSERT")] == [True]
    through_json = _stored_toolcalls()
    assert len(through_json) == 3

    ToolCall.objects.all().delete()
    monkeypatch.setattr(
        rows_module, "_json_rows", lambda plan, rows: None
    )  # the driver binds every value
    insert_rows(ToolCall, [dict(row) for row in rows])
    assert _stored_toolcalls() == through_json


@pytest.mark.parametrize(
    "odd",
    [{"error": "nul \x00 inside"}, {"duration_ms": float("inf")}, {"error_code": 2**63}],
    ids=["nul", "infinity", "65-bit"],
)
def test_insert_rows_on_sqlite_binds_the_rows_when_json_would_change_a_value(
    odd: dict[str, Any],
) -> None:
    from django.db import connection

    from mcp_django.models import ToolCall

    _sqlite_only()
    rows = [
        {"started_at": timezone.now(), "tool_name": f"t{n}", "outcome": "ok", "arguments": None}
        for n in range(3)
    ]
    rows[1].update(odd)
    calls: list[tuple[str, int]] = []
    with connection.execute_wrapper(
        lambda execute, sql, params, many, context: (
            calls.append((sql, len(params or ()))) or execute(sql, params, many, context)
        )
    ):
        try:
            insert_rows(ToolCall, rows)
        except OverflowError:
            # The driver's own refusal of a 65-bit integer, as bulk_create meets it: JSON did
            # not turn it into something else.
            assert "error_code" in odd
            return
    assert [
        ("json_each" in sql, count > 1) for sql, count in calls if sql.startswith("INSERT")
    ] == [(False, True)]
    ((name, value),) = odd.items()
    assert getattr(ToolCall.objects.get(tool_name="t1"), name) == value


async def test_a_group_write_writes_a_lone_item_at_once_and_what_came_meanwhile_together() -> None:
    import asyncio

    from mcp_django.stores import GroupWrite

    groups: list[list[str]] = []

    async def write_many(items: list[str]) -> list[str]:
        groups.append(list(items))
        await asyncio.sleep(0)  # a round trip: the others come meanwhile
        return [item.upper() for item in items]

    writes: GroupWrite[str, str] = GroupWrite(write_many)
    assert await writes.write("alone") == "ALONE"
    results = await asyncio.gather(*(writes.write(f"w{n}") for n in range(4)))
    # The first is written at once, the three that came while it ran in one write after it;
    # each task gets its own item's result.
    assert groups == [["alone"], ["w0"], ["w1", "w2", "w3"]]
    assert results == ["W0", "W1", "W2", "W3"]


async def test_a_group_write_that_fails_fails_only_the_item_that_cannot_be_written() -> None:
    import asyncio

    from mcp_django.stores import GroupWrite

    written: list[str] = []

    async def write_many(items: list[str]) -> None:
        await asyncio.sleep(0)
        if "bad" in items:
            raise IntegrityError("this one cannot be written")
        written.extend(items)

    writes: GroupWrite[str, None] = GroupWrite(write_many)
    results = await asyncio.gather(
        *(writes.write(item) for item in ["w0", "w1", "bad", "w2"]), return_exceptions=True
    )
    assert results[:2] == [None, None] and results[3] is None
    assert isinstance(results[2], IntegrityError)
    assert sorted(written) == ["w0", "w1", "w2"]  # each once: the failed group wrote nothing


async def test_sessions_made_at_once_share_a_write_and_each_is_committed_when_it_is_returned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from asgiref.sync import sync_to_async

    from mcp_django.stores import sessions

    groups: list[int] = []
    insert = sessions._session_writes._write_many

    async def counting(batch: list[Session]) -> None:
        groups.append(len(batch))
        await insert(batch)

    monkeypatch.setattr(sessions._session_writes, "_write_many", counting)
    fields = {
        "site_name": "mcp",
        "user_id": None,
        "protocol_version": "2025-11-25",
        "client_info": {"name": "c", "version": "1"},
        "capabilities": {},
    }
    made = await asyncio.gather(*(SessionStore().acreate(**fields) for _ in range(5)))
    assert groups == [1, 4]
    assert len({s.pk for s in made}) == 5
    stored = await sync_to_async(lambda: set(Session.objects.values_list("pk", flat=True)))()
    assert stored == {s.pk for s in made}
    assert all(not s._state.adding and s._state.db == "default" for s in made)


@settings(max_examples=examples(300), deadline=None)
@given(moment=datetimes(timezones=timezones(), allow_imaginary=False))
def test_a_datetime_made_for_sqlite_directly_is_what_djangos_adapt_makes(moment: datetime) -> None:
    """stores.rows makes SQLite's UTC text itself (SQLite, USE_TZ, no TIME_ZONE of the
    database's own): the same text as the backend's adapt_datetimefield_value, in any zone."""
    connection = connections.create_connection("default")
    if connection.vendor != "sqlite":
        pytest.skip("the direct path is SQLite's")
    adapt = rows._moments(connection)
    assert adapt is rows._utc_text
    assert adapt(moment) == connection.ops.adapt_datetimefield_value(moment)


def test_a_sqlite_database_with_a_time_zone_of_its_own_keeps_djangos_adapt() -> None:
    connection = connections.create_connection("default")
    if connection.vendor != "sqlite":
        pytest.skip("the direct path is SQLite's")
    connection.settings_dict = {**connection.settings_dict, "TIME_ZONE": "Europe/Paris"}
    assert rows._moments(connection) == connection.ops.adapt_datetimefield_value
