"""JSON-RPC and MCP error codes, and the exceptions that carry them onto the wire.

Errors are data: each subclass only sets ``code`` and ``default_message``. Handlers raise
them; the dispatcher turns them into JSON-RPC error objects.
"""

from __future__ import annotations

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


class MCPError(Exception):
    """An error that is answered to the client as a JSON-RPC error object."""

    code: int = INTERNAL_ERROR
    default_message: str = "Internal error"
    #: The id of the request this error answers, when it could be read from a bad message.
    request_id: str | int | None = None

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
    code = PARSE_ERROR
    default_message = "Parse error"


class InvalidRequestError(MCPError):
    code = INVALID_REQUEST
    default_message = "Invalid Request"


class MethodNotFoundError(MCPError):
    code = METHOD_NOT_FOUND
    default_message = "Method not found"


class InvalidParamsError(MCPError):
    code = INVALID_PARAMS
    default_message = "Invalid params"


class InternalError(MCPError):
    code = INTERNAL_ERROR
    default_message = "Internal error"


class ResourceNotFoundError(MCPError):
    code = RESOURCE_NOT_FOUND
    default_message = "Resource not found"

    def __init__(self, uri: str, message: str | None = None) -> None:
        super().__init__(message or f"Resource not found: {uri}", data={"uri": uri})


class URLElicitationRequiredError(MCPError):
    code = URL_ELICITATION_REQUIRED
    default_message = "This request requires more information."


# How a JSON-RPC error travels over HTTP when it is the whole answer to a POST that carried no
# request we could attribute it to (parse failures, rejected batches, header problems).
ERROR_CODE_HTTP_STATUS: Final[dict[int, int]] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    METHOD_NOT_FOUND: 404,
}


class TransportError(Exception):
    """An HTTP-level refusal (header rules), answered with ``status`` and an id-less error body."""

    def __init__(self, status: int, message: str, code: int = INVALID_REQUEST, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}
        super().__init__(message)

    def to_body(self) -> dict[str, Any]:
        """Return the JSON-RPC error message (without id) sent as the HTTP body."""
        return {"jsonrpc": "2.0", "id": None, "error": {"code": self.code, "message": self.message}}
