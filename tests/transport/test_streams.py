"""Streams and dead clients: nothing is left behind, and nothing a full channel drops is lost."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer

from mcp_django.protocol.jsonrpc import encode, notification_message
from mcp_django.stores import get_event_store
from mcp_django.transport.layers import GET_STREAM, get_stream_group, session_group
from mcp_django.transport.process import RUNNING

pytestmark = pytest.mark.django_db(transaction=True)


def _members(group: str) -> dict:
    return get_channel_layer().groups.get(group, {})


async def test_a_client_that_goes_away_leaves_no_channel_group_behind(client) -> None:
    async with await client.open_stream() as stream:
        await stream.next_event()  # priming: the stream is held
        assert len(_members(get_stream_group(client.session_id))) == 1
        assert len(_members(session_group(client.session_id))) == 1
    # The disconnect ran the consumer's cleanup.
    assert _members(get_stream_group(client.session_id)) == {}
    assert _members(session_group(client.session_id)) == {}


async def test_a_finished_streamed_call_leaves_no_task_or_group(client) -> None:
    result = await client.call_tool("progress", {"steps": 2})
    assert result["content"][0]["text"] == "done 2"
    assert not [key for key in RUNNING if key[0] == client.session_id]
    assert _members(session_group(client.session_id)) == {}


async def test_events_a_full_channel_dropped_are_filled_from_the_store(client) -> None:
    store = get_event_store()
    layer = get_channel_layer()
    async with await client.open_stream() as stream:
        await stream.next_event()  # priming at sequence 0
        payloads = [encode(notification_message("notifications/message", {"level": "info", "data": n})).decode() for n in (1, 2, 3)]
        for payload in payloads:
            await store.aappend(client.session_id, GET_STREAM, payload)
        # Only the last announcement arrives, as if the first two were dropped by a full channel.
        await layer.group_send(get_stream_group(client.session_id), {"type": "mcp.event", "seq": 3, "payload": payloads[2], "closes": False})
        received = [await stream.next_event() for _ in range(3)]
    assert [e.id for e in received] == [f"{GET_STREAM}:1", f"{GET_STREAM}:2", f"{GET_STREAM}:3"]
    assert [e.json()["params"]["data"] for e in received] == [1, 2, 3]
