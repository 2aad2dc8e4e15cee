"""The three clocks of an open SSE stream of a session: keep-alive comments, re-checking the
credential, and the connection's time limit.

They run on one timer handle, not a task: most POST streams end within milliseconds, and an
idle stream then holds a handle instead of a task and its frame; a task runs only for the
moment a clock is due.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..conf import MCPSettings


class Clocked(Protocol):
    """What the clocks act on (an :class:`~mcp_django.transport.sse.SSEStream`)."""

    #: The response ended: no clock is armed again.
    closed: bool

    async def keepalive(self) -> None: ...

    async def still_authenticated(self) -> bool: ...

    async def disconnect(self) -> None: ...


class StreamClocks:
    """Keep-alive, re-check and time limit of one stream, on one timer handle."""

    def __init__(self, stream: Clocked, settings: MCPSettings) -> None:
        self.stream = stream
        self.settings = settings
        #: The next deadlines (keep-alive, re-check, end) on the loop's time.
        self.deadlines = (math.inf, math.inf, math.inf)
        self._timer: asyncio.TimerHandle | None = None
        #: The task of a clock that is due, while it runs.
        self.tasks: list[asyncio.Task[Any]] = []

    def start(self) -> None:
        """Arm the clocks a setting turns on (a keep-alive or re-check interval of 0, or no
        connection limit, turns that clock off)."""
        keepalive = self.settings.sse_keepalive_seconds
        reauth = self.settings.sse_reauth_seconds
        limit = self.settings.sse_max_connection_seconds
        now = asyncio.get_running_loop().time()
        self.deadlines = (
            now + keepalive if keepalive > 0 else math.inf,
            now + reauth if reauth > 0 else math.inf,
            now + limit if limit is not None else math.inf,
        )
        self._arm()

    def _arm(self) -> None:
        due = min(self.deadlines)
        if not self.stream.closed and due != math.inf:
            self._timer = asyncio.get_running_loop().call_at(due, self._due)

    def _due(self) -> None:
        self._timer = None
        if not self.stream.closed:
            self.tasks.append(asyncio.get_running_loop().create_task(self._tick()))

    async def _tick(self) -> None:
        try:
            next_keepalive, next_reauth, end = self.deadlines
            now = asyncio.get_running_loop().time()
            if now >= end:
                await self.stream.disconnect()
                return
            if now >= next_reauth:
                next_reauth = now + self.settings.sse_reauth_seconds
                # Close once the credential no longer names the user who opened the stream (a
                # revoked or expired token, a logged-out session).
                if not await self.stream.still_authenticated():
                    await self.stream.disconnect()
                    return
            if now >= next_keepalive:
                next_keepalive = now + self.settings.sse_keepalive_seconds
                if not self.stream.closed:
                    await self.stream.keepalive()
            self.deadlines = (next_keepalive, next_reauth, end)
            self._arm()
        finally:
            task = asyncio.current_task()
            if task in self.tasks:
                self.tasks.remove(task)

    def stop(self) -> None:
        """Disarm every clock; called once the connection is over."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in self.tasks:
            task.cancel()
        self.tasks.clear()
