"""Per-process plumbing: a channel on which this process hears about its running requests.

A ``notifications/cancelled`` may be POSTed to any process; it is sent to a group named after
the request, and the process running that request (which joined the group) cancels its task.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import orjson

from ..conf import mcp_settings
from ..db import aclose_broken_connections
from ..signals import sweeping
from ..stores import RunningRequestStore, ServerRequestStore, session_cache
from .layers import get_layer
from .streams import close_orphaned_streams

logger = logging.getLogger("mcp_django.transport")

# Tasks answering requests over SSE, by (session id, request id as JSON). Holding them here
# also keeps them alive: they are not tied to the HTTP connection (a disconnect is no cancel).
RUNNING: dict[tuple[str, str], asyncio.Task[Any]] = {}


#: This process incarnation, as recorded on the requests it runs (RunningRequest.owner).
PROCESS_ID = secrets.token_hex(8)


def request_key(session_id: str, request_id: Any) -> tuple[str, str]:
    # Keep the JSON type in the key: id 1 and id "1" are different requests.
    return session_id, orjson.dumps(request_id).decode()


#: Every process's channel is in this group: session changes are announced to all of them.
SESSIONS_GROUP = "mcp.sessions"
# Channel layers forget group members after group_expiry (a day by default): re-join well before.
REJOIN_SECONDS = 3600.0


class ProcessChannel:
    """One channel per process and event loop, with a task that acts on what arrives."""

    #: After a failed receive the listener waits this long, doubling per failure in a row.
    RETRY_SECONDS = 0.5
    RETRY_MAX_SECONDS = 30.0
    #: Seconds a request waits for this process to join the sessions' group before it fails as
    #: unreachable (503). Without it the wait was the channel layer's socket timeout, which must
    #: outlast the layer's blocking receive (15 s, mcp_django.W006): a Redis cut off silently
    #: (tests/multihost scenario 3) held such a request 15 s. As long as the health check's.
    JOIN_TIMEOUT = 2.0

    def __init__(self) -> None:
        self.channel: str | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None
        self.joined_at: float | None = None
        self.heartbeat: asyncio.Task[Any] | None = None
        #: The start-up sweep: requests and server requests left behind by dead processes.
        self.sweeper: asyncio.Task[Any] | None = None

    async def ensure(self) -> str:
        loop = asyncio.get_running_loop()
        if self.channel is None or self.loop is not loop or self.task is None or self.task.done():
            self.loop = loop
            self.channel = await get_layer().new_channel()
            self.task = loop.create_task(self.listen(self.channel))
            self.heartbeat = loop.create_task(self.renew_leases())
            self.joined_at = None
            if self.sweeper is None:
                self.sweeper = loop.create_task(sweep())
        if self.joined_at is None or time.monotonic() - self.joined_at > REJOIN_SECONDS:
            try:
                await asyncio.wait_for(
                    get_layer().group_add(SESSIONS_GROUP, self.channel), self.JOIN_TIMEOUT
                )
            except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
                raise TimeoutError(
                    f"the channel layer did not answer within {self.JOIN_TIMEOUT:g} s"
                ) from None
            # Only once joined: a join that failed is tried again by the next request.
            self.joined_at = time.monotonic()
        return self.channel

    async def listen(self, channel: str) -> None:
        layer = get_layer()
        failures = 0
        while True:
            try:
                message = await layer.receive(channel)
            except Exception:
                # Redis restarted, or a socket timed out (redis-py 8's 5 s default against the
                # layer's 5 s blocking receive: mcp_django.W006). This task is how the process
                # hears of session changes and cancels, so it listens again rather than end,
                # and the next request joins the sessions' group again (a restarted Redis has
                # forgotten it).
                failures += 1
                self.joined_at = None
                logger.warning(
                    "The process channel could not receive (failure %d in a row); listening again",
                    failures,
                    exc_info=True,
                )
                await asyncio.sleep(
                    min(self.RETRY_MAX_SECONDS, self.RETRY_SECONDS * 2 ** min(failures - 1, 8))
                )
                continue
            failures = 0
            if message.get("type") == "mcp.session.changed":
                session_cache.drop(message["session"])
            elif message.get("type") == "mcp.cancel":
                task = RUNNING.get((message["session"], message["request"]))
                if task is not None and not task.done():
                    task.cancel()
            elif message.get("type") == "mcp.cancel.session":
                cancel_local(message["session"])
            elif message.get("type") == "mcp.stream.dropped":
                orphans.dropped(message["stream"])
            elif message.get("type") == "mcp.stream.resumed":
                orphans.resumed(message["stream"])

    async def renew_leases(self) -> None:
        """Keep this process's claim on its running requests while it lives (see RunningRequest),
        and sweep up after dead processes on every beat."""
        while True:
            lease = mcp_settings.request_lease_seconds
            await asyncio.sleep(lease / 3)
            if RUNNING:
                try:
                    await RunningRequestStore().arenew(PROCESS_ID, lease)
                except Exception:
                    logger.exception("Could not renew the leases of running requests")
            # Other processes' requests whose process died: end their streams without waiting
            # for a resume.
            await sweep()

    async def watch(
        self, key: tuple[str, str], task: asyncio.Task[Any], stream: str | None = None
    ) -> None:
        """Register a running request so a cancel POSTed to any process reaches it, and (with
        its ``stream``) claim it in the database so a resume elsewhere can tell if it died."""
        RUNNING[key] = task
        await self.ensure()
        if stream is not None:
            leases.claim(key, stream)
            orphans.watch(key, stream)

    async def unwatch(self, key: tuple[str, str]) -> bool:
        """Forget a request that ended; True when its claim is (or is being) written, so the
        caller deletes that row (with its last events, in one transaction)."""
        RUNNING.pop(key, None)
        orphans.unwatch(key)
        return await leases.release(key)


class Leases:
    """This process's claims on the requests it answers over SSE (RunningRequest rows).

    Claims are written off the requests' path, in batches, ``WRITE_DELAY`` after they are made:
    a request that ends sooner never touches the table, and the others share one INSERT. (A
    process that dies within that delay leaves no row: a resume of that stream is not ended
    with an error. Before, the window was the INSERT's own round trip, on the request's path.)
    """

    WRITE_DELAY = 0.02

    def __init__(self) -> None:
        self._unwritten: dict[tuple[str, str], str] = {}
        self._writing: set[tuple[str, str]] = set()
        self._written: set[tuple[str, str]] = set()
        self._writer: asyncio.Task[None] | None = None
        #: Given a batch's keys, the audit records its claims carry, by key: the tools/call the
        #: trail has no row of yet (set by ``audit.install``, a layer above this one).
        self.tool_calls: Callable[[list[tuple[str, str]]], dict[tuple[str, str], Any]] | None = None

    def claim(self, key: tuple[str, str], stream: str) -> None:
        self._unwritten[key] = stream
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def release(self, key: tuple[str, str]) -> bool:
        if self._unwritten.pop(key, None) is not None:
            return False
        if key in self._writing and self._writer is not None:
            await asyncio.wait({self._writer})  # delete the row only once it is there
        if key in self._written:
            self._written.discard(key)
            return True
        return False

    async def _write(self) -> None:
        """Write one batch, then hand what came meanwhile to a new writer (a release waits for
        the batch holding its claim, never for the ones after it)."""
        await asyncio.sleep(self.WRITE_DELAY)
        batch, self._unwritten = self._unwritten, {}
        self._writing = set(batch)
        claims = [(key[0], stream, key[1]) for key, stream in batch.items()]
        try:
            if claims:
                tool_calls = self.tool_calls(list(batch)) if self.tool_calls is not None else None
                await RunningRequestStore().astart_many(
                    claims,
                    owner=PROCESS_ID,
                    lease_seconds=mcp_settings.request_lease_seconds,
                    tool_calls=tool_calls,
                )
            self._written.update(batch)
        except Exception:
            logger.exception("Could not record running requests")
        finally:
            self._writing = set()
            if self._unwritten:
                self._writer = asyncio.get_running_loop().create_task(self._write())


class Orphans:
    """POST streams of this process whose connection is gone: their requests run on (the client
    may resume the stream with Last-Event-ID) for ``DISCONNECT_GRACE_SECONDS``, and are then
    cancelled unless a connection took the stream up again, on any process.

    Without this a client could start long calls, drop each connection, and leave them all
    running for as long as the tools take (an hour, say).
    """

    def __init__(self) -> None:
        #: Requests running here, by the stream they answer on.
        self.streams: dict[str, set[tuple[str, str]]] = {}
        self.stream_of: dict[tuple[str, str], str] = {}
        #: Streams left without a connection: the timer that cancels their requests.
        self.timers: dict[str, asyncio.TimerHandle] = {}

    def watch(self, key: tuple[str, str], stream: str) -> None:
        self.streams.setdefault(stream, set()).add(key)
        self.stream_of[key] = stream

    def unwatch(self, key: tuple[str, str]) -> None:
        stream = self.stream_of.pop(key, None)
        keys = self.streams.get(stream) if stream is not None else None
        if keys is None:
            return
        keys.discard(key)
        if not keys:
            del self.streams[stream]  # type: ignore[arg-type]
            timer = self.timers.pop(stream, None)  # type: ignore[arg-type]
            if timer is not None:
                timer.cancel()

    def dropped(self, stream: str) -> bool:
        """``stream`` has no connection now: start its grace period if its requests run here."""
        if stream not in self.streams or stream in self.timers:
            return stream in self.streams
        grace = mcp_settings.disconnect_grace_seconds
        if grace is None:
            return True
        if grace <= 0:
            self.cancel(stream)
        else:
            self.timers[stream] = asyncio.get_running_loop().call_later(grace, self.cancel, stream)
        return True

    def resumed(self, stream: str) -> bool:
        """A connection took ``stream`` up again: its requests go on."""
        timer = self.timers.pop(stream, None)
        if timer is not None:
            timer.cancel()
        return stream in self.streams

    def cancel(self, stream: str) -> None:
        self.timers.pop(stream, None)
        for key in self.streams.get(stream, ()):
            task = RUNNING.get(key)
            if task is not None and not task.done():
                logger.info(
                    "Cancelling request %s of session %s: its stream lost its connection",
                    key[1],
                    key[0],
                )
                task.cancel()


class Sweeper:
    """The sweep after dead processes where no process channel runs one: the endpoint's plain
    view (WSGI, or ASGI without the router) has no channel to listen on, so its first request
    starts this on its loop, and it sweeps at once and then every third of a lease, as the
    channel's heartbeat does. Without it, a durable task left by a gunicorn worker that was
    killed stayed "working" until someone polled it."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None

    def ensure(self) -> None:
        """Start the sweeps on the running loop, unless they run there already."""
        task, loop = self.task, asyncio.get_running_loop()
        if task is None or task.done() or task.get_loop() is not loop:
            # In a context of its own: not the first request's (its user, its language).
            self.task = contextvars.Context().run(loop.create_task, self.run())

    async def run(self) -> None:
        while True:
            await sweep()
            await asyncio.sleep(mcp_settings.request_lease_seconds / 3)


leases = Leases()
orphans = Orphans()
process_channel = ProcessChannel()
sweeper = Sweeper()


async def stream_dropped(stream: str) -> None:
    """The connection of POST stream ``stream`` is gone (no other took it over): its requests
    are cancelled after the grace period unless a client resumes it, wherever they run."""
    if not orphans.dropped(stream):
        await get_layer().group_send(
            SESSIONS_GROUP, {"type": "mcp.stream.dropped", "stream": stream}
        )


async def stream_resumed(stream: str) -> None:
    """A client resumed POST stream ``stream``: its requests are not cancelled, wherever they
    run."""
    if not orphans.resumed(stream):
        await get_layer().group_send(
            SESSIONS_GROUP, {"type": "mcp.stream.resumed", "stream": stream}
        )


async def cancel_request(session_id: str, request_id: Any) -> None:
    """Cancel a running request of a session, wherever it runs."""
    key = request_key(session_id, request_id)
    task = RUNNING.get(key)
    if task is not None:
        task.cancel()
        return
    # Every process hears it and the one running the request acts: cancels are rare, so this
    # costs less than a group per request (two channel-layer round trips on every request).
    await get_layer().group_send(
        SESSIONS_GROUP, {"type": "mcp.cancel", "session": key[0], "request": key[1]}
    )


def cancel_local(session_id: str) -> int:
    """Cancel this process's running requests of a session; return how many."""
    tasks = [task for key, task in RUNNING.items() if key[0] == session_id and not task.done()]
    for task in tasks:
        task.cancel()
    return len(tasks)


async def cancel_session(session_id: str) -> None:
    """Cancel every running request of a session, on every process (DELETE)."""
    cancel_local(session_id)
    await get_layer().group_send(
        SESSIONS_GROUP, {"type": "mcp.cancel.session", "session": session_id}
    )


async def sweep() -> None:
    """End the streams of requests whose process died, and expire stale server requests.

    Run when a process starts (its first request): a restarted server cleans up after the
    incarnation it replaces, as soon as those leases lapse.
    """
    try:
        await close_orphaned_streams()
        await ServerRequestStore().aexpire_stale(mcp_settings.server_request_ttl)
        # What upper layers keep of dead processes' requests (the audit trail's running calls).
        await sweeping.asend(sender=ProcessChannel)
    except Exception:
        logger.exception("Could not sweep requests left by stopped processes")
        await aclose_broken_connections()  # the next sweep, and the next request, reconnect


async def broadcast_session_changed(session_id: str) -> None:
    """Tell every process to forget its cached copy of a session."""
    await get_layer().group_send(
        SESSIONS_GROUP, {"type": "mcp.session.changed", "session": session_id}
    )


async def on_session_changed(sender: Any, session_id: str, **kwargs: Any) -> None:
    """Receiver of ``signals.session_changed`` (connected in ``AppConfig.ready``)."""
    await broadcast_session_changed(session_id)
