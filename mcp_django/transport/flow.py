"""Flow control for SSE writes: how many bytes a slow client may leave in flight, and how many
resumes may replay at once.

ASGI has no standard way to wait for the socket: uvicorn's ``send`` itself waits while the
transport is paused, but Daphne hands each body to Twisted, which buffers it and returns at
once. For Daphne we register a push producer on the Twisted request: Twisted pauses it when
the socket's buffer holds more than 64 KB and resumes it when it drains, and the stream waits
for that before writing the next page. Elsewhere ``drain`` returns at once, and the bounds are
the replay page size, the stream size cap and the resume limits.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections import Counter
from http import HTTPStatus
from typing import Any

from ..protocol.errors import TransportError
from ..protocol.limits import SERVER_BUSY


def twisted_request(send: Any) -> Any:
    """The Twisted request behind Daphne's ``send`` callable, or None under another server."""
    func = getattr(send, "func", None)
    if (
        not isinstance(send, functools.partial)
        or type(getattr(func, "__self__", None)).__module__ != "daphne.server"
    ):
        return None
    request = send.args[0] if send.args else None
    return request if hasattr(request, "registerProducer") and hasattr(request, "channel") else None


class WriteFlow:
    """Whether the client's socket can take more, where the server tells (Daphne)."""

    def __init__(self, send: Any) -> None:
        self._writable = asyncio.Event()
        self._writable.set()
        self._request: Any = None
        #: The connection is gone (Twisted said so): stop reading the store for it.
        self.lost = False
        request = twisted_request(send)
        if request is None:
            return
        try:
            request.registerProducer(self, True)
        except (ValueError, RuntimeError):
            return  # another producer holds the request: behave as under an unknown server
        self._request = request
        if getattr(request.channel, "_waitingForTransport", False):
            self._writable.clear()

    @property
    def supported(self) -> bool:
        return self._request is not None

    # Twisted's IPushProducer, called on the reactor, which Daphne runs on this event loop.
    def pauseProducing(self) -> None:
        self._writable.clear()

    def resumeProducing(self) -> None:
        self._writable.set()

    def stopProducing(self) -> None:
        # The connection is gone: nothing waits for it any more (the disconnect follows).
        self.lost = True
        self._writable.set()

    async def drain(self, timeout: float) -> bool:
        """Wait until the socket can take more; False when it did not within ``timeout``."""
        if self._writable.is_set():
            return True
        try:
            await asyncio.wait_for(self._writable.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def close(self) -> None:
        """Unregister from Twisted (before the response ends; the connection may be reused)."""
        request, self._request = self._request, None
        if request is None:
            return
        channel = getattr(request, "channel", None)
        if getattr(request, "producer", None) is self:
            request.producer = None
        if channel is not None and getattr(channel, "_requestProducer", None) is self:
            channel.unregisterProducer()
        self._writable.set()


class ResumeSlots:
    """Counts of resumes replaying at once in this process: per session, per user, in all."""

    def __init__(self) -> None:
        self.sessions: Counter[str] = Counter()
        self.users: Counter[Any] = Counter()
        self.total = 0

    def acquire(self, session_id: str, user_key: Any, settings: Any) -> None:
        """Take a slot, or refuse with 429 (this session or user) or 503 (this process)."""
        retry = {"Retry-After": str(max(1, math.ceil(settings.sse_retry_ms / 1000)))}
        if self.sessions[session_id] >= settings.max_resumes_per_session:
            raise TransportError(
                HTTPStatus.TOO_MANY_REQUESTS,
                f"Too Many Requests: this session already has {settings.max_resumes_per_session} "
                "resumes replaying",
                code=SERVER_BUSY,
                headers=retry,
            )
        if user_key is not None and self.users[user_key] >= settings.max_resumes_per_user:
            raise TransportError(
                HTTPStatus.TOO_MANY_REQUESTS,
                f"Too Many Requests: this user already has {settings.max_resumes_per_user} resumes "
                "replaying",
                code=SERVER_BUSY,
                headers=retry,
            )
        if self.total >= settings.max_resumes:
            raise TransportError(
                HTTPStatus.SERVICE_UNAVAILABLE,
                "Service Unavailable: too many resumes replaying; retry later",
                code=SERVER_BUSY,
                headers=retry,
            )
        self.sessions[session_id] += 1
        if user_key is not None:
            self.users[user_key] += 1
        self.total += 1

    def release(self, session_id: str, user_key: Any) -> None:
        self.sessions[session_id] -= 1
        if self.sessions[session_id] <= 0:
            del self.sessions[session_id]
        if user_key is not None:
            self.users[user_key] -= 1
            if self.users[user_key] <= 0:
                del self.users[user_key]
        self.total -= 1


resume_slots = ResumeSlots()
