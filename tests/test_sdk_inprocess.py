"""The official MCP Python SDK drives the test project in-process, in the fast lane.

The same client as the e2e tests, over Streamable HTTP, with the ASGI application in the test's
event loop instead of a server on a port (see tests/sdk_inprocess.py).
"""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from mcp import types

from mcp_django.testing import MCPTestClient

from .sdk_inprocess import WAIT, StreamingASGITransport, sdk_session

pytestmark = pytest.mark.django_db(transaction=True)


def text_of(result: types.CallToolResult | types.GetPromptResult) -> str:
    if isinstance(result, types.GetPromptResult):
        blocks = [message.content for message in result.messages]
    else:
        blocks = list(result.content)
    return "\n".join(block.text for block in blocks if isinstance(block, types.TextContent))


async def test_initialize_negotiates_version_and_shows_server_info_and_capabilities():
    async with sdk_session() as (session, _, transport):
        result = session.initialize_result
        assert result is not None
        assert result.protocol_version == "2025-11-25"
        assert result.server_info.name == "mcp-django-tests"
        capabilities = result.capabilities
        assert capabilities.tools is not None
        assert capabilities.resources is not None
        assert capabilities.prompts is not None
        assert capabilities.logging is not None
        assert transport.requests[0] == ("POST", 200)


async def test_tools_list_gives_names_and_input_schemas():
    async with sdk_session() as (session, _, _):
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert {"add", "echo", "fail", "progress"} <= set(tools)
    add = tools["add"].input_schema
    assert add["properties"]["a"]["type"] == add["properties"]["b"]["type"] == "integer"
    assert sorted(add["required"]) == ["a", "b"]
    assert tools["add"].description == "Add two integers."
    progress = tools["progress"].input_schema
    assert "ctx" not in progress["properties"]
    assert progress["properties"]["steps"]["default"] == 3


async def test_tools_call_returns_structured_content():
    async with sdk_session() as (session, _, _):
        result = await session.call_tool("add", {"a": 2, "b": 3})
    assert isinstance(result, types.CallToolResult)
    assert not result.is_error
    assert result.structured_content == {"result": 5}
    assert text_of(result) == "5"


async def test_a_tool_error_comes_back_as_is_error():
    async with sdk_session() as (session, _, _):
        result = await session.call_tool("fail", {"message": "no luck"})
    assert isinstance(result, types.CallToolResult)
    assert result.is_error
    assert text_of(result) == "no luck"


async def test_resources_list_and_read():
    async with sdk_session() as (session, _, _):
        listed = {
            str(resource.uri): resource for resource in (await session.list_resources()).resources
        }
        read = await session.read_resource("test://hello")
    assert listed["test://hello"].name == "hello"
    assert listed["test://hello"].mime_type == "text/plain"
    [content] = read.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.text == "Hello!"
    assert content.mime_type == "text/plain"


async def test_prompts_get_renders_the_prompt():
    async with sdk_session() as (session, _, _):
        result = await session.get_prompt("explain", {"topic": "django", "level": "expert"})
    assert [message.role for message in result.messages] == ["user"]
    assert text_of(result) == "Explain django at expert level."


async def test_progress_and_log_notifications_reach_the_client():
    progress: list[tuple[float, float | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    async with sdk_session() as (session, inbox, _):
        result = await session.call_tool("progress", {"steps": 2}, progress_callback=on_progress)
        logged = await inbox.wait_for(
            lambda item: (
                isinstance(item, types.LoggingMessageNotification) and item.params.data == "step 2"
            )
        )
    assert isinstance(result, types.CallToolResult)
    assert text_of(result) == "done 2"
    assert progress == [(1, 2), (2, 2)]
    assert logged.params.level == "info"


async def test_ping_is_answered():
    async with sdk_session() as (session, _, _):
        result = await session.send_ping()
    assert result.model_dump(exclude_none=True) == {}


async def test_closing_the_session_deletes_it_on_the_server():
    async with sdk_session() as (session, _, transport):
        # The SDK opens its standalone GET stream once initialized; it must be closed too.
        assert await transport.wait_for_request("GET") == 200
        await session.send_ping()
    assert transport.requests[-1] == ("DELETE", 204)
    assert transport.session_id
    gone = MCPTestClient(session_id=transport.session_id, protocol_version="2025-11-25")
    response = await gone.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status == 404


async def test_the_transport_streams_sse_chunks_as_the_application_sends_them():
    sent = asyncio.Event()

    async def application(scope, receive, send):
        await receive()
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        assert (await receive())["type"] == "http.disconnect"  # only once the client closed
        sent.set()

    transport = StreamingASGITransport(application)
    async with (
        httpx2.AsyncClient(transport=transport) as http,
        http.stream("GET", "http://testserver/") as response,
    ):
        chunks = response.aiter_bytes()
        assert await asyncio.wait_for(chunks.__anext__(), WAIT) == b"data: 1\n\n"
        assert not sent.is_set()
    await asyncio.wait_for(sent.wait(), WAIT)


async def test_the_transport_reports_an_application_that_failed_after_answering():
    async def application(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        raise RuntimeError("after the answer")

    http = httpx2.AsyncClient(transport=StreamingASGITransport(application))
    assert (await http.get("http://testserver/")).status_code == 204
    with pytest.raises(RuntimeError, match="after the answer"):
        await http.aclose()
