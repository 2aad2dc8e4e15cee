"""The shipped in-process client, ``mcp_django.testing``."""

from __future__ import annotations

import pytest

from mcp_django.protocol.errors import INVALID_PARAMS
from mcp_django.testing import (
    JSONRPCErrorResponse,
    MCPTestClient,
    Response,
    SSEComment,
    SSEEvent,
    SSEParser,
    parse_sse,
)

# --- SSE parsing (the protocol core's parser; its tests are in tests/protocol/test_sse.py) --


def test_the_client_parses_sse_with_the_protocol_parser():
    from mcp_django.protocol import sse

    assert (SSEParser, SSEEvent, SSEComment, parse_sse) == (
        sse.SSEParser,
        sse.SSEEvent,
        sse.SSEComment,
        sse.parse_sse,
    )
    assert parse_sse(b'id: s:1\ndata: {"a": 1}\n\n')[0].json() == {"a": 1}


def test_response_messages_reads_json_and_sse_bodies():
    json_response = Response(
        200, {"content-type": "application/json"}, b'{"jsonrpc":"2.0","id":1,"result":{}}'
    )
    sse_response = Response(
        200, {"content-type": "text/event-stream"}, b'id: s:0\ndata:\n\nid: s:1\ndata: {"id":1}\n\n'
    )
    assert json_response.messages() == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert sse_response.messages() == [{"id": 1}]
    assert Response(202, {}, b"").messages() == []


# --- the client ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_client_uses_the_projects_asgi_application_by_default():
    from tests.asgi import application

    client = MCPTestClient()
    assert client.application is application


@pytest.mark.django_db(transaction=True)
async def test_initialize_keeps_session_and_version():
    client = MCPTestClient()
    result = await client.initialize(protocol_version="2025-06-18")
    assert client.protocol_version == "2025-06-18" == result["protocolVersion"]
    assert client.session_id
    headers = dict(client.build_headers("POST"))
    assert headers[b"mcp-session-id"] == client.session_id.encode()
    assert headers[b"mcp-protocol-version"] == b"2025-06-18"


@pytest.mark.django_db(transaction=True)
async def test_request_ids_increase():
    client = MCPTestClient()
    await client.initialize()
    first = await client.request("ping")
    second = await client.request("ping")
    assert second["id"] > first["id"]


@pytest.mark.django_db(transaction=True)
async def test_call_raises_json_rpc_error_response_with_the_code():
    client = MCPTestClient()
    await client.initialize()
    with pytest.raises(JSONRPCErrorResponse) as exc:
        await client.call_tool("no-such-tool")
    assert exc.value.code == INVALID_PARAMS
    assert exc.value.response["error"]["code"] == INVALID_PARAMS


@pytest.mark.django_db(transaction=True)
async def test_header_overrides_can_remove_a_default_header():
    client = MCPTestClient()
    await client.initialize()
    headers = dict(client.build_headers("POST", {"accept": None, "x-extra": "1"}))
    assert b"accept" not in headers
    assert headers[b"x-extra"] == b"1"


@pytest.mark.django_db(transaction=True)
async def test_server_requests_are_answered_by_request_handlers():
    async def sample(params):
        assert params["messages"][0]["content"]["text"] == "Why?"
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "Because."},
            "model": "test",
        }

    client = MCPTestClient(
        request_handlers={
            "sampling/createMessage": sample,
            "elicitation/create": lambda params: {"action": "accept", "content": {"ok": True}},
        }
    )
    await client.initialize(capabilities={"sampling": {}, "elicitation": {"form": {}}})
    result = await client.call_tool("ask", {"question": "Why?"})
    assert result["content"][0]["text"] == "Because. / accept {'ok': True}"
    assert [r["method"] for r in client.last_server_requests] == [
        "sampling/createMessage",
        "elicitation/create",
    ]


@pytest.mark.django_db(transaction=True)
async def test_server_requests_without_a_handler_are_refused():
    client = MCPTestClient()
    await client.initialize(capabilities={"sampling": {}})
    result = await client.call_tool("ask", {"question": "Why?"})
    assert result["isError"] is True
    assert "sampling/createMessage" in result["content"][0]["text"]


@pytest.mark.django_db(transaction=True)
async def test_request_does_not_resume_when_told_not_to():
    from mcp_django.testing import StreamClosed

    client = MCPTestClient()
    await client.initialize()
    with pytest.raises(StreamClosed):
        await client.request("tools/call", {"name": "reconnect"}, resume=False)
    assert [n["params"]["data"] for n in client.last_notifications] == ["before close"]


def test_parser_dispatches_no_event_without_a_data_line():
    assert parse_sse(b"id: s:1\n\ndata: x\n\n") == [SSEEvent("x")]


def test_the_test_settings_hash_passwords_fast() -> None:
    # PBKDF2 cost a third of a second per created user; the in-process suite creates hundreds.
    from django.conf import settings
    from django.contrib.auth.hashers import get_hasher

    assert get_hasher().algorithm == "md5", settings.PASSWORD_HASHERS
