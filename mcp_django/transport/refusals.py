"""What a refused or failed request to the endpoint is answered, whichever adapter writes it.

The Channels consumer and the plain view both turn an exception at a request's top level into
one :class:`Answer` (status, JSON-RPC body, headers) through these functions, so that a refusal
reads the same under ASGI and WSGI.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError

from ..auth.base import AuthenticationFailed
from ..db import aclose_broken_connections, is_unreachable
from ..protocol.errors import (
    INTERNAL_ERROR,
    QUOTA_EXCEEDED,
    InvalidRequestError,
    MCPError,
    TransportError,
)
from ..protocol.jsonrpc import error_message
from ..tables import (
    missing_tables_message,
    names_missing_table,
    sessions_database,
    unapplied_migrations,
)

logger = logging.getLogger(__name__)

#: The answer when the database, the cache or the channel layer cannot be reached: a request
#: the client may send again shortly, not a bug to report.
UNAVAILABLE = TransportError(
    HTTPStatus.SERVICE_UNAVAILABLE,
    "Service Unavailable: the server could not reach its database, cache or channel layer; try "
    "again shortly",
    code=INTERNAL_ERROR,
    headers={"Retry-After": "1"},
)


@dataclass(frozen=True)
class Answer:
    """A whole HTTP answer: its status, its JSON body and its extra headers."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


def of_transport_error(exc: TransportError) -> Answer:
    return Answer(exc.status, exc.to_body(), exc.headers)


def whole_answer(
    status: int, answer: dict[str, Any], headers: dict[str, str] | None = None
) -> Answer:
    """One JSON-RPC answer as the whole HTTP response: 429 with Retry-After when a quota
    refused it, else ``status``."""
    status, extra = http_answer(answer, status)
    return Answer(status, answer, {**(headers or {}), **extra})


def refusal(exc: Exception) -> Answer | None:
    """The answer to a request refused before any of it ran: a transport rule broken, the
    credentials refused, a cap on sessions or streams reached. None for any other exception."""
    if isinstance(exc, TransportError):
        return of_transport_error(exc)
    if isinstance(exc, AuthenticationFailed):
        return Answer(
            exc.status, error_message(None, InvalidRequestError(exc.message)), exc.headers
        )
    if isinstance(exc, MCPError):
        return whole_answer(exc.http_status or HTTPStatus.BAD_REQUEST, error_message(None, exc))
    return None


async def failure(exc: Exception) -> Answer:
    """The answer to a request that failed at its top level: 503 for a database without
    mcp_django's tables or a backing service that cannot be reached (logged, and the broken
    connections closed so the next request reconnects), else 500 with the error logged."""
    unmigrated = await unmigrated_error(exc) if isinstance(exc, DatabaseError) else None
    if unmigrated is not None:
        return of_transport_error(unmigrated)
    if is_unreachable(exc):
        logger.warning(
            "Could not answer a request to the MCP endpoint: a backing service is unreachable (%r)",
            exc,
        )
        await aclose_broken_connections()  # the next request reconnects
        return of_transport_error(UNAVAILABLE)
    logger.error("Could not answer a request to the MCP endpoint", exc_info=exc)
    return of_transport_error(
        TransportError(HTTPStatus.INTERNAL_SERVER_ERROR, "Internal error", code=INTERNAL_ERROR)
    )


async def unmigrated_error(exc: DatabaseError) -> TransportError | None:
    """The 503 for a request that failed on one of mcp_django's tables because ``migrate`` was
    not run, or None when the tables are there (another failure, for the server's 500). The
    migrations are read only here, after such a failure, never on the way of a request."""
    if not names_missing_table(exc):
        return None
    using = sessions_database()
    try:
        pending = await sync_to_async(unapplied_migrations)(using)
    except DatabaseError:
        return None
    if not pending:
        return None
    logger.error(
        "An MCP request failed on a missing table: %s", missing_tables_message(pending, using)
    )
    return TransportError(
        HTTPStatus.SERVICE_UNAVAILABLE, missing_tables_message(pending, using), code=INTERNAL_ERROR
    )


def http_answer(answer: dict[str, Any], status: int) -> tuple[int, dict[str, str]]:
    """The status and extra headers of ``answer`` sent as a whole HTTP response: 429 and
    ``Retry-After`` (whole seconds, when the error says) for a quota refusal, else ``status``."""
    error = answer.get("error")
    if not isinstance(error, dict) or error.get("code") != QUOTA_EXCEEDED:
        return status, {}
    data = error.get("data")
    retry = data.get("retryAfter") if isinstance(data, dict) else None
    return HTTPStatus.TOO_MANY_REQUESTS, (
        {"Retry-After": str(retry)}
        if isinstance(retry, int) and not isinstance(retry, bool)
        else {}
    )
