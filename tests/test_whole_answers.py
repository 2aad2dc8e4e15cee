"""An answer that is whole in hand (JSON, an empty 202, a refusal) goes out as one
``http.response.start`` with ``Content-Length`` and one ``http.response.body``: the server then
writes it in one go instead of chunking it (issue 45's first suspect for Daphne's cost)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from asgiref.testing import ApplicationCommunicator

from mcp_django.testing import MCPTestClient
from tests.tasks_wire import headers as modern_headers
from tests.tasks_wire import message as modern_message

pytestmark = pytest.mark.django_db(transaction=True)


async def exchange(
    client: MCPTestClient, method: str, body: bytes, headers: dict[str, Any]
) -> list[dict[str, Any]]:
    """Every ASGI message the application sends for one request, until it ends."""
    scope = client.scope(method, client.build_headers(method, headers))
    communicator = ApplicationCommunicator(client.application, scope)
    await communicator.send_input({"type": "http.request", "body": body, "more_body": False})
    await communicator.wait(5)
    sent = []
    while not communicator.output_queue.empty():
        sent.append(communicator.output_queue.get_nowait())
    return sent


def assert_whole(sent: list[dict[str, Any]]) -> bytes:
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"], sent
    start, body = sent
    lengths = [v for k, v in start["headers"] if k.lower() == b"content-length"]
    assert lengths == [str(len(body["body"])).encode()], start["headers"]
    assert not body.get("more_body", False)
    return bytes(body["body"])


async def test_a_2026_call_is_one_body_with_its_length() -> None:
    client = MCPTestClient()
    request = modern_message("tools/call", {"name": "echo", "arguments": {"text": "whole"}})
    sent = await exchange(client, "POST", orjson.dumps(request), modern_headers(request))
    answer = orjson.loads(assert_whole(sent))
    assert answer["result"]["content"][0]["text"] == "whole"


async def test_a_handshake_era_json_answer_and_a_202_are_whole() -> None:
    client = MCPTestClient()
    await client.initialize()
    headers = {"mcp-session-id": client.session_id, "mcp-protocol-version": "2025-11-25"}
    ping = orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    answer = orjson.loads(assert_whole(await exchange(client, "POST", ping, headers)))
    assert answer == {"jsonrpc": "2.0", "id": 7, "result": {}}
    note = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    sent = await exchange(client, "POST", note, headers)
    assert sent[0]["status"] == 202
    assert assert_whole(sent) == b""


async def test_a_refusal_is_whole() -> None:
    client = MCPTestClient()
    sent = await exchange(client, "POST", b"{not json", {"mcp-protocol-version": "2026-07-28"})
    assert sent[0]["status"] == 400
    assert orjson.loads(assert_whole(sent))["error"]["code"] == -32700
