"""The process channel's listener: how a process hears of session changes and cancels. It must
outlive a failed receive (a restarted Redis, a socket timeout), or the process stops hearing."""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

import pytest

from mcp_django.db import is_unreachable
from mcp_django.stores import session_cache
from mcp_django.transport import process
from mcp_django.transport.process import ProcessChannel
from tests.polling import until


class FlakyLayer:
    """Fails its first receive, then delivers one session change, then waits forever."""

    def __init__(self) -> None:
        self.receives = 0

    async def receive(self, channel: str) -> dict[str, Any]:
        self.receives += 1
        if self.receives == 1:
            raise ConnectionError("Timeout reading from 127.0.0.1:6379")
        if self.receives == 2:
            return {"type": "mcp.session.changed", "session": "s-1"}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_the_listener_logs_a_failed_receive_and_listens_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    layer = FlakyLayer()
    dropped: list[str] = []
    monkeypatch.setattr(process, "get_layer", lambda: layer)
    monkeypatch.setattr(ProcessChannel, "RETRY_SECONDS", 0.0)
    monkeypatch.setattr(session_cache, "drop", dropped.append)
    channel = ProcessChannel()
    channel.joined_at = 1.0
    with caplog.at_level(logging.WARNING, logger="mcp_django.transport"):
        task = asyncio.get_running_loop().create_task(channel.listen("process-channel"))
        await until(
            lambda: dropped, failure="the listener heard no change after the failed receive"
        )  # it runs on this loop
    try:
        assert dropped == ["s-1"]  # the change after the failure was heard
        assert not task.done()
        assert channel.joined_at is None  # the next request joins the sessions' group again
        assert any("could not receive" in r.getMessage() for r in caplog.records)
    finally:
        task.cancel()


class SilentLayer:
    """A channel layer cut off without a word (a partition): its group_add never answers, until
    ``answering`` is set."""

    def __init__(self) -> None:
        self.answering = False
        self.joined: list[str] = []

    async def group_add(self, group: str, channel: str) -> None:
        if not self.answering:
            await asyncio.Event().wait()
        self.joined.append(group)


async def test_a_join_that_hangs_fails_the_request_within_its_bound_and_the_next_request_joins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    layer = SilentLayer()
    monkeypatch.setattr(process, "get_layer", lambda: layer)
    monkeypatch.setattr(ProcessChannel, "JOIN_TIMEOUT", 0.05)
    channel = ProcessChannel()
    # A listener already running, as in a process that served requests before the partition.
    loop = asyncio.get_running_loop()
    channel.channel, channel.loop, channel.task = (
        "process-channel",
        loop,
        loop.create_task(asyncio.Event().wait()),
    )
    try:
        with pytest.raises(TimeoutError) as failed:
            await asyncio.wait_for(channel.ensure(), 5)
        assert is_unreachable(failed.value)  # answered 503 with Retry-After, not 500
        assert channel.joined_at is None
        layer.answering = True
        assert await asyncio.wait_for(channel.ensure(), 5) == "process-channel"
        assert layer.joined == [process.SESSIONS_GROUP]
        assert channel.joined_at is not None
    finally:
        channel.task.cancel()


async def test_on_redis_an_idle_receive_outlasts_the_blocking_receive_with_a_longer_socket_timeout() -> (
    None
):
    """The configuration mcp_django.W006 asks for: the socket timeout longer than channels_redis's
    blocking receive. (Scaled down: a 1 s receive and a 2 s timeout, idle for three seconds.)"""
    from channels_redis.core import RedisChannelLayer

    from tests.multiprocess.servers import RedisDatabase, require_redis

    require_redis()
    database = RedisDatabase()
    database.claim()
    layer = RedisChannelLayer(
        hosts=[{"address": database.url, "socket_timeout": 2}],
        prefix=f"test-{secrets.token_hex(6)}",
    )
    layer.brpop_timeout = 1
    try:
        channel = await layer.new_channel()
        with pytest.raises(asyncio.TimeoutError):  # ours: nothing came, and the layer never failed
            await asyncio.wait_for(layer.receive(channel), 3.5)
        await layer.send(channel, {"type": "still.listening"})
        assert (await asyncio.wait_for(layer.receive(channel), 3))["type"] == "still.listening"
    finally:
        await layer.flush()
        await layer.close_pools()
        database.release()
