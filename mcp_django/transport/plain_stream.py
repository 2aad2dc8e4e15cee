"""A call's own SSE answer from the endpoint's plain view: its progress and logs as they come,
then its response, as the body of a :class:`~django.http.StreamingHttpResponse`.

The view returns before the body is written, so the call runs on the process loop
(:mod:`~mcp_django.transport.process_loop`) as the server reads the body: under WSGI its thread
takes each chunk from there (:class:`SyncChunks`), under ASGI without the router the server's
loop awaits each one (:class:`AsyncChunks`).

Bounded, since each open answer holds a server thread: at most ``PLAIN_STREAMS`` per process
(past it the view answers as JSON, see :data:`open_streams`), and ``PLAIN_STREAM_SECONDS`` each,
after which the call is cancelled and answered with an error. WSGI sees a client that left
only when a write fails: keep-alive comments (``SSE_KEEPALIVE_SECONDS``) write while the call
is silent, and the time bound covers the rest. A stream cut (the client gone, the server
closing the response) cancels the call.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from django.http import StreamingHttpResponse

from ..exceptions import ClientRequestError
from ..ops.tracing import stream_closed, stream_opened
from ..protocol.errors import InternalError
from ..protocol.jsonrpc import Request, encode, error_message
from ..protocol.sse import encode_comment, encode_event
from .process_loop import process_loop

if TYPE_CHECKING:
    from ..ops.quotas.limits import LeasedSlot
    from ..server.context import Emitter

logger = logging.getLogger(__name__)

#: Said by every answer the plain view gives instead of what a held stream would: what to deploy.
ASGI_HINT = (
    "serve the project's asgi.py with an ASGI server (daphne, uvicorn, granian) and "
    "application = mcp_django.routing.MCPRouter(get_asgi_application())"
)

#: Headers of a streamed answer (as :data:`mcp_django.transport.sse.SSE_HEADERS`).
STREAM_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    # nginx and friends must not buffer the stream.
    "X-Accel-Buffering": "no",
}

KEEPALIVE = encode_comment()

#: Events waiting to be written, per stream: a tool that outpaces its client waits here.
QUEUED_EVENTS = 64


def question_refused(method: str) -> str:
    """Why a tool's question (``method``) to the client fails on a streamed answer of the plain
    view: the client's answer would come in another POST, which nothing here waits for."""
    return (
        f"{method} asks the client a question, whose answer comes back in another request to a "
        "stream held between requests; this endpoint is served by its plain Django view (WSGI, "
        f"or ASGI without mcp_django's router), which holds none. To ask clients, {ASGI_HINT}"
    )


def cut_off_message(seconds: float) -> str:
    """What a call cancelled at ``PLAIN_STREAM_SECONDS`` is answered."""
    return (
        f"The call ran past PLAIN_STREAM_SECONDS ({seconds:g} s), the longest the endpoint's "
        "plain Django view (WSGI, or ASGI without mcp_django's router) streams an answer, and "
        f"was cancelled. Run long work as a task, or {ASGI_HINT}."
    )


def result_wait_message(seconds: float) -> str:
    """What a 2025-11-25 ``tasks/result`` is answered when its task has not ended within
    ``PLAIN_STREAM_SECONDS``: the wait ends there, the task goes on."""
    return (
        f"The task had not ended within PLAIN_STREAM_SECONDS ({seconds:g} s), the longest the "
        "endpoint's plain Django view (WSGI, or ASGI without mcp_django's router) holds a "
        "server thread for tasks/result; the task goes on. Poll tasks/get and call "
        f"tasks/result once it has ended, or, to wait for it, {ASGI_HINT}."
    )


class OpenStreams:
    """How many streamed answers this process holds, across its threads and loops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.held = 0

    def take(self, limit: int) -> bool:
        """Count one more, unless ``limit`` are open already (then False: answer as JSON)."""
        with self._lock:
            if self.held >= limit:
                return False
            self.held += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.held -= 1


#: The process's streamed answers, against ``PLAIN_STREAMS``.
open_streams = OpenStreams()


class QueueEmitter:
    """The engine's :class:`~mcp_django.server.context.Emitter` for a streamed answer: each
    notification becomes an SSE event in the stream's queue (no id: nothing here is stored or
    resumable)."""

    def __init__(self, queue: asyncio.Queue[bytes | None]) -> None:
        self.queue = queue

    async def send(self, message: dict[str, Any]) -> None:
        await self.queue.put(encode_event(encode(message).decode()))

    async def close_connection(self) -> None:
        """Nothing to resume here: the call goes on until it answers."""

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        raise ClientRequestError(question_refused(method))


class PlainStream:
    """One streamed answer: ``answer(emitter)`` runs the call (or a body's calls) and returns
    the responses, which follow the notifications it sent; ``requests`` are answered with an
    error if the time bound cuts it off. ``slots`` (quota slots the call holds) and this
    process's count in :data:`open_streams` are given back when it ends, however it ends."""

    def __init__(
        self,
        answer: Callable[[Emitter], Awaitable[list[dict[str, Any]]]],
        requests: list[Request],
        *,
        seconds: float | None,
        keepalive: float,
        slots: list[LeasedSlot],
        first: list[dict[str, Any]] | None = None,
    ) -> None:
        self.answer = answer
        self.requests = requests
        self.seconds = seconds
        self.keepalive = keepalive
        self.slots = slots
        #: Answers known before the call runs (members of a batch refused), sent first.
        self.first = first or []
        #: The events to write, then None once the responses are in.
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUED_EVENTS)
        self.task: asyncio.Task[None] | None = None
        self.released = False
        self.ended = False

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body: events as the call sends them, keep-alive comments while it is silent, its
        responses last; cut off at the time bound, and the call cancelled if the body is closed
        before its end."""
        loop = asyncio.get_running_loop()
        stream_opened(self, "response")
        self.task = loop.create_task(self._run())
        deadline = None if self.seconds is None else loop.time() + self.seconds
        try:
            for message in self.first:
                yield encode_event(encode(message).decode())
            while True:
                wait = self.keepalive or None
                if deadline is not None:
                    left = deadline - loop.time()
                    wait = left if wait is None else min(wait, left)
                try:
                    chunk = await asyncio.wait_for(self.queue.get(), wait)
                except asyncio.TimeoutError:
                    if deadline is not None and loop.time() >= deadline:
                        await self._cancel()
                        yield self._cut_off()
                        return
                    yield KEEPALIVE
                    continue
                if chunk is None:
                    await asyncio.wait({self.task})  # what it leaves to finish, finished
                    return
                yield chunk
        finally:
            await self.aclose()

    def _cut_off(self) -> bytes:
        seconds = self.seconds or 0
        events = []
        for message in self.requests:
            # tasks/result only waited: its task goes on, unlike a call cut off here.
            waited = message.method == "tasks/result"
            why = result_wait_message(seconds) if waited else cut_off_message(seconds)
            events.append(
                encode_event(encode(error_message(message.id, InternalError(why))).decode())
            )
        return b"".join(events)

    async def _run(self) -> None:
        try:
            try:
                responses = await self.answer(QueueEmitter(self.queue))
            except Exception:
                # The stream's top level: its client gets an error, as for a JSON answer.
                logger.exception("A streamed answer of the plain view failed")
                responses = [
                    error_message(message.id, InternalError("Internal error"))
                    for message in self.requests
                ]
            for response in responses:
                await self.queue.put(encode_event(encode(response).decode()))
            await self.queue.put(None)
        finally:
            await self._release()

    async def _cancel(self) -> None:
        task = self.task
        if task is not None and not task.done():
            task.cancel()
            # Waited for, not awaited: what it ended with is this stream's end, not raised here
            # (a cancel of this task itself still is).
            await asyncio.wait({task})
        if task is not None and task.done() and not task.cancelled() and not self.ended:
            self.ended = True
            failed = task.exception()
            if failed is not None:  # raised as it ended, after its responses
                logger.error("A streamed answer of the plain view failed", exc_info=failed)

    async def _release(self) -> None:
        if self.released:
            return
        self.released = True
        stream_closed(self)
        open_streams.give_back()
        for slot in self.slots:
            await slot.release()

    async def aclose(self) -> None:
        """End it: cancel the call if it still runs, and give back what it holds (once)."""
        await self._cancel()
        await self._release()  # a stream never iterated, or whose call never started


class SyncChunks:
    """The body of a streamed answer for a WSGI server's thread: each chunk is taken from the
    process loop, where the call runs; :meth:`close` (the server calls it through the response,
    however the response ended) cancels the call."""

    def __init__(self, stream: PlainStream) -> None:
        self.stream = stream
        self.body: AsyncGenerator[bytes, None] | None = None
        self.closed = False

    def __iter__(self) -> SyncChunks:
        return self

    def __next__(self) -> bytes:
        if self.closed:
            raise StopIteration
        if self.body is None:
            self.body = self.stream.chunks()
        try:
            return process_loop.run(anext_chunk(self.body))
        except StopAsyncIteration:
            self.close()
            raise StopIteration from None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        process_loop.run(end(self.stream, self.body))


class AsyncChunks:
    """The body of a streamed answer for an ASGI server's loop (Django's handler iterates it,
    and cancels it when the client disconnects): each chunk awaited from the process loop."""

    def __init__(self, stream: PlainStream) -> None:
        self.stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        body = self.stream.chunks()
        try:
            while True:
                try:
                    chunk = await asyncio.wrap_future(process_loop.submit(anext_chunk(body)))
                except StopAsyncIteration:
                    return
                yield chunk
        finally:
            await asyncio.wrap_future(process_loop.submit(end(self.stream, body)))

    def close(self) -> None:
        """Give back what a stream whose body was never read holds (one that was read gave it
        back as it ended); Django's handler calls this in a thread, its test client on a loop."""
        if not self.stream.released:
            process_loop.submit(end(self.stream, None))


async def anext_chunk(body: AsyncGenerator[bytes, None]) -> bytes:
    """The body's next chunk (a coroutine, for the process loop to run)."""
    return await body.__anext__()


async def end(stream: PlainStream, body: AsyncGenerator[bytes, None] | None) -> None:
    """Close ``body`` if it was started, and end ``stream`` (cancel its call, give back what it
    holds)."""
    if body is not None:
        await body.aclose()
    await stream.aclose()


def streaming_response(
    stream: PlainStream, asgi: bool, headers: dict[str, str]
) -> StreamingHttpResponse:
    """The response writing ``stream``: with an async body for an ASGI server, else with a sync
    one."""
    body: SyncChunks | AsyncChunks = AsyncChunks(stream) if asgi else SyncChunks(stream)
    response = StreamingHttpResponse(body, status=200)
    for name, value in {**STREAM_HEADERS, **headers}.items():
        response[name] = value
    return response
