"""Quotas counted in batches on a shared cache (mcp_django.ops.quotas.batches), on a real Redis: two
"processes" (two backends, each with its own client and its own batches) never hand out more
than a limit together, hand out all of it when callers keep asking, go to the cache once per
batch, renew what they reserve, give back what they do not use, and share one failure."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from django.core.cache import caches
from django.test import override_settings

from mcp_django.ops.quotas import backends as quota_backends
from mcp_django.ops.quotas import batches as quota_batches
from mcp_django.ops.quotas import limits as quotas
from mcp_django.protocol.errors import QuotaExceededError
from tests.test_quotas import Clock, _redis_caches, limits

LEASE = 60.0
#: 15 s into a lease: the first half of its bucket.
T0 = 60 * 28_000_000 + 15.0


class Process:
    """One process's counters in the shared Redis cache, with its own batches and a count of
    the round trips that add."""

    def __init__(self, clock: Clock) -> None:
        backend = quota_backends.counters_of(caches.create_connection("quota"))
        assert isinstance(backend, quota_backends.RedisCounters)
        self.backend = backend
        self.adds = 0
        original = backend.aadd

        async def counted(amounts: Sequence[tuple[str, int]], timeout: float) -> list[int]:
            self.adds += 1
            return await original(amounts, timeout)

        backend.aadd = counted  # type: ignore[method-assign]
        self.batches = quota_batches.Batches(backend, clock)

    def count(self, key: str) -> int:
        return self.backend.get(key)

    async def settled(self) -> None:
        """Wait for the give-backs running in the background."""
        while pending := [task for task in self.batches.tasks if not task.done()]:
            await asyncio.gather(*pending, return_exceptions=True)
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> Clock:
    moved = Clock()
    moved.now = T0
    return moved


@pytest.fixture
async def two(clock: Clock) -> AsyncIterator[tuple[Process, Process]]:
    with override_settings(CACHES=_redis_caches()):
        pair = (Process(clock), Process(clock))
        yield pair
        for process in pair:
            if process.batches.ticker is not None:
                process.batches.ticker.cancel()
            await process.settled()
            await process.backend.aclose_clients()
            process.backend.close()


def test_batches_are_a_sixty_fourth_of_a_rate_and_a_sixteenth_of_a_cap_within_bounds() -> None:
    assert [quota_batches.rate_batch(n) for n in (1, 127, 128, 600, 4096, 10**9)] == [
        1,
        1,
        2,
        9,
        64,
        64,
    ]
    assert [quota_batches.cap_batch(n) for n in (1, 31, 32, 64, 128, 256, 10**6)] == [
        1,
        1,
        2,
        4,
        8,
        16,
        16,
    ]


# -- rate limits -------------------------------------------------------------------------------------


async def test_two_processes_admit_exactly_a_rate_between_them_and_nothing_more(
    two: tuple[Process, Process],
) -> None:
    a, b = two
    key, rate = quotas.cache_key("rate", "test", secrets.token_hex(4)), 600  # batches of 9
    admitted = {id(a): 0, id(b): 0}
    refused = set()
    # Alternating, each keeps asking until it is refused: the whole rate is handed out.
    while len(refused) < 2:
        for process in (a, b):
            if await process.batches.admit(key, rate, 61):
                assert (
                    id(process) not in refused
                )  # refused once, refused for the rest of the window
                admitted[id(process)] += 1
            else:
                refused.add(id(process))
    assert sum(admitted.values()) == rate
    assert a.count(key) == rate  # the cut batch's rest was given back
    # Once per batch, not once per call; a refused call asks each time (while the other
    # process spends its last batch: at most 9 calls).
    assert a.adds + b.adds <= rate / 9 + 2 + 9


async def test_concurrent_calls_on_two_processes_never_pass_a_rate(
    two: tuple[Process, Process],
) -> None:
    a, b = two
    key, rate = quotas.cache_key("rate", "test", secrets.token_hex(4)), 200  # batches of 3
    results = await asyncio.gather(
        *(process.batches.admit(key, rate, 61) for _ in range(150) for process in (a, b))
    )
    assert sum(results) <= rate
    # What stays unused is at most a batch per process (one reservation at a time each).
    assert sum(results) >= rate - 2 * 3
    await a.settled()
    await b.settled()
    assert a.count(key) == rate


async def test_calls_waiting_for_a_reservation_share_its_error(
    two: tuple[Process, Process], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = two
    calls = 0

    async def unreachable(amounts: Sequence[tuple[str, int]], timeout: float) -> list[int]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        raise ConnectionError("Redis is away")

    monkeypatch.setattr(a.backend, "aadd", unreachable)
    key = quotas.cache_key("rate", "test", secrets.token_hex(4))
    results = await asyncio.gather(
        *(a.batches.admit(key, 600, 61) for _ in range(8)), return_exceptions=True
    )
    # One round trip failed, once, for all eight: none waited out a timeout of its own after it.
    assert calls == 1 and all(isinstance(r, ConnectionError) for r in results)


async def test_acheck_tool_calls_counts_in_batches_on_redis_and_still_refuses_over_the_rate(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quotas, "now", clock)
    caches_setting = _redis_caches()
    with (
        override_settings(CACHES=caches_setting),
        limits(CACHE="quota", TOOL_CALLS="128/minute"),
    ):  # batches of 2
        backend = quota_backends.counters_for("quota")
        caller = quotas.Caller(f"user:{secrets.randbelow(10**6)}", 1)
        results = [(await quotas.acheck_tool_calls(caller, ["add"]))[0] for _ in range(130)]
        assert results[:128] == [None] * 128
        assert all(
            isinstance(r, QuotaExceededError) and r.limit == "TOOL_CALLS" and r.retry_after == 45
            for r in results[128:]
        )
        window = int(clock.now // 60)
        assert backend.get(
            quotas.cache_key("rate", "TOOL_CALLS", caller.key, "60", str(window))
        ) in (128, 130)
        # The next window: a new batch.
        clock.advance(60)
        assert (await quotas.acheck_tool_calls(caller, ["add"]))[0] is None
        await quota_backends.aclose_clients()


# -- caps on held slots ------------------------------------------------------------------------------


SCOPE = ("running", "RUNNING_PER_SESSION", "session:batched")


async def test_two_processes_hold_exactly_a_cap_between_them(
    two: tuple[Process, Process], clock: Clock
) -> None:
    a, b = two
    scope = (*SCOPE[:2], f"session:{secrets.token_hex(4)}")
    cap = 64  # batches of 4
    pools = [a.batches.pool(scope, cap, LEASE), b.batches.pool(scope, cap, LEASE)]
    results = await asyncio.gather(*(pool.take() for _ in range(40) for pool in pools))
    assert sum(results) == cap  # every slot handed out, none past the cap
    key = quota_backends.slot_key(scope, LEASE, int(clock.now // LEASE))
    await a.settled()
    await b.settled()
    assert a.count(key) == cap
    assert a.adds + b.adds <= cap / 4 + 4  # a batch a round trip
    # Given back in this process; the cache sees at most two batches spare per process...
    for pool in pools:
        for _ in range(pool.held):
            pool.put_back()
    await a.settled()
    await b.settled()
    assert 0 <= a.count(key) <= 2 * 2 * 4
    # ...until a step finds them idle: everything back, the pools forgotten.
    await a.batches.tick()
    await b.batches.tick()
    assert a.count(key) == 0
    assert not a.batches.pools and not b.batches.pools


async def test_a_reservation_is_renewed_into_the_next_bucket_and_counts_there(
    two: tuple[Process, Process], clock: Clock
) -> None:
    a, _ = two
    scope = (*SCOPE[:2], f"session:{secrets.token_hex(4)}")
    pool = a.batches.pool(scope, 64, LEASE)
    assert await pool.take()
    bucket = int(clock.now // LEASE)
    assert (
        a.count(quota_backends.slot_key(scope, LEASE, bucket)) == 4
        and a.count(quota_backends.slot_key(scope, LEASE, bucket + 1)) == 0
    )
    clock.advance(LEASE / 2)  # past the middle of its bucket
    await a.batches.tick()
    assert a.count(quota_backends.slot_key(scope, LEASE, bucket + 1)) == 4
    clock.advance(LEASE / 2)  # the next bucket: the slot still counts, held
    assert a.count(quota_backends.slot_key(scope, LEASE, bucket + 1)) == 4
    # A take now registers in the bucket the pool is in (and the one it will be in).
    for _ in range(4):
        assert await pool.take()
    assert a.count(quota_backends.slot_key(scope, LEASE, bucket + 1)) == 8
    assert pool.held == 5 and pool.reserved == 8


async def test_a_cancelled_take_leaves_its_reservation_spare_and_nothing_counted_for_good(
    two: tuple[Process, Process], clock: Clock
) -> None:
    a, _ = two
    scope = (*SCOPE[:2], f"session:{secrets.token_hex(4)}")
    pool = a.batches.pool(scope, 64, LEASE)
    task = asyncio.ensure_future(pool.take())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.gather(*a.batches.inflight.values())
    assert pool.held == 0 and pool.reserved == 4  # granted, not held: spare
    await a.batches.tick()
    assert a.count(quota_backends.slot_key(scope, LEASE, int(clock.now // LEASE))) == 0


async def test_running_slots_of_a_large_cap_are_batched_and_of_a_small_one_not(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quotas, "now", clock)
    caches_setting = _redis_caches()
    with (
        override_settings(CACHES=caches_setting),
        limits(CACHE="quota", RUNNING_PER_SESSION=32, RUNNING_PER_USER=64),
    ):
        caller = quotas.Caller(f"user:{secrets.randbelow(10**6)}", 1)
        slots: list[Any] = [await quotas.RunningSlot.acquire(caller, "s-big") for _ in range(32)]
        assert all(slot is not None and slot.pools is not None for slot in slots)
        with pytest.raises(QuotaExceededError) as refused:
            await quotas.RunningSlot.acquire(caller, "s-big")
        assert refused.value.limit == "RUNNING_PER_SESSION"
        # The refused one took no user slot: 32 held, and the cache counts what was reserved.
        assert 32 <= quotas.running_requests("RUNNING_PER_USER", caller.key) <= 32 + 4
        for slot in slots:
            await slot.release()
        batches = quota_batches.batches_for(quota_backends.counters_for("quota"), clock)
        while pending := [task for task in batches.tasks if not task.done()]:
            await asyncio.gather(*pending)
        await batches.tick()
        assert quotas.running_requests("RUNNING_PER_SESSION", "session:s-big") == 0
        assert quotas.running_requests("RUNNING_PER_USER", caller.key) == 0
        if batches.ticker is not None:
            batches.ticker.cancel()
    with (
        override_settings(CACHES=caches_setting),
        limits(CACHE="quota", RUNNING_PER_SESSION=31, RUNNING_PER_USER=64),
    ):
        slot = await quotas.RunningSlot.acquire(caller, "s-small")
        assert slot is not None and slot.pools is None and slot.buckets  # slot by slot, leased
        await slot.release()
        await quota_backends.aclose_clients()


async def test_callers_that_find_a_finished_batch_already_taken_reserve_again_instead_of_spinning(
    two: tuple[Process, Process],
) -> None:
    """Callers that start while a reservation finishes (their first step queued before its
    done callback, as requests arriving together are): those left without a unit must start
    the next one. The finished reservation, still listed, answered them at once without
    yielding, so they spun forever and held the event loop. Run on a loop of its own in a
    thread, so a spin fails the test instead of hanging it."""
    first, _ = two
    key = f"mcp_django:test:spin:{secrets.token_hex(6)}"
    rate = 256  # batches of 4
    late = 2 * quota_batches.rate_batch(rate)
    outcome: list[Any] = []
    original = first.backend.aadd

    def run() -> None:
        async def race() -> list[bool]:
            spawned: list[asyncio.Task[bool]] = []

            async def aadd(amounts: Sequence[tuple[str, int]], timeout: float) -> list[int]:
                counted = await original(amounts, timeout)
                if not spawned:  # queued now: they run before the reservation's done callback
                    loop = asyncio.get_running_loop()
                    spawned.extend(
                        loop.create_task(first.batches.admit(key, rate, 3600)) for _ in range(late)
                    )
                return counted

            first.backend.aadd = aadd  # type: ignore[method-assign]
            # The backend's clients are per loop: this loop gets its own and closes it.
            try:
                return [await first.batches.admit(key, rate, 3600), *await asyncio.gather(*spawned)]
            finally:
                await first.backend.aclose_clients()

        outcome.append(asyncio.run(race()))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    await asyncio.to_thread(thread.join, 10)
    assert not thread.is_alive(), (
        "callers spun on a finished reservation (the event loop never turned)"
    )
    assert outcome == [[True] * (late + 1)]
    assert first.count(key) == 3 * quota_batches.rate_batch(
        rate
    )  # three batches, the last one partly used
