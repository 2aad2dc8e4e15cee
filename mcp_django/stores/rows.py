"""Plain-SQL writes for the hot paths: many rows in one INSERT, a few fields in one UPDATE.

The event log, the session rows, the running requests and the audit trail write through these
instead of the ORM's query compiler (bench/profile.py found it most of their cost).
"""

from __future__ import annotations

import functools
import math
import operator
import re
import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import orjson
from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.backends.base.operations import BaseDatabaseOperations


def insert_rows(model: type[models.Model], rows: list[dict[str, Any]]) -> None:
    """INSERT ``rows`` (field values by attname; missing ones take their default; other keys are
    ignored) in one transaction, as few statements as the database allows (a lone row outside
    any transaction: one autocommitted INSERT). For the hot paths (every streamed event, every
    audited call): bulk_create builds a model instance per row and goes through the whole query
    compiler, which bench/profile.py found to be most of the cost. Values go through each
    field's get_db_prep_save, as bulk_create's would; no signals are sent, as bulk_create sends
    none."""
    if not rows:
        return
    alias = router.db_for_write(model)
    connection = connections[alias]
    plan = _plan(
        model,
        connection.vendor,
        model._meta.pk is not None and model._meta.pk.attname in rows[0],
        settings.USE_TZ,
    )
    if len(rows) == 1 and connection.get_autocommit():
        # One statement is atomic by itself: BEGIN, COMMIT and atomic()'s bookkeeping around it
        # were 8 % of a streamed call's CPU (bench/profile.py). Inside a transaction the block
        # stays, as the savepoint callers that catch IntegrityError rely on.
        with connection.cursor() as cursor:
            cursor.execute(
                plan.sql(connection), plan.values(rows[0], connection, _moments(connection))
            )
        return
    adapt = _moments(connection)
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        _insert(cursor, connection, plan, [plan.values(row, connection, adapt) for row in rows])


def prepare_row(model: type[models.Model], row: dict[str, Any]) -> list[Any]:
    """``row`` (without its primary key) as :func:`insert_values` writes it, made now. It runs
    no query, so any thread may make it: the audit trail makes each call's row on the event
    loop, a few microseconds at a time, and leaves its writer's thread only the INSERT (the
    writer's Python work, done in stretches while the loop waited for the GIL, made the p99
    of tools/call, bench/)."""
    plan, connection, adapt = _preparer(model, router.db_for_write(model), settings.USE_TZ)
    return plan.values(row, connection, adapt)


@functools.lru_cache(maxsize=16)
def _preparer(
    model: type[models.Model], alias: str, use_tz: bool
) -> tuple[_Plan, Any, Callable[[datetime], Any]]:
    """What :func:`prepare_row` needs for one model, database and USE_TZ, worked out once: the
    plan, a connection object, and how it takes an aware datetime. The connection never
    connects: it only says how the database takes dates and JSON. ``connections[alias]`` on
    the event loop makes a new one in each asyncio context: 9 us, and 60 us of a tools/call's
    CPU at concurrency 1 (bench/, same run)."""
    connection = connections.create_connection(alias)
    return _plan(model, connection.vendor, False, use_tz), connection, _moments(connection)


class RowTemplate:
    """Rows of ``model`` that share most of their values, made as :func:`prepare_row` makes
    them: the shared values prepared once, from a first ``row``, and per row only those of
    ``varying`` (attnames), given in that order. For the audit trail, whose rows differ from the
    caller's previous call of the same tool in a handful of columns: a row from the template
    costs a third of a row prepared whole."""

    __slots__ = ("_adapt", "_base", "_columns", "_connection")

    def __init__(self, model: type[models.Model], row: dict[str, Any], varying: tuple[str, ...]):
        plan, self._connection, self._adapt = _preparer(
            model, router.db_for_write(model), settings.USE_TZ
        )
        self._base = plan.values(row, self._connection, self._adapt)
        self._columns = [
            (n, plan.plain[n], plan.fields[n], plan.moments[n])
            for n in map(plan.attnames.index, varying)
        ]

    def make(self, values: tuple[Any, ...]) -> list[Any]:
        """A row: the shared values, and ``values`` for the varying columns."""
        row = self._base.copy()
        connection, adapt = self._connection, self._adapt
        for (n, same, field, moment), value in zip(self._columns, values, strict=True):
            row[n] = (
                value if type(value) in same else _adapted(value, field, moment, connection, adapt)
            )
        return row


def column(model: type[models.Model], attname: str) -> int:
    """Where the value of ``attname`` is in a row made by :func:`prepare_row`."""
    return _plan(model, "", False, settings.USE_TZ).attnames.index(attname)


def insert_values(model: type[models.Model], rows: list[list[Any]]) -> None:
    """INSERT rows made by :func:`prepare_row`, in one transaction (see :func:`insert_rows`)."""
    if not rows:
        return
    alias = router.db_for_write(model)
    connection = connections[alias]
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        _insert(cursor, connection, _plan(model, connection.vendor, False, settings.USE_TZ), rows)


def _insert(cursor: Any, connection: Any, plan: _Plan, rows: list[list[Any]]) -> None:
    if connection.vendor == "sqlite" and connection.features.supports_json_field:
        # On SQLite the rows go as one JSON array, one parameter, and SQLite takes them apart
        # without the GIL. Bound one by one, sqlite3 held it for each of a batch's thousands
        # of parameters while the event loop waited. Rows with a value JSON cannot carry
        # exactly (bytes, a NUL, a non-finite float, a 65-bit integer) are bound.
        as_json = _json_rows(plan, rows)
        if as_json is not None:
            text, shared = as_json
            cursor.execute(plan.json_sql(connection, shared), [rows[0][n] for n in shared] + [text])
            return
    # As many rows per statement as the database takes parameters (all of them on PostgreSQL),
    # not executemany: sqlite3 lets go of the GIL and takes it back around every row it steps,
    # and the event loop, wanting it too, paid for each handover.
    size = _rows_per_statement(connection, plan, rows)
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        cursor.execute(
            plan.sql(connection, len(chunk)), [value for values in chunk for value in values]
        )


def _json_rows(plan: _Plan, rows: list[list[Any]]) -> tuple[str, tuple[int, ...]] | None:
    """``rows`` as one JSON array of arrays of the values that differ between them, and the
    columns whose value every row shares (bound once: SQLite parses a row's JSON again for
    each value it extracts, and that parsing was most of an audit batch's INSERT, where most
    columns hold the same site, transport, revision or empty error); None when a value would
    not come back the same."""
    columns = list(zip(*rows, strict=True))
    shared = tuple(n for n, values in enumerate(columns) if _alike(values)) if len(rows) > 1 else ()
    if len(shared) == len(columns):
        shared = shared[:-1]  # one value at least comes from the JSON, which makes the rows
    varying = [values for n, values in enumerate(columns) if n not in shared]
    for index in plan.numbers:
        if index in shared:
            continue  # bound as it is
        for value in columns[index]:
            if (type(value) is float and not math.isfinite(value)) or (
                type(value) is int and not -_INT64 <= value < _INT64
            ):
                return None
    try:
        # Dates and times must not become orjson's ISO text (Django's SQLite writes its own);
        # bytes, Decimal and other objects raise, and go the bound way.
        text = orjson.dumps(
            list(zip(*varying, strict=True)),
            option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS,
        )
    except orjson.JSONEncodeError:
        return None
    if b"\\u0000" in text and _NUL.search(text):
        return None  # json_extract ends a text at a NUL
    return text.decode(), shared


def _alike(values: tuple[Any, ...]) -> bool:
    """Whether every value is the first one, of the same type (1, 1.0 and True are equal in
    Python, not in a column)."""
    return values.count(values[0]) == len(values) and len(set(map(type, values))) == 1


_INT64 = 2**63
# A NUL in JSON text: "\u0000" after an even number of backslashes (an odd one escapes the first).
_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def _rows_per_statement(connection: Any, plan: _Plan, rows: list[list[Any]]) -> int:
    size = int(connection.ops.bulk_batch_size(plan.fields, rows))
    if connection.vendor == "sqlite":
        # Django assumes SQLite's old limit of 999 parameters (52 audit rows a statement); since
        # 3.32 it is 32,766 unless the build lowers it, so ask the connection (Python 3.11+).
        getlimit = getattr(connection.connection, "getlimit", None)
        if getlimit is not None and plan.fields:
            size = max(
                size, int(getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)) // len(plan.fields)
            )
    return max(1, size)


class _Plan:
    """How the rows of one model become INSERT parameters, worked out once: which columns, and
    which values of each go to the database as they are (:data:`_PLAIN_TYPES`). Per row that
    leaves one C-speed lookup of every value and a type test each; the generic per-value work
    it replaced was a third of the audit writer's cost (bench/profile.py)."""

    def __init__(self, model: type[models.Model], with_pk: bool, use_tz: bool) -> None:
        self.model = model
        self.fields = [
            f
            for f in model._meta.concrete_fields
            if f.column and not (f.primary_key and not with_pk)
        ]
        self.attnames = [f.attname for f in self.fields]
        self._get = operator.itemgetter(*self.attnames)
        self.plain = [_PLAIN_TYPES.get(type(_target(f)), ()) for f in self.fields]
        # An aware datetime for a DateTimeField is what its get_prep_value returns unchanged.
        self.moments = [type(f) is models.DateTimeField and use_tz for f in self.fields]
        # The columns whose values may be numbers JSON would not carry exactly (see _json_rows).
        self.numbers = [
            n
            for n, f in enumerate(self.fields)
            if isinstance(_target(f), (models.IntegerField, models.FloatField))
        ]
        self._sql: dict[tuple[str, int | tuple[int, ...], str], str] = {}

    def sql(self, connection: Any, rows: int = 1) -> str:
        """The INSERT of ``rows`` rows (made once per database, count and placeholder)."""
        # SQLite's driver takes "?" placeholders, and Django's SQLite cursor rewrites every "%s"
        # into one with a regular expression: 6.5 us per audit row, as a 52-row INSERT has 988
        # of them. Written with "?", the statement passes through that rewrite unchanged. Not
        # while queries are logged (DEBUG, assertNumQueries): the log puts the parameters into
        # the SQL with "%", which wants "%s".
        mark = "?" if connection.vendor == "sqlite" and not connection.queries_logged else "%s"
        key = (connection.alias, rows, mark)
        sql = self._sql.get(key)
        if sql is None:
            quote = connection.ops.quote_name
            one = "({})".format(", ".join([mark] * len(self.fields)))
            sql = self._remember(
                key,
                "INSERT INTO {} ({}) VALUES {}".format(
                    quote(self.model._meta.db_table),
                    ", ".join(quote(str(f.column)) for f in self.fields),
                    ", ".join([one] * rows),
                ),
            )
        return sql

    def json_sql(self, connection: Any, shared: tuple[int, ...] = ()) -> str:
        """The INSERT of the rows of one JSON array of arrays (SQLite's json_each), in order: the
        columns in ``shared`` take one bound value each, the others their row's next value."""
        mark = "?" if not connection.queries_logged else "%s"
        key = (connection.alias, shared, mark)
        sql = self._sql.get(key)
        if sql is None:
            quote = connection.ops.quote_name
            varying = iter(range(len(self.fields)))
            sql = self._remember(
                key,
                "INSERT INTO {} ({}) SELECT {} FROM json_each({}) ORDER BY key".format(
                    quote(self.model._meta.db_table),
                    ", ".join(quote(str(f.column)) for f in self.fields),
                    ", ".join(
                        mark if n in shared else f"json_extract(value, '$[{next(varying)}]')"
                        for n in range(len(self.fields))
                    ),
                    mark,
                ),
            )
        return sql

    def _remember(self, key: tuple[str, int | tuple[int, ...], str], sql: str) -> str:
        # Row counts are bounded by the batch size, the columns a batch shares by the fields (a
        # handful in practice), databases by the settings: the bound is for what is unforeseen.
        if len(self._sql) >= 1000:
            self._sql.clear()
        self._sql[key] = sql
        return sql

    def values(
        self, row: dict[str, Any], connection: Any, adapt: Callable[[datetime], Any]
    ) -> list[Any]:
        """``row``'s values as the INSERT takes them; ``adapt`` is :func:`_moments` of
        ``connection``."""
        try:
            given = self._get(row)
        except KeyError:  # a field left to its default
            given = self._get(
                {
                    **{
                        name: f.get_default()
                        for name, f in zip(self.attnames, self.fields, strict=True)
                        if name not in row
                    },
                    **row,
                }
            )
        return [
            value if type(value) in same else _adapted(value, f, moment, connection, adapt)
            for value, same, f, moment in zip(
                given, self.plain, self.fields, self.moments, strict=True
            )
        ]


def _adapted(
    value: Any, field: Any, moment: bool, connection: Any, adapt: Callable[[datetime], Any]
) -> Any:
    """``value`` of ``field`` as the INSERT takes it, when not as it is: an aware datetime of a
    DateTimeField (``moment``) through ``adapt``, anything else through the field."""
    if moment and type(value) is datetime and value.tzinfo is not None:
        return adapt(value)
    return _prepare(field, value, connection)


def _moments(connection: Any) -> Callable[[datetime], Any]:
    """How ``connection`` takes an aware datetime: its operations' adapt_datetimefield_value,
    or on SQLite with USE_TZ and no TIME_ZONE of its own (UTC, naive, as text) the same done
    directly, which was a quarter of the audit row's making."""
    if (
        connection.vendor == "sqlite"
        and settings.USE_TZ
        and connection.settings_dict.get("TIME_ZONE") is None
    ):
        return _utc_text
    return connection.ops.adapt_datetimefield_value  # type: ignore[no-any-return]


def _utc_text(value: datetime) -> Any:
    """SQLite's adapt_datetimefield_value under :func:`_naive_utc`: the value in UTC, naive, as
    text."""
    if value.tzinfo is not timezone.utc:
        value = value.astimezone(timezone.utc)
    return str(value.replace(tzinfo=None))


@functools.lru_cache(maxsize=64)
def _plan(model: type[models.Model], vendor: str, with_pk: bool, use_tz: bool) -> _Plan:
    return _Plan(model, with_pk, use_tz)


def _prepare(field: Any, value: Any, connection: Any) -> Any:
    if type(value) is RawJSON:
        return _json_param(field, value, connection)
    return field.get_db_prep_save(value, connection)


def update_row(model: type[models.Model], pk: Any, values: dict[str, Any]) -> int:
    """``model.objects.filter(pk=pk).update(**values)`` for plain values, as one prepared UPDATE;
    the number of rows changed. For the hot paths (every session set-up marks its session
    initialized): the query compiler behind QuerySet.update was 12 % of a session set-up
    (bench/profile.py). Values go through each field's get_db_prep_save, as update's would;
    like update, it sends no signals."""
    alias = router.db_for_write(model)
    connection = connections[alias]
    quote = connection.ops.quote_name
    meta = model._meta
    fields: list[Any] = [
        meta.get_field(name) for name in values
    ]  # concrete fields, by name or attname
    assert meta.pk is not None
    sql = "UPDATE {} SET {} WHERE {} = %s".format(
        quote(meta.db_table),
        ", ".join(f"{quote(str(f.column))} = %s" for f in fields),
        quote(str(meta.pk.column)),
    )
    params = [
        f.get_db_prep_save(values[name], connection) for name, f in zip(values, fields, strict=True)
    ]
    params.append(meta.pk.get_db_prep_value(pk, connection))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


# Values that these fields' get_db_prep_save returns unchanged: None, a string for a text
# column, an int for an integer one, a float for a float one. Skipping the call for them halved
# insert_rows' cost; anything else (datetimes, JSON) still goes through the field. Exact
# classes: a subclass may prepare its values (encrypt them, say).
_PLAIN_TYPES: dict[type, tuple[type, ...]] = {
    **dict.fromkeys((models.CharField, models.TextField), (str, type(None))),
    **dict.fromkeys(
        (
            models.IntegerField,
            models.BigIntegerField,
            models.SmallIntegerField,
            models.PositiveIntegerField,
            models.PositiveBigIntegerField,
            models.PositiveSmallIntegerField,
            models.AutoField,
            models.BigAutoField,
        ),
        (int, type(None)),
    ),
    models.BooleanField: (bool, type(None)),
    models.FloatField: (float, type(None)),
    models.DateTimeField: (type(None),),
}


class RawJSON(str):
    """A JSONField's value already serialised (JSON text), for :func:`insert_rows`: it is written
    as it is, not serialised again (the audit trail serialises a call's arguments to measure
    them, and keeps that text)."""

    __slots__ = ()


def _as_is(text: str) -> str:
    return text


def _json_param(field: Any, value: RawJSON, connection: Any) -> Any:
    """What ``field.get_db_prep_save`` makes of the JSON ``value`` stands for, without parsing
    it."""
    if not isinstance(field, models.JSONField):
        raise TypeError(f"RawJSON is for a JSONField, not {field!r}")
    adapt = type(connection.ops).adapt_json_value
    if adapt is BaseDatabaseOperations.adapt_json_value:
        return str(value)  # the base class writes JSON as text: this text
    if connection.vendor == "postgresql":
        # Optional dependency: psycopg is installed only by projects on PostgreSQL.
        from django.db.backends.postgresql.psycopg_any import Jsonb

        return Jsonb(str(value), dumps=_as_is)
    return field.get_db_prep_save(
        orjson.loads(str(value)), connection
    )  # a backend of its own: its way


def _target(field: Any) -> Any:
    """The field whose values a column holds: a foreign key's target field, else ``field``."""
    while (
        getattr(field, "remote_field", None) is not None
        and getattr(field, "target_field", None) is not None
    ):
        field = field.target_field
    return field
