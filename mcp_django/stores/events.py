"""The event log behind resumable SSE streams: the store interface, the database store, and
the configured store (``MCP_DJANGO["EVENT_STORE_CLASS"]``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

from asgiref.sync import sync_to_async
from django.db import IntegrityError, OperationalError, connections, router, transaction
from django.db.models import Max
from django.db.models.functions import Length
from django.utils import timezone

from ..conf import mcp_settings
from ..models import Event
from .rows import insert_rows


@dataclass(slots=True, frozen=True)
class StoredEvent:
    """An event as replayed: its sequence number, exact JSON text, and whether it ends the
    stream."""

    seq: int
    payload: str
    closes_stream: bool


class BaseEventStore:
    """The event log behind resumable SSE streams.

    Subclasses implement the sync methods; the ``a*`` twins run them off the event loop.
    """

    # -- subclass implementation --------------------------------------------------------

    def append(
        self,
        session_id: str,
        stream: str,
        payload: str,
        *,
        seq: int | None = None,
        closes_stream: bool = False,
    ) -> int:
        """Store one event and return its sequence number (allocated when ``seq`` is None)."""
        raise NotImplementedError(
            "Event stores must implement append(session_id, stream, payload, seq=, closes_stream=)"
        )

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
            self.append(
                session_id, stream, event.payload, seq=event.seq, closes_stream=event.closes_stream
            )

    def append_streams(self, batches: list[tuple[str, str, list[StoredEvent]]]) -> None:
        """Store the numbered events of several streams, ``(session_id, stream, events)`` each
        (override to write them in one go)."""
        for session_id, stream, events in batches:
            self.append_many(session_id, stream, events)

    def replay_page(
        self, session_id: str, stream: str, after: int, *, max_events: int, max_bytes: int
    ) -> list[StoredEvent]:
        """Return the next events after ``after``: at most ``max_events``, and at most
        ``max_bytes`` of payload unless the first event alone is larger.

        Resumes read a stream page by page with this. The default reads the whole rest of the
        stream through ``replay`` and cuts it; override it to read only one page.
        """
        return cut_page(self.replay(session_id, stream, after), max_events, max_bytes)

    # -- shouldn't need to override -----------------------------------------------------

    async def aappend_many(self, session_id: str, stream: str, events: list[StoredEvent]) -> None:
        await sync_to_async(self.append_many)(session_id, stream, events)

    async def aappend(
        self,
        session_id: str,
        stream: str,
        payload: str,
        *,
        seq: int | None = None,
        closes_stream: bool = False,
    ) -> int:
        return await sync_to_async(self.append)(
            session_id, stream, payload, seq=seq, closes_stream=closes_stream
        )

    async def areplay(self, session_id: str, stream: str, after: int) -> list[StoredEvent]:
        return await sync_to_async(self.replay)(session_id, stream, after)

    async def areplay_page(
        self, session_id: str, stream: str, after: int, *, max_events: int, max_bytes: int
    ) -> list[StoredEvent]:
        return await sync_to_async(self.replay_page)(
            session_id, stream, after, max_events=max_events, max_bytes=max_bytes
        )

    async def areplay_pages(
        self,
        session_id: str,
        stream: str,
        after: int,
        *,
        max_events: int,
        max_bytes: int,
        until: int | None = None,
    ) -> AsyncIterator[list[StoredEvent]]:
        """Yield the events after ``after`` (up to ``until``) page by page, keyset on seq: the
        caller writes each page out before the next one is read."""
        while True:
            page = await self.areplay_page(
                session_id, stream, after, max_events=max_events, max_bytes=max_bytes
            )
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


class DatabaseEventStore(BaseEventStore):
    """Events as rows of :class:`~mcp_django.models.Event` in the default database."""

    def append(
        self,
        session_id: str,
        stream: str,
        payload: str,
        *,
        seq: int | None = None,
        closes_stream: bool = False,
    ) -> int:
        if seq is not None:
            # A POST stream has a single writer (the task answering the request): no race.
            Event.objects.create(
                session_id=session_id,
                stream=stream,
                seq=seq,
                payload=payload,
                closes_stream=closes_stream,
            )
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
                        session_id=session_id,
                        stream=stream,
                        seq=last + 1,
                        payload=payload,
                        closes_stream=closes_stream,
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
        self._insert([(session_id, stream, events)])

    def append_streams(self, batches: list[tuple[str, str, list[StoredEvent]]]) -> None:
        if type(self).append_many is not DatabaseEventStore.append_many:
            super().append_streams(batches)  # a subclass's append_many sees every event
            return
        # One INSERT for every stream's events (the group commit of transport.streams).
        self._insert(batches)

    def _insert(self, batches: list[tuple[str, str, list[StoredEvent]]]) -> None:
        now = timezone.now()
        insert_rows(
            Event,
            [
                {
                    "session_id": session_id,
                    "stream": stream,
                    "seq": e.seq,
                    "payload": e.payload,
                    "closes_stream": e.closes_stream,
                    "created_at": now,
                }
                for session_id, stream, events in batches
                for e in events
            ],
        )

    def replay(self, session_id: str, stream: str, after: int) -> list[StoredEvent]:
        rows = Event.objects.filter(session_id=session_id, stream=stream, seq__gt=after).order_by(
            "seq"
        )
        return [
            StoredEvent(seq, payload, closes)
            for seq, payload, closes in rows.values_list("seq", "payload", "closes_stream")
        ]

    def replay_page(
        self, session_id: str, stream: str, after: int, *, max_events: int, max_bytes: int
    ) -> list[StoredEvent]:
        rows = Event.objects.filter(session_id=session_id, stream=stream, seq__gt=after).order_by(
            "seq"
        )
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
        return (
            Event.objects.filter(session_id=session_id, stream=stream).aggregate(m=Max("seq"))["m"]
            or 0
        )

    def clear_expired(self, before: datetime) -> int:
        deleted, _ = Event.objects.filter(created_at__lt=before).delete()
        return deleted


def get_event_store() -> BaseEventStore:
    """Return an instance of the configured event store class."""
    # An import string resolved at run time; checks.py reports one that is no event store.
    store_class: type[BaseEventStore] = mcp_settings.event_store_class
    return store_class()
