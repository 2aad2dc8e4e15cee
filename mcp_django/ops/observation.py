"""What the engine tells its observers about each request it runs.

Every request a transport hands the engine, on every transport and revision, runs inside
:meth:`~mcp_django.server.engine.Engine.run`, which opens each enabled observer around it. An
observer
is a factory of async context managers: it sees the request before it runs and, on the way out,
its response (or the exception that ended it: a client's cancel is ``CancelledError``, a
2026-07-28 question to the client is ``InputRequired``). The audit trail and tracing are
observers; a project can add its own with :func:`register_observer`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..protocol.jsonrpc import Request
    from ..server.context import Context


@dataclass
class Observation:
    """One request as it runs."""

    #: The JSON-RPC request.
    message: Request
    #: The request's :class:`~mcp_django.server.context.Context`: its user, session and site.
    ctx: Context
    #: "streamable-http", "sse" (the 2024-11-05 HTTP+SSE transport) or "stdio".
    transport: str
    #: The protocol revision the request speaks: the session's, or the request's own (2026-07-28).
    revision: str
    started_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    started: float = field(default_factory=time.perf_counter)
    #: The JSON-RPC response, once there is one (None while running, or when none is sent).
    response: dict[str, Any] | None = None
    #: The trace the request runs in (32 hex digits), set by tracing when it is on.
    trace_id: str | None = None

    @property
    def duration(self) -> float:
        """Seconds since the request started."""
        return time.perf_counter() - self.started


#: ``observe(observation)`` returns an async context manager entered around the request.
Observer = Callable[[Observation], AbstractAsyncContextManager[None]]

#: Each observer with the predicate that says whether it is on (read per request, so settings
#: changed in tests take effect).
_observers: list[tuple[Observer, Callable[[], bool]]] = []


def register_observer(observer: Observer, enabled: Callable[[], bool] = lambda: True) -> None:
    """Run ``observer`` around every request while ``enabled()`` is true."""
    if all(existing is not observer for existing, _ in _observers):
        _observers.append((observer, enabled))


def unregister_observer(observer: Observer) -> None:
    _observers[:] = [(o, e) for o, e in _observers if o is not observer]


def active_observers() -> list[Observer]:
    return [observer for observer, enabled in _observers if enabled()]
