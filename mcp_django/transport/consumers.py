"""The Streamable HTTP endpoint as a Channels consumer: POST, GET and DELETE on one path.

The consumer extracts headers and body, calls the protocol core and the stores, and writes
the answer. Work that outlives the HTTP connection (a tool call answered over SSE) runs in its
own task and writes to the event store, so a client that drops the connection loses nothing:
it resumes with ``Last-Event-ID``, on this process or another.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from io import BytesIO
from typing import TYPE_CHECKING, Any

from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from channels.utils import await_many_dispatch
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest

from .. import handlers
from ..auth.base import AuthenticationFailed
from ..conf import mcp_settings
from ..context import Context
from ..exceptions import InvalidSessionId
from ..models import Session
from ..protocol import negotiation
from ..protocol.dispatcher import dispatch
from ..protocol.errors import INVALID_REQUEST, InvalidRequestError, MCPError, TransportError
from ..protocol.jsonrpc import Invalid, Notification, Request, Response, decode, encode, error_message, result_message
from ..protocol.lifecycle import initialize_result, parse_initialize
from ..protocol.limits import check_progress_token, check_request_id
from ..protocol.sse import encode_event, make_event_id, parse_event_id
from ..stores import BaseEventStore, SessionStore, get_event_store
from .flow import WriteFlow, resume_slots
from .layers import GET_STREAM, get_layer, get_stream_group, new_stream_token, session_group, stream_belongs_to, stream_group
from .process import RUNNING, cancel_request, cancel_session, process_channel
from .process import request_key as _request_key
from .streams import StreamEmitter, close_orphaned_streams, deliver_response

if TYPE_CHECKING:
    from ..sites import MCPSite

logger = logging.getLogger("mcp_django.transport")
security_logger = logging.getLogger("django.security.DisallowedHost")

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    # nginx and friends must not buffer the stream.
    (b"x-accel-buffering", b"no"),
]



class MCPConsumer(AsyncHttpConsumer):
    """One HTTP request to the MCP endpoint."""

    settings = mcp_settings
    site: MCPSite

    def __init__(self, site: MCPSite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.site = site
        site.serving = True
        self.store: BaseEventStore = get_event_store()
        self.sessions = SessionStore()
        self.body_size = 0
        self.streaming = False
        self.closed = False
        self.session_id: str | None = None
        self.stream: str | None = None
        self.last_seq = 0
        self.joined: list[str] = []
        self.timers: list[asyncio.Task[Any]] = []
        # Set while this request is a resume replaying the store (see ResumeSlots).
        self.resume_slot: tuple[str, Any] | None = None
        self.flow: WriteFlow | None = None
        # Set once the Origin is known to be an explicitly allowed cross-origin caller.
        self.cors_headers: list[tuple[bytes, bytes]] = []
        # Who opened this request: an open stream re-checks that the credential still names them.
        self.user: Any = None

    # -- ASGI plumbing ------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scope = scope
        self.base_send = send
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

    def allowed_cross_origin(self) -> str | None:
        """The Origin of an explicitly allowed cross-origin caller (a browser-based client)."""
        origin = self.header("origin")
        if origin is None or not self.settings.allowed_origins:
            return None
        scheme = self.scope.get("scheme", "http")
        host = self.header("host") or ""
        if negotiation.origin_allowed(origin, host, scheme, []):
            return None  # same-origin: no CORS needed
        return origin if negotiation.origin_allowed(origin, host, scheme, self.settings.allowed_origins) else None

    async def http_request(self, message: dict[str, Any]) -> None:
        if self.body_size == 0 and not self.body:
            origin = self.allowed_cross_origin()
            if origin is not None:
                # Set before any answer (even a 413) so the browser can read it.
                self.cors_headers = [
                    (b"access-control-allow-origin", origin.encode("latin-1")),
                    (b"access-control-expose-headers", b"Mcp-Session-Id, WWW-Authenticate"),
                    (b"vary", b"Origin"),
                ]
            length = self.header("content-length")
            if length is not None and length.isdigit() and int(length) > self.settings.max_body_size:
                await self.send_transport_error(TransportError(413, f"Payload Too Large: the body exceeds {self.settings.max_body_size} bytes"))
                raise StopConsumer()
        chunk = message.get("body", b"")
        self.body_size += len(chunk)
        if self.body_size > self.settings.max_body_size:
            await self.send_transport_error(TransportError(413, f"Payload Too Large: the body exceeds {self.settings.max_body_size} bytes"))
            raise StopConsumer()
        self.body.append(chunk)
        if message.get("more_body"):
            return
        try:
            await self.handle(b"".join(self.body))
        except TransportError as exc:
            await self.send_transport_error(exc)
        except AuthenticationFailed as exc:
            await self.send_json(exc.status, {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": exc.message}}, exc.headers)
        if not self.streaming:
            raise StopConsumer()

    async def http_disconnect(self, message: dict[str, Any]) -> None:
        raise StopConsumer()

    async def cleanup(self) -> None:
        self.release_resume_slot()
        if self.flow is not None:
            self.flow.close()
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        self.joined.clear()

    # -- helpers ------------------------------------------------------------------------

    def header(self, name: str) -> str | None:
        if not hasattr(self, "_headers"):
            headers: dict[str, str] = {}
            for key, value in self.scope.get("headers", []):
                k = key.decode("latin-1").lower()
                v = value.decode("latin-1")
                headers[k] = f"{headers[k]}, {v}" if k in headers else v
            self._headers = headers
        return self._headers.get(name)

    async def send_headers(self, *, status: int = 200, headers: Any = None) -> None:
        raw = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
        await super().send_headers(status=status, headers=raw + self.cors_headers)

    async def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = [(b"content-type", b"application/json")]
        raw += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        await self.send_response(status, encode(body), headers=raw)

    async def send_transport_error(self, exc: TransportError) -> None:
        await self.send_json(exc.status, exc.to_body(), exc.headers)

    async def send_empty(self, status: int, headers: dict[str, str] | None = None) -> None:
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        await self.send_response(status, b"", headers=raw)

    async def join(self, group: str) -> None:
        if self.channel_name is None:
            self.channel_name = await self.channel_layer.new_channel()
        await self.channel_layer.group_add(group, self.channel_name)
        self.joined.append(group)

    # -- the request ----------------------------------------------------------------------

    async def handle(self, body: bytes) -> None:
        # This process must hear about session changes before it serves sessions from memory.
        await process_channel.ensure()
        request = ASGIRequest(self.scope, BytesIO(body))
        request.mcp_endpoint_path = request.path.rstrip("/") or "/"  # the canonical URI has no trailing slash
        try:
            host = request.get_host()
        except DisallowedHost as exc:
            security_logger.error(str(exc))
            raise TransportError(400, "Bad Request: invalid Host header") from None
        origin = self.header("origin")
        negotiation.check_origin(origin, host, request.scheme, self.settings.allowed_origins)
        if self.cors_headers and self.scope["method"] == "OPTIONS":
            await self.send_empty(204, {
                "Access-Control-Allow-Methods": "GET, POST, DELETE",
                "Access-Control-Allow-Headers": "Accept, Authorization, Content-Type, Last-Event-ID, Mcp-Session-Id, MCP-Protocol-Version",
                "Access-Control-Max-Age": "600",
            })
            return
        auth = self.settings.authentication_class()
        user = await auth.authenticate(request)
        # Hooks (get_queryset(request), has_*_permission(request)) read request.user, as in the admin.
        request.user = user if user is not None else AnonymousUser()
        self.user = user
        method = self.scope["method"]
        if method == "POST":
            await self.post(request, user, body)
        elif method == "GET":
            await self.get(user)
        elif method == "DELETE":
            await self.delete(user)
        else:
            raise TransportError(405, "Method Not Allowed", headers={"Allow": "GET, POST, DELETE"})

    async def load_session(self, user: Any, required: bool = True) -> Session | None:
        session_id = self.header("mcp-session-id")
        if session_id is None:
            if required:
                raise TransportError(400, "Bad Request: Mcp-Session-Id header is required; send initialize first")
            return None
        if not negotiation.is_valid_session_id(session_id):
            # Never issued by any server: a guess or a forgery, logged like Django's
            # SuspiciousOperations (django.security.InvalidSessionId), answered 400.
            logging.getLogger("django.security.InvalidSessionId").warning(
                "%s", InvalidSessionId(f"Malformed Mcp-Session-Id ({len(session_id)} characters)")
            )
            raise TransportError(400, "Bad Request: malformed Mcp-Session-Id")
        session = await self.sessions.aload(
            session_id, site_name=self.site.name, user_id=getattr(user, "pk", None)
        )
        if session is None:
            # Unknown, expired, terminated and someone else's: the same answer for all.
            raise TransportError(404, "Not Found: session not found or terminated; initialize a new session")
        return session

    def context(self, request: Any, user: Any, session: Session | None, message: Request, emitter: Any = None) -> Context:
        meta = message.params.get("_meta")
        return Context(
            site=self.site, request=request, user=user, session=session, request_id=message.id,
            meta=meta if isinstance(meta, dict) else None, emitter=emitter,
        )

    # -- POST -----------------------------------------------------------------------------

    async def post(self, request: Any, user: Any, body: bytes) -> None:
        negotiation.check_post_accept(self.header("accept"))
        negotiation.check_content_type(self.header("content-type"))
        negotiation.check_protocol_version_header(self.header("mcp-protocol-version"))
        try:
            decoded = decode(body)
        except MCPError as exc:
            await self.send_json(400, error_message(exc.request_id, exc))
            return
        messages = decoded.messages
        if any(isinstance(m, Request) and m.method == "initialize" for m in messages):
            if decoded.is_batch:
                raise TransportError(400, "Invalid Request: initialize must not be part of a batch")
            if self.header("mcp-session-id") is not None:
                raise TransportError(400, "Invalid Request: initialize must be sent without Mcp-Session-Id")
            await self.initialize(request, user, messages[0])  # type: ignore[arg-type]
            return
        session = await self.load_session(user, required=not self.is_sessionless_ping(decoded))
        if session is None:
            ping = messages[0]
            await self.send_json(200, result_message(ping.id, {}))  # type: ignore[union-attr]
            return
        self.session_id = session.pk
        if decoded.is_batch:
            if not negotiation.supports_batches(session.protocol_version):
                raise TransportError(
                    400, f"Invalid Request: JSON-RPC batches are not supported in protocol revision {session.protocol_version}"
                )
            if len(messages) > self.settings.max_batch_size:
                raise TransportError(400, f"Invalid Request: a batch may hold at most {self.settings.max_batch_size} messages")
        requests: list[Request] = []
        replies: list[dict[str, Any]] = []  # errors for invalid members, in order
        seen: set[str] = set()
        for message in messages:
            if isinstance(message, Invalid):
                replies.append(error_message(message.id, message.error))
            elif isinstance(message, Notification):
                await self.notification(session, message)
            elif isinstance(message, Response):
                answer = {"result": message.result} if message.error is None else {"error": message.error}
                if not await deliver_response(session.pk, message.id, answer):
                    logger.debug("Response %r from the client matches no pending request", message.id)
            else:
                try:
                    # Both are echoed into every stored event of the request's stream.
                    check_request_id(message.id, self.settings.max_client_id_length)
                    check_progress_token(message.params, self.settings.max_client_id_length)
                except InvalidRequestError as exc:
                    replies.append(error_message(None, exc))  # an id too long to echo
                    continue
                except MCPError as exc:
                    replies.append(error_message(message.id, exc))
                    continue
                key = _request_key(session.pk, message.id)
                if key[1] in seen or key in RUNNING:
                    replies.append(error_message(message.id, InvalidRequestError("Invalid Request: request id already in use")))
                    continue
                seen.add(key[1])
                requests.append(message)
        await self.check_scopes(request, requests)
        if not requests:
            if replies:
                await self.send_json(200 if decoded.is_batch else 400, replies if decoded.is_batch else replies[0])
            else:
                await self.send_empty(202)
            return
        if self.settings.response_mode == "sse" or any(self.needs_stream(r) for r in requests):
            await self.answer_as_stream(request, user, session, requests, replies)
            return
        handlers = self.site.get_handlers()
        results = await asyncio.gather(
            *(dispatch(r, handlers, self.context(request, user, session, r)) for r in requests)
        )
        answers = replies + list(results)
        await self.send_json(200, answers if decoded.is_batch else answers[0])

    async def check_scopes(self, request: Any, requests: list[Request]) -> None:
        """Refuse, before anything runs, an operation the OAuth token lacks scopes for: 403 with
        a step-up challenge naming every scope it needs (2025-11-25 authorization spec)."""
        if getattr(request, "auth_scopes", None) is None:
            return
        needed: list[str] = []
        for message in requests:
            for scope in await self.required_scopes(request, message):
                if scope not in request.auth_scopes and scope not in needed:
                    needed.append(scope)
        if needed:
            from ..auth.oauth import InsufficientScope, resource_url

            base = [s for s in self.settings.get("REQUIRED_SCOPES") or [] if s not in needed]
            raise InsufficientScope(resource_url(request, getattr(request, "mcp_endpoint_path", None)), base + needed)

    async def required_scopes(self, request: Any, message: Request) -> tuple[str, ...]:
        """The scopes of the entry a call, get or read names, when the site's gate says the user
        may use it but the token lacks them. A hidden or unknown entry needs none here: its
        handler then answers as for one that does not exist, so a 403 never reveals it."""
        entry, access = await handlers.target(self.site, request, message.method, message.params)
        return tuple(entry.scopes) if access is handlers.Access.MISSING_SCOPES else ()

    @staticmethod
    def is_sessionless_ping(decoded: Any) -> bool:
        # ping is the one request allowed before initialize (lifecycle spec).
        return (not decoded.is_batch and isinstance(decoded.messages[0], Request) and decoded.messages[0].method == "ping")

    def needs_stream(self, request: Request) -> bool:
        if request.method != "tools/call":
            return False
        name = request.params.get("name")
        tool = self.site.get_tool(name) if isinstance(name, str) else None
        return tool is not None and tool.streams

    async def initialize(self, request: Any, user: Any, message: Request) -> None:
        try:
            params = parse_initialize(
                message.params,
                max_client_info_bytes=self.settings.max_client_info_bytes,
                max_capabilities_bytes=self.settings.max_client_capabilities_bytes,
                max_depth=self.settings.max_client_value_depth,
            )
        except MCPError as exc:
            await self.send_json(200, error_message(message.id, exc))
            return
        session = await self.sessions.acreate(
            site_name=self.site.name,
            user_id=getattr(user, "pk", None),
            protocol_version=params.version,
            client_info=params.client_info,
            capabilities=params.capabilities,
        )
        result = initialize_result(
            params.version, self.site.get_capabilities(), self.site.get_server_info(), self.site.get_instructions()
        )
        from ..signals import session_created

        await session_created.asend(sender=self.site.__class__, site=self.site, session=session, request=request)
        await self.send_json(200, result_message(message.id, result), {"mcp-session-id": session.pk})

    async def notification(self, session: Session, message: Notification) -> None:
        if message.method == "notifications/initialized":
            if not session.initialized:
                session.initialized = True
                await self.sessions.aupdate(session.pk, initialized=True)
        elif message.method == "notifications/cancelled":
            request_id = message.params.get("requestId")
            if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
                await cancel_request(session.pk, request_id)
        # Other notifications (progress, roots/list_changed) need no action here.

    async def answer_as_stream(
        self, request: Any, user: Any, session: Session, requests: list[Request], replies: list[dict[str, Any]]
    ) -> None:
        stream = new_stream_token(session.pk)
        self.stream = stream
        await self.join(stream_group(stream))
        await self.join(session_group(session.pk))
        self.streaming = True
        emitter = StreamEmitter(session.pk, stream, self.store)
        handlers = self.site.get_handlers()
        pending = {"count": len(requests)}
        lock = asyncio.Lock()
        started = asyncio.Event()

        async def answer(message: Request) -> None:
            key = _request_key(session.pk, message.id)
            try:
                # Nothing runs before the priming event is out and the request can be cancelled.
                await started.wait()
                response = await dispatch(message, handlers, self.context(request, user, session, message, emitter))
            except asyncio.CancelledError:
                response = None  # cancelled by the client: no response is sent (cancellation spec)
            finally:
                await process_channel.unwatch(key)
            async with lock:
                pending["count"] -= 1
                last = pending["count"] == 0
                if response is not None:
                    await emitter.send(response, closes=last)
                elif last:
                    await emitter.end_without_event()

        # Register every request before the client hears of the stream, so a cancel POSTed
        # as soon as it sees the priming event finds the task, on this process or another.
        for message in requests:
            task = asyncio.get_running_loop().create_task(answer(message))
            await process_channel.watch(_request_key(session.pk, message.id), task, stream)
        await self.send_headers(status=200, headers=[*SSE_HEADERS, (b"mcp-session-id", session.pk.encode())])
        # Priming event: an id with empty data, so the client can resume even before the first event.
        await self.send_body(encode_event("", event_id=make_event_id(stream, 0), retry_ms=self.settings.sse_retry_ms), more_body=True)
        self.start_timers()
        for reply in replies:
            await emitter.send(reply)
        started.set()

    # -- GET ------------------------------------------------------------------------------

    async def get(self, user: Any) -> None:
        negotiation.check_get_accept(self.header("accept"))
        negotiation.check_protocol_version_header(self.header("mcp-protocol-version"))
        session = await self.load_session(user)
        assert session is not None
        self.session_id = session.pk
        last_event_id = self.header("last-event-id")
        if last_event_id is not None:
            try:
                stream, after = parse_event_id(last_event_id)
            except ValueError:
                raise TransportError(400, "Bad Request: malformed Last-Event-ID") from None
            if not stream_belongs_to(session.pk, stream):
                raise TransportError(400, "Bad Request: Last-Event-ID names no stream of this session")
            self.take_resume_slot(session, user)
            await self.resume(session, stream, after)
            return
        # One connection holds the standalone stream: a new GET takes it over, so that every
        # message goes out on exactly one connection (transports spec, "no broadcast").
        await self.channel_layer.group_send(get_stream_group(session.pk), {"type": "mcp.takeover"})
        self.stream = GET_STREAM
        # Join before reading the last number: an event stored in between then arrives live.
        await self.join(get_stream_group(session.pk))
        await self.join(session_group(session.pk))
        self.last_seq = await self.store.alast_seq(session.pk, GET_STREAM)
        self.streaming = True
        await self.send_headers(status=200, headers=[*SSE_HEADERS, (b"mcp-session-id", session.pk.encode())])
        await self.send_body(
            encode_event("", event_id=make_event_id(GET_STREAM, self.last_seq), retry_ms=self.settings.sse_retry_ms), more_body=True
        )
        self.start_timers()

    async def resume(self, session: Session, stream: str, after: int) -> None:
        self.stream = stream
        # Join before reading the store: an event stored in between arrives live and is
        # skipped by sequence number, so none is lost and none is sent twice.
        # The newest connection takes over a stream, POST streams as the GET stream: every
        # later event goes out on exactly one connection (transports spec, "no broadcast").
        if stream == GET_STREAM:
            await self.channel_layer.group_send(get_stream_group(session.pk), {"type": "mcp.takeover"})
            await self.join(get_stream_group(session.pk))
        else:
            await self.channel_layer.group_send(stream_group(stream), {"type": "mcp.takeover"})
            await self.join(stream_group(stream))
            # A request whose process died ends here with an error instead of never.
            await close_orphaned_streams(session_id=session.pk, stream=stream)
        await self.join(session_group(session.pk))
        self.streaming = True
        self.last_seq = after
        self.flow = WriteFlow(self.base_send)
        await self.send_headers(status=200, headers=[*SSE_HEADERS, (b"mcp-session-id", session.pk.encode())])
        await self.send_body(b"", more_body=True)
        # Replay page by page (keyset on seq), one socket write per page, each drained (where
        # the server tells) before the next is read: a client that does not read holds at
        # most a page and a socket buffer here, however long the stream.
        # Reading from one event earlier shows whether the client already has the final one.
        try:
            pages = self.store.areplay_pages(
                session.pk, stream, max(after - 1, 0),
                max_events=self.settings.replay_page_events, max_bytes=self.settings.replay_page_bytes,
            )
            async for page in pages:
                chunk: list[bytes] = []
                ends = False
                for event in page:
                    if event.seq > after and event.payload:  # a closing marker has no payload
                        chunk.append(encode_event(event.payload, event_id=make_event_id(stream, event.seq)))
                        self.last_seq = event.seq
                    if event.closes_stream:
                        ends = True
                        break
                if chunk:
                    await self.send_body(b"".join(chunk), more_body=True)
                if ends:
                    await self.end_stream()
                    return
                await self.drain()
        finally:
            self.release_resume_slot()
        self.start_timers()

    def take_resume_slot(self, session: Session, user: Any) -> None:
        """Count this resume against the per-session, per-user and per-process limits (429/503)."""
        user_key = getattr(user, "pk", None)
        resume_slots.acquire(session.pk, user_key, self.settings)
        self.resume_slot = (session.pk, user_key)

    def release_resume_slot(self) -> None:
        if self.resume_slot is not None:
            resume_slots.release(*self.resume_slot)
            self.resume_slot = None

    async def drain(self) -> None:
        """Wait until the client has taken what was written, where the server tells (Daphne);
        close the connection when it takes nothing for SSE_WRITE_TIMEOUT (it resumes later)."""
        if self.flow is None:
            self.flow = WriteFlow(self.base_send)
        if self.flow.lost or not await self.flow.drain(self.settings.sse_write_timeout):
            await self.end_stream()
            raise StopConsumer()

    # -- DELETE ---------------------------------------------------------------------------

    async def delete(self, user: Any) -> None:
        session = await self.load_session(user)
        assert session is not None
        await self.sessions.aterminate(session.pk)
        # Its running requests stop too, on every process; their streams end with them.
        await cancel_session(session.pk)
        await self.channel_layer.group_send(session_group(session.pk), {"type": "mcp.terminate"})
        from ..signals import session_closed

        await session_closed.asend(sender=self.site.__class__, site=self.site, session=session, reason="deleted")
        await self.send_empty(204)

    # -- streaming ------------------------------------------------------------------------

    def start_timers(self) -> None:
        loop = asyncio.get_running_loop()
        if self.settings.sse_keepalive_seconds > 0:
            self.timers.append(loop.create_task(self.keepalive()))
        limit = self.settings.sse_max_connection_seconds
        if limit is not None:
            self.timers.append(loop.create_task(self.close_after(limit)))
        if self.settings.sse_reauth_seconds > 0:
            self.timers.append(loop.create_task(self.recheck_credentials(self.settings.sse_reauth_seconds)))

    async def keepalive(self) -> None:
        interval = self.settings.sse_keepalive_seconds
        while True:
            await asyncio.sleep(interval)
            if self.closed:
                return
            await self.send_body(b": keep-alive\n\n", more_body=True)

    async def recheck_credentials(self, interval: float) -> None:
        """Close the connection once its credential no longer names the user who opened it (a
        revoked or expired token, a logged-out session): it re-runs the authentication on the
        request's headers every ``interval`` seconds."""
        while True:
            await asyncio.sleep(interval)
            if self.closed:
                return
            if not await self.still_authenticated():
                await self.channel_layer.send(self.channel_name, {"type": "mcp.disconnect"})
                return

    async def still_authenticated(self) -> bool:
        request = ASGIRequest(self.scope, BytesIO(b""))
        try:
            user = await self.settings.authentication_class().authenticate(request)
        except AuthenticationFailed:
            return False
        except Exception:
            logger.exception("Re-checking the credential of an SSE stream failed")
            return True
        return getattr(user, "pk", None) == getattr(self.user, "pk", None)

    async def close_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self.channel_layer.send(self.channel_name, {"type": "mcp.disconnect"})

    async def end_stream(self) -> None:
        if not self.closed:
            self.closed = True
            if self.flow is not None:
                self.flow.close()
            await self.send_body(b"", more_body=False)

    async def mcp_event(self, message: dict[str, Any]) -> None:
        await self.write_events([(message["seq"], message["payload"], bool(message.get("closes")))])

    async def mcp_events(self, message: dict[str, Any]) -> None:
        """A batch of stored events of this stream, in order (see StreamEmitter)."""
        await self.write_events([(seq, payload, bool(closes)) for seq, payload, closes in message["events"]])

    async def write_events(self, events: list[tuple[int, str, bool]]) -> None:
        if self.closed:
            return
        chunk: list[bytes] = []
        ends = False
        for seq, payload, closes in events:
            if seq <= self.last_seq:
                continue  # already written (replayed before this arrived live)
            if seq > self.last_seq + 1 and self.session_id is not None and self.stream is not None:
                # A full channel dropped something: fill the gap from the store, page by page.
                pages = self.store.areplay_pages(
                    self.session_id, self.stream, self.last_seq, until=seq,
                    max_events=self.settings.replay_page_events, max_bytes=self.settings.replay_page_bytes,
                )
                async for page in pages:
                    chunk.extend(encode_event(e.payload, event_id=make_event_id(self.stream, e.seq)) for e in page if e.payload)
                    self.last_seq = page[-1].seq
                    await self.send_body(b"".join(chunk), more_body=True)
                    chunk.clear()
                    await self.drain()
            if payload:  # a closing marker (see StreamEmitter.end_without_event) is not written
                chunk.append(encode_event(payload, event_id=make_event_id(self.stream or "", seq)))
            self.last_seq = seq
            if closes:
                ends = True
                break
        if chunk:
            # One socket write per batch.
            await self.send_body(b"".join(chunk), more_body=True)
        if ends:
            await self.end_stream()
            raise StopConsumer()
        if chunk:
            # While this waits, further events queue in the channel layer; what it drops
            # when full is filled in from the store above.
            await self.drain()

    async def mcp_disconnect(self, message: dict[str, Any]) -> None:
        """Close the connection, not the stream: the client resumes with Last-Event-ID."""
        await self.end_stream()
        raise StopConsumer()

    async def mcp_end(self, message: dict[str, Any]) -> None:
        await self.end_stream()
        raise StopConsumer()

    async def mcp_takeover(self, message: dict[str, Any]) -> None:
        await self.end_stream()
        raise StopConsumer()

    async def mcp_terminate(self, message: dict[str, Any]) -> None:
        await self.end_stream()
        raise StopConsumer()
