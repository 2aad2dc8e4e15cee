"""Where sessions and stream events are kept: a backend interface and the database backend.

The transport talks only to these classes, never to the ORM, so a project can swap the event
store (``MCP_DJANGO["EVENT_STORE_CLASS"]``) without touching the request path.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, OperationalError, connections, router, transaction
from django.db.models import Max
from django.utils import timezone

from .conf import mcp_settings
from .models import Event, Session


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

    def has_stream(self, session_id: str, stream: str) -> bool:
        """Tell whether ``stream`` is a stream of ``session_id`` (for Last-Event-ID checks)."""
        raise NotImplementedError("Event stores must implement has_stream(session_id, stream)")

    def last_seq(self, session_id: str, stream: str) -> int:
        """Return the highest sequence number stored on a stream (0 when empty)."""
        raise NotImplementedError("Event stores must implement last_seq(session_id, stream)")

    def clear_expired(self, before: timezone.datetime) -> int:
        """Delete events created before ``before``; return how many."""
        raise NotImplementedError("Event stores must implement clear_expired(before)")

    def append_many(self, session_id: str, stream: str, events: list[StoredEvent]) -> None:
        """Store several numbered events of one stream at once (override to batch the writes)."""
        for event in events:
            self.append(session_id, stream, event.payload, seq=event.seq, closes_stream=event.closes_stream)

    # -- shouldn't need to override -----------------------------------------------------

    async def aappend_many(self, session_id: str, stream: str, events: list[StoredEvent]) -> None:
        await sync_to_async(self.append_many)(session_id, stream, events)

    async def aappend(self, session_id: str, stream: str, payload: str, *, seq: int | None = None, closes_stream: bool = False) -> int:
        return await sync_to_async(self.append)(session_id, stream, payload, seq=seq, closes_stream=closes_stream)

    async def areplay(self, session_id: str, stream: str, after: int) -> list[StoredEvent]:
        return await sync_to_async(self.replay)(session_id, stream, after)

    async def ahas_stream(self, session_id: str, stream: str) -> bool:
        return await sync_to_async(self.has_stream)(session_id, stream)

    async def alast_seq(self, session_id: str, stream: str) -> int:
        return await sync_to_async(self.last_seq)(session_id, stream)


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
        Event.objects.bulk_create(
            [Event(session_id=session_id, stream=stream, seq=e.seq, payload=e.payload, closes_stream=e.closes_stream, created_at=now) for e in events]
        )

    def replay(self, session_id: str, stream: str, after: int) -> list[StoredEvent]:
        rows = Event.objects.filter(session_id=session_id, stream=stream, seq__gt=after).order_by("seq")
        return [StoredEvent(seq, payload, closes) for seq, payload, closes in rows.values_list("seq", "payload", "closes_stream")]

    def has_stream(self, session_id: str, stream: str) -> bool:
        return Event.objects.filter(session_id=session_id, stream=stream).exists()

    def last_seq(self, session_id: str, stream: str) -> int:
        return Event.objects.filter(session_id=session_id, stream=stream).aggregate(m=Max("seq"))["m"] or 0

    def clear_expired(self, before: timezone.datetime) -> int:
        deleted, _ = Event.objects.filter(created_at__lt=before).delete()
        return deleted


def get_event_store() -> BaseEventStore:
    """Return an instance of the configured event store class."""
    return mcp_settings.EVENT_STORE_CLASS()


class SessionCache:
    """Live sessions this process has seen recently, so most requests cost no query.

    Every change to a session (terminate, log level, initialized) drops it here and is
    broadcast to the other processes over the channel layer (``transport.process``); entries
    are re-read at least every ``SESSION_CACHE_SECONDS`` in case a broadcast was missed.
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[Session, float]] = OrderedDict()

    def get(self, session_id: str) -> Session | None:
        entry = self._entries.get(session_id)
        if entry is None:
            return None
        session, loaded = entry
        if time.monotonic() - loaded > float(mcp_settings.get("SESSION_CACHE_SECONDS")):
            self._entries.pop(session_id, None)
            return None
        self._entries.move_to_end(session_id)
        return session

    def put(self, session: Session) -> None:
        if float(mcp_settings.get("SESSION_CACHE_SECONDS")) <= 0:
            return
        self._entries[session.pk] = (session, time.monotonic())
        self._entries.move_to_end(session.pk)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def drop(self, session_id: str) -> None:
        self._entries.pop(session_id, None)

    def clear(self) -> None:
        self._entries.clear()


session_cache = SessionCache()


async def announce_session_changed(session_id: str) -> None:
    """Drop a session from every process's cache (this one at once, the others by broadcast)."""
    from .transport.process import broadcast_session_changed

    session_cache.drop(session_id)
    await broadcast_session_changed(session_id)


class SessionStore:
    """Create, load, touch and end :class:`~mcp_django.models.Session` rows."""

    # Touching ``last_active_at`` on every request would be a write per request; a session
    # only needs it to move when it is worth extending the expiry.
    TOUCH_INTERVAL = timedelta(seconds=60)

    def create(self, *, site_name: str, user_id: Any, protocol_version: str, client_info: dict[str, Any], capabilities: dict[str, Any]) -> Session:
        now = timezone.now()
        return Session.objects.create(
            site_name=site_name,
            user_id=user_id,
            protocol_version=protocol_version,
            client_name=str(client_info.get("name", ""))[:200],
            client_version=str(client_info.get("version", ""))[:100],
            client_info=client_info,
            client_capabilities=capabilities,
            created_at=now,
            last_active_at=now,
            expires_at=Session.expiry_from(now, mcp_settings.session_ttl),
        )

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
        Session.objects.filter(pk=session_id).update(**fields)

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

    async def aterminate(self, session_id: str) -> bool:
        terminated = await sync_to_async(self.terminate)(session_id)
        await announce_session_changed(session_id)
        return terminated


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
