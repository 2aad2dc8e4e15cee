"""The official MCP Python SDK as the client, for tests where it may choose the process, or
where a small "load balancer" in front of the two processes chooses for it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

WAIT = 15.0


class Inbox:
    """Every notification a client session received, in order, with bounded waits."""

    def __init__(self, *, raise_errors: bool = False) -> None:
        self.items: list[Any] = []
        self._changed = asyncio.Event()
        #: Re-raise an exception the session hands over (in-process: any is a bug), rather than
        #: drop it (a process killed under a test's feet is expected there).
        self.raise_errors = raise_errors

    async def __call__(self, message: Any) -> None:  # the session's message_handler
        if isinstance(message, Exception):
            if self.raise_errors:
                raise message
            return
        self.items.append(message)
        self._changed.set()

    def mark(self) -> int:
        return len(self.items)

    async def wait_for(
        self, predicate: Callable[[Any], bool], *, since: int = 0, timeout: float = WAIT
    ) -> Any:
        """Return the first notification after index ``since`` that matches ``predicate``."""
        deadline = time.monotonic() + timeout
        while True:
            for item in self.items[since:]:
                if predicate(item):
                    return item
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"no matching notification within {timeout}s; got {[type(i).__name__ for i in self.items[since:]]}"
                )
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    def since(self, mark: int, *, ignore: tuple[type, ...] = ()) -> list[Any]:
        return [item for item in self.items[mark:] if not isinstance(item, ignore)]


class SplitTransport(httpx2.AsyncHTTPTransport):
    """A balancer that sends JSON-RPC requests to one process and everything else (answers to
    the server's requests, notifications, the GET stream, DELETE) to the other."""

    def __init__(self, requests_port: int, others_port: int) -> None:
        super().__init__()
        self.requests_port = requests_port
        self.others_port = others_port
        self.routes: list[tuple[str, int]] = []  # (what, port)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        what = request.method
        port = self.others_port
        if request.method == "POST":
            body = json.loads(await request.aread())
            if isinstance(body, dict):
                what = body.get("method") or "response"
                if "method" in body and "id" in body:
                    port = self.requests_port
        self.routes.append((what, port))
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"{request.url.host}:{port}"
        return await super().handle_async_request(request)


def accept_reservation(note: str) -> ElicitationFnT:
    async def answer(
        context: ClientRequestContext, params: mcp.types.ElicitRequestParams
    ) -> mcp.types.ElicitResult:
        assert params.message.startswith("Reserve ")
        return mcp.types.ElicitResult(action="accept", content={"confirm": True, "note": note})

    return answer


@asynccontextmanager
async def sdk_session(
    url: str,
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
    elicitation: ElicitationFnT | None = None,
) -> AsyncIterator[tuple[mcp.ClientSession, Inbox]]:
    """An initialized SDK session on ``url`` (through ``transport`` if given), with its inbox."""
    inbox = Inbox()
    http = httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(30.0, read=120.0))
    async with http, streamable_http_client(url, http_client=http) as (read, write):
        async with mcp.ClientSession(
            read,
            write,
            message_handler=inbox,
            elicitation_callback=elicitation,
            read_timeout_seconds=60,
        ) as session:
            await session.initialize()
            yield session, inbox


async def wait_for_standalone_stream(
    session: mcp.ClientSession, inbox: Inbox, attempts: int = 40
) -> None:
    """Wait until the SDK's GET stream is held by the server.

    The SDK opens it in the background; a GET without Last-Event-ID starts after the events
    already stored, so announce (prompts list changed, from a tool call) until one arrives.
    """
    for _ in range(attempts):
        mark = inbox.mark()
        await session.call_tool("announce_list_changed", {"kind": "prompts"})
        try:
            await inbox.wait_for(
                lambda n: isinstance(n, mcp.types.PromptListChangedNotification),
                since=mark,
                timeout=0.5,
            )
            return
        except AssertionError:
            continue
    raise AssertionError(
        f"the SDK's standalone stream did not come up after {attempts} announcements"
    )
