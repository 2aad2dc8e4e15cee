"""Caps that hold under a hostile client: tool calls running at once (per session, per user or
client address), anonymous sessions per client address, session caps under concurrent
initializes, and calls whose connection is gone (cancelled, or after a grace period for a
stream the client may resume)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from django.test import override_settings

from mcp_django.models import Session
from mcp_django.ops.quotas import limits as quotas
from mcp_django.protocol.errors import QUOTA_EXCEEDED
from mcp_django.registry.sites import site
from mcp_django.server.context import Context
from mcp_django.server.engine import Principal
from mcp_django.testing import EventStream, MCPTestClient, _Exchange
from mcp_django.transport.process import RUNNING, orphans
from mcp_django.transport.stdio import StdioServer, _key
from tests.conftest import make_user
from tests.polling import until
from tests.test_quotas import INITIALIZE, ClientAt, _redis_caches, initialized, limits
from tests.transport.test_stateless import body as modern_body
from tests.transport.test_stateless import headers as modern_headers

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]

WAIT = 10.0


@dataclass
class Held:
    """What the ``hold`` tools saw: the calls that started, that were cancelled, and the gate
    that lets them end."""

    started: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def run(self, key: str) -> str:
        async with self.changed:
            self.started.append(key)
            self.changed.notify_all()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            async with self.changed:
                self.cancelled.append(key)
                self.changed.notify_all()
            raise
        return key

    async def wait_for(self, what: str, count: int) -> None:
        async with self.changed:
            await asyncio.wait_for(
                self.changed.wait_for(lambda: len(getattr(self, what)) >= count), WAIT
            )


@pytest.fixture
async def held() -> AsyncIterator[Held]:
    """Two tools that run until the test lets them end: ``hold`` (answered with JSON) and
    ``hold_stream`` (it takes a Context, so it is answered on an SSE stream)."""
    state = Held()

    async def hold(key: str) -> str:
        return await state.run(key)

    async def hold_stream(ctx: Context, key: str) -> str:
        return await state.run(key)

    site.tool(name="hold")(hold)
    site.tool(name="hold_stream")(hold_stream)
    try:
        yield state
    finally:
        state.gate.set()
        site.unregister("tool", "hold")
        site.unregister("tool", "hold_stream")


def hold_call(key: str, tool: str = "hold_stream", request_id: Any = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id or secrets.randbelow(10**9),
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"key": key}},
    }


async def open_call(
    client: MCPTestClient, message: dict[str, Any]
) -> tuple[_Exchange, EventStream]:
    """POST a call and keep its SSE answer open."""
    exchange = _Exchange(
        client.application, client.scope("POST", client.build_headers("POST")), WAIT
    )
    await exchange.start(orjson.dumps(message))
    return exchange, EventStream(exchange)


async def post_only(
    client: MCPTestClient, message: dict[str, Any], headers: dict[str, str | None] | None = None
) -> _Exchange:
    """POST a call answered with JSON, without waiting for the answer (stop() drops it)."""
    exchange = _Exchange(
        client.application, client.scope("POST", client.build_headers("POST", headers or {})), WAIT
    )
    await exchange.communicator.send_input(
        {"type": "http.request", "body": orjson.dumps(message), "more_body": False}
    )
    return exchange


# --- running calls ---------------------------------------------------------------------------------


async def test_a_session_at_its_running_cap_is_refused_a_call_before_it_runs_until_one_ends(
    held: Held,
) -> None:
    with limits(RUNNING_PER_SESSION=2):
        client = await initialized()
        streams = [(await open_call(client, hold_call(f"k{n}")))[1] for n in range(2)]
        await held.wait_for("started", 2)
        refused = await client.post(hold_call("k2", request_id=7))
        assert refused.status == 429 and refused.headers["retry-after"] == "1"
        assert refused.json()["id"] == 7
        assert refused.json()["error"]["code"] == QUOTA_EXCEEDED
        assert refused.json()["error"]["data"] == {
            "limit": "RUNNING_PER_SESSION",
            "max": 2,
            "retryAfter": 1,
        }
        assert held.started == ["k0", "k1"]  # the refused call never ran
        assert quotas.running_requests("RUNNING_PER_SESSION", f"session:{client.session_id}") == 2
        # Another session has room of its own.
        other = await initialized()
        assert (await other.call_tool("add", {"a": 1, "b": 1}))["structuredContent"] == {
            "result": 2
        }
        held.gate.set()
        for stream in streams:
            async with stream:
                await stream.read_until_closed(WAIT)
        await until(
            lambda: (
                quotas.running_requests("RUNNING_PER_SESSION", f"session:{client.session_id}") == 0
            )
        )
        assert (await client.call_tool("hold_stream", {"key": "k3"}))["content"][0]["text"] == "k3"


async def test_anonymous_callers_are_capped_per_address_across_sessions_and_eras(
    held: Held,
) -> None:
    with limits(RUNNING_PER_USER=1):
        here, again, there = ClientAt("192.0.2.7"), ClientAt("192.0.2.7"), ClientAt("192.0.2.8")
        for client in (here, again, there):
            await client.initialize()
        _, stream = await open_call(here, hold_call("first"))
        await held.wait_for("started", 1)
        refused = await again.post(hold_call("second"))
        assert (
            refused.status == 429 and refused.json()["error"]["data"]["limit"] == "RUNNING_PER_USER"
        )
        assert "client address" in refused.json()["error"]["message"]
        # 2026-07-28 has no session: the same address is refused there too.
        modern = modern_body(
            "tools/call", {"name": "hold", "arguments": {"key": "modern"}}, request_id=3
        )
        refused = await again.post_raw(orjson.dumps(modern), modern_headers(modern))
        assert (
            refused.status == 429 and refused.json()["error"]["data"]["limit"] == "RUNNING_PER_USER"
        )
        assert held.started == ["first"]
        _, elsewhere = await open_call(there, hold_call("elsewhere"))
        await held.wait_for("started", 2)
        held.gate.set()
        for open_stream in (stream, elsewhere):
            async with open_stream:
                await open_stream.read_until_closed(WAIT)
        await until(lambda: quotas.running_requests("RUNNING_PER_USER", "address:192.0.2.7") == 0)


async def test_a_call_answered_with_json_is_cancelled_when_its_connection_drops(held: Held) -> None:
    with limits(RUNNING_PER_SESSION=1):
        client = await initialized()
        exchange = await post_only(client, hold_call("json", tool="hold"))
        await held.wait_for("started", 1)
        await exchange.communicator.send_input(
            {"type": "http.disconnect"}
        )  # gone before the answer
        await held.wait_for("cancelled", 1)
        await exchange.stop()
        await until(
            lambda: (
                quotas.running_requests("RUNNING_PER_SESSION", f"session:{client.session_id}") == 0
            )
        )
        modern = modern_body(
            "tools/call", {"name": "hold", "arguments": {"key": "modern"}}, request_id=5
        )
        exchange = await post_only(
            client, modern, {**modern_headers(modern), "mcp-session-id": None}
        )
        await held.wait_for("started", 2)
        await exchange.communicator.send_input({"type": "http.disconnect"})
        await held.wait_for("cancelled", 2)
        await exchange.stop()
    assert held.cancelled == ["json", "modern"]


async def test_a_dropped_stream_is_cancelled_once_its_grace_period_ends(held: Held) -> None:
    with limits({"DISCONNECT_GRACE_SECONDS": 0.05}, RUNNING_PER_SESSION=1):
        client = await initialized()
        _, stream = await open_call(client, hold_call("dropped"))
        await held.wait_for("started", 1)
        await stream.close()
        await held.wait_for("cancelled", 1)
        await until(
            lambda: (
                quotas.running_requests("RUNNING_PER_SESSION", f"session:{client.session_id}") == 0
            )
        )
        await until(lambda: not RUNNING)
        assert not orphans.timers


async def test_a_dropped_stream_resumed_within_its_grace_period_runs_to_its_answer(
    held: Held,
) -> None:
    with limits({"DISCONNECT_GRACE_SECONDS": 3600}):
        client = await initialized()
        _, stream = await open_call(client, hold_call("kept", request_id=11))
        priming = await stream.next_event(WAIT)
        await held.wait_for("started", 1)
        await stream.close()
        assert priming.id is not None and list(orphans.timers) == [priming.id.rpartition(":")[0]]
        async with await client.open_stream(last_event_id=priming.id) as resumed:
            assert not orphans.timers  # taken up again: not to be cancelled
            held.gate.set()
            answer = await resumed.next_message(WAIT)
        assert answer["id"] == 11 and answer["result"]["content"][0]["text"] == "kept"
        assert held.cancelled == []


async def test_with_no_grace_period_a_dropped_stream_runs_on() -> None:
    with limits({"DISCONNECT_GRACE_SECONDS": None}):
        assert orphans.dropped("nobody's stream") is False  # none of its requests run here
        orphans.watch(("s", "1"), "stream-1")
        try:
            assert orphans.dropped("stream-1") is True and not orphans.timers
        finally:
            orphans.unwatch(("s", "1"))


# --- every cap raced: N at once, exactly the cap taken -------------------------------------------

RACERS = 20
CAP = 5


@pytest.fixture(params=["locmem", "redis", "file"])
def counting_cache(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """The cache the caps count in: the local-memory one (counted in this process), Redis
    (pipelines on an asyncio client), or a cache counted with ``add`` and ``incr`` (files)."""
    if request.param == "locmem":
        yield "default"
        return
    if request.param == "redis":
        caches = _redis_caches()
    else:
        caches = {
            "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
            "quota": {
                "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                "LOCATION": str(tmp_path / "quota"),
            },
        }
    with override_settings(CACHES=caches):
        yield "quota"


async def _race(clients: list[MCPTestClient], open_one: Any) -> list[EventStream]:
    """Open one stream per client at once (``open_one(client, n)``); every answer, in order."""
    return list(await asyncio.gather(*(open_one(client, n) for n, client in enumerate(clients))))


async def _end(streams: list[EventStream], held: Held) -> None:
    held.gate.set()
    for stream in streams:
        async with stream:
            if stream.status == 200:
                await stream.read_until_closed(WAIT)


def _refusals(streams: list[EventStream], limit: str) -> int:
    """How many of ``streams`` were refused with the quota error naming ``limit``; fails on any
    other answer than that or an open stream."""
    refused = 0
    for stream in streams:
        if stream.status == 200:
            continue
        assert stream.status == 429, (stream.status, stream.body)
        error = orjson.loads(stream.body)["error"]
        assert (
            error["code"] == QUOTA_EXCEEDED
            and error["data"]["limit"] == limit
            and error["data"]["max"] == CAP
        ), error
        refused += 1
    return refused


async def _signed_in(count: int) -> list[MCPTestClient]:
    alice = await sync_to_async(make_user)(f"racer{secrets.token_hex(3)}", "*")
    clients = []
    for _ in range(count):
        client = MCPTestClient()
        await client.force_login(alice)
        await client.initialize()
        clients.append(client)
    return clients


async def _calls_at_once(clients: list[MCPTestClient], held: Held) -> list[EventStream]:
    return await _race(clients, lambda client, n: client.post_stream(hold_call(f"r{n}")))


async def test_calls_raced_in_one_session_run_exactly_running_per_session(
    held: Held, counting_cache: str
) -> None:
    with limits(CACHE=counting_cache, RUNNING_PER_SESSION=CAP):
        client = await initialized()
        streams = await _calls_at_once([client] * RACERS, held)
        await held.wait_for("started", CAP)
        assert _refusals(streams, "RUNNING_PER_SESSION") == RACERS - CAP
        assert len(held.started) == CAP  # the refused ones never ran
        assert quotas.running_requests("RUNNING_PER_SESSION", f"session:{client.session_id}") == CAP
        await _end(streams, held)
        await until(
            lambda: (
                quotas.running_requests("RUNNING_PER_SESSION", f"session:{client.session_id}") == 0
            )
        )
        await quotas.aclose_clients()


async def test_calls_raced_by_one_user_across_sessions_run_exactly_running_per_user(
    held: Held, counting_cache: str
) -> None:
    with limits({"AUTHENTICATION": "django"}, CACHE=counting_cache, RUNNING_PER_USER=CAP):
        sessions = await _signed_in(RACERS // 2)
        user_id = (await Session.objects.aget(pk=sessions[0].session_id)).user_id
        streams = await _calls_at_once(sessions * 2, held)  # two calls in each session
        await held.wait_for("started", CAP)
        assert _refusals(streams, "RUNNING_PER_USER") == RACERS - CAP
        assert len(held.started) == CAP
        assert quotas.running_requests("RUNNING_PER_USER", f"user:{user_id}") == CAP
        await _end(streams, held)
        await until(lambda: quotas.running_requests("RUNNING_PER_USER", f"user:{user_id}") == 0)
        await quotas.aclose_clients()


async def test_calls_raced_from_one_address_run_exactly_running_per_user(
    held: Held, counting_cache: str
) -> None:
    with limits(CACHE=counting_cache, RUNNING_PER_USER=CAP):
        sessions: list[MCPTestClient] = [ClientAt("192.0.2.44") for _ in range(RACERS // 2)]
        for client in sessions:
            await client.initialize()
        streams = await _calls_at_once(sessions * 2, held)
        await held.wait_for("started", CAP)
        assert _refusals(streams, "RUNNING_PER_USER") == RACERS - CAP
        assert len(held.started) == CAP
        assert quotas.running_requests("RUNNING_PER_USER", "address:192.0.2.44") == CAP
        await _end(streams, held)
        await until(lambda: quotas.running_requests("RUNNING_PER_USER", "address:192.0.2.44") == 0)
        await quotas.aclose_clients()


async def test_streams_raced_in_one_session_open_exactly_streams_per_session(
    held: Held, counting_cache: str
) -> None:
    # Calls answered on their POST's stream: each holds a stream slot (running calls uncapped).
    with limits(CACHE=counting_cache, STREAMS_PER_SESSION=CAP):
        client = await initialized()
        streams = await _calls_at_once([client] * RACERS, held)
        await held.wait_for("started", CAP)
        assert _refusals(streams, "STREAMS_PER_SESSION") == RACERS - CAP
        assert len(held.started) == CAP  # a call refused its stream never ran
        assert quotas.open_streams("STREAMS_PER_SESSION", f"session:{client.session_id}") == CAP
        await _end(streams, held)
        await until(
            lambda: quotas.open_streams("STREAMS_PER_SESSION", f"session:{client.session_id}") == 0
        )
        await quotas.aclose_clients()


async def test_listen_streams_raced_from_one_address_open_exactly_streams_per_user(
    counting_cache: str,
) -> None:
    with limits(CACHE=counting_cache, STREAMS_PER_USER=CAP):
        client = ClientAt("192.0.2.45")

        def listen(n: int) -> dict[str, Any]:
            return modern_body("subscriptions/listen", {"notifications": {}}, request_id=n)

        streams = await _race(
            [client] * RACERS, lambda c, n: c.post_stream(listen(n), modern_headers(listen(n)))
        )
        assert _refusals(streams, "STREAMS_PER_USER") == RACERS - CAP
        assert quotas.open_streams("STREAMS_PER_USER", "address:192.0.2.45") == CAP
        for stream in streams:
            await stream.close()
        await until(lambda: quotas.open_streams("STREAMS_PER_USER", "address:192.0.2.45") == 0)
        await quotas.aclose_clients()


# --- sessions ------------------------------------------------------------------------------------


async def test_anonymous_sessions_are_capped_per_client_address() -> None:
    with limits(SESSIONS_PER_ADDRESS=2):
        for _ in range(2):
            await ClientAt("198.51.100.1").initialize()
        third = ClientAt("198.51.100.1")
        refused = await third.request("initialize", INITIALIZE)
        assert third.last_response is not None and third.last_response.status == 429
        assert refused["error"]["data"] == {"limit": "SESSIONS_PER_ADDRESS", "max": 2}
        assert "client address" in refused["error"]["message"]
        await ClientAt("198.51.100.2").initialize()  # another address, another count
    assert await Session.objects.filter(client_address="198.51.100.1").acount() == 2


async def test_concurrent_initializes_never_take_more_sessions_than_the_cap() -> None:
    alice = await sync_to_async(make_user)("alice", "*")
    users = []
    for _ in range(40):
        client = MCPTestClient()
        await client.force_login(alice)
        users.append(client)
    anonymous = [ClientAt("203.0.113.9") for _ in range(40)]
    with limits({"AUTHENTICATION": "django"}, SESSIONS_PER_USER=5):
        answers = await asyncio.gather(
            *(
                c.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE})
                for c in users
            )
        )
    with limits(SESSIONS_PER_ADDRESS=5):
        anonymous_answers = await asyncio.gather(
            *(
                c.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE})
                for c in anonymous
            )
        )
    assert sorted(a.status for a in answers) == [200] * 5 + [429] * 35
    assert sorted(a.status for a in anonymous_answers) == [200] * 5 + [429] * 35
    assert await Session.objects.filter(user=alice).acount() == 5
    assert await Session.objects.filter(client_address="203.0.113.9").acount() == 5


async def test_stdio_gives_back_the_slot_of_a_call_it_never_runs(held: Held) -> None:
    # A call refused as a reused id after check_quotas took its slot, and a call whose task is
    # cancelled before it starts, never reach Engine.run: their slots must still come back.
    lines: list[dict[str, Any]] = []

    async def write(data: bytes) -> None:
        lines.append(orjson.loads(data))

    request = HttpRequest()
    request.user = AnonymousUser()
    with limits(RUNNING_PER_SESSION=3):
        server = StdioServer(
            site.engine,
            Principal(request=request, user=request.user, transport="stdio"),
            write,
            max_line=1 << 20,
        )
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE}
        for message in (
            initialize,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            hold_call("a", "hold", request_id=1),
        ):
            await server.receive(orjson.dumps(message))
        session = server.session
        assert session is not None
        await until(lambda: held.started == ["a"])
        await server.receive(
            orjson.dumps(hold_call("again", "hold", request_id=1))
        )  # the id is in use
        await until(lambda: any(line.get("id") == 1 and "error" in line for line in lines))
        await server.receive(orjson.dumps(hold_call("b", "hold", request_id=2)))
        server.running[_key(2)].cancel()  # before its task ever ran
        held.gate.set()
        await asyncio.wait_for(
            asyncio.gather(*list(server.running.values()), return_exceptions=True), WAIT
        )
        await until(
            lambda: quotas.running_requests("RUNNING_PER_SESSION", f"session:{session.pk}") == 0
        )
        await server.stop()
    assert held.started == ["a"]
