"""What a hostile client can make the server hold is bounded: initialize params, ids and
progress tokens, the session cache, replay, concurrent resumes and the size of a stream."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest
from django.core.checks import Error, Warning
from django.test import override_settings

from mcp_django.checks import check_settings
from mcp_django.conf import mcp_settings
from mcp_django.models import Event, Session
from mcp_django.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    TransportError,
)
from mcp_django.protocol.limits import MAX_SAFE_INTEGER, SERVER_BUSY, depth_exceeds
from mcp_django.stores import DatabaseEventStore, SessionCache, StoredEvent
from mcp_django.testing import MCPTestClient, SSEEvent
from mcp_django.transport.flow import WriteFlow, resume_slots
from tests.conftest import BASE_SETTINGS
from tests.transport.conftest import mcp_settings as settings_override

pytestmark = pytest.mark.django_db(transaction=True)


def _initialize(client_info: Any = None, capabilities: Any = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {} if capabilities is None else capabilities,
            "clientInfo": {"name": "c", "version": "1"} if client_info is None else client_info,
        },
    }


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


# --- initialize ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "says"),
    [
        (
            {"client_info": {"name": "c", "version": "1", "title": "t" * 5000}},
            ['"clientInfo"', "4096"],
        ),
        ({"capabilities": {"experimental": {"blob": "b" * 70_000}}}, ['"capabilities"', "65536"]),
        ({"capabilities": {"experimental": _nested(17)}}, ['"capabilities"', "16 levels"]),
        ({"client_info": {"name": "n" * 201, "version": "1"}}, ['"clientInfo.name"', "200"]),
    ],
)
async def test_oversized_initialize_params_are_refused_and_nothing_is_stored(params, says) -> None:
    client = MCPTestClient()
    response = await client.post(_initialize(**params))
    error = response.json()["error"]
    assert error["code"] == INVALID_PARAMS
    for text in says:
        assert text in error["message"]
    assert "mcp-session-id" not in response.headers
    assert await Session.objects.acount() == 0


async def test_initialize_within_the_limits_is_served() -> None:
    client = MCPTestClient()
    await client.initialize(
        client_info={"name": "c", "version": "1", "title": "t" * 3000},
        capabilities={"experimental": _nested(15)},
    )
    assert await Session.objects.acount() == 1


async def test_initialize_limits_follow_the_settings() -> None:
    with settings_override(MAX_CLIENT_INFO_BYTES=64):
        response = await MCPTestClient().post(_initialize(client_info={"name": "c" * 60}))
    assert response.json()["error"]["code"] == INVALID_PARAMS
    assert "64" in response.json()["error"]["message"]


def test_depth_is_measured_without_recursion() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert depth_exceeds(deep, 16)
    assert not depth_exceeds({"a": [1, {"b": 2}]}, 3)
    assert depth_exceeds({"a": [1, {"b": {}}]}, 3)


# --- request ids and progress tokens -----------------------------------------------------------


def _call(request_id: Any, token: Any) -> dict[str, Any]:
    params = {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": token}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@pytest.mark.parametrize(
    "token",
    ["t" * 257, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 1.5, True, None, ["t"], {"t": 1}],
)
async def test_an_unbounded_progress_token_is_refused_before_the_tool_runs(client, token) -> None:
    response = await client.post(_call(5, token))
    body = response.json()
    assert response.status == 400
    assert body["id"] == 5
    assert body["error"]["code"] == INVALID_PARAMS
    assert "progressToken" in body["error"]["message"]
    assert await Event.objects.filter(session_id=client.session_id).acount() == 0


@pytest.mark.parametrize("token", ["t" * 256, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER])
async def test_a_progress_token_at_the_limit_is_echoed(client, token) -> None:
    await client.request("tools/call", _call(1, token)["params"])
    progress = [
        n["params"]["progressToken"]
        for n in client.last_notifications
        if n["method"] == "notifications/progress"
    ]
    assert progress == [token, token]


async def test_an_overlong_request_id_is_refused_without_echoing_it(client) -> None:
    response = await client.post(_call("i" * 257, 1))
    body = response.json()
    assert response.status == 400
    assert body["id"] is None
    assert body["error"]["code"] == INVALID_REQUEST
    assert await Event.objects.filter(session_id=client.session_id).acount() == 0


async def test_a_batch_member_with_a_bad_token_fails_alone(batch_client) -> None:
    response = await batch_client.post(
        [_call(1, "t" * 300), {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    )
    by_id = {m["id"]: m for m in response.json()}
    assert by_id[1]["error"]["code"] == INVALID_PARAMS
    assert by_id[2]["result"] == {}


@pytest.fixture
async def batch_client() -> MCPTestClient:
    client = MCPTestClient()
    await client.initialize(protocol_version="2025-03-26")
    return client


# --- the session cache ------------------------------------------------------------------------


def _session(n: int, blob: int = 0) -> Session:
    return Session(
        pk=f"s{n}",
        client_info={"name": "c"},
        client_capabilities={"experimental": {"b": "x" * blob}},
    )


def test_the_session_cache_is_bounded_by_entries() -> None:
    cache = SessionCache(max_entries=3, max_bytes=10**9)
    for n in range(5):
        cache.put(_session(n))
    assert len(cache) == 3
    assert cache.get("s0") is None and cache.get("s1") is None
    assert cache.get("s4") is not None


def test_the_session_cache_is_bounded_by_size() -> None:
    one = SessionCache.entry_size(_session(0, blob=10_000))
    cache = SessionCache(max_entries=1000, max_bytes=3 * one)
    for n in range(10):
        cache.put(_session(n, blob=10_000))
    assert len(cache) == 3
    assert cache.size <= 3 * one
    assert [cache.get(f"s{n}") is not None for n in (6, 7, 8, 9)] == [False, True, True, True]
    cache.drop("s9")
    cache.clear()
    assert cache.size == 0


def test_a_session_larger_than_the_cache_is_not_cached() -> None:
    cache = SessionCache(max_entries=10, max_bytes=1000)
    cache.put(_session(0, blob=5000))
    assert len(cache) == 0 and cache.size == 0


def test_session_cache_entries_expire_and_are_swept(monkeypatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("mcp_django.stores.cache.time.monotonic", lambda: clock[0])
    cache = SessionCache(max_entries=100, max_bytes=10**9)
    with settings_override(SESSION_CACHE_SECONDS=30):
        cache.put(_session(0))
        cache.put(_session(1))
        clock[0] += 20
        cache.put(_session(2))
        clock[0] += 15  # s0 and s1 are 35 s old, s2 is 15 s old
        assert cache.get("s0") is None  # expired on read
        cache.put(_session(3))  # and the rest of the expired ones are swept on put
        assert len(cache) == 2
        assert cache.get("s2") is not None and cache.get("s3") is not None


def test_the_session_cache_defaults_come_from_the_settings() -> None:
    with settings_override(SESSION_CACHE_MAX_ENTRIES=7, SESSION_CACHE_MAX_BYTES=12345):
        cache = SessionCache()
        assert (cache.max_entries, cache.max_bytes) == (7, 12345)


# --- replay in pages ----------------------------------------------------------------------------


async def _stream_of(client: MCPTestClient, sizes: list[int]) -> str:
    """Store a POST stream of the session with events of these payload sizes; return its token."""
    from mcp_django.transport.layers import new_stream_token

    stream = new_stream_token(client.session_id)
    events = [
        StoredEvent(n + 1, '"' + "x" * (size - 2) + '"', n + 1 == len(sizes))
        for n, size in enumerate(sizes)
    ]
    await DatabaseEventStore().aappend_many(client.session_id, stream, events)
    return stream


async def test_a_replay_page_is_bounded_by_events_and_bytes(client) -> None:
    stream = await _stream_of(client, [100, 100, 100, 5000, 100])
    store = DatabaseEventStore()
    page = await store.areplay_page(client.session_id, stream, 0, max_events=2, max_bytes=10_000)
    assert [e.seq for e in page] == [1, 2]
    page = await store.areplay_page(client.session_id, stream, 0, max_events=10, max_bytes=250)
    assert [e.seq for e in page] == [1, 2]
    page = await store.areplay_page(client.session_id, stream, 3, max_events=10, max_bytes=250)
    assert [e.seq for e in page] == [4]  # one event larger than a page still comes alone
    assert (
        await store.areplay_page(client.session_id, stream, 5, max_events=10, max_bytes=250) == []
    )


class PagingStore(DatabaseEventStore):
    """Records how the stream is read: page by page, never whole."""

    reads: list[int] = []

    def replay(self, session_id: str, stream: str, after: int) -> list[StoredEvent]:
        raise AssertionError("a resume must not read the whole stream")

    def replay_page(
        self, session_id: str, stream: str, after: int, *, max_events: int, max_bytes: int
    ) -> list[StoredEvent]:
        page = super().replay_page(
            session_id, stream, after, max_events=max_events, max_bytes=max_bytes
        )
        self.reads.append(len(page))
        return page


async def test_a_resume_reads_the_stream_page_by_page(client) -> None:
    stream = await _stream_of(client, [50] * 10)
    PagingStore.reads = []
    with settings_override(EVENT_STORE_CLASS=f"{__name__}.PagingStore", REPLAY_PAGE_EVENTS=3):
        async with await client.open_stream(last_event_id=f"{stream}:2") as resumed:
            items = await resumed.read_until_closed()
    assert [i.id for i in items if isinstance(i, SSEEvent)] == [
        f"{stream}:{n}" for n in range(3, 11)
    ]
    # From one event before the client's last: 2-4, 5-7, 8-10 (the final one ends it).
    assert PagingStore.reads == [3, 3, 3]


async def test_a_resume_after_the_final_event_ends_at_once(client) -> None:
    stream = await _stream_of(client, [50] * 4)
    async with await client.open_stream(last_event_id=f"{stream}:4") as resumed:
        items = await resumed.read_until_closed()
    assert not [i for i in items if isinstance(i, SSEEvent) and i.data]


# --- concurrent resumes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "status"),
    [({"MAX_RESUMES_PER_SESSION": 1}, 429), ({"MAX_RESUMES": 1}, 503)],
)
async def test_a_resume_over_the_limit_is_refused_with_retry_after(client, limits, status) -> None:
    stream = await _stream_of(client, [50] * 3)
    with settings_override(**limits):
        resume_slots.acquire(client.session_id, None, mcp_settings)  # one resume already replaying
        try:
            refused = await client.open_stream(last_event_id=f"{stream}:1")
        finally:
            resume_slots.release(client.session_id, None)
    assert refused.status == status
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == SERVER_BUSY
    async with await client.open_stream(last_event_id=f"{stream}:1") as resumed:
        assert resumed.status == 200
        await resumed.read_until_closed()
    assert resume_slots.total == 0 and not resume_slots.sessions


async def test_a_user_over_the_per_user_limit_is_refused(client) -> None:
    from django.contrib.auth.models import User

    from tests.conftest import make_user

    user = await asyncio.to_thread(make_user, "resumer")
    assert isinstance(user, User)
    with settings_override(MAX_RESUMES_PER_USER=1):
        resume_slots.acquire("other-session", user.pk, mcp_settings)
        try:
            with pytest.raises(TransportError) as refused:
                resume_slots.acquire("another-session", user.pk, mcp_settings)
        finally:
            resume_slots.release("other-session", user.pk)
    assert refused.value.status == 429
    assert refused.value.code == SERVER_BUSY
    assert "user" in refused.value.message
    assert resume_slots.total == 0


# --- waiting for the socket (Daphne) ------------------------------------------------------------


class FakeChannel:
    _waitingForTransport = False

    def __init__(self) -> None:
        self._requestProducer: Any = None

    def unregisterProducer(self) -> None:
        self._requestProducer = None


class FakeTwistedRequest:
    def __init__(self) -> None:
        self.channel = FakeChannel()
        self.producer: Any = None

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        assert streaming
        self.producer = producer
        self.channel._requestProducer = producer


FakeServer = type(
    "Server",
    (),
    {"__module__": "daphne.server", "handle_reply": lambda self, protocol, message: None},
)


async def test_the_flow_waits_for_daphnes_socket_to_drain() -> None:
    request = FakeTwistedRequest()
    flow = WriteFlow(functools.partial(FakeServer().handle_reply, request))
    assert flow.supported and request.producer is flow
    assert await flow.drain(timeout=5)
    flow.pauseProducing()  # Twisted: the socket buffer is full
    waiter = asyncio.ensure_future(flow.drain(timeout=5))
    await asyncio.sleep(0)
    assert not waiter.done()
    flow.resumeProducing()  # Twisted: drained
    assert await waiter
    flow.pauseProducing()
    assert not await flow.drain(timeout=0.01)  # a client that never reads is given up on
    flow.stopProducing()  # the connection is lost
    assert flow.lost and await flow.drain(timeout=5)
    flow.close()
    assert request.producer is None and request.channel._requestProducer is None


class StalledFlow:
    """A socket that never drains: every wait gives up (as after SSE_WRITE_TIMEOUT)."""

    lost = False

    def __init__(self, send: Any) -> None: ...

    async def drain(self, timeout: float) -> bool:
        return False

    def close(self) -> None: ...


async def test_a_resume_to_a_client_that_reads_nothing_stops_after_one_page(
    client, monkeypatch
) -> None:
    stream = await _stream_of(client, [50] * 10)
    monkeypatch.setattr("mcp_django.transport.sse.WriteFlow", StalledFlow)
    with settings_override(REPLAY_PAGE_EVENTS=4):
        async with await client.open_stream(last_event_id=f"{stream}:0") as resumed:
            items = await resumed.read_until_closed()
    # One page written, then the connection closed; the rest stays stored for a later resume.
    assert [i.id for i in items if isinstance(i, SSEEvent)] == [
        f"{stream}:{n}" for n in range(1, 5)
    ]
    assert resume_slots.total == 0


async def test_the_flow_is_a_no_op_under_other_servers() -> None:
    async def send(message: dict[str, Any]) -> None: ...

    flow = WriteFlow(send)
    assert not flow.supported
    assert await flow.drain(timeout=0)
    flow.close()


# --- the size of one stream ---------------------------------------------------------------------


async def test_a_stream_that_would_exceed_its_cap_ends_with_an_error_response(client) -> None:
    with settings_override(MAX_STREAM_EVENTS=5):
        response = await client.request(
            "tools/call", {"name": "progress", "arguments": {"steps": 50}}
        )
    assert response["error"]["code"] == INTERNAL_ERROR
    assert "exceeded its limit (5 events" in response["error"]["message"]
    stored = await Event.objects.filter(session_id=client.session_id).acount()
    assert stored == 6  # five events, then the error response


async def test_a_response_larger_than_the_stream_cap_is_replaced_by_an_error(client) -> None:
    with settings_override(MAX_STREAM_BYTES=200, RESPONSE_MODE="sse"):
        response = await client.request(
            "tools/call", {"name": "echo", "arguments": {"text": "e" * 500}}
        )
    assert response["error"]["code"] == INTERNAL_ERROR
    assert "200 bytes" in response["error"]["message"]


# --- checks ---------------------------------------------------------------------------------------


def _check(**overrides: Any) -> list[Any]:
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, **overrides}):
        return [
            m for m in check_settings() if m.id.startswith(("mcp_django.E15", "mcp_django.W15"))
        ]


def test_limits_must_be_positive_integers() -> None:
    messages = _check(MAX_RESUMES=0, REPLAY_PAGE_BYTES="big")
    assert [(type(m), m.id) for m in messages] == [(Error, "mcp_django.E150")] * 2
    assert all(m.hint for m in messages)


def test_the_write_timeout_must_be_positive() -> None:
    messages = _check(SSE_WRITE_TIMEOUT=0)
    assert [(type(m), m.id) for m in messages] == [(Error, "mcp_django.E151")]
    assert messages[0].hint


def test_a_replay_page_larger_than_a_stream_is_warned_about() -> None:
    messages = _check(REPLAY_PAGE_BYTES=2000, MAX_STREAM_BYTES=1000)
    assert [(type(m), m.id) for m in messages] == [(Warning, "mcp_django.W150")]
    assert messages[0].hint


def test_client_limits_above_the_body_size_are_warned_about() -> None:
    messages = _check(
        MAX_BODY_SIZE=1000, MAX_CLIENT_INFO_BYTES=2000, MAX_CLIENT_CAPABILITIES_BYTES=500
    )
    assert [(type(m), m.id) for m in messages] == [(Warning, "mcp_django.W151")]
    assert messages[0].hint


def test_the_defaults_pass_the_checks() -> None:
    assert _check() == []
