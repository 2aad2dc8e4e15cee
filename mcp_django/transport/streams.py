"""Writing to SSE streams: store the event first, then announce it on the stream's group.

Whichever process holds the client's connection for that stream receives the announcement and
writes the event out; if nobody holds it, the event waits in the store for a resume.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.db import router, transaction

from ..conf import mcp_settings
from ..exceptions import ClientRequestError
from ..models import Event, RunningRequest
from ..protocol.errors import InternalError
from ..protocol.jsonrpc import encode, error_message, notification_message, request_message
from ..stores import (
    BaseEventStore,
    GroupWrite,
    RunningRequestStore,
    ServerRequestStore,
    StoredEvent,
    get_event_store,
)
from .layers import GET_STREAM, get_layer, get_stream_group, group_send, stream_group

logger = logging.getLogger("mcp_django.transport")


class StreamLimitExceeded(ClientRequestError):
    """A tool sent more than its stream may hold (``MAX_STREAM_EVENTS``/``MAX_STREAM_BYTES``)."""


class StreamEmitter:
    """The single writer of one POST stream (the task answering that POST).

    Events are group-committed: ``send`` numbers an event and queues it, and a flusher stores
    each batch with one write and then announces it as one channel-layer message. Nothing is
    announced before it is stored; the final response waits for its own flush, and a tool that
    sends faster than the store keeps up is held back once ``MAX_PENDING`` events wait.
    """

    MAX_PENDING = 128

    def __init__(self, session_id: str, stream: str, store: BaseEventStore | None = None) -> None:
        self.session_id = session_id
        self.stream = stream
        self.store = store or get_event_store()
        self.layer = get_layer()
        self._seq = 0
        self._pending: list[StoredEvent] = []
        self._finished: list[tuple[str, str]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._drained = asyncio.Event()
        self._drained.set()
        self._failure: BaseException | None = None
        self._bytes = 0
        #: Set once the stream reached MAX_STREAM_EVENTS or MAX_STREAM_BYTES.
        self.exceeded = False

    def _within_limits(self, payload: str) -> bool:
        return (
            self._seq + 1 <= mcp_settings.max_stream_events
            and self._bytes + len(payload) <= mcp_settings.max_stream_bytes
        )

    async def send(
        self,
        message: dict[str, Any],
        *,
        closes: bool = False,
        finishes: tuple[str, str] | None = None,
    ) -> int:
        """Number ``message``, queue it for storing, and return its number. ``finishes``: the
        claim of the request this message answers, deleted in the same transaction."""
        if self._failure is not None:
            raise RuntimeError("this stream can no longer be written") from self._failure
        payload = encode(message).decode()
        is_response = "id" in message and ("result" in message or "error" in message)
        if self.exceeded or not self._within_limits(payload):
            if not is_response:
                # Raised in the tool: it stops, and its response becomes the error below.
                self.exceeded = True
                raise StreamLimitExceeded(self.limit_message())
            if self.exceeded or "result" in message:
                # A response still goes out, as a small error: the stream ends with it.
                self.exceeded = True
                payload = encode(
                    error_message(message["id"], InternalError(self.limit_message()))
                ).decode()
        self._seq += 1
        self._bytes += len(payload)
        self._pending.append(StoredEvent(self._seq, payload, closes))
        if finishes is not None:
            self._finished.append(finishes)
        self._drained.clear()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())
        # Yield once per event: a tool sending in a tight loop must not starve the flusher, which
        # writes the previous batch while later events gather into the next one.
        await asyncio.sleep(0)
        if closes or len(self._pending) >= self.MAX_PENDING:
            await self.flush()
        return self._seq

    @staticmethod
    def limit_message() -> str:
        return (
            f"The response stream exceeded its limit ({mcp_settings.max_stream_events} events, "
            f"{mcp_settings.max_stream_bytes} bytes); the request was ended"
        )

    async def flush(self) -> None:
        """Wait until every event sent so far is stored and announced."""
        await self._drained.wait()
        if self._failure is not None:
            raise RuntimeError("storing events of this stream failed") from self._failure

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                finished, self._finished = self._finished, []
                await group_commit().store(
                    self.store, self.session_id, self.stream, batch, finished
                )
                await group_send(
                    self.layer,
                    stream_group(self.stream),
                    {
                        "type": "mcp.events",
                        "events": [[e.seq, e.payload, e.closes_stream] for e in batch],
                    },
                    last=any(e.closes_stream for e in batch),
                )
        except BaseException as exc:
            self._failure = exc
            logger.exception("Could not store events of stream %s", self.stream)
        finally:
            self._drained.set()

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send a request to the client on this stream and wait for its answer.

        The answer is POSTed separately, possibly to another process; that process finds the
        waiting channel in the ServerRequest row and forwards the answer there. Return the
        JSON-RPC response (``result`` or ``error``); raise TimeoutError after ``timeout``.
        """
        requests = ServerRequestStore()
        request_id = f"srv-{secrets.token_urlsafe(12)}"
        channel = await self.layer.new_channel()
        await requests.acreate(
            session_id=self.session_id,
            request_id=request_id,
            method=method,
            params=params,
            channel_name=channel,
        )
        await self.send(request_message(request_id, method, params))
        try:
            message = await asyncio.wait_for(self.layer.receive(channel), timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            timed_out = isinstance(exc, asyncio.TimeoutError)
            await asyncio.shield(
                self._cancel_request(
                    requests, request_id, "timed out" if timed_out else "cancelled"
                )
            )
            if timed_out:  # the builtin on every Python (asyncio's is another class before 3.11)
                raise TimeoutError(method) from None
            raise
        return cast(dict[str, Any], message["response"])  # as deliver_response sent it

    async def _cancel_request(
        self, requests: ServerRequestStore, request_id: str, reason: str
    ) -> None:
        await requests.acancel(self.session_id, request_id)
        await self.send(
            notification_message(
                "notifications/cancelled", {"requestId": request_id, "reason": reason}
            )
        )

    async def close_connection(self) -> None:
        """Ask the process holding the connection to close it without ending the stream."""
        await self.flush()
        await group_send(self.layer, stream_group(self.stream), {"type": "mcp.disconnect"})

    async def end_without_event(self) -> None:
        """End the stream when it has nothing left to send (e.g. all its requests cancelled).

        A closing marker (no payload) is stored, not only announced: a client that resumes
        later gets the replay and then the end, not keep-alives forever. No response goes
        out for a cancelled request (cancellation spec), so the marker carries no message.
        """
        if self._failure is not None:
            raise RuntimeError("this stream can no longer be written") from self._failure
        self._seq += 1
        self._pending.append(StoredEvent(self._seq, "", True))
        self._drained.clear()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())
        await self.flush()


@dataclass(slots=True)
class _Batch:
    """One stream's events waiting for a group commit."""

    store: BaseEventStore
    session_id: str
    stream: str
    events: list[StoredEvent]
    #: The claims of the requests these events answer, deleted in the same transaction.
    finished: list[tuple[str, str]]


class GroupCommit:
    """Stores the event batches of this process's POST streams, several streams to a write
    (:class:`~mcp_django.stores.GroupWrite`): the thread hop that stored each response was the
    largest cost an SSE tools/call added over a JSON one after its socket writes
    (bench/profile.py). A flusher is released when its batch is committed, and only then
    announces it: nothing is sent before it is stored."""

    def __init__(self) -> None:
        self._writes: GroupWrite[_Batch, None] = GroupWrite(sync_to_async(write_batches))

    async def store(
        self,
        store: BaseEventStore,
        session_id: str,
        stream: str,
        events: list[StoredEvent],
        finished: list[tuple[str, str]],
    ) -> None:
        """Return once ``events`` (and the deletion of the ``finished`` claims) are committed."""
        await self._writes.write(_Batch(store, session_id, stream, events, finished))


def write_events(
    store: BaseEventStore,
    session_id: str,
    stream: str,
    events: list[StoredEvent],
    finished: list[tuple[str, str]],
) -> None:
    """Store one stream's ``events``, and delete its ``finished`` claims in the same transaction."""
    if not finished:
        store.append_many(session_id, stream, events)
        return
    with transaction.atomic(using=router.db_for_write(RunningRequest)):
        store.append_many(session_id, stream, events)
        RunningRequestStore().finish_many(finished)


def write_batches(group: list[_Batch]) -> None:
    """Store ``group``'s events, each store's in one write, and delete their finished claims in
    the same transaction: a response is never stored without its claim going, nor the reverse."""
    if len(group) == 1:
        batch = group[0]
        write_events(batch.store, batch.session_id, batch.stream, batch.events, batch.finished)
        return
    by_store: dict[
        type[BaseEventStore], tuple[BaseEventStore, list[tuple[str, str, list[StoredEvent]]]]
    ] = {}
    for batch in group:
        by_store.setdefault(type(batch.store), (batch.store, []))[1].append(
            (batch.session_id, batch.stream, batch.events)
        )
    finished = [key for batch in group for key in batch.finished]
    # One transaction either way: a write that fails leaves nothing behind, and is retried
    # batch by batch.
    with transaction.atomic(using=router.db_for_write(RunningRequest if finished else Event)):
        for store, batches in by_store.values():
            store.append_streams(batches)
        if finished:
            RunningRequestStore().finish_many(finished)


#: The process's group commit of stream events (one write at a time per event loop).
_group_commit = GroupCommit()


def group_commit() -> GroupCommit:
    """The process's group commit of stream events."""
    return _group_commit


async def deliver_response(session_id: str, request_id: Any, response: dict[str, Any]) -> bool:
    """Hand a client's answer to the tool call waiting for it, wherever that call runs."""
    if not isinstance(request_id, str):
        return False  # we only mint string ids
    channel = await ServerRequestStore().aanswer(session_id, request_id, response)
    if channel is None:
        return False
    await get_layer().send(channel, {"type": "mcp.response", "response": response})
    return True


async def send_to_session(
    session_id: str, message: dict[str, Any], store: BaseEventStore | None = None
) -> int:
    """Append a session-wide message to the session's GET stream and announce it."""
    store = store or get_event_store()
    payload = encode(message).decode()
    seq = await store.aappend(session_id, GET_STREAM, payload)
    await group_send(
        get_layer(),
        get_stream_group(session_id),
        {"type": "mcp.event", "seq": seq, "payload": payload, "closes": False},
    )
    return seq


async def close_orphaned_streams(**filters: Any) -> int:
    """End the streams of requests whose process died (``RunningRequestStore.close_orphans``
    stores their closing error), and tell any connection still holding one of them."""
    stored = await sync_to_async(RunningRequestStore().close_orphans)(**filters)
    for stream, event in stored:
        await group_send(
            get_layer(),
            stream_group(stream),
            {
                "type": "mcp.event",
                "seq": event.seq,
                "payload": event.payload,
                "closes": event.closes_stream,
            },
        )
    return len(stored)
