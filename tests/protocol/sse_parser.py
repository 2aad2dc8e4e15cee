"""A minimal client-side SSE parser following the WHATWG event-stream interpretation rules.

It exists so tests can check what a browser would see, not what the bytes look like.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_LINE_RE = re.compile(r"\r\n|\r|\n")


@dataclass
class Event:
    data: str
    id: str | None = None
    event: str | None = None
    retry: int | None = None
    fields: list[str] = field(default_factory=list)


@dataclass
class Parsed:
    events: list[Event]
    comments: list[str]


def parse_stream(raw: bytes) -> Parsed:
    text = raw.decode("utf-8")
    # The spec splits on CRLF, lone CR and lone LF; a trailing partial line is discarded.
    lines = _LINE_RE.split(text)
    lines.pop()
    events: list[Event] = []
    comments: list[str] = []
    data: list[str] = []
    event_id: str | None = None
    event_type: str | None = None
    retry: int | None = None
    names: list[str] = []
    for line in lines:
        if line == "":
            if data or names:
                events.append(Event("\n".join(data), event_id, event_type, retry, names))
            data, event_id, event_type, retry, names = [], None, None, None, []
            continue
        if line.startswith(":"):
            comments.append(line[1:].removeprefix(" "))
            continue
        name, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        names.append(name)
        if name == "data":
            data.append(value)
        elif name == "id":
            event_id = value
        elif name == "event":
            event_type = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    return Parsed(events, comments)
