"""Where sessions and stream events are kept: a backend interface and the database backend.

The transport talks only to these classes, never to the ORM, so a project can swap the event
store (``MCP_DJANGO["EVENT_STORE_CLASS"]``) without touching the request path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, OperationalError, connections, models, router, transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Max
from django.db.models.functions import Length
from django.utils import timezone

from .conf import mcp_settings
from .models import Event, Session
from .signals import request_orphaned, session_changed

logger = logging.getLogger("mcp_django.stores")


@dataclass(slots=True, frozen=True)
class StoredEvent:
    """An event as replayed: its sequence number, exact JSON text, and whether it ends the stream."""

    seq: int
    payload: str
    closes_stream: bool


class BaseEventStore:
    """The event log behind resumable SSE streams.

    Subclasses implement the sync methods; the ``a*`` twins run them off the event loop.
    """

    # -- subclass implementation --------------------------------------------------------

    def append(self, session_id: str, stream: str, payload: str, *, seq: int | None = None, closes_stream: bool = False) -> int:
        """Store one event and return its sequence number (allocated when ``seq`` is None)."""
        raise NotImplementedError("Event stores must implement append(session_id, stream, payload, seq=, closes_stream=)")

    def replay(self, session_id: str, stream: str, after: int) -> list[StoredEvent]:
        """Return the events of one stream of one session after sequence ``after``, in order."""
        raise NotImplementedError("Event stores must implement replay(session_id, stream, after)")

    def last_seq(self, session_id: str, stream: str) -> int:
        """Return the highest sequence number stored on a stream (0 when empty)."""
        raise NotImplementedError("Event stores must implement last_seq(session_id, stream)")

    def clear_expired(self, before: datetime) -> int:
        """Delete events created before ``before``; return how many."""
        raise NotImplementedError("Event stores must implement clear_expired(before)")

    def append_many(self, session_id: str, stream: str, events: list[StoredEvent]) -> None:
        """Store several numbered events of one stream at once (override to batch the writes)."""
        for event in events:
            self.append(session_id, stream, event.payload, seq=event.seq, closes_stream=event.closes_stream)

    def replay_page(self, session_id: str, stream: str, after: int, *, max_events: int, max_bytes: int) -> list[StoredEvent]:
        """Return the next events after ``after``: at most ``max_events``, and at most
        ``max_bytes`` of payload unless the first event alone is larger.

        Resumes read a stream page by page with this. The default reads the whole rest of the
        stream through ``replay`` and cuts it; override it to read only one page.
        """
        return cut_page(self.replay(session_id, stream, after), max_events, max_bytes)

    # -- shouldn't need to override -----------------------------------------------------

    async def aappend_many(self, session_id: str, stream: str, events: list[StoredEvent]) -> None:
        await sync_to_async(self.append_many)(session_id, stream, events)

    async def aappend(self, session_id: str, stream: str, payload: str, *, seq: int | None = None, closes_stream: bool = False) -> int:
        return await sync_to_async(self.append)(session_id, stream, payload, seq=seq, closes_stream=closes_stream)

    async def areplay(self, session_id: str, stream: str, after: int) -> list[StoredEvent]:
        return await sync_to_async(self.replay)(session_id, stream, after)

    async def areplay_page(self, session_id: str, stream: str, after: int, *, max_events: int, max_bytes: int) -> list[StoredEvent]:
        return await sync_to_async(self.replay_page)(session_id, stream, after, max_events=max_events, max_bytes=max_bytes)

    async def areplay_pages(
        self, session_id: str, stream: str, after: int, *, max_events: int, max_bytes: int, until: int | None = None
    ) -> AsyncIterator[list[StoredEvent]]:
        """Yield the events after ``after`` (up to ``until``) page by page, keyset on seq: the
        caller writes each page out before the next one is read."""
        while True:
            page = await self.areplay_page(session_id, stream, after, max_events=max_events, max_bytes=max_bytes)
            if until is not None:
                page = [e for e in page if e.seq < until]
            if not page:
                return
            yield page
            after = page[-1].seq
            if until is not None and after >= until - 1:
                return

    async def alast_seq(self, session_id: str, stream: str) -> int:
        return await sync_to_async(self.last_seq)(session_id, stream)


def cut_page(events: list[StoredEvent], max_events: int, max_bytes: int) -> list[StoredEvent]:
    """The first events of ``events`` within ``max_events`` and ``max_bytes`` (at least one)."""
    total = 0
    for count, event in enumerate(events[:max_events]):
        total += len(event.payload)
        if count and total > max_bytes:
            return events[:count]
    return events[:max_events]


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
        from django.db.backends.postgresql.psycopg_any import Jsonb

        return Jsonb(str(value), dumps=_as_is)
    return field.get_db_prep_save(orjson.loads(str(value)), connection)  # a backend of its own: its way


def _target(field: Any) -> Any:
    """The field whose values a column holds: a foreign key's target field, else ``field``."""
    while getattr(field, "remote_field", None) is not None and getattr(field, "target_field", None) is not None:
        field = field.target_field
    return field


class DatabaseEventStore(BaseEventStore):
    """Events as rows of :class:`~mcp_django.models.Event` in the default database."""

    def append(self, session_id: str, stream: str, payload: str, *, seq: int | None = None, closes_stream: bool = False) -> int:
        if seq is not None:
            # A POST stream has a single writer (the task answering the request): no race.
            Event.objects.create(session_id=session_id, stream=stream, seq=seq, payload=payload, closes_stream=closes_stream)
            return seq
        # Shared streams (the session's GET stream) may be written by several processes at
        # once: take the next number and let the unique constraint settle collisions.
        alias = router.db_for_write(Event)
        for attempt in range(20):
            try:
                with transaction.atomic(using=alias):
                    events = Event.objects.using(alias).filter(session_id=session_id, stream=stream)
                    last = events.aggregate(m=Max("seq"))["m"] or 0
                    Event.objects.using(alias).create(
                        session_id=session_id, stream=stream, seq=last + 1, payload=payload, closes_stream=closes_stream
                    )
                    return last + 1
            except IntegrityError:
                continue
            except OperationalError as exc:
                # SQLite cannot turn this read transaction into a write while another process
                # writes: it fails at once ("database is locked") instead of waiting out the
                # busy timeout. A management command announcing a change next to the server is
                # enough to get there; try again with a fresh snapshot after a short pause.
                if connections[alias].vendor != "sqlite" or "locked" not in str(exc):
                    raise
                time.sleep(min(0.005 * 2**attempt, 0.25))
        raise RuntimeError(f"could not append to stream {stream!r} after 20 attempts")

    def append_many(self, session_id: str, stream: str, events: list[StoredEvent]) -> None:
        now = timezone.now()
        insert_rows(
            Event,
            [{"session_id": session_id, "stream": stream, "seq": e.seq, "payload": e.payload, "closes_stream": e.closes_stream, "created_at": now}
             for e in events],
        )

    def replay(self, session_id: str, stream: str, after: int) -> list[StoredEvent]:
        rows = Event.objects.filter(session_id=session_id, stream=stream, seq__gt=after).order_by("seq")
        return [StoredEvent(seq, payload, closes) for seq, payload, closes in rows.values_list("seq", "payload", "closes_stream")]

    def replay_page(self, session_id: str, stream: str, after: int, *, max_events: int, max_bytes: int) -> list[StoredEvent]:
        rows = Event.objects.filter(session_id=session_id, stream=stream, seq__gt=after).order_by("seq")
        # Sizes first (characters, close enough to bytes for a bound), so that a page of large
        # events never loads more than about max_bytes of payload.
        sizes = list(rows.annotate(size=Length("payload")).values_list("seq", "size")[:max_events])
        if not sizes:
            return []
        total, last = 0, sizes[0][0]
        for seq, size in sizes:
            total += size or 0
            if seq != sizes[0][0] and total > max_bytes:
                break
            last = seq
        page = rows.filter(seq__lte=last).values_list("seq", "payload", "closes_stream")
        return [StoredEvent(seq, payload, closes) for seq, payload, closes in page]

    def last_seq(self, session_id: str, stream: str) -> int:
        return Event.objects.filter(session_id=session_id, stream=stream).aggregate(m=Max("seq"))["m"] or 0

    def clear_expired(self, before: datetime) -> int:
        deleted, _ = Event.objects.filter(created_at__lt=before).delete()
        return deleted


def get_event_store() -> BaseEventStore:
    """Return an instance of the configured event store class."""
    # An import string resolved at run time; checks.py reports one that is no event store.
    store_class: type[BaseEventStore] = mcp_settings.event_store_class
    return store_class()


class SessionCache:
    """Live sessions this process has seen recently, so most requests cost no query.

    Every change to a session (terminate, log level, initialized) drops it here and is
    broadcast to the other processes over the channel layer (``transport.process``); entries
    are re-read at least every ``SESSION_CACHE_SECONDS`` in case a broadcast was missed.

    Bounded three ways (settings): entries expire after ``SESSION_CACHE_SECONDS`` and are
    swept on every put, and the cache holds at most ``SESSION_CACHE_MAX_ENTRIES`` entries and
    ``SESSION_CACHE_MAX_BYTES`` approximate bytes; the least recently loaded go first.
    """

    #: What a Session instance costs besides its client's JSON (measured: ~1.5 KB with its state).
    ENTRY_OVERHEAD = 2048

    def __init__(self, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        # Ordered by load time, oldest first: expiry and eviction both pop from the front.
        self._entries: OrderedDict[str, tuple[Session, float, int]] = OrderedDict()
        self.size = 0

    @property
    def max_entries(self) -> int:
        return self._max_entries if self._max_entries is not None else mcp_settings.session_cache_max_entries

    @property
    def max_bytes(self) -> int:
        return self._max_bytes if self._max_bytes is not None else mcp_settings.session_cache_max_bytes

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def entry_size(cls, session: Session) -> int:
        # Approximate: decoded JSON takes up to ~8x its text in Python objects (measured with
        # tracemalloc on capabilities made of many small objects), plus the instance itself.
        client = orjson.dumps([session.client_info, session.client_capabilities])
        return cls.ENTRY_OVERHEAD + 8 * len(client)

    def get(self, session_id: str) -> Session | None:
        entry = self._entries.get(session_id)
        if entry is None:
            return None
        session, loaded, _ = entry
        if time.monotonic() - loaded > mcp_settings.session_cache_seconds:
            self.drop(session_id)
            return None
        return session

    def put(self, session: Session) -> None:
        ttl = mcp_settings.session_cache_seconds
        if ttl <= 0:
            return
        now = time.monotonic()
        self.drop(session.pk)
        size = self.entry_size(session)
        if size > self.max_bytes:
            return  # larger than the whole cache: read from the database each time
        self._entries[session.pk] = (session, now, size)
        self.size += size
        # Expired entries are at the front (oldest loads first); then evict to the bounds.
        while self._entries:
            _, (_, loaded, _) = next(iter(self._entries.items()))
            if now - loaded <= ttl and len(self._entries) <= self.max_entries and self.size <= self.max_bytes:
                break
            _, (_, _, evicted) = self._entries.popitem(last=False)
            self.size -= evicted

    def drop(self, session_id: str) -> None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self.size -= entry[2]

    def clear(self) -> None:
        self._entries.clear()
        self.size = 0


session_cache = SessionCache()


async def announce_session_changed(session_id: str) -> None:
    """Drop a session from every process's cache: this one at once, the others through the
    ``session_changed`` signal, which the bus broadcasts."""
    session_cache.drop(session_id)
    await session_changed.asend(sender=SessionStore, session_id=session_id)


class SessionStore:
    """Create, load, touch and end :class:`~mcp_django.models.Session` rows."""

    # Touching ``last_active_at`` on every request would be a write per request; a session
    # only needs it to move when it is worth extending the expiry.
    TOUCH_INTERVAL = timedelta(seconds=60)

    def create(
        self, *, site_name: str, user_id: Any, protocol_version: str, client_info: dict[str, Any], capabilities: dict[str, Any],
        transport: str = "streamable-http", client_address: str | None = None,
    ) -> Session:
        now = timezone.now()
        session = Session(
            site_name=site_name,
            user_id=user_id,
            protocol_version=protocol_version,
            transport=transport,
            client_address=(client_address or "")[:64],
            client_name=str(client_info.get("name", ""))[:200],
            client_version=str(client_info.get("version", ""))[:100],
            client_info=client_info,
            client_capabilities=capabilities,
            created_at=now,
            last_active_at=now,
            expires_at=Session.expiry_from(now, mcp_settings.session_ttl),
        )
        # A plain INSERT, not save(): Model.save was 12 % of a session set-up (bench/profile.py).
        # So no pre_save/post_save for sessions; session_created is the signal to hook.
        insert_rows(Session, [{f.attname: getattr(session, f.attname) for f in Session._meta.concrete_fields}])
        session._state.adding = False
        session._state.db = router.db_for_write(Session)
        return session

    @staticmethod
    def _usable(session: Session | None, site_name: str, user_id: Any) -> bool:
        # Unknown, expired, terminated and foreign sessions all fail alike, so callers answer
        # them the same way (404) and nothing tells them apart.
        return session is not None and session.site_name == site_name and session.user_id == user_id and session.is_live()

    def load(self, session_id: str, *, site_name: str, user_id: Any) -> Session | None:
        """Return the live session with that id owned by ``user_id``, or None (always a query)."""
        session = Session.objects.filter(pk=session_id).first()
        if not self._usable(session, site_name, user_id):
            return None
        assert session is not None
        if self._touch_due(session):
            self._touch(session)
        return session

    def _touch_due(self, session: Session) -> bool:
        return timezone.now() - session.last_active_at >= self.TOUCH_INTERVAL

    def _touch(self, session: Session) -> None:
        now = timezone.now()
        session.last_active_at = now
        session.expires_at = Session.expiry_from(now, mcp_settings.session_ttl)
        Session.objects.filter(pk=session.pk).update(last_active_at=now, expires_at=session.expires_at)

    def update(self, session_id: str, **fields: Any) -> None:
        update_row(Session, session_id, fields)

    def terminate(self, session_id: str) -> bool:
        return bool(Session.objects.filter(pk=session_id, terminated_at__isnull=True).update(terminated_at=timezone.now()))

    async def acreate(self, **kwargs: Any) -> Session:
        session = await sync_to_async(self.create)(**kwargs)
        session_cache.put(session)
        return session

    async def aload(self, session_id: str, *, site_name: str, user_id: Any) -> Session | None:
        session = session_cache.get(session_id)
        if session is None:
            session = await sync_to_async(self.load)(session_id, site_name=site_name, user_id=user_id)
            if session is not None:
                session_cache.put(session)
            return session
        if not self._usable(session, site_name, user_id):
            return None
        if self._touch_due(session):
            await sync_to_async(self._touch)(session)
        return session

    async def aupdate(self, session_id: str, **fields: Any) -> None:
        await sync_to_async(self.update)(session_id, **fields)
        await announce_session_changed(session_id)

    async def amark_initialized(self, session_id: str) -> None:
        """Record ``notifications/initialized``, off the request's path (see
        :class:`InitializedMarks`). Not announced to other processes: nothing they decide reads
        the flag (a second initialize is refused on the stored client info), and on every session
        set-up the announcement woke every process (a Redis round trip each)."""
        initialized_marks.add(session_id)

    async def aterminate(self, session_id: str) -> bool:
        terminated = await sync_to_async(self.terminate)(session_id)
        await announce_session_changed(session_id)
        return terminated


class InitializedMarks:
    """Sessions whose ``notifications/initialized`` came and is not written yet.

    They are written in batches, ``WRITE_DELAY`` after the first, with one UPDATE: on every
    session set-up that write was a thread hop and a query of its own, on the request's path
    (bench/profile.py: a quarter of a set-up's CPU). The flag is for operators (the admin): no
    decision reads it, so a process that dies within the delay leaves it unset and nothing else.
    """

    WRITE_DELAY = 0.02

    def __init__(self) -> None:
        self._pending: set[str] = set()
        self._writer: asyncio.Task[None] | None = None

    def add(self, session_id: str) -> None:
        self._pending.add(session_id)
        loop = asyncio.get_running_loop()
        # A writer left on another loop (one that ended: tests run a loop each) never runs.
        if self._writer is None or self._writer.done() or self._writer.get_loop() is not loop:
            self._writer = loop.create_task(self._write())

    async def flush(self) -> None:
        """Wait until every mark made so far on this loop is written (for tests)."""
        while self._writer is not None and not self._writer.done() and self._writer.get_loop() is asyncio.get_running_loop():
            await asyncio.shield(self._writer)

    async def _write(self) -> None:
        await asyncio.sleep(self.WRITE_DELAY)
        while self._pending:
            batch, self._pending = sorted(self._pending), set()
            try:
                await sync_to_async(self._update)(batch)
            except Exception:
                logger.exception("Could not mark %d sessions initialized", len(batch))

    @staticmethod
    def _update(session_ids: list[str]) -> None:
        Session.objects.filter(pk__in=session_ids).update(initialized=True)


initialized_marks = InitializedMarks()


class ServerRequestStore:
    """Pending server-to-client requests: who waits for which answer."""

    def create(self, *, session_id: str, request_id: str, method: str, params: dict[str, Any], channel_name: str) -> None:
        from .models import ServerRequest

        ServerRequest.objects.create(
            session_id=session_id, request_id=request_id, method=method, params=params, channel_name=channel_name
        )

    def answer(self, session_id: str, request_id: str, response: dict[str, Any]) -> str | None:
        """Record the client's answer; return the waiting channel, or None when nobody waits
        (unknown id, another session's id, already answered or timed out)."""
        from .models import ServerRequest

        pending = ServerRequest.objects.filter(session_id=session_id, request_id=request_id, state=ServerRequest.State.PENDING)
        channel = pending.values_list("channel_name", flat=True).first()
        if channel is None:
            return None
        # Only the first answer wins, even when two arrive at two processes at once.
        if not pending.update(state=ServerRequest.State.ANSWERED, response=response, answered_at=timezone.now()):
            return None
        return channel

    def cancel(self, session_id: str, request_id: str) -> None:
        from .models import ServerRequest

        ServerRequest.objects.filter(session_id=session_id, request_id=request_id, state=ServerRequest.State.PENDING).update(
            state=ServerRequest.State.CANCELLED, answered_at=timezone.now()
        )

    async def acreate(self, **kwargs: Any) -> None:
        await sync_to_async(self.create)(**kwargs)

    async def aanswer(self, session_id: str, request_id: str, response: dict[str, Any]) -> str | None:
        return await sync_to_async(self.answer)(session_id, request_id, response)

    async def acancel(self, session_id: str, request_id: str) -> None:
        await sync_to_async(self.cancel)(session_id, request_id)


    def expire_stale(self, ttl_seconds: float) -> int:
        """Mark requests pending longer than ``ttl_seconds`` expired: whoever waited for them
        is gone (its own timeout is shorter), so a late answer finds nobody. Return how many."""
        from .models import ServerRequest

        cutoff = timezone.now() - timedelta(seconds=ttl_seconds)
        return ServerRequest.objects.filter(state=ServerRequest.State.PENDING, created_at__lt=cutoff).update(
            state=ServerRequest.State.EXPIRED, answered_at=timezone.now()
        )

    async def aexpire_stale(self, ttl_seconds: float) -> int:
        return await sync_to_async(self.expire_stale)(ttl_seconds)


#: The error that ends the stream of a request whose process died while answering it.
ORPHAN_MESSAGE = "The server process handling this request stopped; send the request again."


class RunningRequestStore:
    """Which process answers which request over SSE, with a lease the process renews.

    Rows are in the database so that any process (a resume lands anywhere) can tell that the
    process answering a request is gone, and end that request's stream with an error.
    """

    def start(self, *, session_id: str, stream: str, request_id: str, owner: str, lease_seconds: float) -> None:
        from .models import RunningRequest

        fields = {"stream": stream, "owner": owner, "lease_until": timezone.now() + timedelta(seconds=lease_seconds)}
        # One INSERT on the hot path of every streamed request (update_or_create spent a
        # transaction, a SELECT and a savepoint on it: bench/profile.py found it the top cost).
        # A row left by a dead process under the same id is the rare case, taken over.
        try:
            RunningRequest.objects.create(session_id=session_id, request_id=request_id, **fields)
        except IntegrityError:
            RunningRequest.objects.filter(session_id=session_id, request_id=request_id).update(**fields)

    def start_many(self, claims: list[tuple[str, str, str]], *, owner: str, lease_seconds: float) -> None:
        """Claim several requests, each ``(session id, stream, request id)``, with one INSERT; a
        row a dead process left under the same id is taken over."""
        from .models import RunningRequest

        now = timezone.now()
        lease_until = now + timedelta(seconds=lease_seconds)
        rows = [
            {"session_id": session_id, "stream": stream, "request_id": request_id, "owner": owner, "lease_until": lease_until, "created_at": now}
            for session_id, stream, request_id in claims
        ]
        try:
            # Written for every streamed request that outlives the claim delay, so under load
            # for most of them: one plain executemany (bulk_create with update_conflicts cost
            # several times more, bench/profile.py).
            insert_rows(RunningRequest, rows)
        except IntegrityError:
            # A row a dead process left under the same id, or a session deleted meanwhile, fails
            # the whole batch (rare): claim them one by one, taking such rows over.
            for session_id, stream, request_id in claims:
                with contextlib.suppress(IntegrityError):
                    self.start(session_id=session_id, stream=stream, request_id=request_id, owner=owner, lease_seconds=lease_seconds)

    def finish(self, session_id: str, request_id: str) -> None:
        self.finish_many([(session_id, request_id)])

    def finish_many(self, keys: list[tuple[str, str]]) -> None:
        """Drop the claims ``keys`` (session id, request id) of requests that ended.

        One plain DELETE per session: this runs with the response of every streamed request
        that outlived the claim delay, and the ORM's filter().delete() (query building and the
        deletion collector, for a table nothing points to) was 10 % of a streamed call's CPU
        under load (bench/profile.py)."""
        from .models import RunningRequest

        by_session: dict[str, list[str]] = {}
        for session_id, request_id in keys:
            by_session.setdefault(session_id, []).append(request_id)
        alias = router.db_for_write(RunningRequest)
        connection = connections[alias]
        quote = connection.ops.quote_name
        meta = RunningRequest._meta
        table = quote(meta.db_table)
        session_column = quote(str(meta.get_field("session").column))
        request_column = quote(str(meta.get_field("request_id").column))
        with connection.cursor() as cursor:
            for session_id, request_ids in by_session.items():
                marks = ", ".join(["%s"] * len(request_ids))
                cursor.execute(f"DELETE FROM {table} WHERE {session_column} = %s AND {request_column} IN ({marks})", [session_id, *request_ids])

    def renew(self, owner: str, lease_seconds: float) -> int:
        from .models import RunningRequest

        return RunningRequest.objects.filter(owner=owner).update(lease_until=timezone.now() + timedelta(seconds=lease_seconds))

    def close_orphans(
        self, *, session_id: str | None = None, stream: str | None = None, store: BaseEventStore | None = None
    ) -> list[tuple[str, StoredEvent]]:
        """End the streams of requests whose lease lapsed with a -32603 error response each,
        the last one closing the stream; return the events stored, by stream.

        Each row is claimed by deleting it, so two processes sweeping at once never both
        answer the same request.
        """
        from .models import RunningRequest
        from .protocol.errors import InternalError
        from .protocol.jsonrpc import encode, error_message

        store = store or get_event_store()
        lapsed = RunningRequest.objects.filter(lease_until__lt=timezone.now())
        if session_id is not None:
            lapsed = lapsed.filter(session_id=session_id)
        if stream is not None:
            lapsed = lapsed.filter(stream=stream)
        stored: list[tuple[str, StoredEvent]] = []
        for row in list(lapsed.order_by("session_id", "stream", "created_at")):
            if not RunningRequest.objects.filter(pk=row.pk, lease_until__lt=timezone.now()).delete()[0]:
                continue  # renewed or claimed by another process meanwhile
            last = store.last_seq(row.session_id, row.stream)
            if last and any(e.closes_stream for e in store.replay(row.session_id, row.stream, last - 1)):
                continue  # the stream already ended (the row outlived its request)
            closes = not RunningRequest.objects.filter(session_id=row.session_id, stream=row.stream).exists()
            payload = encode(error_message(orjson.loads(row.request_id), InternalError(ORPHAN_MESSAGE))).decode()
            seq = store.append(row.session_id, row.stream, payload, closes_stream=closes)
            stored.append((row.stream, StoredEvent(seq, payload, closes)))
            try:
                request_orphaned.send(sender=RunningRequest, session_id=row.session_id, request_id=row.request_id)
            except Exception:
                # A project's receiver must not stop the sweep of the other requests.
                logger.exception("A receiver of request_orphaned failed")
        return stored

    async def astart(self, **kwargs: Any) -> None:
        await sync_to_async(self.start)(**kwargs)

    async def afinish(self, session_id: str, request_id: str) -> None:
        await sync_to_async(self.finish)(session_id, request_id)

    async def astart_many(self, claims: list[tuple[str, str, str]], *, owner: str, lease_seconds: float) -> None:
        await sync_to_async(self.start_many)(claims, owner=owner, lease_seconds=lease_seconds)

    async def arenew(self, owner: str, lease_seconds: float) -> int:
        return await sync_to_async(self.renew)(owner, lease_seconds)


class SubscriptionStore:
    """Which sessions follow which resource URIs."""

    def subscribe(self, session_id: str, uri: str) -> None:
        from .models import Subscription

        Subscription.objects.get_or_create(session_id=session_id, uri=uri)

    def unsubscribe(self, session_id: str, uri: str) -> None:
        from .models import Subscription

        Subscription.objects.filter(session_id=session_id, uri=uri).delete()

    def subscribers(self, site_name: str, uri: str) -> list[str]:
        """Live sessions of ``site_name`` subscribed to ``uri``."""
        from .models import Subscription

        now = timezone.now()
        return list(
            Subscription.objects.filter(
                uri=uri, session__site_name=site_name, session__terminated_at__isnull=True, session__expires_at__gt=now
            ).values_list("session_id", flat=True)
        )

    async def asubscribe(self, session_id: str, uri: str) -> None:
        await sync_to_async(self.subscribe)(session_id, uri)

    async def aunsubscribe(self, session_id: str, uri: str) -> None:
        await sync_to_async(self.unsubscribe)(session_id, uri)

    async def asubscribers(self, site_name: str, uri: str) -> list[str]:
        return await sync_to_async(self.subscribers)(site_name, uri)


def live_session_ids(site_name: str) -> list[str]:
    """Every live session of a site (for list_changed announcements)."""
    return list(Session.objects.filter(site_name=site_name).live().values_list("pk", flat=True))
