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


async def test_registering_a_tool_at_run_time_announces_tools_list_changed(client) -> None:
    from mcp_django.sites import site

    async with await client.open_stream() as stream:
        await stream.next_event()  # priming
        site.tool(name="late_tool")(lambda: "late")
        try:
            message = await stream.next_message(timeout=5)
        finally:
            site.unregister("tool", "late_tool")
    assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


async def test_a_permission_change_tells_that_users_sessions_their_lists_changed() -> None:
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import Permission
    from django.test import override_settings

    from mcp_django.testing import MCPTestClient
    from tests.conftest import BASE_SETTINGS, make_user

    user = await sync_to_async(make_user)("carol")
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django"}):
        client = MCPTestClient()
        await client.force_login(user)
        await client.initialize()
        async with await client.open_stream() as stream:
            await stream.next_event()  # priming
            permission = await Permission.objects.aget(codename="add_note")
            await sync_to_async(user.user_permissions.add)(permission)
            kinds = {(await stream.next_message(timeout=5))["method"] for _ in range(3)}
    assert kinds == {"notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed"}
