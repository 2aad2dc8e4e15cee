"""The 2024-11-05 HTTP+SSE transport of the example site, driven by the official SDK's SSE client:
the same tools, resources, prompts and permissions as the main endpoint, progress, a question to
the user, and a stranger who cannot use someone else's session."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp import Client, MCPError
from mcp.client.sse import sse_client
from mcp.types import ElicitResult

from tests.polling import until

from .conftest import ExampleServer, tool_names

pytestmark = pytest.mark.e2e


def cookie_header(server: ExampleServer, username: str) -> dict[str, str]:
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in server.login(username).items())}


async def test_an_sse_client_uses_the_site(example_server_django_auth: ExampleServer) -> None:
    server = example_server_django_auth
    progress: list[float] = []
    asked: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": False, "note": ""})

    transport = sse_client(f"{server.mcp_url}/sse", headers=cookie_header(server, "librarian"))
    async with Client(
        transport, mode="legacy", read_timeout_seconds=20, elicitation_callback=elicit
    ) as client:
        names = await tool_names(client)
        found = await client.call_tool("search_books", {"query": "wells"})
        stats = await client.read_resource("library://catalogue/stats")
        prompt = await client.get_prompt("recommend_books", {"interest": "mystery"})
        counted = await client.call_tool(
            "test_tool_with_progress", {}, progress_callback=on_progress
        )
        reserved = await client.call_tool("confirm_reservation", {"title": "Emma"})
    assert "library_book_create" in names
    assert found.structured_content and found.structured_content["books"]
    assert stats.contents and prompt.messages
    assert not counted.is_error and len(progress) >= 3
    assert reserved.structured_content["action"] == "accept" and asked == ["Reserve Emma?"]


async def test_a_reader_is_refused_what_they_may_not_use(
    example_server_django_auth: ExampleServer,
) -> None:
    server = example_server_django_auth
    async with Client(
        sse_client(f"{server.mcp_url}/sse", headers=cookie_header(server, "reader")),
        mode="legacy",
        read_timeout_seconds=20,
    ) as client:
        assert "library_book_create" not in await tool_names(client)
        with pytest.raises(MCPError) as refused:
            await client.call_tool("library_book_create", {"title": "X"})
    assert "Unknown tool" in str(refused.value)


async def test_someone_elses_session_is_not_found_and_the_stream_needs_sign_in(
    example_server_django_auth: ExampleServer,
) -> None:
    server = example_server_django_auth
    async with (
        httpx.AsyncClient(timeout=10, headers=cookie_header(server, "librarian")) as owner,
        httpx.AsyncClient(timeout=10, headers=cookie_header(server, "reader")) as stranger,
        httpx.AsyncClient(timeout=10) as nobody,
    ):
        async with owner.stream(
            "GET", f"{server.mcp_url}/sse", headers={"Accept": "text/event-stream"}
        ) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            assert await anext(lines) == "event: endpoint"
            endpoint = (await anext(lines)).removeprefix("data: ")
            assert endpoint.startswith("/mcp/messages/?session_id=")
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            assert (await owner.post(server.base_url + endpoint, json=ping)).status_code == 202
            assert (await stranger.post(server.base_url + endpoint, json=ping)).status_code == 404
        assert (
            await nobody.get(f"{server.mcp_url}/sse", headers={"Accept": "text/event-stream"})
        ).status_code == 401


@pytest.mark.filterwarnings(
    "ignore::mcp.MCPDeprecationWarning"
)  # logging/setLevel: deprecated in 2026-07-28 only
async def test_logs_and_change_notifications_travel_on_the_sse_stream(
    example_server: ExampleServer,
) -> None:
    logs: list[Any] = []
    heard: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params)

    async def on_message(message: Any) -> None:
        heard.append(message)

    async with Client(
        sse_client(f"{example_server.mcp_url}/sse"),
        mode="legacy",
        read_timeout_seconds=20,
        logging_callback=on_log,
        message_handler=on_message,
    ) as client:
        await client.set_logging_level("info")
        await client.call_tool("test_tool_with_logging", {})
        await client.call_tool("test_trigger_tool_change", {})
        await until(
            lambda: any("ToolListChanged" in type(m).__name__ for m in heard),
            failure=lambda: f"no list change in {heard}",
        )
    assert [str(log.data) for log in logs][:3] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
