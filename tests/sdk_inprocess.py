"""The official MCP Python SDK as the client of the test project's ASGI application, in-process.

The SDK speaks Streamable HTTP through an ``httpx2.AsyncClient``; here that client's transport
calls the ASGI application in the test's event loop, so no socket is opened and the server sees
the test's database. httpx2's own ``ASGITransport`` cannot be used: it waits for the whole
response before returning it, and the SDK keeps a GET stream open and reads POST answers as SSE
while they are written. :class:`StreamingASGITransport` hands each body chunk over as the
application sends it, and tells the application the client went away when the response is
closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp
from django.conf import settings
from django.utils.module_loading import import_string
from mcp.client.streamable_http import streamable_http_client

from .multiprocess.sdk import Inbox

URL = "http://testserver/mcp/"
WAIT = 5.0


class _ResponseBody(httpx2.AsyncByteStream):
    """The body of one response, read from the application as it sends it."""

    def __init__(self, exchange: _Exchange) -> None:
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        exchange = self._exchange
        while True:
            message = await exchange.next_message()
            if message is None:  # the application ended without finishing the body
                return
            if message["type"] != "http.response.body":
                raise AssertionError(f"expected http.response.body, got {message['type']!r}")
            body = bytes(message.get("body", b""))
            if body:
                yield body
            if not message.get("more_body", False):
                return

    async def aclose(self) -> None:
        await self._exchange.disconnect()


class _Exchange:
    """One request running in the application: its ASGI queues and the task that runs it."""

    def __init__(self, application: Any, scope: dict[str, Any], body: bytes) -> None:
        self._body: bytes | None = body
        self._disconnected = asyncio.Event()
        self._sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task = asyncio.ensure_future(application(scope, self._receive, self._send))

    async def _receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._disconnected.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Any) -> None:
        await self._sent.put(dict(message))

    async def next_message(self) -> dict[str, Any] | None:
        """Return what the application sends next, or None once it has ended (re-raising
        its exception, if it failed)."""
        getter = asyncio.ensure_future(self._sent.get())
        try:
            await asyncio.wait({getter, self.task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Also when the reader is cancelled: a getter left behind would eat a message.
            if not getter.done():
                getter.cancel()
        if not getter.cancelled():
            return getter.result()
        if not self._sent.empty():  # sent just before it ended
            return self._sent.get_nowait()
        self.task.result()
        return None

    async def disconnect(self) -> None:
        """Tell the application the client has gone, as a server does, and let it finish."""
        self._disconnected.set()
        if not self.task.done():
            # A bounded wait: an application that ignores the disconnect is cancelled.
            done, _ = await asyncio.wait({self.task}, timeout=WAIT)
            if not done:
                self.task.cancel()
                await asyncio.gather(self.task, return_exceptions=True)


class StreamingASGITransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that runs each request in an ASGI application and streams the
    response back chunk by chunk."""

    def __init__(self, application: Any = None) -> None:
        if application is None:
            application = import_string(settings.ASGI_APPLICATION)
        self.application = application
        self._exchanges: list[_Exchange] = []
        #: ``(method, status)`` of every request the application answered, in order.
        self.requests: list[tuple[str, int]] = []
        #: The ``Mcp-Session-Id`` the application gave (in its answer to initialize).
        self.session_id: str | None = None
        self._answered = asyncio.Event()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "root_path": "",
            "headers": [(key.lower(), value) for key, value in request.headers.raw],
            "client": ("127.0.0.1", 50000),
            "server": (request.url.host, request.url.port or 80),
        }
        exchange = _Exchange(self.application, scope, body)
        self._exchanges.append(exchange)
        start = await asyncio.wait_for(exchange.next_message(), WAIT)
        if start is None or start["type"] != "http.response.start":
            raise AssertionError(f"expected http.response.start, got {start!r}")
        self.requests.append((request.method, int(start["status"])))
        self._answered.set()
        for key, value in start.get("headers", []):
            if key.lower() == b"mcp-session-id":
                self.session_id = value.decode("latin-1")
        return httpx2.Response(
            int(start["status"]),
            headers=list(start.get("headers", [])),
            stream=_ResponseBody(exchange),
            request=request,
        )

    async def wait_for_request(self, method: str, timeout: float = WAIT) -> int:
        """Wait until the application has answered a ``method`` request; return its status."""
        return await asyncio.wait_for(self._status_of(method), timeout)

    async def _status_of(self, method: str) -> int:
        while True:
            for seen, status in self.requests:
                if seen == method:
                    return status
            self._answered.clear()
            await self._answered.wait()

    async def aclose(self) -> None:
        # Responses nobody closed (a cancelled GET stream) must not outlive the client.
        for exchange in self._exchanges:
            await exchange.disconnect()
        exchanges, self._exchanges = self._exchanges, []
        # An application that failed after its response was read fails the test here, instead
        # of as a "never retrieved" warning nobody reads.
        for exchange in exchanges:
            error = None if exchange.task.cancelled() else exchange.task.exception()
            if error is not None:
                raise error


@asynccontextmanager
async def sdk_session(
    application: Any = None, **session_options: Any
) -> AsyncIterator[tuple[mcp.ClientSession, Inbox, StreamingASGITransport]]:
    """An initialized SDK session on the application's ``/mcp/`` endpoint, with its inbox and
    its transport (which lists the requests the application answered)."""
    inbox = Inbox(raise_errors=True)
    transport = StreamingASGITransport(application)
    http = httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(WAIT, read=WAIT * 2))
    async with (
        http,
        streamable_http_client(URL, http_client=http) as (read, write),
        mcp.ClientSession(
            read, write, message_handler=inbox, read_timeout_seconds=WAIT, **session_options
        ) as session,
    ):
        await asyncio.wait_for(session.initialize(), WAIT)
        yield session, inbox, transport
