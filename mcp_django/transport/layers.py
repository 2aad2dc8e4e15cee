"""Channel-layer access and the group names that carry stream events between processes."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any

from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer
from channels.layers import get_channel_layer
from django.conf import settings

from ..conf import mcp_settings

#: The stream token of a session's standalone (GET) stream.
GET_STREAM = "get"

class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):  # type: ignore[misc]  # channels ships no type information
    """Channels' in-memory layer, with expiry that costs what is pending, not what is open.

    The stock layer walks every channel and every group membership on each send, receive and
    group_send, so with thousands of idle MCP streams (each an empty channel with a waiting
    receiver, and a group member) every request and every new stream got slower (bench/: with
    2,000 idle streams, tools/call fell from about 2,380 to 1,760 calls/s). Here the channel sweep
    runs at most once a second and visits only channels holding undelivered messages; an expired
    message leaves its channel's groups through a reverse index instead of a walk over all groups;
    group memberships (which expire after a day by default) are swept once a minute.
    """

    sweep_interval = 1.0
    group_sweep_interval = 60.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last_sweep = 0.0
        self._last_group_sweep = time.monotonic()
        #: Channels that may hold messages nobody has received (an ordered set).
        self._backlog: dict[str, None] = {}
        #: channel -> the groups it is in.
        self._memberships: dict[str, set[str]] = {}

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await super().send(channel, message)
        self._backlog[channel] = None

    async def receive(self, channel: str) -> dict[str, Any]:
        try:
            message: dict[str, Any] = await super().receive(channel)
        finally:
            if channel not in self.channels:  # the stock layer drops a channel once it is empty
                self._backlog.pop(channel, None)
        return message

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep < self.sweep_interval:
            return
        self._last_sweep = now
        wall = time.time()
        for channel in list(self._backlog):
            queue = self.channels.get(channel)
            while queue is not None and not queue.empty() and queue._queue[0][0] < wall:
                queue.get_nowait()
                self._remove_from_groups(channel)
            if queue is None or queue.empty():
                # Nobody waits on a queue that held messages: receivers would have taken them.
                self.channels.pop(channel, None)
                self._backlog.pop(channel, None)
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
        await super().group_add(group, channel)
        self._memberships.setdefault(channel, set()).add(group)

    async def group_discard(self, group: str, channel: str) -> None:
        await super().group_discard(group, channel)
        joined = self._memberships.get(channel)
        if joined is not None:
            joined.discard(group)
            if not joined:
                del self._memberships[channel]

    async def flush(self) -> None:
        await super().flush()
        self._backlog.clear()
        self._memberships.clear()


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
