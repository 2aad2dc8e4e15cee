"""The shipped in-process client, ``mcp_django.testing``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_django.protocol.errors import INVALID_PARAMS
from mcp_django.protocol.sse import encode_comment, encode_event
from mcp_django.testing import JSONRPCErrorResponse, MCPTestClient, Response, SSEComment, SSEEvent, SSEParser, parse_sse
from tests.fuzzing import examples
from tests.protocol import strategies as s

# --- SSE parsing --------------------------------------------------------------------------


def test_parser_reads_events_comments_ids_and_retry():
    raw = b"id: s:0\nretry: 1000\ndata:\n\n: keep-alive\n\nid: s:1\ndata: {\"a\": 1}\n\n"
    assert parse_sse(raw) == [
        SSEEvent("", "s:0", None, 1000),
        SSEComment("keep-alive"),
        SSEEvent('{"a": 1}', "s:1"),
    ]


def test_parser_joins_multi_line_data():
    assert parse_sse(b"data: one\ndata: two\n\n") == [SSEEvent("one\ntwo")]


def test_parser_keeps_an_unfinished_event_for_the_next_chunk():
    parser = SSEParser()
    assert parser.feed(b"id: s:1\nda") == []
    assert parser.feed(b"ta: x\n") == []
    assert parser.feed(b"\n") == [SSEEvent("x", "s:1")]


def test_parser_handles_crlf_split_across_chunks():
    parser = SSEParser()
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\n\r\n") == [SSEEvent("x")]


def test_parser_handles_utf8_split_across_chunks():
    raw = "data: caf\u00e9\n\n".encode()
    parser = SSEParser()
    cut = raw.index(b"\xa9")
    assert parser.feed(raw[:cut]) == []
    assert parser.feed(raw[cut:]) == [SSEEvent("caf\u00e9")]


@settings(max_examples=examples(100), deadline=None)
@given(datas=st.lists(s.sse_text, min_size=1, max_size=4), cuts=st.lists(st.integers(0, 400), max_size=6))
def test_parser_reads_what_the_server_encodes_whatever_the_chunking(datas, cuts):
    raw = b"".join(encode_event(d, event_id=f"s:{i}") + encode_comment() for i, d in enumerate(datas))
    parser = SSEParser()
    items = []
    last = 0
    for cut in sorted(c for c in cuts if c < len(raw)):
        items += parser.feed(raw[last:cut])
        last = cut
    items += parser.feed(raw[last:])
    events = [i for i in items if isinstance(i, SSEEvent)]
    assert [e.data for e in events] == [d.replace("\r\n", "\n").replace("\r", "\n") for d in datas]
    assert [e.id for e in events] == [f"s:{i}" for i in range(len(datas))]
    assert sum(isinstance(i, SSEComment) for i in items) == len(datas)


def test_response_messages_reads_json_and_sse_bodies():
    json_response = Response(200, {"content-type": "application/json"}, b'{"jsonrpc":"2.0","id":1,"result":{}}')
    sse_response = Response(200, {"content-type": "text/event-stream"}, b'id: s:0\ndata:\n\nid: s:1\ndata: {"id":1}\n\n')
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
        return {"role": "assistant", "content": {"type": "text", "text": "Because."}, "model": "test"}

    client = MCPTestClient(
        request_handlers={"sampling/createMessage": sample, "elicitation/create": lambda params: {"action": "accept", "content": {"ok": True}}}
    )
    await client.initialize(capabilities={"sampling": {}, "elicitation": {"form": {}}})
    result = await client.call_tool("ask", {"question": "Why?"})
    assert result["content"][0]["text"] == "Because. / accept {'ok': True}"
    assert [r["method"] for r in client.last_server_requests] == ["sampling/createMessage", "elicitation/create"]


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
