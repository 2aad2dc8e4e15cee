"""Live sessions across processes: each test lets process 1 and process 2 share one session.

With the ``postgres-redis`` deployment the two are separate daphne processes, so every
assertion proves that the database and the channel layer carry the session between them.
With ``sqlite-memory`` they are the same process: the embedded defaults must behave the same.
"""

from __future__ import annotations

import asyncio
import json
import secrets

import mcp
import pytest

from tests.polling import until

from .sdk import SplitTransport, accept_reservation, sdk_session, wait_for_standalone_stream
from .servers import Deployment
from .wire import RawClient

pytestmark = pytest.mark.multiprocess


def payloads(messages: list[dict]) -> list[str]:
    return [m.get("method", f"response {m.get('id')}") for m in messages]


# -- server-to-client requests --------------------------------------------------------------------


async def test_elicitation_answered_on_process_2_completes_the_tool_on_process_1(
    deployment: Deployment, raw: RawClient
) -> None:
    session = await raw.initialize(deployment.p1.url)
    async with await raw.call_stream(
        deployment.p1.url, session, "reserve-1", "confirm_reservation", {"title": "Dune"}
    ) as stream:
        _, ask = await stream.next_message()
        assert ask["method"] == "elicitation/create"
        assert ask["params"]["message"] == "Reserve Dune?"
        assert ask["params"]["mode"] == "form"
        assert set(ask["params"]["requestedSchema"]["properties"]) == {"confirm", "note"}
        assert await deployment.db.server_request_state(session, ask["id"]) == "pending"

        answer = {
            "jsonrpc": "2.0",
            "id": ask["id"],
            "result": {"action": "accept", "content": {"confirm": True, "note": "by Friday"}},
        }
        response = await raw.post(deployment.p2.url, session, answer)
        assert response.status_code == 202

        before, final = await stream.until_response("reserve-1")
        assert final["result"]["structuredContent"] == {
            "title": "Dune",
            "action": "accept",
            "confirmed": True,
            "note": "by Friday",
        }
        assert not final["result"].get("isError")
        assert payloads(before) == ["notifications/message"]
        assert await stream.rest() == []  # the response closes the stream
    assert await deployment.db.server_request_state(session, ask["id"]) == "answered"


async def test_elicitation_survives_a_reconnect_to_process_2(
    deployment: Deployment, raw: RawClient
) -> None:
    session = await raw.initialize(deployment.p1.url)
    stream = await raw.call_stream(
        deployment.p1.url, session, "reserve-2", "confirm_reservation", {"title": "Emma"}
    )
    try:
        asked, ask = await stream.next_message()
        assert ask["method"] == "elicitation/create"
    finally:
        await stream.close()  # the user thinks it over; the connection drops meanwhile

    async with await raw.get_stream(deployment.p2.url, session, last_event_id=asked.id) as resumed:
        decline = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}}
        assert (await raw.post(deployment.p2.url, session, decline)).status_code == 202
        _, final = await resumed.until_response("reserve-2")
    assert final["result"]["structuredContent"] == {
        "title": "Emma",
        "action": "decline",
        "confirmed": False,
        "note": "",
    }
    assert [e.seq for e in resumed.received if e.data] == [asked.seq + 1]


# -- session-wide notifications -----------------------------------------------------------------


async def test_list_changed_reaches_the_get_stream_held_by_process_2(
    deployment: Deployment, raw: RawClient
) -> None:
    session = await raw.initialize(deployment.p1.url)
    async with await raw.get_stream(deployment.p2.url, session) as standalone:
        priming = await standalone.next_event()
        assert (
            priming.data == "" and priming.stream == "get"
        )  # held, and joined to the session's group

        # From any code: a management command, in a process that serves nothing.
        out = await deployment.amanage("announce_change", "tools")
        assert "notifications/tools/list_changed sent to" in out
        if deployment.shared_layer:
            # Live, through Redis, without waiting for anything else.
            event, message = await standalone.next_message()
            assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            assert event.seq == priming.seq + 1

        # From a tool call answered by process 1.
        result = await raw.request(
            deployment.p1.url,
            session,
            "tools/call",
            {"name": "announce_list_changed", "arguments": {"kind": "tools"}},
        )
        assert result["structuredContent"]["method"] == "notifications/tools/list_changed"
        assert result["structuredContent"]["sessions"] >= 1

        # With the in-memory layer the command's event could not be announced live: it was
        # stored, and the held stream fills the gap from the store when the next one arrives.
        seen = [event for event in standalone.received if event.data]
        while len(seen) < 2:
            event, _ = await standalone.next_message()
            seen.append(event)
        assert [e.json()["method"] for e in seen] == ["notifications/tools/list_changed"] * 2
        assert [e.seq for e in seen] == [priming.seq + 1, priming.seq + 2]
    stored = await deployment.db.events(session, "get")
    assert [(seq, payload) for seq, payload, _ in stored[-2:]] == [(e.seq, e.data) for e in seen]


async def test_announcements_from_many_processes_at_once_are_numbered_without_gaps(
    deployment: Deployment, raw: RawClient
) -> None:
    """Tool calls on both processes and management commands append to the same GET streams
    at the same time; every event gets its own number (on SQLite too, where a writer that
    read first used to fail with "database is locked")."""
    session = await raw.initialize(deployment.p1.url)
    for _ in range(10):  # more sessions: every announcement is appended to each of them
        await raw.initialize(deployment.p2.url)
    calls, commands = 30, 4
    async with await raw.get_stream(deployment.p2.url, session) as standalone:
        priming = await standalone.next_event()
        announce = {"name": "announce_list_changed", "arguments": {"kind": "tools"}}
        await asyncio.gather(
            *(
                raw.request(
                    (deployment.p1, deployment.p2)[i % 2].url, session, "tools/call", announce
                )
                for i in range(calls)
            ),
            *(
                deployment.amanage("announce_change", "tools", "prompts", "resources")
                for _ in range(commands)
            ),
        )
        # One more from a server, so a stream on the in-memory layer fills in the commands' events.
        await raw.request(deployment.p1.url, session, "tools/call", announce)
        total = calls + 3 * commands + 1
        seqs = []
        while len(seqs) < total:
            event, _ = await standalone.next_message()
            seqs.append(event.seq)
    assert seqs == list(range(priming.seq + 1, priming.seq + 1 + total))
    assert [seq for seq, _, _ in await deployment.db.events(session, "get")] == list(
        range(1, priming.seq + 1 + total)
    )


async def test_log_level_set_on_process_2_applies_to_a_tool_on_process_1(
    deployment: Deployment, raw: RawClient
) -> None:
    session = await raw.initialize(deployment.p1.url)
    await raw.request(deployment.p2.url, session, "logging/setLevel", {"level": "warning"})
    async with await raw.call_stream(
        deployment.p1.url,
        session,
        "count-3",
        "countdown",
        {"n": 3, "interval_ms": 50},
        progress_token=3,
    ) as stream:
        before, final = await stream.until_response("count-3")
    assert payloads(before) == ["notifications/progress"] * 3  # no info-level log messages
    assert final["result"]["content"][0]["text"] == "liftoff"


async def test_streamed_calls_leave_no_member_behind_in_the_layers_groups(
    deployment: Deployment, raw: RawClient
) -> None:
    """A POST stream's connection leaves its groups as its last events are announced (in that
    round trip, layers.group_send's ``last``), or on its way out: nothing stays in Redis."""
    if not deployment.shared_layer:
        pytest.skip("the in-memory layer keeps no group in Redis")
    import redis.asyncio

    session = await raw.initialize(deployment.p1.url)
    for server in (deployment.p1, deployment.p2):
        async with await raw.call_stream(
            server.url, session, "count", "countdown", {"n": 2, "interval_ms": 10}, progress_token=1
        ) as stream:
            _, final = await stream.until_response("count")
        assert final["result"]["content"][0]["text"] == "liftoff"
    client = redis.asyncio.Redis.from_url(deployment.env["REDIS_URL"])
    try:

        async def members() -> dict[bytes, int]:
            keys = [
                key
                async for key in client.scan_iter(match=b"*group:mcp.*")
                if session.encode() in key or b"mcp.stream." in key
            ]
            return {key: await client.zcard(key) for key in keys}

        async def none_left() -> bool:
            return not any((await members()).values())

        # The connection's own way out may still be under way when the client has read the end.
        await until(none_left, failure="a streamed call's connection stayed in a group")
    finally:
        await client.aclose()


async def test_delete_on_process_1_ends_the_stream_held_by_process_2(
    deployment: Deployment, raw: RawClient
) -> None:
    session = await raw.initialize(deployment.p1.url)
    async with await raw.get_stream(deployment.p2.url, session) as standalone:
        await standalone.next_event()  # priming: the stream is held
        response = await raw.http.delete(deployment.p1.url, headers=raw.headers(session))
        assert response.status_code == 204
        assert await standalone.rest() == []
    response = await raw.post(
        deployment.p2.url, session, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    )
    assert response.status_code == 404


# -- cancellation ------------------------------------------------------------------------------


async def test_cancel_posted_to_process_2_stops_long_task_on_process_1(
    deployment: Deployment, raw: RawClient
) -> None:
    session = await raw.initialize(deployment.p1.url)
    async with await raw.call_stream(
        deployment.p1.url, session, "long-1", "long_task", {"seconds": 30}, progress_token="p"
    ) as stream:
        _, started = await stream.next_message()
        assert started["method"] == "notifications/message"
        run = started["params"]["data"]["run"]
        assert (await deployment.db.task_run(run))["status"] == "running"

        await raw.notify(
            deployment.p2.url,
            session,
            "notifications/cancelled",
            {"requestId": "long-1", "reason": "changed my mind"},
        )

        rest = await stream.rest()  # the stream ends ...
        messages = [e.json() for e in rest if e.data]
        assert all("method" in m for m in messages), messages  # ... with no response for long-1
    ended = await deployment.db.wait_task_run(run)
    assert ended["status"] == "cancelled"
    assert ended["steps_done"] < ended["steps_total"]
    assert ended["finished_at"] is not None
    events = await deployment.db.events(session, stream.received[0].stream)
    # The stream ends with a stored closing marker (no payload), so a resume ends too.
    assert events[-1][1] == "" and events[-1][2]
    stored = [json.loads(p) for _, p, _ in events if p]
    assert not [m for m in stored if "method" not in m]  # nothing stored as a response either
    # Process 2 sees the same record through MCP.
    contents = await raw.request(
        deployment.p2.url, session, "resources/read", {"uri": f"live://runs/{run}"}
    )
    assert json.loads(contents["contents"][0]["text"])["status"] == "cancelled"


async def test_cancel_on_process_2_while_the_tool_waits_for_an_elicitation_answer(
    deployment: Deployment, raw: RawClient
) -> None:
    session = await raw.initialize(deployment.p1.url)
    async with await raw.call_stream(
        deployment.p1.url, session, "reserve-3", "confirm_reservation", {"title": "Kim"}
    ) as stream:
        _, ask = await stream.next_message()
        assert ask["method"] == "elicitation/create"

        await raw.notify(
            deployment.p2.url, session, "notifications/cancelled", {"requestId": "reserve-3"}
        )

        rest = [e.json() for e in await stream.rest() if e.data]
    # The server withdraws its own question, and answers nothing to the cancelled call.
    assert rest == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": ask["id"], "reason": "cancelled"},
        }
    ]
    assert await deployment.db.server_request_state(session, ask["id"]) == "cancelled"
    # A late answer (to any process) is accepted and ignored.
    late = {
        "jsonrpc": "2.0",
        "id": ask["id"],
        "result": {"action": "accept", "content": {"confirm": True}},
    }
    assert (await raw.post(deployment.p2.url, session, late)).status_code == 202
    assert await deployment.db.server_request_state(session, ask["id"]) == "cancelled"


async def test_client_disconnect_does_not_cancel_and_the_answer_waits_on_process_2(
    deployment: Deployment, raw: RawClient
) -> None:
    session = await raw.initialize(deployment.p1.url)
    stream = await raw.call_stream(
        deployment.p1.url, session, "long-2", "long_task", {"seconds": 1.5}, progress_token="q"
    )
    try:
        last, started = await stream.next_message()
        run = started["params"]["data"]["run"]
    finally:
        await stream.close()  # the client goes away without a word

    ended = await deployment.db.wait_task_run(run)
    assert ended["status"] == "done"
    assert ended["steps_done"] == ended["steps_total"] == 15

    async with await raw.get_stream(deployment.p2.url, session, last_event_id=last.id) as resumed:
        before, final = await resumed.until_response("long-2")
        assert final["result"]["structuredContent"]["status"] == "done"
        assert [
            m["params"]["progress"] for m in before if m["method"] == "notifications/progress"
        ] == [10, 15]
        assert await resumed.rest() == []


async def test_stream_resumed_on_process_2_follows_the_tool_still_running_on_process_1(
    deployment: Deployment, raw: RawClient
) -> None:
    session = await raw.initialize(deployment.p1.url)
    stream = await raw.call_stream(
        deployment.p1.url,
        session,
        "count-2",
        "countdown",
        {"n": 15, "interval_ms": 100},
        progress_token="f",
    )
    try:
        for _ in range(4):
            await stream.next_message()
    finally:
        await stream.close()
    first = [e for e in stream.received if e.data]
    token = stream.received[0].stream

    async with await raw.get_stream(
        deployment.p2.url, session, last_event_id=first[-1].id
    ) as resumed:
        before, final = await resumed.until_response("count-2")
        assert await resumed.rest() == []  # the response ends the resumed stream too
    assert final["result"]["content"] == [{"type": "text", "text": "liftoff"}]
    every = first + [e for e in resumed.received if e.data]
    assert [e.seq for e in every] == list(
        range(1, 2 * 15 + 2)
    )  # replayed, then followed live: once each, in order
    assert [e.data for e in every] == [
        payload for _, payload, _ in await deployment.db.events(session, token)
    ]
    assert [
        m["params"]["progress"]
        for m in (json.loads(e.data) for e in every)
        if m.get("method") == "notifications/progress"
    ] == list(range(1, 16))


# -- a process dies ----------------------------------------------------------------------------


async def test_streams_resume_on_process_2_after_process_1_is_killed(
    deployment: Deployment, raw: RawClient
) -> None:
    """Two countdowns on process 1: the client stays connected to one until the kill, and
    dropped the other earlier (so process 1 stored events the client has not seen)."""
    session = await raw.initialize(deployment.p1.url)
    arguments = {"n": 40, "interval_ms": 100}
    connected = await raw.call_stream(
        deployment.p1.url, session, "count-a", "countdown", arguments, progress_token="a"
    )
    dropped = await raw.call_stream(
        deployment.p1.url, session, "count-b", "countdown", arguments, progress_token="b"
    )
    try:
        for stream in (connected, dropped):
            while len([e for e in stream.received if e.data]) < 6:
                await stream.next_message()
        await dropped.close()
        dropped_token = dropped.received[0].stream
        await deployment.db.wait_events(session, dropped_token, at_least=len(dropped.received) + 6)

        deployment.p1.kill()  # SIGKILL, mid-countdown
        await connected.rest()  # whatever had arrived when the connection broke
    finally:
        await connected.close()
        await dropped.close()

    # Resume on the other process (or, with one process, on the same one started again).
    survivor = deployment.p2 if deployment.multiprocess else deployment.p1.restart()
    replayed = {}
    for stream in (connected, dropped):
        received = [e for e in stream.received if e.data]
        token = stream.received[0].stream
        stored = await deployment.db.events(session, token)
        assert 6 <= len(received) <= len(stored) < 2 * 40 + 1, (
            "the kill was meant to land mid-countdown"
        )
        assert not any(closes for _, _, closes in stored)
        resumed_events = []
        async with await raw.get_stream(
            survivor.url, session, last_event_id=received[-1].id
        ) as resumed:
            while len(received) + len(resumed_events) < len(stored):
                event, _ = await resumed.next_message()
                resumed_events.append(event)
        every = received + resumed_events
        assert [e.seq for e in every] == list(
            range(1, len(stored) + 1)
        )  # all of them, in order, none twice
        assert [e.data for e in every] == [payload for _, payload, _ in stored]
        assert {e.stream for e in every} == {token}
        methods = [json.loads(e.data)["method"] for e in every]
        assert methods == ["notifications/message", "notifications/progress"] * (
            len(every) // 2
        ) + ["notifications/message"] * (len(every) % 2)
        replayed[token] = len(resumed_events)
    assert replayed[dropped_token] >= 6

    # The session lives on where the client now is.
    tools = await raw.request(survivor.url, session, "tools/list")
    assert "countdown" in {tool["name"] for tool in tools["tools"]}


# -- subscriptions -----------------------------------------------------------------------------


# The handshake-era revisions this server speaks still have resources/subscribe.
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed:mcp.MCPDeprecationWarning")
async def test_resource_updated_goes_only_to_the_subscribed_session(deployment: Deployment) -> None:
    uri = f"live://runs/{secrets.randbelow(10**9) + 10**9}"
    async with (
        sdk_session(deployment.p1.url) as (subscriber, subscriber_inbox),
        sdk_session(deployment.p2.url) as (other, other_inbox),
    ):
        await wait_for_standalone_stream(subscriber, subscriber_inbox)
        await wait_for_standalone_stream(other, other_inbox)
        await subscriber.subscribe_resource(uri)
        marks = subscriber_inbox.mark(), other_inbox.mark()

        out = await deployment.amanage("announce_change", "--resource", uri)
        assert f"for {uri} sent to 1 subscribed session(s)" in out
        # A change every session hears, as a marker: whatever resources/updated a session
        # was sent is stored before it on the same stream, so it arrives first.
        result = await other.call_tool("announce_list_changed", {"kind": "resources"})
        assert result.structured_content["sessions"] >= 2

        is_list_changed = lambda n: isinstance(n, mcp.types.ResourceListChangedNotification)  # noqa: E731
        await subscriber_inbox.wait_for(is_list_changed, since=marks[0])
        await other_inbox.wait_for(is_list_changed, since=marks[1])
        probes = (mcp.types.PromptListChangedNotification,)
        got = subscriber_inbox.since(marks[0], ignore=probes)
        assert [type(n).__name__ for n in got] == [
            "ResourceUpdatedNotification",
            "ResourceListChangedNotification",
        ]
        assert str(got[0].params.uri) == uri
        assert [type(n).__name__ for n in other_inbox.since(marks[1], ignore=probes)] == [
            "ResourceListChangedNotification"
        ]


# -- the SDK behind a balancer ------------------------------------------------------------------


async def test_sdk_client_with_answers_and_cancels_routed_to_the_other_process(
    deployment: Deployment,
) -> None:
    """Requests go to process 1; answers to the server, notifications and the GET stream to
    process 2, as a load balancer might send them."""
    balancer = SplitTransport(deployment.p1.port, deployment.p2.port)
    async with sdk_session(
        deployment.p1.url, transport=balancer, elicitation=accept_reservation("via the SDK")
    ) as (session, inbox):
        await wait_for_standalone_stream(session, inbox)

        result = await session.call_tool("confirm_reservation", {"title": "Emma"})
        assert result.structured_content == {
            "title": "Emma",
            "action": "accept",
            "confirmed": True,
            "note": "via the SDK",
        }
        assert ("response", deployment.p2.port) in balancer.routes

        mark = inbox.mark()
        call = asyncio.get_running_loop().create_task(
            session.call_tool("long_task", {"seconds": 30})
        )
        started = await inbox.wait_for(
            lambda n: (
                isinstance(n, mcp.types.LoggingMessageNotification)
                and isinstance(n.params.data, dict)
                and "run" in n.params.data
            ),
            since=mark,
        )
        call.cancel()  # the SDK sends notifications/cancelled
        with pytest.raises(asyncio.CancelledError):
            await call
        run = await deployment.db.wait_task_run(started.params.data["run"])
        assert run["status"] == "cancelled"
        assert ("notifications/cancelled", deployment.p2.port) in balancer.routes
    assert {
        port for what, port in balancer.routes if what in ("GET", "notifications/initialized")
    } == {deployment.p2.port}
    assert {port for what, port in balancer.routes if what in ("initialize", "tools/call")} == {
        deployment.p1.port
    }
