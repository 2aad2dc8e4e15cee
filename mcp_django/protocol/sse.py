"""Server-sent events framing and the event ids that make streams resumable.

An event id is ``<stream>:<sequence>``: the stream is an opaque token chosen by the store, the
sequence counts events on that stream from 1. Sequence 0 is the priming event (empty data), so
resuming from it replays the whole stream.
"""

from __future__ import annotations

import re
from typing import Final

_STREAM_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
# ASCII digits only: str.isdigit() also admits "²" or "١", which int() rejects or rewrites.  # noqa: RUF003
_SEQUENCE_RE = re.compile(r"[0-9]{1,18}")
KEEPALIVE: Final = b": keep-alive\n\n"


def make_event_id(stream: str, sequence: int) -> str:
    """Return the SSE id of event ``sequence`` on ``stream``."""
    return f"{stream}:{sequence}"


def parse_event_id(value: str) -> tuple[str, int]:
    """Split a ``Last-Event-ID`` into ``(stream, sequence)``; raise ``ValueError`` if malformed."""
    stream, sep, seq = value.strip().rpartition(":")
    # fullmatch: "$" would also accept a stream that ends in a newline.
    if not sep or not _STREAM_RE.fullmatch(stream) or not _SEQUENCE_RE.fullmatch(seq):
        raise ValueError(f"malformed event id {value[:80]!r}")
    return stream, int(seq)


def encode_event(data: bytes | str, event_id: str | None = None, retry_ms: int | None = None, event: str | None = None) -> bytes:
    """Frame one SSE event. Multi-line data is split over several ``data:`` lines."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    # A line break in a single-line field would start a new field (or event) on the client;
    # clients also ignore an id that contains NUL.
    if event_id is not None and any(c in event_id for c in "\r\n\0"):
        raise ValueError("an SSE event id must not contain CR, LF or NUL")
    if event is not None and any(c in event for c in "\r\n"):
        raise ValueError("an SSE event type must not contain CR or LF")
    lines: list[str] = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event is not None:
        lines.append(f"event: {event}")
    if retry_ms is not None:
        lines.append(f"retry: {int(retry_ms)}")
    # Split on every line terminator SSE recognises, so data can never inject a field.
    for line in data.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        lines.append(f"data: {line}" if line else "data:")
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def encode_comment(text: str = "keep-alive") -> bytes:
    """Frame an SSE comment line (ignored by clients; keeps idle connections open)."""
    safe = text.replace("\r", " ").replace("\n", " ")
    return f": {safe}\n\n".encode()
