"""Server-sent events framing and the event ids that make streams resumable.

An event id is ``<stream>:<sequence>``: the stream is an opaque token chosen by the store, the
sequence counts events on that stream from 1. Sequence 0 is the priming event (empty data), so
resuming from it replays the whole stream.

:class:`SSEParser` reads a stream back as a browser's ``EventSource`` would (the test client's
parser, ``mcp_django.testing``).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any, Final

import orjson

_STREAM_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
# ASCII digits only: str.isdigit() also admits "²" or "١", which int() rejects or rewrites.  # noqa: RUF003
_SEQUENCE_RE = re.compile(r"[0-9]{1,18}")
KEEPALIVE: Final = b": keep-alive\n\n"
_LINE_RE = re.compile(r"\r\n|\r|\n")


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


def encode_event(
    data: bytes | str,
    event_id: str | None = None,
    retry_ms: int | None = None,
    event: str | None = None,
) -> bytes:
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


@dataclass(frozen=True)
class SSEEvent:
    """One server-sent event, as a browser's EventSource would see it.

    ``id`` and ``retry`` are the fields of this event itself (None when it had none), so a
    test can check exactly what the server framed.
    """

    data: str
    id: str | None = None
    event: str | None = None
    retry: int | None = None

    def json(self) -> Any:
        """Return the event's data parsed as JSON."""
        return orjson.loads(self.data)


@dataclass(frozen=True)
class SSEComment:
    """One comment line (``: text``), such as a keep-alive."""

    text: str


class SSEParser:
    """Turn SSE bytes, fed in arbitrary chunks, into events and comments (WHATWG rules)."""

    def __init__(self) -> None:
        self._buffer = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._event: str | None = None
        self._retry: int | None = None
        self._has_data = False
        self._decoder = _utf8_decoder()

    def feed(self, chunk: bytes) -> list[SSEEvent | SSEComment]:
        """Parse ``chunk``; return the events and comments it completes."""
        text = self._buffer + self._decoder.decode(chunk)
        # A CR at the very end may be the first half of a CRLF split across chunks: hold it.
        hold = ""
        if text.endswith("\r"):
            text, hold = text[:-1], "\r"
        lines = _LINE_RE.split(text)
        # The last piece is an unfinished line ("" right after a terminator): keep it for later.
        self._buffer = lines.pop() + hold
        out: list[SSEEvent | SSEComment] = []
        for line in lines:
            item = self._line(line)
            if item is not None:
                out.append(item)
        return out

    def _line(self, line: str) -> SSEEvent | SSEComment | None:
        if line == "":
            # WHATWG: a block without any data line dispatches nothing (an id-only block
            # only moves the browser's last event id), so neither does this parser.
            event = (
                SSEEvent("\n".join(self._data), self._id, self._event, self._retry)
                if self._has_data
                else None
            )
            self._data, self._id, self._event, self._retry, self._has_data = (
                [],
                None,
                None,
                None,
                False,
            )
            return event
        if line.startswith(":"):
            return SSEComment(line[1:].removeprefix(" "))
        name, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "id" and "\0" not in value:  # browsers ignore an id containing NUL
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None


def _utf8_decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")("strict")


def parse_sse(body: bytes) -> list[SSEEvent | SSEComment]:
    """Parse a complete SSE body into its events and comments."""
    return SSEParser().feed(body)
