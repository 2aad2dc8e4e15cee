"""dispatch_many: what channels' await_many_dispatch does for an open stream, on fewer objects."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_django.transport.dispatch import dispatch_many
from mcp_django.transport.layers import InMemoryChannelLayer


class Stop(Exception):
    pass


async def test_messages_are_dispatched_one_at_a_time_from_every_source() -> None:
    layer = InMemoryChannelLayer()
    name = await layer.new_channel()
    client: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    seen: list[str] = []
    busy = False

    async def dispatch(message: dict[str, Any]) -> None:
        nonlocal busy
        assert not busy, "one message at a time"
        busy = True
        seen.append(message["type"])
        await asyncio.sleep(0.01)
        busy = False
        if message["type"] == "http.disconnect":
            raise Stop

    task = asyncio.ensure_future(dispatch_many([client.get, layer.source(name)], dispatch))
    await asyncio.sleep(0)
    await layer.send(name, {"type": "mcp.event"})
    await layer.send(name, {"type": "mcp.start"})
    await asyncio.sleep(0)
    client.put_nowait({"type": "http.disconnect"})  # waits for the dispatch under way
    with pytest.raises(Stop):
        await task
    assert seen[0] == "mcp.event" and "http.disconnect" in seen
    # The channel's last future went back to the layer: nothing is left waiting on it.
    assert layer.channels.get(name) is None or not layer.channels[name].waiters


async def test_cancelling_the_consumer_cancels_every_pending_receive() -> None:
    layer = InMemoryChannelLayer()
    name = await layer.new_channel()
    client: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def dispatch(message: dict[str, Any]) -> None:
        pass

    task = asyncio.ensure_future(dispatch_many([client.get, layer.source(name)], dispatch))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert layer.channels == {}
    assert not client._getters  # type: ignore[attr-defined]  # the client's receive was cancelled
