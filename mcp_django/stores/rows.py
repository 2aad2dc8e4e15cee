"""Plain-SQL writes for the hot paths: many rows in one INSERT, a few fields in one UPDATE.

The event log, the session rows, the running requests and the audit trail write through these
instead of the ORM's query compiler (bench/profile.py found it most of their cost).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.backends.base.operations import BaseDatabaseOperations


def insert_rows(model: type[models.Model], rows: list[dict[str, Any]]) -> None:
    """INSERT ``rows`` (field values by attname; missing ones take their default) with one
    executemany in one transaction (a lone row outside any transaction: one autocommitted INSERT). For the hot paths (every streamed event, every audited call):
    bulk_create builds a model instance per row and goes through the whole query compiler, which
    bench/profile.py found to be most of the cost. Values go through each field's
    get_db_prep_save, as bulk_create's would; no signals are sent, as bulk_create sends none."""
    if not rows:
        return
    alias = router.db_for_write(model)
    connection = connections[alias]
    fields = [f for f in model._meta.concrete_fields if f.column and not (f.primary_key and f.attname not in rows[0])]
    quote = connection.ops.quote_name
    sql = "INSERT INTO {} ({}) VALUES ({})".format(
        quote(model._meta.db_table), ", ".join(quote(str(f.column)) for f in fields), ", ".join(["%s"] * len(fields))
    )
    plain = [_PLAIN_TYPES.get(type(_target(f)), ()) for f in fields]
    # An aware datetime for a DateTimeField is what its get_prep_value returns unchanged.
    moments = [type(f) is models.DateTimeField and settings.USE_TZ for f in fields]
    params = [
        [
            value if type(value) in same
            else connection.ops.adapt_datetimefield_value(value) if moment and type(value) is datetime and value.tzinfo is not None
            else _json_param(f, value, connection) if type(value) is RawJSON
            else f.get_db_prep_save(value, connection)
            for f, same, moment in zip(fields, plain, moments, strict=True)
            for value in (row[f.attname] if f.attname in row else f.get_default(),)
        ]
        for row in rows
    ]
    if len(params) == 1 and connection.get_autocommit():
        # One statement is atomic by itself: BEGIN, COMMIT and atomic()'s bookkeeping around it
        # were 8 % of a streamed call's CPU (bench/profile.py). Inside a transaction the block
        # stays, as the savepoint callers that catch IntegrityError rely on.
        with connection.cursor() as cursor:
            cursor.execute(sql, params[0])
        return
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.executemany(sql, params)


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
    fields: list[Any] = [meta.get_field(name) for name in values]  # concrete fields, by name or attname
    assert meta.pk is not None
    sql = "UPDATE {} SET {} WHERE {} = %s".format(
        quote(meta.db_table), ", ".join(f"{quote(str(f.column))} = %s" for f in fields), quote(str(meta.pk.column))
    )
    params = [f.get_db_prep_save(values[name], connection) for name, f in zip(values, fields, strict=True)]
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
        (models.IntegerField, models.BigIntegerField, models.SmallIntegerField, models.PositiveIntegerField,
         models.PositiveBigIntegerField, models.PositiveSmallIntegerField, models.AutoField, models.BigAutoField),
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
    """What ``field.get_db_prep_save`` makes of the JSON ``value`` stands for, without parsing it."""
    if not isinstance(field, models.JSONField):
        raise TypeError(f"RawJSON is for a JSONField, not {field!r}")
    adapt = type(connection.ops).adapt_json_value
    if adapt is BaseDatabaseOperations.adapt_json_value:
        return str(value)  # the base class writes JSON as text: this text
    if connection.vendor == "postgresql":
        # Optional dependency: psycopg is installed only by projects on PostgreSQL.
        from django.db.backends.postgresql.psycopg_any import Jsonb

        return Jsonb(str(value), dumps=_as_is)
    return field.get_db_prep_save(orjson.loads(str(value)), connection)  # a backend of its own: its way


def _target(field: Any) -> Any:
    """The field whose values a column holds: a foreign key's target field, else ``field``."""
    while getattr(field, "remote_field", None) is not None and getattr(field, "target_field", None) is not None:
        field = field.target_field
    return field
