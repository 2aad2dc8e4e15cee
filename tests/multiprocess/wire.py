"""Raw Streamable HTTP for tests that must choose which process gets each request.

Each open SSE response is read by a background task into a queue, so a test waits for the
next event with a timeout without ever cancelling a read half-way.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any

import httpx

PROTOCOL_VERSION = "2025-11-25"
WAIT = 15.0  # seconds any single expected event may take

_ids = itertools.count(1)


@dataclass(frozen=True)
class Event:
    """One SSE event: its id and data (empty for priming events)."""

    id: str | None
    data: str

    @property
    def seq(self) -> int:
        assert self.id is not None
        return int(self.id.rpartition(":")[2])

    @property
    def stream(self) -> str:
        assert self.id is not None
        return self.id.rpartition(":")[0]

    def json(self) -> Any:
        return json.loads(self.data)


class Ended(Exception):
    """The server (or the network) ended the SSE response."""


def parse_sse_lines(buffer: str) -> tuple[list[Event], str]:
    """Split complete events off ``buffer`` (``id:``/``data:`` lines; comments skipped)."""
    events: list[Event] = []
    buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
    while "\n\n" in buffer:
        block, buffer = buffer.split("\n\n", 1)
        event_id: str | None = None
        data: list[str] = []
        fields = False
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            fields = True
            if name == "id":
                event_id = value
            elif name == "data":
                data.append(value)
        if fields:
            events.append(Event(event_id, "\n".join(data)))
    return events, buffer


class SSE:
    """An SSE response being read in the background."""

    def __init__(self, response: httpx.Response, stack: Any) -> None:
        self.response = response
        self._stack = stack
        self.queue: asyncio.Queue[Event | BaseException] = asyncio.Queue()
        self.received: list[Event] = []  # every event handed to the test, priming ones included
        self.ended: BaseException | None = None
        self._task = asyncio.get_running_loop().create_task(self._read())

    @property
    def status_code(self) -> int:
        return self.response.status_code

    async def _read(self) -> None:
        buffer = ""
        try:
            async for chunk in self.response.aiter_text():
                events, buffer = parse_sse_lines(buffer + chunk)
                for event in events:
                    self.queue.put_nowait(event)
            self.queue.put_nowait(Ended("the server ended the stream"))
        except httpx.HTTPError as exc:
            self.queue.put_nowait(Ended(f"the connection failed: {type(exc).__name__}: {exc}"))

    async def next_event(self, timeout: float = WAIT) -> Event:
        """Return the next event (priming events included); raise Ended at the end."""
        if self.ended is not None:
            raise Ended(str(self.ended))
        try:
            item = await asyncio.wait_for(self.queue.get(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(
                f"no SSE event within {timeout}s; so far: {[e.data[:200] for e in self.received]}"
            ) from None
        if isinstance(item, BaseException):
            self.ended = item
            raise item
        self.received.append(item)
        return item

    async def next_message(self, timeout: float = WAIT) -> tuple[Event, dict[str, Any]]:
        """Return the next event that carries a JSON-RPC message, with the message."""
        while True:
            event = await self.next_event(timeout)
            if event.data:
                return event, event.json()

    async def until_response(
        self, request_id: Any, timeout: float = WAIT
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Read messages up to the response to ``request_id``; return (the ones before, it)."""
        before: list[dict[str, Any]] = []
        while True:
            _, message = await self.next_message(timeout)
            if "method" not in message and message.get("id") == request_id:
                return before, message
            before.append(message)

    async def rest(self, timeout: float = WAIT) -> list[Event]:
        """Read until the stream ends; return the events that came (priming ones included)."""
        events: list[Event] = []
        while True:
            try:
                events.append(await self.next_event(timeout))
            except Ended:
                return events

    async def close(self) -> None:
        """Drop the connection, as a client that goes away does."""
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        await self._stack.aclose()

    async def __aenter__(self) -> SSE:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class RawClient:
    """Hand-written Streamable HTTP requests; every method names the server it talks to."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    @staticmethod
    def headers(session_id: str | None = None, **extra: str) -> dict[str, str]:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": PROTOCOL_VERSION,
        }
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        headers.update(extra)
        return headers

    async def initialize(self, url: str, capabilities: dict[str, Any] | None = None) -> str:
        """Open a session on the server at ``url``; return its id."""
        body = {
            "jsonrpc": "2.0",
            "id": next(_ids),
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": capabilities
                if capabilities is not None
                else {"elicitation": {"form": {}}},
                "clientInfo": {"name": "multiprocess-tests", "version": "1"},
            },
        }
        headers = self.headers()
        del headers["mcp-protocol-version"]
        response = await self.http.post(url, json=body, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["protocolVersion"] == PROTOCOL_VERSION
        session_id = response.headers["mcp-session-id"]
        await self.notify(url, session_id, "notifications/initialized")
        return session_id

    async def post(self, url: str, session_id: str, message: dict[str, Any]) -> httpx.Response:
        return await self.http.post(url, json=message, headers=self.headers(session_id))

    async def notify(
        self, url: str, session_id: str, method: str, params: dict[str, Any] | None = None
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        response = await self.post(url, session_id, message)
        assert response.status_code == 202, (response.status_code, response.text)

    async def request(
        self, url: str, session_id: str, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Send a request answered with JSON or a short SSE stream; return the result."""
        request_id = next(_ids)
        response = await self.post(
            url,
            session_id,
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}},
        )
        assert response.status_code == 200, (response.status_code, response.text)
        if response.headers["content-type"].startswith("text/event-stream"):
            events, _ = parse_sse_lines(response.text)
            messages = [e.json() for e in events if e.data]
            answer = next(m for m in messages if m.get("id") == request_id and "method" not in m)
        else:
            answer = response.json()
        assert "result" in answer, answer
        return answer["result"]

    async def _open(self, method: str, url: str, headers: dict[str, str], body: Any = None) -> SSE:
        from contextlib import AsyncExitStack

        stack = AsyncExitStack()
        kwargs: dict[str, Any] = {"headers": headers}
        if body is not None:
            kwargs["json"] = body
        response = await stack.enter_async_context(self.http.stream(method, url, **kwargs))
        if response.status_code != 200 or not response.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            await response.aread()
            text = response.text
            await stack.aclose()
            raise AssertionError(
                f"{method} {url}: expected an SSE stream, got {response.status_code}: {text[:500]}"
            )
        return SSE(response, stack)

    async def call_stream(
        self,
        url: str,
        session_id: str,
        request_id: Any,
        name: str,
        arguments: dict[str, Any],
        progress_token: Any = None,
    ) -> SSE:
        """POST a tools/call and return its SSE answer, being read."""
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        return await self._open("POST", url, self.headers(session_id), body)

    async def get_stream(self, url: str, session_id: str, last_event_id: str | None = None) -> SSE:
        """Open the session's standalone stream, or resume a stream after ``last_event_id``."""
        extra = {"last-event-id": last_event_id} if last_event_id is not None else {}
        headers = self.headers(session_id, **extra)
        del headers["content-type"]
        headers["accept"] = "text/event-stream"
        return await self._open("GET", url, headers)
