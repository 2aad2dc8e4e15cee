"""Hostile-client part B: streams that end, credentials re-checked, one message on one connection."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from mcp_django.models import Event, RunningRequest, ServerRequest
from mcp_django.protocol.errors import INTERNAL_ERROR
from mcp_django.stores import ORPHAN_MESSAGE
from mcp_django.testing import EventStream, MCPTestClient, SSEEvent, _Exchange
from mcp_django.transport.layers import get_layer, new_stream_token
from mcp_django.transport.process import RUNNING, SESSIONS_GROUP, ProcessChannel, process_channel
from tests.polling import until

from .conftest import mcp_settings

pytestmark = pytest.mark.django_db(transaction=True)

# Bounds for reads that must succeed; none of them is a timing assertion.
WAIT = 5


@pytest.fixture
async def asker() -> MCPTestClient:
    """A client that can be asked (sampling, elicitation): the ``ask`` tool waits on it."""
    client = MCPTestClient()
    await client.initialize(capabilities={"sampling": {}, "elicitation": {}})
    return client


async def open_post_stream(client: MCPTestClient, message: dict[str, Any]) -> EventStream:
    """POST a request and keep its SSE answer open, to read it event by event."""
    exchange = _Exchange(
        client.application, client.scope("POST", client.build_headers("POST")), client.timeout
    )
    await exchange.start(orjson.dumps(message))
    stream = EventStream(exchange)
    assert stream.status == 200 and stream.is_sse
    return stream


async def ask(client: MCPTestClient, request_id: int) -> tuple[EventStream, SSEEvent]:
    """Start the ``ask`` tool on a POST stream; return the stream and its sampling request."""
    stream = await open_post_stream(
        client,
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "ask", "arguments": {"question": "q"}},
        },
    )
    await stream.next_event(timeout=WAIT)  # priming
    sampling = await stream.next_event(timeout=WAIT)
    assert sampling.json()["method"] == "sampling/createMessage"
    return stream, sampling


def messages(items: list[Any]) -> list[Any]:
    return [item.json() for item in items if isinstance(item, SSEEvent) and item.data]


# --- cancellation stores a closing event -------------------------------------------------


async def test_resuming_a_cancelled_request_replays_and_then_ends(asker):
    stream, sampling = await ask(asker, 7)
    async with stream:
        assert (await asker.notify("notifications/cancelled", {"requestId": 7})).status == 202
        await stream.read_until_closed(timeout=WAIT)
    async with await asker.open_stream(last_event_id=sampling.id) as resumed:
        replayed = await resumed.read_until_closed(timeout=WAIT)
    assert resumed.closed
    # No response for a cancelled request (cancellation spec); the tool's own cancel goes out.
    assert [m.get("method") for m in messages(replayed)] == ["notifications/cancelled"]


# --- orphans: requests whose process died -------------------------------------------------


async def write_orphan(
    session_id: str, request_id: Any, *, lease: timedelta = timedelta(seconds=-1)
) -> str:
    stream = new_stream_token(session_id)
    await RunningRequest.objects.acreate(
        session_id=session_id,
        stream=stream,
        request_id=orjson.dumps(request_id).decode(),
        owner="dead-process",
        lease_until=timezone.now() + lease,
    )
    return stream


async def test_resuming_the_stream_of_a_dead_process_ends_it_with_an_error(asker):
    stream = await write_orphan(asker.session_id, "r-1")
    async with await asker.open_stream(last_event_id=f"{stream}:0") as resumed:
        items = await resumed.read_until_closed(timeout=WAIT)
    [error] = messages(items)
    assert error["id"] == "r-1"
    assert error["error"]["code"] == INTERNAL_ERROR
    assert error["error"]["message"] == ORPHAN_MESSAGE
    assert not await RunningRequest.objects.filter(stream=stream).aexists()


async def test_a_starting_process_ends_the_streams_of_lapsed_requests_and_spares_live_ones(asker):
    dead = await write_orphan(asker.session_id, 1)
    alive = await write_orphan(asker.session_id, 2, lease=timedelta(minutes=5))
    starting = ProcessChannel()
    await starting.ensure()
    assert starting.sweeper is not None
    await asyncio.wait_for(starting.sweeper, WAIT)
    [event] = [e async for e in Event.objects.filter(stream=dead)]
    assert event.closes_stream and orjson.loads(event.payload)["error"]["code"] == INTERNAL_ERROR
    assert not await Event.objects.filter(stream=alive).aexists()
    assert await RunningRequest.objects.filter(stream=alive).aexists()
    for task in (starting.task, starting.heartbeat):
        assert task is not None
        task.cancel()


async def test_a_running_request_is_claimed_while_it_runs_and_released_after(asker):
    stream, _ = await ask(asker, 8)
    async with stream:
        # Claims are written in batches, Leases.WRITE_DELAY after the request starts.
        async def claimed() -> list[RunningRequest]:
            return [r async for r in RunningRequest.objects.all()]

        [row] = await until(claimed, WAIT, failure="the running request was never claimed")
        assert (row.request_id, row.lease_until > timezone.now()) == ("8", True)
        await asker.notify("notifications/cancelled", {"requestId": 8})
        await stream.read_until_closed(timeout=WAIT)
    assert not await RunningRequest.objects.aexists()


async def test_a_request_answered_within_the_write_delay_is_never_claimed_in_the_database(asker):
    from mcp_django.transport.process import leases

    with mcp_settings(RESPONSE_MODE="sse"):
        assert await asker.call("ping", {}) == {}
    writer = leases._writer
    assert (
        writer is not None and writer.get_loop() is asyncio.get_running_loop()
    )  # the ping was claimed ...
    await asyncio.wait_for(writer, WAIT)  # ... and the batch that would have held it is written
    assert await Event.objects.filter(
        session_id=asker.session_id
    ).aexists()  # it was answered on a stream
    assert not await RunningRequest.objects.aexists()


# --- pending server-to-client requests expire ---------------------------------------------


async def test_stale_pending_server_requests_expire_and_old_ones_are_pruned(asker):
    old = timezone.now() - timedelta(hours=2)
    stale = await ServerRequest.objects.acreate(
        session_id=asker.session_id,
        request_id="srv-old",
        method="ping",
        channel_name="x",
        created_at=old,
    )
    answered = await ServerRequest.objects.acreate(
        session_id=asker.session_id,
        request_id="srv-done",
        method="ping",
        channel_name="x",
        created_at=old,
        state=ServerRequest.State.ANSWERED,
    )
    fresh = await ServerRequest.objects.acreate(
        session_id=asker.session_id, request_id="srv-new", method="ping", channel_name="x"
    )
    with mcp_settings(SERVER_REQUEST_TTL=3600):
        await sync_to_async(call_command)("mcp_clearsessions", stdout=None)
    # The stale one was expired, then pruned with the old answered one; the fresh one waits on.
    assert [(r.request_id, r.state) async for r in ServerRequest.objects.all()] == [
        (fresh.request_id, ServerRequest.State.PENDING)
    ]
    assert {stale.request_id, answered.request_id}.isdisjoint(
        {r.request_id async for r in ServerRequest.objects.all()}
    )


async def test_an_answer_to_an_expired_server_request_reaches_nobody(asker):
    from mcp_django.transport.streams import deliver_response

    await ServerRequest.objects.acreate(
        session_id=asker.session_id,
        request_id="srv-late",
        method="ping",
        channel_name="x",
        created_at=timezone.now() - timedelta(hours=2),
    )
    with mcp_settings(SERVER_REQUEST_TTL=60):
        from mcp_django.transport.process import sweep

        await sweep()
    assert not await deliver_response(asker.session_id, "srv-late", {"result": {}})


# --- credentials are re-checked on open streams --------------------------------------------


async def test_an_open_stream_ends_once_its_django_session_is_logged_out():
    from django.contrib.sessions.models import Session as DjangoSession

    user = await get_user_model().objects.acreate_user("reauth-user", password="pw")
    with mcp_settings(AUTHENTICATION="django", SSE_REAUTH_SECONDS=0.02):
        client = MCPTestClient()
        await client.force_login(user)
        await client.initialize()
        async with await client.open_stream() as stream:
            await stream.next_event(timeout=WAIT)
            await DjangoSession.objects.all().adelete()
            await stream.read_until_closed(timeout=WAIT)
        assert stream.closed


async def test_an_open_stream_stays_while_its_credential_holds():
    user = await get_user_model().objects.acreate_user("reauth-kept", password="pw")
    with mcp_settings(AUTHENTICATION="django", SSE_REAUTH_SECONDS=0.01, SSE_KEEPALIVE_SECONDS=0.05):
        client = MCPTestClient()
        await client.force_login(user)
        await client.initialize()
        async with await client.open_stream() as stream:
            await stream.next_event(timeout=WAIT)
            # Several re-checks pass while the stream waits for its keep-alive.
            await stream.next_comment(timeout=WAIT)
            assert not stream.closed


async def test_an_open_stream_ends_once_its_oauth_token_is_revoked():
    from oauth2_provider.models import AccessToken

    from tests.auth.test_oauth import OAUTH, _bearer, token

    with mcp_settings(**OAUTH, SSE_REAUTH_SECONDS=0.02):
        raw = await token("reauth-oauth")
        client = MCPTestClient(headers=_bearer(raw))
        await client.initialize()
        async with await client.open_stream() as stream:
            await stream.next_event(timeout=WAIT)
            await AccessToken.objects.filter(token=raw).adelete()  # DOT revokes by deleting
            await stream.read_until_closed(timeout=WAIT)
        assert stream.closed


async def test_a_post_stream_ends_once_its_oauth_token_expires():
    from oauth2_provider.models import AccessToken

    from tests.auth.test_oauth import OAUTH, _bearer, token

    with mcp_settings(**OAUTH, SSE_REAUTH_SECONDS=0.02):
        raw = await token("reauth-expiry")
        client = MCPTestClient(headers=_bearer(raw))
        await client.initialize(capabilities={"sampling": {}, "elicitation": {}})
        stream, _ = await ask(client, 11)
        async with stream:
            await AccessToken.objects.filter(token=raw).aupdate(
                expires=timezone.now() - timedelta(seconds=1)
            )
            await stream.read_until_closed(timeout=WAIT)
        assert stream.closed
        # The request goes on (a closed connection is no cancel); end it with the session.
        await AccessToken.objects.filter(token=raw).aupdate(
            expires=timezone.now() + timedelta(hours=1)
        )
        task = RUNNING[(client.session_id, "11")]
        await client.delete()
        done, _ = await asyncio.wait({task}, timeout=WAIT)
        assert task in done


# --- DELETE cancels running requests ---------------------------------------------------------


async def test_delete_cancels_the_sessions_running_tool_and_ends_its_stream(asker):
    stream, _ = await ask(asker, 9)
    task = RUNNING[(asker.session_id, "9")]
    async with stream:
        assert (await asker.delete()).status == 204
        items = await stream.read_until_closed(timeout=WAIT)
    # asyncio.wait, not wait_for: a timeout must not cancel the task itself.
    done, _ = await asyncio.wait({task}, timeout=WAIT)
    assert task in done
    assert not [m for m in messages(items) if m.get("id") == 9]
    # The tool saw the cancellation: its wait for the client was cancelled.
    assert [r.state async for r in ServerRequest.objects.all()] == [ServerRequest.State.CANCELLED]
    assert not [key for key in RUNNING if key[0] == asker.session_id]


async def test_a_session_cancel_reaches_running_requests_on_another_process():
    cancelled = asyncio.Event()

    async def tool() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.get_running_loop().create_task(tool())
    RUNNING[("other-session", "1")] = task
    try:
        await process_channel.ensure()
        # What cancel_session sends from the process that answered the DELETE.
        await get_layer().group_send(
            SESSIONS_GROUP, {"type": "mcp.cancel.session", "session": "other-session"}
        )
        await asyncio.wait_for(cancelled.wait(), WAIT)
    finally:
        RUNNING.pop(("other-session", "1"), None)
        task.cancel()


# --- the newest connection takes a POST stream over ---------------------------------------


async def test_a_resumed_post_stream_goes_out_on_the_newest_connection_only(asker):
    post, sampling = await ask(asker, 10)
    async with post:
        first = await asker.open_stream(last_event_id=sampling.id)
        async with first:
            await post.read_until_closed(timeout=WAIT)
            second = await asker.open_stream(last_event_id=sampling.id)
            async with second:
                await first.read_until_closed(timeout=WAIT)
                answer = {
                    "role": "assistant",
                    "content": {"type": "text", "text": "hi"},
                    "model": "m",
                }
                assert (
                    await asker.post(
                        {"jsonrpc": "2.0", "id": sampling.json()["id"], "result": answer}
                    )
                ).status == 202
                later = await second.next_message(timeout=WAIT)
                assert later["method"] == "elicitation/create"
    # Both older connections ended before the later event existed: it went out once.
    assert post.closed and first.closed
    await asker.delete()
