"""The buffered writer: finished calls written to the database in batches, off the request's path.

Calls wait in a bounded in-process buffer that a task of its own writes, so a request never
waits on an INSERT. When the buffer is full, calls are dropped and counted, never waited for.
:func:`flush` writes what is buffered now (tests, management commands); the process writes the
rest when it exits. A crash (``kill -9``) loses what is buffered: up to
``AUDIT_FLUSH_INTERVAL`` of answered calls.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, DatabaseError, IntegrityError, connections, router
from django.utils import timezone

from ...conf import mcp_settings
from ...models import ToolCall
from ...stores import RawJSON, RowTemplate, column, insert_values, prepare_row
from .redaction import clean

logger = logging.getLogger(__name__)

#: Rows per INSERT, and per trip to Django's sync thread (see AuditWriter._write_soon). A stream's
#: events are stored on that thread too and wait for the trip in flight (3.5 to 7.5 ms for 200
#: rows under load); trips of 50 made that wait shorter, but four times as many trips cost JSON
#: calls at concurrency 32 7 % more CPU and 50 % more p99 (docs/performance.md, seventh pass).
BATCH_SIZE = 200


class AuditWriter:
    """Buffered ToolCall records and the task that writes them, one batch at a time.

    The buffer is bounded (``AUDIT_BUFFER_SIZE``): a call recorded when it is full is dropped,
    counted in :attr:`dropped` and logged, so a slow or unavailable database never makes a
    request wait nor the process grow. The task runs on the event loop of the call that needed
    it and writes through Django's thread for sync code (``thread_sensitive``), the thread and
    connection every other ORM call of the request uses: no connection of its own to hold open,
    and in tests no second writer on the test database.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer: deque[dict[str, Any]] = deque()
        #: Calls dropped since the process started, because the buffer was full or a write
        #: failed twice.
        self.dropped = 0
        self._unreported = 0
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._buffer)

    def add(self, record: dict[str, Any]) -> None:
        """Buffer ``record``, or drop it when the buffer is full; never blocks."""
        record["_database"] = _database()
        # No row is made for a call a full buffer will drop (a flood while the database is away).
        record["_row"] = (
            _prepared(record) if len(self._buffer) < mcp_settings.audit_buffer_size else None
        )
        self._append(record)

    def add_like(
        self, key: tuple[Any, ...], varying: tuple[Any, ...], whole: Callable[[], dict[str, Any]]
    ) -> None:
        """Buffer a call whose row shares every column but :data:`VARYING` with the earlier
        calls of the same ``key`` (caller, tool, site, transport, revision), and has ``varying``
        in those (as :func:`_fields` leaves them). The first call of a key is made ``whole()``
        and its row becomes the template of the next ones: no record, and a third of the row's
        making, per call after it (issue 45)."""
        database = _database()
        full = (database, settings.USE_TZ, *key)
        template = _templates.get(full)
        if template is None or len(self._buffer) >= mcp_settings.audit_buffer_size:
            record = whole()
            self.add(record)
            if template is None and record["_row"] is not None:
                if len(_templates) >= TEMPLATES_KEPT:
                    _templates.clear()  # callers come and go: what is kept is bounded
                _templates[full] = RowTemplate(ToolCall, record, VARYING)
            return
        # What the writer reads of a call: its row, database and OAuth application.
        self._append(
            {"_row": template.make(varying), "_database": database, "application_id": key[0]}
        )

    def _append(self, record: dict[str, Any]) -> None:
        with self._lock:
            full = len(self._buffer) >= mcp_settings.audit_buffer_size
            if full:
                self.dropped += 1
                self._unreported += 1
                first = self._unreported == 1
            else:
                self._buffer.append(record)
        if full:
            if first:
                logger.warning(
                    "The audit trail's buffer is full (AUDIT_BUFFER_SIZE=%d): "
                    "tool calls are being dropped until it is written",
                    mcp_settings.audit_buffer_size,
                )
            return
        self._schedule()

    def _schedule(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (sync code): flush() or the process's exit writes it
        task = self._task
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        # An empty context: the task must not inherit the request's (its thread-sensitive
        # executor ends with the request, and its tool Context has nothing to do with the writer).
        self._task = contextvars.Context().run(loop.create_task, self._write_soon())

    async def _write_soon(self) -> None:
        while self._buffer:
            await asyncio.sleep(mcp_settings.audit_flush_interval)
            # One batch per trip to Django's sync thread: the sync tools queued there meanwhile
            # run between two batches. Written all at once, a second's worth of calls held that
            # thread for tens of milliseconds, and every tool waited behind it (the p99 at
            # concurrency 32, bench/).
            # Only full batches go at once; what is left waits for the next interval. While a
            # trip to the sync thread waits for the GIL, calls keep coming: writing whatever
            # had come meanwhile made batches of a dozen rows under load, and a row cost three
            # times as much (the thread hop, BEGIN and COMMIT are per batch).
            full = True
            while full and self._buffer:
                full = len(self._buffer) >= BATCH_SIZE
                try:
                    if not await sync_to_async(self._flush_batch, thread_sensitive=True)():
                        break  # the batch is put back: try again after the interval
                except Exception:
                    # The writer's top level: a failure is logged, the task goes on with the
                    # next batch.
                    logger.exception("Could not write the audit trail")
                    break

    def _take(self) -> list[dict[str, Any]]:
        with self._lock:
            count = min(BATCH_SIZE, len(self._buffer))
            batch = [self._buffer.popleft() for _ in range(count)]
            unreported, self._unreported = self._unreported, 0
        if unreported:
            logger.warning(
                "%d tool calls were dropped from the audit trail: "
                "its buffer (AUDIT_BUFFER_SIZE) was full",
                unreported,
            )
        return batch

    def _flush_once(self) -> bool:
        """Write what is buffered now, batch by batch; False when a write failed (the batch is
        put back once, to be tried on the next flush)."""
        while self._buffer:
            if not self._flush_batch():
                return False
        return True

    def _flush_batch(self) -> bool:
        """Write one batch of what is buffered; False when the write failed (see _flush_once)."""
        batch = self._take()
        if not batch:
            return True
        try:
            self._write(batch)
        except DatabaseError as exc:
            self._put_back(batch, exc)
            return False
        except Exception:
            self.dropped += len(batch)
            raise
        return True

    def flush(self) -> int:
        """Write every buffered call now, in this thread; return how many are still waiting (0
        unless a write failed). For sync code: tests, management commands, the process's exit."""
        self._flush_once()
        return len(self._buffer)

    async def aflush(self) -> int:
        """:meth:`flush`, from async code."""
        return await sync_to_async(self.flush, thread_sensitive=True)()

    def discard(self) -> None:
        """Forget every buffered call and the drop count (tests)."""
        with self._lock:
            self._buffer.clear()
            self._unreported = 0
            self.dropped = 0

    def _put_back(self, batch: list[dict[str, Any]], exc: Exception) -> None:
        again = [r for r in batch if not r.get("_retried")]
        lost = len(batch) - len(again)
        with self._lock:
            room = max(mcp_settings.audit_buffer_size - len(self._buffer), 0)
            for record in reversed(again[:room]):
                record["_retried"] = True
                self._buffer.appendleft(record)
            lost += max(len(again) - room, 0)
            self.dropped += lost
        logger.warning(
            "Could not write %d tool calls to the audit trail (%s); "
            "%d will be tried again, %d are lost",
            len(batch),
            exc,
            len(batch) - lost,
            lost,
        )

    def _write(self, batch: list[dict[str, Any]]) -> None:
        # A call is written only to the database it was made against: a test run's calls, left
        # in the buffer when its test database is gone, must not land in the real one at exit.
        database = _database()
        stale = [r for r in batch if r.get("_database") != database]
        if stale:
            self.dropped += len(stale)
            logger.info(
                "%d tool calls recorded against another database were not written", len(stale)
            )
            batch = [r for r in batch if r.get("_database") == database]
            if not batch:
                return
        clients = client_ids(
            {r["application_id"] for r in batch if r["application_id"] is not None}
        )
        rows = self._rows(batch, clients)
        try:
            insert_values(ToolCall, rows)
        except IntegrityError:
            # A user deleted since the call: keep the call, unlinked (the username stays).
            user = column(ToolCall, "user_id")
            ids = {row[user] for row in rows if row[user] is not None}
            existing = set(
                get_user_model()._default_manager.filter(pk__in=ids).values_list("pk", flat=True)
            )
            for record, row in zip(batch, rows, strict=True):
                if row[user] not in existing:
                    record["user_id"] = row[user] = None
            insert_values(ToolCall, rows)

    @staticmethod
    def _rows(batch: list[dict[str, Any]], clients: dict[Any, str]) -> list[list[Any]]:
        """The rows of ``batch`` to INSERT: each made on the event loop as its call ended
        (:func:`_prepared`), with the client id of an OAuth application, known only here."""
        rows = []
        client = column(ToolCall, "client_id")
        for record in batch:
            row = record["_row"]
            if row is None:
                # Its making failed: it fails again, here.
                row = record["_row"] = prepare_row(ToolCall, _fields(record))
            application = record["application_id"]
            if application is not None:
                row[client] = clean(clients.get(application, ""), 255)
            rows.append(row)
        return rows

    def flush_at_exit(self) -> None:
        if not self._buffer:
            return
        try:
            self.flush()
        except Exception:
            # The process is ending: say what is lost, and let it end.
            logger.exception(
                "Could not write %d tool calls to the audit trail at exit", len(self._buffer)
            )


def _fields(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as ToolCall's field values (in place: the writer owns it)."""
    if type(record["arguments"]) is str:
        record["arguments"] = RawJSON(record["arguments"])  # its JSON text (record._record)
    if not settings.USE_TZ and record["started_at"].tzinfo is not None:
        record["started_at"] = timezone.make_naive(record["started_at"])
    # An external IdP's token names its client (record._who); an OAuth application's client id
    # is read by the writer (AuditWriter._rows).
    record.setdefault("client_id", "")
    return record


#: The columns in which one caller's calls of one tool differ (AuditWriter.add_like), in the
#: order their values are given.
VARYING = (
    "started_at",
    "session_id",
    "request_id",
    "arguments",
    "outcome",
    "error",
    "error_code",
    "duration_ms",
    "trace_id",
    "task_id",
    "result_cut",
)
#: Row templates kept, one per database, caller, tool, site, transport and revision.
TEMPLATES_KEPT = 1024
_templates: dict[tuple[Any, ...], RowTemplate] = {}


def _prepared(record: dict[str, Any]) -> list[Any] | None:
    """The row the writer will INSERT for ``record``, made now, on the event loop
    (stores.prepare_row): plain multi-row INSERTs, not bulk_create, whose ToolCall per row cost a
    fifth of a JSON tools/call's CPU (bench/profile.py). None when it cannot be made: the writer
    tries again."""
    try:
        return prepare_row(ToolCall, _fields(record))
    except Exception:
        logger.exception("Could not make the audit trail's row of a tools/call")
        return None


def _database() -> Any:
    """The name of the database ToolCall rows are written to."""
    # From the settings, not connections[...]: that builds a connection object per asyncio
    # context, and this runs for every recorded call on the event loop. Without routers the
    # answer is the default database, without asking them.
    alias = router.db_for_write(ToolCall) if router.routers else DEFAULT_DB_ALIAS
    return connections.settings[alias].get("NAME")


def client_ids(application_ids: set[Any]) -> dict[Any, str]:
    """The client id of each OAuth application in ``application_ids``, by primary key."""
    if not application_ids:
        return {}
    # Optional dependency: only tokens from django-oauth-toolkit carry an application, so it is
    # installed.
    from oauth2_provider.models import get_application_model

    return dict(
        get_application_model()
        .objects.filter(pk__in=application_ids)
        .values_list("pk", "client_id")
    )


def orm_fields(record: dict[str, Any], clients: dict[Any, str]) -> dict[str, Any]:
    """``record`` as ToolCall's field values, for the ORM (the durable trail's one row at a
    time)."""
    fields = _fields(
        {
            k: v
            for k, v in record.items()
            if k not in ("application_id", "_retried", "_database", "_row")
        }
    )
    fields["client_id"] = clean(
        clients.get(record.get("application_id")) or fields.get("client_id") or "", 255
    )
    return fields


#: The process's writer.
writer = AuditWriter()


def flush() -> int:
    """Write the buffered tool calls now (sync code); return how many are still waiting."""
    return writer.flush()


async def aflush() -> int:
    """Write the buffered tool calls now (async code); return how many are still waiting."""
    return await writer.aflush()
