"""A lean asyncio connection to Redis for the hot paths: commands pipelined on one connection per
server and event loop, many batches in flight at once, replies parsed by hiredis.

Measured here (one core, a local Redis, CPU per round trip): redis-py 8's asyncio client spent
186 us on a four-command pipeline and 110 us on one command, through its pool, retries,
timeouts and per-command bookkeeping; the same pipeline written to a plain asyncio connection
took 46 us. A streamed tools/call on PostgreSQL + Redis makes three such round trips (it joins
its stream's groups, reads the members it announces to, leaves), so the client was most of
what that deployment added to a call (bench/profile.py). Used for those group operations
(:mod:`mcp_django.transport.layers`) and the quota counters (:mod:`mcp_django.ops.quotas.backends`)
only where the server is a plain ``redis://`` address and hiredis (Redis's own C parser,
``pip install hiredis``) is installed; anything else (TLS, Unix sockets, options of the user's)
keeps redis-py's client.

Replies come back in the order commands were sent, so a batch's are the next ones in. A caller
that stops waiting (cancelled) leaves its batch in line: its replies are read and dropped, and
the connection stays in step. A batch not answered within ``timeout`` ends the connection (its
replies might still come, out of step): every batch in flight fails with ConnectionError, and
the next one connects again. Concurrent batches share one connection attempt, and its error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence
from typing import Any, cast
from urllib.parse import unquote, urlsplit

try:
    import hiredis
except ImportError:  # optional: without it, redis-py's client is used
    hiredis = None  # type: ignore[assignment]

#: Options of a redis-py connection this connection honours (others: redis-py's client).
OPTIONS = frozenset({"socket_timeout", "socket_connect_timeout"})
#: Options that only name the client to the server (CLIENT SETINFO; Django 6.1 passes
#: ``driver_info``): this connection does not send them, and serves the server all the same.
NAMING = frozenset({"driver_info", "lib_name", "lib_version"})


class RedisReplyError(Exception):
    """Redis answered a command with an error."""


class _Batch:
    __slots__ = ("future", "left", "replies")

    def __init__(self, future: asyncio.Future[list[Any]], count: int) -> None:
        self.future = future
        self.left = count
        self.replies: list[Any] = []


class _Protocol(asyncio.Protocol):
    def __init__(self, wire: RedisWire) -> None:
        self.wire = wire
        self.reader = hiredis.Reader()
        self.transport: asyncio.Transport | None = None
        self.batches: deque[_Batch] = deque()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not asyncio's class

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                reply = self.reader.gets()
            except Exception as exc:  # a protocol error: nothing after it can be trusted
                self.fail(ConnectionError(f"Redis sent what is not RESP: {exc}"))
                return
            if reply is False:
                return
            if not self.batches:
                self.fail(ConnectionError("Redis sent a reply nobody asked for"))
                return
            batch = self.batches[0]
            batch.replies.append(reply)
            batch.left -= 1
            if not batch.left:
                self.batches.popleft()
                if not batch.future.done():
                    batch.future.set_result(batch.replies)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(
            ConnectionError(
                f"the connection to Redis was lost: {exc}" if exc else "Redis closed the connection"
            )
        )

    def fail(self, error: Exception) -> None:
        """End the connection: every batch in flight fails with ``error``."""
        if self.wire.protocol is self:
            self.wire.protocol = None
        while self.batches:
            future = self.batches.popleft().future
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: a cancelled caller is not there to
        if self.transport is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed: the socket goes with it
                self.transport.abort()


def _pack(commands: Sequence[Sequence[Any]]) -> bytes:
    out: list[bytes] = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        for arg in command:
            if isinstance(arg, bytes):
                value = arg
            elif isinstance(arg, str):
                value = arg.encode()
            elif isinstance(arg, (int, float)) and not isinstance(arg, bool):
                value = repr(arg).encode()
            else:
                raise TypeError(
                    f"a Redis argument must be bytes, str, int or float, not {type(arg).__name__}"
                )
            out.append(b"$%d\r\n%b\r\n" % (len(value), value))
    return b"".join(out)


class RedisWire:
    """One server's connection on one event loop (see the module's docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
    ) -> None:
        self.host, self.port, self.db = host, port, db
        self.username, self.password = username, password
        self.timeout = timeout
        self.connect_timeout = connect_timeout if connect_timeout is not None else timeout
        self.protocol: _Protocol | None = None
        self._connecting: asyncio.Task[_Protocol] | None = None

    @classmethod
    def from_url(cls, url: str, options: dict[str, Any] | None = None) -> RedisWire | None:
        """A connection to ``url`` with redis-py's ``options``, or None where this one cannot
        serve it (no hiredis, not ``redis://``, an option it does not know)."""
        if hiredis is None or not isinstance(url, str):
            return None
        options = options or {}
        if set(options) - OPTIONS - NAMING:
            return None
        parts = urlsplit(url)
        if parts.scheme != "redis" or parts.query or not parts.hostname:
            return None
        path = parts.path.strip("/")
        if path and not (path.isascii() and path.isdigit()):  # "²" is a digit int() refuses
            return None
        try:
            port = parts.port or 6379
        except ValueError:
            return None
        return cls(
            parts.hostname,
            port,
            db=int(path or 0),
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            timeout=options.get("socket_timeout"),
            connect_timeout=options.get("socket_connect_timeout"),
        )

    async def execute(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Send ``commands`` as one batch; their replies, in order (RedisReplyError for the
        first that is an error, as redis-py raises a pipeline's)."""
        protocol = self.protocol or await self._connect()
        replies = await self._send(protocol, commands, self.timeout)
        for reply in replies:
            if isinstance(reply, hiredis.ReplyError):
                raise RedisReplyError(str(reply))
        return replies

    async def _send(
        self, protocol: _Protocol, commands: Sequence[Sequence[Any]], timeout: float | None
    ) -> list[Any]:
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        protocol.batches.append(_Batch(future, len(commands)))
        assert protocol.transport is not None
        protocol.transport.write(_pack(commands))
        try:
            # Shielded: a cancelled caller leaves the future to its reply, in step.
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            protocol.fail(ConnectionError("Redis did not answer in time"))
            raise TimeoutError(f"Redis did not answer within {timeout:g} s") from None

    async def _connect(self) -> _Protocol:
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.get_running_loop().create_task(self._open())
        return await asyncio.shield(self._connecting)

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: _Protocol(self), self.host, self.port),
                self.connect_timeout,
            )
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"could not connect to Redis at {self.host}:{self.port} within "
                f"{self.connect_timeout:g} s"
            ) from None
        # uvloop may return before it called connection_made.
        protocol.transport = transport
        hello: list[list[Any]] = []
        if self.password is not None:
            hello.append(["AUTH", *([self.username] if self.username else []), self.password])
        if self.db:
            hello.append(["SELECT", self.db])
        if hello:
            replies = await self._send(protocol, hello, self.connect_timeout)
            errors = [reply for reply in replies if isinstance(reply, hiredis.ReplyError)]
            if errors:
                protocol.fail(ConnectionError(str(errors[0])))
                raise ConnectionError(f"Redis refused the connection: {errors[0]}")
        self.protocol = protocol
        return protocol

    def close(self) -> None:
        protocol, self.protocol = self.protocol, None
        if protocol is not None:
            protocol.fail(ConnectionError("closed"))


class Wires:
    """One :class:`RedisWire` per event loop for one server (a connection belongs to the loop
    that opened it); the wires of closed loops are dropped as new loops come."""

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        self.url, self.options = url, options
        #: Whether this server can be reached so at all (see RedisWire.from_url).
        self.usable = RedisWire.from_url(url, options) is not None
        self.by_loop: dict[asyncio.AbstractEventLoop, RedisWire] = {}

    def get(self) -> RedisWire | None:
        if not self.usable:
            return None
        loop = asyncio.get_running_loop()
        wire = self.by_loop.get(loop)
        if wire is None:
            # A process that runs one loop after another (a test suite) would keep every one's.
            for closed in [other for other in self.by_loop if other.is_closed()]:
                del self.by_loop[closed]
            wire = self.by_loop[loop] = RedisWire.from_url(self.url, self.options)  # type: ignore[assignment]
        return wire

    async def aclose(self) -> None:
        """Close the running loop's connection (a loop that ends closes its own first)."""
        wire = self.by_loop.pop(asyncio.get_running_loop(), None)
        if wire is not None:
            wire.close()
            await asyncio.sleep(0)  # the transport closes on the loop's next turn

    def close(self) -> None:
        """Close the connections of loops still running (others went with their loop)."""
        for loop, wire in list(self.by_loop.items()):
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(wire.close)
        self.by_loop.clear()
