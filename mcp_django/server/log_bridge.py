"""Forward Python ``logging`` records emitted while a tool runs to the client.

Off by default. List the loggers in ``MCP_DJANGO["LOG_BRIDGE_LOGGERS"]``; records from them
(at or above the session's ``logging/setLevel``) go out as ``notifications/message`` with the
formatted message only: no tracebacks, no ``extra`` data.
"""

from __future__ import annotations

import asyncio
import logging

from .context import current_context

# Python levels to RFC 5424 names used by MCP.
_LEVELS = [
    (logging.CRITICAL, "critical"),
    (logging.ERROR, "error"),
    (logging.WARNING, "warning"),
    (logging.INFO, "info"),
]


def mcp_level(levelno: int) -> str:
    for threshold, name in _LEVELS:
        if levelno >= threshold:
            return name
    return "debug"


class MCPLogHandler(logging.Handler):
    """A logging handler that sends records to the client of the tool call in progress."""

    def emit(self, record: logging.LogRecord) -> None:
        ctx = current_context.get()
        if ctx is None or ctx.loop is None or ctx.loop.is_closed():
            return
        try:
            message = record.getMessage()
        except Exception:  # a broken format string must not break the tool
            return
        coroutine = ctx.log(mcp_level(record.levelno), message, logger=record.name)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is ctx.loop:
            ctx.loop.create_task(coroutine)
        else:
            # A sync tool logs from Django's worker thread.
            asyncio.run_coroutine_threadsafe(coroutine, ctx.loop)


_installed: dict[str, MCPLogHandler] = {}


def install(logger_names: list[str]) -> None:
    """Attach the bridge to the named loggers (idempotent)."""
    for name in logger_names:
        if name not in _installed:
            handler = MCPLogHandler()
            logging.getLogger(name).addHandler(handler)
            _installed[name] = handler
