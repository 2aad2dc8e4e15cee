"""MCP over standard input and output: newline-delimited JSON-RPC, one client, one process
(transports spec, "stdio"). Run by ``manage.py mcp_stdio``.

A thin adapter over the engine, like the HTTP consumer: it reads lines, asks the engine, and
writes lines. What the HTTP transport sends on a request's SSE stream (progress, logs, questions
to the client) is written to stdout as it happens; the client's answers come back on stdin.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from ..protocol import modern
from ..protocol.errors import InternalError, InvalidRequestError, MCPError, TransportError
from ..protocol.jsonrpc import (
    Decoded,
    Invalid,
    Notification,
    Request,
    Response,
    decode,
    encode,
    error_message,
    notification_message,
    request_message,
    result_message,
)
from ..protocol.params import CancelledParams, peek
from ..server.engine import Engine
from ..server.notifications import LISTEN_GROUP
from ..server.principal import Principal
from .layers import get_layer, get_stream_group

if TYPE_CHECKING:
    from ..models import Session

logger = logging.getLogger("mcp_django.transport")

#: What a request may not do before ``initialize`` in a handshake-era conversation.
BEFORE_INITIALIZE = "Invalid Request: send initialize first"


class StdioEmitter:
    """Where one request's progress, logs and questions go: straight to stdout."""

    def __init__(self, server: StdioServer) -> None:
        self.server = server

    async def send(self, message: dict[str, Any]) -> None:
        await self.server.write(message)

    async def close_connection(self) -> None:
        """A pipe has nothing to resume: the request goes on."""

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        return await self.server.ask(method, params, timeout)


class StdioServer:
    """One stdio conversation: its session (handshake era), its running requests, and the
    requests it sent the client that wait for an answer."""

    def __init__(
        self, engine: Engine, principal: Principal, write: Callable[[bytes], Any], *, max_line: int
    ) -> None:
        self.engine = engine
        self.principal = principal
        self._write = write
        self.max_line = max_line
        self.session: Session | None = None
        #: Short tasks of our own (an error to write, a slot to give back), kept until they end.
        self.chores: set[asyncio.Task[Any]] = set()
        self.running: dict[str, asyncio.Task[None]] = {}
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self.follower: asyncio.Task[None] | None = None
        # Keys of running subscriptions/listen requests: they end only when cancelled.
        self.listening: set[str] = set()

    # -- output ---------------------------------------------------------------------------

    async def write(self, message: dict[str, Any] | list[dict[str, Any]]) -> None:
        # One write per message, newline-terminated; orjson never emits a raw newline.
        await self._write(encode(message) + b"\n")

    async def ask(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send the client a request and wait for its answer (sampling, elicitation, roots)."""
        request_id = f"srv-{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        try:
            await self.write(request_message(request_id, method, params))
            return await asyncio.wait_for(future, timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            # Tell the client to stop asking its user or model (cancellation, both directions).
            reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else "cancelled"
            await asyncio.shield(
                self.write(
                    notification_message(
                        "notifications/cancelled", {"requestId": request_id, "reason": reason}
                    )
                )
            )
            if isinstance(exc, asyncio.TimeoutError):
                raise TimeoutError(method) from None
            raise
        finally:
            self.waiting.pop(request_id, None)

    # -- input ----------------------------------------------------------------------------

    async def serve(self, reader: asyncio.StreamReader) -> None:
        """Answer lines until end of input, then let the requests still running finish."""
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial  # the last line may lack its newline
                if line.strip():
                    await self.receive(line)
                break
            except asyncio.LimitOverrunError:
                # A line longer than MAX_BODY_SIZE: refused whole, then skipped to its end.
                await self.write(
                    error_message(
                        None,
                        InvalidRequestError(
                            f"Invalid Request: a message exceeds {self.max_line} bytes"
                        ),
                    )
                )
                await _skip_line(reader)
                continue
            if line.strip():
                await self.receive(line)
        for key in self.listening:
            self.running[key].cancel()  # nobody is left to hear them
        if self.running:
            await asyncio.gather(*self.running.values(), return_exceptions=True)

    async def receive(self, line: bytes) -> None:
        try:
            decoded = decode(line)
        except MCPError as exc:
            await self.write(error_message(exc.request_id, exc))
            return
        try:
            if self.session is not None:
                self.engine.check_batch(decoded, self.session)
            elif decoded.is_batch:
                raise TransportError(
                    HTTPStatus.BAD_REQUEST,
                    "Invalid Request: JSON-RPC batches are only allowed in a 2025-03-26 session",
                )
        except TransportError as exc:
            await self.write(error_message(None, InvalidRequestError(exc.message)))
            return
        if decoded.is_batch and self.session is not None:
            self.start_batch(decoded, self.session)
            return
        for message in decoded.messages:
            try:
                await self.message(message, decoded)
            except Exception:  # a top-level handler, as a view's 500: the next line is served
                logger.exception(
                    "stdio: could not handle a %s message", getattr(message, "method", "response")
                )
                if isinstance(message, Request):
                    await self.write(error_message(message.id, InternalError()))

    async def message(
        self, message: Request | Notification | Response | Invalid, decoded: Decoded
    ) -> None:
        if isinstance(message, Invalid):
            await self.write(error_message(message.id, message.error))
        elif isinstance(message, Response):
            future = self.waiting.get(message.id) if isinstance(message.id, str) else None
            if future is not None and not future.done():
                future.set_result(
                    {"result": message.result}
                    if message.error is None
                    else {"error": message.error}
                )
        elif isinstance(message, Notification):
            await self.notification(message)
        elif modern.is_modern_request(None, message.params):
            self.start(message, self.stateless(message))
        elif message.method == "initialize":
            await self.initialize(message)
        elif self.session is None and message.method != "ping":
            await self.write(error_message(message.id, InvalidRequestError(BEFORE_INITIALIZE)))
        elif self.session is None:
            await self.write(result_message(message.id, {}))
        else:
            refusal = self.engine.refuse(message, self.session, set())
            if refusal is not None:
                await self.write(refusal)
                return
            _, refused = await self.engine.check_quotas(
                self.principal, [message], session=self.session
            )
            if refused:
                await self.write(refused[0])  # -32029 with data.limit and data.retryAfter
            else:
                self.start(message, self.answer(message, self.session))

    async def notification(self, message: Notification) -> None:
        if message.method == "notifications/cancelled":
            request_id = peek(CancelledParams, "request_id", message.params)
            task = self.running.get(_key(request_id)) if request_id is not None else None
            if task is not None:
                task.cancel()  # no response follows (cancellation spec)
        elif self.session is not None:
            await self.engine.notification(self.session, message)

    async def initialize(self, message: Request) -> None:
        if self.session is not None:
            await self.write(
                error_message(
                    message.id, InvalidRequestError("Invalid Request: already initialized")
                )
            )
            return
        answer, session = await self.engine.initialize(self.principal, message, transport="stdio")
        self.session = session
        await self.write(answer)
        if session is not None:
            # What the site announces to the session (list changes, resource updates, log
            # messages not tied to a request) is sent to its GET stream's group: follow it.
            self.follower = asyncio.get_running_loop().create_task(
                self.follow(get_stream_group(session.pk))
            )

    # -- requests -------------------------------------------------------------------------

    def start(self, message: Request, work: Any) -> None:
        key = _key(message.id)
        if key in self.running:
            work.close()
            self.chore(
                self.write(
                    error_message(
                        message.id,
                        InvalidRequestError("Invalid Request: request id already in use"),
                    )
                )
            )
            self.chore(self.engine.release_held([message]))
            return
        task = asyncio.get_running_loop().create_task(work)
        self.running[key] = task

        def done(_: asyncio.Task[Any]) -> None:
            self.running.pop(key, None)
            # A task cancelled before it started never ran its request: give back the running
            # slot check_quotas took for it (a no-op once the request ran).
            self.chore(self.engine.release_held([message]))

        task.add_done_callback(done)

    def chore(self, work: Any) -> None:
        """Run ``work`` beside the requests, holding its task until it ends (the loop keeps only
        weak references to tasks)."""
        task = asyncio.get_running_loop().create_task(work)
        self.chores.add(task)
        task.add_done_callback(self.chores.discard)

    def start_batch(self, decoded: Decoded, session: Session) -> None:
        """A 2025-03-26 batch: its notifications and client answers act at once; its requests
        run together and their responses go out as one array, in order (JSON-RPC 2.0)."""

        async def run() -> None:
            replies: list[dict[str, Any]] = []
            requests: list[Request] = []
            seen: set[str] = set()
            for message in decoded.messages:
                if isinstance(message, Request) and message.method != "initialize":
                    refusal = self.engine.refuse(message, session, seen)
                    if refusal is not None:
                        replies.append(refusal)
                    else:
                        requests.append(message)
                elif isinstance(message, Request):
                    replies.append(
                        error_message(
                            message.id,
                            InvalidRequestError(
                                "Invalid Request: initialize must not be part of a batch"
                            ),
                        )
                    )
                else:
                    await self.message(message, decoded)
            requests, refused = await self.engine.check_quotas(
                self.principal, requests, session=session
            )
            replies += refused
            answers = (
                await self.engine.answer(
                    self.principal, session, requests, emitter=StdioEmitter(self)
                )
                if requests
                else []
            )
            if replies or answers:
                await self.write([*replies, *answers])

        task = asyncio.get_running_loop().create_task(run())
        key = f"batch:{id(task)}"
        self.running[key] = task
        task.add_done_callback(lambda _: self.running.pop(key, None))

    async def answer(self, message: Request, session: Session) -> None:
        (response,) = await self.engine.answer(
            self.principal, session, [message], emitter=StdioEmitter(self)
        )
        await self.write(response)

    async def stateless(self, message: Request) -> None:
        try:
            meta = await self.engine.stateless_meta(self.principal, message, {})
            if message.method == "subscriptions/listen":
                await self.listen(message)
                return
        except MCPError as exc:
            await self.write(error_message(message.id, exc))
            return
        await self.write(
            await self.engine.answer_stateless(self.principal, message, meta, StdioEmitter(self))
        )

    async def listen(self, message: Request) -> None:
        """A 2026-07-28 subscription on the pipe: the acknowledgement, then the changes it asked
        for, each tagged with its id, until the client cancels it (notifications/cancelled)."""
        agreed = await self.engine.listen_filter(self.principal, message)
        await self.write(modern.listen_acknowledgement(agreed, message.id))
        layer = get_layer()
        channel = await layer.new_channel()
        await layer.group_add(LISTEN_GROUP, channel)
        self.listening.add(_key(message.id))
        try:
            while True:
                event = await layer.receive(channel)
                notification = await self.engine.listen_notification(self.principal, agreed, event)
                if notification is not None:
                    await self.write(modern.tag_subscription(notification, message.id))
        finally:
            self.listening.discard(_key(message.id))
            await layer.group_discard(LISTEN_GROUP, channel)

    async def follow(self, group: str) -> None:
        """Write what the channel layer delivers to ``group`` (stored events of the session)."""
        layer = get_layer()
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        try:
            while True:
                delivered = await layer.receive(channel)
                if delivered.get("type") == "mcp.event":
                    events = [(delivered["seq"], delivered["payload"], delivered.get("closes"))]
                else:
                    events = delivered.get("events", [])
                for _, payload, _ in events:
                    if payload:
                        await self._write(payload.encode() + b"\n")
        finally:
            await layer.group_discard(group, channel)

    async def stop(self) -> None:
        """Cancel what still runs (SIGTERM); the session ends as a client's DELETE would."""
        if self.follower is not None:
            self.follower.cancel()
        for task in list(self.running.values()):
            task.cancel()
        if self.running:
            await asyncio.gather(*self.running.values(), return_exceptions=True)
        if self.session is not None:
            await self.engine.terminate(self.session, reason="stdio closed")


def _key(request_id: Any) -> str:
    # Keep the JSON type: id 1 and id "1" are different requests.
    return f"{type(request_id).__name__}:{request_id}"


async def _skip_line(reader: asyncio.StreamReader) -> None:
    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
        except asyncio.IncompleteReadError:
            return
