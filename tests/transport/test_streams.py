"""Streams and dead clients: nothing is left behind, and nothing a full channel drops is lost."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer
from django.db import DatabaseError

from mcp_django.models import Event
from mcp_django.protocol.jsonrpc import encode, notification_message
from mcp_django.stores import DatabaseEventStore, StoredEvent, get_event_store
from mcp_django.transport.layers import GET_STREAM, get_stream_group, session_group
from mcp_django.transport.process import RUNNING
from mcp_django.transport.streams import GroupCommit

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
        payloads = [
            encode(
                notification_message("notifications/message", {"level": "info", "data": n})
            ).decode()
            for n in (1, 2, 3)
        ]
        for payload in payloads:
            await store.aappend(client.session_id, GET_STREAM, payload)
        # Only the last announcement arrives, as if the first two were dropped by a full channel.
        await layer.group_send(
            get_stream_group(client.session_id),
            {"type": "mcp.event", "seq": 3, "payload": payloads[2], "closes": False},
        )
        received = [await stream.next_event() for _ in range(3)]
    assert [e.id for e in received] == [f"{GET_STREAM}:1", f"{GET_STREAM}:2", f"{GET_STREAM}:3"]
    assert [e.json()["params"]["data"] for e in received] == [1, 2, 3]


async def test_registering_a_tool_at_run_time_announces_tools_list_changed(client) -> None:
    from mcp_django.registry.sites import site

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
    assert kinds == {
        "notifications/tools/list_changed",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    }


class RecordingStore(DatabaseEventStore):
    """The database store, noting which streams each write held."""

    def __init__(self) -> None:
        self.writes: list[list[str]] = []

    def append_many(self, session_id: str, stream: str, events: list[StoredEvent]) -> None:
        self.writes.append([stream])
        super().append_many(session_id, stream, events)

    def append_streams(self, batches: list[tuple[str, str, list[StoredEvent]]]) -> None:
        self.writes.append([stream for _, stream, _ in batches])
        self._insert(batches)


class FailingStore(DatabaseEventStore):
    """The database store, failing every write of the stream named "bad"."""

    def append_many(self, session_id: str, stream: str, events: list[StoredEvent]) -> None:
        if stream == "bad":
            raise DatabaseError("this stream cannot be written")
        super().append_many(session_id, stream, events)


def _answer(n: int) -> list[StoredEvent]:
    return [StoredEvent(1, encode({"jsonrpc": "2.0", "id": n, "result": {}}).decode(), True)]


async def _stored_streams(session_id: str) -> list[str]:
    return sorted(
        [
            stream
            async for stream in Event.objects.filter(session_id=session_id).values_list(
                "stream", flat=True
            )
        ]
    )


async def test_streams_stored_while_a_write_runs_share_the_next_write(client) -> None:
    store, commit = RecordingStore(), GroupCommit()
    await asyncio.gather(
        *(commit.store(store, client.session_id, f"s{n}", _answer(n), []) for n in range(3))
    )
    # The first is written at once, the two that came while it ran in one write after it.
    assert store.writes == [["s0"], ["s1", "s2"]]
    assert await _stored_streams(client.session_id) == ["s0", "s1", "s2"]


async def test_a_write_that_fails_fails_only_its_own_stream(client) -> None:
    commit = GroupCommit()
    results = await asyncio.gather(
        *(
            commit.store(FailingStore(), client.session_id, stream, _answer(n), [])
            for n, stream in enumerate(["s0", "s1", "bad"])
        ),
        return_exceptions=True,
    )
    assert results[:2] == [None, None]
    assert isinstance(results[2], DatabaseError)
    # The failed group write left nothing behind: the other stream is stored once, from its retry.
    assert await _stored_streams(client.session_id) == ["s0", "s1"]
