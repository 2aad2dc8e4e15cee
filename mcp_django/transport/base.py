"""What every request to the Streamable HTTP endpoint shares, whichever method or era: the ASGI
loop (answer at once, or follow the channel layer once the answer is a stream), reading the
body under ``MAX_BODY_SIZE``, turning a refusal into its HTTP answer, writing JSON, empty and
SSE answers with the CORS headers, the groups joined and the stream slot held, and the
channel-layer messages to an open stream.

:class:`~mcp_django.transport.consumers.MCPConsumer` implements :meth:`BaseMCPConsumer.handle`
(what the request means); the SSE streams it opens write through this connection.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer

from ..conf import mcp_settings
from ..protocol.errors import TransportError
from ..protocol.jsonrpc import encode
from ..protocol.limits import body_too_large
from ..server.engine import Engine, Principal
from . import headers as checks
from .dispatch import dispatch_many
from .layers import (
    GET_STREAM,
    Inbox,
    InMemoryChannelLayer,
    close_inbox,
    get_layer,
    group_add_many,
    group_discard_many,
    open_inbox,
)
from .process import stream_dropped
from .refusals import failure, of_transport_error, refusal, whole_answer
from .sse import ListenStream, SSEStream

if TYPE_CHECKING:
    from ..ops.quotas.limits import LeasedSlot
    from ..registry.sites import MCPSite


class BaseMCPConsumer(AsyncHttpConsumer):  # type: ignore[misc]  # Channels ships no type information
    """One HTTP request to the MCP endpoint: its I/O; a subclass says what the request means."""

    settings = mcp_settings
    site: MCPSite
    #: What the audit trail and tracing call this transport (``Session.transport``'s values).
    transport_name = "streamable-http"

    def __init__(self, site: MCPSite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.site = site
        site.serving = True
        self.engine: Engine = site.engine
        self.body_size = 0
        # Set once the answer is an SSE stream: the connection then follows the channel layer.
        self.sse: SSEStream | None = None
        # Set for a 2026-07-28 subscriptions/listen: the stream, who opened it, what it follows.
        self.listen: ListenStream | None = None
        self.listening: tuple[Principal, dict[str, Any]] | None = None
        self.joined: list[str] = []
        #: Where group_send hands this connection its messages from this process (channels_redis).
        self.inbox: Inbox | None = None
        # Set once the Origin is known to be an explicitly allowed cross-origin caller.
        self.cors_headers: list[tuple[bytes, bytes]] = []
        # Held while this connection is an SSE stream counted against the stream caps.
        self.slot: LeasedSlot | None = None
        # Another connection took the stream over, or it ended: this one's going strands nothing.
        self.handed_over = False
        # Set once the response's status line is out: a failure after it cannot be answered.
        self.answered = False

    # -- ASGI plumbing ------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scope = scope
        self.base_send = send
        self.base_receive = receive
        self.headers = checks.Headers(scope)
        self.channel_layer = get_layer()
        self.channel_name = None
        try:
            # Most requests are answered at once and need no channel: read, answer, done.
            while not self.streaming:
                await self.dispatch(await receive())
            # The request is read: a stream no longer needs its parsed headers (the scope keeps
            # the raw ones), and an idle stream holds as little as it can.
            del self.headers
            await dispatch_many(self.sources(receive), self.dispatch)
        except StopConsumer:
            pass
        finally:
            await self.cleanup()

    def sources(self, receive: Any) -> list[Callable[[], Awaitable[dict[str, Any]]]]:
        """What an open stream follows: the client (for its disconnect), its channel, and its
        inbox, where this process hands it its groups' messages (layers.Inbox)."""
        layer, name = self.channel_layer, self.channel_name
        assert name is not None, "a stream joins its groups on a channel of its own"
        # On the in-memory layer, a bare future while nothing comes, not a task (dispatch.py).
        channel = (
            layer.source(name)
            if isinstance(layer, InMemoryChannelLayer)
            else functools.partial(layer.receive, name)
        )
        return [receive, channel, *([self.inbox.get] if self.inbox is not None else [])]

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Unlike AsyncConsumer.dispatch, no close_old_connections() per message: every ORM call
        # here goes through sync_to_async, which manages connections in its own thread.
        handler = getattr(self, message["type"].replace(".", "_"), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def http_request(self, message: dict[str, Any]) -> None:
        if self.body_size == 0 and not self.body:
            # Set before any answer (even a 413) so the browser can read it.
            self.cors_headers = checks.cors_headers(
                self.scope.get("scheme", "http"), self.headers, self.settings
            )
            try:
                checks.check_declared_length(self.headers, self.settings)
            except TransportError as exc:
                await self.send_transport_error(exc)
                raise StopConsumer() from None
        chunk = message.get("body", b"")
        self.body_size += len(chunk)
        if self.body_size > self.settings.max_body_size:
            await self.send_transport_error(body_too_large(self.settings.max_body_size))
            raise StopConsumer()
        self.body.append(chunk)
        if message.get("more_body"):
            return
        try:
            await self.handle(b"".join(self.body))
        except StopConsumer:
            raise
        except Exception as exc:
            # The request's top level: a refusal, or a database or cache that cannot be reached
            # (or a bug), logged and answered with a JSON-RPC error, not the server's bare 500.
            answer = refusal(exc)
            if answer is None:
                if self.streaming or self.answered:
                    raise
                answer = await failure(exc)
            await self.send_json(answer.status, answer.body, answer.headers)
        if not self.streaming:
            raise StopConsumer()

    @property
    def streaming(self) -> bool:
        return self.sse is not None or self.listen is not None

    async def http_disconnect(self, message: dict[str, Any]) -> None:
        raise StopConsumer()

    async def cleanup(self) -> None:
        if self.sse is not None:
            self.sse.close()
            stream = self.sse.stream
            if (
                stream is not None
                and stream != GET_STREAM
                and not self.sse.finished
                and not self.handed_over
            ):
                # No connection left on a POST stream whose requests may still run: they are
                # cancelled after DISCONNECT_GRACE_SECONDS unless the client resumes it.
                await stream_dropped(stream)
        if self.listen is not None:
            self.listen.close()
        if self.joined and self.channel_name is not None:
            await group_discard_many(self.channel_layer, self.joined, self.channel_name)
        self.joined.clear()
        if self.inbox is not None and self.channel_name is not None:
            close_inbox(self.channel_name)
            self.inbox = None
        if self.slot is not None:
            await self.slot.release()
            self.slot = None

    # -- subclass implementation --------------------------------------------------------

    async def handle(self, body: bytes) -> None:
        """Answer the request whose whole ``body`` was read (the headers are in
        ``self.headers``)."""
        raise NotImplementedError("subclasses of BaseMCPConsumer must implement handle(body)")

    # -- writing --------------------------------------------------------------------------

    async def send_headers(self, *, status: int = HTTPStatus.OK, headers: Any = None) -> None:
        raw = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
        self.answered = True
        # A plain int on the wire: on Python 3.10 str(HTTPStatus.OK) is "HTTPStatus.OK", and
        # Twisted (under Daphne) writes the status line with str().
        await super().send_headers(status=int(status), headers=raw + self.cors_headers)

    async def send_answer(
        self, status: int, answer: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        """Send one JSON-RPC answer as the whole HTTP response: 429 with Retry-After when a quota
        refused it, else ``status``."""
        whole = whole_answer(status, answer, headers)
        await self.send_json(whole.status, whole.body, whole.headers)

    async def hold_stream_slot(self, principal: Principal, session_id: str | None) -> None:
        """Count this connection against the stream caps until it ends (429 when one is reached)."""
        self.slot = await self.engine.stream_slot(principal, session_id)

    async def send_json(
        self, status: int, body: Any, headers: dict[str, str] | None = None
    ) -> None:
        raw = [(b"content-type", b"application/json")]
        raw += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        await self.send_whole(status, encode(body), raw)

    async def send_whole(
        self, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> None:
        """Send a response that is complete in hand: its length in ``Content-Length`` and the
        body as one message, so the server writes it at once (without a length, Daphne and
        uvicorn send it chunked, with a closing chunk of its own)."""
        self.answered = True
        headers.append((b"content-length", str(len(body)).encode("ascii")))
        await self.base_send(
            {
                "type": "http.response.start",
                "status": int(status),
                "headers": headers + self.cors_headers,
            }
        )
        await self.base_send({"type": "http.response.body", "body": body})

    async def send_transport_error(self, exc: TransportError) -> None:
        answer = of_transport_error(exc)
        await self.send_json(answer.status, answer.body, answer.headers)

    async def send_empty(self, status: int, headers: dict[str, str] | None = None) -> None:
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        await self.send_whole(status, b"", raw)

    async def join(self, *groups: str) -> None:
        channel = self.channel_name
        if channel is None:
            channel = self.channel_name = await self.channel_layer.new_channel()
        if self.inbox is None:
            self.inbox = open_inbox(self.channel_layer, channel, self.joined)
        # Listed first: group_add_many notes a channel with an inbox as a local member of its
        # groups.
        self.joined.extend(groups)
        await group_add_many(self.channel_layer, list(groups), channel)

    # -- channel-layer messages to an open stream -----------------------------------------

    async def mcp_event(self, message: dict[str, Any]) -> None:
        await self.stream.write_events(
            [(message["seq"], message["payload"], bool(message.get("closes")))]
        )

    async def mcp_events(self, message: dict[str, Any]) -> None:
        """A batch of stored events of this stream, in order (see StreamEmitter)."""
        await self.stream.write_events(
            [(seq, payload, bool(closes)) for seq, payload, closes in message["events"]]
        )

    async def mcp_start(self, message: dict[str, Any]) -> None:
        """A POST stream's first events did not come soon: send its headers and priming event."""
        await self.stream.start()

    async def mcp_disconnect(self, message: dict[str, Any]) -> None:
        """Close the connection, not the stream: the client resumes with Last-Event-ID (a listen
        stream ends gracefully instead: its client listens again)."""
        if self.listen is not None:
            await self.listen.end()
        else:
            await self.stream.end()
        raise StopConsumer()

    async def mcp_takeover(self, message: dict[str, Any]) -> None:
        """A newer connection took the stream over, the stream ended, or its session did."""
        self.handed_over = True
        await self.mcp_disconnect(message)

    mcp_end = mcp_terminate = mcp_takeover

    async def mcp_listen(self, message: dict[str, Any]) -> None:
        """A change announced to every listen stream (notifications.tell_listeners)."""
        if self.listen is None or self.listening is None:
            return
        notification = await self.engine.listen_notification(*self.listening, message)
        if notification is not None:
            await self.listen.send(notification)

    @property
    def stream(self) -> SSEStream:
        assert self.sse is not None, "channel-layer messages reach only a consumer with a stream"
        return self.sse
