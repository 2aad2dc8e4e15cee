"""Property tests against the live in-process endpoint: whatever a client sends, the answer is a
well-formed HTTP response with a 2xx or 4xx status, never a 5xx and never a hang.

Every exchange is bounded by the client's timeout, so a hang fails the example instead of the
suite. Examples share one session (the health check for function-scoped fixtures is silenced
on purpose): nothing sent here can end it, since the tests never send DELETE.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcp_django.testing import MCPTestClient, Response
from tests.fuzzing import examples
from tests.protocol import strategies as s

pytestmark = pytest.mark.django_db(transaction=True)

FUZZ = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# What a server hands the application: bytes without CR, LF or NUL, read as latin-1.
raw_header_values = (
    (st.binary(max_size=80) | s.header_text.map(lambda text: text.encode("utf-8")))
    .filter(lambda b: not any(c in b for c in b"\r\n\0"))
    .map(lambda b: b.decode("latin-1"))
)

# Methods the server knows, with tools that finish on their own (no client round trips).
KNOWN_METHODS = [
    "ping",
    "initialize",
    "logging/setLevel",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
]
SAFE_TOOLS = ["add", "echo", "fail", "crash"]


@st.composite
def known_method_messages(draw: st.DrawFn) -> dict[str, Any]:
    """Requests and notifications for real methods, with arbitrary params."""
    method = draw(st.sampled_from(KNOWN_METHODS))
    params: dict[str, Any] = draw(s.json_objects)
    if method == "tools/call" and draw(st.booleans()):
        params["name"] = draw(st.sampled_from(SAFE_TOOLS))
        params["arguments"] = draw(s.json_objects)
    elif method in ("resources/read", "resources/subscribe") and draw(st.booleans()):
        params["uri"] = draw(
            st.sampled_from(["test://hello", "test://items/"]).map(str) | s.header_text
        )
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not method.startswith("notifications/"):
        message["id"] = draw(s.request_ids)
    return message


def check_answer(response: Response) -> None:
    """A 2xx or 4xx; JSON bodies parse; error statuses carry a JSON-RPC error."""
    assert 200 <= response.status < 300 or 400 <= response.status < 500, (
        response.status,
        response.body[:300],
    )
    if response.status in (202, 204):
        assert response.body == b""
        return
    if response.is_sse:
        assert response.status == 200
        for event in response.events():
            if event.data:
                message = event.json()
                assert message["jsonrpc"] == "2.0"
        return
    if response.status == 404 and response.content_type != "application/json":
        return  # a path Django itself answers; not this endpoint
    assert response.content_type == "application/json", response.headers
    body = response.json()
    messages = body if isinstance(body, list) else [body]
    for message in messages:
        assert message["jsonrpc"] == "2.0"
        assert ("result" in message) != ("error" in message)
        if "error" in message:
            assert isinstance(message["error"]["code"], int)
            assert isinstance(message["error"]["message"], str)
    if response.status >= 400:
        assert isinstance(body, dict) and "error" in body


@pytest.fixture
async def client() -> MCPTestClient:
    client = MCPTestClient(timeout=10)
    await client.initialize()
    return client


@pytest.fixture
async def batch_client() -> MCPTestClient:
    client = MCPTestClient(timeout=10)
    await client.initialize(protocol_version="2025-03-26")
    return client


# --- bodies -------------------------------------------------------------------------------


@FUZZ
@given(body=s.arbitrary_bytes)
@example(body=b"")
@example(body=b"\xff\xfe")
@example(body=b"[" * 5000)
@example(body=b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}')
async def test_arbitrary_bytes_bodies_get_a_well_formed_answer(client, body):
    check_answer(await client.post_raw(body))


@FUZZ
@given(value=s.json_values())
async def test_arbitrary_json_bodies_get_a_well_formed_answer(client, value):
    check_answer(await client.post(value))


@FUZZ
@given(value=st.one_of(s.jsonrpc_ish(), st.lists(s.jsonrpc_ish(), min_size=1, max_size=4)))
async def test_jsonrpc_like_bodies_get_a_well_formed_answer(batch_client, value):
    check_answer(await batch_client.post(value))


@FUZZ
@given(message=known_method_messages())
async def test_known_methods_with_arbitrary_params_get_a_well_formed_answer(client, message):
    response = await client.post(message)
    check_answer(response)
    if "id" in message and response.status == 200:
        assert response.messages()[-1]["id"] == message["id"]


@FUZZ
@given(messages=st.lists(known_method_messages(), min_size=1, max_size=4))
async def test_batches_of_known_methods_get_a_well_formed_answer(batch_client, messages):
    check_answer(await batch_client.post(messages))


# --- headers ------------------------------------------------------------------------------


@FUZZ
@given(value=raw_header_values)
@example(value="")
@example(value=" ")
async def test_arbitrary_session_id_gets_a_well_formed_answer(client, value):
    check_answer(
        await client.post_raw(
            b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', {"mcp-session-id": value}
        )
    )


@FUZZ
@given(value=raw_header_values)
@example(value="2025-06-18 ")
async def test_arbitrary_protocol_version_gets_a_well_formed_answer(client, value):
    check_answer(
        await client.post_raw(
            b'{"jsonrpc":"2.0","id":1,"method":"ping"}', {"mcp-protocol-version": value}
        )
    )


@FUZZ
@given(
    value=s.origin_headers.map(lambda o: o.encode("utf-8", "replace").decode("latin-1"))
    | raw_header_values
)
@example(value="null")
@example(value="http://[::1")
async def test_arbitrary_origin_gets_a_well_formed_answer(client, value):
    if any(c in value for c in "\r\n\0"):
        return
    check_answer(
        await client.post_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', {"origin": value})
    )


@FUZZ
@given(
    value=s.accept_headers.map(lambda a: a.encode("utf-8", "replace").decode("latin-1"))
    | raw_header_values
)
async def test_arbitrary_accept_on_post_gets_a_well_formed_answer(client, value):
    if any(c in value for c in "\r\n\0"):
        return
    check_answer(
        await client.post_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', {"accept": value})
    )


async def open_and_check(client: MCPTestClient, headers: dict[str, str | None]) -> None:
    """Open a GET; a refused stream must be a well-formed error, an accepted one SSE.

    An accepted stream may stay silent (a resume with nothing to replay), so it is closed
    once its headers arrive.
    """
    stream = await client.open_stream(headers=headers)
    try:
        if stream.status == 200:
            assert stream.is_sse
        else:
            check_answer(Response(stream.status, stream.headers, stream.body))
    finally:
        await stream.close()


@FUZZ
@given(value=raw_header_values)
@example(value="get:0")
@example(value="get:99999999999999999")
@example(value=":1")
@example(value="get:\xb2")
async def test_arbitrary_last_event_id_gets_a_well_formed_answer(client, value):
    await open_and_check(client, {"last-event-id": value})


@FUZZ
@given(
    session_id=st.none() | raw_header_values,
    version=st.none() | raw_header_values,
    accept=st.none()
    | s.accept_headers.map(lambda a: a.encode("utf-8", "replace").decode("latin-1")),
)
async def test_arbitrary_headers_on_get_get_a_well_formed_answer(
    client, session_id, version, accept
):
    headers: dict[str, str | None] = {}
    if session_id is not None:
        headers["mcp-session-id"] = session_id
    if version is not None:
        headers["mcp-protocol-version"] = version
    if accept is not None:
        if any(c in accept for c in "\r\n\0"):
            return
        headers["accept"] = accept
    await open_and_check(client, headers)


def test_check_answer_rejects_server_errors():
    with pytest.raises(AssertionError):
        check_answer(
            Response(500, {"content-type": "application/json"}, orjson.dumps({"error": {}}))
        )
