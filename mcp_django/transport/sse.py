"""One open SSE connection of the Streamable HTTP endpoint: opening a stream, replaying it for a
resume, writing the events announced on its group, and handing the stream over to a newer
connection. Its clocks (keep-alive, the connection time limit, re-checking the credential) are
:mod:`mcp_django.transport.clocks`.

The events themselves are stored first (see :mod:`mcp_django.transport.streams`); a connection
only writes them out, so closing it never loses one: the client resumes with ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from channels.exceptions import StopConsumer

from ..ops.tracing import stream_closed, stream_opened
from ..protocol.jsonrpc import encode, result_message
from ..protocol.modern import listen_acknowledgement, tag_subscription
from ..protocol.sse import encode_comment, encode_event, make_event_id
from ..server.notifications import LISTEN_GROUP
from ..stores import get_event_store
from .authentication import still_authenticated
from .clocks import StreamClocks
from .flow import WriteFlow, resume_slots
from .layers import GET_STREAM, get_stream_group, group_send, session_group, stream_group
from .streams import close_orphaned_streams

if TYPE_CHECKING:
    from ..conf import MCPSettings

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    # nginx and friends must not buffer the stream.
    (b"x-accel-buffering", b"no"),
]

KEEPALIVE = encode_comment()

#: How long a POST stream's headers and priming event wait for its first events (seconds). A
#: call answered sooner, the common kind, then takes two socket writes (the headers; the priming
#: event, the response and the end), as a JSON answer does, instead of one write per step, each
#: waking the client (bench/profile.py: those writes were the largest cost an SSE tools/call
#: added over a JSON one). Events still go out only once stored, and a client resumes from the
#: first one it sees as it would from the priming event.
POST_START_DELAY = 0.05

T = TypeVar("T")


class Connection(Protocol):
    """What an SSE stream needs of the HTTP connection it is written to (the consumer)."""

    scope: dict[str, Any]
    base_send: Any
    channel_layer: Any
    channel_name: str | None

    async def send_headers(self, *, status: int = HTTPStatus.OK, headers: Any = None) -> None: ...

    async def send_body(self, body: bytes, *, more_body: bool = False) -> None: ...

    async def join(self, *groups: str) -> None: ...


class SSEStream:
    """The SSE stream written on one connection: a POST's answers, the GET stream, or a resume."""

    def __init__(
        self, connection: Connection, session_id: str, user_id: Any, settings: MCPSettings
    ) -> None:
        self.connection = connection
        # Ids, not the rows: an idle stream holds as little as it can (one per open session).
        self.session_id = session_id
        #: Who opened it: the stream re-checks that the credential still names them.
        self.user_id = user_id
        self.settings = settings
        self.store = get_event_store()
        self.stream: str | None = None
        self.last_seq = 0
        self.closed = False
        #: The stream's last event was written: nothing of it runs any more.
        self.finished = False
        self.flow: WriteFlow | None = None
        self.clocks = StreamClocks(self, settings)
        # Set while this connection is a resume replaying the store (see ResumeSlots).
        self._resume_slot: tuple[str, Any] | None = None
        # A POST stream whose headers and priming event wait for its first events (see
        # start_post_stream), and the timer that sends them if none comes soon.
        self._unstarted = False
        self._start_timer: asyncio.TimerHandle | None = None
        self._start_task: asyncio.Task[Any] | None = None

    # -- opening --------------------------------------------------------------------------

    async def _send_headers(self) -> None:
        await self.connection.send_headers(
            status=HTTPStatus.OK,
            headers=[*SSE_HEADERS, (b"mcp-session-id", self.session_id.encode())],
        )

    async def _prime(self, seq: int) -> None:
        # An id with empty data, so the client can resume even before the first event.
        await self.connection.send_body(
            encode_event(
                "",
                event_id=make_event_id(self.stream or "", seq),
                retry_ms=self.settings.sse_retry_ms,
            ),
            more_body=True,
        )

    async def open_post_stream(self, stream: str) -> None:
        """Join a POST's new stream (before anything is sent on it) and its session's group."""
        self.stream = stream
        await self.connection.join(stream_group(stream), session_group(self.session_id))

    async def start_post_stream(self) -> None:
        """Start the POST stream (its requests are registered by now): its headers and priming
        event go out with its first events, or after ``POST_START_DELAY`` if none comes first."""
        self._unstarted = True
        loop = asyncio.get_running_loop()
        self._start_timer = loop.call_later(POST_START_DELAY, self._start_due, loop)

    def _start_due(self, loop: asyncio.AbstractEventLoop) -> None:
        # Through the consumer's own channel, so the start is written in its dispatch loop,
        # in order with the events.
        if self._unstarted and not self.closed:
            self._start_task = loop.create_task(
                self.connection.channel_layer.send(
                    self.connection.channel_name, {"type": "mcp.start"}
                )
            )

    async def start(self) -> None:
        """Send the headers and the priming event now, if they are still to go."""
        head = await self._head()
        if head:
            await self.connection.send_body(head, more_body=True)

    async def _head(self) -> bytes:
        """What must go before the next write on the stream: nothing once it started; else the
        headers are sent now and the priming event is returned, to go out with that write."""
        if not self._unstarted:
            return b""
        self._unstarted = False
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None
        await self._send_headers()
        self.start_timers()
        return encode_event(
            "", event_id=make_event_id(self.stream or "", 0), retry_ms=self.settings.sse_retry_ms
        )

    async def open_get_stream(self) -> None:
        # One connection holds the standalone stream: a new GET takes it over, so that every
        # message goes out on exactly one connection (transports spec, "no broadcast").
        await group_send(
            self.connection.channel_layer,
            get_stream_group(self.session_id),
            {"type": "mcp.takeover"},
        )
        self.stream = GET_STREAM
        # Join before reading the last number: an event stored in between then arrives live.
        await self.connection.join(
            get_stream_group(self.session_id), session_group(self.session_id)
        )
        self.last_seq = await self.store.alast_seq(self.session_id, GET_STREAM)
        await self._send_headers()
        await self._prime(self.last_seq)
        self.start_timers()

    async def open_session_stream(self, first: bytes) -> None:
        """The 2024-11-05 HTTP+SSE stream: the session's GET stream, opened with ``first`` (its
        ``endpoint`` event); later messages of the session follow on it."""
        self.stream = GET_STREAM
        await self.connection.join(
            get_stream_group(self.session_id), session_group(self.session_id)
        )
        self.last_seq = await self.store.alast_seq(self.session_id, GET_STREAM)
        await self.connection.send_headers(status=HTTPStatus.OK, headers=SSE_HEADERS)
        await self.connection.send_body(first, more_body=True)
        self.start_timers()

    # -- resuming -------------------------------------------------------------------------

    def take_resume_slot(self) -> None:
        """Count this resume against the per-session, per-user and per-process limits (429/503)."""
        resume_slots.acquire(self.session_id, self.user_id, self.settings)
        self._resume_slot = (self.session_id, self.user_id)

    def release_resume_slot(self) -> None:
        if self._resume_slot is not None:
            resume_slots.release(*self._resume_slot)
            self._resume_slot = None

    async def resume(self, stream: str, after: int) -> None:
        """Replay ``stream`` after event ``after``, then follow it live (a resume slot is held)."""
        session_id = self.session_id
        layer = self.connection.channel_layer
        self.stream = stream
        # Join before reading the store: an event stored in between arrives live and is
        # skipped by sequence number, so none is lost and none is sent twice.
        # The newest connection takes over a stream, POST streams as the GET stream: every
        # later event goes out on exactly one connection (transports spec, "no broadcast").
        if stream == GET_STREAM:
            await group_send(layer, get_stream_group(session_id), {"type": "mcp.takeover"})
            await self.connection.join(get_stream_group(session_id))
        else:
            await group_send(layer, stream_group(stream), {"type": "mcp.takeover"})
            await self.connection.join(stream_group(stream))
            # A request whose process died ends here with an error instead of never.
            await close_orphaned_streams(session_id=session_id, stream=stream)
        await self.connection.join(session_group(session_id))
        self.last_seq = after
        self.flow = WriteFlow(self.connection.base_send)
        await self._send_headers()
        await self.connection.send_body(b"", more_body=True)
        # Replay page by page (keyset on seq), one socket write per page, each drained (where
        # the server tells) before the next is read: a client that does not read holds at
        # most a page and a socket buffer here, however long the stream.
        # Reading from one event earlier shows whether the client already has the final one.
        try:
            pages = self.store.areplay_pages(
                session_id,
                stream,
                max(after - 1, 0),
                max_events=self.settings.replay_page_events,
                max_bytes=self.settings.replay_page_bytes,
            )
            async for page in pages:
                chunk: list[bytes] = []
                ends = False
                for event in page:
                    if event.seq > after and event.payload:  # a closing marker has no payload
                        chunk.append(
                            encode_event(event.payload, event_id=make_event_id(stream, event.seq))
                        )
                        self.last_seq = event.seq
                    if event.closes_stream:
                        ends = self.finished = True
                        break
                if chunk:
                    await self.connection.send_body(b"".join(chunk), more_body=True)
                if ends:
                    await self.end()
                    return
                await self.drain()
        finally:
            self.release_resume_slot()
        self.start_timers()

    # -- writing --------------------------------------------------------------------------

    async def write_events(self, events: list[tuple[int, str, bool]]) -> None:
        """Write events announced on the stream's group, in order; stop the consumer after the
        last one of the stream. A gap (a full channel dropped some) is filled from the store."""
        if self.closed:
            return
        stream = self.stream or ""
        chunk: list[bytes] = [await self._head()]
        ends = False
        for seq, payload, closes in events:
            if seq <= self.last_seq:
                continue  # already written (replayed before this arrived live)
            if seq > self.last_seq + 1:
                pages = self.store.areplay_pages(
                    self.session_id,
                    stream,
                    self.last_seq,
                    until=seq,
                    max_events=self.settings.replay_page_events,
                    max_bytes=self.settings.replay_page_bytes,
                )
                async for page in pages:
                    chunk.extend(
                        encode_event(e.payload, event_id=make_event_id(stream, e.seq))
                        for e in page
                        if e.payload
                    )
                    self.last_seq = page[-1].seq
                    await self.connection.send_body(b"".join(chunk), more_body=True)
                    chunk.clear()
                    await self.drain()
            if payload:  # a closing marker (see StreamEmitter.end_without_event) is not written
                chunk.append(encode_event(payload, event_id=make_event_id(stream, seq)))
            self.last_seq = seq
            if closes:
                ends = self.finished = True
                break
        if ends:
            # The last events and the end of the response in one write.
            await self.end(b"".join(chunk))
            raise StopConsumer()
        if any(chunk):
            # One socket write per batch.
            await self.connection.send_body(b"".join(chunk), more_body=True)
            # While this waits, further events queue in the channel layer; what it drops
            # when full is filled in from the store above.
            await self.drain()

    async def drain(self) -> None:
        """Wait until the client has taken what was written, where the server tells (Daphne);
        close the connection when it takes nothing for SSE_WRITE_TIMEOUT (it resumes later)."""
        if self.flow is None:
            self.flow = WriteFlow(self.connection.base_send)
        if self.flow.lost or not await self.flow.drain(self.settings.sse_write_timeout):
            await self.end()
            raise StopConsumer()

    async def end(self, last: bytes = b"") -> None:
        """End the response, after ``last`` (the connection, not the stream: events stay stored)."""
        if not self.closed:
            last = await self._head() + last
            self.closed = True
            if self.flow is not None:
                self.flow.close()
            await self.connection.send_body(last, more_body=False)

    # -- clocks (see StreamClocks) ---------------------------------------------------------

    def start_timers(self) -> None:
        """Count the stream as open and arm its clocks: keep-alive comments, re-checking the
        credential, and the connection's time limit."""
        stream_opened(self, "session")
        self.clocks.start()

    async def keepalive(self) -> None:
        await self.connection.send_body(KEEPALIVE, more_body=True)

    async def still_authenticated(self) -> bool:
        return await still_authenticated(self.connection.scope, self.user_id, self.settings)

    async def disconnect(self) -> None:
        # Through the consumer's own channel, so the close runs in its dispatch loop.
        await self.connection.channel_layer.send(
            self.connection.channel_name, {"type": "mcp.disconnect"}
        )

    def close(self) -> None:
        """Release what the connection held; called once it is over, however it ended."""
        stream_closed(self)
        self.release_resume_slot()
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None
        if self.flow is not None:
            self.flow.close()
        self.clocks.stop()


class ResponseStream:
    """The SSE response of one 2026-07-28 request: its progress and log messages, then its
    response. Nothing is stored and events carry no id: this revision has no resumption, and
    closing the stream cancels the request."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.started = False

    async def open(self) -> None:
        if not self.started:
            self.started = True
            stream_opened(self, "response")  # closed by finish(), or when collected after a cancel
            await self.connection.send_headers(status=HTTPStatus.OK, headers=SSE_HEADERS)

    async def send(self, message: dict[str, Any]) -> None:
        await self.open()
        await self.connection.send_body(encode_event(encode(message).decode()), more_body=True)

    async def close_connection(self) -> None:
        """Nothing to resume in this revision: the request goes on until it answers."""

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        raise RuntimeError(
            "2026-07-28 sends no requests to the client; questions are input-required results"
        )

    async def run(
        self,
        answer: Callable[[], Coroutine[Any, Any, dict[str, Any]]],
        receive: Callable[[], Awaitable[Any]],
    ) -> dict[str, Any] | None:
        """The response of ``answer()``, or None when the client closed the connection first:
        closing the response stream is the cancellation in this revision, so it is cancelled."""
        return await until_disconnect(answer(), receive)

    async def finish(self, response: dict[str, Any]) -> None:
        stream_closed(self)
        await self.send(response)
        await self.connection.send_body(b"", more_body=False)


async def until_disconnect(
    answer: Coroutine[Any, Any, T], receive: Callable[[], Awaitable[Any]]
) -> T | None:
    """The result of ``answer``, or None when the client disconnected first (``receive`` gave
    ``http.disconnect``: the request body is read by then), in which case it is cancelled."""
    task = asyncio.get_running_loop().create_task(answer)
    gone = asyncio.ensure_future(receive())
    # The disconnect cancels the answer itself: a callback, not asyncio.wait, whose set, waiter
    # and callbacks per call were a twentieth of a JSON call's CPU (issue 45).
    gone.add_done_callback(functools.partial(_cancel_unless_cancelled, task))
    try:
        return await task
    except asyncio.CancelledError:
        if gone.done() and not gone.cancelled() and not _cancelling():
            return None  # the client left: its request is cancelled, nothing is answered
        raise
    finally:
        gone.cancel()


def _cancel_unless_cancelled(task: asyncio.Task[Any], gone: asyncio.Future[Any]) -> None:
    if not gone.cancelled():
        task.cancel()


def _cancelling() -> bool:
    """Whether this task itself was asked to stop (Python 3.11+ can tell; 3.10 cannot)."""
    current = asyncio.current_task()
    cancelling = getattr(current, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False


class ListenStream:
    """A 2026-07-28 ``subscriptions/listen`` response: the acknowledgement, then the changes its
    filter asked for, each tagged with the subscription id (the listen request's id), until the
    client closes it or the server ends it with a complete result. Keep-alive comments keep
    intermediaries from closing it while nothing changes."""

    def __init__(self, connection: Connection, subscription_id: Any, settings: MCPSettings) -> None:
        self.connection = connection
        self.subscription_id = subscription_id
        self.settings = settings
        self.closed = False
        self.timers: list[asyncio.Task[Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        if not self.closed:
            tagged = tag_subscription(message, self.subscription_id)
            await self.connection.send_body(encode_event(encode(tagged).decode()), more_body=True)

    async def open(self, agreed: dict[str, Any]) -> None:
        await self.connection.join(LISTEN_GROUP)
        await self.connection.send_headers(status=HTTPStatus.OK, headers=SSE_HEADERS)
        stream_opened(self, "listen")
        await self.send(listen_acknowledgement(agreed, self.subscription_id))
        loop = asyncio.get_running_loop()
        if self.settings.sse_keepalive_seconds > 0:
            self.timers.append(
                loop.create_task(self._keepalive(self.settings.sse_keepalive_seconds))
            )
        limit = self.settings.sse_max_connection_seconds
        if limit is not None:
            self.timers.append(loop.create_task(self._end_after(limit)))

    async def _keepalive(self, interval: float) -> None:
        while not self.closed:
            await asyncio.sleep(interval)
            if not self.closed:
                await self.connection.send_body(KEEPALIVE, more_body=True)

    async def _end_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self.connection.channel_layer.send(self.connection.channel_name, {"type": "mcp.end"})

    async def end(self) -> None:
        """End gracefully: a complete result to the listen request, then close (subscriptions
        spec)."""
        if not self.closed:
            await self.send(result_message(self.subscription_id, {"resultType": "complete"}))
            self.closed = True
            await self.connection.send_body(b"", more_body=False)

    def close(self) -> None:
        stream_closed(self)
        self.closed = True
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()
