"""Bounds on values a client sends that the server keeps: in memory, in the session, or echoed
into stored events. Pure functions; the transport passes the limits from the settings."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Final

import orjson

from .errors import InvalidParamsError, InvalidRequestError, TransportError

#: Integers a JSON number holds exactly in every client (IEEE 754 doubles): ±(2**53 - 1).
MAX_SAFE_INTEGER: Final = 2**53 - 1

SERVER_BUSY: Final = -32003
"""A resume refused because too many replay at once (HTTP 429 or 503, with Retry-After)."""


def depth_exceeds(value: Any, max_depth: int) -> bool:
    """Tell whether objects and arrays in ``value`` nest deeper than ``max_depth``.

    Iterative, and stops at the first branch too deep: a hostile value costs no recursion.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth + 1 > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def check_client_value(name: str, value: Any, *, max_bytes: int, max_depth: int) -> None:
    """Refuse (-32602) a client value that nests too deep or is too large as JSON."""
    if depth_exceeds(value, max_depth):
        raise InvalidParamsError(f'Invalid params: "{name}" nests deeper than {max_depth} levels')
    size = len(orjson.dumps(value))
    if size > max_bytes:
        raise InvalidParamsError(
            f'Invalid params: "{name}" is {size} bytes as JSON; the limit is {max_bytes}'
        )


def id_within_bounds(value: str | int, max_length: int) -> bool:
    """Tell whether a request id or progress token is small enough to echo and store."""
    if isinstance(value, str):
        return len(value) <= max_length
    return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def check_request_id(value: str | int, max_length: int) -> None:
    """Refuse (-32600) a request id too long to echo into stored events."""
    if not id_within_bounds(value, max_length):
        raise InvalidRequestError(
            f'Invalid Request: "id" must be a string of at most {max_length} characters or an '
            "integer within ±(2**53 - 1)"
        )


def check_progress_token(params: dict[str, Any], max_length: int) -> None:
    """Refuse (-32602) a ``_meta.progressToken`` that is not a bounded string or safe integer."""
    meta = params.get("_meta")
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise InvalidParamsError('Invalid params: "_meta" must be an object')
    if "progressToken" not in meta:
        return
    token = meta["progressToken"]
    if (
        isinstance(token, bool)
        or not isinstance(token, (str, int))
        or not id_within_bounds(token, max_length)
    ):
        raise InvalidParamsError(
            f'Invalid params: "_meta.progressToken" must be a string of at most {max_length} '
            "characters "
            "or an integer within ±(2**53 - 1)"
        )


def body_too_large(max_bytes: int) -> TransportError:
    """The answer (413) to a request body over ``max_bytes``, declared or counted."""
    return TransportError(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        f"Payload Too Large: the body exceeds {max_bytes} bytes",
    )
