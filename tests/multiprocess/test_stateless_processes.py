"""2026-07-28 across processes: nothing ties a client to a process. A call begun on process 1
is continued on process 2 with its sealed requestState, and a subscriptions/listen stream held by
process 2 hears a change made on process 1 or by a management command.

Run once per deployment shape (two daphne processes on PostgreSQL and Redis, or one process on
SQLite with the in-memory layer), against the real example site."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest

from .servers import Deployment
from .wire import SSE, RawClient

pytestmark = pytest.mark.multiprocess

VERSION = "2026-07-28"
_ids = itertools.count(1)


def message(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "multiprocess-tests", "version": "1"},
    }
    return {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }


def headers(body: dict[str, Any]) -> dict[str, str]:
    sent = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": VERSION,
        "mcp-method": body["method"],
    }
    if body["method"] == "tools/call":
        sent["mcp-name"] = body["params"]["name"]
    return sent


async def call(http: httpx.AsyncClient, url: str, name: str, **params: Any) -> dict[str, Any]:
    body = message("tools/call", {"name": name, "arguments": {}, **params})
    response = await http.post(url, json=body, headers=headers(body))
    assert response.status_code == 200, response.text
    assert "mcp-session-id" not in response.headers
    return response.json()["result"]


async def test_a_call_begun_on_one_process_is_continued_on_the_other(
    deployment: Deployment, http: httpx.AsyncClient
) -> None:
    tool = "test_input_required_result_multi_round"
    first = await call(http, deployment.p1.url, tool)
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["step1"]
    second = await call(
        http,
        deployment.p2.url,
        tool,
        requestState=first["requestState"],
        inputResponses={"step1": {"action": "accept", "content": {"name": "Alice"}}},
    )
    assert second["resultType"] == "input_required" and list(second["inputRequests"]) == ["step2"]
    assert second["requestState"] != first["requestState"]
    done = await call(
        http,
        deployment.p1.url,
        tool,
        requestState=second["requestState"],
        inputResponses={"step2": {"action": "accept", "content": {"color": "blue"}}},
    )
    assert done["resultType"] == "complete"
    assert done["content"][0]["text"] == "Alice likes blue"
    # A state altered on the way is refused by every process alike.
    refused = await http.post(
        deployment.p2.url,
        json=(
            body := message(
                "tools/call",
                {
                    "name": tool,
                    "arguments": {},
                    "requestState": second["requestState"][:-4] + "AAAA",
                    "inputResponses": {"step2": {"action": "accept", "content": {"color": "red"}}},
                },
            )
        ),
        headers=headers(body),
    )
    assert refused.json()["error"]["code"] == -32602


async def listen(raw: RawClient, url: str, notifications: dict[str, Any]) -> tuple[SSE, Any]:
    body = message("subscriptions/listen", {"notifications": notifications})
    stream = await raw._open("POST", url, headers(body), body)
    _, ack = await stream.next_message()
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    return stream, body["id"]


async def test_a_listen_stream_on_one_process_hears_changes_made_on_the_other(
    deployment: Deployment, http: httpx.AsyncClient, raw: RawClient
) -> None:
    stream, subscription = await listen(raw, deployment.p2.url, {"toolsListChanged": True})
    async with stream:
        await call(http, deployment.p1.url, "test_trigger_tool_change")
        _, changed = await stream.next_message()
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == subscription


async def test_a_listen_stream_hears_a_management_command(
    deployment: Deployment, raw: RawClient
) -> None:
    if not deployment.shared_layer:
        pytest.skip(
            "a management command reaches the servers only through a shared channel layer (Redis)"
        )
    stream, _ = await listen(
        raw, deployment.p2.url, {"promptsListChanged": True, "toolsListChanged": True}
    )
    async with stream:
        out = await deployment.amanage("announce_change", "prompts")
        assert "prompts" in out
        _, changed = await stream.next_message()
    assert changed["method"] == "notifications/prompts/list_changed"


async def test_an_http_sse_post_to_another_process_is_answered_on_the_stream(
    deployment: Deployment, http: httpx.AsyncClient, raw: RawClient
) -> None:
    """2024-11-05 HTTP+SSE: the stream is held by process 1, the POSTs land on process 2."""
    stream = await raw._open("GET", deployment.p1.url + "/sse", {"accept": "text/event-stream"})
    async with stream:
        endpoint = await stream.next_event()  # the "endpoint" event: where to POST
        assert endpoint.data.startswith("/mcp/messages/?session_id="), endpoint
        messages = deployment.p2.url.rsplit("/mcp", 1)[0] + endpoint.data
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2024-11-05",
                "capabilities": {},
                "clientInfo": {"name": "sse", "version": "1"},
            },
        }
        assert (await http.post(messages, json=init)).status_code == 202
        _, answer = await stream.next_message()
        assert answer["id"] == 1 and answer["result"]["protocolVersion"] == "2024-11-05"
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search_books", "arguments": {"query": "wells"}},
        }
        assert (await http.post(messages, json=call)).status_code == 202
        _, result = await stream.next_message()
    assert (
        result["id"] == 2 and "books" in result["result"]["structuredContent"]
    )  # no demo data here
