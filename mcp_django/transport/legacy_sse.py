"""The 2024-11-05 HTTP+SSE transport, for older clients and gateways: ``GET <endpoint>/sse`` opens
the stream, whose first event (``endpoint``) names the URL to POST to; POSTs there are answered
202 and their responses travel on that stream.

The stream is the session's GET stream of Streamable HTTP, so everything persists and crosses
processes the same way: a POST answered on another process reaches the stream through the
channel layer. Same Origin, Host, authentication and session-ownership rules as the main
endpoint; ``MCP_DJANGO["HTTP_SSE"] = False`` turns it off.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from ..protocol import negotiation
from ..protocol.errors import MCPError, TransportError
from ..protocol.jsonrpc import Request, decode, error_message
from ..protocol.sse import encode_event
from ..server.principal import Principal
from ..stores import RunningRequestStore
from .consumers import MCPConsumer
from .layers import GET_STREAM
from .sse import SSEStream
from .streams import StreamEmitter, send_to_session

if TYPE_CHECKING:
    from ..models import Session


class SessionStreamEmitter(StreamEmitter):
    """Writes on the session's one stream: each message is stored with the next number of the
    GET stream and announced, wherever the stream is held."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id, GET_STREAM)

    async def send(
        self,
        message: dict[str, Any],
        *,
        closes: bool = False,
        finishes: tuple[str, str] | None = None,
    ) -> int:
        seq = await send_to_session(self.session_id, message, self.store)
        if finishes is not None:
            await RunningRequestStore().afinish(*finishes)
        return seq

    async def flush(self) -> None:
        """Each send is stored before it returns."""

    async def end_without_event(self) -> None:
        """The stream is the session's, not the request's: it goes on."""


class HTTPSSEConsumer(MCPConsumer):
    """``GET <endpoint>/sse`` and ``POST <endpoint>/messages/?session_id=...``."""

    transport_name = "sse"

    def __init__(self, site: Any, kind: str, **kwargs: Any) -> None:
        super().__init__(site, **kwargs)
        self.kind = kind
        self.opened: Session | None = None

    async def handle(self, body: bytes) -> None:
        if not self.settings.http_sse:
            raise TransportError(
                HTTPStatus.NOT_FOUND,
                "Not Found: the 2024-11-05 HTTP+SSE transport is turned off "
                "(MCP_DJANGO['HTTP_SSE'])",
            )
        await super().handle(body)

    async def get(self, principal: Principal) -> None:
        if self.kind != "sse":
            raise TransportError(
                HTTPStatus.METHOD_NOT_ALLOWED, "Method Not Allowed", headers={"Allow": "POST"}
            )
        self.check_accepts_events()
        session = await self.engine.open_session(principal, transport="sse")
        self.opened = session
        # Refused at a stream cap, the session just opened ends with the connection (cleanup).
        await self.hold_stream_slot(principal, session.pk)
        self.sse = SSEStream(self, session.pk, principal.user_id, self.settings)
        root, path = self.scope.get("root_path", ""), self.scope["path"]
        # The public path: uvicorn (and the ASGI spec) put root_path in front of path, Daphne not.
        path = path if path.startswith(root) else root + path
        messages = path.rstrip("/").removesuffix("/sse") + "/messages/"
        await self.sse.open_session_stream(
            encode_event(f"{messages}?session_id={session.pk}", event="endpoint")
        )

    async def post(self, principal: Principal, body: bytes) -> None:
        if self.kind != "messages":
            raise TransportError(
                HTTPStatus.METHOD_NOT_ALLOWED, "Method Not Allowed", headers={"Allow": "GET"}
            )
        negotiation.check_content_type(self.headers.get("content-type"))
        session_id = parse_qs(self.scope.get("query_string", b"").decode("latin-1")).get(
            "session_id", [""]
        )[0]
        if not session_id:
            raise TransportError(
                HTTPStatus.BAD_REQUEST,
                "Bad Request: session_id is required; open the stream with GET .../sse first",
            )
        session = await self.engine.load_session(principal, session_id)
        try:
            decoded = decode(body)
        except MCPError as exc:
            await self.send_json(HTTPStatus.BAD_REQUEST, error_message(exc.request_id, exc))
            return
        emitter = SessionStreamEmitter(session.pk)
        first = decoded.messages[0]
        if isinstance(first, Request) and first.method == "initialize":
            if decoded.is_batch:
                raise TransportError(
                    HTTPStatus.BAD_REQUEST,
                    "Invalid Request: initialize must not be part of a batch",
                )
            await emitter.send(await self.engine.initialize_session(principal, session, first))
            await self.send_empty(HTTPStatus.ACCEPTED)
            return
        received = await self.engine.receive(principal, session, decoded)
        # Accepted now; the answers (and what the tools send while they run) go on the stream.
        await self.send_empty(HTTPStatus.ACCEPTED)
        if received.requests:
            streamed = await self.engine.stream(principal, session, received.requests, emitter)
            await streamed.start(received.replies)
        else:
            for reply in received.replies:
                await emitter.send(reply)

    async def delete(self, principal: Principal) -> None:
        raise TransportError(
            HTTPStatus.METHOD_NOT_ALLOWED,
            "Method Not Allowed: closing the stream ends the session",
            headers={"Allow": "GET, POST"},
        )

    def check_accepts_events(self) -> None:
        # 2024-11-05 clients may send no Accept at all; one that is sent must admit the stream.
        accept = self.headers.get("accept")
        if accept is not None:
            negotiation.check_get_accept(accept)

    async def cleanup(self) -> None:
        await super().cleanup()
        if self.opened is not None:
            # In this transport the stream is the session: when it closes, the session ends.
            await self.engine.terminate(self.opened, reason="stream closed")
            self.opened = None
