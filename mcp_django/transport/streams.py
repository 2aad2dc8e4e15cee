"""Writing to SSE streams: store the event first, then announce it on the stream's group.

Whichever process holds the client's connection for that stream receives the announcement and
writes the event out; if nobody holds it, the event waits in the store for a resume.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..protocol.jsonrpc import encode
from ..stores import BaseEventStore, get_event_store
from .layers import GET_STREAM, get_layer, get_stream_group, stream_group


class StreamEmitter:
    """The single writer of one POST stream (the task answering that POST)."""

    def __init__(self, session_id: str, stream: str, store: BaseEventStore | None = None) -> None:
        self.session_id = session_id
        self.stream = stream
        self.store = store or get_event_store()
        self.layer = get_layer()
        self._seq = 0
        # Sequence numbers must reach the store and the group in the order they were taken.
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any], *, closes: bool = False) -> int:
        payload = encode(message).decode()
        async with self._lock:
            self._seq += 1
            seq = self._seq
            await self.store.aappend(self.session_id, self.stream, payload, seq=seq, closes_stream=closes)
            await self.layer.group_send(
                stream_group(self.stream), {"type": "mcp.event", "seq": seq, "payload": payload, "closes": closes}
            )
        return seq

    async def close_connection(self) -> None:
        """Ask the process holding the connection to close it without ending the stream."""
        await self.layer.group_send(stream_group(self.stream), {"type": "mcp.disconnect"})

    async def end_without_event(self) -> None:
        """End the connection when the stream has nothing left to send (e.g. all requests cancelled)."""
        await self.layer.group_send(stream_group(self.stream), {"type": "mcp.end"})


async def send_to_session(session_id: str, message: dict[str, Any], store: BaseEventStore | None = None) -> int:
    """Append a session-wide message to the session's GET stream and announce it."""
    store = store or get_event_store()
    payload = encode(message).decode()
    seq = await store.aappend(session_id, GET_STREAM, payload)
    await get_layer().group_send(
        get_stream_group(session_id), {"type": "mcp.event", "seq": seq, "payload": payload, "closes": False}
    )
    return seq
