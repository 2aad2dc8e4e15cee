"""An in-process MCP client for tests: it drives the project's ASGI application directly.

Nothing listens on a socket: each HTTP request is one Channels ``ApplicationCommunicator``
running the application in the test's event loop, so tests are fast, deterministic and see the
same database as the test. Every wait is bounded by ``timeout``.

Usage (with pytest-asyncio and pytest-django)::

    from mcp_django.testing import MCPTestClient

    @pytest.mark.django_db(transaction=True)
    async def test_add():
        client = MCPTestClient()
        await client.initialize()
        result = await client.call_tool("add", {"a": 1, "b": 2})
        assert result["structuredContent"] == {"result": 3}

``transaction=True`` is needed because the endpoint reaches the database from
``sync_to_async`` threads, which do not see the test's open transaction otherwise.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import orjson
from channels.testing import ApplicationCommunicator
from django.conf import settings
from django.test import AsyncClient
from django.utils.module_loading import import_string

from .protocol.sse import SSEComment, SSEEvent, SSEParser, parse_sse

__all__ = [
    "EventStream",
    "JSONRPCErrorResponse",
    "MCPTestClient",
    "Response",
    "SSEComment",
    "SSEEvent",
    "SSEParser",
    "StreamClosed",
]

DEFAULT_PROTOCOL_VERSION = "2025-11-25"
ACCEPT_BOTH = "application/json, text/event-stream"


class JSONRPCErrorResponse(Exception):
    """The server answered a request with a JSON-RPC error (raised by the result helpers)."""

    def __init__(self, response: dict[str, Any]) -> None:
        error = response.get("error") or {}
        self.response = response
        self.code: int | None = error.get("code")
        self.message: str = str(error.get("message", ""))
        self.data: Any = error.get("data")
        super().__init__(f"{self.code}: {self.message}")


class StreamClosed(Exception):
    """The server ended the SSE response while the test waited for more."""


# -- responses ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    """A complete HTTP response: status, headers (lower-case names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        """The media type of the body, without parameters, in lower case."""
        return _media_type(self.headers)

    @property
    def is_sse(self) -> bool:
        return self.content_type == "text/event-stream"

    def json(self) -> Any:
        """Return the body parsed as JSON."""
        return orjson.loads(self.body)

    def sse(self) -> list[SSEEvent | SSEComment]:
        """Return the body parsed as SSE, comments included."""
        return parse_sse(self.body)

    def events(self) -> list[SSEEvent]:
        """Return the SSE events of the body (comments left out)."""
        return [item for item in self.sse() if isinstance(item, SSEEvent)]

    def messages(self) -> list[Any]:
        """Return the JSON-RPC messages of the body, whether JSON or SSE (priming events
        skipped)."""
        if self.is_sse:
            return [event.json() for event in self.events() if event.data]
        if not self.body:
            return []
        data = self.json()
        return data if isinstance(data, list) else [data]


def _media_type(headers: dict[str, str]) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _headers_dict(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in raw:
        name = key.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[name] = f"{headers[name]}, {text}" if name in headers else text
    return headers


class _Exchange:
    """One HTTP request to the application: send it, then read what comes back."""

    def __init__(self, application: Any, scope: dict[str, Any], timeout: float) -> None:
        self.communicator = ApplicationCommunicator(application, scope)
        self.timeout = timeout
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.finished = False
        self.stopped = False

    async def start(self, body: bytes) -> None:
        await self.communicator.send_input(
            {"type": "http.request", "body": body, "more_body": False}
        )
        message = await self.communicator.receive_output(self.timeout)
        if message["type"] != "http.response.start":
            raise AssertionError(f"Expected http.response.start, got {message['type']!r}")
        self.status = int(message["status"])
        self.headers = _headers_dict(message.get("headers", []))

    async def next_chunk(self, timeout: float | None = None) -> bytes:
        """Return the next body chunk; mark the exchange finished at the last one."""
        if self.finished:
            raise StreamClosed("the response has ended")
        try:
            message = await asyncio.wait_for(
                self.communicator.output_queue.get(), self.timeout if timeout is None else timeout
            )
        except asyncio.TimeoutError:
            if self.communicator.future.done():
                self.communicator.future.result()  # the application failed: show why
            # The builtin on every Python (asyncio.TimeoutError is distinct from it before 3.11).
            raise TimeoutError("no response data within the timeout") from None
        if message["type"] != "http.response.body":
            raise AssertionError(f"Expected http.response.body, got {message['type']!r}")
        if not message.get("more_body", False):
            self.finished = True
        return bytes(message.get("body", b""))

    async def read_to_end(self) -> bytes:
        body = b""
        while not self.finished:
            body += await self.next_chunk()
        return body

    async def stop(self) -> None:
        """Disconnect, as a server does once the response is complete, and let the app exit."""
        if self.stopped:
            return
        self.stopped = True
        future = self.communicator.future
        if not future.done():
            await self.communicator.input_queue.put({"type": "http.disconnect"})
        # wait() cancels the application if it does not stop within the timeout.
        await self.communicator.wait(self.timeout)


class EventStream:
    """An open SSE response (a GET stream, or a resumed one), read event by event.

    Use it as an async context manager, or call :meth:`close`, so the application stops.
    If the server refused the stream, ``status`` says why and ``body`` holds the whole answer.
    """

    def __init__(self, exchange: _Exchange) -> None:
        self._exchange = exchange
        self._parser = SSEParser()
        self._pending: list[SSEEvent | SSEComment] = []
        self.status: int = exchange.status or 0
        self.headers: dict[str, str] = exchange.headers
        self.body = b""
        #: Every event and comment received so far, in order.
        self.received: list[SSEEvent | SSEComment] = []

    @property
    def is_sse(self) -> bool:
        return _media_type(self.headers) == "text/event-stream"

    @property
    def closed(self) -> bool:
        """True once the server has ended the response and nothing is left unread."""
        return self._exchange.finished and not self._pending

    @property
    def last_event_id(self) -> str | None:
        """The id of the last event received (what a client sends as ``Last-Event-ID``)."""
        for item in reversed(self.received):
            if isinstance(item, SSEEvent) and item.id is not None:
                return item.id
        return None

    def json(self) -> Any:
        """Return the body of a refused stream parsed as JSON."""
        return orjson.loads(self.body)

    async def receive(self, timeout: float | None = None) -> SSEEvent | SSEComment:
        """Return the next event or comment; ``TimeoutError`` after ``timeout`` seconds,
        :class:`StreamClosed` when the server ended the response."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._exchange.timeout if timeout is None else timeout)
        while not self._pending:
            chunk = await self._exchange.next_chunk(max(0.0, deadline - loop.time()))
            self.body += chunk
            self._pending.extend(self._parser.feed(chunk))
        item = self._pending.pop(0)
        self.received.append(item)
        return item

    async def next_event(self, timeout: float | None = None) -> SSEEvent:
        """Return the next event, skipping comments."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._exchange.timeout if timeout is None else timeout)
        while True:
            item = await self.receive(max(0.0, deadline - loop.time()))
            if isinstance(item, SSEEvent):
                return item

    async def next_message(self, timeout: float | None = None) -> Any:
        """Return the next JSON-RPC message, skipping comments and priming (empty) events."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._exchange.timeout if timeout is None else timeout)
        while True:
            event = await self.next_event(max(0.0, deadline - loop.time()))
            if event.data:
                return event.json()

    async def next_comment(self, timeout: float | None = None) -> SSEComment:
        """Return the next comment (a keep-alive), skipping events."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._exchange.timeout if timeout is None else timeout)
        while True:
            item = await self.receive(max(0.0, deadline - loop.time()))
            if isinstance(item, SSEComment):
                return item

    async def read_until_closed(self, timeout: float | None = None) -> list[SSEEvent | SSEComment]:
        """Read until the server ends the response; return what arrived meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._exchange.timeout if timeout is None else timeout)
        items: list[SSEEvent | SSEComment] = []
        while True:
            try:
                items.append(await self.receive(max(0.0, deadline - loop.time())))
            except StreamClosed:
                return items

    async def close(self) -> None:
        """Disconnect (the client side of closing the stream) and wait for the application."""
        await self._exchange.stop()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


# -- the client -----------------------------------------------------------------------------


@dataclass
class _State:
    session_id: str | None = None
    protocol_version: str | None = None
    initialize_result: dict[str, Any] | None = None
    ids: Any = field(default_factory=lambda: itertools.count(1))


class MCPTestClient:
    """Talk MCP to an ASGI application in-process, like a Streamable HTTP client would.

    ``application`` defaults to the project's ``ASGI_APPLICATION``; ``path`` is where the
    endpoint is mounted. ``headers`` are sent with every request (e.g. a ``cookie``).
    ``root_path`` serves the site under a path prefix, as uvicorn's ``--root-path`` does: the
    scope's ``root_path`` is set and every request's path starts with it.
    """

    def __init__(
        self,
        application: Any = None,
        path: str = "/mcp/",
        *,
        headers: dict[str, str] | None = None,
        host: str = "testserver",
        timeout: float = 5.0,
        session_id: str | None = None,
        protocol_version: str | None = None,
        request_handlers: dict[str, Callable[[dict[str, Any]], Any]] | None = None,
        root_path: str = "",
    ) -> None:
        self._application = application
        self.path = path
        self.root_path = root_path.rstrip("/")
        self.host = host
        self.timeout = timeout
        self.headers: dict[str, str] = {k.lower(): v for k, v in (headers or {}).items()}
        self._state = _State(session_id=session_id, protocol_version=protocol_version)
        #: Notifications received while answering the last :meth:`request`.
        self.last_notifications: list[dict[str, Any]] = []
        #: SSE events received while answering the last :meth:`request` (priming events included).
        self.last_events: list[SSEEvent] = []
        #: Requests the server sent while answering the last :meth:`request`.
        self.last_server_requests: list[dict[str, Any]] = []
        #: The HTTP response of the last :meth:`request` (the POST, when it was resumed).
        self.last_response: Response | None = None
        #: How to answer server-to-client requests, by method: ``handler(params) -> result``
        #: (sync or async). Requests without a handler are answered -32601.
        self.request_handlers: dict[str, Callable[[dict[str, Any]], Any]] = dict(
            request_handlers or {}
        )

    # -- state ----------------------------------------------------------------------------

    @property
    def application(self) -> Any:
        if self._application is None:
            self._application = import_string(settings.ASGI_APPLICATION)
        return self._application

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` sent with each request (set by :meth:`initialize`)."""
        return self._state.session_id

    @session_id.setter
    def session_id(self, value: str | None) -> None:
        self._state.session_id = value

    @property
    def protocol_version(self) -> str | None:
        """The ``MCP-Protocol-Version`` sent with each request (the negotiated one)."""
        return self._state.protocol_version

    @protocol_version.setter
    def protocol_version(self, value: str | None) -> None:
        self._state.protocol_version = value

    @property
    def initialize_result(self) -> dict[str, Any] | None:
        return self._state.initialize_result

    def next_id(self) -> int:
        """Return a request id not used before by this client."""
        return int(next(self._state.ids))

    async def force_login(self, user: Any, backend: str | None = None) -> None:
        """Log ``user`` in through Django's session framework and send its cookie from now on."""
        browser = AsyncClient()
        await browser.aforce_login(user, backend)
        cookie = browser.cookies[settings.SESSION_COOKIE_NAME]
        self.headers["cookie"] = f"{settings.SESSION_COOKIE_NAME}={cookie.value}"

    # -- raw HTTP -------------------------------------------------------------------------

    def build_headers(
        self, method: str, extra: dict[str, str | None] | None = None
    ) -> list[tuple[bytes, bytes]]:
        """Return the request headers: the client's defaults, then ``extra`` (None removes one)."""
        headers: dict[str, str | None] = {"host": self.host}
        if method == "POST":
            headers["accept"] = ACCEPT_BOTH
            headers["content-type"] = "application/json"
        elif method == "GET":
            headers["accept"] = "text/event-stream"
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        headers.update(self.headers)
        for key, value in (extra or {}).items():
            headers[key.lower()] = value
        return [
            (k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items() if v is not None
        ]

    def scope(
        self, method: str, headers: list[tuple[bytes, bytes]], path: str | None = None
    ) -> dict[str, Any]:
        """Return the ASGI HTTP scope of a request to the endpoint."""
        path = self.path if path is None else path
        path, _, query = path.partition("?")
        path = self.root_path + path
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method.upper(),
            "scheme": "http",
            "path": path,
            "raw_path": path.encode("latin-1", "replace"),
            "query_string": query.encode("latin-1", "replace"),
            "root_path": self.root_path,
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }

    async def send(
        self,
        method: str,
        body: bytes = b"",
        headers: dict[str, str | None] | None = None,
        *,
        path: str | None = None,
    ) -> Response:
        """Send one HTTP request and return the complete response (bounded by ``timeout``)."""
        exchange = _Exchange(
            self.application,
            self.scope(method, self.build_headers(method, headers), path),
            self.timeout,
        )
        try:
            await exchange.start(body)
            data = await exchange.read_to_end()
        finally:
            await exchange.stop()
        assert exchange.status is not None
        return Response(exchange.status, exchange.headers, data)

    async def post_raw(
        self, body: bytes, headers: dict[str, str | None] | None = None, *, path: str | None = None
    ) -> Response:
        """POST ``body`` as is, with the client's headers overridden by ``headers``."""
        return await self.send("POST", body, headers, path=path)

    async def post(self, message: Any, headers: dict[str, str | None] | None = None) -> Response:
        """POST one JSON-RPC message (or a batch list) and return the HTTP response."""
        return await self.post_raw(orjson.dumps(message), headers)

    async def open_stream(
        self, last_event_id: str | None = None, headers: dict[str, str | None] | None = None
    ) -> EventStream:
        """Open the session's GET stream, or resume a stream after ``last_event_id``.

        Returns once the response headers have arrived; read events from the result and close
        it when done (``async with await client.open_stream() as stream: ...``).
        """
        extra: dict[str, str | None] = {}
        if last_event_id is not None:
            extra["last-event-id"] = last_event_id
        extra.update(headers or {})
        return await self._open("GET", b"", extra)

    async def post_stream(
        self, message: Any, headers: dict[str, str | None] | None = None
    ) -> EventStream:
        """POST ``message`` and return its answer as a stream once the response headers arrived:
        an SSE answer is read event by event (a 2026-07-28 ``subscriptions/listen``, a long
        tool)."""
        return await self._open("POST", orjson.dumps(message), headers or {})

    async def _open(self, method: str, body: bytes, extra: dict[str, str | None]) -> EventStream:
        exchange = _Exchange(
            self.application, self.scope(method, self.build_headers(method, extra)), self.timeout
        )
        try:
            await exchange.start(body)
        except BaseException:
            await exchange.stop()
            raise
        stream = EventStream(exchange)
        if not (stream.status == HTTPStatus.OK and stream.is_sse):
            try:
                stream.body = await exchange.read_to_end()
            finally:
                await exchange.stop()
        return stream

    async def delete(self, headers: dict[str, str | None] | None = None) -> Response:
        """End the session with DELETE. The id is kept, so later requests show the 404."""
        return await self.send("DELETE", b"", headers)

    # -- JSON-RPC -------------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: str = DEFAULT_PROTOCOL_VERSION,
        capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run the handshake: ``initialize``, then ``notifications/initialized``.

        Keeps the session id and the negotiated version for later requests and returns the
        ``InitializeResult``; raises :class:`JSONRPCErrorResponse` if the server refuses.
        """
        self.session_id = None
        self.protocol_version = None
        params = {
            "protocolVersion": protocol_version,
            "capabilities": capabilities or {},
            "clientInfo": client_info or {"name": "mcp_django.testing", "version": "1"},
        }
        response = await self.request("initialize", params)
        result = _result(response)
        session_id = (
            self.last_response.headers.get("mcp-session-id") if self.last_response else None
        )
        self.session_id = session_id
        self.protocol_version = result.get("protocolVersion")
        self._state.initialize_result = result
        answer = await self.notify("notifications/initialized")
        if answer.status != HTTPStatus.ACCEPTED:
            raise AssertionError(
                f"notifications/initialized was answered {answer.status}: {answer.body[:200]!r}"
            )
        return result

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        id: str | int | None = None,
        headers: dict[str, str | None] | None = None,
        resume: bool = True,
    ) -> dict[str, Any]:
        """Send a request and return its JSON-RPC response object.

        A JSON answer is returned as is. An SSE answer is read up to its response: the
        notifications seen on the way are kept in :attr:`last_notifications`, and requests
        from the server (sampling, elicitation, roots, ping) are answered with
        :attr:`request_handlers`. When the server closes the connection before the response
        (SSE polling), the client resumes with GET and ``Last-Event-ID``, as a real client
        would, unless ``resume`` is False; it does not wait the ``retry`` delay, which would
        only slow the test down.
        """
        request_id = self.next_id() if id is None else id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.last_notifications = []
        self.last_server_requests = []
        self.last_events = []
        exchange = _Exchange(
            self.application, self.scope("POST", self.build_headers("POST", headers)), self.timeout
        )
        try:
            await exchange.start(orjson.dumps(message))
            if (
                exchange.status == HTTPStatus.OK
                and _media_type(exchange.headers) == "text/event-stream"
            ):
                stream = EventStream(exchange)
                found = await self._consume(stream, request_id)
                body = stream.body
            else:
                found = None
                body = await exchange.read_to_end()
        finally:
            await exchange.stop()
        assert exchange.status is not None
        response = Response(exchange.status, exchange.headers, body)
        self.last_response = response
        if not response.is_sse:
            if response.content_type != "application/json":
                raise AssertionError(
                    f"{method} was answered {response.status} {response.content_type!r}: "
                    f"{body[:200]!r}"
                )
            data = response.json()
            if not isinstance(data, dict):
                raise AssertionError(f"{method} was answered with {data!r}")
            return data
        resumes = 0
        while found is None:
            last_id = next((e.id for e in reversed(self.last_events) if e.id), None)
            if not resume or last_id is None or resumes >= 10:
                raise StreamClosed(f"the SSE answer to {method} ended without its response")
            resumes += 1
            async with await self.open_stream(last_event_id=last_id) as resumed:
                if resumed.status != HTTPStatus.OK:
                    raise AssertionError(
                        f"resuming {last_id!r} was answered {resumed.status}: "
                        f"{resumed.body[:200]!r}"
                    )
                found = await self._consume(resumed, request_id)
        return found

    async def _consume(self, stream: EventStream, request_id: Any) -> dict[str, Any] | None:
        """Read ``stream`` until the server ends it; return the response to ``request_id``."""
        found: dict[str, Any] | None = None
        while True:
            try:
                event = await stream.next_event()
            except StreamClosed:
                return found
            self.last_events.append(event)
            if not event.data:
                continue  # a priming event
            message = event.json()
            if not isinstance(message, dict):
                continue
            if "method" in message and "id" in message:
                self.last_server_requests.append(message)
                await self._answer_server_request(message)
            elif "method" in message:
                self.last_notifications.append(message)
            elif message.get("id") == request_id and ("result" in message or "error" in message):
                found = message

    async def _answer_server_request(self, message: dict[str, Any]) -> None:
        handler = self.request_handlers.get(message["method"])
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if handler is None:
            answer["error"] = {"code": -32601, "message": f"Method not found: {message['method']}"}
        else:
            result = handler(message.get("params") or {})
            if inspect.isawaitable(result):
                result = await result
            answer["result"] = result
        reply = await self.post(answer)
        if reply.status != HTTPStatus.ACCEPTED:
            raise AssertionError(
                f"the answer to {message['method']} was refused with {reply.status}: "
                f"{reply.body[:200]!r}"
            )

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> Response:
        """Send a notification; the server answers 202 with no body when it accepts it."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return await self.post(message)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its ``result``; raise :class:`JSONRPCErrorResponse` on an
        error."""
        return _result(await self.request(method, params))

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        meta: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Call a tool and return its ``CallToolResult`` (``isError`` results are returned too)."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if meta is not None:
            params["_meta"] = meta
        return await self.call("tools/call", params)

    async def ping(self) -> dict[str, Any]:
        """Send ``ping`` and return its (empty) result."""
        return await self.call("ping")


def _result(response: dict[str, Any]) -> dict[str, Any]:
    if "error" in response:
        raise JSONRPCErrorResponse(response)
    result = response.get("result")
    if not isinstance(result, dict):
        raise AssertionError(f"not a JSON-RPC result: {response!r}")
    return result
