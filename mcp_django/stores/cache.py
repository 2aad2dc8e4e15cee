"""The per-process cache of live sessions, so that most requests cost no query."""

from __future__ import annotations

import time
from collections import OrderedDict

import orjson

from ..conf import mcp_settings
from ..models import Session


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
        return (
            self._max_entries
            if self._max_entries is not None
            else mcp_settings.session_cache_max_entries
        )

    @property
    def max_bytes(self) -> int:
        return (
            self._max_bytes if self._max_bytes is not None else mcp_settings.session_cache_max_bytes
        )

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
            if (
                now - loaded <= ttl
                and len(self._entries) <= self.max_entries
                and self.size <= self.max_bytes
            ):
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
