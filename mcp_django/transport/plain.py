"""The endpoint as a plain Django view: MCP where mcp_django's ASGI router is not in front.

Under WSGI (gunicorn, uWSGI, mod_wsgi, ``runserver`` without daphne), or under ASGI without
:class:`~mcp_django.routing.MCPRouter`, requests to the endpoint reach this view instead of
:class:`~mcp_django.transport.consumers.MCPConsumer`. It serves what fits one request and one
response: every 2026-07-28 request, and the handshake era in JSON answer mode (initialize,
sessions, every request and notification, DELETE). A call of a tool that sends progress or logs
is answered on its own SSE stream, within bounds (:mod:`~mcp_django.transport.plain_stream`),
or as JSON without them past those bounds. What needs a stream held between requests answers
that it needs the ASGI deployment: the GET stream and its resumption (405, as the transports
spec allows), ``subscriptions/listen`` and the questions a tool asks the client (JSON-RPC
errors naming it).

The checks are the consumer's, called the same way and in the same order (Host and Origin,
CORS, ``MAX_BODY_SIZE``, the site's authentication policy, Accept, Content-Type and
``MCP-Protocol-Version``), and the engine does the rest as for every transport: the gate,
scopes, quotas and the audit trail.

**One loop for the process, under both deployments.** The view's coroutine runs on this
process's event loop (:mod:`~mcp_django.transport.process_loop`), which outlives the request:
what the engine leaves to the loop's background (the audit trail's writer, the sessions'
``initialized`` marks, a task run without a ``TASKS`` backend) runs there after the answer, as
under an ASGI server, and the engine's ORM calls run on asgiref's thread for sync code. No
process channel tells this loop that another process changed a session, so sessions are read
from the database for each request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from ..conf import mcp_settings
from ..protocol import modern
from ..protocol.errors import MCPError, MethodNotFoundError, TransportError
from ..protocol.jsonrpc import (
    Decoded,
    Notification,
    Request,
    decode,
    encode,
    error_message,
    result_message,
)
from ..protocol.limits import body_too_large
from ..protocol.negotiation import SSE, accepts
from ..protocol.params import request_meta
from ..server.engine import Principal
from ..stores import session_cache
from . import headers as checks
from .authentication import authenticate, mark_endpoint
from .plain_stream import ASGI_HINT as ASGI_HINT
from .plain_stream import PlainStream, open_streams, streaming_response
from .process import sweeper
from .refusals import Answer, failure, refusal, whole_answer

if TYPE_CHECKING:
    from ..conf import MCPSettings
    from ..models import Session
    from ..registry.sites import MCPSite
    from ..server.context import Emitter
    from ..server.engine import Engine

#: The GET stream (and its resumption) answer 405 here: the transports spec lets a server
#: offer no stream at the endpoint's GET.
GET_STREAM_REFUSED = (
    "Method Not Allowed: this endpoint is served by its plain Django view (WSGI, or ASGI "
    "without mcp_django's router), which holds no stream open between requests, so it offers no "
    "GET stream; server messages come only in answer to a POST. For the GET stream, "
    f"{ASGI_HINT}."
)
RESUME_REFUSED = (
    "Method Not Allowed: resuming a stream (Last-Event-ID) needs the stream held by "
    "mcp_django's ASGI deployment; this endpoint is served by its plain Django view (WSGI, or "
    f"ASGI without mcp_django's router), whose answers are whole JSON bodies. To resume streams, "
    f"{ASGI_HINT}."
)
LISTEN_REFUSED = (
    "subscriptions/listen holds a stream open between requests, which this endpoint cannot: it "
    "is served by its plain Django view (WSGI, or ASGI without mcp_django's router). To listen, "
    f"{ASGI_HINT}."
)
#: What a GET or DELETE of the handshake era may be here (DELETE ends a session).
ALLOWED_WITHOUT_STREAMS = "POST, DELETE"


class PlainEndpoint:
    """One site's endpoint as a plain view: a request in, a whole response out."""

    settings: MCPSettings = mcp_settings

    def __init__(self, site: MCPSite) -> None:
        self.site = site

    @property
    def engine(self) -> Engine:
        return self.site.engine

    async def __call__(self, request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
        self.site.serving = True
        sweeper.ensure()
        headers = checks.Headers.of_request(request)
        # Computed before any answer (even a 413), so that an allowed browser can read it.
        cors = checks.cors_headers(request.scheme or "http", headers, self.settings)
        answer: Answer | PlainStream
        try:
            answer = await self.handle(request, headers, cors)
        except Exception as exc:
            # The request's top level: what the consumer answers, as the consumer does.
            answer = refusal(exc) or await failure(exc)
        if isinstance(answer, PlainStream):
            asgi = isinstance(request, ASGIRequest)  # Django's ASGI handler reads an async body
            return streaming_response(answer, asgi, cors_dict(cors))
        return respond(answer, cors)

    async def handle(
        self,
        request: HttpRequest,
        headers: checks.Headers,
        cors: list[tuple[bytes, bytes]],
    ) -> Answer | PlainStream:
        checks.check_declared_length(headers, self.settings)
        limit = self.settings.max_body_size
        body = request.read(limit + 1)
        if len(body) > limit:
            raise body_too_large(limit)
        checks.check_origin_and_host(request, headers, self.settings)
        method = request.method
        if cors and method == "OPTIONS":
            return Answer(HTTPStatus.NO_CONTENT, None, checks.preflight_headers(headers))
        # The 401 challenge names every scope the site uses (see MCPConsumer.handle).
        request.mcp_declared_scopes = self.site.get_scopes  # type: ignore[attr-defined]
        mark_endpoint(request)
        principal = await authenticate(request, self.settings)
        if method == "POST":
            return await self.post(principal, headers, body)
        if method == "GET":
            checks.refuse_stateless(headers, "GET")
            refused = RESUME_REFUSED if headers.get("last-event-id") else GET_STREAM_REFUSED
            raise TransportError(
                HTTPStatus.METHOD_NOT_ALLOWED, refused, headers={"Allow": ALLOWED_WITHOUT_STREAMS}
            )
        if method == "DELETE":
            checks.refuse_stateless(headers, "DELETE")
            await self.engine.terminate(await self.load(principal, headers))
            return Answer(HTTPStatus.NO_CONTENT, None)
        raise checks.method_not_allowed()

    async def load(self, principal: Principal, headers: checks.Headers) -> Session:
        session_id = checks.session_id(headers)
        # Read from the database: a copy cached by an earlier request of this process may be
        # stale, since no process channel tells this loop of changes made elsewhere.
        session_cache.drop(session_id)
        return await self.engine.load_session(principal, session_id)

    async def post(
        self, principal: Principal, headers: checks.Headers, body: bytes
    ) -> Answer | PlainStream:
        checks.check_post(headers)
        try:
            decoded = decode(body)
        except MCPError as exc:
            return Answer(HTTPStatus.BAD_REQUEST, error_message(exc.request_id, exc))
        message = checks.modern_message(headers, decoded)
        if message is not None:
            return await self.post_modern(principal, headers, message)
        checks.check_handshake_post(headers, decoded)
        initialize = checks.initialize_request(headers, decoded)
        if initialize is not None:
            answer, session = await self.engine.initialize(principal, initialize)
            return whole_answer(
                HTTPStatus.OK, answer, {"mcp-session-id": session.pk} if session else None
            )
        ping = checks.sessionless_ping(headers, decoded)
        if ping is not None:
            return Answer(HTTPStatus.OK, result_message(ping.id, {}))
        session = await self.load(principal, headers)
        received = await self.engine.receive(principal, session, decoded)
        try:
            return await self.answer_received(
                principal, headers, session, decoded, received.requests, received.replies
            )
        finally:
            await self.engine.release_held(received.requests)  # those that never ran

    async def answer_received(
        self,
        principal: Principal,
        headers: checks.Headers,
        session: Session,
        decoded: Decoded,
        requests: list[Request],
        replies: list[dict[str, Any]],
    ) -> Answer | PlainStream:
        """The handshake era in JSON answer mode: the requests' answers in one body, whatever
        ``RESPONSE_MODE`` says; but a body calling a tool that streams is answered on a stream
        of its own, its progress and logs first, while :meth:`open_stream` allows (else as JSON,
        without them). A question a tool asks the client fails either way: its answer would
        come in another request, to a stream held between requests."""
        if not requests:
            if not replies:
                return Answer(HTTPStatus.ACCEPTED, None)
            if decoded.is_batch:
                return Answer(HTTPStatus.OK, replies)
            return whole_answer(HTTPStatus.BAD_REQUEST, replies[0])
        if any(self.engine.streams_answer(message) for message in requests):

            async def answer(emitter: Emitter) -> list[dict[str, Any]]:
                return await self.engine.answer(principal, session, requests, emitter)

            stream = await self.open_stream(
                principal, headers, session.pk, requests, answer, first=replies
            )
            if stream is not None:
                return stream
        answers = replies + await self.engine.answer(principal, session, requests)
        if decoded.is_batch:
            return Answer(HTTPStatus.OK, answers)
        return whole_answer(HTTPStatus.OK, answers[0])

    async def post_modern(
        self,
        principal: Principal,
        headers: checks.Headers,
        message: Request | Notification,
    ) -> Answer | PlainStream:
        """One 2026-07-28 message (see :func:`mcp_django.transport.stateless.post`)."""
        if isinstance(message, Notification):
            return Answer(HTTPStatus.ACCEPTED, None)  # none is defined over HTTP in this revision
        try:
            meta = await self.engine.stateless_meta(principal, message, headers)
        except MCPError as exc:
            return whole_answer(
                exc.http_status or HTTPStatus.BAD_REQUEST, error_message(message.id, exc)
            )
        try:
            if message.method == "subscriptions/listen":
                refused = error_message(message.id, MethodNotFoundError(LISTEN_REFUSED))
                return whole_answer(modern.http_status(refused), refused)
            if self.engine.needs_stream_stateless(message) and asks_for_notifications(
                message, meta
            ):

                async def answer(emitter: Emitter) -> list[dict[str, Any]]:
                    return [await self.engine.answer_stateless(principal, message, meta, emitter)]

                try:
                    stream = await self.open_stream(principal, headers, None, [message], answer)
                except MCPError as exc:  # a cap on the caller's streams (as the consumer answers)
                    refused = error_message(message.id, exc)
                    return whole_answer(exc.http_status or HTTPStatus.BAD_REQUEST, refused)
                if stream is not None:
                    return stream
            response = await self.engine.answer_stateless(principal, message, meta)
            return whole_answer(modern.http_status(response), response)
        finally:
            await self.engine.release_held([message])  # when it never ran

    async def open_stream(
        self,
        principal: Principal,
        headers: checks.Headers,
        session_id: str | None,
        requests: list[Request],
        answer: Callable[[Emitter], Awaitable[list[dict[str, Any]]]],
        first: list[dict[str, Any]] | None = None,
    ) -> PlainStream | None:
        """The stream answering ``requests`` (``answer`` runs them), taking over their running
        slots; None when the client takes no stream or ``PLAIN_STREAMS`` are open in this
        process (then they are answered as JSON, never made to wait). A cap on the caller's
        streams (``STREAMS_PER_SESSION``, ``STREAMS_PER_USER``) refuses it, as the consumer does."""
        if not accepts(headers.get("accept"), SSE):
            return None
        if not open_streams.take(self.settings.plain_streams):
            return None
        try:
            stream_slot = await self.engine.stream_slot(principal, session_id)
        except BaseException:
            open_streams.give_back()
            raise
        slots = list(self.engine.take_held(requests).values())
        if stream_slot is not None:
            slots.append(stream_slot)
        return PlainStream(
            answer,
            requests,
            seconds=self.settings.plain_stream_seconds,
            keepalive=self.settings.sse_keepalive_seconds,
            slots=slots,
            first=first,
        )


def asks_for_notifications(message: Request, meta: modern.RequestMeta) -> bool:
    """Whether a 2026-07-28 request asked for what a stream would carry (progress, with a
    ``progressToken``; logs, with a log level): without either a tool sends nothing, and the
    request is answered as JSON, with its HTTP status."""
    progress = (request_meta(message.params) or {}).get("progressToken")
    return progress is not None or meta.log_level is not None


def cors_dict(cors: list[tuple[bytes, bytes]]) -> dict[str, str]:
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in cors}


def respond(answer: Answer, cors: list[tuple[bytes, bytes]]) -> HttpResponse:
    """The Django response for ``answer``: JSON in one body with its ``Content-Length`` (as the
    consumer sends it), or empty."""
    body = b"" if answer.body is None else encode(answer.body)
    response = HttpResponse(body, status=answer.status)
    if answer.body is None:
        del response["Content-Type"]  # empty: not Django's default text/html
    else:
        response["Content-Type"] = "application/json"
    response["Content-Length"] = str(len(body))
    for name, value in answer.headers.items():
        response[name] = value
    for name, value in cors_dict(cors).items():
        response[name] = value
    return response
