"""Counting on a shared cache in batches: a process takes a limit's units from the cache several
at a time and hands them out itself.

On Redis a tools/call counted with three round trips (its rate limit, then its running slot taken
and given back), and they were half the server's CPU per call on PostgreSQL + Redis
(bench/profile.py). Here a process takes units ahead, a batch a round trip, and counts calls
against them in its own memory; it goes to the cache again only when its batch runs out.

What a limit guarantees across every process that shares the cache:

* **Never more than the limit.** A unit is handed out only after the cache counted it, and the
  cache grants no units past the limit: a batch that would pass it is cut to what is left, and
  the rest is given back.
* **Possibly less, by what other processes hold unused.** For a rate of N a window a batch is
  ``N // 64`` units (at most 64), and a process holds at most one batch unused, until the window
  ends. For a cap of N a batch is ``N // 16`` slots (at most 16); a process keeps at most two
  batches spare while its requests come and go (past that it gives back all but one, so a load
  that rises and falls by a batch does not reserve and give back each time), and gives them all
  back once the scope has been idle for a step of :meth:`Batches.tick` (a tenth of the lease,
  6 s by default). With P processes a caller can be refused with N less what the other P - 1
  processes hold unused in use.
* **A limit too small for batches of two** (a rate under 128 a window, a cap under 32) is counted
  call by call, exactly, as before; :mod:`mcp_django.ops.quotas.limits` does not come here for it.
* **A process that dies** leaves its slots counted until its registrations lapse (two leases at
  most, as a held slot's), and its unused rate units until their window ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from .backends import BaseCounters, Scope, slot_key

logger = logging.getLogger("mcp_django.ops.quotas")

#: Seconds between two sweeps of the rate windows that ended.
SWEEP = 10.0


def rate_batch(count: int) -> int:
    """Units of a rate of ``count`` a window a process takes at once (1: counted call by call)."""
    return max(1, min(64, count // 64))


def cap_batch(cap: int) -> int:
    """Slots of a cap of ``cap`` a process reserves at once (1: counted slot by slot)."""
    return max(1, min(16, cap // 16))


def buckets_for(at: float, lease: float) -> list[int]:
    """The buckets a slot taken at ``at`` registers in: the current one and, from its middle on,
    the next (a renewal would register it there next)."""
    bucket = int(at // lease)
    return [bucket, bucket + 1] if at - bucket * lease >= lease / 2 else [bucket]


class SlotPool:
    """The slots of one scope (kind, limit, who) this process reserved in the cache, and how many
    of them its requests hold. Each bucket it is registered in counts its whole reservation."""

    def __init__(self, batches: Batches, scope: Scope, cap: int, lease: float) -> None:
        self.batches = batches
        self.scope = scope
        self.cap = cap
        self.lease = lease
        self.batch = cap_batch(cap)
        #: Slots handed out to requests of this process.
        self.held = 0
        #: Slots the cache granted this process (held or spare).
        self.reserved = 0
        #: Slots asked of the cache and not answered yet.
        self.pending = 0
        #: What this process counted in each bucket (asked for included).
        self.registered: dict[int, int] = {}
        self.trimming = False

    @property
    def idle(self) -> bool:
        return not self.held and not self.pending

    def take_local(self) -> bool:
        """Hand out a spare slot, if there is one: no I/O."""
        if self.held < self.reserved:
            self.held += 1
            return True
        return False

    async def take(self) -> bool:
        """Hand out a slot, reserving a batch in the cache when none is spare (one reservation
        at a time: concurrent takes wait for it, and share its error): False at the cap."""
        while not self.take_local():
            if not await self.batches.once(self, self._reserve):
                return False
        return True

    def put_back(self) -> None:
        """A request gives its slot back; past two batches spare, all but one go back to the
        cache."""
        self.held -= 1
        if self.reserved - self.held > 2 * self.batch and not self.trimming:
            self.trimming = True
            self.batches.spawn(self._trim())

    async def _trim(self) -> None:
        self.trimming = False
        self.reserved = min(self.reserved, self.held + self.batch)
        await self.settle(self.batches.clock(), renew=False)

    async def _reserve(self) -> int:
        at = self.batches.clock()
        current = int(at // self.lease)
        want = self.batch
        targets = sorted(
            {*buckets_for(at, self.lease), *(b for b in self.registered if b >= current)}
        )
        for bucket in targets:
            self.registered[bucket] = self.registered.get(bucket, 0) + want
        self.pending += want
        granted = 0
        try:
            counts = await self.batches.backend.aadd(
                [(self.key(b), want) for b in targets], 3 * self.lease
            )
            granted = max(0, min(want, self.cap - (counts[0] - want)))
        except BaseException:
            # If the cache counted them, they lapse with their buckets (erring on refusing).
            for bucket in targets:
                self.registered[bucket] -= want
            raise
        finally:
            self.pending -= want
            self.reserved += granted
        if granted < want:
            for bucket in targets:
                self.registered[bucket] -= want - granted
            self.batches.spawn(
                self.batches.backend.asubtract([(self.key(b), want - granted) for b in targets])
            )
        return granted

    def key(self, bucket: int) -> str:
        return slot_key(self.scope, self.lease, bucket)

    async def settle(self, at: float, *, renew: bool) -> None:
        """Bring each bucket this pool is registered in to what it reserved (and asked for):
        down, or up into the current and next buckets too when ``renew``."""
        current = int(at // self.lease)
        for bucket in [b for b in self.registered if b < current]:
            del self.registered[bucket]  # counts for nobody any more
        wanted = self.reserved + self.pending
        buckets = set(self.registered)
        if renew and wanted:
            buckets.update(buckets_for(at, self.lease))
        changes = {bucket: wanted - self.registered.get(bucket, 0) for bucket in sorted(buckets)}
        changes = {bucket: change for bucket, change in changes.items() if change}
        for bucket in changes:
            self.registered[bucket] = wanted
        adds = [(self.key(bucket), change) for bucket, change in changes.items() if change > 0]
        subtracts = [
            (self.key(bucket), -change) for bucket, change in changes.items() if change < 0
        ]
        try:
            if adds:
                await self.batches.backend.aadd(adds, 3 * self.lease)
        except BaseException:
            # Not counted, as far as this process knows: tried again next step.
            for bucket, change in changes.items():
                if change > 0 and bucket in self.registered:
                    self.registered[bucket] -= change
            raise
        if subtracts:
            # A subtraction that fails lapses with its bucket (erring on refusing).
            await self.batches.backend.asubtract(subtracts)
        for bucket in [b for b, n in self.registered.items() if n <= 0]:
            del self.registered[bucket]


class Batches:
    """What this process counts in batches on one shared cache's counters (see the module's
    docstring): the rate units it holds, by window key, and its slot pools, by scope."""

    def __init__(self, backend: BaseCounters, clock: Callable[[], float]) -> None:
        self.backend = backend
        #: The time slots are aligned on (mcp_django.ops.quotas.limits.now, which tests move).
        self.clock = clock
        #: Unused units of a rate window: key -> [units, when to forget it (monotonic)].
        self.units: dict[str, list[float]] = {}
        self.next_sweep = 0.0
        self.pools: dict[tuple[Scope, float, int], SlotPool] = {}
        #: The reservation running for a window key or a pool: others wait for it.
        self.inflight: dict[Any, asyncio.Task[int]] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.ticker: asyncio.Task[None] | None = None

    async def once(self, owner: Any, reserve: Callable[[], Coroutine[Any, Any, int]]) -> int:
        """What ``reserve()`` granted, run for ``owner`` unless one is running already (then
        its result, or its error: a cache that does not answer costs each caller one timeout,
        not one per caller before it). Shielded: the reservation outlives a cancelled caller."""
        task = self.inflight.get(owner)
        # A finished one is still listed until its done callback runs, on the loop's next turn:
        # awaited again it answers at once, without yielding, and a caller that found its units
        # already taken by others looped on it forever and held the event loop (a process under
        # a race of calls stopped answering altogether).
        if task is None or task.done():
            task = self.inflight[owner] = asyncio.get_running_loop().create_task(reserve())
            task.add_done_callback(lambda done: self._reserved(owner, done))
        return await asyncio.shield(task)

    def _reserved(self, owner: Any, task: asyncio.Task[int]) -> None:
        if self.inflight.get(owner) is task:
            del self.inflight[owner]
        if not task.cancelled():
            task.exception()  # each waiter got it; retrieved here too, in case none is left

    # -- rate limits ---------------------------------------------------------------------------

    async def admit(self, key: str, count: int, timeout: float) -> bool:
        """Take one unit of a rate of ``count`` a window, counted on ``key`` (the window's
        counter, lapsing ``timeout`` s after it was made): whether one was left."""
        while True:
            held = self.units.get(key)
            if held is not None and held[0] > 0:
                held[0] -= 1
                return True
            if not await self.once(key, lambda: self._reserve_units(key, count, timeout)):
                return False

    async def _reserve_units(self, key: str, count: int, timeout: float) -> int:
        want = rate_batch(count)
        (total,) = await self.backend.aadd([(key, want)], timeout)
        granted = max(0, min(want, count - (total - want)))
        if granted < want:
            self.spawn(self.backend.asubtract([(key, want - granted)]))
        if granted:
            at = time.monotonic()
            if at >= self.next_sweep:
                for ended in [k for k, (_, forget) in self.units.items() if forget <= at]:
                    del self.units[ended]
                self.next_sweep = at + SWEEP
            self.units.setdefault(key, [0, at + timeout])[0] += granted
        return granted

    # -- caps on what is held ------------------------------------------------------------------

    def pool(self, scope: Scope, cap: int, lease: float) -> SlotPool:
        """The pool of ``scope``'s slots (made on first use, forgotten once idle)."""
        pool = self.pools.get((scope, lease, cap))
        if pool is None:
            pool = self.pools[scope, lease, cap] = SlotPool(self, scope, cap, lease)
        loop = asyncio.get_running_loop()
        if self.ticker is None or self.ticker.done() or self.ticker.get_loop() is not loop:
            self.ticker = loop.create_task(self._tick_while_pooled(lease * 0.1))
        return pool

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` (a give-back nobody waits for) in the background, logging a failure."""
        task = asyncio.get_running_loop().create_task(work)
        if len(self.tasks) > 64:
            # Each task's callback removes it, on the loop's next turn; a caller that never lets
            # the loop turn (on Python 3.12, awaiting gather() of finished tasks does not yield)
            # would see them stay. Bounded here whatever the callers do.
            self.tasks = {t for t in self.tasks if not t.done()}
        self.tasks.add(task)
        task.add_done_callback(self._spawned)

    def _spawned(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning(
                "Could not give quota units back to the cache (they lapse on their own)",
                exc_info=task.exception(),
            )

    async def _tick_while_pooled(self, step: float) -> None:
        while self.pools:
            await asyncio.sleep(step)
            await self.tick()

    async def tick(self) -> None:
        """One step: each pool registers its reservation in the next bucket from the current
        one's middle on and keeps at most two batches spare; an idle pool gives back everything and
        is forgotten."""
        at = self.clock()
        for key, pool in list(self.pools.items()):
            try:
                if pool.idle:
                    pool.reserved = 0
                    await pool.settle(at, renew=False)
                    if (
                        pool.idle
                        and not pool.reserved
                        and pool not in self.inflight
                        and self.pools.get(key) is pool
                    ):
                        del self.pools[key]
                    continue
                pool.reserved = min(pool.reserved, pool.held + 2 * pool.batch)
                await pool.settle(at, renew=True)
            except Exception:
                logger.exception(
                    "Could not renew the %s slots reserved in the cache", pool.scope[0]
                )


_batches: weakref.WeakKeyDictionary[BaseCounters, Batches] = weakref.WeakKeyDictionary()


def batches_for(backend: BaseCounters, clock: Callable[[], float]) -> Batches:
    """This process's batches on ``backend`` (made once per backend)."""
    batches = _batches.get(backend)
    if batches is None:
        batches = _batches[backend] = Batches(backend, clock)
    return batches
