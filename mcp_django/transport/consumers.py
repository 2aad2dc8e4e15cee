"""The Streamable HTTP endpoint as a Channels consumer: POST, GET and DELETE on one path.

The consumer does I/O only: it reads the body, runs the header checks
(:mod:`~mcp_django.transport.headers`) and the authentication
(:mod:`~mcp_django.transport.authentication`), asks the :class:`~mcp_django.engine.Engine`,
and writes the answer, as JSON or as an SSE stream (:mod:`~mcp_django.transport.sse`). Work
that outlives the HTTP connection (a tool call answered over SSE) runs in its own task and
writes to the event store, so a client that drops the connection loses nothing: it resumes
with ``Last-Event-ID``, on this process or another.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from channels.utils import await_many_dispatch
from django.db import DatabaseError

from ..auth.base import AuthenticationFailed
from ..conf import mcp_settings
from ..engine import Engine, Principal, Received
from ..protocol import modern
from ..protocol.errors import INTERNAL_ERROR, QUOTA_EXCEEDED, InvalidRequestError, MCPError, TransportError
from ..protocol.jsonrpc import Decoded, Notification, Request, decode, encode, error_message, result_message
from ..protocol.limits import body_too_large
from ..protocol.sse import parse_event_id
from ..tables import missing_tables_message, names_missing_table, sessions_database, unapplied_migrations
from . import headers as checks
from .authentication import authenticate, build_request
from .layers import GET_STREAM, get_layer, group_add_many, group_discard_many, new_stream_token, stream_belongs_to
from .process import process_channel, stream_dropped, stream_resumed
from .sse import ListenStream, ResponseStream, SSEStream, until_disconnect
from .streams import StreamEmitter

if TYPE_CHECKING:
    from ..models import Session
    from ..quotas import LeasedSlot
    from ..sites import MCPSite


logger = logging.getLogger(__name__)


class MCPConsumer(AsyncHttpConsumer):  # type: ignore[misc]  # Channels ships no type information
    """One HTTP request to the MCP endpoint."""

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
        # Set once the Origin is known to be an explicitly allowed cross-origin caller.
        self.cors_headers: list[tuple[bytes, bytes]] = []
        # Held while this connection is an SSE stream counted against the stream caps.
        self.slot: LeasedSlot | None = None
        # Another connection took the stream over, or it ended: this one's going strands nothing.
        self.handed_over = False

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
            # A stream follows the channel layer as well as the client (for its disconnect).
            self.channel_receive = functools.partial(self.channel_layer.receive, self.channel_name)
            await await_many_dispatch([receive, self.channel_receive], self.dispatch)
        except StopConsumer:
            pass
        finally:
            await self.cleanup()

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
            self.cors_headers = checks.cors_headers(self.scope, self.headers, self.settings)
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
        except TransportError as exc:
            await self.send_transport_error(exc)
        except AuthenticationFailed as exc:
            await self.send_json(exc.status, error_message(None, InvalidRequestError(exc.message)), exc.headers)
        except MCPError as exc:
            # Refused before any request could be answered (a cap on sessions or streams).
            await self.send_answer(exc.http_status or 400, error_message(None, exc))
        except DatabaseError as exc:
            unmigrated = None if self.streaming else await unmigrated_error(exc)
            if unmigrated is None:
                raise
            await self.send_transport_error(unmigrated)
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
            if stream is not None and stream != GET_STREAM and not self.sse.finished and not self.handed_over:
                # No connection left on a POST stream whose requests may still run: they are
                # cancelled after DISCONNECT_GRACE_SECONDS unless the client resumes it.
                await stream_dropped(stream)
        if self.listen is not None:
            self.listen.close()
        if self.joined and self.channel_name is not None:
            await group_discard_many(self.channel_layer, self.joined, self.channel_name)
        self.joined.clear()
        if self.slot is not None:
            await self.slot.release()
            self.slot = None

    # -- writing --------------------------------------------------------------------------

    async def send_headers(self, *, status: int = 200, headers: Any = None) -> None:
        raw = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
        await super().send_headers(status=status, headers=raw + self.cors_headers)

    async def send_answer(self, status: int, answer: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        """Send one JSON-RPC answer as the whole HTTP response: 429 with Retry-After when a quota
        refused it, else ``status``."""
        status, extra = http_answer(answer, status)
        await self.send_json(status, answer, {**(headers or {}), **extra})

    async def hold_stream_slot(self, principal: Principal, session_id: str | None) -> None:
        """Count this connection against the stream caps until it ends (429 when one is reached)."""
        self.slot = await self.engine.stream_slot(principal, session_id)

    async def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = [(b"content-type", b"application/json")]
        raw += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        await self.send_response(status, encode(body), headers=raw)

    async def send_transport_error(self, exc: TransportError) -> None:
        await self.send_json(exc.status, exc.to_body(), exc.headers)

    async def send_empty(self, status: int, headers: dict[str, str] | None = None) -> None:
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        await self.send_response(status, b"", headers=raw)

    async def join(self, *groups: str) -> None:
        channel = self.channel_name
        if channel is None:
            channel = self.channel_name = await self.channel_layer.new_channel()
        await group_add_many(self.channel_layer, list(groups), channel)
        self.joined.extend(groups)

    # -- the request ----------------------------------------------------------------------

    async def handle(self, body: bytes) -> None:
        # This process must hear about session changes before it serves sessions from memory.
        await process_channel.ensure()
        request = build_request(self.scope, body)
        checks.check_origin_and_host(request, self.headers, self.settings)
        method = self.scope["method"]
        if self.cors_headers and method == "OPTIONS":
            await self.send_empty(204, checks.PREFLIGHT_HEADERS)
            return
        # The 401 challenge names every scope the site uses: OAuthAuthentication calls this
        # when it sends one (walking the registry on every request would cost every request).
        request.mcp_declared_scopes = self.site.get_scopes  # type: ignore[attr-defined]
        principal = await authenticate(request, self.settings, transport=self.transport_name)
        if method == "POST":
            await self.post(principal, body)
        elif method == "GET":
            await self.get(principal)
        elif method == "DELETE":
            await self.delete(principal)
        else:
            raise checks.method_not_allowed()

    async def session(self, principal: Principal) -> Session:
        session_id = self.headers.get("mcp-session-id")
        if session_id is None:
            raise TransportError(400, "Bad Request: Mcp-Session-Id header is required; send initialize first")
        return await self.engine.load_session(principal, session_id)

    async def post(self, principal: Principal, body: bytes) -> None:
        checks.check_post(self.headers)
        try:
            decoded = decode(body)
        except MCPError as exc:
            await self.send_json(400, error_message(exc.request_id, exc))
            return
        first = decoded.messages[0]
        # The era is chosen per request: 2026-07-28 _meta (or header) means stateless, even on
        # initialize (a removed method there: 404); anything else is the handshake era
        # (versioning spec, "dual-era" servers).
        if (
            not decoded.is_batch
            and isinstance(first, (Request, Notification))
            and modern.is_modern_request(self.headers.get("mcp-protocol-version"), first.params)
        ):
            await self.post_stateless(principal, first)
            return
        checks.check_version(self.headers)
        if any(isinstance(m, Request) and m.method == "initialize" for m in decoded.messages):
            await self.initialize(principal, decoded)
            return
        ping = lone_ping(decoded)
        if ping is not None and self.headers.get("mcp-session-id") is None:
            # ping is the one request allowed before initialize (lifecycle spec).
            await self.send_json(200, result_message(ping.id, {}))
            return
        session = await self.session(principal)
        received = await self.engine.receive(principal, session, decoded)
        try:
            await self.answer_received(principal, session, decoded, received)
        finally:
            await self.engine.release_held(received.requests)  # those that never ran

    async def answer_received(self, principal: Principal, session: Session, decoded: Decoded, received: Received) -> None:
        if not received.requests:
            if not received.replies:
                await self.send_empty(202)
            elif decoded.is_batch:
                await self.send_json(200, received.replies)
            else:
                await self.send_answer(400, received.replies[0])
        elif self.engine.needs_stream(received.requests):
            await self.answer_as_stream(principal, session, received.requests, received.replies)
        else:
            # A JSON answer has nowhere to go once the client is gone: the requests are cancelled.
            answered = await until_disconnect(self.engine.answer(principal, session, received.requests), self.base_receive)
            if answered is None:
                raise StopConsumer()
            answers = received.replies + answered
            if decoded.is_batch:
                await self.send_json(200, answers)
            else:
                await self.send_answer(200, answers[0])

    async def initialize(self, principal: Principal, decoded: Decoded) -> None:
        if decoded.is_batch:
            raise TransportError(400, "Invalid Request: initialize must not be part of a batch")
        if self.headers.get("mcp-session-id") is not None:
            raise TransportError(400, "Invalid Request: initialize must be sent without Mcp-Session-Id")
        answer, session = await self.engine.initialize(principal, decoded.messages[0])  # type: ignore[arg-type]
        await self.send_answer(200, answer, {"mcp-session-id": session.pk} if session is not None else None)

    async def answer_as_stream(
        self, principal: Principal, session: Session, requests: list[Request], replies: list[dict[str, Any]]
    ) -> None:
        await self.hold_stream_slot(principal, session.pk)
        self.sse = SSEStream(self, session.pk, principal.user_id, self.settings)
        stream = new_stream_token(session.pk)
        await self.sse.open_post_stream(stream)
        streamed = await self.engine.stream(principal, session, requests, StreamEmitter(session.pk, stream))
        await self.sse.start_post_stream()
        await streamed.start(replies)

    async def get(self, principal: Principal) -> None:
        checks.refuse_stateless(self.headers, "GET")
        checks.check_get(self.headers)
        session = await self.session(principal)
        sse = SSEStream(self, session.pk, principal.user_id, self.settings)
        last_event_id = self.headers.get("last-event-id")
        if last_event_id is None:
            await self.hold_stream_slot(principal, session.pk)
            self.sse = sse
            await sse.open_get_stream()
            return
        try:
            stream, after = parse_event_id(last_event_id)
        except ValueError:
            raise TransportError(400, "Bad Request: malformed Last-Event-ID") from None
        if not stream_belongs_to(session.pk, stream):
            raise TransportError(400, "Bad Request: Last-Event-ID names no stream of this session")
        await self.hold_stream_slot(principal, session.pk)
        sse.take_resume_slot()
        self.sse = sse
        if stream != GET_STREAM:
            await stream_resumed(stream)  # its requests are not cancelled for the dropped connection
        await sse.resume(stream, after)

    async def delete(self, principal: Principal) -> None:
        checks.refuse_stateless(self.headers, "DELETE")
        await self.engine.terminate(await self.session(principal))
        await self.send_empty(204)

    # -- 2026-07-28 ------------------------------------------------------------------------

    async def post_stateless(self, principal: Principal, message: Request | Notification) -> None:
        """One 2026-07-28 message: no session; a request is answered as JSON, or as an SSE
        stream of its own that the client cancels by closing."""
        if isinstance(message, Notification):
            await self.send_empty(202)  # none is defined over HTTP in this revision; accepted
            return
        try:
            meta = await self.engine.stateless_meta(principal, message, self.headers)
        except MCPError as exc:
            await self.send_answer(exc.http_status or 400, error_message(message.id, exc))
            return
        if message.method == "subscriptions/listen":
            await self.open_listen(principal, message)
            return
        try:
            await self.answer_stateless(principal, message, meta)
        finally:
            await self.engine.release_held([message])  # when it never ran

    async def answer_stateless(self, principal: Principal, message: Request, meta: modern.RequestMeta) -> None:
        if not self.engine.needs_stream_stateless(message):
            response = await until_disconnect(self.engine.answer_stateless(principal, message, meta), self.base_receive)
            if response is None:
                raise StopConsumer()  # the client left, and with it the request
            await self.send_answer(modern.http_status(response), response)
            return
        try:
            await self.hold_stream_slot(principal, None)
        except MCPError as exc:
            await self.send_answer(exc.http_status or 400, error_message(message.id, exc))
            return
        stream = ResponseStream(self)
        streamed = await stream.run(lambda: self.engine.answer_stateless(principal, message, meta, stream), self.base_receive)
        if streamed is None:
            raise StopConsumer()  # the client left, and with it the request
        if stream.started:
            await stream.finish(streamed)
        else:
            await self.send_answer(modern.http_status(streamed), streamed)

    async def open_listen(self, principal: Principal, message: Request) -> None:
        try:
            agreed = await self.engine.listen_filter(principal, message)
            await self.hold_stream_slot(principal, None)
        except MCPError as exc:
            await self.send_answer(modern.http_status(error_message(message.id, exc)), error_message(message.id, exc))
            return
        self.listening = (principal, agreed)
        self.listen = ListenStream(self, message.id, self.settings)
        await self.listen.open(agreed)

    # -- channel-layer messages to an open stream -----------------------------------------

    async def mcp_event(self, message: dict[str, Any]) -> None:
        await self.stream.write_events([(message["seq"], message["payload"], bool(message.get("closes")))])

    async def mcp_events(self, message: dict[str, Any]) -> None:
        """A batch of stored events of this stream, in order (see StreamEmitter)."""
        await self.stream.write_events([(seq, payload, bool(closes)) for seq, payload, closes in message["events"]])

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


async def unmigrated_error(exc: DatabaseError) -> TransportError | None:
    """The 503 for a request that failed on one of mcp_django's tables because ``migrate`` was
    not run, or None when the tables are there (another failure, for the server's 500). The
    migrations are read only here, after such a failure, never on the way of a request."""
    if not names_missing_table(exc):
        return None
    using = sessions_database()
    try:
        pending = await sync_to_async(unapplied_migrations)(using)
    except DatabaseError:
        return None
    if not pending:
        return None
    logger.error("An MCP request failed on a missing table: %s", missing_tables_message(pending, using))
    return TransportError(503, missing_tables_message(pending, using), code=INTERNAL_ERROR)


def http_answer(answer: dict[str, Any], status: int) -> tuple[int, dict[str, str]]:
    """The status and extra headers of ``answer`` sent as a whole HTTP response: 429 and
    ``Retry-After`` (whole seconds, when the error says) for a quota refusal, else ``status``."""
    error = answer.get("error")
    if not isinstance(error, dict) or error.get("code") != QUOTA_EXCEEDED:
        return status, {}
    data = error.get("data")
    retry = data.get("retryAfter") if isinstance(data, dict) else None
    return 429, ({"Retry-After": str(retry)} if isinstance(retry, int) and not isinstance(retry, bool) else {})


def lone_ping(decoded: Decoded) -> Request | None:
    first = decoded.messages[0]
    return first if not decoded.is_batch and isinstance(first, Request) and first.method == "ping" else None
