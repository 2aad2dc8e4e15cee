"""The event loop the plain view runs on under WSGI: one per process, on a thread of its own.

Django serves a coroutine view under WSGI through ``async_to_sync``, which makes a thread and an
event loop for each request and ends them with it. A 2026-07-28 ``tools/call`` cost 3.9 ms of
server CPU that way under gunicorn, against 0.5 ms for the Django peer's sync view (bench/), and
what the engine leaves to the loop's background (the audit trail's writer, the sessions'
``initialized`` marks, a task run without a ``TASKS`` backend) had to be done before the answer
went, a database connection opened and closed for each call. The endpoint's view, sync under
WSGI, hands its coroutine to this process's loop and waits for the answer instead: the loop
outlives the request, as an ASGI server's does, and the background work runs there as it does
under ASGI. The engine's ORM calls (``sync_to_async``, thread-sensitive) run on asgiref's one
thread for sync code, as they do under an ASGI server.

The loop is made on first use in each process: gunicorn forks its workers from a master that
must not hold it. It is made again if its thread has ended (something stopped the loop): a
request handed to a loop nobody runs would wait for ever.
"""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class ProcessLoop:
    """An event loop running for the life of this process, on a daemon thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        """This process's loop, started if it is not running (first use, after a fork, or
        after its thread ended)."""
        if self.started():
            assert self._loop is not None
            return self._loop
        with self._lock:
            if not self.started():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="mcp_django process loop", daemon=True
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            assert self._loop is not None
            return self._loop

    def started(self) -> bool:
        """Whether this process's loop runs (it is made on first use)."""
        return (
            self._loop is not None
            and self._pid == os.getpid()
            and not self._loop.is_closed()
            and self._thread is not None
            and self._thread.is_alive()
        )

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coroutine`` on the loop, in a copy of the caller's context (what its
        middleware set: the language, say); the future of its result."""
        loop = self.loop()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def finished(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                done.cancel()
            elif task.exception() is not None:
                done.set_exception(task.exception())
            else:
                done.set_result(task.result())

        def start() -> None:
            loop.create_task(coroutine).add_done_callback(finished)

        loop.call_soon_threadsafe(start, context=contextvars.copy_context())
        return done

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop (see :meth:`submit`) and return its result; its
        exception is raised here.

        The caller waits on a bare lock that the task's end releases, not on a
        ``concurrent.futures.Future``: its condition and waiter list cost about a sixth of the
        round trip, which every request under WSGI makes."""
        loop = self.loop()
        finished = _thread.allocate_lock()
        finished.acquire()
        ended: list[asyncio.Task[T]] = []

        def end(task: asyncio.Task[T]) -> None:
            ended.append(task)
            finished.release()

        def start() -> None:
            loop.create_task(coroutine).add_done_callback(end)

        loop.call_soon_threadsafe(start, context=contextvars.copy_context())
        finished.acquire()
        return ended[0].result()


#: The process's loop.
process_loop = ProcessLoop()
