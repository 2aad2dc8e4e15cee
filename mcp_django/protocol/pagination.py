"""Opaque cursors for list methods."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from .errors import InvalidParamsError


def encode_cursor(position: dict[str, Any]) -> str:
    """Encode a position as an opaque, URL-safe cursor string."""
    return base64.urlsafe_b64encode(orjson.dumps(position)).decode("ascii").rstrip("=")


def decode_cursor(cursor: Any) -> dict[str, Any]:
    """Decode a cursor made by :func:`encode_cursor`; -32602 for anything else."""
    if not isinstance(cursor, str) or len(cursor) > 1024:
        raise InvalidParamsError("Invalid params: invalid cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        position = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        raise InvalidParamsError("Invalid params: invalid cursor") from None
    if not isinstance(position, dict):
        raise InvalidParamsError("Invalid params: invalid cursor")
    return position


def page_offset(params: dict[str, Any]) -> int:
    """Return the list offset a request's ``cursor`` points at (0 without one)."""
    return cursor_offset(params.get("cursor"))


def cursor_offset(cursor: Any) -> int:
    """Return the list offset ``cursor`` points at (0 for None)."""
    if cursor is None:
        return 0
    offset = decode_cursor(cursor).get("o")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidParamsError("Invalid params: invalid cursor")
    return offset


def paginate(items: list[Any], cursor: Any, page_size: int) -> tuple[list[Any], str | None]:
    """Cut the page ``cursor`` points at (the first for None) out of ``items``; return it and
    the next cursor (None on the last page)."""
    offset = cursor_offset(cursor)
    if offset > len(items):
        raise InvalidParamsError("Invalid params: invalid cursor")
    page = items[offset : offset + page_size]
    end = offset + page_size
    return page, (encode_cursor({"o": end}) if end < len(items) else None)


def page_result(items: list[Any], cursor: Any, page_size: int, key: str) -> dict[str, Any]:
    """A list method's result: the page of ``items`` under ``key``, and ``nextCursor`` unless it
    is the last page."""
    page, next_cursor = paginate(items, cursor, page_size)
    result: dict[str, Any] = {key: page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result
