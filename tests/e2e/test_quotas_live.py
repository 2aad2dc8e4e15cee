"""Quotas on the real example site, set from its environment variables (MCP_RATE_LIMIT,
MCP_RATE_LIMIT_PER_TOOL, MCP_MAX_SESSIONS_PER_USER): the official SDK client, in either era,
gets the JSON-RPC error that says which limit refused it and when to retry; a plain HTTP client
gets 429 with Retry-After.

Each test calls as a user of its own (the site runs with MCP_AUTH=django), so each has budgets
of its own. The windows are a day long: a test would have to straddle midnight UTC to see one
reset.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from mcp_django.protocol.errors import QUOTA_EXCEEDED

from .conftest import ExampleServer, copy_database, run_server, server_env

pytestmark = pytest.mark.e2e

LIMITS = {
    "MCP_RATE_LIMIT": "2/day",
    "MCP_RATE_LIMIT_PER_TOOL": "book_availability=1/day",
    "MCP_MAX_SESSIONS_PER_USER": "2",
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
DAY = 24 * 3600


@pytest.fixture(scope="module")
def server(
    asgi_server: str, demo_database: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleServer]:
    """The example site with low quotas from its environment, on its own copy of the demo data."""
    workdir = tmp_path_factory.mktemp("e2e-quotas")
    env = {
        **server_env(copy_database(demo_database, workdir / "example.sqlite3"), auth="django"),
        **LIMITS,
    }
    with run_server(env, workdir / f"{asgi_server}.log", server=asgi_server) as running:
        yield running


async def _refused_third_call(server: ExampleServer, username: str, mode: str) -> MCPError:
    async with (
        httpx2.AsyncClient(cookies=server.login(username), timeout=10) as http,
        Client(
            streamable_http_client(server.mcp_url, http_client=http),
            read_timeout_seconds=10,
            mode=mode,
        ) as client,
    ):
        for _ in range(2):
            result = await client.call_tool("search_books", {"query": "Hound"})
            assert not result.is_error
        with pytest.raises(MCPError) as refused:
            await client.call_tool("search_books", {"query": "Hound"})
    return refused.value


@pytest.mark.parametrize(("mode", "username"), [("auto", "alice"), ("legacy", "bob")])
async def test_the_sdk_client_gets_the_error_naming_the_limit_and_when_to_retry(
    server: ExampleServer, mode: str, username: str
) -> None:
    error = await _refused_third_call(server, username, mode)
    assert error.code == QUOTA_EXCEEDED
    assert error.data["limit"] == "TOOL_CALLS" and error.data["rate"] == "2/day"
    assert isinstance(error.data["retryAfter"], int) and 0 < error.data["retryAfter"] <= DAY
    assert "TOOL_CALLS" in error.message


async def test_a_per_tool_limit_from_the_environment_limits_that_tool(
    server: ExampleServer,
) -> None:
    async with (
        httpx2.AsyncClient(cookies=server.login("reader"), timeout=10) as http,
        Client(
            streamable_http_client(server.mcp_url, http_client=http), read_timeout_seconds=10
        ) as client,
    ):
        first = await client.call_tool("book_availability", {"isbn": "9780000500021"})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("book_availability", {"isbn": "9780000500021"})
        assert (
            not first.is_error
            and first.structured_content["title"] == "The Hound of the Baskervilles"
        )
        # The overall budget is untouched by the refused call.
        assert not (await client.call_tool("search_books", {})).is_error
    assert refused.value.code == QUOTA_EXCEEDED
    assert (
        refused.value.data["limit"] == "PER_TOOL"
        and refused.value.data["tool"] == "book_availability"
    )


def _post(
    http: httpx.Client, url: str, message: dict[str, Any], session: str | None = None
) -> httpx.Response:
    headers = {
        **HEADERS,
        "MCP-Protocol-Version": "2025-11-25",
        **({"Mcp-Session-Id": session} if session else {}),
    }
    return http.post(url, content=json.dumps(message), headers=headers)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def test_a_plain_http_client_gets_429_with_retry_after(server: ExampleServer) -> None:
    with httpx.Client(cookies=server.login("carol"), timeout=10) as http:
        session = _post(http, server.mcp_url, INITIALIZE).headers["mcp-session-id"]
        assert (
            _post(
                http,
                server.mcp_url,
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                session,
            ).status_code
            == 202
        )
        call = {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"name": "search_books", "arguments": {}},
        }
        for n in (2, 3):
            assert _post(http, server.mcp_url, {**call, "id": n}, session).status_code == 200
        refused = _post(http, server.mcp_url, {**call, "id": 4}, session)
    assert refused.status_code == 429
    retry_after = int(refused.headers["retry-after"])
    assert 0 < retry_after <= DAY
    body = refused.json()
    assert body["id"] == 4 and body["error"]["code"] == QUOTA_EXCEEDED
    assert body["error"]["data"] == {
        "limit": "TOOL_CALLS",
        "rate": "2/day",
        "retryAfter": retry_after,
    }


def test_a_user_at_the_session_cap_from_the_environment_gets_429_naming_it(
    server: ExampleServer,
) -> None:
    with httpx.Client(cookies=server.login("librarian"), timeout=10) as http:
        opened = [_post(http, server.mcp_url, INITIALIZE) for _ in range(3)]
    assert [r.status_code for r in opened] == [200, 200, 429]
    assert "mcp-session-id" not in opened[2].headers
    assert opened[2].json()["error"]["data"] == {"limit": "SESSIONS_PER_USER", "max": 2}
