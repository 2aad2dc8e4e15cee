"""The durable trail (``AUDIT_DURABLE``): each call's row written on its request's path.

A call's row is written as the call starts and given its outcome before the call is answered;
the sweep after dead processes marks the calls they were running "interrupted". Here too are
the receivers that write, after a crash, the row of a streamed call the buffered writer had not
written yet.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from datetime import timedelta
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.db import IntegrityError, connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ...conf import mcp_settings
from ...models import ToolCall
from ...stores import RawJSON
from .buffer import client_ids, orm_fields, writer

logger = logging.getLogger(__name__)

Outcome = ToolCall.Outcome

#: The error of a call its process died running.
INTERRUPTED_MESSAGE = "the server process stopped while the call ran"


class DurableTrail:
    """``AUDIT_DURABLE``: each call's row written on its request's path.

    A call's row is inserted "running" with a lease (REQUEST_LEASE_SECONDS) that a task of this
    process renews while the call runs; its outcome is written before it is answered. A row
    still "running" once its lease lapsed belongs to a process that died: the sweep after dead
    processes (:func:`on_sweep`) marks it "interrupted". Should a write fail, the call goes to
    the buffered writer instead (logged), so the trail never breaks the call.
    """

    def __init__(self) -> None:
        #: Rows of the calls this process is running, by primary key.
        self.running: set[int] = set()
        self._renewer: asyncio.Task[None] | None = None
        self._ends: set[asyncio.Task[None]] = set()

    @staticmethod
    def _lease() -> Any:
        return timezone.now() + timedelta(seconds=mcp_settings.request_lease_seconds)

    def _insert(self, record: dict[str, Any]) -> int:
        clients = client_ids(
            {record["application_id"]} if record.get("application_id") is not None else set()
        )
        fields = orm_fields(record, clients)
        if type(fields["arguments"]) is RawJSON:
            # For the ORM, which serialises it.
            fields["arguments"] = orjson.loads(str(fields["arguments"]))
        try:
            return int(ToolCall.objects.create(**fields).pk)
        except IntegrityError:
            # A user deleted since the call: kept unlinked, as by the writer.
            fields["user_id"] = None
            return int(ToolCall.objects.create(**fields).pk)

    async def astart(self, record: dict[str, Any]) -> int | None:
        """Insert a running call's row; its primary key, or None (buffered) when that failed."""
        record["lease_until"] = self._lease()
        try:
            row = await sync_to_async(self._insert, thread_sensitive=True)(record)
        except Exception:
            logger.exception(
                "Could not write a running tools/call to the audit trail; "
                "its outcome will be buffered"
            )
            return None
        self.running.add(row)
        self._renew_soon()
        return row

    async def awrite(self, record: dict[str, Any]) -> None:
        """Insert a finished call's row now (a refusal), or buffer it when that fails."""
        try:
            await sync_to_async(self._insert, thread_sensitive=True)(record)
        except Exception:
            logger.exception("Could not write a tools/call to the audit trail; it is buffered")
            writer.add(record)

    @staticmethod
    def _update(row: int, record: dict[str, Any]) -> None:
        ToolCall.objects.filter(pk=row).update(
            outcome=record["outcome"],
            error=record["error"],
            error_code=record["error_code"],
            duration_ms=record["duration_ms"],
            trace_id=record["trace_id"],
            task_id=record["task_id"],
            result_cut=record["result_cut"],
            lease_until=None,
        )

    async def afinish(self, row: int, record: dict[str, Any]) -> None:
        """Write a call's outcome on its row (before the call is answered)."""
        try:
            await sync_to_async(self._update, thread_sensitive=True)(row, record)
        finally:
            # Not renewed any more: should the write have failed, the row ends "interrupted".
            self.running.discard(row)

    def finish_soon(self, row: int, record: dict[str, Any]) -> None:
        """:meth:`afinish` in a task of its own, for a call being cancelled."""
        task = contextvars.Context().run(
            asyncio.get_running_loop().create_task, self.afinish(row, record)
        )
        self._ends.add(task)
        task.add_done_callback(self._ends.discard)

    def _renew_soon(self) -> None:
        if (
            self._renewer is None
            or self._renewer.done()
            or self._renewer.get_loop() is not asyncio.get_running_loop()
        ):
            self._renewer = contextvars.Context().run(
                asyncio.get_running_loop().create_task, self._renew()
            )

    async def _renew(self) -> None:
        while self.running:
            await asyncio.sleep(mcp_settings.request_lease_seconds / 3)
            rows = list(self.running)
            if not rows:
                return
            try:
                # Not on Django's sync thread: a long sync tool holds that one, and the lease
                # must not lapse behind it.
                await sync_to_async(self._extend, thread_sensitive=False)(rows)
            except Exception:
                logger.exception("Could not renew the leases of running tool calls")

    def _extend(self, rows: list[int]) -> None:
        try:
            ToolCall.objects.filter(pk__in=rows, outcome=Outcome.RUNNING).update(
                lease_until=self._lease()
            )
        finally:
            connections.close_all()  # this worker thread's connection: not left open between beats


def close_interrupted() -> int:
    """Mark "interrupted" every running call whose lease lapsed (its process died); return how
    many."""
    return ToolCall.objects.filter(outcome=Outcome.RUNNING, lease_until__lt=timezone.now()).update(
        outcome=Outcome.INTERRUPTED, error=INTERRUPTED_MESSAGE, lease_until=None
    )


def on_request_orphaned(
    sender: Any, session_id: str, request_id: str, tool_call: Any = None, **kwargs: Any
) -> None:
    """Receiver of ``signals.request_orphaned`` (connected by :func:`install`): write the
    "interrupted" row of a streamed tools/call whose process died before its row was written."""
    if not isinstance(tool_call, dict):
        return
    record = dict(
        tool_call, started_at=parse_datetime(str(tool_call.get("started_at"))) or timezone.now()
    )
    # Once only: a row written for that call already (answered just before the crash, and
    # flushed) wins.
    if ToolCall.objects.filter(
        session_id=record["session_id"],
        request_id=record["request_id"],
        started_at=record["started_at"],
    ).exists():
        return
    durable._insert(record)
    logger.warning(
        "A tools/call of session %s was interrupted by the end of its server process", session_id
    )


async def on_sweep(sender: Any, **kwargs: Any) -> None:
    """Receiver of ``signals.sweeping`` (connected by :func:`install`)."""
    count = await sync_to_async(close_interrupted)()
    if count:
        logger.warning("%d tool calls were interrupted by the end of their server process", count)


#: The process's durable trail (used when AUDIT_DURABLE is on).
durable = DurableTrail()
