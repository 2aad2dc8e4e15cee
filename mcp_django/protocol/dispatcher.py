"""Route requests to handlers and turn whatever they raise into JSON-RPC errors.

The dispatcher performs no I/O: the transport hands it a message and a context object, the
handler table (built from an ``MCPSite``) does the work.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .errors import InternalError, MCPError, MethodNotFoundError
from .jsonrpc import Request, error_message, result_message

logger = logging.getLogger("mcp_django.protocol")

Handler = Callable[[dict[str, Any], Any], Awaitable[dict[str, Any]]]


async def dispatch(
    request: Request, handlers: Mapping[str, Handler], context: Any
) -> dict[str, Any]:
    """Run the handler for ``request.method`` and return the JSON-RPC response message."""
    handler = handlers.get(request.method)
    if handler is None:
        return error_message(
            request.id, MethodNotFoundError(f"Method not found: {request.method[:100]}")
        )
    try:
        result = await handler(request.params, context)
    except MCPError as exc:
        return error_message(request.id, exc)
    except Exception:
        # Never put a traceback on the wire; the server log has it.
        logger.exception("Unhandled error in MCP method %s", request.method)
        return error_message(request.id, InternalError())
    return result_message(request.id, result)
