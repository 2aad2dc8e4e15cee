"""The in-memory channel layer of the embedded default: expiry costs what is pending, not what
is open, and behaves as Channels' own."""

from __future__ import annotations

import asyncio

import pytest

from mcp_django.transport.layers import InMemoryChannelLayer


@pytest.fixture
def layer() -> InMemoryChannelLayer:
    layer = InMemoryChannelLayer(expiry=60, capacity=100)
    layer.sweep_interval = 0.0  # sweep on every call, to test what a sweep does
    return layer


async def test_messages_reach_a_waiting_receiver_and_leave_no_backlog(
    layer: InMemoryChannelLayer,
) -> None:
    channels = [await layer.new_channel() for _ in range(50)]
    for name in channels:
        await layer.group_add("g", name)
    receivers = [asyncio.ensure_future(layer.receive(name)) for name in channels]
    await asyncio.sleep(0)
    await layer.group_send("g", {"type": "x", "n": 1})
    assert [m["n"] for m in await asyncio.gather(*receivers)] == [1] * 50
    assert layer._backlog == {}
    assert layer.channels == {}


async def test_a_message_handed_to_a_receiver_cancelled_at_that_moment_is_kept(
    layer: InMemoryChannelLayer,
) -> None:
    name = await layer.new_channel()
    receiver = asyncio.ensure_future(layer.receive(name))
    await asyncio.sleep(0)
    await layer.send(name, {"type": "x", "n": 1})  # handed to the waiting receiver...
    receiver.cancel()  # ...which is cancelled before it runs again
    await asyncio.gather(receiver, return_exceptions=True)
    assert receiver.cancelled()
    assert (await layer.receive(name))["n"] == 1
    assert layer.channels == {} and layer._backlog == {}


async def test_capacity_and_expiry_behave_as_channels_own(layer: InMemoryChannelLayer) -> None:
    from channels.exceptions import ChannelFull

    small = InMemoryChannelLayer(capacity=2)
    name = await small.new_channel()
    await small.send(name, {"type": "a"})
    await small.send(name, {"type": "b"})
    with pytest.raises(ChannelFull):
        await small.send(name, {"type": "c"})
    await small.group_add("g", name)
    await small.group_send("g", {"type": "d"})  # a full member misses it, no error
    assert [(await small.receive(name))["type"] for _ in range(2)] == ["a", "b"]


async def test_idle_receivers_are_not_in_the_backlog(layer: InMemoryChannelLayer) -> None:
    # Thousands of open streams wait on empty channels: a sweep must not visit them.
    names = [await layer.new_channel() for _ in range(1000)]
    waiting = [asyncio.ensure_future(layer.receive(name)) for name in names]
    await asyncio.sleep(0)
    await layer.send(names[0], {"type": "x"})
    await asyncio.sleep(0)
    assert set(layer._backlog) <= {names[0]}
    await waiting[0]
    assert layer._backlog == {}
    for task in waiting[1:]:
        task.cancel()
    await asyncio.gather(*waiting[1:], return_exceptions=True)


async def test_an_expired_message_drops_its_channel_from_its_groups_only(
    layer: InMemoryChannelLayer,
) -> None:
    stale, live = await layer.new_channel(), await layer.new_channel()
    for group in ("a", "b"):
        await layer.group_add(group, stale)
        await layer.group_add(group, live)
    await layer.send(stale, {"type": "old"})
    layer.channels[stale].messages[0] = (
        0.0,
        layer.channels[stale].messages[0][1],
    )  # expired long ago
    layer._clean_expired()
    assert stale not in layer.channels and stale not in layer._backlog
    assert layer.groups == {
        "a": {live: layer.groups["a"][live]},
        "b": {live: layer.groups["b"][live]},
    }
    assert stale not in layer._memberships and layer._memberships[live] == {"a", "b"}


async def test_group_memberships_expire_on_the_group_sweep(layer: InMemoryChannelLayer) -> None:
    name = await layer.new_channel()
    await layer.group_add("g", name)
    layer.groups["g"][name] = 1.0  # joined in 1970
    layer.group_sweep_interval = 0.0
    layer._clean_expired()
    assert layer.groups == {} and layer._memberships == {}


async def test_discard_and_flush_keep_the_index_in_step(layer: InMemoryChannelLayer) -> None:
    name = await layer.new_channel()
    await layer.group_add("g", name)
    await layer.group_add("h", name)
    await layer.group_discard("g", name)
    assert layer._memberships == {name: {"h"}} and set(layer.groups) == {"h"}
    await layer.send(name, {"type": "x"})
    await layer.flush()
    assert (
        layer._memberships == {}
        and layer._backlog == {}
        and layer.groups == {}
        and layer.channels == {}
    )


async def test_receive_later_is_a_bare_future_the_next_message_resolves(
    layer: InMemoryChannelLayer,
) -> None:
    name = await layer.new_channel()
    waiter = layer.receive_later(name)
    assert not waiter.done()
    await layer.send(name, {"type": "x", "n": 1})
    assert waiter.result()["n"] == 1
    await layer.send(name, {"type": "x", "n": 2})  # waits in the channel: nobody receives
    assert layer.receive_later(name).result()["n"] == 2
    layer.discard_receive(name, None)
    assert layer.channels == {} and layer._backlog == {}


async def test_a_discarded_receive_forgets_the_channel_and_keeps_a_message_it_was_handed(
    layer: InMemoryChannelLayer,
) -> None:
    name = await layer.new_channel()
    layer.discard_receive(name, layer.receive_later(name))
    assert layer.channels == {}
    handed = layer.receive_later(name)
    await layer.send(name, {"type": "x", "n": 1})
    layer.discard_receive(name, handed)  # handed over, never dispatched: back to the channel
    assert (await layer.receive(name))["n"] == 1
    assert layer.channels == {}
