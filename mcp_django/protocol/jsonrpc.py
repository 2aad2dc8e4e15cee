"""JSON-RPC 2.0 framing: bytes in, typed messages out, and back.

``decode`` never raises for a body it can attribute to messages: a malformed member of a batch
becomes an :class:`Invalid` entry so that its siblings are still served, as JSON-RPC requires.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

from .errors import InvalidRequestError, MCPError, ParseError

JSONRPC_VERSION = "2.0"

RequestId = str | int


@dataclass(slots=True, frozen=True)
class Request:
    """A message with an id that expects exactly one response."""

    id: RequestId
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class Notification:
    """A message without id; nothing is answered."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class Response:
    """A client's answer to a server-to-client request (``result`` or ``error``)."""

    id: RequestId
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(slots=True, frozen=True)
class Invalid:
    """A batch member (or the whole body) that is not a valid message."""

    id: RequestId | None
    error: MCPError


Message = Request | Notification | Response


@dataclass(slots=True, frozen=True)
class Decoded:
    """What a POST body held: its messages in order, and whether it was a batch array."""

    messages: list[Message | Invalid]
    is_batch: bool


def is_valid_id(value: Any) -> TypeGuard[RequestId]:
    """Tell whether ``value`` may be a request id: a string or an integer, never null or bool."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def decode(body: bytes) -> Decoded:
    """Parse a POST body. Raise :class:`ParseError` or :class:`InvalidRequestError` for a body
    that holds no message at all; report bad members of a batch as :class:`Invalid`."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"Parse error: {exc.args[0] if exc.args else 'invalid JSON'}") from None
    if isinstance(data, list):
        if not data:
            raise InvalidRequestError("Invalid Request: empty batch")
        return Decoded([parse_message(item) for item in data], is_batch=True)
    if isinstance(data, dict):
        message = parse_message(data)
        if isinstance(message, Invalid):
            error = InvalidRequestError(message.error.message, data=message.error.data)
            error.request_id = message.id  # JSON-RPC: answer with the id when it can be read
            raise error
        return Decoded([message], is_batch=False)
    raise InvalidRequestError("Invalid Request: the body must be a JSON object")


def parse_message(data: Any) -> Message | Invalid:
    """Turn one decoded JSON value into a message, or an :class:`Invalid` saying why not."""
    if not isinstance(data, dict):
        return Invalid(
            None, InvalidRequestError("Invalid Request: a message must be a JSON object")
        )
    raw_id = data.get("id")
    attributable_id = raw_id if is_valid_id(raw_id) else None
    if data.get("jsonrpc") != JSONRPC_VERSION:
        return Invalid(
            attributable_id, InvalidRequestError('Invalid Request: "jsonrpc" must be "2.0"')
        )
    if "method" in data:
        method = data["method"]
        if not isinstance(method, str) or not method:
            return Invalid(
                attributable_id,
                InvalidRequestError('Invalid Request: "method" must be a non-empty string'),
            )
        params = data.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return Invalid(
                attributable_id, InvalidRequestError('Invalid Request: "params" must be an object')
            )
        if "id" not in data:
            return Notification(method, params)
        if not is_valid_id(raw_id):
            return Invalid(
                None, InvalidRequestError('Invalid Request: "id" must be a string or an integer')
            )
        return Request(raw_id, method, params)
    if "result" in data or "error" in data:
        if not is_valid_id(raw_id):
            return Invalid(
                None,
                InvalidRequestError('Invalid Request: a response needs a string or integer "id"'),
            )
        if ("result" in data) == ("error" in data):
            return Invalid(
                None,
                InvalidRequestError(
                    'Invalid Request: a response has exactly one of "result" and "error"'
                ),
            )
        if "result" in data:
            result = data["result"]
            if not isinstance(result, dict):
                return Invalid(
                    None, InvalidRequestError('Invalid Request: "result" must be an object')
                )
            return Response(raw_id, result=result)
        error = data["error"]
        code = error.get("code") if isinstance(error, dict) else None
        # bool is an int subclass in Python, but JSON true/false is not an integer code.
        if (
            not isinstance(code, int)
            or isinstance(code, bool)
            or not isinstance(error.get("message"), str)
        ):
            return Invalid(
                None,
                InvalidRequestError(
                    'Invalid Request: "error" needs an integer "code" and a string "message"'
                ),
            )
        return Response(raw_id, error=error)
    return Invalid(
        attributable_id,
        InvalidRequestError('Invalid Request: a message needs "method", "result" or "error"'),
    )


def result_message(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    """Return the JSON-RPC success response for ``request_id``."""
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "result": result}


def error_message(request_id: RequestId | None, error: MCPError) -> dict[str, Any]:
    """Return the JSON-RPC error response for ``request_id`` (``null`` when it is not known)."""
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": error.to_error()}


def notification_message(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return a JSON-RPC notification."""
    message: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "method": method}
    if params is not None:
        message["params"] = params
    return message


def request_message(
    request_id: RequestId, method: str, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Return a JSON-RPC request (used for server-to-client requests)."""
    message: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def encode(message: Any) -> bytes:
    """Serialise a message (or a list of them, for a batch) to compact UTF-8 JSON."""
    return orjson.dumps(message)
