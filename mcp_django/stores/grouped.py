"""Group commit: the rows that concurrent requests write share a thread hop and a statement.

A request that stores something before it answers (a new session, a stream's events) waits for
its write, and each write was a trip to Django's thread for sync code and an INSERT of its own.
:class:`GroupWrite` lets one write run at a time and gathers whatever is handed in meanwhile
into the next one, so a lone request waits for nothing and concurrent ones share the trip.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from asgiref.sync import sync_to_async

T = TypeVar("T")


@dataclass(slots=True)
class _Queue(Generic[T]):
    """One event loop's items waiting for a write, and whether a write runs."""

    waiting: list[tuple[T, asyncio.Future[None]]] = field(default_factory=list)
    busy: bool = False
    #: The task writing what waits (held here: the loop keeps its tasks only weakly).
    writer: asyncio.Task[None] | None = None


class GroupWrite(Generic[T]):
    """Writes the items concurrent tasks hand to :meth:`write`, several to a call of ``write_many``.

    ``write_many`` runs in Django's thread for sync code and must write all of its items or none
    (one transaction). One call runs at a time per event loop; the items handed in while it runs
    go together in the next call. A task is released once its item is committed. A group that
    fails is written again item by item, so a failure reaches only the task whose item failed.
    """

    def __init__(self, write_many: Callable[[list[T]], None]) -> None:
        self._write_many = write_many
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue[T]] = weakref.WeakKeyDictionary()

    async def write(self, item: T) -> None:
        """Return once ``item`` is committed (raise what its write raised)."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        if queue.busy:
            done: asyncio.Future[None] = loop.create_future()
            queue.waiting.append((item, done))
            await done
            return
        # Nothing is being written: write this item at once, from this task (a task of its own
        # for every write cost a lone stream about 4 % of its calls per core, bench/profile.py).
        queue.busy = True
        try:
            await sync_to_async(self._write_many)([item])
        finally:
            if queue.waiting:
                queue.writer = loop.create_task(self._drain(queue))
            else:
                queue.busy = False

    async def _drain(self, queue: _Queue[T]) -> None:
        try:
            while queue.waiting:
                group, queue.waiting = queue.waiting, []
                try:
                    await sync_to_async(self._write_many)([item for item, _ in group])
                except asyncio.CancelledError:
                    for _, done in group + queue.waiting:
                        if not done.done():
                            done.cancel()
                    raise
                except Exception as exc:
                    if len(group) == 1:
                        _settle(group[0][1], exc)
                        continue
                    for item, done in group:
                        try:
                            await sync_to_async(self._write_many)([item])
                        except Exception as alone:
                            _settle(done, alone)
                        else:
                            _settle(done, None)
                    continue
                for _, done in group:
                    _settle(done, None)
        finally:
            queue.busy = False


def _settle(done: asyncio.Future[None], failure: BaseException | None) -> None:
    if done.done():
        return  # its task was cancelled meanwhile
    if failure is None:
        done.set_result(None)
    else:
        done.set_exception(failure)
