"""The dispatch loop of an open stream: the client's messages (its disconnect) and the channel
layer's, handed to the consumer one at a time.

It does what ``channels.utils.await_many_dispatch`` does, for less memory per idle stream
(bench/, the memory case): that one keeps a task per source and, while nothing comes, an
``asyncio.wait`` (two more coroutines, a set, a future and a callback per source, each with
its own copy of the context). Here a source is a future, a waiting consumer one future, and
every callback shares one context; on the in-memory layer the channel's source is the layer's
own waiting future, with no coroutine or task behind it (``InMemoryChannelLayer.receive_later``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

Message = dict[str, Any]


class _Sources:
    """The pending receive of each source, and the future a waiting consumer sleeps on."""

    __slots__ = ("context", "pending", "waiter")

    def __init__(self) -> None:
        #: Shared by every callback: add_done_callback would copy the context for each one.
        self.context = contextvars.copy_context()
        self.pending: list[asyncio.Future[Message] | None] = []
        self.waiter: asyncio.Future[None] | None = None

    def wake(self, _: Any) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def arm(self, index: int, future: asyncio.Future[Message]) -> None:
        self.pending[index] = future
        future.add_done_callback(self.wake, context=self.context)


async def dispatch_many(
    sources: list[Callable[[], Awaitable[Message]]], dispatch: Callable[[Message], Awaitable[None]]
) -> None:
    """Receive from every source at once and await ``dispatch`` for each message, in the order
    of ``sources`` when several are ready, one message per source at a time, until ``dispatch``
    (or a source) raises. A source with a ``discard`` method (a bare future of the channel
    layer, which the layer must forget) gets its last future back on the way out, or None when
    that was dispatched; the others' are cancelled."""
    loop = asyncio.get_running_loop()
    state = _Sources()
    state.pending = [None] * len(sources)
    try:
        for index, source in enumerate(sources):
            state.arm(index, asyncio.ensure_future(source()))
        while True:
            if not any(future is not None and future.done() for future in state.pending):
                state.waiter = loop.create_future()
                try:
                    await state.waiter
                finally:
                    state.waiter = None
            for index, future in enumerate(state.pending):
                if future is not None and future.done():
                    state.pending[index] = None
                    await dispatch(future.result())
                    state.arm(index, asyncio.ensure_future(sources[index]()))
    finally:
        for source, future in zip(sources, state.pending, strict=True):
            discard = getattr(source, "discard", None)
            if discard is not None:
                discard(future)
            elif future is not None:
                future.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await future
