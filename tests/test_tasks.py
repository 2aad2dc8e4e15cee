"""Durable tasks (2026-07-28, the io.modelcontextprotocol/tasks extension), in-process: the wire,
the row, the runner in this loop (the embedded default), and what a task keeps to itself."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from mcp_django import Context, ToolError
from mcp_django.exceptions import InternalError
from mcp_django.extensions.tasks import runner as taskrun
from mcp_django.models import Task, ToolCall
from mcp_django.ops import audit
from mcp_django.ops.quotas import limits as quotas
from mcp_django.protocol.errors import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    QUOTA_EXCEEDED,
)
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.polling import until
from tests.tasks_wire import reached_by
from tests.transport.conftest import mcp_settings
from tests.transport.test_stateless import body, headers

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
WITH_TASKS = {"elicitation": {"form": {}}, **TASKS}
ASK_OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

#: What the tools of the test site saw, by name.
seen: dict[str, Any] = {}


def task_site() -> MCPSite:
    mcp = MCPSite(name="tasks-test")

    @mcp.tool(task="optional")
    async def count(ctx: Context, upto: int = 3) -> str:
        for i in range(1, upto + 1):
            await ctx.report_progress(i, upto, f"{i} of {upto}")
        return f"counted to {upto}"

    @mcp.tool(task="optional")
    async def ask(ctx: Context) -> str:
        first, second = await asyncio.gather(
            ctx.elicit("First?", ASK_OK, key="first"), ctx.elicit("Second?", ASK_OK, key="second")
        )
        return f"first={first.content}, second={second.content}"

    @mcp.tool(task="optional")
    async def sleepy() -> str:
        seen["sleepy"] = "started"
        try:
            await asyncio.Event().wait()  # runs until cancelled
        except asyncio.CancelledError:
            seen["sleepy"] = "stopped"
            raise
        return "woke"

    @mcp.tool(task="required")
    def broken() -> str:
        raise ToolError("no luck")

    @mcp.tool(task="optional")
    def crashed() -> str:
        raise InternalError("the backing service is down")

    @mcp.tool(task="optional", sensitive=["pin"])
    def login(user: str, pin: str) -> str:
        return f"{user} in"

    @mcp.tool(task="required", prelude=True)
    async def named(ctx: Context) -> str:
        answer = await ctx.elicit(
            "Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name"
        )
        seen.setdefault("named_runs", []).append(ctx.task_phase)
        await ctx.start_task()
        return f"hello {(answer.content or {}).get('name')}"

    @mcp.tool()
    def plain() -> str:
        return "plain"

    return mcp


@pytest.fixture
def site() -> Iterator[MCPSite]:
    seen.clear()
    with mcp_settings(TASK_POLL_INTERVAL_MS=50):
        yield task_site()


@pytest.fixture
def client(site: MCPSite) -> MCPTestClient:
    return MCPTestClient(MCPConsumer.as_asgi(site=site))


async def send(
    client: MCPTestClient,
    method: str,
    params: dict[str, Any],
    *,
    capabilities: dict[str, Any] | None = None,
) -> Any:
    message = body(
        method, params, capabilities=WITH_TASKS if capabilities is None else capabilities
    )
    sent = headers(message)
    if method.startswith("tasks/"):
        sent["mcp-name"] = params.get("taskId")
    response = await client.post_raw(orjson.dumps(message), sent)
    return response.messages()[-1] if response.is_sse else response.json()


async def start(
    client: MCPTestClient, name: str, arguments: dict[str, Any] | None = None
) -> dict[str, Any]:
    answer = await send(client, "tools/call", {"name": name, "arguments": arguments or {}})
    result = answer["result"]
    assert result["resultType"] == "task", answer
    return dict(result)


async def get(client: MCPTestClient, task_id: str) -> dict[str, Any]:
    return dict((await send(client, "tasks/get", {"taskId": task_id}))["result"])


async def reached(client: MCPTestClient, task_id: str, *statuses: str) -> dict[str, Any]:
    """tasks/get until the task's status is one of ``statuses`` (a bounded wait)."""
    return await reached_by(lambda: get(client, task_id), task_id, statuses)


async def started(name: str) -> None:
    """Until the tool ``name`` runs (its runner, in this loop, has called it)."""
    await until(lambda: seen.get(name) == "started", failure=f"{name} never started")


def runner_of(task_id: str) -> asyncio.Task[None]:
    """The future of the runner of ``task_id`` in this loop: done once the runner has ended the
    task and given back what it held."""
    runner = taskrun._local[task_id]
    assert runner.future is not None
    return runner.future


# -- the wire ---------------------------------------------------------------------------------


async def test_discover_offers_the_extension_and_tools_declare_their_task_support(client):
    discovered = (await send(client, "server/discover", {}))["result"]
    assert discovered["capabilities"]["extensions"] == {"io.modelcontextprotocol/tasks": {}}
    assert "tasks" not in discovered["capabilities"]  # no v1-style slot
    tools = {t["name"]: t for t in (await send(client, "tools/list", {}))["result"]["tools"]}
    assert tools["count"]["execution"] == {"taskSupport": "optional"}
    assert tools["broken"]["execution"] == {"taskSupport": "required"}
    assert "execution" not in tools["plain"]


async def test_a_session_before_2025_11_25_lists_no_task_support_and_calls_tools_directly(client):
    await client.initialize(protocol_version="2025-06-18")
    tools = {t["name"]: t for t in (await client.call("tools/list"))["tools"]}
    assert "execution" not in tools["count"] and "execution" not in tools["broken"]
    # That revision has no tasks: params.task means nothing there.
    answer = await client.call(
        "tools/call", {"name": "count", "arguments": {"upto": 2}, "task": {}}
    )
    assert answer["content"][0]["text"] == "counted to 2"
    assert await Task.objects.acount() == 0


async def test_a_2025_11_25_session_without_params_task_calls_task_tools_directly(client):
    await client.initialize()
    tools = {t["name"]: t for t in (await client.call("tools/list"))["tools"]}
    assert tools["count"]["execution"] == {"taskSupport": "optional"}
    assert (await client.call_tool("count", {"upto": 2}))["content"][0]["text"] == "counted to 2"
    assert await Task.objects.acount() == 0


async def test_a_site_without_task_tools_offers_no_extension_and_no_tasks_methods():
    mcp = MCPSite(name="no-tasks")

    @mcp.tool()
    def plain() -> str:
        return "plain"

    client = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    discovered = (await send(client, "server/discover", {}))["result"]
    assert "extensions" not in discovered["capabilities"]
    answer = await send(client, "tasks/get", {"taskId": "x"})
    assert answer["error"]["code"] == -32601


async def test_a_task_is_created_flat_found_at_once_and_inlines_its_result(client):
    created = await start(client, "count", {"upto": 3})
    assert set(created) >= {
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
    }
    assert not {
        "task",
        "result",
        "error",
        "inputRequests",
        "requestState",
        "ttl",
        "pollInterval",
    } & set(created)
    assert (
        created["status"] == "working"
        and created["ttlMs"] == 86_400_000
        and created["pollIntervalMs"] == 50
    )
    first = await get(client, created["taskId"])  # durably created before the answer
    assert first["taskId"] == created["taskId"] and first["resultType"] == "complete"
    done = await reached(client, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "counted to 3"
    assert "io.modelcontextprotocol/related-task" not in done["result"].get("_meta", {})
    row = await Task.objects.aget(pk=created["taskId"])
    assert row.progress == 3 and row.total == 3 and row.status_message == "3 of 3"
    assert row.started_at is not None and row.finished_at is not None and row.worker


async def test_the_audit_row_of_the_call_names_its_task(client):
    created = await start(client, "count", {"upto": 1})
    await reached(client, created["taskId"], "completed")
    await audit.aflush()
    call = await ToolCall.objects.aget(task_id=created["taskId"])
    assert call.outcome == ToolCall.Outcome.TASK and call.tool_name == "count"


async def test_without_the_extension_an_optional_tool_answers_directly_and_a_required_one_is_refused(
    client,
):
    direct = await send(
        client, "tools/call", {"name": "count", "arguments": {"upto": 1}}, capabilities={}
    )
    assert (
        direct["result"]["content"][0]["text"] == "counted to 1"
        and direct["result"]["resultType"] == "complete"
    )
    refused = await send(client, "tools/call", {"name": "broken", "arguments": {}}, capabilities={})
    assert refused["error"]["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused["error"]["data"] == {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }
    for method, params in (
        ("tasks/get", {"taskId": "x"}),
        ("tasks/update", {"taskId": "x", "inputResponses": {}}),
        ("tasks/cancel", {"taskId": "x"}),
    ):
        answer = await send(client, method, params, capabilities={})
        assert answer["error"]["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY, method
    assert await Task.objects.acount() == 0


@pytest.mark.parametrize("task_id", ["nope", "x" * 65, "../../etc"])
async def test_an_unknown_or_malformed_task_id_is_invalid_params(client, task_id):
    answer = await send(client, "tasks/get", {"taskId": task_id})
    assert answer["error"]["code"] == INVALID_PARAMS


async def test_a_mismatched_mcp_name_header_is_refused(client):
    created = await start(client, "sleepy")
    message = body("tasks/get", {"taskId": created["taskId"]}, capabilities=WITH_TASKS)
    response = await client.post_raw(
        orjson.dumps(message), {**headers(message), "mcp-name": "another-task"}
    )
    assert response.status == 400 and response.json()["error"]["code"] == -32020
    await send(client, "tasks/cancel", {"taskId": created["taskId"]})


# -- questions, errors, cancellation ----------------------------------------------------------


async def test_questions_go_input_required_and_tasks_update_answers_them_one_by_one(client):
    created = await start(client, "ask")
    waiting = await reached(client, created["taskId"], "input_required")
    for _ in range(50):  # the two questions reach the row one after the other
        if len(waiting["inputRequests"]) == 2:
            break
        waiting = await get(client, created["taskId"])
    assert set(waiting["inputRequests"]) == {"first", "second"}
    assert waiting["inputRequests"]["first"]["method"] == "elicitation/create"
    ack = await send(
        client,
        "tasks/update",
        {
            "taskId": created["taskId"],
            "inputResponses": {
                "first": {"action": "accept", "content": {"ok": True}},
                "never-asked": {"action": "accept"},
            },
        },
    )
    assert ack["result"]["resultType"] == "complete" and not {"taskId", "status"} & set(
        ack["result"]
    )
    still = await get(client, created["taskId"])
    assert still["status"] == "input_required" and list(still["inputRequests"]) == ["second"]
    await send(
        client,
        "tasks/update",
        {
            "taskId": created["taskId"],
            "inputResponses": {"second": {"action": "accept", "content": {"ok": False}}},
        },
    )
    done = await reached(client, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "first={'ok': True}, second={'ok': False}"


async def test_a_tool_error_completes_and_a_protocol_error_fails(client):
    broken = await start(client, "broken")
    done = await reached(client, broken["taskId"], "completed", "failed")
    assert (
        done["status"] == "completed" and done["result"]["isError"] is True and "error" not in done
    )
    crashed = await start(client, "crashed")
    failed = await reached(client, crashed["taskId"], "completed", "failed")
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"] == {"code": -32603, "message": "the backing service is down"}
    assert failed["statusMessage"] == "the backing service is down"


async def test_cancel_stops_the_work_and_is_idempotent(client):
    created = await start(client, "sleepy")
    runner = runner_of(created["taskId"])
    await started("sleepy")
    ack = await send(client, "tasks/cancel", {"taskId": created["taskId"]})
    assert ack["result"] == {"resultType": "complete", "_meta": ack["result"]["_meta"]}
    assert (await get(client, created["taskId"]))["status"] == "cancelled"
    await asyncio.wait_for(runner, 10)
    assert seen["sleepy"] == "stopped"
    again = await send(client, "tasks/cancel", {"taskId": created["taskId"]})
    assert "error" not in again
    assert (await get(client, created["taskId"]))[
        "status"
    ] == "cancelled"  # the runner did not overwrite it


async def test_a_prelude_asks_in_the_request_then_the_task_replays_it_with_the_answers(client):
    first = await send(client, "tools/call", {"name": "named", "arguments": {}})
    assert first["result"]["resultType"] == "input_required" and "taskId" not in first["result"]
    assert list(first["result"]["inputRequests"]) == ["name"]
    second = await send(
        client,
        "tools/call",
        {
            "name": "named",
            "arguments": {},
            "requestState": first["result"]["requestState"],
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
        },
    )
    created = second["result"]
    assert (
        created["resultType"] == "task"
        and "requestState" not in created
        and "inputRequests" not in created
    )
    done = await reached(client, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "hello Ada"
    assert seen["named_runs"] == ["prelude", "task"]


# -- what a task keeps to itself ----------------------------------------------------------------


async def test_sensitive_arguments_are_never_stored_in_clear(client):
    created = await start(client, "login", {"user": "ada", "pin": "4711-secret"})
    await reached(client, created["taskId"], "completed")
    row = await Task.objects.aget(pk=created["taskId"])
    assert row.arguments == {"user": "ada", "pin": "[redacted]"}
    assert (
        "4711-secret" not in row.payload
        and "4711-secret" not in orjson.dumps(await sync_to_async(_row_values)(row.pk)).decode()
    )


def _row_values(pk: str) -> list[Any]:
    return list(Task.objects.filter(pk=pk).values_list())


async def test_a_task_whose_process_stopped_beating_fails_on_read(client):
    created = await start(client, "sleepy")
    runner = runner_of(created["taskId"])
    await started("sleepy")  # claimed and beating: its last beat is what goes stale
    await Task.objects.filter(pk=created["taskId"]).aupdate(
        heartbeat_at=timezone.now() - timedelta(seconds=31)
    )
    failed = await get(client, created["taskId"])
    assert failed["status"] == "failed" and "no heartbeat" in failed["error"]["message"]
    await asyncio.wait_for(runner, 10)  # the runner sees the row ended and stops its work
    assert seen["sleepy"] == "stopped"


async def test_a_task_past_its_ttl_fails_on_read(client):
    created = await start(client, "sleepy")
    await Task.objects.filter(pk=created["taskId"]).aupdate(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    failed = await get(client, created["taskId"])
    assert failed["status"] == "failed" and "expired" in failed["error"]["message"]


async def test_live_tasks_are_capped_per_user(site, client):
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, QUOTAS={"LIVE_TASKS_PER_USER": 2}):
        ids = [(await start(client, "sleepy"))["taskId"] for _ in range(2)]
        refused = await send(client, "tools/call", {"name": "sleepy", "arguments": {}})
        assert (
            refused["error"]["code"] == QUOTA_EXCEEDED
            and refused["error"]["data"]["limit"] == "LIVE_TASKS_PER_USER"
        )
        await send(client, "tasks/cancel", {"taskId": ids[0]})
        third = await start(client, "sleepy")
        for task_id in (ids[1], third["taskId"]):
            await send(client, "tasks/cancel", {"taskId": task_id})


async def test_new_tasks_are_rate_limited_per_user_with_429_and_retry_after(client, monkeypatch):
    monkeypatch.setattr(
        quotas, "now", lambda: 60 * 28_000_000 + 15.0
    )  # 45 s before the window ends
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, QUOTAS={"NEW_TASKS_PER_USER": "2/minute"}):
        for _ in range(2):
            await start(client, "count")
        message = body("tools/call", {"name": "count", "arguments": {}}, capabilities=WITH_TASKS)
        refused = await client.post_raw(orjson.dumps(message), headers(message))

        assert refused.status == 429 and refused.headers["retry-after"] == "45"
        error = refused.json()["error"]
        assert error["code"] == QUOTA_EXCEEDED
        assert error["data"] == {
            "limit": "NEW_TASKS_PER_USER",
            "retryAfter": 45,
            "rate": "2/minute",
        }
        assert await Task.objects.acount() == 2
        # Calls that make no task go on.
        plain = await send(client, "tools/call", {"name": "plain", "arguments": {}})
        assert plain["result"]["content"][0]["text"] == "plain"


async def test_a_listen_stream_follows_the_tasks_it_names(client):
    created = await start(client, "ask")
    listen = body(
        "subscriptions/listen",
        {"notifications": {"taskIds": [created["taskId"], "not-mine"]}},
        capabilities=WITH_TASKS,
    )
    async with await client.post_stream(listen, headers(listen)) as stream:
        acknowledged = await stream.next_message()
        assert acknowledged["params"]["notifications"]["taskIds"] == [created["taskId"]]
        await reached(client, created["taskId"], "input_required")
        answers = {
            key: {"action": "accept", "content": {"ok": True}} for key in ("first", "second")
        }
        await send(client, "tasks/update", {"taskId": created["taskId"], "inputResponses": answers})
        # Each change is told (the questions may have been asked before the stream listened):
        # the last one carries the whole task, its result inlined as tasks/get would.
        for _ in range(10):
            note = await stream.next_message(timeout=5)
            assert (
                note["method"] == "notifications/tasks"
                and note["params"]["taskId"] == created["taskId"]
            )
            if note["params"]["status"] == "completed":
                break
        assert (
            note["params"]["result"]["content"][0]["text"]
            == "first={'ok': True}, second={'ok': True}"
        )


async def test_a_listen_stream_asking_for_tasks_without_the_extension_is_refused(client):
    listen = body("subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, capabilities={})
    response = await client.post_raw(orjson.dumps(listen), headers(listen))
    assert response.json()["error"]["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_a_task_that_cannot_be_enqueued_is_failed_and_the_call_answers_an_internal_error(
    client,
):
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, TASKS_BACKEND="missing-alias"):
        answer = await send(client, "tools/call", {"name": "count", "arguments": {}})
    assert (
        answer["error"]["code"] == -32603 and "could not be started" in answer["error"]["message"]
    )
    row = await Task.objects.aget(tool_name="count")
    assert (
        row.status == Task.Status.FAILED and row.error["message"] == "The task could not be started"
    )


async def test_a_running_task_holds_one_of_the_users_running_slots(client):
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, QUOTAS={"RUNNING_PER_USER": 1}):
        created = await start(client, "sleepy")
        runner = runner_of(created["taskId"])
        await started("sleepy")
        refused = await send(client, "tools/call", {"name": "plain", "arguments": {}})
        assert (
            refused["error"]["code"] == QUOTA_EXCEEDED
            and refused["error"]["data"]["limit"] == "RUNNING_PER_USER"
        )
        await send(client, "tasks/cancel", {"taskId": created["taskId"]})
        await asyncio.wait_for(runner, 10)  # the runner gives its slot back as it ends
        assert seen["sleepy"] == "stopped"
        assert (await send(client, "tools/call", {"name": "plain", "arguments": {}}))["result"][
            "content"
        ][0]["text"] == "plain"
