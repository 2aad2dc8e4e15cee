"""The object a tool, resource or prompt receives when it asks for one (``ctx: Context``).

It is the same whatever the transport: it knows who is calling, and it sends progress and log
messages on the stream of the request being answered.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from .protocol.jsonrpc import RequestId, notification_message
from .protocol.lifecycle import LOG_LEVELS, level_enabled

if TYPE_CHECKING:
    from django.http import HttpRequest

    from .models import Session
    from .sites import MCPSite

logger = logging.getLogger(__name__)


class Emitter(Protocol):
    """Where messages related to the current request go (the request's SSE stream)."""

    async def send(self, message: dict[str, Any]) -> None: ...

    async def close_connection(self) -> None: ...


class Log:
    """``ctx.log.info("...")`` and friends: ``notifications/message`` at or above the session's level."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    async def __call__(self, level: str, data: Any, logger: str | None = None) -> None:
        if level not in LOG_LEVELS:
            raise ValueError(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        session = self._ctx.session
        threshold = session.log_level if session is not None and session.log_level else None
        if not level_enabled(level, threshold):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self._ctx.send_notification("notifications/message", params)

    async def debug(self, data: Any, logger: str | None = None) -> None:
        await self("debug", data, logger)

    async def info(self, data: Any, logger: str | None = None) -> None:
        await self("info", data, logger)

    async def notice(self, data: Any, logger: str | None = None) -> None:
        await self("notice", data, logger)

    async def warning(self, data: Any, logger: str | None = None) -> None:
        await self("warning", data, logger)

    async def error(self, data: Any, logger: str | None = None) -> None:
        await self("error", data, logger)

    async def critical(self, data: Any, logger: str | None = None) -> None:
        await self("critical", data, logger)

    async def alert(self, data: Any, logger: str | None = None) -> None:
        await self("alert", data, logger)

    async def emergency(self, data: Any, logger: str | None = None) -> None:
        await self("emergency", data, logger)


class Context:
    """What a tool knows about the request it serves, and how it talks back while it runs."""

    def __init__(
        self,
        *,
        site: MCPSite,
        request: HttpRequest | None,
        user: Any,
        session: Session | None,
        request_id: RequestId | None = None,
        meta: dict[str, Any] | None = None,
        emitter: Emitter | None = None,
    ) -> None:
        self.site = site
        self.request = request
        self.user = user
        self.session = session
        self.request_id = request_id
        self.meta = meta or {}
        self._emitter = emitter
        self._last_progress: float | None = None
        self.log = Log(self)

    @property
    def session_id(self) -> str | None:
        return self.session.pk if self.session is not None else None

    @property
    def progress_token(self) -> str | int | None:
        token = self.meta.get("progressToken")
        if isinstance(token, bool) or not isinstance(token, (str, int)):
            return None
        return token

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self.session.client_capabilities if self.session is not None else {}

    async def send_notification(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification related to this request (dropped when there is no stream)."""
        if self._emitter is None:
            logger.debug("No stream for %s on a JSON-answered request; not sent", method)
            return
        await self._emitter.send(notification_message(method, params))

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` with the client's token; nothing if it gave none."""
        token = self.progress_token
        if token is None:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            raise ValueError(f"Progress must increase: {progress} after {self._last_progress}")
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.send_notification("notifications/progress", params)

    async def close_stream(self) -> None:
        """Close this request's SSE connection now; the client resumes with ``Last-Event-ID``.

        Events sent afterwards are stored and replayed on resume (2025-11-25 SSE polling).
        """
        if self._emitter is not None:
            await self._emitter.close_connection()
