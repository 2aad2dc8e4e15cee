"""The 2024-11-05 HTTP+SSE transport in-process: its refusals and its switch (the flows run live
in tests/e2e/test_http_sse.py and across processes in tests/multiprocess)."""

from __future__ import annotations

import orjson
import pytest

from mcp_django.models import Session
from mcp_django.ops.quotas import limits as quotas
from mcp_django.registry.sites import site
from mcp_django.testing import MCPTestClient
from mcp_django.transport.legacy_sse import HTTPSSEConsumer
from tests.polling import until
from tests.test_quotas import INITIALIZE, limits
from tests.test_running_caps import Held, hold_call
from tests.test_running_caps import held as held  # the fixture

from .conftest import mcp_settings

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]


def client(kind: str) -> MCPTestClient:
    return MCPTestClient(HTTPSSEConsumer.as_asgi(site=site, kind=kind), path=f"/mcp/{kind}/")


async def test_the_stream_names_the_session_to_post_to_and_is_the_session():
    async with await client("sse").open_stream() as stream:
        event = await stream.next_event()
        assert event.event == "endpoint"
        assert event.data.startswith("/mcp/messages/?session_id=")
        session = await Session.objects.aget(pk=event.data.rpartition("=")[2])
        assert session.transport == "sse" and session.terminated_at is None
    await session.arefresh_from_db()
    assert session.terminated_at is not None  # closing the stream ends the session


async def test_under_a_root_path_the_stream_names_the_messages_path_with_it_once():
    # uvicorn's --root-path /app: the scope's path already starts with root_path.
    sse = MCPTestClient(
        HTTPSSEConsumer.as_asgi(site=site, kind="sse"), path="/mcp/sse/", root_path="/app"
    )

    async with await sse.open_stream() as stream:
        event = await stream.next_event()

    assert event.data.startswith("/app/mcp/messages/?session_id=")


async def test_refusals():
    assert (await client("messages").send("GET")).status == 405
    assert (await client("sse").post({"jsonrpc": "2.0", "id": 1, "method": "ping"})).status == 405
    missing = await client("messages").post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert missing.status == 400 and "session_id" in missing.json()["error"]["message"]
    unknown = await client("messages").post_raw(
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}', path="/mcp/messages/?session_id=nope"
    )
    assert unknown.status in (400, 404)


async def test_it_can_be_turned_off():
    with mcp_settings(HTTP_SSE=False):
        response = await client("sse").send("GET", headers={"accept": "text/event-stream"})
    assert response.status == 404
    assert "HTTP_SSE" in response.json()["error"]["message"]


async def test_a_malformed_post_is_refused_and_the_session_goes_on():
    async with await client("sse").open_stream() as stream:
        endpoint = (await stream.next_event()).data
        messages = client("messages")
        bad = await messages.post_raw(b"{nope", path=endpoint)
        assert bad.status == 400 and bad.json()["error"]["code"] == -32700
        wrong_type = await messages.post_raw(
            b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
            {"content-type": "text/plain"},
            path=endpoint,
        )
        assert wrong_type.status == 415
        ping = await messages.post_raw(b'{"jsonrpc":"2.0","id":2,"method":"ping"}', path=endpoint)
        assert ping.status == 202
        assert (await stream.next_message()) == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_closing_the_stream_cancels_the_sessions_running_calls_and_gives_back_their_slots(
    held: Held,
) -> None:
    # The stream is the session: a client that drops it cannot resume it (this transport has no
    # Last-Event-ID), so its calls are cancelled at once and stop counting against the caps.
    with limits(RUNNING_PER_SESSION=2):
        stream = await client("sse").open_stream()
        endpoint = (await stream.next_event()).data
        session_id = endpoint.rpartition("=")[2]
        messages = client("messages")
        for message in (
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            hold_call("held", tool="hold", request_id=1),
        ):
            assert (await messages.post_raw(orjson.dumps(message), path=endpoint)).status == 202
        await held.wait_for("started", 1)
        assert quotas.running_requests("RUNNING_PER_SESSION", f"session:{session_id}") == 1
        await stream.close()
        await held.wait_for("cancelled", 1)
        await until(
            lambda: quotas.running_requests("RUNNING_PER_SESSION", f"session:{session_id}") == 0
        )
    assert held.cancelled == ["held"]
    assert (await Session.objects.aget(pk=session_id)).terminated_at is not None
