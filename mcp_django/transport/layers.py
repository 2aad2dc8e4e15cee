"""Channel-layer access and the group names that carry stream events between processes."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
import time
import weakref
from collections import deque
from collections.abc import Callable
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings

from ..conf import mcp_settings
from ..redis_wire import RedisWire, Wires

logger = logging.getLogger("mcp_django.transport")

#: The stream token of a session's standalone (GET) stream.
GET_STREAM = "get"


class _Channel:
    """One channel's undelivered messages (oldest first) and the receivers waiting on it. Small
    on purpose: an idle stream's channel is one of these with one waiter (a deque is 600 bytes
    empty, so messages get one only when they must wait)."""

    __slots__ = ("messages", "waiters")

    def __init__(self) -> None:
        self.messages: deque[tuple[float, dict[str, Any]]] | None = None
        self.waiters: list[asyncio.Future[dict[str, Any]]] = []


class LaterReceive:
    """One channel of the in-memory layer as a source of ``dispatch.dispatch_many``: each
    message a bare future (:meth:`InMemoryChannelLayer.receive_later`), the last one handed back
    on the way out (:meth:`InMemoryChannelLayer.discard_receive`)."""

    __slots__ = ("channel", "layer")

    def __init__(self, layer: InMemoryChannelLayer, channel: str) -> None:
        self.layer = layer
        self.channel = channel

    def __call__(self) -> asyncio.Future[dict[str, Any]]:
        return self.layer.receive_later(self.channel)

    def discard(self, waiter: asyncio.Future[dict[str, Any]] | None) -> None:
        self.layer.discard_receive(self.channel, waiter)


class InMemoryChannelLayer(BaseChannelLayer):  # type: ignore[misc]  # channels ships no type information
    """Channels' in-memory layer, rebuilt for many idle channels.

    Every open MCP stream is a channel with a receiver waiting on it and a member of two groups.
    The stock layer gave each such channel an ``asyncio.Queue`` (about 4 KB each: four deques and
    an Event), and walked every channel and every group membership on each send, receive and
    group_send, so memory and the cost of everything grew with the number of open streams
    (bench/: with 2,000 idle streams, tools/call fell from about 2,380 to 1,760 calls/s). Here a
    waiting receiver is a bare future that ``send`` hands the message to; messages wait in a
    deque only while nobody receives; expiry runs at most once a second over the channels that
    hold messages, an expired message leaves its channel's groups through a reverse index, and
    group memberships (which expire after a day by default) are swept once a minute. The API and
    its semantics are Channels' own (capacity, expiry, ``ChannelFull``, groups, flush).
    """

    extensions = ["groups", "flush"]
    sweep_interval = 1.0
    group_sweep_interval = 60.0

    def __init__(
        self,
        expiry: int = 60,
        group_expiry: int = 86400,
        capacity: int = 100,
        channel_capacity: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            expiry=expiry, capacity=capacity, channel_capacity=channel_capacity, **kwargs
        )
        self.group_expiry = group_expiry
        self.channels: dict[str, _Channel] = {}
        self.groups: dict[str, dict[str, float]] = {}
        self._last_sweep = 0.0
        self._last_group_sweep = time.monotonic()
        #: Channels holding messages nobody has received (an ordered set).
        self._backlog: dict[str, None] = {}
        #: channel -> the groups it is in.
        self._memberships: dict[str, set[str]] = {}

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._deliver(channel, message)

    def _deliver(self, channel: str, message: dict[str, Any]) -> None:
        entry = self.channels.get(channel)
        if entry is None:
            entry = self.channels[channel] = _Channel()
        while entry.waiters:
            waiter = entry.waiters.pop(0)
            if not waiter.done():
                waiter.set_result(deepcopy(message))
                return
        if entry.messages is None:
            entry.messages = deque()
        elif len(entry.messages) >= self.get_capacity(channel):
            raise ChannelFull(channel)
        entry.messages.append((time.time() + self.expiry, deepcopy(message)))
        self._backlog[channel] = None

    async def receive(self, channel: str) -> dict[str, Any]:
        waiter = self.receive_later(channel)
        try:
            message = await waiter
        except asyncio.CancelledError:
            # A message handed over just as this receiver was cancelled stays for the next one.
            self.discard_receive(channel, waiter)
            raise
        self.discard_receive(channel, None)
        return message

    def receive_later(self, channel: str) -> asyncio.Future[dict[str, Any]]:
        """:meth:`receive` as a bare future, for a consumer following several sources
        (``dispatch.dispatch_many``): an idle stream then holds this future, not a coroutine and
        a task. Hand it back to :meth:`discard_receive` when it is not consumed."""
        self.require_valid_channel_name(channel)
        self._clean_expired()
        entry = self.channels.get(channel)
        if entry is None:
            entry = self.channels[channel] = _Channel()
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if entry.messages:
            _, message = entry.messages.popleft()
            waiter.set_result(message)
            self._forget_if_idle(channel, entry)
        else:
            entry.waiters.append(waiter)
        return waiter

    def source(self, channel: str) -> LaterReceive:
        """``channel`` as a source of ``dispatch.dispatch_many``: see :meth:`receive_later`."""
        return LaterReceive(self, channel)

    def discard_receive(self, channel: str, waiter: asyncio.Future[dict[str, Any]] | None) -> None:
        """The consumer of ``channel`` stops following it: as when :meth:`receive` is cancelled,
        a message already handed to ``waiter`` goes back to the channel (None: the last one was
        consumed), and a channel left with nothing is forgotten."""
        entry = self.channels.get(channel)
        if waiter is not None and not waiter.cancel() and not waiter.cancelled():
            if entry is None:
                entry = self.channels[channel] = _Channel()
            if entry.messages is None:
                entry.messages = deque()
            entry.messages.appendleft((time.time() + self.expiry, waiter.result()))
            self._backlog[channel] = None
        if entry is not None:
            if waiter is not None:
                with contextlib.suppress(ValueError):
                    entry.waiters.remove(waiter)
            self._forget_if_idle(channel, entry)

    def _forget_if_idle(self, channel: str, entry: _Channel) -> None:
        if not entry.messages and not entry.waiters and self.channels.get(channel) is entry:
            del self.channels[channel]
            self._backlog.pop(channel, None)

    async def new_channel(self, prefix: str = "specific.") -> str:
        return f"{prefix}.inmemory!{secrets.token_urlsafe(9)}"

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep < self.sweep_interval:
            return
        self._last_sweep = now
        wall = time.time()
        for channel in list(self._backlog):
            entry = self.channels.get(channel)
            while entry is not None and entry.messages and entry.messages[0][0] < wall:
                entry.messages.popleft()
                self._remove_from_groups(channel)
            if entry is None or not entry.messages:
                self._backlog.pop(channel, None)
                if entry is not None:
                    self._forget_if_idle(channel, entry)
        if now - self._last_group_sweep >= self.group_sweep_interval:
            self._last_group_sweep = now
            timeout = int(wall) - self.group_expiry
            for group, members in list(self.groups.items()):
                for name, joined in list(members.items()):
                    if joined and joined < timeout:
                        self._leave(group, name)

    def _remove_from_groups(self, channel: str) -> None:
        for group in list(self._memberships.get(channel, ())):
            self._leave(group, channel)

    def _leave(self, group: str, channel: str) -> None:
        members = self.groups.get(group)
        if members is not None:
            members.pop(channel, None)
            if not members:
                del self.groups[group]
        joined = self._memberships.get(channel)
        if joined is not None:
            joined.discard(group)
            if not joined:
                del self._memberships[channel]

    async def group_add(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        self.groups.setdefault(group, {})[channel] = time.time()
        self._memberships.setdefault(channel, set()).add(group)

    async def group_discard(self, group: str, channel: str) -> None:
        self.require_valid_channel_name(channel)
        self.require_valid_group_name(group)
        self._leave(group, channel)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            # A full channel misses this message, as with Channels' own layers.
            with contextlib.suppress(ChannelFull):
                self._deliver(channel, message)

    async def flush(self) -> None:
        # As Channels' own: waiting receivers are forgotten, not woken (they may belong to an
        # event loop that is gone, as between tests).
        self.channels = {}
        self.groups = {}
        self._backlog.clear()
        self._memberships.clear()

    async def close(self) -> None:
        """Nothing to close."""


_fallback_layer: InMemoryChannelLayer | None = None


def get_layer() -> Any:
    """Return the configured channel layer, or a process-local in-memory one when the project
    has none (single process only; ``checks.py`` says so)."""
    global _fallback_layer
    layer = get_channel_layer(mcp_settings.channel_layer)
    if layer is not None:
        return layer
    if _fallback_layer is None:
        _fallback_layer = InMemoryChannelLayer(capacity=1000)
    return _fallback_layer


# -- group operations in fewer round trips on channels_redis ------------------------------------
#
# A streamed call joins two groups, leaves them, and announces its events on one: channels_redis
# spends two round trips per join (ZADD, EXPIRE) and four per group_send, and with PostgreSQL +
# Redis those round trips were most of a streamed call's CPU (bench/profile.py: the Redis client
# 30 % of the samples). These send the same commands, pipelined per Redis shard (the sends through
# a script of ours that does what channels_redis's does). Any other layer gets the plain calls.

#: One message to each channel key that has room: KEYS are the keys, ARGV their messages, then
#: their capacities, then the time and the expiry. Returns how many keys were full (the message
#: is dropped for those, as channels_redis drops it).
_SEND_TO_KEYS = """
local n = #KEYS
local full = 0
for i = 1, n do
    if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[n + i]) then
        full = full + 1
    else
        redis.call('ZADD', KEYS[i], ARGV[2 * n + 1], ARGV[i])
        redis.call('EXPIRE', KEYS[i], ARGV[2 * n + 2])
    end
end
return full
"""


def _redis_layer(layer: Any) -> bool:
    """Whether ``layer`` is channels_redis's core layer as these helpers know it (4.x)."""
    return type(layer).__module__ == "channels_redis.core" and all(
        hasattr(layer, name)
        for name in (
            "_group_key",
            "consistent_hash",
            "connection",
            "_map_channel_keys_to_connection",
        )
    )


def _by_shard(layer: Any, groups: list[str]) -> dict[int, list[bytes]]:
    shards: dict[int, list[bytes]] = {}
    for group in groups:
        layer.require_valid_group_name(group)
        shards.setdefault(layer.consistent_hash(group), []).append(layer._group_key(group))
    return shards


#: The lean connections (mcp_django.redis_wire) of each channels_redis layer's shards.
_wires: weakref.WeakKeyDictionary[Any, list[Wires]] = weakref.WeakKeyDictionary()


def _wire(layer: Any, index: int) -> RedisWire | None:
    """The lean connection to shard ``index`` of ``layer`` on this loop, where its host allows
    one (a plain redis:// address, only socket timeouts as options, hiredis installed)."""
    wires = _wires.get(layer)
    if wires is None:
        wires = _wires[layer] = [_host_wires(host) for host in layer.hosts]
    return wires[index].get()


def _host_wires(host: Any) -> Wires:
    options = (
        {k: v for k, v in host.items() if k != "address"}
        if isinstance(host, dict)
        else {"unknown": host}
    )
    address = host.get("address") if isinstance(host, dict) else None
    return Wires(address if isinstance(address, str) else "", options)


async def aclose_wires(layer: Any) -> None:
    """Close the running loop's lean connections to ``layer``'s shards (tests end a loop with
    this; a server's loop lives as long as its process)."""
    for wires in _wires.pop(layer, []):
        await wires.aclose()


async def _execute(layer: Any, index: int, commands: list[list[Any]]) -> list[Any]:
    """``commands`` in one round trip to shard ``index``: on the lean connection where there is
    one, else pipelined on channels_redis's own client."""
    wire = _wire(layer, index)
    if wire is not None:
        return await wire.execute(commands)
    pipe = layer.connection(index).pipeline(transaction=False)
    for name, *args in commands:
        pipe.execute_command(name, *args)
    return list(await pipe.execute())


async def _pipelined(
    layer: Any, groups: list[str], channel: str, commands: Callable[[bytes], list[list[Any]]]
) -> None:
    """One round trip per shard, ``commands(group_key)`` giving each group's commands."""
    layer.require_valid_channel_name(channel)
    for index, keys in _by_shard(layer, groups).items():
        await _execute(layer, index, [command for key in keys for command in commands(key)])


async def group_add_many(layer: Any, groups: list[str], channel: str) -> None:
    """Add ``channel`` to each of ``groups``."""
    if not _redis_layer(layer):
        for group in groups:
            await layer.group_add(group, channel)
        return
    at = time.time()
    await _pipelined(
        layer,
        groups,
        channel,
        lambda key: [["ZADD", key, at, channel], ["EXPIRE", key, layer.group_expiry]],
    )
    if channel in _inboxes:
        for group in groups:
            _local_members.setdefault(group, set()).add(channel)


async def group_discard_many(layer: Any, groups: list[str], channel: str) -> None:
    """Remove ``channel`` from each of ``groups`` it is in."""
    if not _redis_layer(layer):
        for group in groups:
            await layer.group_discard(group, channel)
        return
    _forget_local(channel, groups)
    await _pipelined(layer, groups, channel, lambda key: [["ZREM", key, channel]])


# -- members of a group in this process: handed their messages in memory ----------------------
#
# On channels_redis a message to a channel of this very process still went through Redis: the
# sender's EVAL, then the receiving loop's BZPOPMIN and the clean-up of its backup key. A
# streamed call's events are nearly always for a connection in the process that answers it, and
# those trips were most of what PostgreSQL + Redis added to an SSE tools/call (bench/profile.py).
# A consumer that joins groups opens an inbox here; group_send still reads the group's members
# from Redis (a connection that took the stream over on another process is one of them, so it
# gets the message as before), and hands the message to each member with an inbox directly.


class Inbox:
    """The messages for one channel of this process, waiting for its consumer, oldest dropped
    first past ``capacity`` (as channels_redis drops them; a stream fills the gap from the store).
    ``joined`` is the consumer's own list of the groups it is in: a stream's last announcement
    takes the channel out of them in its own round trip (:func:`group_send`), and the consumer,
    on its way out, leaves only the groups still listed."""

    __slots__ = ("capacity", "joined", "messages", "waiter")

    def __init__(self, capacity: int, joined: list[str]) -> None:
        self.capacity = capacity
        self.joined = joined
        self.messages: deque[dict[str, Any]] = deque()
        self.waiter: asyncio.Future[None] | None = None

    def put(self, message: dict[str, Any]) -> None:
        if len(self.messages) >= self.capacity:
            self.messages.popleft()
        self.messages.append(message)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def get(self) -> dict[str, Any]:
        while not self.messages:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.messages.popleft()


_inboxes: dict[str, Inbox] = {}
#: The channels with an inbox in each group, as this process added them (group_add_many).
_local_members: dict[str, set[str]] = {}


def open_inbox(layer: Any, channel: str, joined: list[str]) -> Inbox | None:
    """An inbox for ``channel``, a channel of this process on ``layer`` whose consumer lists the
    groups it joins in ``joined``, where group_send can use one (channels_redis); None
    elsewhere. Close it with :func:`close_inbox`."""
    if not _redis_layer(layer):
        return None
    inbox = _inboxes[channel] = Inbox(int(getattr(layer, "capacity", 100)), joined)
    return inbox


def close_inbox(channel: str) -> None:
    inbox = _inboxes.pop(channel, None)
    if inbox is not None:
        _forget_local(channel, inbox.joined)


def _forget_local(channel: str, groups: list[str]) -> None:
    for group in groups:
        members = _local_members.get(group)
        if members is not None:
            members.discard(channel)
            if not members:
                del _local_members[group]


async def group_send(
    layer: Any, group: str, message: dict[str, Any], *, last: bool = False
) -> None:
    """``layer.group_send``; on channels_redis in two round trips instead of four, with its
    semantics: expired members dropped, expired messages trimmed, full channels skipped and
    logged; a member with an inbox in this process is handed its copy in memory.

    ``last``: the group's last message (a stream's final events; its members stop once they have
    it). The members of this process leave the groups they joined, on the group's shard, in the
    same round trip as the members are read: a streamed call's own leave was a round trip of
    its own (bench/, the scale-out case)."""
    if not _redis_layer(layer):
        await layer.group_send(group, message)
        return
    ((index, (key,)),) = _by_shard(layer, [group]).items()
    commands: list[list[Any]] = [
        ["ZREMRANGEBYSCORE", key, 0, int(time.time()) - layer.group_expiry],
        ["ZRANGE", key, 0, -1],
    ]
    leaving = _leaving(layer, group, index) if last else []
    # After the ZRANGE: the members read still include the ones leaving, who get the message.
    commands += [["ZREM", layer._group_key(joined), channel] for channel, joined in leaving]
    members = (await _execute(layer, index, commands))[1]
    for channel, joined in leaving:
        inbox = _inboxes.get(channel)
        if inbox is not None and joined in inbox.joined:
            inbox.joined.remove(joined)
        _forget_local(channel, [joined])
    if not members:
        return
    names = []
    for member in members:
        name = member.decode("utf8")
        inbox = _inboxes.get(name)
        if inbox is None:
            names.append(name)
        else:
            inbox.put(dict(message))  # its own copy, as a trip through Redis would give it
    if not names:
        return
    keys_by_shard, payloads, capacities = layer._map_channel_keys_to_connection(names, message)
    for shard, channel_keys in keys_by_shard.items():
        trims = [
            ["ZREMRANGEBYSCORE", channel_key, 0, int(time.time()) - int(layer.expiry)]
            for channel_key in channel_keys
        ]
        args = (
            [payloads[k] for k in channel_keys]
            + [capacities[k] for k in channel_keys]
            + [time.time(), layer.expiry]
        )
        full = (
            await _execute(
                layer,
                shard,
                [*trims, ["EVAL", _SEND_TO_KEYS, len(channel_keys), *channel_keys, *args]],
            )
        )[-1]
        if full:
            logger.info("%s of %s channels over capacity in group %s", full, len(names), group)


def _leaving(layer: Any, group: str, index: int) -> list[tuple[str, str]]:
    """(channel, group) for each group on shard ``index`` that a member of ``group`` with an
    inbox in this process is in."""
    leaving = []
    for channel in _local_members.get(group, ()):
        inbox = _inboxes.get(channel)
        if inbox is not None:
            leaving += [
                (channel, joined)
                for joined in inbox.joined
                if layer.consistent_hash(joined) == index
            ]
    return leaving


def stream_group(stream: str) -> str:
    return f"mcp.stream.{stream}"


def get_stream_group(session_id: str) -> str:
    return f"mcp.get.{session_id}"


def session_group(session_id: str) -> str:
    return f"mcp.session.{session_id}"


def _stream_signature(session_id: str, nonce: str) -> str:
    key = hashlib.sha256(("mcp_django.stream" + settings.SECRET_KEY).encode()).digest()
    return hmac.new(key, f"{session_id}:{nonce}".encode(), hashlib.sha256).hexdigest()[:16]


def new_stream_token(session_id: str) -> str:
    """Return a stream token that proves, without a database row, which session it belongs to."""
    nonce = secrets.token_urlsafe(9)  # 12 characters
    return nonce + _stream_signature(session_id, nonce)


def stream_belongs_to(session_id: str, stream: str) -> bool:
    """Tell whether ``stream`` is the GET stream or a POST stream token minted for this session."""
    if stream == GET_STREAM:
        return True
    if len(stream) != 28:
        return False
    return hmac.compare_digest(stream[12:], _stream_signature(session_id, stream[:12]))
