"""Quotas (mcp_django.ops.quotas.limits): rate limits on tools/call per user, per OAuth client and per tool,
and caps on sessions, open streams and pending URL elicitations, on every transport and era."""

from __future__ import annotations

import asyncio
import gc
import secrets
import weakref
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser, User
from django.core.checks import Error
from django.http import HttpRequest
from django.test import override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from mcp_django.checks import check_settings
from mcp_django.elicitation import services
from mcp_django.models import Elicitation, Session
from mcp_django.ops.quotas import backends as quota_backends
from mcp_django.ops.quotas import limits as quotas
from mcp_django.protocol.errors import QUOTA_EXCEEDED, QuotaExceededError
from mcp_django.registry.sites import site
from mcp_django.server.engine import Principal
from mcp_django.testing import MCPTestClient
from mcp_django.transport.flow import resume_slots
from mcp_django.transport.legacy_sse import HTTPSSEConsumer
from mcp_django.transport.stdio import StdioServer
from tests.conftest import BASE_SETTINGS, make_user
from tests.transport.test_stateless import body as modern_body
from tests.transport.test_stateless import headers as modern_headers

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]

#: 15 s into a minute: a window of one minute ends 45 s later.
T0 = 60 * 28_000_000 + 15.0
#: Only the limit a test sets: the defaults turned off.
NO_LIMITS: dict[str, Any] = {
    "TOOL_CALLS": None,
    "SESSIONS_PER_USER": None,
    "STREAMS_PER_SESSION": None,
    "STREAMS_PER_USER": None,
    "PENDING_ELICITATIONS_PER_USER": None,
}
RESOURCE = "https://mcp.example.com/mcp"
INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "c", "version": "1"},
}


def limits(mcp: dict[str, Any] | None = None, **quota: Any) -> override_settings:
    """Run under these QUOTAS keys (the others off), with more MCP_DJANGO keys from ``mcp``."""
    return override_settings(
        MCP_DJANGO={**BASE_SETTINGS, **(mcp or {}), "QUOTAS": {**NO_LIMITS, **quota}}
    )


class Clock:
    """The time quotas see: windows and buckets follow it, so no test waits for one to end."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    monkeypatch.setattr(quotas, "now", moved)
    return moved


def call(name: str = "add", request_id: Any = None, **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id or secrets.randbelow(10**9),
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": arguments or ({"a": 1, "b": 2} if name == "add" else {"text": "hi"}),
        },
    }


async def initialized(**kwargs: Any) -> MCPTestClient:
    client = MCPTestClient(**kwargs)
    await client.initialize()
    return client


class ClientAt(MCPTestClient):
    """A client calling from another address (anonymous callers are counted per address)."""

    def __init__(self, address: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.address = address

    def scope(
        self, method: str, headers: list[tuple[bytes, bytes]], path: str | None = None
    ) -> dict[str, Any]:
        return {**super().scope(method, headers, path), "client": (self.address, 40000)}


# --- rates: the handshake era ------------------------------------------------------------------


async def test_a_call_over_the_rate_gets_429_with_retry_after_and_data_naming_the_limit(
    clock: Clock,
) -> None:
    with limits(TOOL_CALLS="2/minute"):
        client = await initialized()
        for _ in range(2):
            assert (await client.post(call())).status == 200
        refused = await client.post(call(request_id=99))
        assert refused.status == 429
        assert refused.headers["retry-after"] == "45"
        error = refused.json()["error"]
        assert refused.json()["id"] == 99
        assert error["code"] == QUOTA_EXCEEDED
        assert error["data"] == {"limit": "TOOL_CALLS", "retryAfter": 45, "rate": "2/minute"}
        assert "TOOL_CALLS" in error["message"] and "2/minute" in error["message"]
        # Only tools/call counts: the rest of the protocol goes on.
        assert (await client.call("tools/list"))["tools"]


async def test_the_limit_lifts_when_its_window_ends(clock: Clock) -> None:
    with limits(TOOL_CALLS="1/minute"):
        client = await initialized()
        assert (await client.post(call())).status == 200
        assert (await client.post(call())).status == 429
        clock.advance(44)
        assert (await client.post(call())).headers["retry-after"] == "1"
        clock.advance(1)
        assert (await client.call_tool("add", {"a": 2, "b": 2}))["structuredContent"] == {
            "result": 4
        }


async def test_a_per_tool_rate_limits_that_tool_only(clock: Clock) -> None:
    with limits(PER_TOOL={"echo": "1/minute"}):
        client = await initialized()
        assert (await client.call_tool("echo", {"text": "a"}))["content"][0]["text"] == "a"
        refused = await client.request("tools/call", {"name": "echo", "arguments": {"text": "b"}})
        assert client.last_response is not None and client.last_response.status == 429
        assert refused["error"]["data"] == {
            "limit": "PER_TOOL",
            "tool": "echo",
            "rate": "1/minute",
            "retryAfter": 45,
        }
        assert (await client.call_tool("add", {"a": 1, "b": 1}))["structuredContent"] == {
            "result": 2
        }


async def test_each_user_has_a_budget_of_their_own(clock: Clock) -> None:
    alice, bob = (
        await sync_to_async(make_user)("alice", "*"),
        await sync_to_async(make_user)("bob", "*"),
    )
    with limits({"AUTHENTICATION": "django"}, TOOL_CALLS="1/minute"):
        clients = []
        for user in (alice, bob):
            client = MCPTestClient()
            await client.force_login(user)
            await client.initialize()
            clients.append(client)
        assert (await clients[0].post(call())).status == 200
        assert (await clients[0].post(call())).status == 429
        assert (await clients[1].post(call())).status == 200  # bob's budget is untouched


async def test_anonymous_callers_are_counted_by_their_address(clock: Clock) -> None:
    with limits(TOOL_CALLS="1/minute"):
        here, there = ClientAt("192.0.2.1"), ClientAt("192.0.2.2")
        for client in (here, there):
            await client.initialize()
        assert (await here.post(call())).status == 200
        assert (await here.post(call())).status == 429
        assert (await there.post(call())).status == 200


def _token(username: str, application: str) -> str:
    user, _ = User.objects.get_or_create(username=username)
    app, _ = Application.objects.get_or_create(
        name=application,
        defaults={
            "client_type": "public",
            "authorization_grant_type": "authorization-code",
            "redirect_uris": "http://127.0.0.1/cb",
        },
    )
    raw = secrets.token_urlsafe(30)
    AccessToken.objects.create(
        user=user,
        application=app,
        token=raw,
        scope="",
        expires=timezone.now() + timedelta(hours=1),
        resource=[RESOURCE],
    )
    return raw


async def test_an_oauth_client_is_limited_across_all_its_users(clock: Clock) -> None:
    tokens = {
        name: await sync_to_async(_token)(name, app)
        for name, app in [("alice", "app-1"), ("bob", "app-1"), ("carol", "app-2")]
    }
    with limits(
        {"AUTHENTICATION": "oauth", "RESOURCE_URL": RESOURCE}, TOOL_CALLS_PER_CLIENT="2/minute"
    ):
        clients = {
            name: await initialized(headers={"authorization": f"Bearer {raw}"})
            for name, raw in tokens.items()
        }
        assert (await clients["alice"].post(call())).status == 200
        assert (await clients["bob"].post(call())).status == 200
        refused = await clients["alice"].post(call())
        assert refused.status == 429 and refused.headers["retry-after"] == "45"
        assert refused.json()["error"]["data"]["limit"] == "TOOL_CALLS_PER_CLIENT"
        assert (await clients["carol"].post(call())).status == 200  # another client, another budget


async def test_in_a_batch_only_the_calls_over_the_limit_get_the_error(clock: Clock) -> None:
    with limits(TOOL_CALLS="2/minute"):
        client = await initialized()
        await client.initialize(protocol_version="2025-03-26")
        batch = [
            call(request_id=1),
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            call(request_id=3),
            call(request_id=4),
        ]
        response = await client.post(batch)
        assert response.status == 200
        answers = {a["id"]: a for a in response.json()}
        assert answers[1]["result"]["structuredContent"] == {"result": 3}
        assert answers[2]["result"] == {}
        assert answers[3]["result"]["structuredContent"] == {"result": 3}
        assert answers[4]["error"]["code"] == QUOTA_EXCEEDED
        assert answers[4]["error"]["data"] == {
            "limit": "TOOL_CALLS",
            "retryAfter": 45,
            "rate": "2/minute",
        }


async def test_a_call_answered_as_a_stream_is_refused_before_the_stream_opens(clock: Clock) -> None:
    with limits(TOOL_CALLS="1/minute"):
        client = await initialized()
        assert (await client.call_tool("progress", {"steps": 1}))["content"]
        refused = await client.post(call("progress", request_id=5, steps=1))
        assert refused.status == 429 and refused.content_type == "application/json"
        assert refused.json()["error"]["data"]["limit"] == "TOOL_CALLS"


# --- rates: 2026-07-28, stdio, and the hook ---------------------------------------------------


async def test_a_stateless_call_over_the_rate_gets_429_with_retry_after(clock: Clock) -> None:
    with limits(TOOL_CALLS="1/minute"):
        client = MCPTestClient()
        first = modern_body(
            "tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id=1
        )
        assert (await client.post_raw(orjson.dumps(first), modern_headers(first))).status == 200
        second = modern_body(
            "tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id=2
        )
        refused = await client.post_raw(orjson.dumps(second), modern_headers(second))
        assert refused.status == 429 and refused.headers["retry-after"] == "45"
        assert refused.json()["id"] == 2
        assert refused.json()["error"] == {
            "code": QUOTA_EXCEEDED,
            "message": refused.json()["error"]["message"],
            "data": {"limit": "TOOL_CALLS", "retryAfter": 45, "rate": "1/minute"},
        }


async def test_stdio_answers_a_call_over_the_rate_with_the_json_rpc_error_in_both_eras(
    clock: Clock,
) -> None:
    lines: list[dict[str, Any]] = []

    async def write(data: bytes) -> None:
        lines.append(orjson.loads(data))

    request = HttpRequest()
    request.user = AnonymousUser()
    with limits(TOOL_CALLS="1/minute"):
        server = StdioServer(
            site.engine,
            Principal(request=request, user=None, transport="stdio"),
            write,
            max_line=1 << 20,
        )
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        for message in (
            initialize,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            call(request_id=1),
            call(request_id=2),
        ):
            await server.receive(orjson.dumps(message))
        await asyncio.wait_for(asyncio.gather(*list(server.running.values())), 5)
        await server.receive(
            orjson.dumps(
                modern_body(
                    "tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id=3
                )
            )
        )
        await asyncio.wait_for(asyncio.gather(*list(server.running.values())), 5)
        await server.stop()
    answers = {line.get("id"): line for line in lines}
    assert "result" in answers[1]
    for request_id in (2, 3):
        assert answers[request_id]["error"]["code"] == QUOTA_EXCEEDED
        assert answers[request_id]["error"]["data"] == {
            "limit": "TOOL_CALLS",
            "retryAfter": 45,
            "rate": "1/minute",
        }


def legacy(kind: str) -> MCPTestClient:
    return MCPTestClient(HTTPSSEConsumer.as_asgi(site=site, kind=kind), path=f"/mcp/{kind}/")


async def test_http_sse_sends_the_error_on_the_sessions_stream_and_caps_its_stream(
    clock: Clock,
) -> None:
    with limits(TOOL_CALLS="1/minute", STREAMS_PER_USER=1):
        async with await legacy("sse").open_stream() as stream:
            endpoint = (await stream.next_event()).data
            messages = legacy("messages")
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
            assert (await messages.post_raw(orjson.dumps(initialize), path=endpoint)).status == 202
            assert "result" in await stream.next_message()
            for request_id in (2, 3):
                assert (
                    await messages.post_raw(
                        orjson.dumps(call(request_id=request_id)), path=endpoint
                    )
                ).status == 202
            answers = {
                m["id"]: m for m in [await stream.next_message(), await stream.next_message()]
            }
            assert "result" in answers[2]
            assert answers[3]["error"]["code"] == QUOTA_EXCEEDED
            assert answers[3]["error"]["data"] == {
                "limit": "TOOL_CALLS",
                "retryAfter": 45,
                "rate": "1/minute",
            }
            # A second stream (a second session) from the same caller: over STREAMS_PER_USER.
            refused = await legacy("sse").open_stream()
            assert refused.status == 429 and refused.json()["error"]["data"] == {
                "limit": "STREAMS_PER_USER",
                "max": 1,
            }
            # The session opened for the refused stream ended with it.
            assert await Session.objects.filter(terminated_at__isnull=True).acount() == 1


async def test_every_refusal_reaches_the_engines_hook(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str | None, int | None, str | None]] = []
    hook = site.engine.quota_refused

    async def record(
        principal: Principal, error: QuotaExceededError, message: Any = None, session: Any = None
    ) -> None:
        seen.append(
            (error.limit, error.retry_after, message.method if message is not None else None)
        )
        await hook(principal, error, message, session)

    monkeypatch.setattr(site.engine, "quota_refused", record)
    with limits(TOOL_CALLS="1/minute", STREAMS_PER_SESSION=1):
        client = await initialized()
        await client.post(call())
        await client.post(call())
        async with await client.open_stream(), await client.open_stream() as refused:
            assert refused.status == 429
    assert seen == [("TOOL_CALLS", 45, "tools/call"), ("STREAMS_PER_SESSION", None, None)]


# --- caps ------------------------------------------------------------------------------------------


async def test_a_user_at_the_session_cap_is_refused_a_new_session_until_one_ends() -> None:
    alice = await sync_to_async(make_user)("alice", "*")
    with limits({"AUTHENTICATION": "django"}, SESSIONS_PER_USER=2):
        clients = []
        for _ in range(2):
            client = MCPTestClient()
            await client.force_login(alice)
            await client.initialize()
            clients.append(client)
        third = MCPTestClient()
        await third.force_login(alice)
        refused = await third.request("initialize", INITIALIZE)
        assert third.last_response is not None and third.last_response.status == 429
        assert "mcp-session-id" not in third.last_response.headers
        assert refused["error"]["code"] == QUOTA_EXCEEDED
        assert refused["error"]["data"] == {"limit": "SESSIONS_PER_USER", "max": 2}
        assert "SESSIONS_PER_USER" in refused["error"]["message"]
        assert await Session.objects.filter(user=alice).acount() == 2
        assert (await clients[0].delete()).status == 204
        await third.initialize()
        assert third.session_id is not None


async def test_anonymous_sessions_are_not_capped_per_user() -> None:
    with limits(SESSIONS_PER_USER=1):
        for _ in range(3):
            await initialized()
    assert await Session.objects.acount() == 3


async def test_a_session_at_its_stream_cap_is_refused_and_a_closed_stream_frees_its_slot(
    clock: Clock,
) -> None:
    with limits(STREAMS_PER_SESSION=1):
        client = await initialized()
        who = f"session:{client.session_id}"
        first = await client.open_stream()
        assert first.status == 200 and quotas.open_streams("STREAMS_PER_SESSION", who) == 1
        refused = await client.open_stream()
        assert refused.status == 429
        assert refused.json()["error"]["data"] == {"limit": "STREAMS_PER_SESSION", "max": 1}
        assert "retry-after" not in refused.headers  # when a stream closes is the client's business
        await first.close()  # a disconnect
        assert quotas.open_streams("STREAMS_PER_SESSION", who) == 0
        async with await client.open_stream() as again:
            assert again.status == 200


async def test_a_user_at_the_stream_cap_is_refused_a_listen_stream_with_its_id(
    clock: Clock,
) -> None:
    with limits(STREAMS_PER_USER=1):
        client = MCPTestClient()
        listen = modern_body("subscriptions/listen", {"notifications": {}}, request_id=7)
        first = await client.post_stream(listen, modern_headers(listen))
        assert first.status == 200
        other = modern_body("subscriptions/listen", {"notifications": {}}, request_id=8)
        refused = await client.post_stream(other, modern_headers(other))
        assert refused.status == 429
        assert refused.json()["id"] == 8 and refused.json()["error"]["data"] == {
            "limit": "STREAMS_PER_USER",
            "max": 1,
        }
        await first.close()
        assert quotas.open_streams("STREAMS_PER_USER", "address:127.0.0.1") == 0
        async with await client.post_stream(other, modern_headers(other)) as again:
            assert again.status == 200


async def test_a_stream_taken_over_gives_its_slot_back(clock: Clock) -> None:
    with limits(STREAMS_PER_SESSION=2):
        client = await initialized()
        who = f"session:{client.session_id}"
        old = await client.open_stream()
        new = await client.open_stream()  # takes the session's GET stream over
        await old.read_until_closed()
        await old.close()
        assert quotas.open_streams("STREAMS_PER_SESSION", who) == 1
        await new.close()
        assert quotas.open_streams("STREAMS_PER_SESSION", who) == 0


async def test_a_stream_refused_after_its_slot_was_taken_gives_it_back(clock: Clock) -> None:
    from mcp_django.conf import mcp_settings

    with limits(STREAMS_PER_SESSION=4):
        client = await initialized()
        stream = await client.post_stream(call("progress", request_id=1, steps=1))
        await stream.read_until_closed()
        await stream.close()
        who = f"session:{client.session_id}"
        assert quotas.open_streams("STREAMS_PER_SESSION", who) == 0
        # Every resume slot of the session taken: the resume fails after its stream slot was counted.
        for _ in range(mcp_settings.max_resumes_per_session):
            resume_slots.acquire(client.session_id, None, mcp_settings)
        try:
            resumed = await client.open_stream(last_event_id=stream.last_event_id)
        finally:
            for _ in range(mcp_settings.max_resumes_per_session):
                resume_slots.release(client.session_id, None)
        assert resumed.status == 429 and resumed.json()["error"]["code"] != QUOTA_EXCEEDED
        assert quotas.open_streams("STREAMS_PER_SESSION", who) == 0


async def test_a_slot_its_process_never_released_stops_counting_within_two_leases(
    clock: Clock,
) -> None:
    # Leases are for a cache other processes share (on the local-memory one, see below).
    with override_settings(CACHES=_redis_caches()), limits(CACHE="quota", STREAMS_PER_USER=1):
        slot = await quotas.StreamSlot.acquire(quotas.Caller("user:1", 1), None)
        assert slot is not None and quotas.open_streams("STREAMS_PER_USER", "user:1") == 1
        assert slot in quotas._renewer.slots
        quotas._renewer.discard(slot)  # the process died: nothing renews or releases it
        clock.advance(2 * slot.lease)
        assert quotas.open_streams("STREAMS_PER_USER", "user:1") == 0
        again = await quotas.StreamSlot.acquire(quotas.Caller("user:1", 1), None)
        assert again is not None
        await again.release()
        await quotas.aclose_clients()


async def test_an_open_stream_keeps_counting_while_it_renews(clock: Clock) -> None:
    with override_settings(CACHES=_redis_caches()), limits(CACHE="quota", STREAMS_PER_USER=1):
        slot = await quotas.StreamSlot.acquire(quotas.Caller("user:2", 2), None)
        assert slot is not None and slot in quotas._renewer.slots
        for _ in range(3):
            # The renewer's pass at the middle of the newest bucket (driven here on the test's
            # clock; its own task wakes every lease * STEP seconds) registers the next one.
            newest = slot.buckets[-1]
            clock.now = newest * slot.lease + slot.lease / 2 - 0.01
            await quotas._renewer.renew_due(clock.now)
            assert slot.buckets[-1] == newest  # not due yet
            clock.now += 0.01
            await quotas._renewer.renew_due(clock.now)
            assert slot.buckets[-1] == newest + 1
            clock.advance(slot.lease / 4)
        assert quotas.open_streams("STREAMS_PER_USER", "user:2") == 1
        with pytest.raises(QuotaExceededError):
            await quotas.StreamSlot.acquire(quotas.Caller("user:2", 2), None)
        await slot.release()
        await slot.release()  # once only
        assert quotas.open_streams("STREAMS_PER_USER", "user:2") == 0
        await quotas.aclose_clients()


async def test_on_the_local_memory_cache_slots_are_held_in_the_process_until_released(
    clock: Clock,
) -> None:
    """No other process sees that cache: a slot counts, without a lease to renew, until it is
    given back, however long it is held; the counts are the same as on a shared cache."""
    with limits(STREAMS_PER_USER=2, RUNNING_PER_SESSION=1, RUNNING_PER_USER=3):
        caller = quotas.Caller("user:3", 3)
        streams = [await quotas.StreamSlot.acquire(caller, None) for _ in range(2)]
        running = await quotas.RunningSlot.acquire(caller, "s-1")
        assert running is not None and running.counts == [1, 1]
        assert not quotas._renewer.slots  # nothing to renew
        clock.advance(100 * running.lease)
        assert quotas.open_streams("STREAMS_PER_USER", "user:3") == 2
        assert quotas.running_requests("RUNNING_PER_SESSION", "session:s-1") == 1
        with pytest.raises(QuotaExceededError) as refused:
            await quotas.StreamSlot.acquire(caller, None)
        assert refused.value.limit == "STREAMS_PER_USER"
        with pytest.raises(QuotaExceededError) as refused:
            await quotas.RunningSlot.acquire(caller, "s-1")
        assert refused.value.limit == "RUNNING_PER_SESSION"
        # A refused slot gave back what it took, in every scope.
        assert quotas.running_requests("RUNNING_PER_USER", "user:3") == 1
        other = await quotas.RunningSlot.acquire(caller, "s-2")
        assert other is not None and other.counts == [1, 2]
        for slot in [*streams, running, other, running]:  # released once only
            assert slot is not None
            await slot.release()
        assert quotas.open_streams("STREAMS_PER_USER", "user:3") == 0
        assert quotas.running_requests("RUNNING_PER_USER", "user:3") == 0
        assert quotas.running_requests("RUNNING_PER_SESSION", "session:s-1") == 0


async def test_a_user_with_too_many_pending_pages_is_refused_a_new_url_elicitation() -> None:
    alice = await sync_to_async(make_user)("alice", "*")
    with limits({"AUTHENTICATION": "django"}, PENDING_ELICITATIONS_PER_USER=1):
        await sync_to_async(services.create)(
            user_id=alice.pk,
            session_id=None,
            request_id=1,
            message="m",
            view_name="mcp_django:elicit-confirm",
            params={},
        )
        client = MCPTestClient()
        await client.force_login(alice)
        await client.initialize(capabilities={"elicitation": {"form": {}, "url": {}}})
        refused = await client.request("tools/call", {"name": "purge_notes", "arguments": {}})
    error = refused["error"]
    assert error["code"] == QUOTA_EXCEEDED
    assert error["data"]["limit"] == "PENDING_ELICITATIONS_PER_USER" and error["data"]["max"] == 1
    assert 0 < error["data"]["retryAfter"] <= 15 * 60  # when the waiting page expires
    assert client.last_server_requests == []  # no page was offered
    assert await Elicitation.objects.acount() == 1


# --- configuration -------------------------------------------------------------------------------


def test_rates_are_parsed_with_their_units() -> None:
    assert quotas.parse_rate("600/minute") == quotas.Rate(600, 60, "600/minute")
    assert quotas.parse_rate("10/5m").period == 300
    assert quotas.parse_rate(" 2 / second ").count == 2
    assert quotas.parse_rate("1/day").period == 86400
    for bad in ("600", "ten/minute", "0/minute", "5/0m", "5/fortnight", 600, None):
        with pytest.raises(ValueError):
            quotas.parse_rate(bad)


def test_cache_keys_are_namespaced_and_hash_what_they_count() -> None:
    key = quotas.cache_key("rate", "TOOL_CALLS", "address:203.0.113.9", "60", "1")
    assert key.startswith("mcp_django:quota:rate:") and "203.0.113.9" not in key and len(key) < 100


def _ids(**quota: Any) -> list[str]:
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "QUOTAS": quota}):
        return [
            e.id
            for e in check_settings()
            if isinstance(e, Error) and e.id in {f"mcp_django.E03{n}" for n in range(5, 10)}
        ]


def test_the_default_quotas_pass_the_checks() -> None:
    assert _ids() == []


@pytest.mark.parametrize(
    ("quota", "expected"),
    [
        ({"TOOL_CALL": "1/minute"}, ["mcp_django.E035"]),
        ({"TOOL_CALLS": "lots"}, ["mcp_django.E036"]),
        ({"NEW_TASKS_PER_USER": 60}, ["mcp_django.E036"]),
        ({"PER_TOOL": {"echo": "1/fortnight"}}, ["mcp_django.E036"]),
        ({"PER_TOOL": ["echo"]}, ["mcp_django.E035"]),
        ({"STREAMS_PER_USER": 0}, ["mcp_django.E037"]),
        ({"SESSIONS_PER_USER": "100"}, ["mcp_django.E037"]),
        ({"CACHE": "nowhere"}, ["mcp_django.E038"]),
        ({"PER_TOOL": {"ecko": "1/minute"}}, ["mcp_django.E039"]),
    ],
)
def test_each_quota_mistake_has_its_check(quota: dict[str, Any], expected: list[str]) -> None:
    assert _ids(**quota) == expected


def test_quotas_that_are_not_a_dict_are_reported() -> None:
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "QUOTAS": ["TOOL_CALLS"]}):
        assert [e.id for e in check_settings() if e.id == "mcp_django.E035"] == ["mcp_django.E035"]


def test_a_dummy_cache_is_reported_since_it_counts_nothing() -> None:
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "none": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"},
    }
    with override_settings(CACHES=caches):
        assert _ids(CACHE="none") == ["mcp_django.E038"]
        assert _ids(CACHE="default") == []


def test_a_users_quotas_are_merged_over_the_defaults() -> None:
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "QUOTAS": {"TOOL_CALLS": "5/second"}}):
        parsed = quotas.current()
    assert parsed.tool_calls == quotas.Rate(5, 1, "5/second")
    assert parsed.streams_per_session == 64 and parsed.sessions_per_user == 100


@pytest.fixture(autouse=True)
def _no_leftover_slots() -> Iterator[None]:
    yield
    # Every test gives back what it took (resume slots are per process, and shared).
    assert not resume_slots.sessions


# --- refusals in the audit trail ---------------------------------------------------------------


async def test_a_call_refused_by_a_rate_is_in_the_audit_trail_as_denied_naming_the_limit(
    clock: Clock,
) -> None:
    from mcp_django.models import ToolCall
    from mcp_django.ops import audit

    with limits(TOOL_CALLS="1/minute"):
        client = await initialized()
        assert (await client.post(call(request_id=1))).status == 200
        assert (await client.post(call(request_id=2))).status == 429
        await audit.aflush()
    rows = [
        r
        async for r in ToolCall.objects.filter(session_id=client.session_id).order_by("started_at")
    ]
    assert [(r.outcome, r.session_id) for r in rows] == [
        ("ok", client.session_id),
        ("denied", client.session_id),
    ]
    assert rows[1].error == "quota: TOOL_CALLS" and rows[1].tool_name == "add"


# --- Redis: counted in one round trip ----------------------------------------------------------


def _real_redis_or_skip() -> str:
    from tests.multiprocess.servers import REDIS_HOST, REDIS_PORT, require_redis

    require_redis()
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/14"


def test_counters_on_django_s_redis_cache_count_expire_and_give_back() -> None:
    location = _real_redis_or_skip()
    caches_setting = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "quota": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": location,
            "KEY_PREFIX": secrets.token_hex(4),
        },
    }
    with override_settings(CACHES=caches_setting):
        counters = _redis_counters()
        cache, key = counters.cache, quotas.cache_key("test", "who")
        assert [counters.hit([key], 30)[0] for _ in range(3)] == [1, 2, 3]
        assert cache.get(key) == 3  # a plain integer, as Django's own incr leaves it
        assert (
            0 < counters.redis.client.ttl(cache.make_and_validate_key(key)) <= 30
        )  # the window's expiry, set once, when it was made
        counters.unhit([key])
        assert cache.get(key) == 2
        cache.delete(key)
        counters.unhit([key])  # a counter that lapsed stays gone (never -1)
        assert cache.get(key) is None
        assert counters.hit([key], 30) == [1]


def test_a_rate_limit_on_redis_refuses_over_the_rate(clock: Clock) -> None:
    location = _real_redis_or_skip()
    caches_setting = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "quota": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": location,
            "KEY_PREFIX": secrets.token_hex(4),
        },
    }
    with override_settings(CACHES=caches_setting), limits(CACHE="quota", TOOL_CALLS="2/minute"):
        caller = quotas.Caller("user:9", 9)
        results = [quotas.check_tool_calls(caller, ["add"])[0] for _ in range(3)]
    assert results[:2] == [None, None]
    assert isinstance(results[2], QuotaExceededError) and results[2].limit == "TOOL_CALLS"


async def test_stream_slots_on_redis_are_taken_refused_and_given_back(clock: Clock) -> None:
    location = _real_redis_or_skip()
    caches_setting = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "quota": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": location,
            "KEY_PREFIX": secrets.token_hex(4),
        },
    }
    with (
        override_settings(CACHES=caches_setting),
        limits(CACHE="quota", STREAMS_PER_USER=1, STREAMS_PER_SESSION=5),
    ):
        caller = quotas.Caller("user:5", 5)
        slot = await quotas.StreamSlot.acquire(caller, "s-1")
        assert slot is not None
        with pytest.raises(QuotaExceededError) as refused:
            await quotas.StreamSlot.acquire(caller, "s-1")
        assert refused.value.limit == "STREAMS_PER_USER"
        assert (
            quotas.open_streams("STREAMS_PER_USER", "user:5") == 1
        )  # the refused one gave back its count
        assert quotas.open_streams("STREAMS_PER_SESSION", "session:s-1") == 1
        await slot.release()
        assert quotas.open_streams("STREAMS_PER_USER", "user:5") == 0
        again = await quotas.StreamSlot.acquire(caller, "s-1")
        assert again is not None
        await again.release()
        await quotas.aclose_clients()


def _redis_counters() -> quota_backends.RedisCounters:
    counters = quota_backends.counters_for("quota")
    assert isinstance(counters, quota_backends.RedisCounters)
    return counters


def _redis_caches(**options: Any) -> dict[str, Any]:
    return {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "quota": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _real_redis_or_skip(),
            "KEY_PREFIX": secrets.token_hex(4),
            **({"OPTIONS": options} if options else {}),
        },
    }


@pytest.mark.parametrize(
    "lean", [True, False], ids=["lean connection", "redis-py's asyncio client"]
)
async def test_on_redis_the_event_loop_counts_with_an_asyncio_client_and_takes_no_thread(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, lean: bool
) -> None:
    async def no_thread(*args: Any) -> Any:
        raise AssertionError("counted in a worker thread")

    monkeypatch.setattr(quota_backends, "_in_thread", no_thread)
    with (
        override_settings(CACHES=_redis_caches()),
        limits(CACHE="quota", TOOL_CALLS="2/minute", STREAMS_PER_USER=1),
    ):
        wires = _redis_counters().wires
        assert wires is not None and wires.usable  # a plain redis:// address, hiredis installed
        wires.usable = lean  # where it cannot serve (TLS, say): redis-py's asyncio client
        caller = quotas.Caller("user:11", 11)
        results = [(await quotas.acheck_tool_calls(caller, ["add"]))[0] for _ in range(3)]
        assert results[:2] == [None, None]
        assert isinstance(results[2], QuotaExceededError) and results[2].limit == "TOOL_CALLS"
        # The same counters the sync client reads: one count per call, the refused one included.
        window = int(clock.now // 60)
        assert (
            quotas.cache_for("quota").get(
                quotas.cache_key("rate", "TOOL_CALLS", "user:11", "60", str(window))
            )
            == 3
        )
        slot = await quotas.StreamSlot.acquire(caller, None)
        assert slot is not None
        with pytest.raises(QuotaExceededError):
            await quotas.StreamSlot.acquire(caller, None)
        await slot.release()
        assert quotas.open_streams("STREAMS_PER_USER", "user:11") == 0
        await quotas.aclose_clients()


def test_on_redis_one_loop_after_another_keeps_one_asyncio_client(clock: Clock) -> None:
    # asyncio.run per call, or a test suite's loop per test: the client of a closed loop goes
    # (with its socket) when the next loop makes its own. A client holds its loop, so weak
    # keys never let one go: every loop kept a client and a connection, without bound.
    with override_settings(CACHES=_redis_caches()), limits(CACHE="quota", TOOL_CALLS="100/minute"):
        caller = quotas.Caller("user:13", 13)
        made: list[weakref.ref[Any]] = []

        async def call() -> None:
            assert (await quotas.acheck_tool_calls(caller, ["add"]))[0] is None
            client = _redis_counters().async_client()
            made.append(weakref.ref(client))
            # Its connection closed here, so that dropping it later warns of no open socket.
            await client.connection_pool.disconnect()
            # The same of the lean connection that counted (mcp_django.redis_wire).
            wires = _redis_counters().wires
            assert wires is not None and wires.get() is not None
            wires.by_loop[asyncio.get_running_loop()].close()
            await asyncio.sleep(0)

        for _ in range(5):
            asyncio.run(call())
        wires = _redis_counters().wires
        assert wires is not None and len(wires.by_loop) == 1  # the last loop's
        clients = _redis_counters().async_clients
        assert len(clients) == 1  # the last loop's
        gc.collect()
        assert [ref() is None for ref in made] == [True, True, True, True, False]
        clients.clear()


async def test_a_redis_cache_with_its_own_parser_counts_in_a_worker_thread(clock: Clock) -> None:
    # A parser (or pool) of the user's may have no asyncio twin: the sync client, off the loop.
    import redis.connection

    custom = next(
        f"redis._parsers.{m}._{m.upper()}Parser"
        for m in ("resp2", "resp3")
        if redis.connection.DefaultParser.__name__ != f"_{m.upper()}Parser"
    )
    caches_setting = _redis_caches(parser_class=custom)
    with override_settings(CACHES=caches_setting), limits(CACHE="quota", TOOL_CALLS="1/minute"):
        assert _redis_counters().async_client() is None
        caller = quotas.Caller("user:12", 12)
        first, second = [(await quotas.acheck_tool_calls(caller, ["add"]))[0] for _ in range(2)]
    assert first is None and isinstance(second, QuotaExceededError)


@pytest.mark.django_db
def test_a_session_cap_counts_live_sessions_only_as_far_as_it_needs() -> None:
    # Every initialize counts the caller's live sessions: bounded by the cap, that count costs
    # the same with a hundred sessions open as with ten thousand.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mcp_django.models import Session

    caller = quotas.Caller("address:10.0.0.9", None, None, "10.0.0.9")
    later = timezone.now() + timedelta(hours=1)
    Session.objects.bulk_create(
        [
            Session(protocol_version="2025-11-25", client_address="10.0.0.9", expires_at=later)
            for _ in range(5)
        ]
        + [
            Session(
                protocol_version="2025-11-25",
                client_address="10.0.0.9",
                expires_at=timezone.now() - timedelta(seconds=1),
            )
        ]
    )
    assert quotas.live_sessions(caller) == 5
    with CaptureQueriesContext(connection) as queries:
        assert quotas.live_sessions(caller, 2) == 3  # enough to know the cap of 2 is reached
    assert "LIMIT 3" in queries[0]["sql"]
