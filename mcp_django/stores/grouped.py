"""Group commit: what concurrent requests write shares one round trip.

A request that stores something before it answers (a new session, a stream's events) waits
for its write, and each write was a round trip of its own: a trip to Django's thread for sync
code and an INSERT. :class:`GroupWrite` lets one write run at a time and gathers whatever is
handed in meanwhile into the next one, so a lone request waits for nothing and concurrent ones
share the trip. The price: an item that waits for the write in flight also waits out that
write's timeout when its service has silently gone, before its own (the quota counts on Redis
do not share their pipelines for that reason: docs/performance.md, issue 27's third pass).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass(slots=True)
class _Queue(Generic[T, R]):
    """One event loop's items waiting for a write, and whether a write runs."""

    waiting: list[tuple[T, asyncio.Future[R | None]]] = field(default_factory=list)
    busy: bool = False
    #: The task writing what waits (held here: the loop keeps its tasks only weakly).
    writer: asyncio.Task[None] | None = None


class GroupWrite(Generic[T, R]):
    """Writes the items concurrent tasks hand to :meth:`write`, several to a call of ``write_many``.

    ``write_many`` takes a list of items and returns each one's result in order (or None, when
    there are none). One call runs at a time per event loop; the items handed in while it runs
    go together in the next call, and each task is released with its own item's result once
    that call returns. ``write_many`` writes all of its items or none (one transaction): a group
    that fails is written again item by item, so a failure reaches only the task whose item
    failed.
    """

    def __init__(self, write_many: Callable[[list[T]], Awaitable[Sequence[R] | None]]) -> None:
        self._write_many = write_many
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue[T, R]] = (
            weakref.WeakKeyDictionary()
        )

    async def write(self, item: T) -> R | None:
        """Return ``item``'s result once it is written (raise what its write raised)."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        if queue.busy:
            done: asyncio.Future[R | None] = loop.create_future()
            queue.waiting.append((item, done))
            return await done
        # Nothing is being written: write this item at once, from this task (a task of its own
        # for every write cost a lone stream about 4 % of its calls per core, bench/profile.py).
        queue.busy = True
        try:
            results = await self._write_many([item])
        finally:
            if queue.waiting:
                queue.writer = loop.create_task(self._drain(queue))
            else:
                queue.busy = False
        return results[0] if results else None

    async def _drain(self, queue: _Queue[T, R]) -> None:
        try:
            while queue.waiting:
                group, queue.waiting = queue.waiting, []
                try:
                    results = await self._write_many([item for item, _ in group])
                except asyncio.CancelledError:
                    for _, done in group + queue.waiting:
                        if not done.done():
                            done.cancel()
                    raise
                except Exception as exc:
                    if len(group) == 1:
                        _settle(group[0][1], None, exc)
                        continue
                    for item, done in group:
                        try:
                            alone = await self._write_many([item])
                        except Exception as failure:
                            _settle(done, None, failure)
                        else:
                            _settle(done, alone[0] if alone else None, None)
                    continue
                for n, (_, done) in enumerate(group):
                    _settle(done, results[n] if results else None, None)
        finally:
            queue.busy = False


def _settle(
    done: asyncio.Future[R | None], result: R | None, failure: BaseException | None
) -> None:
    if done.done():
        return  # its task was cancelled meanwhile
    if failure is None:
        done.set_result(result)
    else:
        done.set_exception(failure)
