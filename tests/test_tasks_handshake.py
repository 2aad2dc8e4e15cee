"""The 2025-11-25 form of tasks (SEP-1686), served to handshake-era sessions from the same rows
as the 2026-07-28 extension: in-process details. Every result is checked against that
revision's schema (the SDK's generated ``mcp_types`` models of 2025-11-25); the e2e and
multi-process tests drive a served site with real clients and a real worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import mcp_types._v2025_11_25 as schema
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from mcp_django.models import Task
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import JSONRPCErrorResponse, MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.polling import until
from tests.tasks_wire import reached_by
from tests.transport.conftest import mcp_settings

from .test_tasks import seen, task_site

pytestmark = pytest.mark.django_db(transaction=True)

RELATED = "io.modelcontextprotocol/related-task"
ELICITING = {"elicitation": {"form": {}}}


@pytest.fixture
def site() -> Iterator[MCPSite]:
    seen.clear()
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, PAGE_SIZE=2):
        yield task_site()


def client_of(site: MCPSite, **options: Any) -> MCPTestClient:
    return MCPTestClient(MCPConsumer.as_asgi(site=site), **options)


@pytest.fixture
async def client(site: MCPSite) -> MCPTestClient:
    client = client_of(site)
    await client.initialize(capabilities=ELICITING)
    return client


async def create(client: MCPTestClient, name: str, **params: Any) -> dict[str, Any]:
    params.setdefault("arguments", {})
    result = await client.call("tools/call", {"name": name, "task": {}, **params})
    created = schema.CreateTaskResult.model_validate(result)
    assert created.task.status == "working"
    return result


async def get(client: MCPTestClient, task_id: str) -> dict[str, Any]:
    result = await client.call("tasks/get", {"taskId": task_id})
    schema.GetTaskResult.model_validate(result)
    assert RELATED not in (result.get("_meta") or {})  # the spec: not on tasks/get
    return result


async def reached(client: MCPTestClient, task_id: str, *statuses: str) -> dict[str, Any]:
    """tasks/get in this session until the task's status is one of ``statuses`` (bounded)."""
    return await reached_by(lambda: get(client, task_id), task_id, statuses)


def error_of(exc: pytest.ExceptionInfo[JSONRPCErrorResponse]) -> dict[str, Any]:
    return dict(exc.value.response["error"])


# -- negotiation ---------------------------------------------------------------------------------


async def test_a_2025_11_25_session_is_offered_tasks_and_older_revisions_are_not(site):
    client = client_of(site)
    result = await client.initialize()
    assert result["capabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    schema.InitializeResult.model_validate(result)
    older = client_of(site)
    assert "tasks" not in (await older.initialize(protocol_version="2025-06-18"))["capabilities"]
    with pytest.raises(JSONRPCErrorResponse) as refused:
        await older.call("tasks/get", {"taskId": "x"})
    assert error_of(refused)["code"] == -32601


async def test_a_site_without_task_tools_offers_no_tasks_capability():
    mcp = MCPSite(name="no-task-tools")

    @mcp.tool()
    def plain() -> str:
        return "plain"

    client = client_of(mcp)
    assert "tasks" not in (await client.initialize())["capabilities"]
    with pytest.raises(JSONRPCErrorResponse) as refused:
        await client.call("tasks/list")
    assert error_of(refused)["code"] == -32601


async def test_the_tools_task_support_is_kept_with_minus_32601_for_calls_that_break_it(client):
    with pytest.raises(JSONRPCErrorResponse) as forbidden:
        await client.call("tools/call", {"name": "plain", "arguments": {}, "task": {}})
    assert error_of(forbidden)["code"] == -32601
    with pytest.raises(JSONRPCErrorResponse) as required:
        await client.call("tools/call", {"name": "broken", "arguments": {}})
    assert error_of(required)["code"] == -32601
    assert "params.task" in error_of(required)["message"]
    with pytest.raises(JSONRPCErrorResponse) as malformed:
        await client.call("tools/call", {"name": "count", "arguments": {}, "task": {"ttl": -1}})
    assert error_of(malformed)["code"] == -32602
    assert await Task.objects.acount() == 0


# -- the lifecycle -------------------------------------------------------------------------------


async def test_a_task_call_answers_at_once_and_tasks_result_returns_the_calls_result(client):
    created = await create(client, "count", arguments={"upto": 3}, task={"ttl": 60_000})
    task = created["task"]
    assert task["ttl"] == 60_000 and task["pollInterval"] == 50
    assert "io.modelcontextprotocol/model-immediate-response" in created["_meta"]
    result = await client.call("tasks/result", {"taskId": task["taskId"]})
    schema.CallToolResult.model_validate(result)
    assert result["content"] == [{"type": "text", "text": "counted to 3"}]
    assert result["_meta"][RELATED] == {"taskId": task["taskId"]}
    done = await get(client, task["taskId"])
    assert done["status"] == "completed" and done["createdAt"] == task["createdAt"]
    # The same row the 2026-07-28 extension serves: its session is kept with it.
    row = await Task.objects.aget(pk=task["taskId"])
    assert row.session_id == client.session_id and row.ttl_ms == 60_000


async def test_the_requested_ttl_is_held_to_task_ttl_ms(client):
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, TASK_TTL_MS=1_000):
        task = (await create(client, "count", task={"ttl": 10**12}))["task"]
        assert task["ttl"] == 1_000
        assert (await create(client, "count"))["task"]["ttl"] == 1_000


async def test_a_tool_error_ends_the_task_failed_and_tasks_result_returns_the_error_result(client):
    task_id = (await create(client, "broken"))["task"]["taskId"]
    result = await client.call("tasks/result", {"taskId": task_id})
    assert result["isError"] is True and result["content"][0]["text"] == "no luck"
    failed = await get(client, task_id)
    assert failed["status"] == "failed"  # SEP-1686: isError ends the task failed


async def test_a_protocol_error_is_what_tasks_result_answers(client):
    task_id = (await create(client, "crashed"))["task"]["taskId"]
    with pytest.raises(JSONRPCErrorResponse) as failed:
        await client.call("tasks/result", {"taskId": task_id})
    assert error_of(failed) == {"code": -32603, "message": "the backing service is down"}
    task = await get(client, task_id)
    assert task["status"] == "failed" and task["statusMessage"] == "the backing service is down"


async def test_tasks_result_relays_the_tasks_questions_on_its_stream(site):
    asked: list[dict[str, Any]] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"ok": True}}

    client = client_of(site, request_handlers={"elicitation/create": answer})
    await client.initialize(capabilities=ELICITING)
    task_id = (await create(client, "ask"))["task"]["taskId"]
    waiting = await reached(client, task_id, "input_required")
    assert "inputRequests" not in waiting  # that is the 2026-07-28 extension's field
    result = await client.call("tasks/result", {"taskId": task_id})
    assert result["content"][0]["text"] == "first={'ok': True}, second={'ok': True}"
    assert sorted(p["message"] for p in asked) == ["First?", "Second?"]
    assert all(p["_meta"][RELATED] == {"taskId": task_id} for p in asked)
    assert client.last_response is not None and client.last_response.is_sse


async def test_a_question_the_client_refuses_fails_the_task(client):
    # The client has no handler for elicitation/create: it answers -32601.
    task_id = (await create(client, "ask"))["task"]["taskId"]
    await reached(client, task_id, "input_required")
    with pytest.raises(JSONRPCErrorResponse) as failed:
        await client.call("tasks/result", {"taskId": task_id})
    assert "refused elicitation/create" in error_of(failed)["message"]
    assert (await get(client, task_id))["status"] == "failed"


async def test_tasks_cancel_returns_the_cancelled_task_and_refuses_an_ended_one(client):
    task_id = (await create(client, "sleepy"))["task"]["taskId"]
    await until(lambda: seen.get("sleepy") == "started", failure="sleepy never started")
    cancelled = await client.call("tasks/cancel", {"taskId": task_id})
    schema.CancelTaskResult.model_validate(cancelled)
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task_id
    await until(lambda: seen.get("sleepy") == "stopped", failure="sleepy was never stopped")
    with pytest.raises(JSONRPCErrorResponse) as again:
        await client.call("tasks/cancel", {"taskId": task_id})
    assert error_of(again) == {
        "code": -32602,
        "message": "Cannot cancel task: already in terminal status 'cancelled'",
    }
    with pytest.raises(JSONRPCErrorResponse) as result:
        await client.call("tasks/result", {"taskId": task_id})
    assert error_of(result)["code"] == -32603


async def test_status_changes_are_notified_to_the_session(site):
    client = client_of(site)
    await client.initialize(capabilities=ELICITING)
    async with await client.open_stream() as stream:
        task_id = (await create(client, "count", arguments={"upto": 1}))["task"]["taskId"]
        message = await stream.next_message(timeout=5)
    assert message["method"] == "notifications/tasks/status"
    schema.TaskStatusNotification.model_validate(message)
    assert message["params"]["taskId"] == task_id and message["params"]["status"] == "completed"
    assert "_meta" not in message["params"]


# -- tasks/list and who sees what -----------------------------------------------------------


async def test_tasks_list_pages_through_the_callers_tasks_newest_first(client):
    made = [(await create(client, "count", arguments={"upto": 1}))["task"]["taskId"] for _ in "abc"]
    first = await client.call("tasks/list")
    schema.ListTasksResult.model_validate(first)
    assert len(first["tasks"]) == 2 and "nextCursor" in first
    second = await client.call("tasks/list", {"cursor": first["nextCursor"]})
    assert "nextCursor" not in second
    listed = [t["taskId"] for t in first["tasks"] + second["tasks"]]
    assert sorted(listed) == sorted(made) and len(set(listed)) == 3
    with pytest.raises(JSONRPCErrorResponse) as bad:
        await client.call("tasks/list", {"cursor": "not-a-cursor"})
    assert error_of(bad)["code"] == -32602


async def test_another_sessions_tasks_are_unknown_to_an_anonymous_caller(site, client):
    task_id = (await create(client, "sleepy"))["task"]["taskId"]
    other = client_of(site)
    await other.initialize()
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        with pytest.raises(JSONRPCErrorResponse) as unknown:
            await other.call(method, {"taskId": task_id})
        assert error_of(unknown) == {
            "code": -32602,
            "message": "Failed to retrieve task: Task not found",
        }, method
    assert (await other.call("tasks/list"))["tasks"] == []
    assert (await get(client, task_id))["status"] == "working"
    await client.call("tasks/cancel", {"taskId": task_id})


async def test_a_users_tasks_are_listed_to_them_in_every_session_and_to_nobody_else(site):
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, AUTHENTICATION="django"):
        await users_tasks(site)


async def users_tasks(site: MCPSite) -> None:
    User = get_user_model()
    alice = await sync_to_async(User.objects.create_user)("alice-tasks")
    bob = await sync_to_async(User.objects.create_user)("bob-tasks")
    first, again, stranger = client_of(site), client_of(site), client_of(site)
    for client, user in ((first, alice), (again, alice), (stranger, bob)):
        await client.force_login(user)
        await client.initialize()
    task_id = (await create(first, "count", arguments={"upto": 1}))["task"]["taskId"]
    await asyncio.wait_for(first.call("tasks/result", {"taskId": task_id}), 5)
    assert [t["taskId"] for t in (await again.call("tasks/list"))["tasks"]] == [task_id]
    assert (await again.call("tasks/result", {"taskId": task_id}))["content"]
    assert (await stranger.call("tasks/list"))["tasks"] == []
    with pytest.raises(JSONRPCErrorResponse):
        await stranger.call("tasks/get", {"taskId": task_id})


async def test_a_prelude_asks_once_and_the_task_replays_its_answer(site):
    """A task tool with prelude=True asks in the request, on the call's stream; the task runs
    the tool again from its first line with that answer, without asking the user again (a
    session has no request state: the answers go with the task, as 2026-07-28 rounds' do)."""
    asked: list[str] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {"name": "Ada"}}

    client = client_of(site, request_handlers={"elicitation/create": answer})
    await client.initialize(capabilities=ELICITING)
    task_id = (await create(client, "named"))["task"]["taskId"]
    done = await reached(client, task_id, "completed")
    assert done["status"] == "completed"
    result = await client.call("tasks/result", {"taskId": task_id})
    assert result["content"][0]["text"] == "hello Ada"
    assert asked == ["Name?"]
    assert seen["named_runs"] == ["prelude", "task"]
