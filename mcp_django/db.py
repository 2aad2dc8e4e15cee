"""Database connections of the threads that run sync code (tools, stores) outside a Django request.

Django closes a connection that failed or outlived ``CONN_MAX_AGE`` at each request's start and
end (``close_old_connections`` on ``request_started``/``request_finished``). The MCP endpoint is
a Channels consumer, not Django's request handler: those signals never fire there, so a
connection that broke (PostgreSQL restarted) stayed in its thread, and every later query on it
failed until the process restarted (tests/multihost scenario 4).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)


def close_broken_connections() -> None:
    """Close this thread's connections that saw an error and no longer answer; the next query
    reconnects. Cheap when nothing failed: one flag per open connection."""
    for connection in connections.all(initialized_only=True):
        if (
            connection.connection is None
            or not connection.errors_occurred
            or connection.in_atomic_block
        ):
            continue
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()


async def aclose_broken_connections() -> None:
    """:func:`close_broken_connections` in Django's thread for sync code, where the stores,
    the sweeps and the session caps query outside any tool's :func:`in_healthy_thread`: after
    a PostgreSQL restart its connection stayed broken until a tool happened to run there, and
    every initialize and sweep before that failed (tests/multihost scenario 5, after 4)."""
    try:
        await sync_to_async(close_broken_connections, thread_sensitive=True)()
    except Exception:
        logger.exception("Could not close the broken database connections of the sync thread")


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says a backing service (the database, the cache, the channel layer's
    Redis) could not be reached or timed out, rather than a bug: such a request may be sent
    again once the service is back."""
    if isinstance(exc, (OperationalError, InterfaceError, ConnectionError, TimeoutError)):
        return True
    # redis-py's own errors are not OSErrors. It is an optional dependency: if it raised this,
    # it is imported already.
    redis_errors = sys.modules.get("redis.exceptions")
    return redis_errors is not None and isinstance(
        exc, (redis_errors.ConnectionError, redis_errors.TimeoutError)
    )


P = ParamSpec("P")
R = TypeVar("R")


def in_healthy_thread(func: Callable[P, R]) -> Callable[P, R]:
    """Wrap ``func`` (sync, about to run in a worker thread) to close, in that thread, the
    connections it found broken, once it returns or raises."""

    @functools.wraps(func)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        finally:
            close_broken_connections()

    return call
