"""The counters quotas keep, one backend per cache (:func:`counters_for`).

:mod:`mcp_django.ops.quotas.limits` decides what to count and when to refuse; a backend only counts,
in
the cache ``QUOTAS["CACHE"]`` names. Which backend counts for a cache is chosen once, when this
process first makes its client of that cache:

* :class:`InProcessCounters` for Django's local-memory cache, which no other process sees:
  plain integers in this process, and held slots without leases;
* :class:`RedisCounters` for Django's Redis cache: pipelines, one round trip per count, with an
  asyncio client on the event loop;
* :class:`CacheCounters` for any other cache: ``cache.add`` then ``cache.incr``, in a worker
  thread when called from the loop.

Every backend counts atomically (two concurrent hits on one key never both see the same
count), so two requests never both take the last unit of a limit; a cache whose ``incr`` reads
then writes (the database's, files') only within a process (:class:`CacheCounters`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.core.cache import BaseCache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from django.core.signals import setting_changed

from ...redis_wire import Wires

T = TypeVar("T")

#: Every cache key of the quotas starts so (then a SHA-256 of who and what is counted).
KEY_PREFIX = "mcp_django:quota"

#: What one held slot counts in: (kind, limit, who), e.g. ("running", "RUNNING_PER_USER", "user:1").
Scope = tuple[str, str, str]


@functools.lru_cache(maxsize=4096)
def cache_key(kind: str, *parts: str) -> str:
    """A namespaced key; what it counts is hashed (ids, addresses and tool names stay out of
    the cache's key space, and any length fits memcached's 250 characters)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]
    return f"{KEY_PREFIX}:{kind}:{digest}"


def slot_key(scope: Scope, lease: float, bucket: int) -> str:
    """The counter of ``scope``'s slots held in time bucket ``bucket`` of ``lease`` seconds."""
    kind, limit, who = scope
    return cache_key(kind, limit, who, str(lease), str(bucket))


class BaseCounters:
    """Counters in one cache: windowed hits for the rate limits, held slots for the caps.

    A held slot is counted in time buckets of ``lease`` seconds: the slot registers in the
    current bucket and, while held, in the next ones (the caller renews it); a counter outlives
    its bucket by two leases, so the slots of a process that died stop counting by themselves.
    """

    #: Whether a held slot must be renewed. False where the counts die with the process anyway.
    leased = True
    #: Whether :meth:`hit`, :meth:`hold` and :meth:`release` count in memory, without I/O and
    #: without leases, so the event loop may call them as they are (no coroutine, no thread).
    inline = False

    def __init__(self, cache: BaseCache) -> None:
        self.cache = cache

    # -- subclass implementation --------------------------------------------------------------

    def hit(self, keys: Sequence[str], timeout: float) -> list[int]:
        """Count one more on each of ``keys`` (a new counter lapses ``timeout`` s after it was
        made); the new counts."""
        raise NotImplementedError("subclasses of BaseCounters must provide a hit() method")

    async def ahit(self, keys: Sequence[str], timeout: float) -> list[int]:
        """:meth:`hit` without blocking the event loop."""
        raise NotImplementedError("subclasses of BaseCounters must provide an ahit() method")

    def unhit(self, keys: Sequence[str]) -> None:
        """Give back one count on each of ``keys``; a counter that lapsed stays gone (never -1)."""
        raise NotImplementedError("subclasses of BaseCounters must provide an unhit() method")

    async def aunhit(self, keys: Sequence[str]) -> None:
        """:meth:`unhit` without blocking the event loop."""
        raise NotImplementedError("subclasses of BaseCounters must provide an aunhit() method")

    def get(self, key: str) -> int:
        """The count on ``key`` now (0 when there is none)."""
        raise NotImplementedError("subclasses of BaseCounters must provide a get() method")

    async def aadd(self, amounts: Sequence[tuple[str, int]], timeout: float) -> list[int]:
        """Add each (key, amount) of ``amounts`` (a new counter lapses ``timeout`` s after it was
        made); the new counts. What :mod:`mcp_django.ops.quotas.batches` takes units in batches
        with."""
        raise NotImplementedError(f"{type(self).__name__} does not count in batches")

    async def asubtract(self, amounts: Sequence[tuple[str, int]]) -> None:
        """Give back each (key, amount) of ``amounts``; a counter that lapsed stays gone."""
        raise NotImplementedError(f"{type(self).__name__} does not count in batches")

    def close(self) -> None:
        """Let go of what this backend holds open (the cache is being dropped)."""

    def hold(self, scopes: Sequence[Scope]) -> list[int]:
        """Hold one more slot in each of ``scopes``, without a lease (:attr:`inline` counters
        only): each one's count, this slot included."""
        raise NotImplementedError("only counters that count inline hold a slot without a lease")

    def release(self, scopes: Sequence[Scope]) -> None:
        """Give back a slot :meth:`hold` took in each of ``scopes`` (:attr:`inline` counters
        only)."""
        raise NotImplementedError("only counters that count inline hold a slot without a lease")

    # -- held slots: built on the above, which a subclass shouldn't need to override ----------

    async def ahold(
        self, scopes: Sequence[Scope], lease: float, buckets: Sequence[int]
    ) -> list[int]:
        """Hold one more slot in each of ``scopes``, registered in each of ``buckets``; each
        scope's count in the first bucket, this slot included."""
        keys = [slot_key(scope, lease, bucket) for scope in scopes for bucket in buckets]
        counts = await self.ahit(keys, 3 * lease)
        return counts[:: len(buckets)]

    async def arelease(self, scopes: Sequence[Scope], lease: float, buckets: Sequence[int]) -> None:
        """Give back the slot :meth:`ahold` registered in ``buckets`` of each of ``scopes``."""
        await self.aunhit(
            [slot_key(scope, lease, bucket) for bucket in buckets for scope in scopes]
        )

    def holding(self, scope: Scope, lease: float, bucket: int) -> int:
        """How many slots ``scope`` holds in ``bucket``."""
        return max(0, self.get(slot_key(scope, lease, bucket)))


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn`` (a network round trip) in a worker thread, off the event loop."""
    return await sync_to_async(fn, thread_sensitive=False)(*args)


class InProcessCounters(BaseCounters):
    """The counters of a cache in this process's memory (Django's LocMemCache).

    No other process sees such a cache, so its counters need none of the cache's machinery:
    rate counters are plain integers here, each lapsing ``timeout`` seconds after it was made,
    as the cache's entry would; held slots are counted without leases or buckets, as nothing
    in this process's memory outlives it. The cache's own key checks, lock and pickling cost
    about 5 us per count, and a tools/call counted nine times (its rate limit, then its running
    slot taken and given back in two scopes and two buckets: bench/profile.py). Nothing here
    awaits, so the event loop counts inline: a thread hop would cost more than the work.
    """

    leased = False
    inline = True

    #: Seconds between two sweeps of the counters that lapsed (they are ignored until then).
    SWEEP = 10.0

    def __init__(self, cache: BaseCache) -> None:
        super().__init__(cache)
        # Sync callers (check_tool_calls) may count from worker threads.
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._ends: dict[str, float] = {}
        self._next_sweep = 0.0
        #: Slots held, by scope; a scope holding none has no entry.
        self._held: dict[Scope, int] = {}

    def hit(self, keys: Sequence[str], timeout: float) -> list[int]:
        at = time.monotonic()
        counts = []
        with self._lock:
            if at >= self._next_sweep:
                self._sweep(at)
            for key in keys:
                ends = self._ends.get(key)
                if ends is None or ends <= at:
                    self._ends[key] = at + timeout
                    count = 1
                else:
                    count = self._counts[key] + 1
                self._counts[key] = count
                counts.append(count)
        return counts

    async def ahit(self, keys: Sequence[str], timeout: float) -> list[int]:
        return self.hit(keys, timeout)

    def unhit(self, keys: Sequence[str]) -> None:
        at = time.monotonic()
        with self._lock:
            for key in keys:
                ends = self._ends.get(key)
                if ends is not None and ends > at:
                    self._counts[key] -= 1

    async def aunhit(self, keys: Sequence[str]) -> None:
        self.unhit(keys)

    def get(self, key: str) -> int:
        ends = self._ends.get(key)
        return self._counts.get(key, 0) if ends is not None and ends > time.monotonic() else 0

    def hold(self, scopes: Sequence[Scope]) -> list[int]:
        """Hold one more slot in each of ``scopes``: each one's count, this slot included."""
        counts = []
        with self._lock:
            for scope in scopes:
                count = self._held[scope] = self._held.get(scope, 0) + 1
                counts.append(count)
        return counts

    def release(self, scopes: Sequence[Scope]) -> None:
        """Give back a slot :meth:`hold` took in each of ``scopes``."""
        with self._lock:
            for scope in scopes:
                count = self._held.get(scope, 0) - 1
                if count > 0:
                    self._held[scope] = count
                else:
                    self._held.pop(scope, None)

    async def ahold(
        self, scopes: Sequence[Scope], lease: float, buckets: Sequence[int]
    ) -> list[int]:
        return self.hold(scopes)

    async def arelease(self, scopes: Sequence[Scope], lease: float, buckets: Sequence[int]) -> None:
        self.release(scopes)

    def holding(self, scope: Scope, lease: float, bucket: int) -> int:
        return self._held.get(scope, 0)

    def clear(self) -> None:
        """Forget every count and held slot."""
        with self._lock:
            self._counts.clear()
            self._ends.clear()
            self._held.clear()

    def _sweep(self, at: float) -> None:
        for key in [key for key, ends in self._ends.items() if ends <= at]:
            del self._ends[key], self._counts[key]
        self._next_sweep = at + self.SWEEP


class CacheCounters(BaseCounters):
    """Counters as entries of any Django cache that keeps counters (memcached, the database,
    files...): ``incr``, and ``add`` first where the counter is not there yet. Atomic where the
    cache's ``add`` and ``incr`` are (memcached's).

    Django's generic ``incr`` (the database and file caches') reads the value and writes it back:
    concurrent counts could both read 5 and both write 6, and so both take the last unit of a
    cap (a race test saw 6 calls run under a cap of 5). With such a cache this process counts
    one at a time, under a lock; across processes nothing can serialise it (check W186).
    """

    def __init__(self, cache: BaseCache) -> None:
        super().__init__(cache)
        self.atomic = has_atomic_incr(cache)
        self._lock: contextlib.AbstractContextManager[Any] = (
            contextlib.nullcontext() if self.atomic else threading.Lock()
        )

    def hit(self, keys: Sequence[str], timeout: float) -> list[int]:
        return self._add([(key, 1) for key in keys], timeout)

    async def ahit(self, keys: Sequence[str], timeout: float) -> list[int]:
        return await self.aadd([(key, 1) for key in keys], timeout)

    def unhit(self, keys: Sequence[str]) -> None:
        self._subtract([(key, 1) for key in keys])

    async def aunhit(self, keys: Sequence[str]) -> None:
        await self.asubtract([(key, 1) for key in keys])

    def get(self, key: str) -> int:
        return int(self.cache.get(key) or 0)

    def _add(self, amounts: Sequence[tuple[str, int]], timeout: float) -> list[int]:
        with self._lock:
            return [self._count(key, timeout, amount) for key, amount in amounts]

    async def aadd(self, amounts: Sequence[tuple[str, int]], timeout: float) -> list[int]:
        return await _in_thread(self._add, amounts, timeout) if amounts else []

    def _subtract(self, amounts: Sequence[tuple[str, int]]) -> None:
        with self._lock:
            for key, amount in amounts:
                with contextlib.suppress(ValueError):  # gone already: nothing left to give back
                    self.cache.decr(key, amount)

    async def asubtract(self, amounts: Sequence[tuple[str, int]]) -> None:
        if amounts:
            await _in_thread(self._subtract, amounts)

    def _count(self, key: str, timeout: float, amount: int) -> int:
        # Most counts find the counter there: the add is skipped.
        for _ in range(3):
            try:
                return int(self.cache.incr(key, amount))
            except ValueError:
                self.cache.add(
                    key, 0, timeout=timeout
                )  # new (or expired, or evicted): make it, count again
        raise RuntimeError(
            f"The cache {self.cache!r} does not keep counters; QUOTAS needs one that does"
        )


#: DECRBY ARGV[1] only a counter that is there (a lapsed one stays gone), in one round trip.
_DECR_EXISTING = (
    "if redis.call('exists', KEYS[1]) == 1 then return redis.call('decrby', KEYS[1], "
    "ARGV[1]) end return nil"
)


@dataclass(frozen=True)
class _DjangoRedis:
    """What counting needs of one Django RedisCache."""

    #: Django's own sync client of the write server (its connection pool, its options).
    client: Any
    #: The write server's URL and the pool options an asyncio client would take; None when
    #: the cache has a parser or pool class of the user's, which may have no asyncio twin.
    url: str
    async_options: dict[str, Any] | None
    #: Django's connection pools (by server index), to disconnect when the cache is dropped.
    pools: dict[int, Any]


def read_django_redis_cache(cache: RedisCache) -> _DjangoRedis:
    """Read what counting needs from Django's RedisCache's private client (``cache._cache``).

    The only place mcp_django reads Django's internals, and why: Django's cache API has no
    pipeline, no asyncio client and no DECR-if-exists, so a count through it took three round
    trips (``add``, then ``incr``, which checks EXISTS first) on every tools/call, and a
    new ``redis.Redis`` per call. A Django release that changes these internals breaks here
    (tests/test_quotas.py's Redis tests run it), not somewhere else.
    """
    import redis  # optional dependency: Django's RedisCache needs it, and so does this backend

    private: Any = cache._cache
    # Made once: Django builds a new redis.Redis on every call, which costs more than the
    # round trip (bench/profile.py). Any key: writes all go to the first server.
    client = private.get_client(None, write=True)
    options = dict(private._pool_options)
    custom = (
        options.pop("parser_class", None) is not redis.connection.DefaultParser
        or private._pool_class is not redis.ConnectionPool
    )
    return _DjangoRedis(client, private._servers[0], None if custom else options, private._pools)


class RedisCounters(BaseCounters):
    """Counters in Django's Redis cache, each batch in one round trip: a pipeline of SET NX
    then INCR per key (EXPIRE NX would need Redis 7.0; the value stays a plain integer, as
    Django's own incr leaves it), and a script that DECRs only a counter that is there.

    The event loop counts on an asyncio client (one per loop: a connection belongs to the loop
    that opened it), which takes no thread: the thread hop around the sync client cost as much
    CPU as the round trip itself (bench/profile.py, on PostgreSQL + Redis). A cache with a
    parser or pool class of the user's counts with the sync client, in a worker thread.
    """

    def __init__(self, cache: RedisCache) -> None:
        super().__init__(cache)
        self.redis = read_django_redis_cache(cache)
        #: The lean connections of mcp_django.redis_wire, where the server allows them.
        self.wires = (
            Wires(self.redis.url, self.redis.async_options)
            if self.redis.async_options is not None
            else None
        )
        # Not weak keys: a client that has connected holds its loop (through its connections'
        # streams), so a weak key would never go. Clients of closed loops are dropped instead.
        self.async_clients: dict[asyncio.AbstractEventLoop, Any] = {}

    def async_client(self) -> Any | None:
        """The asyncio client for the running loop (made once per loop), or None where the
        cache's parser or pool class is the user's."""
        if self.redis.async_options is None:
            return None
        import redis.asyncio  # optional dependency (see above)

        loop = asyncio.get_running_loop()
        client = self.async_clients.get(loop)
        if client is None:
            # A process that runs one loop after another (asyncio.run per call, a test suite's
            # loop per test) would otherwise keep a client and its open socket for each.
            for closed in [other for other in self.async_clients if other.is_closed()]:
                del self.async_clients[closed]
            client = self.async_clients[loop] = redis.asyncio.Redis.from_url(
                self.redis.url, **self.redis.async_options
            )
        return client

    def _queue_adds(self, pipe: Any, amounts: Sequence[tuple[str, int]], timeout: float) -> None:
        for key, amount in amounts:
            full = self.cache.make_and_validate_key(key)
            pipe.set(full, 0, ex=max(1, math.ceil(timeout)), nx=True)
            pipe.incrby(full, amount)

    def _queue_subtracts(self, pipe: Any, amounts: Sequence[tuple[str, int]]) -> None:
        for key, amount in amounts:
            pipe.eval(_DECR_EXISTING, 1, self.cache.make_and_validate_key(key), amount)

    def _add(self, amounts: Sequence[tuple[str, int]], timeout: float) -> list[int]:
        if not amounts:
            return []
        pipe = self.redis.client.pipeline(transaction=False)
        self._queue_adds(pipe, amounts, timeout)
        return [int(count) for count in pipe.execute()[1::2]]

    async def aadd(self, amounts: Sequence[tuple[str, int]], timeout: float) -> list[int]:
        wire = self.wires.get() if self.wires is not None and amounts else None
        if wire is not None:
            ex = max(1, math.ceil(timeout))
            commands: list[list[Any]] = []
            for key, amount in amounts:
                full = self.cache.make_and_validate_key(key)
                commands += [["SET", full, 0, "EX", ex, "NX"], ["INCRBY", full, amount]]
            return [int(count) for count in (await wire.execute(commands))[1::2]]
        client = self.async_client() if amounts else None
        if client is None:
            return await _in_thread(self._add, amounts, timeout) if amounts else []
        pipe = client.pipeline(transaction=False)
        self._queue_adds(pipe, amounts, timeout)
        return [int(count) for count in (await pipe.execute())[1::2]]

    def _subtract(self, amounts: Sequence[tuple[str, int]]) -> None:
        if amounts:
            pipe = self.redis.client.pipeline(transaction=False)
            self._queue_subtracts(pipe, amounts)
            pipe.execute()

    async def asubtract(self, amounts: Sequence[tuple[str, int]]) -> None:
        wire = self.wires.get() if self.wires is not None and amounts else None
        if wire is not None:
            await wire.execute(
                [
                    ["EVAL", _DECR_EXISTING, 1, self.cache.make_and_validate_key(key), amount]
                    for key, amount in amounts
                ]
            )
            return
        client = self.async_client() if amounts else None
        if client is None:
            if amounts:
                await _in_thread(self._subtract, amounts)
            return
        pipe = client.pipeline(transaction=False)
        self._queue_subtracts(pipe, amounts)
        await pipe.execute()

    def hit(self, keys: Sequence[str], timeout: float) -> list[int]:
        return self._add([(key, 1) for key in keys], timeout)

    async def ahit(self, keys: Sequence[str], timeout: float) -> list[int]:
        return await self.aadd([(key, 1) for key in keys], timeout)

    def unhit(self, keys: Sequence[str]) -> None:
        self._subtract([(key, 1) for key in keys])

    async def aunhit(self, keys: Sequence[str]) -> None:
        await self.asubtract([(key, 1) for key in keys])

    def get(self, key: str) -> int:
        return int(self.cache.get(key) or 0)

    def close(self) -> None:
        if self.wires is not None:
            self.wires.close()
        # A Redis cache dropped with its pool still connected leaves its sockets to the garbage
        # collector, which closes them with a ResourceWarning (whenever it next runs, in whatever
        # code).
        for pool in self.redis.pools.values():
            pool.disconnect()

    async def aclose_clients(self) -> None:
        """Close the running loop's asyncio client, if it made one."""
        client = self.async_clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
        if self.wires is not None:
            await self.wires.aclose()


def has_atomic_incr(cache: BaseCache | type[BaseCache]) -> bool:
    """Whether ``cache`` (or a cache class) counts with an ``incr`` of its own (the server's:
    memcached, Redis; the local-memory cache's, under its lock), rather than Django's generic
    read-then-write one (the database and file caches'), which two counts can interleave.
    (``decr`` is ``incr`` by -1 in every Django backend.)"""
    cls = cache if isinstance(cache, type) else type(cache)
    return cls.incr is not BaseCache.incr


def counters_of(cache: BaseCache) -> BaseCounters:
    """The backend that counts in ``cache``, by the cache's class."""
    if isinstance(cache, LocMemCache):
        return InProcessCounters(cache)
    if isinstance(cache, RedisCache):
        return RedisCounters(cache)
    return CacheCounters(cache)


_process_counters: dict[str, BaseCounters] = {}


def counters_for(alias: str) -> BaseCounters:
    """The counters in this process's client of the cache ``alias``, both made once.
    (``caches[alias]`` is one per asyncio task: under ASGI every request built a new Redis
    client with its own connection pool and connected again; bench/ found that half the CPU of
    a call on Redis.)"""
    counters = _process_counters.get(alias)
    if counters is None:
        counters = _process_counters[alias] = counters_of(caches.create_connection(alias))
    return counters


def cache_for(alias: str) -> BaseCache:
    """This process's client of the cache ``alias`` (the one its counters count in)."""
    return counters_for(alias).cache


def _forget_caches(*, setting: str, **kwargs: Any) -> None:
    if setting == "CACHES":
        for counters in _process_counters.values():
            counters.close()
        _process_counters.clear()


setting_changed.connect(_forget_caches)


def forget_local_counts() -> None:
    """Forget every count kept in this process for a local-memory cache, as clearing that cache
    forgot them when they were its entries (tests start each from zero so)."""
    for counters in _process_counters.values():
        if isinstance(counters, InProcessCounters):
            counters.clear()


async def aclose_clients() -> None:
    """Close the running loop's asyncio Redis clients (tests end a loop with this; a server's
    loop lives as long as its process)."""
    for counters in _process_counters.values():
        if isinstance(counters, RedisCounters):
            await counters.aclose_clients()
