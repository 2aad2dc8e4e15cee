"""The lean Redis connection (mcp_django.redis_wire): on a real Redis, batches in flight from many
tasks each get their own replies, a cancelled caller leaves the connection in step, errors are
raised as redis-py raises a pipeline's; against a server that stops answering or hangs up, a
batch fails with the timeout or the loss, the others in flight with it, and the next connects
again; concurrent callers share one failed connection attempt."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest

from mcp_django.redis_wire import RedisReplyError, RedisWire, Wires

pytest.importorskip("hiredis")


@pytest.fixture
async def wire() -> AsyncIterator[RedisWire]:
    from tests.multiprocess.servers import REDIS_HOST, REDIS_PORT, require_redis

    require_redis()
    made = RedisWire.from_url(
        f"redis://{REDIS_HOST}:{REDIS_PORT}/14", {"socket_timeout": 2, "socket_connect_timeout": 2}
    )
    assert made is not None and made.db == 14
    yield made
    made.close()
    await asyncio.sleep(0)


def key() -> str:
    return f"test-wire:{secrets.token_hex(6)}"


async def test_a_batch_gets_its_replies_in_order(wire: RedisWire) -> None:
    k = key()
    replies = await wire.execute(
        [["SET", k, 0, "EX", 30, "NX"], ["INCRBY", k, 5], ["GET", k], ["GET", key()], ["DEL", k]]
    )
    assert replies == [b"OK", 5, b"5", None, 1]


async def test_batches_of_many_tasks_in_flight_at_once_each_get_their_own(wire: RedisWire) -> None:
    keys = [key() for _ in range(50)]

    async def one(n: int, k: str) -> list[object]:
        return await wire.execute([["INCRBY", k, n], ["GET", k], ["DEL", k]])

    results = await asyncio.gather(*(one(n, k) for n, k in enumerate(keys)))
    assert results == [[n, str(n).encode(), 1] for n in range(50)]
    assert wire.protocol is not None  # one connection for all of them


def test_it_works_on_uvloop_too() -> None:
    # uvicorn's loop where installed: its create_connection may return before connection_made.
    uvloop = pytest.importorskip("uvloop")
    from tests.multiprocess.servers import REDIS_HOST, REDIS_PORT, require_redis

    require_redis()

    async def go() -> list[object]:
        wire = RedisWire.from_url(
            f"redis://{REDIS_HOST}:{REDIS_PORT}/14",
            {"socket_timeout": 2, "socket_connect_timeout": 2},
        )
        assert wire is not None
        try:
            return await wire.execute([["PING"], ["ECHO", "uvloop"]])
        finally:
            wire.close()

    assert uvloop.run(go()) == [b"PONG", b"uvloop"]


async def test_an_error_reply_is_raised(wire: RedisWire) -> None:
    k = key()
    await wire.execute([["SET", k, "text", "EX", 30]])
    with pytest.raises(RedisReplyError, match="not an integer"):
        await wire.execute([["INCRBY", k, 1]])
    assert await wire.execute([["GET", k]]) == [b"text"]  # still in step


async def test_a_cancelled_caller_leaves_the_connection_in_step(wire: RedisWire) -> None:
    blocked = asyncio.ensure_future(
        wire.execute([["BLPOP", key(), 0.3]])
    )  # holds the connection 0.3 s
    await asyncio.sleep(0.05)
    blocked.cancel()
    k = key()
    # Sent behind the cancelled batch: its reply is read and dropped, this one gets its own.
    assert await wire.execute([["SET", k, "mine", "EX", 30], ["GET", k]]) == [b"OK", b"mine"]


async def test_the_database_of_the_url_is_selected(wire: RedisWire) -> None:
    import redis

    from tests.multiprocess.servers import REDIS_HOST, REDIS_PORT

    k = key()
    await wire.execute([["SET", k, "here", "EX", 30]])
    assert redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=14).get(k) == b"here"
    assert redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=0).get(k) is None


class Server:
    """A TCP server on loopback that answers PING with +PONG, or (``silent``) reads and never
    answers, or (``hang_up``) closes each connection once it has read something."""

    def __init__(self) -> None:
        self.silent = False
        self.hang_up = False
        self.connections = 0
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while data := await reader.read(4096):
                if self.hang_up:
                    break
                if not self.silent:
                    writer.write(b"+PONG\r\n" * data.count(b"PING"))
        finally:
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def test_a_batch_not_answered_in_time_fails_with_those_in_flight_and_the_next_connects_again() -> (
    None
):
    server = Server()
    port = await server.start()
    wire = RedisWire("127.0.0.1", port, timeout=0.2, connect_timeout=1)
    try:
        assert await wire.execute([["PING"]]) == [b"PONG"]
        server.silent = True
        results = await asyncio.gather(
            wire.execute([["PING"]]), wire.execute([["PING"], ["PING"]]), return_exceptions=True
        )
        # The first to time out ends the connection: the other fails with it, at the same moment.
        assert {type(r) for r in results} <= {TimeoutError, ConnectionError} and TimeoutError in {
            type(r) for r in results
        }
        server.silent = False
        assert await wire.execute([["PING"]]) == [b"PONG"]
        assert server.connections == 2
    finally:
        wire.close()
        await server.stop()


async def test_a_lost_connection_fails_what_is_in_flight_and_the_next_batch_connects_again() -> (
    None
):
    server = Server()
    port = await server.start()
    wire = RedisWire("127.0.0.1", port, timeout=2, connect_timeout=1)
    try:
        assert await wire.execute([["PING"]]) == [b"PONG"]
        server.hang_up = True
        with pytest.raises(ConnectionError):
            await wire.execute([["PING"]])
        server.hang_up = False
        assert await wire.execute([["PING"]]) == [b"PONG"]
    finally:
        wire.close()
        await server.stop()


async def test_concurrent_callers_share_one_failed_connection_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    attempts = 0
    create = loop.create_connection

    async def counted(*args: object, **kwargs: object) -> object:
        nonlocal attempts
        attempts += 1
        return await create(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loop, "create_connection", counted)
    server = Server()
    port = await server.start()
    await server.stop()  # nothing listens there now
    wire = RedisWire("127.0.0.1", port, timeout=1, connect_timeout=1)
    results = await asyncio.gather(
        *(wire.execute([["PING"]]) for _ in range(8)), return_exceptions=True
    )
    assert all(isinstance(r, OSError) for r in results) and attempts == 1


@pytest.mark.parametrize(
    ("url", "options", "served"),
    [
        ("redis://127.0.0.1:6379/2", {"socket_timeout": 2, "socket_connect_timeout": 2}, True),
        ("redis://:secret@redis.internal", None, True),
        ("rediss://127.0.0.1:6379/0", None, False),  # TLS: redis-py's
        ("unix:///run/redis.sock", None, False),
        ("redis://127.0.0.1:6379/0?protocol=3", None, False),
        ("redis://127.0.0.1:6379/\u00b2", None, False),  # a digit to isdigit(), not to int()
        ("redis://127.0.0.1:6379/0", {"ssl_cert_reqs": "none"}, False),  # an option of the user's
        (
            "redis://127.0.0.1:6379/0",
            {"driver_info": object(), "socket_timeout": 2},
            True,
        ),  # Django 6.1's
    ],
)
def test_only_plain_addresses_with_known_options_are_served(
    url: str, options: dict[str, object] | None, served: bool
) -> None:
    assert (RedisWire.from_url(url, options) is not None) is served
    assert Wires(url, options).usable is served


def test_a_password_in_the_url_is_sent() -> None:
    wire = RedisWire.from_url("redis://me:s%40cret@127.0.0.1:6390/3")
    assert wire is not None and (wire.username, wire.password, wire.port, wire.db) == (
        "me",
        "s@cret",
        6390,
        3,
    )
