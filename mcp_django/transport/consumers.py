"""The Streamable HTTP endpoint as a Channels consumer: POST, GET and DELETE on one path.

The consumer does I/O only: it reads the body, runs the header checks
(:mod:`~mcp_django.transport.headers`) and the authentication
(:mod:`~mcp_django.transport.authentication`), asks the :class:`~mcp_django.server.engine.Engine`,
and writes the answer, as JSON or as an SSE stream (:mod:`~mcp_django.transport.sse`). Work
that outlives the HTTP connection (a tool call answered over SSE) runs in its own task and
writes to the event store, so a client that drops the connection loses nothing: it resumes
with ``Last-Event-ID``, on this process or another.

This module is the session era's meaning of each method; what every request shares (reading,
writing, the channel layer) is :mod:`~mcp_django.transport.base`, and a 2026-07-28 request
takes :mod:`~mcp_django.transport.stateless` instead.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from channels.exceptions import StopConsumer

from ..protocol.errors import MCPError, TransportError
from ..protocol.jsonrpc import Decoded, Request, decode, error_message, result_message
from ..protocol.sse import parse_event_id
from ..server.engine import Principal, Received
from . import headers as checks
from . import stateless
from .authentication import authenticate, build_request
from .base import BaseMCPConsumer
from .layers import GET_STREAM, new_stream_token, stream_belongs_to
from .process import process_channel, stream_resumed
from .sse import SSEStream, until_disconnect
from .streams import StreamEmitter

if TYPE_CHECKING:
    from ..models import Session


class MCPConsumer(BaseMCPConsumer):
    """One HTTP request to the MCP endpoint: what POST, GET and DELETE mean."""

    async def handle(self, body: bytes) -> None:
        # This process must hear about session changes before it serves sessions from memory.
        await process_channel.ensure()
        request = build_request(self.scope, body)
        checks.check_origin_and_host(request, self.headers, self.settings)
        method = self.scope["method"]
        if self.cors_headers and method == "OPTIONS":
            await self.send_empty(HTTPStatus.NO_CONTENT, checks.preflight_headers(self.headers))
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
        return await self.engine.load_session(principal, checks.session_id(self.headers))

    async def post(self, principal: Principal, body: bytes) -> None:
        checks.check_post(self.headers)
        try:
            decoded = decode(body)
        except MCPError as exc:
            await self.send_json(HTTPStatus.BAD_REQUEST, error_message(exc.request_id, exc))
            return
        modern_message = checks.modern_message(self.headers, decoded)
        if modern_message is not None:
            await stateless.post(self, principal, modern_message)
            return
        checks.check_handshake_post(self.headers, decoded)
        initialize = checks.initialize_request(self.headers, decoded)
        if initialize is not None:
            await self.initialize(principal, initialize)
            return
        ping = checks.sessionless_ping(self.headers, decoded)
        if ping is not None:
            await self.send_json(HTTPStatus.OK, result_message(ping.id, {}))
            return
        session = await self.session(principal)
        received = await self.engine.receive(principal, session, decoded)
        try:
            await self.answer_received(principal, session, decoded, received)
        finally:
            await self.engine.release_held(received.requests)  # those that never ran

    async def answer_received(
        self, principal: Principal, session: Session, decoded: Decoded, received: Received
    ) -> None:
        if not received.requests:
            if not received.replies:
                await self.send_empty(HTTPStatus.ACCEPTED)
            elif decoded.is_batch:
                await self.send_json(HTTPStatus.OK, received.replies)
            else:
                await self.send_answer(HTTPStatus.BAD_REQUEST, received.replies[0])
        elif self.engine.needs_stream(received.requests):
            await self.answer_as_stream(principal, session, received.requests, received.replies)
        else:
            # A JSON answer has nowhere to go once the client is gone: the requests are cancelled.
            answered = await until_disconnect(
                self.engine.answer(principal, session, received.requests), self.base_receive
            )
            if answered is None:
                raise StopConsumer()
            answers = received.replies + answered
            if decoded.is_batch:
                await self.send_json(HTTPStatus.OK, answers)
            else:
                await self.send_answer(HTTPStatus.OK, answers[0])

    async def initialize(self, principal: Principal, message: Request) -> None:
        answer, session = await self.engine.initialize(principal, message)
        await self.send_answer(
            HTTPStatus.OK, answer, {"mcp-session-id": session.pk} if session is not None else None
        )

    async def answer_as_stream(
        self,
        principal: Principal,
        session: Session,
        requests: list[Request],
        replies: list[dict[str, Any]],
    ) -> None:
        await self.hold_stream_slot(principal, session.pk)
        self.sse = SSEStream(self, session.pk, principal.user_id, self.settings)
        stream = new_stream_token(session.pk)
        await self.sse.open_post_stream(stream)
        streamed = await self.engine.stream(
            principal, session, requests, StreamEmitter(session.pk, stream)
        )
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
            raise TransportError(
                HTTPStatus.BAD_REQUEST, "Bad Request: malformed Last-Event-ID"
            ) from None
        if not stream_belongs_to(session.pk, stream):
            raise TransportError(
                HTTPStatus.BAD_REQUEST, "Bad Request: Last-Event-ID names no stream of this session"
            )
        await self.hold_stream_slot(principal, session.pk)
        sse.take_resume_slot()
        self.sse = sse
        if stream != GET_STREAM:
            await stream_resumed(
                stream
            )  # its requests are not cancelled for the dropped connection
        await sse.resume(stream, after)

    async def delete(self, principal: Principal) -> None:
        checks.refuse_stateless(self.headers, "DELETE")
        await self.engine.terminate(await self.session(principal))
        await self.send_empty(HTTPStatus.NO_CONTENT)
