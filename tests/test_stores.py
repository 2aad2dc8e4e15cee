"""The stores' plain-SQL writes (insert_rows, update_row) and the session rows they make: the
same rows and values the ORM's create() and update() would."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models.signals import post_save
from django.utils import timezone

from mcp_django.models import Event, Session
from mcp_django.stores import InitializedMarks, SessionStore, initialized_marks, insert_rows, update_row

pytestmark = pytest.mark.django_db(transaction=True)


def make_session(**overrides: object) -> Session:
    fields = {"site_name": "mcp", "user_id": None, "protocol_version": "2025-11-25", "client_info": {"name": "c", "version": "1"}, "capabilities": {"roots": {}}}
    return SessionStore().create(**{**fields, **overrides})  # type: ignore[arg-type]


def test_a_created_session_is_the_row_the_orm_reads_back() -> None:
    user = get_user_model().objects.create_user("reader")
    session = make_session(user_id=user.pk, client_info={"name": "client ü", "version": "2", "extra": [1, {"a": None}]})
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
    assert update_row(Session, session.pk, {"initialized": True, "expires_at": later, "client_info": {"x": [1]}}) == 1
    stored = Session.objects.get(pk=session.pk)
    assert stored.initialized is True and stored.expires_at == later and stored.client_info == {"x": [1]}
    assert stored.log_level == "" and stored.protocol_version == "2025-11-25"  # the others are left alone
    assert update_row(Session, "no-such-session", {"initialized": True}) == 0


def test_update_row_takes_a_foreign_key_by_attname() -> None:
    user = get_user_model().objects.create_user("owner")
    session = make_session()
    update_row(Session, session.pk, {"user_id": user.pk})
    assert Session.objects.get(pk=session.pk).user_id == user.pk


def test_a_lone_row_inside_a_transaction_stays_in_it() -> None:
    session = make_session()
    row = {"session_id": session.pk, "stream": "s", "seq": 1, "payload": "x", "closes_stream": False, "created_at": timezone.now()}
    with pytest.raises(RuntimeError), transaction.atomic():
        insert_rows(Event, [row])
        raise RuntimeError("rolled back")
    assert not Event.objects.exists()
    # Outside one, the INSERT commits by itself; a duplicate fails alone and leaves it there.
    insert_rows(Event, [row])
    with pytest.raises(IntegrityError):
        insert_rows(Event, [row])
    assert Event.objects.count() == 1


async def test_initialized_marks_are_written_together_off_the_request_path(monkeypatch: pytest.MonkeyPatch) -> None:
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
    assert {s.pk async for s in Session.objects.filter(initialized=True)} == {s.pk for s in sessions}
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

    row = {"started_at": timezone.now(), "tool_name": "t", "outcome": "ok", "arguments": RawJSON(RAW)}
    insert_rows(ToolCall, [row, {**row, "tool_name": "u", "arguments": {"plain": "dict"}}])
    stored = dict(ToolCall.objects.values_list("tool_name", "arguments"))
    assert stored == {"t": {"a": [1, {"b": None}], "é": "ü", "n": 1.5}, "u": {"plain": "dict"}}
    # JSON lookups see an object, not a string holding one.
    assert list(ToolCall.objects.filter(arguments__a__0=1, arguments__n=1.5).values_list("tool_name", flat=True)) == ["t"]


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
    handler = ConnectionHandler({"default": {
        "ENGINE": "django.db.backends.postgresql", "NAME": url.path.lstrip("/"), "USER": url.username or "", "PASSWORD": url.password or "",
        "HOST": url.hostname or "", "PORT": url.port or 5432,
    }})
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


def test_insert_rows_writes_many_rows_in_statements_of_bulk_batch_size_with_defaults_and_extra_keys() -> None:
    from django.db import connection

    from mcp_django.models import ToolCall

    statements: list[str] = []
    rows = [
        {"started_at": timezone.now(), "tool_name": f"t{n}", "outcome": "ok", "arguments": None, "_not_a_column": n}
        for n in range(130)
    ]
    size = connection.ops.bulk_batch_size([f for f in ToolCall._meta.concrete_fields if not f.primary_key], rows)
    with connection.execute_wrapper(lambda execute, sql, params, many, context: statements.append(sql) or execute(sql, params, many, context)):
        insert_rows(ToolCall, rows)
    inserts = [sql for sql in statements if sql.startswith("INSERT")]
    assert len(inserts) == -(-len(rows) // size)  # one per bulk_batch_size rows, not one per row
    assert sorted(ToolCall.objects.values_list("tool_name", flat=True)) == sorted(f"t{n}" for n in range(130))
    assert set(ToolCall.objects.values_list("site_name", "transport", "error")) == {("mcp", "", "")}  # the defaults


@pytest.mark.parametrize("logged", [False, True], ids=["queries-not-logged", "queries-logged"])
def test_insert_rows_on_sqlite_writes_qmark_placeholders_unless_queries_are_logged(logged: bool) -> None:
    # Django's SQLite cursor rewrites each "%s" with a regular expression (6.5 us per audit row);
    # "?" passes through it. Logged queries need "%s": the log puts the parameters in with "%".
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mcp_django.models import ToolCall

    if connection.vendor != "sqlite":
        pytest.skip("the qmark placeholders are SQLite's")
    statements: list[str] = []
    rows = [{"started_at": timezone.now(), "tool_name": f"t{n}", "outcome": "ok", "arguments": {"n": n, "s": "50%s"}} for n in range(60)]
    with CaptureQueriesContext(connection) if logged else transaction.atomic() as captured:
        with connection.execute_wrapper(lambda execute, sql, params, many, context: statements.append(sql) or execute(sql, params, many, context)):
            insert_rows(ToolCall, rows)
            insert_rows(ToolCall, rows[:1])
    inserts = [sql for sql in statements if sql.startswith("INSERT")]
    size = connection.ops.bulk_batch_size([f for f in ToolCall._meta.concrete_fields if not f.primary_key], rows)
    assert len(inserts) == -(-len(rows) // size) + 1  # the 60 in statements of bulk_batch_size, then the one
    assert all(("?" in sql) is not logged and ("%s" in sql) is logged for sql in inserts)
    if logged:
        assert any("50%s" in query["sql"] for query in captured.captured_queries)  # the log has the values
    assert ToolCall.objects.count() == 61
    assert ToolCall.objects.get(tool_name="t59", arguments__n=59).arguments == {"n": 59, "s": "50%s"}


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
    results = await asyncio.gather(*(writes.write(item) for item in ["w0", "w1", "bad", "w2"]), return_exceptions=True)
    assert results[:2] == [None, None] and results[3] is None
    assert isinstance(results[2], IntegrityError)
    assert sorted(written) == ["w0", "w1", "w2"]  # each once: the failed group wrote nothing



async def test_sessions_made_at_once_share_a_write_and_each_is_committed_when_it_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from asgiref.sync import sync_to_async

    from mcp_django.stores import sessions

    groups: list[int] = []
    insert = sessions._session_writes._write_many

    async def counting(batch: list[Session]) -> None:
        groups.append(len(batch))
        await insert(batch)

    monkeypatch.setattr(sessions._session_writes, "_write_many", counting)
    fields = {"site_name": "mcp", "user_id": None, "protocol_version": "2025-11-25", "client_info": {"name": "c", "version": "1"}, "capabilities": {}}
    made = await asyncio.gather(*(SessionStore().acreate(**fields) for _ in range(5)))
    assert groups == [1, 4]
    assert len({s.pk for s in made}) == 5
    stored = await sync_to_async(lambda: set(Session.objects.values_list("pk", flat=True)))()
    assert stored == {s.pk for s in made}
    assert all(not s._state.adding and s._state.db == "default" for s in made)
