"""The pipelined group operations of transport/layers.py, on a real Redis through channels_redis
and on the in-memory layer: the same outcome as the layer's own group_add, group_discard and
group_send, in fewer round trips on Redis."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcp_django.transport import layers
from mcp_django.transport.layers import (
    InMemoryChannelLayer,
    group_add_many,
    group_discard_many,
    group_send,
)


@pytest.fixture(params=["lean connection", "channels_redis's client"])
async def redis_layer(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    """channels_redis on a real Redis; the helpers' round trips on mcp_django.redis_wire's lean
    connection, or (where it cannot serve the host) on channels_redis's own client."""
    from channels_redis.core import RedisChannelLayer

    if request.param != "lean connection":
        monkeypatch.setattr(layers, "_wire", lambda layer, index: None)

    from tests.multiprocess.servers import RedisDatabase, require_redis

    require_redis()
    # A database of its own, claimed as the multi-process tests claim theirs (and flushed after).
    database = RedisDatabase()
    database.claim()
    layer = RedisChannelLayer(
        hosts=[database.url], prefix=f"test-{secrets.token_hex(6)}", capacity=2
    )
    try:
        yield layer
    finally:
        await layer.flush()
        await layers.aclose_wires(layer)
        await layer.close_pools()
        database.release()


class CountingPipelines:
    """Counts the round trips to the layer's Redis: the helpers' own (layers._execute, on the
    lean connection or channels_redis's client) and any command of channels_redis's client
    made outside them."""

    def __init__(self, layer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.trips = 0
        self.inside = False
        client = layer.connection(0)
        execute_command = client.execute_command
        pipeline = client.pipeline
        execute = layers._execute

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.trips += 1
            self.inside = True
            try:
                return await execute(*args, **kwargs)
            finally:
                self.inside = False

        async def counted_command(*args: Any, **kwargs: Any) -> Any:
            self.trips += not self.inside
            return await execute_command(*args, **kwargs)

        def counted_pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = pipeline(*args, **kwargs)
            execute = pipe.execute

            async def counted_execute(*a: Any, **k: Any) -> Any:
                self.trips += not self.inside
                return await execute(*a, **k)

            pipe.execute = counted_execute
            return pipe

        monkeypatch.setattr(layers, "_execute", counted)
        monkeypatch.setattr(client, "execute_command", counted_command)
        monkeypatch.setattr(client, "pipeline", counted_pipeline)


async def receive(layer: Any, channel: str) -> dict[str, Any]:
    message = await asyncio.wait_for(layer.receive(channel), 5)
    # After a receive, channels_redis pops its backup queue in a task of its own: let it finish,
    # or its round trip is counted against the next operation.
    cleaners = list(getattr(layer, "receive_cleaners", ()))
    if cleaners:
        await asyncio.wait(cleaners)
    return message


async def test_on_redis_joins_sends_and_leaves_like_the_layer_in_fewer_round_trips(
    redis_layer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert layers._redis_layer(redis_layer)
    first, second = await redis_layer.new_channel(), await redis_layer.new_channel()
    counting = CountingPipelines(redis_layer, monkeypatch)

    await group_add_many(redis_layer, ["mcp.stream.a", "mcp.session.s"], first)
    assert counting.trips == 1  # channels_redis: two per group
    await group_add_many(redis_layer, ["mcp.session.s"], second)

    counting.trips = 0
    await group_send(redis_layer, "mcp.session.s", {"type": "mcp.event", "seq": 1, "payload": "x"})
    assert counting.trips == 2  # channels_redis: four
    assert (await receive(redis_layer, first))["seq"] == 1
    assert (await receive(redis_layer, second))["seq"] == 1

    await group_send(redis_layer, "mcp.stream.a", {"type": "mcp.event", "seq": 2, "payload": "y"})
    assert (await receive(redis_layer, first))["payload"] == "y"

    counting.trips = 0
    await group_discard_many(redis_layer, ["mcp.stream.a", "mcp.session.s"], first)
    assert counting.trips == 1
    await group_send(redis_layer, "mcp.session.s", {"type": "mcp.event", "seq": 3, "payload": "z"})
    assert (await receive(redis_layer, second))["seq"] == 3
    # The first channel left both groups: nothing more reaches it, and a send to an empty group
    # is one round trip that finds nobody.
    counting.trips = 0
    await group_send(redis_layer, "mcp.stream.a", {"type": "mcp.event", "seq": 4, "payload": "w"})
    assert counting.trips == 1
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(redis_layer.receive(first), 0.3)


async def test_on_redis_a_full_channel_misses_a_group_message_as_with_the_layer_s_own(
    redis_layer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # channels_redis' capacity (2 here) holds for the pipelined send too: the third is dropped,
    # and logged as the layer logs it.
    channel = await redis_layer.new_channel()
    await group_add_many(redis_layer, ["g"], channel)
    with caplog.at_level(logging.INFO, logger="mcp_django.transport"):
        for seq in range(3):
            await group_send(redis_layer, "g", {"type": "mcp.event", "seq": seq})
    assert [r.getMessage() for r in caplog.records] == ["1 of 1 channels over capacity in group g"]
    assert [(await receive(redis_layer, channel))["seq"] for _ in range(2)] == [0, 1]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(redis_layer.receive(channel), 0.3)


async def test_on_redis_group_names_are_checked_as_the_layer_checks_them(redis_layer: Any) -> None:
    channel = await redis_layer.new_channel()
    with pytest.raises(TypeError):
        await group_add_many(redis_layer, ["not a valid group!"], channel)


async def test_any_other_layer_gets_its_own_calls() -> None:
    layer = InMemoryChannelLayer()
    assert not layers._redis_layer(layer)
    channel = await layer.new_channel()
    await group_add_many(layer, ["a", "b"], channel)
    assert set(layer.groups) == {"a", "b"}
    await group_send(layer, "b", {"type": "mcp.event", "seq": 1})
    assert (await layer.receive(channel))["seq"] == 1
    await group_discard_many(layer, ["a", "b"], channel)
    assert layer.groups == {}


async def test_on_redis_a_member_with_an_inbox_in_this_process_is_handed_its_message_in_memory(
    redis_layer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    local, remote = await redis_layer.new_channel(), await redis_layer.new_channel()
    joined = ["mcp.stream.b"]
    inbox = layers.open_inbox(redis_layer, local, joined)
    assert inbox is not None
    try:
        await group_add_many(redis_layer, ["mcp.stream.b"], local)
        await group_add_many(redis_layer, ["mcp.stream.b"], remote)
        counting = CountingPipelines(redis_layer, monkeypatch)
        message = {"type": "mcp.events", "events": [[1, "x", False]]}
        await group_send(redis_layer, "mcp.stream.b", message)
        assert counting.trips == 2  # the members read, then the send to the one without an inbox
        handed = await asyncio.wait_for(inbox.get(), 1)
        assert handed == message and handed is not message  # a copy of its own
        assert (await receive(redis_layer, remote)) == message
        # Nothing for the local channel went through Redis.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(redis_layer.receive(local), 0.3)

        # Only members: no inbox in the group, then one round trip and nothing sent on.
        await group_discard_many(redis_layer, ["mcp.stream.b"], remote)
        counting.trips = 0
        await group_send(redis_layer, "mcp.stream.b", {"type": "mcp.event", "seq": 2})
        assert counting.trips == 1
        assert (await asyncio.wait_for(inbox.get(), 1))["seq"] == 2

        # A receiver waiting on the inbox is woken by the message.
        waiting = asyncio.ensure_future(inbox.get())
        await asyncio.sleep(0)
        await group_send(redis_layer, "mcp.stream.b", {"type": "mcp.event", "seq": 3})
        assert (await asyncio.wait_for(waiting, 1))["seq"] == 3

        # Past the layer's capacity (2 here) the oldest go, as a full channel drops them.
        for seq in range(4, 8):
            await group_send(redis_layer, "mcp.stream.b", {"type": "mcp.event", "seq": seq})
        assert [(await inbox.get())["seq"] for _ in range(2)] == [6, 7]
    finally:
        layers.close_inbox(local)
    # Closed: the channel's messages go through Redis again.
    await group_send(redis_layer, "mcp.stream.b", {"type": "mcp.event", "seq": 8})
    assert (await receive(redis_layer, local))["seq"] == 8


async def test_only_channels_redis_gives_inboxes() -> None:
    layer = InMemoryChannelLayer()
    assert layers.open_inbox(layer, await layer.new_channel(), []) is None


async def test_on_redis_a_streams_last_message_takes_this_process_members_out_in_its_own_round_trip(
    redis_layer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    local, remote = await redis_layer.new_channel(), await redis_layer.new_channel()
    joined = ["mcp.stream.c", "mcp.session.c"]  # as a consumer lists them, before it joins
    inbox = layers.open_inbox(redis_layer, local, joined)
    assert inbox is not None
    try:
        await group_add_many(redis_layer, joined, local)
        await group_add_many(redis_layer, ["mcp.stream.c"], remote)
        counting = CountingPipelines(redis_layer, monkeypatch)
        await group_send(redis_layer, "mcp.stream.c", {"type": "mcp.event", "seq": 1})
        assert joined == ["mcp.stream.c", "mcp.session.c"]  # not the last one: nobody leaves
        counting.trips = 0
        message = {"type": "mcp.events", "events": [[2, "x", True]]}
        await group_send(redis_layer, "mcp.stream.c", message, last=True)
        # Same round trips as any message: the leave rode on the members read.
        assert counting.trips == 2
        # Every member still got the last message...
        assert (await asyncio.wait_for(inbox.get(), 1))["seq"] == 1
        assert await asyncio.wait_for(inbox.get(), 1) == message
        assert (await receive(redis_layer, remote))["seq"] == 1
        assert await receive(redis_layer, remote) == message
        # ...and the local one is out of both its groups, its consumer's list with it, so its
        # way out makes no round trip. The member of another process stays.
        assert joined == []
        assert layers._local_members.get("mcp.stream.c") is None
        client = redis_layer.connection(0)
        stream_members = await client.zrange(redis_layer._group_key("mcp.stream.c"), 0, -1)
        assert stream_members == [remote.encode()]
        assert await client.zrange(redis_layer._group_key("mcp.session.c"), 0, -1) == []
        counting.trips = 0
        await group_discard_many(redis_layer, joined, local)
        assert counting.trips == 0
    finally:
        layers.close_inbox(local)
    assert "mcp.stream.c" not in layers._local_members
    assert local not in layers._inboxes
