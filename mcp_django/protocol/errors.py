"""JSON-RPC and MCP error codes, and the exceptions that carry them onto the wire.

Errors are data: each subclass only sets ``code``, ``default_message`` and, where the spec fixes
one, ``http_status``. Handlers raise them; the dispatcher turns them into JSON-RPC error objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any, Final

PARSE_ERROR: Final = -32700
"""The body is not valid JSON (or not UTF-8)."""

INVALID_REQUEST: Final = -32600
"""The JSON is not a valid JSON-RPC 2.0 message for this revision."""

METHOD_NOT_FOUND: Final = -32601
"""The method does not exist or its capability is not offered."""

INVALID_PARAMS: Final = -32602
"""Bad params: unknown tool or prompt, missing arguments, invalid cursor, bad log level."""

INTERNAL_ERROR: Final = -32603
"""An unexpected failure inside the server; details stay in the server's log."""

RESOURCE_NOT_FOUND: Final = -32002
"""``resources/read`` of a URI that does not exist (or that the user may not see)."""

URL_ELICITATION_REQUIRED: Final = -32042
"""The request needs a URL-mode elicitation first (2025-11-25 only)."""

HEADER_MISMATCH: Final = -32020
"""HTTP headers missing, malformed or disagreeing with the body (2026-07-28)."""

MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
"""The request needs a client capability its ``_meta`` did not declare (2026-07-28)."""

UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
"""The request's ``_meta`` protocol version is not one the server serves (2026-07-28)."""

QUOTA_EXCEEDED: Final = -32029
"""A rate limit or a cap on what one caller holds open was reached (HTTP 429): ``data.limit``
names the ``QUOTAS`` entry, ``data.retryAfter`` (when the server knows) the seconds to wait."""


class MCPError(Exception):
    """An error that is answered to the client as a JSON-RPC error object."""

    code: int = INTERNAL_ERROR
    default_message: str = "Internal error"
    #: The id of the request this error answers, when it could be read from a bad message.
    request_id: str | int | None = None
    #: The HTTP status the spec demands for this error, or None to let the transport decide.
    http_status: int | None = None

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)

    def to_error(self) -> dict[str, Any]:
        """Return the JSON-RPC ``error`` member for this exception."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(MCPError):
    """-32700: the body is not JSON."""

    code = PARSE_ERROR
    default_message = "Parse error"


class InvalidRequestError(MCPError):
    """-32600: the message is not a valid JSON-RPC request."""

    code = INVALID_REQUEST
    default_message = "Invalid Request"


class MethodNotFoundError(MCPError):
    """-32601: the method (or the tool, resource or prompt it names) is not offered to this
    caller."""

    code = METHOD_NOT_FOUND
    default_message = "Method not found"


class InvalidParamsError(MCPError):
    """-32602: the params are missing, malformed or out of bounds."""

    code = INVALID_PARAMS
    default_message = "Invalid params"


class InternalError(MCPError):
    """-32603: the server could not finish the request."""

    code = INTERNAL_ERROR
    default_message = "Internal error"


class ResourceNotFoundError(MCPError):
    """-32002: no resource at that URI, or none this caller may read (the same answer)."""

    code = RESOURCE_NOT_FOUND
    default_message = "Resource not found"

    def __init__(self, uri: str, message: str | None = None) -> None:
        super().__init__(message or f"Resource not found: {uri}", data={"uri": uri})


class URLElicitationRequiredError(MCPError):
    """-32042: the user must first finish a page of this site; ``data.elicitations`` holds its
    URL."""

    code = URL_ELICITATION_REQUIRED
    default_message = "This request requires more information."


class InvalidRequestMetaError(InvalidParamsError):
    """-32602 for a modern request whose ``_meta`` lacks or garbles a required field.

    The 2026-07-28 spec (basic/index, "_meta") demands HTTP 400 here, unlike other -32602s.
    """

    http_status = HTTPStatus.BAD_REQUEST


class HeaderMismatchError(MCPError):
    """Headers and body disagree, or a required header is missing or malformed (HTTP 400)."""

    code = HEADER_MISMATCH
    default_message = "Header mismatch"
    http_status = HTTPStatus.BAD_REQUEST


class MissingRequiredClientCapabilityError(MCPError):
    """The request needs capabilities the client did not declare (HTTP 400).

    ``data.requiredCapabilities`` is a ``ClientCapabilities`` object, as schema.ts defines it.
    """

    code = MISSING_REQUIRED_CLIENT_CAPABILITY
    default_message = "Missing required client capability"
    http_status = HTTPStatus.BAD_REQUEST

    def __init__(
        self,
        message: str | None = None,
        data: Any = None,
        *,
        required_capabilities: dict[str, Any] | None = None,
    ) -> None:
        if required_capabilities is not None:
            data = {"requiredCapabilities": required_capabilities}
        super().__init__(message, data)


class UnsupportedProtocolVersionError(MCPError):
    """The requested version is not served; ``data`` lists what is, so the client can retry (HTTP
    400)."""

    code = UNSUPPORTED_PROTOCOL_VERSION
    default_message = "Unsupported protocol version"
    http_status = HTTPStatus.BAD_REQUEST

    def __init__(
        self,
        message: str | None = None,
        data: Any = None,
        *,
        requested: str | None = None,
        supported: Sequence[str] = (),
    ) -> None:
        if requested is not None:
            data = {"supported": list(supported), "requested": requested}
        super().__init__(message, data)


class QuotaExceededError(MCPError):
    """A rate limit or a cap refused the request (HTTP 429, with ``Retry-After`` when known).

    ``limit`` is the ``QUOTAS`` key that refused it, ``retry_after`` the whole seconds until a
    retry can pass (None when that depends on the client, as for a cap on open streams).
    """

    code = QUOTA_EXCEEDED
    default_message = "Too many requests"
    http_status = HTTPStatus.TOO_MANY_REQUESTS

    def __init__(
        self,
        message: str | None = None,
        data: Any = None,
        *,
        limit: str | None = None,
        retry_after: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        if limit is not None:
            data = {"limit": limit, **(details or {})}
            if retry_after is not None:
                data["retryAfter"] = retry_after
        super().__init__(message, data)
        self.limit = limit
        self.retry_after = retry_after


#: The one table of HTTP statuses for JSON-RPC errors: a 2026-07-28 response answered whole
#: carries this status for these codes (400 or 404, so that a dual-era client tells a modern
#: server from a legacy one by a 4xx whose body is a recognised modern error), 200 for any other
#: (see :func:`mcp_django.protocol.modern.http_status`), as streamable-http.mdx fixes them.
#: -32602 is absent: only a malformed ``_meta`` makes it a 400, and that is refused before
#: dispatch (:class:`InvalidRequestMetaError` carries its own ``http_status``). The handshake
#: era's transport refusals carry their own status (:class:`TransportError`).
ERROR_CODE_HTTP_STATUS: Final[dict[int, int]] = {
    PARSE_ERROR: HTTPStatus.BAD_REQUEST,
    INVALID_REQUEST: HTTPStatus.BAD_REQUEST,
    METHOD_NOT_FOUND: HTTPStatus.NOT_FOUND,
    HEADER_MISMATCH: HTTPStatus.BAD_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY: HTTPStatus.BAD_REQUEST,
    UNSUPPORTED_PROTOCOL_VERSION: HTTPStatus.BAD_REQUEST,
}


class TransportError(Exception):
    """An HTTP-level refusal (header rules), answered with ``status`` and an id-less error body."""

    def __init__(
        self,
        status: int,
        message: str,
        code: int = INVALID_REQUEST,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}
        super().__init__(message)

    def to_body(self) -> dict[str, Any]:
        """Return the JSON-RPC error message (without id) sent as the HTTP body."""
        return {"jsonrpc": "2.0", "id": None, "error": {"code": self.code, "message": self.message}}
