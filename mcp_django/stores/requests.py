"""Requests that outlive one process's memory: the server-to-client requests waiting for an
answer, and which process answers which streamed request (with the lease that tells when it
died, and the error that then ends the request's stream)."""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.db import IntegrityError, connections, router
from django.utils import timezone

from ..models import RunningRequest, ServerRequest
from ..protocol.errors import InternalError
from ..protocol.jsonrpc import encode, error_message
from ..signals import request_orphaned
from .events import BaseEventStore, StoredEvent, get_event_store
from .rows import insert_rows

logger = logging.getLogger(__name__)


class ServerRequestStore:
    """Pending server-to-client requests: who waits for which answer."""

    def create(
        self,
        *,
        session_id: str,
        request_id: str,
        method: str,
        params: dict[str, Any],
        channel_name: str,
    ) -> None:
        ServerRequest.objects.create(
            session_id=session_id,
            request_id=request_id,
            method=method,
            params=params,
            channel_name=channel_name,
        )

    def answer(self, session_id: str, request_id: str, response: dict[str, Any]) -> str | None:
        """Record the client's answer; return the waiting channel, or None when nobody waits
        (unknown id, another session's id, already answered or timed out)."""
        pending = ServerRequest.objects.filter(
            session_id=session_id, request_id=request_id, state=ServerRequest.State.PENDING
        )
        channel = pending.values_list("channel_name", flat=True).first()
        if channel is None:
            return None
        # Only the first answer wins, even when two arrive at two processes at once.
        if not pending.update(
            state=ServerRequest.State.ANSWERED, response=response, answered_at=timezone.now()
        ):
            return None
        return channel

    def cancel(self, session_id: str, request_id: str) -> None:
        ServerRequest.objects.filter(
            session_id=session_id, request_id=request_id, state=ServerRequest.State.PENDING
        ).update(state=ServerRequest.State.CANCELLED, answered_at=timezone.now())

    async def acreate(self, **kwargs: Any) -> None:
        await sync_to_async(self.create)(**kwargs)

    async def aanswer(
        self, session_id: str, request_id: str, response: dict[str, Any]
    ) -> str | None:
        return await sync_to_async(self.answer)(session_id, request_id, response)

    async def acancel(self, session_id: str, request_id: str) -> None:
        await sync_to_async(self.cancel)(session_id, request_id)

    def expire_stale(self, ttl_seconds: float) -> int:
        """Mark requests pending longer than ``ttl_seconds`` expired: whoever waited for them
        is gone (its own timeout is shorter), so a late answer finds nobody. Return how many."""
        cutoff = timezone.now() - timedelta(seconds=ttl_seconds)
        return ServerRequest.objects.filter(
            state=ServerRequest.State.PENDING, created_at__lt=cutoff
        ).update(state=ServerRequest.State.EXPIRED, answered_at=timezone.now())

    async def aexpire_stale(self, ttl_seconds: float) -> int:
        return await sync_to_async(self.expire_stale)(ttl_seconds)


#: The error that ends the stream of a request whose process died while answering it.
ORPHAN_MESSAGE = "The server process handling this request stopped; send the request again."


class RunningRequestStore:
    """Which process answers which request over SSE, with a lease the process renews.

    Rows are in the database so that any process (a resume lands anywhere) can tell that the
    process answering a request is gone, and end that request's stream with an error.
    """

    def start(
        self,
        *,
        session_id: str,
        stream: str,
        request_id: str,
        owner: str,
        lease_seconds: float,
        tool_call: Any = None,
    ) -> None:
        fields = {
            "stream": stream,
            "owner": owner,
            "lease_until": timezone.now() + timedelta(seconds=lease_seconds),
            "tool_call": tool_call,
        }
        # One INSERT on the hot path of every streamed request (update_or_create spent a
        # transaction, a SELECT and a savepoint on it: bench/profile.py found it the top cost).
        # A row left by a dead process under the same id is the rare case, taken over.
        try:
            RunningRequest.objects.create(session_id=session_id, request_id=request_id, **fields)
        except IntegrityError:
            RunningRequest.objects.filter(session_id=session_id, request_id=request_id).update(
                **fields
            )

    def start_many(
        self,
        claims: list[tuple[str, str, str]],
        *,
        owner: str,
        lease_seconds: float,
        tool_calls: dict[tuple[str, str], Any] | None = None,
    ) -> None:
        """Claim several requests, each ``(session id, stream, request id)``, with one INSERT; a
        row a dead process left under the same id is taken over. ``tool_calls``: the audit
        record of those that are tools/call without a row yet, by (session id, request id)."""
        now = timezone.now()
        lease_until = now + timedelta(seconds=lease_seconds)
        records = tool_calls or {}
        rows = [
            {
                "session_id": session_id,
                "stream": stream,
                "request_id": request_id,
                "owner": owner,
                "lease_until": lease_until,
                "created_at": now,
                "tool_call": records.get((session_id, request_id)),
            }
            for session_id, stream, request_id in claims
        ]
        try:
            # Written for every streamed request that outlives the claim delay, so under load
            # for most of them: plain multi-row INSERTs (bulk_create with update_conflicts cost
            # several times more, bench/profile.py).
            insert_rows(RunningRequest, rows)
        except IntegrityError:
            # A row a dead process left under the same id, or a session deleted meanwhile, fails
            # the whole batch (rare): claim them one by one, taking such rows over.
            for session_id, stream, request_id in claims:
                with contextlib.suppress(IntegrityError):
                    self.start(
                        session_id=session_id,
                        stream=stream,
                        request_id=request_id,
                        owner=owner,
                        lease_seconds=lease_seconds,
                        tool_call=records.get((session_id, request_id)),
                    )

    def finish(self, session_id: str, request_id: str) -> None:
        self.finish_many([(session_id, request_id)])

    def finish_many(self, keys: list[tuple[str, str]]) -> None:
        """Drop the claims ``keys`` (session id, request id) of requests that ended.

        One plain DELETE per session: this runs with the response of every streamed request
        that outlived the claim delay, and the ORM's filter().delete() (query building and the
        deletion collector, for a table nothing points to) was 10 % of a streamed call's CPU
        under load (bench/profile.py)."""
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
                cursor.execute(
                    f"DELETE FROM {table} WHERE {session_column} = %s AND {request_column} IN "
                    f"({marks})",
                    [session_id, *request_ids],
                )

    def renew(self, owner: str, lease_seconds: float) -> int:
        return RunningRequest.objects.filter(owner=owner).update(
            lease_until=timezone.now() + timedelta(seconds=lease_seconds)
        )

    def close_orphans(
        self,
        *,
        session_id: str | None = None,
        stream: str | None = None,
        store: BaseEventStore | None = None,
    ) -> list[tuple[str, StoredEvent]]:
        """End the streams of requests whose lease lapsed with a -32603 error response each,
        the last one closing the stream; return the events stored, by stream.

        Each row is claimed by deleting it, so two processes sweeping at once never both
        answer the same request.
        """
        store = store or get_event_store()
        lapsed = RunningRequest.objects.filter(lease_until__lt=timezone.now())
        if session_id is not None:
            lapsed = lapsed.filter(session_id=session_id)
        if stream is not None:
            lapsed = lapsed.filter(stream=stream)
        stored: list[tuple[str, StoredEvent]] = []
        for row in list(lapsed.order_by("session_id", "stream", "created_at")):
            if not RunningRequest.objects.filter(
                pk=row.pk, lease_until__lt=timezone.now()
            ).delete()[0]:
                continue  # renewed or claimed by another process meanwhile
            last = store.last_seq(row.session_id, row.stream)
            if last and any(
                e.closes_stream for e in store.replay(row.session_id, row.stream, last - 1)
            ):
                continue  # the stream already ended (the row outlived its request)
            closes = not RunningRequest.objects.filter(
                session_id=row.session_id, stream=row.stream
            ).exists()
            payload = encode(
                error_message(orjson.loads(row.request_id), InternalError(ORPHAN_MESSAGE))
            ).decode()
            seq = store.append(row.session_id, row.stream, payload, closes_stream=closes)
            stored.append((row.stream, StoredEvent(seq, payload, closes)))
            try:
                request_orphaned.send(
                    sender=RunningRequest,
                    session_id=row.session_id,
                    request_id=row.request_id,
                    tool_call=row.tool_call,
                )
            except Exception:
                # A project's receiver must not stop the sweep of the other requests.
                logger.exception("A receiver of request_orphaned failed")
        return stored

    async def astart(self, **kwargs: Any) -> None:
        await sync_to_async(self.start)(**kwargs)

    async def afinish(self, session_id: str, request_id: str) -> None:
        await sync_to_async(self.finish)(session_id, request_id)

    async def astart_many(
        self,
        claims: list[tuple[str, str, str]],
        *,
        owner: str,
        lease_seconds: float,
        tool_calls: dict[tuple[str, str], Any] | None = None,
    ) -> None:
        await sync_to_async(self.start_many)(
            claims, owner=owner, lease_seconds=lease_seconds, tool_calls=tool_calls
        )

    async def arenew(self, owner: str, lease_seconds: float) -> int:
        return await sync_to_async(self.renew)(owner, lease_seconds)
