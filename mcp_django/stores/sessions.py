"""Session rows: create, load (through the cache), touch, change and end them; the batched
``initialized`` marks; the live sessions of a site."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import router
from django.utils import timezone

from ..conf import mcp_settings
from ..models import Session
from ..signals import session_changed
from .cache import session_cache
from .grouped import GroupWrite
from .rows import insert_rows, update_row

logger = logging.getLogger(__name__)


async def announce_session_changed(session_id: str) -> None:
    """Drop a session from every process's cache: this one at once, the others through the
    ``session_changed`` signal, which the bus broadcasts."""
    session_cache.drop(session_id)
    await session_changed.asend(sender=SessionStore, session_id=session_id)


def _insert(sessions: list[Session]) -> None:
    # A plain INSERT, not save(): Model.save was 12 % of a session set-up (bench/profile.py).
    # So no pre_save/post_save for sessions; session_created is the signal to hook.
    fields = Session._meta.concrete_fields
    insert_rows(
        Session, [{f.attname: getattr(session, f.attname) for f in fields} for session in sessions]
    )
    alias = router.db_for_write(Session)
    for session in sessions:
        session._state.adding = False
        session._state.db = alias


#: New sessions' rows, group-committed (:meth:`SessionStore.acreate`): a group in one INSERT,
#: in Django's thread for sync code.
_session_writes: GroupWrite[Session, None] = GroupWrite(sync_to_async(_insert))


class SessionStore:
    """Create, load, touch and end :class:`~mcp_django.models.Session` rows."""

    # Touching ``last_active_at`` on every request would be a write per request; a session
    # only needs it to move when it is worth extending the expiry.
    TOUCH_INTERVAL = timedelta(seconds=60)

    def create(
        self,
        *,
        site_name: str,
        user_id: Any,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        transport: str = "streamable-http",
        client_address: str | None = None,
    ) -> Session:
        session = self._new(
            site_name=site_name,
            user_id=user_id,
            protocol_version=protocol_version,
            client_info=client_info,
            capabilities=capabilities,
            transport=transport,
            client_address=client_address,
        )
        _insert([session])
        return session

    @staticmethod
    def _new(
        *,
        site_name: str,
        user_id: Any,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        transport: str = "streamable-http",
        client_address: str | None = None,
    ) -> Session:
        """The unsaved row of a new session (no query: made on the event loop by
        :meth:`acreate`)."""
        now = timezone.now()
        return Session(
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

    @staticmethod
    def _usable(session: Session | None, site_name: str, user_id: Any) -> bool:
        # Unknown, expired, terminated and foreign sessions all fail alike, so callers answer
        # them the same way (404) and nothing tells them apart.
        return (
            session is not None
            and session.site_name == site_name
            and session.user_id == user_id
            and session.is_live()
        )

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
        Session.objects.filter(pk=session.pk).update(
            last_active_at=now, expires_at=session.expires_at
        )

    def update(self, session_id: str, **fields: Any) -> None:
        update_row(Session, session_id, fields)

    def terminate(self, session_id: str) -> bool:
        return bool(
            Session.objects.filter(pk=session_id, terminated_at__isnull=True).update(
                terminated_at=timezone.now()
            )
        )

    async def acreate(self, **kwargs: Any) -> Session:
        # Group-committed: the initializes that come while one session is written share the next
        # thread hop and INSERT (a hop and a statement each were a fifth of a session set-up,
        # bench/profile.py). It returns once the row is committed, so any process can load it.
        session = self._new(**kwargs)
        await _session_writes.write(session)
        session_cache.put(session)
        return session

    async def aload(self, session_id: str, *, site_name: str, user_id: Any) -> Session | None:
        session = session_cache.get(session_id)
        if session is None:
            session = await sync_to_async(self.load)(
                session_id, site_name=site_name, user_id=user_id
            )
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
        while (
            self._writer is not None
            and not self._writer.done()
            and self._writer.get_loop() is asyncio.get_running_loop()
        ):
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


def live_session_ids(site_name: str) -> list[str]:
    """Every live session of a site (for list_changed announcements)."""
    return list(Session.objects.filter(site_name=site_name).live().values_list("pk", flat=True))
